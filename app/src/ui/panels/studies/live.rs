//! A live study: the open database is read again on a timer, off the UI thread, and only what
//! changed comes back (like optuna-dashboard's `after` cursor): per study, the trials above the
//! largest trial id the table holds and those it holds as RUNNING or WAITING
//! ([`Storage::trials_since`]), with the study list's counts.

use std::path::Path;
use std::time::Instant;

use tradetune_engine::storage::{Storage, StudySummary, TrialState};

use super::view::{StudiesView, TrialRow, aggregate};
use crate::ui::command::Cx;

/// What an incremental read asks for: per member study of the selected group, the largest
/// trial id held and the ids held unfinished.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRequest {
    /// The view's generation when asked (see [`StudiesView::generation`]).
    pub generation: u64,
    /// (study, largest trial id held, trial ids held as RUNNING or WAITING).
    pub studies: Vec<(String, i64, Vec<i64>)>,
}

/// What an incremental read found.
#[derive(Debug)]
pub struct Polled {
    /// The generation it was asked in.
    pub generation: u64,
    /// The studies whose trials were read.
    pub studies: Vec<String>,
    /// Every study's counts, and the changed trials of the ones asked for; or why not.
    pub result: Result<(Vec<StudySummary>, Vec<TrialRow>), String>,
}

/// The request for the view's open database and selected group.
pub fn request(view: &StudiesView) -> LiveRequest {
    let studies = view
        .selected_members()
        .unwrap_or_default()
        .iter()
        .map(|name| {
            let mine = view.rows.iter().filter(|r| &r.study == name);
            let after = mine.clone().map(|r| r.trial_id).max().unwrap_or(0);
            let again = mine
                .filter(|r| matches!(r.state, TrialState::Running | TrialState::Waiting))
                .map(|r| r.trial_id)
                .collect();
            (name.clone(), after, again)
        })
        .collect();
    LiveRequest {
        generation: view.generation,
        studies,
    }
}

/// Reads what `request` asks for from `path` (on a background thread).
pub fn read(path: &Path, request: LiveRequest) -> Polled {
    let studies: Vec<String> = request.studies.iter().map(|s| s.0.clone()).collect();
    let result = (|| {
        let storage = Storage::open_read_only(path)?;
        let summaries = storage.study_summaries()?;
        let mut rows = Vec::new();
        for (name, after, again) in &request.studies {
            let id = storage.study_id(name)?;
            rows.extend(
                storage
                    .trials_since(id, *after, again)?
                    .iter()
                    .map(|t| TrialRow::of(name, t)),
            );
        }
        Ok::<_, tradetune_engine::storage::StorageError>((summaries, rows))
    })()
    .map_err(|e| format!("{}: {e}", crate::launch::db_label(path)));
    Polled {
        generation: request.generation,
        studies,
        result,
    }
}

/// Whether the open study is due to be read again now.
pub fn due(view: &StudiesView) -> bool {
    view.live
        && view.source.is_some()
        && view.db.is_some()
        && !view.opening
        && !view.loading_trials
        && !view.polling
        && view
            .last_read
            .is_none_or(|t| t.elapsed() >= view.poll_every)
}

/// [`crate::ui::command::Command::RefreshTrials`]: reads what changed in the open database
/// (unless a read is in flight).
pub fn poll(cx: &mut Cx) {
    let view = &mut cx.state.studies;
    let Some(path) = view.source.clone() else {
        return;
    };
    if view.polling || view.opening || view.loading_trials {
        return;
    }
    view.polling = true;
    let request = request(view);
    cx.tasks.poll_trials(path, request);
}

/// An incremental read finished: the study list's counts and the changed trials are merged in
/// (dropped when another database or study was chosen meanwhile).
pub fn polled(cx: &mut Cx, polled: Polled) {
    let view = &mut cx.state.studies;
    if polled.generation != view.generation {
        return;
    }
    view.polling = false;
    view.last_read = Some(Instant::now());
    match polled.result {
        Ok((summaries, rows)) => {
            view.error = None;
            view.polls += 1;
            let groups = aggregate(&summaries);
            if groups != view.groups {
                view.groups = groups;
            }
            if let Some(db) = view.db.as_mut() {
                db.studies = summaries;
            }
            if view.selected_members() == Some(polled.studies.as_slice()) {
                view.merge(rows);
            }
            if let Some(name) = view.pending_select.clone()
                && view
                    .groups
                    .iter()
                    .any(|g| g.name == name || g.members.contains(&name))
            {
                view.pending_select = None;
                super::select(cx, &name);
            }
        }
        Err(e) => view.error = Some(e),
    }
}
