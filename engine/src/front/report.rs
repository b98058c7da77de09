//! A study's honest answer to "did it find anything?": the best trial with its folds, the
//! probability of backtest overfitting over the trials' out-of-sample returns, and the best
//! trial's deflated Sharpe ratio, and its saved policy against equal weight on the held-out
//! test split (`tradetune study report`).
//!
//! The returns are each trial's stored fold returns (`tradetune_fold_returns`: the per-bar
//! returns on every fold's test bars, folds in the study's fixed order), laid out as CPCV's
//! backtest paths (one for walk-forward): on each path a trial has one policy's return a bar.
//! Every trial of a study has the same folds, so on each path the series line up bar for bar,
//! which CSCV needs.

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
    /// The deflated Sharpe ratio on each backtest path, in path order (one for walk-forward),
    /// None on a path where it could not be computed: `result` is the median path's, the lower
    /// of the middle two for an even count, those paths counting lowest (`unavailable` when
    /// the median lands on one).
    pub paths: Vec<Option<f64>>,
    /// Why each path with None in `paths` has no deflated Sharpe ratio, in path order.
    pub path_errors: Vec<String>,
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
    /// a bar, in time order), on the first backtest path.
    pub bars: usize,
    /// The backtest paths: the most folds that tested one bar (CPCV's C(N − 1, k − 1); 1 for
    /// walk-forward, 0 without fold returns). Path p takes, for each group, the p-th fold that
    /// tests it; PBO pools the paths, the deflated Sharpe is the median path's.
    pub paths: usize,
    pub best: Option<BestTrial>,
    pub pbo: PboSection,
    pub dsr: DsrSection,
    /// The best trial's spread over seeds on the test split (`tradetune study reseed`).
    pub seeds: Option<super::reseed::SeedSpread>,
    /// The best trial's checkpoint against equal weight on the test split.
    pub test: TestSection,
    /// One note per row another client stored that the model refuses, set aside on its trial
    /// (`tradetune_storage::SetAside`: an infinite range, an attribute that does not parse).
    pub set_aside: Vec<String>,
}

