//! What the storage hands out when reading: studies, their summaries and their trials.

use chrono::NaiveDateTime;
use std::sync::Arc;

use super::json_value::JsonValue;
use super::model::{DistributionError, OptunaDistribution, ParamValue};
use super::model::{StudyDirection, TrialState};

/// A study's identity and study-level attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyRecord {
    pub study_id: i64,
    pub name: String,
    pub directions: Vec<StudyDirection>,
    pub user_attrs: Vec<(String, JsonValue)>,
    pub system_attrs: Vec<(String, JsonValue)>,
}

/// A study with its trial counts and best value, for `study list`.
#[derive(Debug, Clone, PartialEq)]
pub struct StudySummary {
    pub study: StudyRecord,
    /// Trials per state, indexed by [`TrialState::index`].
    pub n_trials_by_state: [usize; 5],
    /// Best COMPLETE trial of a single-objective study: (number, value).
    pub best: Option<(i64, f64)>,
    /// Start of the first trial.
    pub datetime_start: Option<NaiveDateTime>,
}

impl StudySummary {
    /// All trials in any state.
    pub fn n_trials(&self) -> usize {
        self.n_trials_by_state.iter().sum()
    }

    /// Trials in one state.
    pub fn n(&self, state: TrialState) -> usize {
        self.n_trials_by_state[state.index()]
    }
}

/// One stored parameter: the internal f64 and its distribution (shared between trials).
#[derive(Debug, Clone, PartialEq)]
pub struct TrialParam {
    pub name: String,
    pub internal: f64,
    pub distribution: Arc<OptunaDistribution>,
}

impl TrialParam {
    /// The value as Optuna's `trial.params[name]` shows it.
    pub fn external(&self) -> Result<ParamValue, DistributionError> {
        self.distribution.to_external(self.internal)
    }
}

/// A trial as Optuna's `FrozenTrial` holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRecord {
    pub trial_id: i64,
    pub study_id: i64,
    /// 0-based, per study, in creation order.
    pub number: i64,
    pub state: TrialState,
    /// One value per objective, or None when no value was stored (FAIL, RUNNING, …).
    pub values: Option<Vec<f64>>,
    /// Naive UTC.
    pub datetime_start: Option<NaiveDateTime>,
    /// Naive UTC.
    pub datetime_complete: Option<NaiveDateTime>,
    /// In the order they were set (Optuna sorts by `param_id`).
    pub params: Vec<TrialParam>,
    /// (step, value), by step; values may be NaN or ±inf.
    pub intermediate_values: Vec<(i64, f64)>,
    pub user_attrs: Vec<(String, JsonValue)>,
    pub system_attrs: Vec<(String, JsonValue)>,
    /// Rows of this trial that another client stored and TradeTune's model cannot hold (see
    /// [`SetAside`]); they are in none of the lists above.
    pub set_aside: Vec<SetAside>,
}

/// A row of a trial that another client wrote and TradeTune's model refuses, set aside so that
/// it does not make the whole study unreadable: a parameter whose distribution Optuna accepts and
/// TradeTune does not (`FloatDistribution(0.0, float('inf'))`, NaN bounds; `add_trial` and
/// `create_trial` store them), or an attribute whose JSON does not parse. Its text is kept as
/// stored; TradeTune never writes such a distribution itself.
///
/// A parameter set aside is not in [`TrialRecord::params`], so samplers, pruners and parameter
/// importance do not see it (an infinite range cannot be sampled from or scaled), and a trial
/// enqueued with one is not run; where its distribution is a float one its value is Optuna's
/// (the stored f64), which `study show` and the CSV export show as Optuna does.
#[derive(Debug, Clone, PartialEq)]
pub struct SetAside {
    /// `trial_params`, `trial_user_attributes` or `trial_system_attributes`.
    pub table: &'static str,
    pub row_id: i64,
    /// `distribution_json` or `value_json`.
    pub column: &'static str,
    /// The parameter's name or the attribute's key.
    pub name: String,
    /// The column's text as stored.
    pub text: String,
    /// A parameter's stored value (`param_value`); None for an attribute.
    pub internal: Option<f64>,
    /// A parameter's value as Optuna shows it, where the text names a float distribution (whose
    /// value is the stored f64); None where it cannot be told.
    pub float_value: Option<f64>,
    /// Why the model refuses it.
    pub reason: String,
}

