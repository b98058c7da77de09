//! A live study's job: the open database read again, only what changed (like
//! optuna-dashboard's `after` cursor): per study, the trials above the largest trial id the
//! table holds and those it holds as RUNNING or WAITING ([`Storage::trials_since`]), with the
//! study list's counts.

use std::path::{Path, PathBuf};

use tradetune_engine::storage::{Storage, StudySummary};

use super::rows::TrialRow;
use super::{Jobs, TaskEvent};

/// What an incremental read asks for: per member study of the selected group, the largest
/// trial id held and the ids held unfinished.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRequest {
    /// The Studies panel's generation when asked (its opens and selections).
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

impl Jobs {
    /// Reads what changed in the open study since the rows the table holds; the answer
    /// arrives as [`TaskEvent::Polled`].
    pub fn poll_trials(&self, path: PathBuf, request: LiveRequest) {
        let generation = request.generation;
        let studies: Vec<String> = request.studies.iter().map(|s| s.0.clone()).collect();
        let lost = move |why| {
            TaskEvent::Polled(Box::new(Polled {
                generation,
                studies,
                result: Err(why),
            }))
        };
        self.spawn("poll trials", lost, move |reply| {
            let polled = read(&path, request);
            reply.send(TaskEvent::Polled(Box::new(polled)));
        });
    }
}
