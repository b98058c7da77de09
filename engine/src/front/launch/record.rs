//! What is recorded with a study so that it can be run again, joined by workers or re-run:
//! its study file's text, where the text came from, the overrides laid over its `[fixed]`
//! values, and for a study created for workers its trial budget and its market data's
//! fingerprint. Stored as the study's system attributes (Optuna keeps them; other programs
//! ignore them).

use std::path::{Path, PathBuf};

use crate::front::FrontError;
use crate::storage::{JsonValue, Storage, StorageError, StudyDirection, StudyRecord};
use crate::study::file::StudyFile;
use crate::study::ppo_trial::parse_study_file;

/// The study system attributes of a [`RecordedStudy`].
pub mod keys {
    /// The study file's TOML text (a preset's text for a preset).
    pub const TOML: &str = "tradetune:study_toml";
    /// Where the text came from (`preset:NAME`, the file's path, or the app's Configure
    /// panel), for messages and to find relative data paths.
    pub const SOURCE: &str = "tradetune:study_source";
    /// The overrides of `[fixed]` values (`NAME=VALUE`), in order.
    pub const OVERRIDES: &str = "tradetune:overrides";
    /// The whole study's trial budget (a study created for workers).
    pub const BUDGET: &str = "tradetune:n_trials";
    /// The market data's fingerprint (`Dataset::fingerprint`, a study created for workers).
    pub const FINGERPRINT: &str = "tradetune:data_fingerprint";
}

/// A study's recorded study file.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedStudy {
    /// The study file's TOML text.
    pub text: String,
    /// Where it came from: `preset:NAME`, a file's full path, or a description.
    pub source: String,
    /// `NAME=VALUE` overrides of `[fixed]` values, applied in order over the text.
    pub overrides: Vec<String>,
    /// The study's whole trial budget, shared by its workers (`None`: not created for them).
    pub budget: Option<usize>,
    /// The fingerprint of the market data the study was created on.
    pub fingerprint: Option<String>,
}

impl RecordedStudy {
    /// The record of a stored study; `None` when no study file was recorded with it (a study
    /// Optuna wrote, or one run before studies were recorded).
    pub fn of(study: &StudyRecord) -> Option<RecordedStudy> {
        let attr = |key: &str| {
            study
                .system_attrs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
        };
        let Some(JsonValue::Str(text)) = attr(keys::TOML) else {
            return None;
        };
        let source = match attr(keys::SOURCE) {
            Some(JsonValue::Str(s)) => s.clone(),
            _ => format!("study {}", study.name),
        };
        let overrides = match attr(keys::OVERRIDES) {
            Some(JsonValue::Array(items)) => items
                .iter()
                .filter_map(|v| match v {
                    JsonValue::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let budget = match attr(keys::BUDGET) {
            Some(JsonValue::Int(n)) if *n > 0 => Some(*n as usize),
            _ => None,
        };
        let fingerprint = match attr(keys::FINGERPRINT) {
            Some(JsonValue::Str(f)) => Some(f.clone()),
            _ => None,
        };
        Some(RecordedStudy {
            text: text.clone(),
            source,
            overrides,
            budget,
            fingerprint,
        })
    }

    /// The folder of the recorded study file when that file is on this machine (where its
    /// relative data paths point), else `None`.
    pub fn source_dir(&self) -> Option<PathBuf> {
        let recorded = Path::new(&self.source);
        match recorded.parent() {
            Some(dir) if recorded.is_file() => Some(dir.to_path_buf()),
            _ => None,
        }
    }

    /// The recorded study as the study `name`: its text parsed, relative data paths against
    /// `data_dir`, the overrides applied.
    pub fn study_file(&self, name: &str, data_dir: &Path) -> Result<StudyFile, FrontError> {
        let mut file = parse_study_file(&self.text, &self.source)?;
        for p in &mut file.data.paths {
            if p.is_relative() {
                *p = data_dir.join(&*p);
            }
        }
        apply_overrides(&mut file, &self.overrides)?;
        file.study.name = name.to_owned();
        Ok(file)
    }

    /// Writes the text, its source and the overrides (and the budget and fingerprint when
    /// known) as the system attributes of study `study_id`, in one transaction.
    pub fn write(&self, storage: &mut Storage, study_id: i64) -> Result<(), StorageError> {
        storage.set_study_system_attrs(study_id, &self.attrs())
    }

    /// Creates the study `name` with this record, in one transaction: a process killed
    /// meanwhile leaves no study rather than one a worker cannot join.
    pub fn create(
        &self,
        storage: &mut Storage,
        name: &str,
        direction: StudyDirection,
    ) -> Result<i64, StorageError> {
        storage.create_study_with(name, &[direction], &self.attrs())
    }

    /// The text, its source and the overrides (and the budget and fingerprint when known) as
    /// study system attributes.
    fn attrs(&self) -> Vec<(&'static str, JsonValue)> {
        let overrides = JsonValue::Array(
            self.overrides
                .iter()
                .map(|s| JsonValue::from(s.as_str()))
                .collect(),
        );
        let mut attrs = vec![
            (keys::TOML, JsonValue::from(self.text.as_str())),
            (keys::SOURCE, JsonValue::from(self.source.as_str())),
            (keys::OVERRIDES, overrides),
        ];
        if let Some(n) = self.budget {
            attrs.push((keys::BUDGET, JsonValue::from(n as i64)));
        }
        if let Some(f) = &self.fingerprint {
            attrs.push((keys::FINGERPRINT, JsonValue::from(f.as_str())));
        }
        attrs
    }
}

/// Lays `NAME=VALUE` overrides over the file's `[fixed]` values, in order; an error names the
/// assignment (each front end adds how it was given: the CLI's `--set`).
pub fn apply_overrides(file: &mut StudyFile, overrides: &[String]) -> Result<(), FrontError> {
    for assignment in overrides {
        let (name, value) = assignment.split_once('=').ok_or_else(|| {
            FrontError::Invalid(format!(
                "{assignment}: write NAME=VALUE, e.g. train.total_timesteps=20000"
            ))
        })?;
        file.override_fixed(name.trim(), value)
            .map_err(|e| FrontError::Invalid(format!("{assignment}: {e}")))?;
    }
    Ok(())
}

/// Settings of the trial configuration a study may change between runs without changing what
/// its trials' values mean: where the env steps, the precision and its loss scaling (the same
/// computation, to rounding), the seeds (another draw of the same experiment), and how often
/// a trial reports on its way.
const SAME_MEANING: [&str; 7] = [
    "env.placement",
    "env.seed",
    "ppo.seed",
    "ppo.precision",
    "ppo.initial_loss_scale",
    "ppo.loss_scale_growth_interval",
    "train.eval_every",
];

/// One setting a study file changes from the one recorded with its study.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedSetting {
    /// The setting's dotted name: `study.objective`, `split.train`, `evaluation.scheme`, or a
    /// trial setting's (`train.total_timesteps`, as `[fixed]` and `--set` write it).
    pub key: String,
    /// Its value recorded with the study, and in the file run now (JSON; `unset` where the
    /// section has no such key).
    pub recorded: String,
    pub here: String,
}

impl std::fmt::Display for ChangedSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} recorded, {} here",
            self.key, self.recorded, self.here
        )
    }
}

