//! A study's honest answer to "did it find anything?": the best trial with its folds, the
//! probability of backtest overfitting over the trials' out-of-sample returns, and the best
//! trial's deflated Sharpe ratio (`tradetune study report`).
//!
//! The returns are each COMPLETE trial's stored fold returns (`tradetune_fold_returns`: the
//! per-bar returns on every fold's test bars, folds in the study's fixed order), joined into
//! one series per trial. Every trial of a study has the same folds, so the series line up bar
//! for bar, which CSCV needs.

use serde::Serialize;

use super::FrontError;
use crate::eval::dsr::{Deflated, deflate_best};
use crate::eval::pbo::{HistogramBin, Pbo, cscv, logit_histogram};
use crate::storage::{Storage, StudyDirection, TrialState};

/// The best trial and its folds.
#[derive(Debug, Clone, Serialize)]
pub struct BestTrial {
    pub number: i64,
    pub value: f64,
    /// (fold, objective) as its intermediate values reported them.
    pub folds: Vec<(i64, f64)>,
    /// Standard deviation of the fold objectives (population), when it has folds.
    pub fold_std: Option<f64>,
    pub params: Vec<(String, String)>,
}

/// PBO by CSCV with the bins of its logits, or why it could not be computed.
#[derive(Debug, Clone, Serialize)]
pub struct PboSection {
    pub result: Option<Pbo>,
    pub histogram: Vec<HistogramBin>,
    pub unavailable: Option<String>,
}

/// The deflated Sharpe ratio of the best trial among the others, or why not.
#[derive(Debug, Clone, Serialize)]
pub struct DsrSection {
    pub result: Option<Deflated>,
    pub unavailable: Option<String>,
}

/// Everything `tradetune study report` shows.
#[derive(Debug, Clone, Serialize)]
pub struct StudyReport {
    pub study: String,
    pub direction: &'static str,
    pub trials: usize,
    pub complete: usize,
    /// COMPLETE trials with stored fold returns (the cross-validated ones).
    pub with_returns: usize,
    /// Bars in each trial's joined out-of-sample series.
    pub bars: usize,
    pub best: Option<BestTrial>,
    pub pbo: PboSection,
    pub dsr: DsrSection,
    /// The best trial's spread over seeds on the test split (`tradetune study reseed`).
    pub seeds: Option<super::reseed::SeedSpread>,
}

/// The report of study `name`, PBO with `partitions` (S, even) blocks.
pub fn study_report(
    storage: &Storage,
    name: &str,
    partitions: usize,
) -> Result<StudyReport, FrontError> {
    let study = storage.study(name)?;
    let maximize = study.directions.first() != Some(&StudyDirection::Minimize);
    let trials = storage.trials(study.study_id)?;
    let complete: Vec<_> = trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .filter(|t| t.value().is_some_and(f64::is_finite))
        .collect();
    let best = storage.best_trial(study.study_id)?;
    // Each trial's joined fold returns; only series as long as the most common length line
    // up (a trial cut short by a crash mid-write has fewer).
    let mut series: Vec<(i64, Vec<f64>)> = Vec::new();
    for t in &complete {
        let r = storage.fold_returns(t.trial_id)?;
        if !r.is_empty() {
            series.push((t.number, r.iter().map(|x| x.value).collect()));
        }
    }
    let bars = modal_len(&series);
    series.retain(|(_, s)| s.len() == bars);
    let returns: Vec<&[f64]> = series.iter().map(|(_, s)| s.as_slice()).collect();

    let pbo = if series.len() < 2 {
        PboSection {
            result: None,
            histogram: Vec::new(),
            unavailable: Some(format!(
                "needs at least 2 COMPLETE trials with stored fold returns (a study with \
                 [evaluation] walk_forward or cpcv); this one has {}",
                series.len()
            )),
        }
    } else {
        match cscv(&returns, partitions) {
            Ok(p) => PboSection {
                histogram: logit_histogram(&p.logits, 10),
                result: Some(p),
                unavailable: None,
            },
            Err(e) => PboSection {
                result: None,
                histogram: Vec::new(),
                unavailable: Some(e.to_string()),
            },
        }
    };
    let selected = best
        .as_ref()
        .and_then(|b| series.iter().position(|(n, _)| *n == b.number));
    let dsr = match selected {
        None => DsrSection {
            result: None,
            unavailable: Some("the best trial has no stored fold returns".into()),
        },
        Some(i) => match deflate_best(&returns, Some(i)) {
            Ok(b) => DsrSection {
                result: Some(b.deflated),
                unavailable: None,
            },
            Err(e) => DsrSection {
                result: None,
                unavailable: Some(e.to_string()),
            },
        },
    };
    Ok(StudyReport {
        study: name.to_owned(),
        direction: if maximize { "maximize" } else { "minimize" },
        trials: trials.len(),
        complete: complete.len(),
        with_returns: series.len(),
        bars,
        best: best.map(|t| BestTrial {
            number: t.number,
            value: t.value().unwrap_or(f64::NAN),
            folds: t.intermediate_values.clone(),
            fold_std: t.user_attr("fold_std").and_then(|v| v.as_f64()),
            params: t
                .params
                .iter()
                .map(|p| {
                    let value = p
                        .external()
                        .map_or_else(|_| p.internal.to_string(), |v| v.to_string());
                    (p.name.clone(), value)
                })
                .collect(),
        }),
        pbo,
        dsr,
        seeds: super::reseed::stored(storage, name)?,
    })
}

