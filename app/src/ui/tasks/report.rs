//! The Report view's jobs: a study's report (`front::report`) and the re-run of its best trial
//! with other seeds (`front::reseed`), each on its own thread.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tradetune_engine::front::report::study_report;
use tradetune_engine::front::reseed::{SeedSpread, reseed_until};
use tradetune_engine::storage::Storage;
use tradetune_engine::study::file::StudyFile;

use super::{Jobs, TaskEvent};

/// What a report was computed at: the study, the view's generation (opens and selections) and
/// the study's trial counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportKey {
    pub study: String,
    pub generation: u64,
    /// Trials read (any state), and COMPLETE ones among them.
    pub trials: usize,
    pub complete: usize,
}

/// What a re-run reports.
#[derive(Debug)]
pub enum ReseedMsg {
    /// Where the study file came from.
    Source(String),
    /// Seed `.0` of `.1` started.
    Progress(usize, usize),
    /// It ended for this study: the spread (stored with the study), or why not.
    Done(String, Result<SeedSpread, String>),
}

impl Jobs {
    /// Computes the report of `key.study` in the database `path` (PBO with `partitions`); the
    /// answer arrives as [`TaskEvent::Report`].
    pub fn study_report(&self, path: PathBuf, key: ReportKey, partitions: usize) {
        let asked = key.clone();
        let lost = move |why| TaskEvent::Report(asked, Err(why));
        self.spawn("report", lost, move |reply| {
            let label = crate::launch::db_label(&path);
            let result = Storage::open_read_only(&path)
                .map_err(|e| format!("{label}: {e}"))
                .and_then(|s| {
                    study_report(&s, &key.study, partitions).map_err(|e| format!("{label}: {e}"))
                })
                .map(Box::new);
            reply.send(TaskEvent::Report(key, result));
        });
    }

    /// Trains the best trial of `study` in `path` again with `seeds` other seeds and stores the
    /// spread with the study (`tradetune study reseed`), until `cancel` is set. Its study file is
    /// the one recorded in the database, else `draft` (the Configure panel's, when it describes
    /// the study). Reports as [`TaskEvent::Reseed`].
    pub fn reseed(
        &self,
        path: PathBuf,
        study: String,
        draft: Option<StudyFile>,
        seeds: usize,
        cancel: Arc<AtomicBool>,
    ) {
        let of = study.clone();
        let lost = move |why| TaskEvent::Reseed(ReseedMsg::Done(of, Err(why)));
        self.spawn("reseed", lost, move |reply| {
            let result = (|| -> Result<SeedSpread, String> {
                let label = crate::launch::db_label(&path);
                // The study file first, read-only: a database without one is left untouched.
                let (file, source) = Storage::open_read_only(&path)
                    .map_err(|e| format!("{label}: {e}"))
                    .and_then(|s| study_file(&s, &study, draft, &label))?;
                reply.send(TaskEvent::Reseed(ReseedMsg::Source(source)));
                let mut storage = Storage::open(&path).map_err(|e| format!("{label}: {e}"))?;
                reseed_until(
                    &mut storage,
                    &file,
                    seeds,
                    |k, n| reply.send(TaskEvent::Reseed(ReseedMsg::Progress(k, n))),
                    &cancel,
                )
                .map_err(|e| format!("re-running study {study}'s best trial: {e}"))
            })();
            reply.send(TaskEvent::Reseed(ReseedMsg::Done(study, result)));
        });
    }
}

/// The study file of `study`: the one recorded with it (whichever front end ran it: its
/// overrides applied, relative data paths against the recorded file's folder where that file
/// is here, else the current directory), else `draft`; with where it came from. Without
/// either, says what is missing.
pub fn study_file(
    storage: &Storage,
    study: &str,
    draft: Option<StudyFile>,
    label: &str,
) -> Result<(StudyFile, String), String> {
    if let Some(found) = tradetune_engine::front::reseed::recorded_study_file(storage, study)
        .map_err(|e| format!("{label}: {e}"))?
    {
        return Ok(found);
    }
    match draft {
        Some(file) => Ok((
            file,
            "the Configure panel's (its data and split must be the ones the study ran on)".into(),
        )),
        None => Err(format!(
            "study {study} has no recorded study file (it was run before studies were recorded, \
             or by another program) and the Configure panel describes another study: open the \
             study's file or preset in Configure, or run `tradetune study reseed FILE --db {label}`"
        )),
    }
}