/// What `here` changes from `recorded` (a study's recorded file, its overrides applied) that
/// changes what a trial's value means, so that the trials of the two would be ranked together
/// while measuring different things: the objective, the hold-out split, the evaluation
/// scheme, and every trial setting neither file searches (but those of [`SAME_MEANING`]).
/// The direction and the data are checked on their own; the search space, the sampler, the
/// pruner and the budget may change between runs (a study may be searched further or
/// elsewhere, its values mean the same).
pub fn changed_settings(recorded: &StudyFile, here: &StudyFile) -> Vec<ChangedSetting> {
    use crate::study::catalogue::at;
    use crate::study::config_path::leaf_paths;
    use serde_json::Value;
    // One tree a file: the trial configuration's sections (`env`, `ppo`, `train`) beside the
    // study's objective, split and evaluation, whose names none of them shares.
    let scored = |f: &StudyFile| {
        let mut tree = f.base_config.clone();
        if let Value::Object(map) = &mut tree {
            let objective = serde_json::json!({ "objective": f.study.objective.name() });
            map.insert("study".into(), objective);
            for (key, section) in [
                ("split", serde_json::to_value(&f.split)),
                ("evaluation", serde_json::to_value(&f.evaluation)),
            ] {
                map.insert(key.into(), section.unwrap_or(Value::Null));
            }
        }
        tree
    };
    let (before, after) = (scored(recorded), scored(here));
    let searched =
        |name: &str| recorded.space.get(name).is_some() || here.space.get(name).is_some();
    // An f32 setting as written (0.01, not the 0.009999999776482582 its f64 reads).
    let shown = |v: Option<&Value>| match v {
        None => "unset".to_owned(),
        Some(Value::Number(n)) if n.is_f64() => match n.as_f64() {
            Some(x) if f64::from(x as f32) == x => (x as f32).to_string(),
            _ => n.to_string(),
        },
        Some(v) => v.to_string(),
    };
    let whole = |v: Option<&Value>| v.map_or_else(|| "unset".into(), Value::to_string);
    let mut keys = leaf_paths(&before);
    keys.extend(leaf_paths(&after));
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for key in keys {
        if SAME_MEANING.contains(&key.as_str()) || searched(&key) {
            continue;
        }
        let (was, now) = (at(&before, &key), at(&after, &key));
        if was == now {
            continue;
        }
        // Two values that differ beyond what f32 shows are shown whole.
        let (recorded, here) = match (shown(was), shown(now)) {
            (a, b) if a == b => (whole(was), whole(now)),
            pair => pair,
        };
        out.push(ChangedSetting {
            key,
            recorded,
            here,
        });
    }
    out
}
