//! Notes on a study and on its trials, stored where optuna-dashboard keeps them, so a note
//! written in either tool shows in the other.
//!
//! optuna-dashboard (0.21, `optuna_dashboard/_note.py`) stores every note — the study's and
//! each trial's — in the *study's* system attributes:
//!
//! - `dashboard:note_ver` (study) or `dashboard:{trial_id}:note_ver` (trial): the note's
//!   version, an integer that every save increments; the dashboard's web API refuses a save
//!   whose version is not the stored one plus one (two people editing at once).
//! - `dashboard:note_str:{i}` or `dashboard:{trial_id}:note_str:{i}`, `i = 0, 1, …`: the
//!   Markdown body cut into pieces of at most 2045 characters (Python `str` length, i.e.
//!   Unicode code points), concatenated in order. A shorter new body blanks the pieces it no
//!   longer needs.
//!
//! `trial_id` is the storage's trial id (`trials.trial_id`), not the trial number.

use tradetune_storage::{JsonValue, Storage, StorageError, StudyRecord};

/// The longest piece of a note in one system attribute (optuna-dashboard's
/// `SYSTEM_ATTR_MAX_LENGTH`).
pub const PIECE_CHARS: usize = 2045;

/// A note and its version (0 and empty when none was ever saved).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Note {
    pub version: i64,
    pub body: String,
}

/// Why a note could not be read or saved.
#[derive(Debug, thiserror::Error)]
pub enum NoteError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("study `{study}` has no trial number {number}")]
    UnknownTrial { study: String, number: i64 },
    #[error(
        "the note was changed meanwhile (it is at version {stored}, this edit started from \
         version {expected}); reload it and edit again"
    )]
    Conflict { stored: i64, expected: i64 },
    #[error("system attribute `{key}`: {message}")]
    Corrupt { key: String, message: String },
}

/// The system attribute holding the version of the study's note (`None`) or of a trial's.
pub fn version_key(trial_id: Option<i64>) -> String {
    match trial_id {
        None => "dashboard:note_ver".to_owned(),
        Some(id) => format!("dashboard:{id}:note_ver"),
    }
}

/// The prefix of the system attributes holding the pieces of a note.
pub fn piece_prefix(trial_id: Option<i64>) -> String {
    match trial_id {
        None => "dashboard:note_str:".to_owned(),
        Some(id) => format!("dashboard:{id}:note_str:"),
    }
}

/// The note of the study (`trial_id` None) or of one of its trials, from the study's system
/// attributes (optuna-dashboard's `get_note_from_system_attrs`).
pub fn note_from_attrs(
    system_attrs: &[(String, JsonValue)],
    trial_id: Option<i64>,
) -> Result<Note, NoteError> {
    let get = |key: &str| system_attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let ver_key = version_key(trial_id);
    let Some(version) = get(&ver_key) else {
        return Ok(Note::default());
    };
    let version = match version {
        JsonValue::Int(v) => *v,
        JsonValue::Float(v) if v.fract() == 0.0 && v.abs() < 9e15 => *v as i64,
        JsonValue::Str(s) => s.trim().parse().map_err(|_| NoteError::Corrupt {
            key: ver_key.clone(),
            message: format!("not a version number: {s:?}"),
        })?,
        other => {
            return Err(NoteError::Corrupt {
                key: ver_key,
                message: format!("not a version number: {}", other.dumps()),
            });
        }
    };
    let prefix = piece_prefix(trial_id);
    let n = system_attrs
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .count();
    let mut body = String::new();
    for i in 0..n {
        let key = format!("{prefix}{i}");
        match get(&key) {
            Some(JsonValue::Str(s)) => body.push_str(s),
            Some(other) => {
                return Err(NoteError::Corrupt {
                    key,
                    message: format!("not a string: {}", other.dumps()),
                });
            }
            None => {
                return Err(NoteError::Corrupt {
                    key,
                    message: format!("missing: a note of {n} pieces lacks piece {i}"),
                });
            }
        }
    }
    Ok(Note { version, body })
}

/// The storage trial id of trial `number` of `study`.
fn trial_id(storage: &Storage, study: &StudyRecord, number: i64) -> Result<i64, NoteError> {
    storage
        .trials(study.study_id)?
        .iter()
        .find(|t| t.number == number)
        .map(|t| t.trial_id)
        .ok_or_else(|| NoteError::UnknownTrial {
            study: study.name.clone(),
            number,
        })
}

