//! The study database's jobs: open one, read a study's trials as table rows, a trial's
//! learning curve, and export trials or telemetry as CSV.

use std::path::{Path, PathBuf};

use tradetune_engine::storage::{Storage, StudyRecord, StudySummary, TrialRecord};

use super::columns::{Curves, ReadRows};
use super::rows::{TrialColumn, TrialRow};
use super::{Jobs, TaskEvent};

/// A note saved (or not) by [`Jobs::save_note`]: which save, whose, in which database, and the
/// study read back (its system attributes hold the notes) or why not.
#[derive(Debug)]
pub struct NoteSaved {
    /// The save's serial (see [`crate::ui::panels::studies::Notes::saving`]): the Studies panel
    /// takes the answer only for the save it still waits for.
    pub serial: u64,
    /// The database written to.
    pub db: PathBuf,
    /// The study.
    pub study: String,
    /// The trial's number, or None for the study's note.
    pub trial: Option<i64>,
    /// The study as read back after the save, or why the note was not saved.
    pub result: Result<StudyRecord, String>,
}

/// One study database as opened.
#[derive(Debug, Clone)]
pub struct DbContents {
    /// The file.
    pub path: PathBuf,
    /// Every study with its counts.
    pub studies: Vec<StudySummary>,
}

impl Jobs {
    /// Opens a study database read-only and lists its studies (for the Studies panel's
    /// `generation`).
    pub fn open_database(&self, path: PathBuf, generation: u64) {
        let lost = move |why| TaskEvent::Database {
            generation,
            result: Err(why),
        };
        self.spawn("database", lost, move |reply| {
            let result = Storage::open_read_only(&path)
                .and_then(|s| s.study_summaries())
                .map(|studies| DbContents {
                    path: path.clone(),
                    studies,
                })
                .map_err(|e| format!("{}: {e}", crate::launch::db_label(&path)));
            reply.send(TaskEvent::Database { generation, result });
        });
    }

    /// Saves `text` as the note of `study` (of its trial numbered `trial`; None: the study's
    /// own) in `db`, refused where the note is no longer at `version` (another tool saved
    /// meanwhile), and reads the study back. A SQLite file that is no longer there is refused
    /// as the CLI's `study note` refuses it, rather than opened writable, which would make an
    /// empty database in its place. The answer arrives as [`TaskEvent::NoteSaved`].
    pub fn save_note(
        &self,
        serial: u64,
        db: PathBuf,
        study: String,
        trial: Option<i64>,
        text: String,
        version: i64,
    ) {
        let (asked_db, asked_study) = (db.clone(), study.clone());
        let lost = move |why| {
            TaskEvent::NoteSaved(Box::new(NoteSaved {
                serial,
                db: asked_db,
                study: asked_study,
                trial,
                result: Err(why),
            }))
        };
        self.spawn("note", lost, move |reply| {
            let result = write_note(&db, &study, trial, &text, version);
            reply.send(TaskEvent::NoteSaved(Box::new(NoteSaved {
                serial,
                db,
                study,
                trial,
                result,
            })));
        });
    }

    /// Reads the learning curve of trial `trial_id` (empty for a database Optuna wrote).
    pub fn load_curve(&self, path: PathBuf, trial_id: i64) {
        let lost = move |why| TaskEvent::Curve(trial_id, Err(why));
        self.spawn("learning curve", lost, move |reply| {
            let result = Storage::open_read_only(&path)
                .and_then(|s| s.learning_curve(trial_id))
                .map(|points| {
                    let mut by_metric = Curves::new();
                    for p in points {
                        by_metric
                            .entry(p.metric)
                            .or_default()
                            .push([p.env_steps as f64, p.value]);
                    }
                    by_metric
                })
                .map_err(|e| format!("{}: {e}", crate::launch::db_label(&path)));
            reply.send(TaskEvent::Curve(trial_id, result));
        });
    }

