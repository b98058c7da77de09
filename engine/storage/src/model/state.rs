//! Trial states and study directions, spelled as Optuna stores them.
//!
//! SQLAlchemy's `Enum` column stores a Python enum by member *name*, so the text in `trials.state`
//! is `RUNNING`, `COMPLETE`, `PRUNED`, `FAIL` or `WAITING`, and `study_directions.direction` is
//! `MINIMIZE` or `MAXIMIZE` (`NOT_SET`, which Optuna 2.x left on a study created through its storage
//! API alone, is read as `MINIMIZE`, as Optuna orders such a study).
//! The serde form is the same name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `optuna.trial.TrialState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TrialState {
    Running,
    Complete,
    Pruned,
    Fail,
    Waiting,
}

impl TrialState {
    /// All states, in Optuna's enum order.
    pub const ALL: [TrialState; 5] = [
        TrialState::Running,
        TrialState::Complete,
        TrialState::Pruned,
        TrialState::Fail,
        TrialState::Waiting,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            TrialState::Running => "RUNNING",
            TrialState::Complete => "COMPLETE",
            TrialState::Pruned => "PRUNED",
            TrialState::Fail => "FAIL",
            TrialState::Waiting => "WAITING",
        }
    }

    /// Optuna's `is_finished()`: COMPLETE, PRUNED and FAIL never change again.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TrialState::Complete | TrialState::Pruned | TrialState::Fail
        )
    }

    /// The transitions TradeTune makes: a WAITING (enqueued) trial starts RUNNING or is
    /// cancelled as FAIL; a RUNNING trial ends COMPLETE, PRUNED or FAIL.
    pub fn can_become(self, to: TrialState) -> bool {
        matches!(
            (self, to),
            (TrialState::Waiting, TrialState::Running | TrialState::Fail)
                | (
                    TrialState::Running,
                    TrialState::Complete | TrialState::Pruned | TrialState::Fail
                )
        )
    }

    /// Index into a per-state counter array (the order of [`TrialState::ALL`]).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for TrialState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TrialState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TrialState::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("unknown trial state `{s}` (expected RUNNING, COMPLETE, PRUNED, FAIL or WAITING)"))
    }
}

/// `optuna.study.StudyDirection`: whether the objective is minimized (Optuna's default) or
/// maximized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum StudyDirection {
    #[default]
    Minimize,
    Maximize,
}

impl StudyDirection {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            StudyDirection::Minimize => "MINIMIZE",
            StudyDirection::Maximize => "MAXIMIZE",
        }
    }

    /// Whether `a` is strictly better than `b` in this direction.
    pub fn better(self, a: f64, b: f64) -> bool {
        match self {
            StudyDirection::Minimize => a < b,
            StudyDirection::Maximize => a > b,
        }
    }

    /// `value` as a loss: smaller is better.
    pub fn loss(self, value: f64) -> f64 {
        match self {
            StudyDirection::Minimize => value,
            StudyDirection::Maximize => -value,
        }
    }
}

impl fmt::Display for StudyDirection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StudyDirection {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "MINIMIZE" => Ok(StudyDirection::Minimize),
            "MAXIMIZE" => Ok(StudyDirection::Maximize),
            other => Err(format!(
                "unknown study direction `{other}` (expected MINIMIZE or MAXIMIZE)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_transitions_are_strict() {
        for s in TrialState::ALL {
            assert_eq!(s.as_str().parse::<TrialState>().unwrap(), s);
        }
        assert!("running".parse::<TrialState>().is_err());
        assert!(TrialState::Running.can_become(TrialState::Complete));
        assert!(TrialState::Waiting.can_become(TrialState::Running));
        assert!(!TrialState::Complete.can_become(TrialState::Fail));
        assert!(!TrialState::Running.can_become(TrialState::Running));
        assert!(!TrialState::Waiting.can_become(TrialState::Complete));
        assert_eq!(
            "MAXIMIZE".parse::<StudyDirection>().unwrap(),
            StudyDirection::Maximize
        );
        // The serde form is the stored name.
        assert_eq!(
            serde_json::to_string(&TrialState::Pruned).unwrap(),
            "\"PRUNED\""
        );
        assert_eq!(
            serde_json::from_str::<StudyDirection>("\"MAXIMIZE\"").unwrap(),
            StudyDirection::Maximize
        );
        assert_eq!(StudyDirection::Maximize.loss(2.0), -2.0);
    }
}