/// The report of study `name`, PBO with `partitions` (S, even) blocks.
pub fn study_report(
    storage: &Storage,
    name: &str,
    partitions: usize,
) -> Result<StudyReport, FrontError> {
    let study = storage.study(name)?;
    // A study Optuna made with several objectives has no best trial, and its values are not
    // one objective's returns: said as such, not as "no COMPLETE trial".
    if study.directions.len() > 1 {
        return Err(FrontError::Invalid(format!(
            "the report (best trial, PBO, deflated Sharpe) is computed for single-objective \
             studies; study '{name}' has {} objectives",
            study.directions.len()
        )));
    }
    let maximize = study.directions.first() != Some(&StudyDirection::Minimize);
    // The best trial before the trials: a COMPLETE trial stays so, so the list read after it
    // holds it, while workers that finish trials in between cannot leave the report with a
    // best trial it has no returns for ("no stored fold returns" for a live study's best).
    let best = storage.best_trial(study.study_id)?;
    let trials = storage.trials(study.study_id)?;
    let complete: Vec<_> = trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .filter(|t| t.value().is_some_and(f64::is_finite))
        .collect();
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
    // Each trial's out-of-sample returns by bar, with the folds that tested each bar. CPCV
    // tests a bar in C(N − 1, k − 1) folds, each a policy of its own. Their mean would be an
    // ensemble's return, whose Sharpe ratio is higher than any one policy's (by
    // 1/√(ρ + (1 − ρ)/φ) for φ policies whose returns correlate by ρ); joined as stored, a bar
    // would count that many times, out of order, inflating the deflated Sharpe's T and putting
    // the same bars in both halves of PBO's combinations. So the returns make CPCV's backtest
    // paths (AFML §12.4): path p takes, for each group, the p-th fold (in the study's fold
    // order) that tests it ([`PathPlan`]), a complete out-of-sample record of single policies
    // in which a bar counts once. PBO pools the paths' combinations; the deflated Sharpe is the median
    // path's. Walk-forward folds test each bar once: one path. PRUNED trials keep the folds
    // they ran: they were tried, and count in the deflated Sharpe's N and V on every path.
    let mut tried: Vec<Tried> = Vec::new();
    for t in trials.iter().filter(|t| match t.state {
        TrialState::Pruned => true,
        TrialState::Complete => t.value().is_some_and(f64::is_finite),
        _ => false,
    }) {
        let mut bars: BTreeMap<i64, Vec<Tested>> = BTreeMap::new();
        for x in storage.fold_returns(t.trial_id)? {
            bars.entry(x.bar_time).or_default().push(Tested {
                fold: x.fold,
                value: x.value,
                excess: x.benchmark.map(|b| x.value - b),
            });
        }
        if bars.is_empty() {
            continue;
        }
        for folds in bars.values_mut() {
            folds.sort_by_key(|x| x.fold);
        }
        tried.push(Tried {
            number: t.number,
            complete: t.state == TrialState::Complete,
            bars,
            sharpe_path: 0,
        });
    }
    let plan = PathPlan::of(&tried);
    let paths = plan.paths;
    // A pruned trial stands in on every path by the first path on which it has a Sharpe ratio
    // (its folds may leave it none on the others); one that has none anywhere (too few bars,
    // no variation) is left out rather than leaving the study without a deflated Sharpe.
    tried.retain_mut(|t| {
        if t.complete {
            return true;
        }
        let own = |p: usize| t.path(&plan, p).map(|(_, x)| x.value).collect::<Vec<f64>>();
        match (0..paths).find(|p| trial_sharpe(&own(*p)).is_ok()) {
            Some(p) => {
                t.sharpe_path = p;
                true
            }
            None => false,
        }
    });
    let without_benchmark = tried.iter().filter(|t| !t.has_benchmark()).count();
    // PBO compares the COMPLETE trials bar by bar, on each path: on the bars every one of them
    // tested (a searched `env.lookback` leaves each trial's test blocks a different number of
    // first bars to skip).
    let complete_tried: Vec<&Tried> = tried.iter().filter(|t| t.complete).collect();
    let path_series: Vec<Vec<Vec<f64>>> = (0..paths)
        .map(|p| {
            let on_path: Vec<BTreeMap<i64, f64>> = (complete_tried.iter())
                .map(|t| t.path(&plan, p).map(|(time, x)| (time, x.value)).collect())
                .collect();
            let mut common: Option<BTreeSet<i64>> = None;
            for returns in &on_path {
                let bars: BTreeSet<i64> = returns.keys().copied().collect();
                common = Some(match common {
                    None => bars,
                    Some(c) => c.intersection(&bars).copied().collect(),
                });
            }
            let common = common.unwrap_or_default();
            (on_path.iter())
                .map(|returns| common.iter().map(|bar| returns[bar]).collect())
                .collect()
        })
        .collect();
    let with_returns = complete_tried.len();
    let bars = (path_series.first())
        .and_then(|series| series.first())
        .map_or(0, Vec::len);
    // Where there are several paths, which one a refusal is about.
    let on_path = |p: usize, why: String| {
        if paths > 1 {
            format!("backtest path {} of {paths}: {why}", p + 1)
        } else {
            why
        }
    };
    // The deflated Sharpe: the best trial's whole series on each path, deflated by every trial
    // tried; over equal weight's returns where the objective is against it and every trial
    // stored them. (PBO ranks the trials by their own returns' Sharpe ratio: on the same bars
    // equal weight's is the same for every trial, so the ranks are the same.)
    let over_equal_weight = against_equal_weight && without_benchmark == 0;
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

    let pbo = if with_returns < 2 {
        PboSection {
            result: None,
            histogram: Vec::new(),
            unavailable: Some(format!(
                "needs at least 2 COMPLETE trials with stored fold returns (a study with \
                 [evaluation] walk_forward or cpcv); this one has {with_returns}"
            )),
        }
    } else {
        let mut parts = Vec::with_capacity(paths);
        let mut failed = None;
        for (p, series) in path_series.iter().enumerate() {
            match cscv(series, partitions) {
                Ok(part) => parts.push(part),
                Err(e) => {
                    failed = Some(on_path(p, e.to_string()));
                    break;
                }
            }
        }
        match (failed, Pbo::pooled(parts)) {
            (None, Some(p)) => PboSection {
                histogram: logit_histogram(&p.logits, 10),
                result: Some(p),
                unavailable: None,
            },
            (why, _) => PboSection {
                result: None,
                histogram: Vec::new(),
                unavailable: Some(why.unwrap_or_else(|| {
                    "the backtest paths' CSCV results do not pool (other trials or \
                     partitions on each)"
                        .into()
                })),
            },
        }
    };
    let selected = best
        .as_ref()
        .and_then(|b| tried.iter().position(|t| t.number == b.number));
    let never_traded = |number: i64| {
        format!(
            "the best trial, #{number}, never traded out of sample (its returns are all 0): its \
             Sharpe ratio is 0, with no track record to deflate"
        )
    };
    let section = |result: Result<Deflated, String>, paths: Vec<Option<f64>>, why: Vec<String>| {
        let (result, unavailable) = match result {
            Ok(d) => (Some(d), None),
            Err(why) => (None, Some(why)),
        };
        DsrSection {
            result,
            unavailable,
            paths,
            path_errors: why,
            returns: dsr_returns,
            note: dsr_note.clone(),
        }
    };
    let dsr = match selected {
        None => section(
            Err("the best trial has no stored fold returns".into()),
            Vec::new(),
            Vec::new(),
        ),
        // Asked of its own returns on every fold (over equal weight, an agent that held cash
        // has the market's returns negated, not zeros).
        Some(i) if tried[i].never_traded() => {
            section(Err(never_traded(tried[i].number)), Vec::new(), Vec::new())
        }
        Some(i) => {
            let on_paths: Vec<Result<Deflated, String>> =
                (deflate_on_paths(&tried, &plan, i, over_equal_weight).into_iter())
                    .enumerate()
                    .map(|(p, r)| {
                        r.map_err(|(trial, error)| {
                            on_path(
                                p,
                                match (error, trial) {
                                    (DsrTrialError::Trial { source, .. }, Some(n)) => {
                                        format!("trial #{n}: {source}")
                                    }
                                    (DsrTrialError::NeverTraded { .. }, Some(n)) => never_traded(n),
                                    (e, _) => e.to_string(),
                                },
                            )
                        })
                    })
                    .collect();
            let dsrs: Vec<Option<f64>> = on_paths
                .iter()
                .map(|r| r.as_ref().ok().map(|d| d.dsr))
                .collect();
            let why: Vec<String> = on_paths
                .iter()
                .filter_map(|r| r.as_ref().err().cloned())
                .collect();
            let median = lower_median(&dsrs).and_then(|m| on_paths.get(m).cloned());
            let median = median.unwrap_or_else(|| Err("no backtest path".into()));
            section(median, dsrs, why)
        }
    };
    let test = test_backtest(best.as_ref());
    Ok(StudyReport {
        set_aside: crate::storage::set_aside_notes(&trials),
        study: name.to_owned(),
        direction: if maximize { "maximize" } else { "minimize" },
        trials: trials.len(),
        complete: complete.len(),
        with_returns,
        pruned_with_returns,
        bars,
        paths,
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

/// One fold's out-of-sample return at a bar.
struct Tested {
    fold: i64,
    /// The agent's return.
    value: f64,
    /// The same less equal weight's, where the fold stored it.
    excess: Option<f64>,
}

/// One trial's out-of-sample returns: at each bar (by time), the folds that tested it, in the
/// study's fold order.
struct Tried {
    number: i64,
    complete: bool,
    bars: BTreeMap<i64, Vec<Tested>>,
    /// For a PRUNED trial, the path whose series stands in for it on a path where its folds
    /// leave it no Sharpe ratio.
    sharpe_path: usize,
}

/// Which fold each of CPCV's backtest paths takes at each bar (AFML §12.4: path p takes, for
/// each group, the p-th split in fold order that tests it), the groups read from the stored
/// returns: a bar's group is tested by every fold that tested the bar in any trial, except at
/// a test block's first bars, which a fold's lookback skips; those take the folds of the next
/// bar that all its group's folds tested.
struct PathPlan {
    /// By bar time, the folds that test its group, in fold order.
    folds: BTreeMap<i64, Vec<i64>>,
    /// The most folds that test one group: the backtest paths (C(N − 1, k − 1) for CPCV, 1
    /// for walk-forward, 0 without fold returns).
    paths: usize,
}

impl PathPlan {
    fn of(tried: &[Tried]) -> PathPlan {
        let mut tested: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
        for t in tried {
            for (time, folds) in &t.bars {
                tested
                    .entry(*time)
                    .or_default()
                    .extend(folds.iter().map(|x| x.fold));
            }
        }
        let paths = tested.values().map(BTreeSet::len).max().unwrap_or(0);
        let mut folds = BTreeMap::new();
        let mut group: Option<Vec<i64>> = None;
        for (time, set) in tested.iter().rev() {
            if set.len() == paths {
                group = Some(set.iter().copied().collect());
            }
            let of_group = group
                .clone()
                .unwrap_or_else(|| set.iter().copied().collect());
            folds.insert(*time, of_group);
        }
        PathPlan { folds, paths }
    }
}

impl Tried {
    /// Backtest path `p`, in time order: at each bar, the return of the path's fold for the
    /// bar's group, where that fold tested the bar (not a bar its lookback skipped, nor a fold
    /// a pruned trial never ran).
    fn path<'a>(
        &'a self,
        plan: &'a PathPlan,
        p: usize,
    ) -> impl Iterator<Item = (i64, &'a Tested)> + 'a {
        self.bars.iter().filter_map(move |(time, folds)| {
            let fold = plan.folds.get(time)?.get(p)?;
            folds.iter().find(|x| x.fold == *fold).map(|x| (*time, x))
        })
    }

    /// Whether every fold stored equal weight's returns beside the agent's.
    fn has_benchmark(&self) -> bool {
        (self.bars.values()).all(|folds| folds.iter().all(|x| x.excess.is_some()))
    }

    /// Whether every return it stored is 0: it never traded out of sample.
    fn never_traded(&self) -> bool {
        (self.bars.values()).all(|folds| folds.iter().all(|x| x.value == 0.0))
    }
}

/// The deflated Sharpe ratio of `tried[best]` on each of `plan`'s backtest paths, in path
/// order (by every trial's series on that path: the returns over equal weight's where
/// `over_equal_weight`), or why not on that path: the trial to blame (by number) where the
/// error names one, and the error. Every trial counts in N and V on every path:
/// a PRUNED trial that gives no Sharpe ratio on a path (its folds left it too few bars
/// there) by its series on the path that does ([`Tried::sharpe_path`]).
fn deflate_on_paths(
    tried: &[Tried],
    plan: &PathPlan,
    best: usize,
    over_equal_weight: bool,
) -> Vec<Result<Deflated, (Option<i64>, DsrTrialError)>> {
    let mut on_paths = Vec::with_capacity(plan.paths);
    let series_on = |t: &Tried, p: usize| -> Vec<f64> {
        (t.path(plan, p))
            .map(|(_, x)| x.excess.filter(|_| over_equal_weight).unwrap_or(x.value))
            .collect()
    };
    for p in 0..plan.paths {
        let (mut numbers, mut series, mut chosen) = (Vec::new(), Vec::new(), None);
        for (j, t) in tried.iter().enumerate() {
            let mut returns = series_on(t, p);
            if !t.complete && trial_sharpe(&returns).is_err() {
                returns = series_on(t, t.sharpe_path);
            }
            if j == best {
                chosen = Some(series.len());
            }
            numbers.push(t.number);
            series.push(returns);
        }
        on_paths.push(
            deflate_best(&series, chosen)
                .map(|b| b.deflated)
                .map_err(|error| {
                    let trial = match &error {
                        DsrTrialError::Trial { trial, .. }
                        | DsrTrialError::NeverTraded { trial } => numbers.get(*trial).copied(),
                        _ => None,
                    };
                    (trial, error)
                }),
        );
    }
    on_paths
}

/// The path at the lower median of `dsrs` (the lower of the middle two for an even count), a
/// path without a deflated Sharpe (None) counting below every other: a failure the median
/// lands on is the report's, never passed over for a better path. None for no paths.
fn lower_median(dsrs: &[Option<f64>]) -> Option<usize> {
    let mut order: Vec<usize> = (0..dsrs.len()).collect();
    order.sort_by(|a, b| match (dsrs[*a], dsrs[*b]) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (x, y) => x.is_some().cmp(&y.is_some()),
    });
    order.get(order.len().checked_sub(1)? / 2).copied()
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

    /// The deflated Sharpe ratio across the backtest paths, for people (None for one path).
    pub fn paths_text(&self) -> Option<String> {
        let computed: Vec<f64> = self.paths.iter().flatten().copied().collect();
        let (lo, _, hi) = super::min_median_max(&computed).filter(|_| self.paths.len() > 1)?;
        let each: Vec<String> = (self.paths.iter())
            .map(|d| d.map_or_else(|| "none".into(), |d| format!("{d:.3}")))
            .collect();
        let n = self.paths.len();
        let mut text = format!(
            "the {} of {n} backtest paths, from {lo:.3} to {hi:.3}: {}",
            if n.is_multiple_of(2) {
                "lower middle"
            } else {
                "median"
            },
            each.join(", ")
        );
        if !self.path_errors.is_empty() {
            text += &format!(
                " (a path without one counts lowest; {})",
                self.path_errors.join("; ")
            );
        }
        Some(text)
    }
}

impl StudyReport {
    /// How a bar's returns were used when several folds tested it ("" when each bar was
    /// tested once).
    pub fn bars_note(&self) -> String {
        if self.paths > 1 {
            format!(
                ", each by {0} folds: {0} backtest paths of single policies, a bar one fold's \
                 return on each; PBO pools the paths, the deflated Sharpe is the median path's",
                self.paths
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
                );
                if let Some(spread) = self.dsr.paths_text() {
                    s += &format!("  {spread}\n");
                }
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
        for note in &self.set_aside {
            s += &format!("note: {note}\n");
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

    /// Backtest path `p` of trial `i` in [`overlapping`] (every bar scored): at each bar, the
    /// p-th of the two folds that test its group.
    fn fixture_path(value: impl Fn(usize, i64, i64) -> f64, i: usize, p: usize) -> Vec<f64> {
        let tested = [[0i64, 1], [0, 2], [1, 2]];
        (0..96)
            .map(|b| {
                let mut folds = (0..3i64).filter(|f| tested[*f as usize].contains(&(b / 32)));
                let fold = folds.nth(p).expect("two folds test each group");
                value(i, fold, b)
            })
            .collect()
    }

    /// [`overlapping`] with equal weight's return at each bar `benchmark(bar)`.
    fn overlapping_with(
        db: &Path,
        n: usize,
        value: impl Fn(usize, i64, i64) -> f64,
        benchmark: impl Fn(i64) -> Option<f64>,
    ) -> Storage {
        overlapping_skipping(db, n, 0, value, benchmark)
    }

    /// [`overlapping_with`] where each fold leaves the first `skip` bars of each of its test
    /// blocks unscored (its lookback), adjacent groups making one block.
    fn overlapping_skipping(
        db: &Path,
        n: usize,
        skip: i64,
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
                let bars = groups.iter().flat_map(|g| {
                    // A block starts at a group whose previous one the fold does not test.
                    let starts = !groups.contains(&(g - 1));
                    32 * g + if starts { skip } else { 0 }..32 * (g + 1)
                });
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

    /// CPCV's backtest paths: each bar counts once on each, in time order, with one fold's
    /// return (path p the p-th fold that tested it), so T of the deflated Sharpe is the 96 bars,
    /// not the 192 stored returns, and its Sharpe ratio is one policy's, not the mean of two
    /// policies' (an ensemble's, higher where their noise differs). The result is the median
    /// path's; PBO pools both paths' combinations.
    #[test]
    fn cpcv_bars_make_backtest_paths_of_single_policies() {
        let dir = tempfile::tempdir().unwrap();
        // Every fold's policy earns the same drift plus noise of its own.
        let noise = |i: usize, fold: i64, bar: i64| {
            let u = ((i as f64 + 1.0) * 0.618_034 + (bar + 7 * fold) as f64 * 0.754_878).fract();
            0.0015 + 0.01 * (u - 0.5)
        };
        let storage = overlapping(&dir.path().join("cpcv.db"), 3, noise);
        let r = study_report(&storage, "cpcv", 4).unwrap();
        assert_eq!((r.with_returns, r.bars, r.paths), (3, 96, 2));
        let dsr = r.dsr.result.as_ref().expect("a deflated Sharpe");
        assert_eq!(dsr.estimate.periods, 96);
        assert_eq!(r.dsr.paths.len(), 2);
        let path = |i: usize, p: usize| fixture_path(noise, i, p);
        let on_path: Vec<Deflated> = (0..2)
            .map(|p| {
                let series: Vec<Vec<f64>> = (0..3).map(|i| path(i, p)).collect();
                deflate_best(&series, Some(0)).unwrap().deflated
            })
            .collect();
        assert_eq!(
            r.dsr.paths,
            vec![Some(on_path[0].dsr), Some(on_path[1].dsr)]
        );
        let median = if on_path[0].dsr <= on_path[1].dsr {
            0
        } else {
            1
        };
        assert_eq!(dsr.estimate.sharpe, on_path[median].estimate.sharpe);
        assert_eq!(dsr.dsr, on_path[median].dsr);
        // The mean of each bar's two returns, which the report took before, has the higher
        // Sharpe ratio of an ensemble: above both paths'.
        let mean: Vec<f64> = (0..96)
            .map(|b| (path(0, 0)[b] + path(0, 1)[b]) / 2.0)
            .collect();
        let ensemble = SharpeEstimate::from_returns(&mean).unwrap().sharpe;
        assert!(
            on_path.iter().all(|d| d.estimate.sharpe < ensemble),
            "{ensemble} against {on_path:?}"
        );
        // PBO: both paths' 6 combinations.
        let pbo = r.pbo.result.as_ref().expect("a PBO");
        assert_eq!((pbo.combinations, pbo.strategies), (12, 3));
        let parts: Vec<Pbo> = (0..2)
            .map(|p| cscv(&(0..3).map(|i| path(i, p)).collect::<Vec<_>>(), 4).unwrap())
            .collect();
        assert!((pbo.pbo - (parts[0].pbo + parts[1].pbo) / 2.0).abs() < 1e-12);
        let text = r.text();
        assert!(
            text.contains("96 bars all of them tested, each by 2 folds: 2 backtest paths"),
            "{text}"
        );
        assert!(
            text.contains("the lower middle of 2 backtest paths, from "),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["paths"], 2);
        assert_eq!(json["dsr"]["paths"].as_array().map(Vec::len), Some(2));
    }

    /// A fold's first bars of a test block, which its lookback skips, stay off that fold's
    /// paths: path p holds the p-th fold of each group (AFML §12.4) where it tested the bar,
    /// not whichever fold did. Here fold 1 (groups 0 and 2) skips group 2's first 3 bars,
    /// which fold 2 (groups 1 and 2, one block) tests: they are on path 1 (fold 2's), not on
    /// path 0 (fold 1's).
    #[test]
    fn bars_a_fold_skipped_stay_off_its_backtest_path() {
        let dir = tempfile::tempdir().unwrap();
        let noise = |i: usize, fold: i64, bar: i64| {
            let u = ((i as f64 + 1.0) * 0.618_034 + (bar + 7 * fold) as f64 * 0.754_878).fract();
            0.001 * i as f64 + 0.01 * (u - 0.5)
        };
        let storage = overlapping_skipping(&dir.path().join("skip.db"), 3, 3, noise, |_| None);
        let r = study_report(&storage, "cpcv", 4).unwrap();
        assert_eq!(r.paths, 2);
        // Group g's folds in fold order: path p takes the p-th.
        let group_folds = [[0i64, 1], [0, 2], [1, 2]];
        let tested = [[0i64, 1], [0, 2], [1, 2]];
        let scored = |fold: i64, bar: i64| {
            let groups = tested[fold as usize];
            let g = bar / 32;
            groups.contains(&g) && (groups.contains(&(g - 1)) || bar % 32 >= 3)
        };
        let path = |i: usize, p: usize| -> Vec<f64> {
            (0..96)
                .filter_map(|b: i64| {
                    let fold = group_folds[(b / 32) as usize][p];
                    scored(fold, b).then(|| noise(i, fold, b))
                })
                .collect()
        };
        // No fold scored bars 0–2; on path 0 group 2's fold 1 skipped 64–66 (fold 2 scored
        // them, on path 1), on path 1 group 1's fold 2 skipped 32–34 (fold 0 scored them, on
        // path 0). Taking a bar's p-th scoring fold instead would put 64–66 on path 0.
        assert_eq!((path(0, 0).len(), path(0, 1).len()), (90, 90));
        let dsr: Vec<f64> = (0..2)
            .map(|p| {
                let series: Vec<Vec<f64>> = (0..3).map(|i| path(i, p)).collect();
                deflate_best(&series, Some(0)).unwrap().deflated.dsr
            })
            .collect();
        assert_eq!(r.dsr.paths, dsr.into_iter().map(Some).collect::<Vec<_>>());
        assert_eq!(r.bars, 90);
    }

    /// A CPCV trial pruned after its first fold has returns on path 0 alone (fold 0 is the
    /// first of groups 0 and 1, the second of none): it still counts in N and V on path 1,
    /// by its path-0 series, so both paths deflate by the same 4 trials.
    #[test]
    fn a_pruned_cpcv_trial_counts_on_every_path() {
        let dir = tempfile::tempdir().unwrap();
        let noise = |i: usize, fold: i64, bar: i64| {
            let u = ((i as f64 + 1.0) * 0.618_034 + (bar + 7 * fold) as f64 * 0.754_878).fract();
            0.0005 + 0.01 * (u - 0.5)
        };
        let mut storage = overlapping(&dir.path().join("pruned.db"), 3, noise);
        let study = storage.study("cpcv").unwrap().study_id;
        let pruned = storage.create_trial(study).unwrap().trial_id;
        let rows: Vec<FoldReturn> = (0..64i64)
            .map(|bar| FoldReturn {
                fold: 0,
                bar_index: bar,
                bar_time: 1_700_000_000 + 3600 * bar,
                value: noise(9, 0, bar),
                benchmark: None,
            })
            .collect();
        storage.report(pruned, 0, -1.0).unwrap();
        storage.put_fold_returns(pruned, &rows).unwrap();
        storage.prune_trial(pruned).unwrap();
        let r = study_report(&storage, "cpcv", 4).unwrap();
        assert_eq!((r.paths, r.pruned_with_returns), (2, 1));
        let path = |i: usize, p: usize| fixture_path(noise, i, p);
        let stand_in: Vec<f64> = (0..64).map(|b| noise(9, 0, b)).collect();
        let want: Vec<f64> = (0..2)
            .map(|p| {
                let mut series: Vec<Vec<f64>> = (0..3).map(|i| path(i, p)).collect();
                series.push(stand_in.clone());
                let d = deflate_best(&series, Some(0)).unwrap().deflated;
                assert_eq!(d.trials, 4);
                d.dsr
            })
            .collect();
        assert_eq!(r.dsr.paths, want.into_iter().map(Some).collect::<Vec<_>>());
        assert_eq!(r.dsr.result.as_ref().map(|d| d.trials), Some(4));
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

    /// A study of several objectives (Optuna's `directions=[…]`) is refused as such, where it
    /// was reported as one without a COMPLETE trial.
    #[test]
    fn a_multi_objective_study_is_refused_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let mut storage = Storage::open(dir.path().join("multi.db")).unwrap();
        let study = storage
            .create_study(
                "multi",
                &[StudyDirection::Maximize, StudyDirection::Minimize],
            )
            .unwrap();
        let t = storage.create_trial(study).unwrap().trial_id;
        storage.complete_trial(t, &[1.0, 2.0]).unwrap();
        let e = study_report(&storage, "multi", 16).unwrap_err().to_string();
        assert!(
            e.contains("single-objective") && e.contains("has 2 objectives"),
            "{e}"
        );
    }

    /// A path without a deflated Sharpe counts lowest: the median never passes it over for a
    /// better path.
    #[test]
    fn the_median_path_counts_paths_without_a_deflated_sharpe_lowest() {
        assert_eq!(lower_median(&[]), None);
        assert_eq!(
            lower_median(&[Some(0.3), Some(0.1), Some(0.2), Some(0.4)]),
            Some(2)
        );
        assert_eq!(lower_median(&[Some(0.9), None, Some(0.5)]), Some(2));
        assert_eq!(lower_median(&[Some(0.9), None]), Some(1));
        assert_eq!(lower_median(&[None, Some(0.9), None]), Some(2));
    }

    /// The best trial traded on one backtest path and never on the other: that path has no
    /// deflated Sharpe, named as such, and with two paths the lower middle one is it, so the
    /// report has none rather than the other path's.
    #[test]
    fn a_path_the_best_trial_never_traded_on_is_named_and_counts_lowest() {
        let dir = tempfile::tempdir().unwrap();
        // Path 0 of trial 0 is fold 0 on groups 0 and 1, fold 1 on group 2: all zero there.
        let value = |i: usize, fold: i64, bar: i64| {
            if i == 0 && (fold == 0 || (fold == 1 && bar >= 64)) {
                0.0
            } else {
                let u =
                    ((i as f64 + 1.0) * 0.618_034 + (bar + 7 * fold) as f64 * 0.754_878).fract();
                0.01 * (u - 0.5)
            }
        };
        let storage = overlapping(&dir.path().join("half.db"), 3, value);
        let r = study_report(&storage, "cpcv", 4).unwrap();
        assert_eq!(r.paths, 2);
        assert!(r.dsr.result.is_none());
        assert!(
            matches!(r.dsr.paths[..], [None, Some(_)]),
            "{:?}",
            r.dsr.paths
        );
        let why = r.dsr.unavailable.as_deref().unwrap_or_default();
        assert!(
            why.starts_with("backtest path 1 of 2: the best trial, #0, never traded"),
            "{why}"
        );
        assert_eq!(r.dsr.path_errors, vec![why.to_owned()]);
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
