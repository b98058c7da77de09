//! A live study: the open database is read again on a timer, off the UI thread, and only what
//! changed comes back (the job is [`crate::ui::tasks::live`]); merged here.

use std::time::{Duration, Instant};

use tradetune_engine::storage::TrialState;

use super::StudiesView;
use super::list::aggregate;
use crate::ui::context::{Command, Context};
use crate::ui::tasks::{LiveRequest, Polled};

/// How often the open study is read again while live.
pub const POLL_EVERY: Duration = Duration::from_secs(2);

/// The live reading's state.
#[derive(Debug, Clone)]
pub struct Live {
    /// Whether the open study is read again every [`Self::poll_every`] (trials that finished
    /// or started since).
    pub on: bool,
    /// How often a live study is read again.
    pub poll_every: Duration,
    /// When the last read (full or incremental) ended.
    pub last_read: Option<Instant>,
    /// Whether an incremental read is in flight.
    pub polling: bool,
    /// Incremental reads merged so far (each one reads only what changed).
    pub polls: u64,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            on: true,
            poll_every: POLL_EVERY,
            last_read: None,
            polling: false,
            polls: 0,
        }
    }
}

impl Live {
    /// What another database keeps: whether live, and how often.
    pub fn keeping(&self) -> Live {
        Live {
            on: self.on,
            poll_every: self.poll_every,
            ..Live::default()
        }
    }
}

/// The request for the view's open database and selected group.
pub fn request(view: &StudiesView) -> LiveRequest {
    let studies = view
        .selected_members()
        .unwrap_or_default()
        .iter()
        .map(|name| {
            let mine = view.table.rows.iter().filter(|r| &r.study == name);
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

/// Whether the open study is due to be read again now.
pub fn due(view: &StudiesView) -> bool {
    let live = &view.live;
    live.on
        && view.source.is_some()
        && view.db.is_some()
        && !view.opening
        && !view.table.loading
        && !live.polling
        && live
            .last_read
            .is_none_or(|t| t.elapsed() >= live.poll_every)
}

/// [`super::Action::RefreshTrials`]: reads what changed in the open database (unless a read
/// is in flight).
pub fn poll(view: &mut StudiesView, cx: &Context) {
    let Some(path) = view.source.clone() else {
        return;
    };
    if view.live.polling || view.opening || view.table.loading {
        return;
    }
    view.live.polling = true;
    let request = request(view);
    cx.jobs.poll_trials(path, request);
}

/// An incremental read finished: the study list's counts and the changed trials are merged in
/// (dropped when another database or study was chosen meanwhile).
pub fn polled(view: &mut StudiesView, cx: &Context, polled: Polled, out: &mut Vec<Command>) {
    if polled.generation != view.generation {
        return;
    }
    view.live.polling = false;
    view.live.last_read = Some(Instant::now());
    match polled.result {
        Ok((summaries, rows)) => {
            view.error = None;
            view.live.polls += 1;
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
            view.select_pending(cx, out);
        }
        Err(e) => view.error = Some(e),
    }
}
