//! The number a study maximises, computed from an evaluation's metrics.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::eval::metrics::Metrics;

/// What a trial's evaluation scores. Every objective is maximised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Objective {
    /// Sharpe(agent) − Sharpe(equal weight): risk-adjusted return beyond simply holding the
    /// assets. The default: an agent is worth training only if it beats buy-and-hold, and a
    /// plain Sharpe rewards riding a bull market.
    #[default]
    SharpeExcess,
    /// Sharpe(agent).
    Sharpe,
    /// Sortino(agent) − Sortino(equal weight).
    SortinoExcess,
    /// Sortino(agent).
    Sortino,
    /// Total return(agent) − total return(equal weight).
    ExcessReturn,
    /// Total return(agent).
    TotalReturn,
}

impl Objective {
    /// Every objective, default first.
    pub const ALL: [Objective; 6] = [
        Objective::SharpeExcess,
        Objective::Sharpe,
        Objective::SortinoExcess,
        Objective::Sortino,
        Objective::ExcessReturn,
        Objective::TotalReturn,
    ];

    /// The name used in configs, on the command line and in storage.
    pub fn name(self) -> &'static str {
        match self {
            Objective::SharpeExcess => "sharpe_excess",
            Objective::Sharpe => "sharpe",
            Objective::SortinoExcess => "sortino_excess",
            Objective::Sortino => "sortino",
            Objective::ExcessReturn => "excess_return",
            Objective::TotalReturn => "total_return",
        }
    }

    /// The objective's value for `agent` against the equal-weight buy-and-hold `ew`.
    pub fn value(&self, agent: &Metrics, ew: &Metrics) -> f64 {
        match self {
            Objective::SharpeExcess => agent.sharpe - ew.sharpe,
            Objective::Sharpe => agent.sharpe,
            Objective::SortinoExcess => agent.sortino - ew.sortino,
            Objective::Sortino => agent.sortino,
            Objective::ExcessReturn => agent.total_return - ew.total_return,
            Objective::TotalReturn => agent.total_return,
        }
    }
}

impl fmt::Display for Objective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Objective> for &'static str {
    fn from(o: Objective) -> &'static str {
        o.name()
    }
}

impl TryFrom<String> for Objective {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl FromStr for Objective {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Objective::ALL
            .into_iter()
            .find(|o| o.name() == s.trim())
            .ok_or_else(|| {
                let valid: Vec<_> = Objective::ALL.iter().map(|o| o.name()).collect();
                format!("unknown objective '{s}' (valid: {})", valid.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_serde() {
        for o in Objective::ALL {
            assert_eq!(o.to_string().parse::<Objective>(), Ok(o));
            let json = serde_json::to_string(&o).unwrap();
            assert_eq!(json, format!("\"{o}\""));
            assert_eq!(serde_json::from_str::<Objective>(&json).unwrap(), o);
        }
        assert_eq!(Objective::default(), Objective::SharpeExcess);
        let err = "sharp".parse::<Objective>().unwrap_err();
        assert!(err.contains("sharpe_excess"), "{err}");
    }

    #[test]
    fn values_compare_agent_and_equal_weight() {
        let agent = Metrics {
            total_return: 0.3,
            sharpe: 1.5,
            sortino: 2.0,
            ..Metrics::default()
        };
        let ew = Metrics {
            total_return: 0.1,
            sharpe: 1.0,
            sortino: 1.2,
            ..Metrics::default()
        };
        let v = |o: Objective| o.value(&agent, &ew);
        assert_eq!(v(Objective::SharpeExcess), 0.5);
        assert_eq!(v(Objective::Sharpe), 1.5);
        assert!((v(Objective::SortinoExcess) - 0.8).abs() < 1e-12);
        assert_eq!(v(Objective::Sortino), 2.0);
        assert!((v(Objective::ExcessReturn) - 0.2).abs() < 1e-12);
        assert_eq!(v(Objective::TotalReturn), 0.3);
    }
}