impl SetAside {
    /// Whether `new` may follow this row under its name, where it is a parameter's float range
    /// the model refuses (Optuna's rule, as writing a parameter applies it: another float
    /// range of the same scale may): None for any other row.
    pub fn compatibility_with(&self, new: &OptunaDistribution) -> Option<Result<(), &'static str>> {
        if self.table != "trial_params" {
            return None;
        }
        let log = super::distribution_json::float_distribution_log(&self.text)?;
        Some(super::distribution_json::follows_float(new, log))
    }

    /// One line for people, naming trial `number`, the row and what was wrong.
    pub fn note(&self, number: i64) -> String {
        let consequence = match (self.internal, self.float_value) {
            (Some(_), Some(v)) => format!(
                "its value {} is shown and exported, but it is not used to fit the sampler or \
                 for importance",
                super::python_repr::float_repr(v)
            ),
            (Some(internal), None) => format!(
                "its stored value {} cannot be shown as Optuna would; it is left out of the \
                 sampler, importance and the CSV export",
                super::python_repr::float_repr(internal)
            ),
            (None, _) => "`study show --json` shows its text as stored; it is left out of the CSV \
                           export and of what TradeTune reads from attributes"
                .into(),
        };
        format!(
            "trial {number}: {} '{}' set aside (table {}, row {}, column {}: {}); {consequence}",
            self.what(),
            self.name,
            self.table,
            self.row_id,
            self.column,
            self.reason
        )
    }

    /// What the row holds, for people.
    fn what(&self) -> &'static str {
        match self.table {
            "trial_params" => "parameter",
            "trial_user_attributes" => "user attribute",
            _ => "system attribute",
        }
    }
}

/// Rows of one name and column set aside on more trials than this are told in one line.
const NOTES_APART: usize = 3;

/// The notes of every row set aside in `trials`, in trial order: a line each where a name has
/// a few ([`SetAside::note`]), one line for a name set aside on many trials (a study Optuna's
/// `add_trial` filled with a range the model refuses would print a line a trial); empty when
/// the model holds all of them.
pub fn set_aside_notes(trials: &[TrialRecord]) -> Vec<String> {
    let mut groups: Vec<Vec<(i64, &SetAside)>> = Vec::new();
    for t in trials {
        for s in &t.set_aside {
            let same = |g: &&mut Vec<(i64, &SetAside)>| {
                let (_, first) = g[0];
                (first.table, first.column, &first.name) == (s.table, s.column, &s.name)
            };
            match groups.iter_mut().find(same) {
                Some(g) => g.push((t.number, s)),
                None => groups.push(vec![(t.number, s)]),
            }
        }
    }
    let mut notes = Vec::new();
    for g in groups {
        if g.len() <= NOTES_APART {
            notes.extend(g.iter().map(|(number, s)| s.note(*number)));
            continue;
        }
        let (number, first) = g[0];
        let numbers: Vec<String> = g.iter().map(|(n, _)| n.to_string()).collect();
        let shown = match numbers.len() {
            n if n <= 8 => numbers.join(", "),
            n => format!("{}, … {}", numbers[..6].join(", "), numbers[n - 1]),
        };
        let consequence = if first.internal.is_none() {
            "`study show --json` shows their text as stored; they are left out of the CSV \
             export and of what TradeTune reads from attributes"
        } else if first.float_value.is_some() {
            "their values are shown and exported, but not used to fit the sampler or for \
             importance"
        } else {
            "they are left out of the sampler, importance and the CSV export"
        };
        notes.push(format!(
            "{} '{}' set aside on {} trials ({shown}; table {}, column {}; trial {number}'s, row \
             {}: {}); {consequence}",
            first.what(),
            first.name,
            g.len(),
            first.table,
            first.column,
            first.row_id,
            first.reason
        ));
    }
    notes
}

impl TrialRecord {
    /// The parameter named `name`.
    pub fn param(&self, name: &str) -> Option<&TrialParam> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The user attribute `key`.
    pub fn user_attr(&self, key: &str) -> Option<&JsonValue> {
        self.user_attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The system attribute `key`.
    pub fn system_attr(&self, key: &str) -> Option<&JsonValue> {
        self.system_attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The single objective value (first objective).
    pub fn value(&self) -> Option<f64> {
        self.values.as_ref().and_then(|v| v.first().copied())
    }
}

/// A trial handed back on creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrialHandle {
    pub trial_id: i64,
    pub study_id: i64,
    pub number: i64,
}

/// A finished (or enqueued) trial to store in one transaction, like Optuna's `add_trial`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTrial {
    pub state: TrialState,
    pub values: Option<Vec<f64>>,
    /// Naive UTC; None means now (for states other than WAITING).
    pub datetime_start: Option<NaiveDateTime>,
    pub datetime_complete: Option<NaiveDateTime>,
    /// (name, internal value, distribution).
    pub params: Vec<(String, f64, OptunaDistribution)>,
    pub intermediate_values: Vec<(i64, f64)>,
    pub user_attrs: Vec<(String, JsonValue)>,
    pub system_attrs: Vec<(String, JsonValue)>,
}

impl NewTrial {
    /// An empty trial of the given state.
    pub fn new(state: TrialState) -> Self {
        NewTrial {
            state,
            values: None,
            datetime_start: None,
            datetime_complete: None,
            params: Vec::new(),
            intermediate_values: Vec::new(),
            user_attrs: Vec::new(),
            system_attrs: Vec::new(),
        }
    }
}
