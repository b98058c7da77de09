//! A study's checks beyond its tables' types: the `[study]` table's values, and searched
//! ranges whose ends or choices a trial would refuse.

use super::{StudyFile, StudyFileError, StudySection};
use crate::config_path;
use crate::space::ParamValue;
use tradetune_device::DeviceSpec;

impl StudyFile {
    /// Refuses a searched range that reaches past the range the
    /// [`catalogue`](crate::catalogue) gives its setting, or a choice it refuses (a trial
    /// would fail on it), naming the search's key; ends and choices are applied as a trial
    /// applies them, so one of the wrong type is refused here too.
    pub(super) fn check_search_ranges(&self) -> Result<(), StudyFileError> {
        for (name, values) in self.extreme_values() {
            let key = format!("search.\"{name}\"");
            for value in &values {
                let mut trial = self.base_config.clone();
                config_path::apply_value(&mut trial, &name, value)
                    .map_err(|e| self.key_error(&key, e.to_string()))?;
                if let Some(applied) = name.split('.').try_fold(&trial, |v, part| v.get(part)) {
                    crate::catalogue::check(&name, applied)
                        .map_err(|e| self.key_error(&key, e.to_string()))?;
                }
            }
        }
        Ok(())
    }

    /// Every value each searched parameter can take at its ends: the bounds of ranges and
    /// every choice of categoricals, for worst-case checks (memory of presets).
    pub fn extreme_values(&self) -> Vec<(String, Vec<ParamValue>)> {
        self.space.extreme_values()
    }
}

/// Whether `name` can name a new study: its trials' checkpoints go in a folder of that name
/// (and the app's exports in files named after it), so it must be a single path component:
/// not empty, no `/` or `\\`, not `.` or `..` and no `..` in it. Checked where a study is
/// created or named (`--name`), not where a study file is read, so that a study stored under
/// another name (by Optuna, or before this check) still reads back and runs; its folder is then
/// the name with those parts replaced. The error says why, for the caller to prefix with the
/// flag or field that gave the name.
pub fn check_study_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("the study needs a name".into());
    }
    if name.contains(['/', '\\']) {
        return Err(format!(
            "study name '{name}' has a path separator ('/' or '\\\\'): its checkpoints go in a \
             folder of that name"
        ));
    }
    if name.contains("..") || name == "." || name.contains('\0') {
        return Err(format!(
            "study name '{name}' is not a plain folder name ('.', '..' or a NUL in it): its \
             checkpoints go in a folder of that name"
        ));
    }
    Ok(())
}

pub(super) fn check_study(
    s: &StudySection,
    err: &dyn Fn(Option<String>, String) -> StudyFileError,
) -> Result<(), StudyFileError> {
    if s.workers == 0 {
        return Err(err(
            Some("study.workers".into()),
            "need at least one worker".into(),
        ));
    }
    if s.devices.is_empty() {
        return Err(err(
            Some("study.devices".into()),
            "list at least one device".into(),
        ));
    }
    for d in &s.devices {
        d.parse::<DeviceSpec>()
            .map_err(|e| err(Some("study.devices".into()), e.to_string()))?;
    }
    if !(s.memory_fraction > 0.0 && s.memory_fraction <= 1.0) {
        return Err(err(
            Some("study.memory_fraction".into()),
            format!("{}: must be in (0, 1]", s.memory_fraction),
        ));
    }
    if let Some(g) = s.device_memory_gib
        && !(g.is_finite() && g > 0.0)
    {
        return Err(err(
            Some("study.device_memory_gib".into()),
            format!("{g}: must be a positive number of GiB"),
        ));
    }
    Ok(())
}

/// The `[split]` and `[evaluation]` values that need no data, checked as the file is read:
/// an error names the file's line and key, not the market files a later split of the data
/// would (after they all loaded).
pub(super) fn check_split_and_evaluation(
    split: &tradetune_market::split::SplitSpec,
    evaluation: &super::EvaluationSection,
    err: &dyn Fn(Option<String>, String) -> StudyFileError,
) -> Result<(), StudyFileError> {
    use super::EvaluationSection;
    split
        .check()
        .map_err(|(field, e)| err(Some(format!("split.{field}")), e.0))?;
    match evaluation {
        EvaluationSection::Holdout => Ok(()),
        EvaluationSection::WalkForward { n_folds, .. } => {
            if *n_folds == 0 {
                return Err(err(
                    Some("evaluation.n_folds".into()),
                    "walk-forward n_folds must be at least 1".into(),
                ));
            }
            Ok(())
        }
        EvaluationSection::Cpcv {
            n_groups,
            k_test,
            purge_bars,
            embargo_bars,
        } => tradetune_market::split::Cpcv {
            n_groups: *n_groups,
            k_test: *k_test,
            purge_bars: *purge_bars,
            embargo_bars: *embargo_bars,
        }
        .check()
        .map_err(|(field, e)| err(Some(format!("evaluation.{field}")), e.0)),
    }
}
