//! A study's honest answer to "did it find anything?": the best trial with its folds, the
//! probability of backtest overfitting over the trials' out-of-sample returns, and the best
//! trial's deflated Sharpe ratio, and its saved policy against equal weight on the held-out
//! test split (`tradetune study report`).
//!
//! The returns are each COMPLETE trial's stored fold returns (`tradetune_fold_returns`: the
//! per-bar returns on every fold's test bars, folds in the study's fixed order), joined into
//! one series per trial. Every trial of a study has the same folds, so the series line up bar
//! for bar, which CSCV needs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use super::FrontError;
use super::backtest::{SplitPart, backtest};
use crate::device::DeviceSpec;
use crate::eval::dsr::{Deflated, DsrTrialError, deflate_best, trial_sharpe};
use crate::eval::pbo::{HistogramBin, Pbo, cscv, logit_histogram};
use crate::eval::{EvalSummary, Objective};
use crate::storage::{JsonValue, Storage, StudyDirection, TrialRecord, TrialState};

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
    /// Which returns were deflated: `"over equal weight"` (each bar's return less equal
    /// weight's, for an objective against equal weight: whether the search found an agent
    /// that beats holding the assets, not one that rode them up) or `"own"` (the agent's own
    /// returns: whether its Sharpe ratio is above 0).
    pub returns: &'static str,
    /// Why the agent's own returns were deflated where the objective is against equal weight
    /// (fold returns stored without equal weight's).
    pub note: Option<String>,
}

/// The best trial's saved policy on the test split against equal weight, or why not.
#[derive(Debug, Clone, Serialize)]
pub struct TestSection {
    pub result: Option<TestBacktest>,
    pub unavailable: Option<String>,
}