/// The most common series length (the longest among equals); 0 for none.
fn modal_len(series: &[(i64, Vec<f64>)]) -> usize {
    let mut counts: std::collections::BTreeMap<usize, usize> = Default::default();
    for (_, s) in series {
        *counts.entry(s.len()).or_default() += 1;
    }
    counts
        .iter()
        .max_by_key(|&(len, count)| (*count, *len))
        .map_or(0, |(len, _)| *len)
}

impl StudyReport {
    /// The report for people.
    pub fn text(&self) -> String {
        let mut s = format!(
            "study '{}' ({}): {} trials, {} complete, {} with fold returns ({} bars each)\n",
            self.study, self.direction, self.trials, self.complete, self.with_returns, self.bars
        );
        match &self.best {
            None => s += "best trial: none complete\n",
            Some(b) => {
                s += &format!("best trial #{}: value {:.4}", b.number, b.value);
                if let Some(sd) = b.fold_std {
                    s += &format!(" (± {sd:.4} across {} folds)", b.folds.len());
                }
                s += "\n";
                for (name, value) in &b.params {
                    s += &format!("  {name} = {value}\n");
                }
                if b.fold_std.is_some() {
                    let folds: Vec<String> =
                        b.folds.iter().map(|(_, v)| format!("{v:.4}")).collect();
                    s += &format!("  folds: {}\n", folds.join(", "));
                }
            }
        }
        match (&self.pbo.result, &self.pbo.unavailable) {
            (Some(p), _) => {
                s += &format!(
                    "PBO {:.3} over {} trials ({} partitions, {} combinations); probability \
                     of loss {:.3}\n",
                    p.pbo, p.strategies, p.partitions, p.combinations, p.probability_of_loss
                );
                s += "  logits:";
                for b in &self.pbo.histogram {
                    s += &format!(" [{:.2},{:.2}):{}", b.lower, b.upper, b.count);
                }
                s += "\n";
            }
            (None, Some(why)) => s += &format!("PBO: not available: {why}\n"),
            (None, None) => {}
        }
        match (&self.dsr.result, &self.dsr.unavailable) {
            (Some(d), _) => {
                s += &format!(
                    "best trial's Sharpe {:.4} per bar over {} bars: PSR {:.3}, deflated \
                     (N = {}, V = {:.3e}) {:.3}\n",
                    d.estimate.sharpe,
                    d.estimate.periods,
                    d.psr,
                    d.trials,
                    d.sharpe_variance,
                    d.dsr
                )
            }
            (None, Some(why)) => s += &format!("deflated Sharpe: not available: {why}\n"),
            (None, None) => {}
        }
        match &self.seeds {
            None => s += "seed spread: none (run `tradetune study reseed`)\n",
            Some(sp) => {
                let sharpes: Vec<f64> = sp.seeds.iter().map(|r| r.sharpe).collect();
                let returns: Vec<f64> = sp.seeds.iter().map(|r| r.total_return).collect();
                if let (Some(a), Some(b)) = (
                    super::min_median_max(&sharpes),
                    super::min_median_max(&returns),
                ) {
                    s += &format!(
                        "seed spread of trial #{} on the test split ({} seeds, {} bars): sharpe \
                         {:.3} / {:.3} / {:.3}, total return {:.2} / {:.2} / {:.2} % (min / \
                         median / max); equal weight sharpe {:.3}, total return {:.2} %\n",
                        sp.trial,
                        sp.seeds.len(),
                        sp.bars,
                        a.0,
                        a.1,
                        a.2,
                        100.0 * b.0,
                        100.0 * b.1,
                        100.0 * b.2,
                        sp.equal_weight_sharpe,
                        100.0 * sp.equal_weight_total_return
                    );
                }
            }
        }
        s
    }
}