    /// Reads the trials of `studies` (one study, or the members of an aggregated group) and
    /// makes them into table rows here, off the UI thread: formatting 10,000 trials (each
    /// applied configuration pretty-printed) takes longer than a frame.
    /// Their columns are derived and they are sorted by `sort` here too (see [`ReadRows`]).
    /// `generation` is the Studies panel's when asked.
    pub fn load_trials(
        &self,
        path: PathBuf,
        studies: Vec<String>,
        sort: (TrialColumn, bool),
        generation: u64,
    ) {
        let asked = studies.clone();
        let lost = move |why| TaskEvent::Trials {
            generation,
            studies: asked,
            result: Err(why),
        };
        self.spawn("trials", lost, move |reply| {
            let result = read_trials(&path, &studies)
                .map(|trials| {
                    let rows = trials.iter().map(|(s, t)| TrialRow::of(s, t)).collect();
                    ReadRows::new(rows, &sort)
                })
                .map_err(|e| format!("{}: {e}", crate::launch::db_label(&path)));
            reply.send(TaskEvent::Trials {
                generation,
                studies,
                result,
            });
        });
    }

    /// Writes the trials of `studies` as CSV (Optuna's `trials_dataframe()` columns): one
    /// study to `out`; several (an aggregated group, whose parameters may differ) to one file
    /// each beside it, `out`'s stem followed by `-<study>`.
    pub fn export_trials(&self, db: PathBuf, studies: Vec<String>, out: PathBuf) {
        let to = out.clone();
        let lost = move |why| TaskEvent::Exported("trials", to, Err(why));
        self.spawn("export", lost, move |reply| {
            let result = if studies.len() == 1 {
                export_trials(&db, &studies[0], &out).map(|n| (n, vec![out.clone()]))
            } else {
                let stem = out
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "trials".into());
                each_file(&out, &stem, &studies).and_then(|files| {
                    let rows = files.iter().try_fold(0, |rows, (study, path)| {
                        export_trials(&db, study, path).map(|n| rows + n)
                    })?;
                    Ok((rows, files.into_iter().map(|(_, p)| p).collect()))
                })
            };
            reply.send(TaskEvent::Exported("trials", out, result));
        });
    }

    /// Writes the telemetry of `studies` as CSV, one row per sample (the columns of
    /// `tradetune study export --telemetry`); several studies to one file each, as trials.
    pub fn export_telemetry(&self, db: PathBuf, studies: Vec<String>, out: PathBuf) {
        let to = out.clone();
        let lost = move |why| TaskEvent::Exported("telemetry rows", to, Err(why));
        self.spawn("export", lost, move |reply| {
            let one = |study: &str, path: &Path| -> Result<usize, String> {
                let storage = Storage::open_read_only(&db)
                    .map_err(|e| format!("{}: {e}", crate::launch::db_label(&db)))?;
                let record = storage.study(study).map_err(|e| e.to_string())?;
                let trials = storage.trials(record.study_id).map_err(|e| e.to_string())?;
                tradetune_engine::front::export::export_telemetry(&storage, &trials, path)
                    .map(|out| out.rows)
                    .map_err(|e| format!("{}: {e}", record.name))
            };
            let result = if studies.len() == 1 {
                one(&studies[0], &out).map(|n| (n, vec![out.clone()]))
            } else {
                let stem = out
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "telemetry".into());
                each_file(&out, &stem, &studies).and_then(|files| {
                    let rows = files
                        .iter()
                        .try_fold(0, |rows, (study, path)| one(study, path).map(|n| rows + n))?;
                    Ok((rows, files.into_iter().map(|(_, p)| p).collect()))
                })
            };
            reply.send(TaskEvent::Exported("telemetry rows", out, result));
        });
    }
}