/// A backtest of the best trial's checkpoint on the held-out test split (`tradetune backtest`).
#[derive(Debug, Clone, Serialize)]
pub struct TestBacktest {
    /// The trial.
    pub trial: i64,
    /// Its checkpoint directory.
    pub checkpoint: String,
    /// Samples the policy was trained on.
    pub timesteps: usize,
    /// The agent's and equal weight's metrics on the test split, and the study's objective.
    pub summary: EvalSummary,
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
    /// PRUNED trials with stored fold returns (those of the folds they ran): not in PBO's
    /// matrix, but in the deflated Sharpe's N and V, as trials tried.
    pub pruned_with_returns: usize,
    /// Bars in PBO's series: those every COMPLETE trial with fold returns tested (one return
    /// a bar, in time order).
    pub bars: usize,
    /// The most folds that tested one bar (CPCV's C(N − 1, k − 1); 1 for walk-forward, 0
    /// without fold returns): a bar's return in the series is the mean of its folds'.
    pub tested_per_bar: usize,
    pub best: Option<BestTrial>,
    pub pbo: PboSection,
    pub dsr: DsrSection,
    /// The best trial's spread over seeds on the test split (`tradetune study reseed`).
    pub seeds: Option<super::reseed::SeedSpread>,
    /// The best trial's checkpoint against equal weight on the test split.
    pub test: TestSection,
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
    // The objective the trials were scored by (each trial records it; the study's default
    // where none did): one against equal weight has its deflated Sharpe taken over equal
    // weight's returns, since a plain Sharpe ratio of an agent that holds the assets in a
    // rising market is high whatever the search found.
    let objective = best
        .as_ref()
        .and_then(|b| b.user_attr("objective"))
        .and_then(|v| match v {
            JsonValue::Str(s) => s.parse::<Objective>().ok(),
            _ => None,
        })
        .unwrap_or_default();
    let against_equal_weight = matches!(
        objective,
        Objective::SharpeExcess | Objective::SortinoExcess | Objective::ExcessReturn
    );
    // Each trial's out-of-sample returns, one a bar in time order. CPCV tests each bar in
    // several folds (C(N − 1, k − 1) of them): joined as stored, a bar would count that many
    // times, out of order, which inflates the deflated Sharpe's T and puts the same bars in
    // both halves of PBO's combinations. So a bar's return is the mean of its folds' (the mean
    // of CPCV's backtest paths); walk-forward folds test each bar once. PRUNED trials keep the
    // folds they ran: they were tried, and count in the deflated Sharpe's N and V. Beside
    // each bar's return, the same less equal weight's (`None` where a fold stored none).
    let mut tried: Vec<Tried> = Vec::new();
    let mut tested_per_bar = 0;
    let mut without_benchmark = 0;
    for t in trials.iter().filter(|t| match t.state {
        TrialState::Pruned => true,
        TrialState::Complete => t.value().is_some_and(f64::is_finite),
        _ => false,
    }) {
        // (sum of the agent's returns, sum of its excess over equal weight, folds, all had
        // equal weight's)
        let mut by_bar: BTreeMap<i64, (f64, f64, usize, bool)> = BTreeMap::new();
        for x in storage.fold_returns(t.trial_id)? {
            let bar = by_bar.entry(x.bar_time).or_insert((0.0, 0.0, 0, true));
            bar.0 += x.value;
            bar.2 += 1;
            match x.benchmark {
                Some(b) => bar.1 += x.value - b,
                None => bar.3 = false,
            }
        }
        if let Some(most) = by_bar.values().map(|b| b.2).max() {
            let means: BTreeMap<i64, f64> = (by_bar.iter())
                .map(|(time, (sum, _, n, _))| (*time, sum / *n as f64))
                .collect();
            let excess = (by_bar.values().all(|b| b.3)).then(|| {
                (by_bar.values())
                    .map(|(_, excess, n, _)| excess / *n as f64)
                    .collect::<Vec<f64>>()
            });
            let complete = t.state == TrialState::Complete;
            // A pruned trial's few folds that give no Sharpe ratio (too few bars, no variation)
            // are left out rather than leaving the whole study without a deflated Sharpe.
            if !complete && trial_sharpe(&means.values().copied().collect::<Vec<_>>()).is_err() {
                continue;
            }
            without_benchmark += usize::from(excess.is_none());
            tested_per_bar = tested_per_bar.max(most);
            tried.push(Tried {
                number: t.number,
                complete,
                means,
                excess,
            });
        }
    }
    // PBO compares the COMPLETE trials bar by bar: on the bars every one of them tested (a
    // searched `env.lookback` leaves each trial's test blocks a different number of first
    // bars to skip).
    let mut common: Option<BTreeSet<i64>> = None;
    for Tried { means, .. } in tried.iter().filter(|t| t.complete) {
        let bars: BTreeSet<i64> = means.keys().copied().collect();
        common = Some(match common {
            None => bars,
            Some(c) => c.intersection(&bars).copied().collect(),
        });
    }
    let common = common.unwrap_or_default();
    let series: Vec<(i64, Vec<f64>)> = tried
        .iter()
        .filter(|t| t.complete)
        .map(|t| (t.number, common.iter().map(|bar| t.means[bar]).collect()))
        .collect();
    let bars = common.len();
    let returns: Vec<&[f64]> = series.iter().map(|(_, s)| s.as_slice()).collect();
    // The deflated Sharpe: the best trial's whole series, deflated by every trial tried; over
    // equal weight's returns where the objective is against it and every trial stored them.
    // (PBO ranks the trials by their own returns' Sharpe ratio: on the same bars equal
    // weight's is the same for every trial, so the ranks are the same.)
    let over_equal_weight = against_equal_weight && without_benchmark == 0;
    let all: Vec<(i64, Vec<f64>)> = tried
        .iter()
        .map(|t| {
            let returns = match &t.excess {
                Some(excess) if over_equal_weight => excess.clone(),
                _ => t.means.values().copied().collect(),
            };
            (t.number, returns)
        })
        .collect();
    let pruned_with_returns = tried.iter().filter(|t| !t.complete).count();
    let dsr_note = (against_equal_weight && without_benchmark > 0).then(|| {
        format!(
            "deflated over the agent's own returns (is its Sharpe ratio above 0?), not over \
             equal weight's as the objective {objective} asks: {without_benchmark} of the {} \
             trials stored their fold returns without equal weight's (before TradeTune kept \
             them, or by another program); trials run since store them",
            tried.len()
        )
    });
    let dsr_returns = if over_equal_weight {
        "over equal weight"
    } else {
        "own"
    };

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
        .and_then(|b| all.iter().position(|(n, _)| *n == b.number));
    let all_returns: Vec<&[f64]> = all.iter().map(|(_, s)| s.as_slice()).collect();
    let never_traded = |number: i64| {
        format!(
            "the best trial, #{number}, never traded out of sample (its returns are all 0): its \
             Sharpe ratio is 0, with no track record to deflate"
        )
    };
    let dsr = match selected {
        None => DsrSection {
            result: None,
            unavailable: Some("the best trial has no stored fold returns".into()),
            returns: dsr_returns,
            note: dsr_note,
        },
        // Over equal weight, an agent that held cash has the market's returns negated, not
        // zeros: whether it traded is asked of its own.
        Some(i) if over_equal_weight && tried[i].means.values().all(|r| *r == 0.0) => DsrSection {
            result: None,
            unavailable: Some(never_traded(tried[i].number)),
            returns: dsr_returns,
            note: dsr_note,
        },
        Some(i) => match deflate_best(&all_returns, Some(i)) {
            Ok(b) => DsrSection {
                result: Some(b.deflated),
                unavailable: None,
                returns: dsr_returns,
                note: dsr_note,
            },
            // The error's trial is an index into the series: named by its number here.
            Err(e) => DsrSection {
                result: None,
                returns: dsr_returns,
                note: dsr_note,
                unavailable: Some(match e {
                    DsrTrialError::Trial { trial, source } => {
                        format!("trial #{}: {source}", all[trial].0)
                    }
                    DsrTrialError::NeverTraded { trial } => never_traded(all[trial].0),
                    e => e.to_string(),
                }),
            },
        },
    };
    let test = test_backtest(best.as_ref());
    Ok(StudyReport {
        study: name.to_owned(),
        direction: if maximize { "maximize" } else { "minimize" },
        trials: trials.len(),
        complete: complete.len(),
        with_returns: series.len(),
        pruned_with_returns,
        bars,
        tested_per_bar,
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
        test,
    })
}