/// The note of the study named `study`, or of its trial number `trial`.
pub fn read_note(storage: &Storage, study: &str, trial: Option<i64>) -> Result<Note, NoteError> {
    let record = storage.study(study)?;
    let id = trial.map(|n| trial_id(storage, &record, n)).transpose()?;
    note_from_attrs(&record.system_attrs, id)
}

/// Saves `body` as the note of the study named `study` (or of its trial number `trial`) at the
/// next version, as optuna-dashboard's `save_note` does. With `expected`, the version the
/// edit started from, refuses with [`NoteError::Conflict`] when the stored note has moved on
/// (the dashboard's web API check). Returns the saved note.
pub fn save_note(
    storage: &mut Storage,
    study: &str,
    trial: Option<i64>,
    body: &str,
    expected: Option<i64>,
) -> Result<Note, NoteError> {
    let record = storage.study(study)?;
    let id = trial.map(|n| trial_id(storage, &record, n)).transpose()?;
    let stored = note_from_attrs(&record.system_attrs, id)?;
    if let Some(expected) = expected
        && expected != stored.version
    {
        return Err(NoteError::Conflict {
            stored: stored.version,
            expected,
        });
    }
    let version = stored.version + 1;
    let prefix = piece_prefix(id);
    let old_pieces = record
        .system_attrs
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .count();
    let chars: Vec<char> = body.chars().collect();
    let pieces: Vec<String> = chars
        .chunks(PIECE_CHARS)
        .map(|c| c.iter().collect())
        .collect();
    let study_id = record.study_id;
    storage.set_study_system_attr(study_id, &version_key(id), &JsonValue::Int(version))?;
    for (i, piece) in pieces.iter().enumerate() {
        storage.set_study_system_attr(
            study_id,
            &format!("{prefix}{i}"),
            &JsonValue::Str(piece.clone()),
        )?;
    }
    // Blank the pieces of a longer earlier note (optuna-dashboard keeps them, empty).
    for i in pieces.len()..old_pieces {
        storage.set_study_system_attr(
            study_id,
            &format!("{prefix}{i}"),
            &JsonValue::Str(String::new()),
        )?;
    }
    Ok(Note {
        version,
        body: body.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_storage::StudyDirection;

    #[test]
    fn notes_round_trip_in_pieces_with_versions() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Storage::open(dir.path().join("n.db")).unwrap();
        let study = s.create_study("s", &[StudyDirection::Minimize]).unwrap();
        let t = s.create_trial(study).unwrap();
        assert_eq!(read_note(&s, "s", None).unwrap(), Note::default());
        // 5000 characters, some of them several bytes: three pieces of ≤ 2045 characters.
        let long: String = "é€x".repeat(1667).chars().take(5000).collect();
        let n = save_note(&mut s, "s", Some(t.number), &long, None).unwrap();
        assert_eq!(n.version, 1);
        let attrs = s.study("s").unwrap().system_attrs;
        let pieces: Vec<&JsonValue> = attrs
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("dashboard:{}:note_str:", t.trial_id)))
            .map(|(_, v)| v)
            .collect();
        assert_eq!(pieces.len(), 3);
        assert!(matches!(pieces[0], JsonValue::Str(p) if p.chars().count() == 2045));
        assert_eq!(read_note(&s, "s", Some(t.number)).unwrap().body, long);
        // Shorter: the third piece is blanked, the version moves on.
        save_note(&mut s, "s", Some(t.number), "short", Some(1)).unwrap();
        let n = read_note(&s, "s", Some(t.number)).unwrap();
        assert_eq!((n.version, n.body.as_str()), (2, "short"));
        // An edit started from an old version is refused.
        let e = save_note(&mut s, "s", Some(t.number), "late", Some(1));
        assert!(
            matches!(
                e,
                Err(NoteError::Conflict {
                    stored: 2,
                    expected: 1
                })
            ),
            "{e:?}"
        );
        // The study note is separate.
        assert_eq!(read_note(&s, "s", None).unwrap(), Note::default());
        save_note(&mut s, "s", None, "# study", None).unwrap();
        assert_eq!(read_note(&s, "s", None).unwrap().body, "# study");
        assert!(matches!(
            read_note(&s, "s", Some(7)),
            Err(NoteError::UnknownTrial { number: 7, .. })
        ));
    }
}