/// The files an export wrote, for its notice: the one, or those of a group's studies (in the
/// folder of the one asked for, `asked`, which was not written itself).
pub fn files_text(files: &[PathBuf], asked: &Path) -> String {
    match files {
        [] => asked.display().to_string(),
        [one] => one.display().to_string(),
        several => {
            let names: Vec<String> = several
                .iter()
                .map(|f| {
                    f.file_name()
                        .map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into())
                })
                .collect();
            let folder = asked.parent().map(Path::display);
            match folder {
                Some(d) if !d.to_string().is_empty() => format!("{} in {d}", names.join(", ")),
                _ => names.join(", "),
            }
        }
    }
}

/// The file each of `studies` is exported to: beside `out`, named `<stem>-<study>.csv` with
/// the study name made one path component ([`file_name_part`]); two studies whose names give
/// the same file are refused, rather than one export overwriting the other.
///
/// [`file_name_part`]: tradetune_engine::front::export::file_name_part
fn each_file(out: &Path, stem: &str, studies: &[String]) -> Result<Vec<(String, PathBuf)>, String> {
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for study in studies {
        let part = tradetune_engine::front::export::file_name_part(study);
        let path = out.with_file_name(format!("{stem}-{part}.csv"));
        if let Some((other, _)) = files.iter().find(|(_, p)| *p == path) {
            return Err(format!(
                "studies '{other}' and '{study}' would both be exported to {}",
                path.display()
            ));
        }
        files.push((study.clone(), path));
    }
    Ok(files)
}

fn write_note(
    db: &Path,
    study: &str,
    trial: Option<i64>,
    text: &str,
    version: i64,
) -> Result<StudyRecord, String> {
    let not_saved = |e: &dyn std::fmt::Display| format!("note not saved: {e}");
    crate::launch::require_db(db).map_err(|e| not_saved(&e))?;
    let label = crate::launch::db_label(db);
    let mut storage = Storage::open(db).map_err(|e| not_saved(&format!("{label}: {e}")))?;
    tradetune_engine::study::notes::save_note(&mut storage, study, trial, text, Some(version))
        .map_err(|e| not_saved(&e))?;
    storage
        .study(study)
        .map_err(|e| format!("the note was saved, but {label} could not be read back: {e}"))
}

fn read_trials(
    path: &Path,
    studies: &[String],
) -> Result<Vec<(String, TrialRecord)>, tradetune_engine::storage::StorageError> {
    let storage = Storage::open_read_only(path)?;
    let mut rows = Vec::new();
    for name in studies {
        let id = storage.study_id(name)?;
        rows.extend(storage.trials(id)?.into_iter().map(|t| (name.clone(), t)));
    }
    Ok(rows)
}

fn export_trials(db: &Path, study: &str, out: &Path) -> Result<usize, String> {
    let storage =
        Storage::open_read_only(db).map_err(|e| format!("{}: {e}", crate::launch::db_label(db)))?;
    let mut bytes = Vec::new();
    storage
        .export_csv(study, &mut bytes)
        .map_err(|e| format!("{study}: {e}"))?;
    // Whole or not at all: a failed write leaves a previous export as it was.
    tradetune_engine::front::export::write_whole(out, &bytes).map_err(|e| e.to_string())?;
    // Rows = lines minus the header; a quoted field never holds a newline in this export.
    Ok(bytes
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        .saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_study_is_exported_beside_the_file_asked_for() {
        let out = Path::new("/exports/trials.csv");
        let studies: Vec<String> = ["cpu", "../x", "/tmp/y", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let files = each_file(out, "trials", &studies).unwrap();
        for (study, path) in &files {
            assert_eq!(path.parent(), Some(Path::new("/exports")), "{study}");
        }
        assert_eq!(files[1].1, Path::new("/exports/trials-__x.csv"));
        let clash = vec!["a/b".to_string(), "a_b".to_string()];
        let e = each_file(out, "trials", &clash).unwrap_err();
        assert!(e.contains("'a/b' and 'a_b'"), "{e}");
    }
}