/// One trial's out-of-sample returns, a bar's the mean of the folds that tested it.
struct Tried {
    number: i64,
    complete: bool,
    /// The agent's return, by bar time.
    means: BTreeMap<i64, f64>,
    /// The agent's return less equal weight's, in bar order; `None` where a fold stored
    /// returns without equal weight's.
    excess: Option<Vec<f64>>,
}

/// Backtests `best`'s checkpoint (its `checkpoint` user attribute) on the test split, on the
/// CPU, with the objective it was scored by; says why not when it kept none.
pub fn test_backtest(best: Option<&TrialRecord>) -> TestSection {
    let unavailable = |why: String| TestSection {
        result: None,
        unavailable: Some(why),
    };
    let Some(best) = best else {
        return unavailable("no COMPLETE trial".into());
    };
    let n = best.number;
    let dir = match best.user_attr("checkpoint") {
        Some(JsonValue::Str(dir)) => dir.clone(),
        _ if best.user_attr("folds").is_some() => {
            return unavailable(format!(
                "trial #{n} was cross-validated: each fold trained its own policy and none was \
                 kept; `tradetune study reseed` trains it on the train split and backtests it \
                 on the test split"
            ));
        }
        _ => {
            return unavailable(format!(
                "trial #{n} saved no checkpoint (run by another program, or without a \
                 checkpoint directory)"
            ));
        }
    };
    if !Path::new(&dir).is_dir() {
        return unavailable(format!(
            "trial #{n}'s checkpoint {dir} is not there (moved, deleted, or saved on another \
             machine)"
        ));
    }
    let objective = best
        .user_attr("objective")
        .and_then(|v| match v {
            JsonValue::Str(s) => s.parse::<Objective>().ok(),
            _ => None,
        })
        .unwrap_or_default();
    match backtest(
        Path::new(&dir),
        SplitPart::Test,
        &[],
        objective,
        DeviceSpec::Cpu,
    ) {
        Ok(b) => TestSection {
            result: Some(TestBacktest {
                trial: n,
                checkpoint: dir,
                timesteps: b.timesteps,
                summary: b.report.summary(),
            }),
            unavailable: None,
        },
        Err(e) => unavailable(format!("backtesting trial #{n}'s checkpoint: {e}")),
    }
}

impl DsrSection {
    /// Which returns were deflated, for people: `over equal weight` or `(its own)`.
    pub fn returns_text(&self) -> &'static str {
        match self.returns {
            "own" => "(its own)",
            other => other,
        }
    }
}

impl StudyReport {
    /// How a bar's return was made when several folds tested it ("" when each bar was tested
    /// once).
    pub fn bars_note(&self) -> String {
        if self.tested_per_bar > 1 {
            format!(
                ", a bar's return the mean of the {} folds that tested it",
                self.tested_per_bar
            )
        } else {
            String::new()
        }
    }

    /// The report for people.
    pub fn text(&self) -> String {
        let mut s = format!(
            "study '{}' ({}): {} trials, {} complete, {} with fold returns ({} bars all of them \
             tested{}){}\n",
            self.study,
            self.direction,
            self.trials,
            self.complete,
            self.with_returns,
            self.bars,
            self.bars_note(),
            if self.pruned_with_returns > 0 {
                format!(
                    "; {} pruned trials' folds count in the deflated Sharpe's N and V",
                    self.pruned_with_returns
                )
            } else {
                String::new()
            }
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
                    s += &format!("  {name} = {}\n", super::format::param_text(value));
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
                    s += &format!(" ({:.2},{:.2}]:{}", b.lower, b.upper, b.count);
                }
                s += "\n";
            }
            (None, Some(why)) => s += &format!("PBO: not available: {why}\n"),
            (None, None) => {}
        }
        match (&self.dsr.result, &self.dsr.unavailable) {
            (Some(d), _) => {
                s += &format!(
                    "best trial's Sharpe {:.4} per bar of its returns {} over {} bars: PSR \
                     {:.3}, deflated (N = {}, V = {:.3e}) {:.3}\n",
                    d.estimate.sharpe,
                    self.dsr.returns_text(),
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
        if let Some(note) = &self.dsr.note {
            s += &format!("  {note}\n");
        }
        match (&self.test.result, &self.test.unavailable) {
            (Some(t), _) => {
                let (a, e) = (&t.summary.agent, &t.summary.equal_weight);
                s += &format!(
                    "best trial #{}'s policy on the test split ({} bars): total return {:.2} %, \
                     sharpe {:.3}, max drawdown {:.2} %; equal weight total return {:.2} %, \
                     sharpe {:.3}, max drawdown {:.2} %\n",
                    t.trial,
                    t.summary.bars,
                    100.0 * a.total_return,
                    a.sharpe,
                    100.0 * a.max_drawdown,
                    100.0 * e.total_return,
                    e.sharpe,
                    100.0 * e.max_drawdown
                );
            }
            (None, Some(why)) => s += &format!("test split: not available: {why}\n"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::dsr::SharpeEstimate;
    use crate::storage::FoldReturn;

    /// A study with `n` cross-validated COMPLETE trials (two folds of 64 bars of fixed
    /// pseudo-random returns each), trial 0 the best.
    fn cross_validated(db: &Path, n: usize) -> Storage {
        let mut storage = Storage::open(db).unwrap();
        let study = storage
            .create_study("cv", &[StudyDirection::Maximize])
            .unwrap();
        for i in 0..n {
            let t = storage.create_trial(study).unwrap().trial_id;
            let mut rows = Vec::new();
            for fold in 0..2i64 {
                for bar in 0..64i64 {
                    let u = ((i as f64 + 1.0) * 0.618_034 + bar as f64 * 0.754_878).fract();
                    rows.push(FoldReturn {
                        fold,
                        bar_index: bar,
                        bar_time: 1_700_000_000 + 3600 * (64 * fold + bar),
                        value: 0.01 * (u - 0.5),
                        benchmark: None,
                    });
                }
                storage.report(t, fold, 1.0 - i as f64).unwrap();
            }
            storage.put_fold_returns(t, &rows).unwrap();
            storage
                .set_trial_user_attr(t, "folds", &JsonValue::Int(2))
                .unwrap();
            storage.complete_trial(t, &[1.0 - i as f64]).unwrap();
        }
        storage
    }

    /// A CPCV-like study: 3 groups of 32 bars, each fold testing 2 of them (every bar tested
    /// twice), `n` COMPLETE trials, trial 0 the best; `value(trial, fold, bar)` its returns.
    fn overlapping(db: &Path, n: usize, value: impl Fn(usize, i64, i64) -> f64) -> Storage {
        overlapping_with(db, n, value, |_| None)
    }

    /// [`overlapping`] with equal weight's return at each bar `benchmark(bar)`.
    fn overlapping_with(
        db: &Path,
        n: usize,
        value: impl Fn(usize, i64, i64) -> f64,
        benchmark: impl Fn(i64) -> Option<f64>,
    ) -> Storage {
        let mut storage = Storage::open(db).unwrap();
        let study = storage
            .create_study("cpcv", &[StudyDirection::Maximize])
            .unwrap();
        let tested = [[0i64, 1], [0, 2], [1, 2]];
        for i in 0..n {
            let t = storage.create_trial(study).unwrap().trial_id;
            let mut rows = Vec::new();
            for (fold, groups) in tested.iter().enumerate() {
                let fold = fold as i64;
                let bars = groups.iter().flat_map(|g| 32 * g..32 * (g + 1));
                for (k, bar) in bars.enumerate() {
                    rows.push(FoldReturn {
                        fold,
                        bar_index: k as i64,
                        bar_time: 1_700_000_000 + 3600 * bar,
                        value: value(i, fold, bar),
                        benchmark: benchmark(bar),
                    });
                }
                storage.report(t, fold, 1.0 - i as f64).unwrap();
            }
            storage.put_fold_returns(t, &rows).unwrap();
            storage.complete_trial(t, &[1.0 - i as f64]).unwrap();
        }
        storage
    }

    /// Each bar counts once, in time order, its return the mean of the folds that tested it:
    /// T of the deflated Sharpe is the 96 bars, not the 192 stored returns.
    #[test]
    fn cpcv_bars_tested_by_several_folds_count_once() {
        let dir = tempfile::tempdir().unwrap();
        let noise = |i: usize, fold: i64, bar: i64| {
            let u = ((i as f64 + 1.0) * 0.618_034 + (bar + 7 * fold) as f64 * 0.754_878).fract();
            0.01 * (u - 0.5)
        };
        let storage = overlapping(&dir.path().join("cpcv.db"), 3, noise);
        let r = study_report(&storage, "cpcv", 4).unwrap();
        assert_eq!((r.with_returns, r.bars, r.tested_per_bar), (3, 96, 2));
        let dsr = r.dsr.result.as_ref().expect("a deflated Sharpe");
        assert_eq!(dsr.estimate.periods, 96);
        // Trial 0's series: each bar's two returns averaged, in time order.
        let tested = [[0i64, 1], [0, 2], [1, 2]];
        let expected: Vec<f64> = (0..96)
            .map(|b| {
                let folds = (0..3).filter(|f: &usize| tested[*f].contains(&(b / 32)));
                folds.map(|f| noise(0, f as i64, b)).sum::<f64>() / 2.0
            })
            .collect();
        let want = SharpeEstimate::from_returns(&expected).unwrap();
        assert_eq!(dsr.estimate.sharpe, want.sharpe);
        assert!(
            r.text()
                .contains("96 bars all of them tested, a bar's return the mean of the 2 folds")
        );
    }

    /// PRUNED trials (the folds they ran) count in the deflated Sharpe's N and V, though PBO's
    /// matrix holds only COMPLETE ones; a trial whose test blocks start a few bars later
    /// (another lookback) lines up with the others on the bars all of them tested, rather than
    /// being left out.
    #[test]
    fn pruned_trials_count_in_the_deflated_sharpe_and_shorter_series_line_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut storage = cross_validated(&dir.path().join("cv.db"), 3);
        let study = storage.study("cv").unwrap().study_id;
        let rows = |seed: f64, fold: i64, bars: std::ops::Range<i64>| {
            bars.map(|bar| {
                let u = (seed * 0.618_034 + bar as f64 * 0.754_878).fract();
                FoldReturn {
                    fold,
                    bar_index: bar,
                    bar_time: 1_700_000_000 + 3600 * (64 * fold + bar),
                    value: 0.01 * (u - 0.5),
                    benchmark: None,
                }
            })
            .collect::<Vec<_>>()
        };
        // Pruned after its first fold.
        let pruned = storage.create_trial(study).unwrap().trial_id;
        storage.report(pruned, 0, -1.0).unwrap();
        storage
            .put_fold_returns(pruned, &rows(7.0, 0, 0..64))
            .unwrap();
        storage.prune_trial(pruned).unwrap();
        // Complete, each fold's first 4 bars unscored.
        let later = storage.create_trial(study).unwrap().trial_id;
        let mut all = rows(9.0, 0, 4..64);
        all.extend(rows(9.0, 1, 4..64));
        for fold in 0..2 {
            storage.report(later, fold, -5.0).unwrap();
        }
        storage.put_fold_returns(later, &all).unwrap();
        storage.complete_trial(later, &[-5.0]).unwrap();

        let r = study_report(&storage, "cv", 4).unwrap();
        assert_eq!((r.with_returns, r.pruned_with_returns, r.bars), (4, 1, 120));
        let pbo = r.pbo.result.as_ref().expect("a PBO");
        assert_eq!(pbo.strategies, 4);
        let dsr = r.dsr.result.as_ref().expect("a deflated Sharpe");
        assert_eq!(dsr.trials, 5, "every trial tried, the pruned one included");
        assert_eq!(dsr.estimate.periods, 128, "the best trial's whole series");
        assert!(
            r.text().contains("1 pruned trials' folds count"),
            "{}",
            r.text()
        );
    }

    /// A study of agents that hold the assets in a rising market, each a little noise off
    /// equal weight, selected by Sharpe over equal weight (the default objective): deflated
    /// over equal weight's returns, the best trial's luck shows; deflated over its own (which
    /// a study stored without equal weight's falls back to, saying so, and which an objective
    /// of the agent alone asks for), it looks like a find.
    #[test]
    fn an_objective_against_equal_weight_is_deflated_over_equal_weights_returns() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("bull.db");
        let n = 30;
        let ew = |bar: i64| 0.001 + 0.01 * ((bar as f64 * 0.754_878).fract() - 0.5);
        let agent = |i: usize, bar: i64| {
            ew(bar)
                + 0.0005 * (((i as f64 + 1.0) * 0.618_034 + bar as f64 * 0.414_214).fract() - 0.5)
        };
        let store = |with_benchmark: bool, objective: &str| {
            let mut storage = Storage::open(&db).unwrap();
            if let Ok(s) = storage.study("bull") {
                storage.delete_study(s.study_id).unwrap();
            }
            let study = storage
                .create_study("bull", &[StudyDirection::Maximize])
                .unwrap();
            for i in 0..n {
                let t = storage.create_trial(study).unwrap().trial_id;
                let rows: Vec<FoldReturn> = (0..2i64)
                    .flat_map(|fold| (0..256i64).map(move |bar| (fold, bar, 256 * fold + bar)))
                    .map(|(fold, bar, at)| FoldReturn {
                        fold,
                        bar_index: bar,
                        bar_time: 1_700_000_000 + 3600 * at,
                        value: agent(i, at),
                        benchmark: with_benchmark.then(|| ew(at)),
                    })
                    .collect();
                storage.put_fold_returns(t, &rows).unwrap();
                storage
                    .set_trial_user_attr(t, "objective", &JsonValue::from(objective))
                    .unwrap();
                // Trial 0 the best.
                storage.complete_trial(t, &[1.0 - i as f64]).unwrap();
            }
            study_report(&storage, "bull", 4).unwrap()
        };
        let over = store(true, "sharpe_excess");
        assert_eq!(over.dsr.returns, "over equal weight");
        assert_eq!(over.dsr.note, None);
        let d = over.dsr.result.as_ref().expect("a deflated Sharpe");
        let excess: Vec<f64> = (0..512).map(|at| agent(0, at) - ew(at)).collect();
        let want = SharpeEstimate::from_returns(&excess).unwrap();
        assert!((d.estimate.sharpe - want.sharpe).abs() < 1e-12);
        assert!(
            over.text()
                .contains("of its returns over equal weight over 512 bars")
        );

        let own = store(true, "sharpe");
        assert_eq!((own.dsr.returns, own.dsr.note.as_deref()), ("own", None));
        let d_own = own.dsr.result.as_ref().expect("a deflated Sharpe");
        assert!(
            own.text()
                .contains("of its returns (its own) over 512 bars")
        );
        eprintln!(
            "deflated Sharpe: {} over equal weight, {} own",
            d.dsr, d_own.dsr
        );
        assert!(
            d_own.dsr > d.dsr + 0.2,
            "riding the market looks like skill: {} against {}",
            d_own.dsr,
            d.dsr
        );

        let old = store(false, "sharpe_excess");
        assert_eq!(old.dsr.returns, "own");
        let note = old.dsr.note.as_deref().unwrap_or_default();
        assert!(
            note.contains("30 of the 30 trials stored their fold returns without"),
            "{note}"
        );
        assert_eq!(old.dsr.result.as_ref().map(|d| d.dsr), Some(d_own.dsr));
        assert!(old.text().contains(note));
    }

    /// The best trial never traded: the report says so, naming it, rather than "returns all
    /// equal".
    #[test]
    fn a_best_trial_that_never_traded_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let value = |i, _, bar: i64| {
            if i == 0 {
                0.0
            } else {
                0.001 * ((bar % 5) as f64 - 2.0)
            }
        };
        let storage = overlapping(&dir.path().join("flat.db"), 3, value);
        let r = study_report(&storage, "cpcv", 4).unwrap();
        assert!(r.dsr.result.is_none());
        let why = r.dsr.unavailable.as_deref().unwrap_or_default();
        assert!(why.starts_with("the best trial, #0, never traded"), "{why}");
        // Over equal weight (the default objective, its returns stored): holding cash is the
        // market's returns negated there, and still no trade.
        let market = |bar: i64| Some(0.002 * ((bar % 3) as f64 - 0.5));
        let storage = overlapping_with(&dir.path().join("flat_ew.db"), 3, value, market);
        let r = study_report(&storage, "cpcv", 4).unwrap();
        assert_eq!(r.dsr.returns, "over equal weight");
        let why = r.dsr.unavailable.as_deref().unwrap_or_default();
        assert!(why.starts_with("the best trial, #0, never traded"), "{why}");
    }

    #[test]
    fn a_cross_validated_best_trial_has_no_test_backtest_and_says_reseed() {
        let dir = tempfile::tempdir().unwrap();
        let storage = cross_validated(&dir.path().join("cv.db"), 3);
        let r = study_report(&storage, "cv", 4).unwrap();
        assert_eq!(r.best.as_ref().map(|b| b.number), Some(0));
        assert!(r.pbo.result.is_some(), "{:?}", r.pbo.unavailable);
        assert!(r.test.result.is_none());
        let why = r.test.unavailable.as_deref().unwrap_or_default();
        assert!(
            why.contains("trial #0 was cross-validated") && why.contains("study reseed"),
            "{why}"
        );
        assert!(r.text().contains("test split: not available: trial #0"));
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["test"]["unavailable"].is_string(), "{json}");
    }

    #[test]
    fn a_missing_or_absent_checkpoint_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut storage = Storage::open(dir.path().join("h.db")).unwrap();
        let study = storage
            .create_study("h", &[StudyDirection::Maximize])
            .unwrap();
        let mut t = crate::storage::NewTrial::new(TrialState::Complete);
        t.values = Some(vec![0.5]);
        storage.add_trial(study, &t).unwrap();
        let best = storage.best_trial(study).unwrap();
        let why = test_backtest(best.as_ref()).unavailable.unwrap_or_default();
        assert!(why.contains("trial #0 saved no checkpoint"), "{why}");

        let gone = dir.path().join("checkpoints").join("trial_1");
        let mut t = crate::storage::NewTrial::new(TrialState::Complete);
        t.values = Some(vec![0.9]);
        t.user_attrs = vec![(
            "checkpoint".into(),
            JsonValue::from(gone.display().to_string().as_str()),
        )];
        storage.add_trial(study, &t).unwrap();
        let best = storage.best_trial(study).unwrap();
        let section = test_backtest(best.as_ref());
        assert!(section.result.is_none());
        let why = section.unavailable.unwrap_or_default();
        assert!(
            why.contains("trial #1's checkpoint") && why.contains("trial_1"),
            "{why}"
        );

        // A directory that is not a checkpoint: the backtest's own error, not a panic.
        std::fs::create_dir_all(&gone).unwrap();
        let why = test_backtest(best.as_ref()).unavailable.unwrap_or_default();
        assert!(why.contains("model.bpk"), "{why}");
        assert_eq!(
            test_backtest(None).unavailable.as_deref(),
            Some("no COMPLETE trial")
        );
    }
}
