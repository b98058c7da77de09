//! Hyperparameter importance by PED-ANOVA, Optuna 5.0's default importance evaluator
//! (`optuna.importance.PedAnovaImportanceEvaluator`, in
//! `optuna/importance/_ped_anova/evaluator.py`), reimplemented to give the same numbers as
//! `optuna.importance.get_param_importances(study, evaluator=PedAnovaImportanceEvaluator())`
//! on the same database.
//!
//! PED-ANOVA (S. Watanabe, A. Bansal, F. Hutter: "PED-ANOVA: Efficiently Quantifying
//! Hyperparameter Importance in Arbitrary Subspaces", IJCAI 2023, arXiv:2304.10255) measures
//! how much the distribution of a parameter among the *top* trials (the best
//! `target_quantile`, γ′ in the paper) differs from its distribution among the trials of the
//! *region* (the best `region_quantile`, γ; all trials by default): the Pearson divergence
//! `Σ p_region · (p_top / p_region − 1)²` between two Parzen estimators on a grid
//! ([`scott_parzen`]), scaled by `(γ′/γ)²`. Parameters that appear only in some trials
//! (conditional ones) or whose range changed during the study are split into *regimes*, one
//! per distribution, as in Conditional PED-ANOVA (arXiv:2601.20800), which Optuna 5.0
//! implements: each regime with at least two region trials adds `α² / β` times its
//! divergence, α and β being its shares of the top and region trials.
//!
//! As in Optuna: only COMPLETE trials with a finite value count; the top trials are those at
//! or better than the `⌈γ′·n⌉`-th best value (ties included); the importances are normalised
//! to sum to 1, or are all equal when every divergence is zero. One difference: Optuna warns
//! and returns equal importances for a study with fewer than two such trials; this module
//! refuses with [`ImportanceError::TooFewTrials`], since equal numbers would read as a result.
//! Multi-objective studies (which Optuna ranks by non-domination and hypervolume) are refused.

mod scott_parzen;

use std::sync::Arc;

use tradetune_storage::model::{OptunaDistribution, StudyDirection, TrialState};
use tradetune_storage::{Storage, StorageError, TrialParam, TrialRecord};

use scott_parzen::{count_on_grid, grid_pdf};

/// Grid points of a numerical parameter's range (Optuna's `_n_steps`).
pub const N_STEPS: usize = 50;
/// Weight of the prior kernel of every estimator (Optuna's `_prior_weight`).
pub const PRIOR_WEIGHT: f64 = 1.0;
/// A regime (one distribution of a parameter, or its absence) with fewer region trials than
/// this is left out (Optuna's `_min_n_trials_in_regime`).
pub const MIN_TRIALS_IN_REGIME: usize = 2;
/// Fewer COMPLETE trials with a finite value than this and there is nothing to compare.
pub const MIN_TRIALS: usize = 2;
/// Added to both densities before their ratio is taken (as Optuna does).
const PDF_EPS: f64 = 1e-12;

/// Why importances could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum ImportanceError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(
        "parameter importance needs at least {needed} COMPLETE trials with a finite value; \
         study `{study}` has {found}"
    )]
    TooFewTrials {
        study: String,
        found: usize,
        needed: usize,
    },
    #[error(
        "parameter importance is computed for single-objective studies; study `{study}` has \
         {objectives} objectives"
    )]
    MultiObjective { study: String, objectives: usize },
    #[error(
        "PED-ANOVA needs 0 < target_quantile < region_quantile <= 1 (got target_quantile = \
         {target}, region_quantile = {region})"
    )]
    Quantiles { target: f64, region: f64 },
    #[error("trial #{number}, parameter `{param}`: {message}")]
    BadValue {
        number: i64,
        param: String,
        message: String,
    },
}

/// The PED-ANOVA evaluator's settings; [`Default`] is Optuna's
/// `PedAnovaImportanceEvaluator()`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PedAnova {
    /// γ′: importance of reaching the best `target_quantile` of the trials (0.1).
    pub target_quantile: f64,
    /// γ: the region the importance is measured in, as the best `region_quantile` of the
    /// trials (1.0: all of them). Used only with `evaluate_on_local`.
    pub region_quantile: f64,
    /// Compare the top trials with the region's trials (true, Optuna's default) or with the
    /// uniform distribution over the search space (false).
    pub evaluate_on_local: bool,
}

impl Default for PedAnova {
    fn default() -> Self {
        PedAnova {
            target_quantile: 0.1,
            region_quantile: 1.0,
            evaluate_on_local: true,
        }
    }
}

/// One trial as the evaluator reads it.
#[derive(Debug, Clone, Copy)]
pub struct ImportanceTrial<'a> {
    pub number: i64,
    pub state: TrialState,
    /// The (first) objective value, if stored.
    pub value: Option<f64>,
    /// Its parameters with their distributions, as stored.
    pub params: &'a [TrialParam],
}

impl<'a> From<&'a TrialRecord> for ImportanceTrial<'a> {
    fn from(t: &'a TrialRecord) -> Self {
        ImportanceTrial {
            number: t.number,
            state: t.state,
            value: t.value(),
            params: &t.params,
        }
    }
}

/// One parameter's importance.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamImportance {
    pub name: String,
    /// Normalised: the importances of a study sum to 1 (Optuna's `get_param_importances`).
    pub importance: f64,
    /// Before normalisation (Optuna's `normalize=False`).
    pub raw: f64,
}

/// The importances of a study's parameters, most important first (ties by name).
#[derive(Debug, Clone, PartialEq)]
pub struct Importances {
    pub params: Vec<ParamImportance>,
    /// COMPLETE trials with a finite value that were analysed.
    pub n_trials: usize,
    /// Of those, the top (target) trials.
    pub n_top: usize,
    /// Of those, the region trials.
    pub n_region: usize,
    /// One note per row of the trials set aside on reading (`tradetune_storage::SetAside`):
    /// such a parameter (an infinite range another client stored) is not in the analysis.
    pub set_aside: Vec<String>,
}

impl Importances {
    /// Every raw importance is zero, so all are reported equal: no parameter tells the top
    /// trials apart (e.g. every trial has the same value). Optuna warns in this case.
    pub fn all_equal(&self) -> bool {
        self.params.iter().all(|p| p.raw == 0.0)
    }
}

/// The importances of the parameters of the study named `study` in `storage`, by the
/// evaluator `ped_anova`, from the study's COMPLETE trials.
pub fn study_importances(
    storage: &Storage,
    study: &str,
    ped_anova: &PedAnova,
) -> Result<Importances, ImportanceError> {
    let record = storage.study(study)?;
    let [direction] = record.directions[..] else {
        return Err(ImportanceError::MultiObjective {
            study: study.to_owned(),
            objectives: record.directions.len(),
        });
    };
    let trials = storage.trials(record.study_id)?;
    let set_aside = tradetune_storage::set_aside_notes(&trials);
    let trials: Vec<ImportanceTrial<'_>> = trials.iter().map(ImportanceTrial::from).collect();
    let mut importances = ped_anova.evaluate(study, direction, &trials)?;
    importances.set_aside = set_aside;
    Ok(importances)
}

impl PedAnova {
    /// The importances of the parameters of `trials` (trials of any state; only COMPLETE ones
    /// are read) of a single-objective study `study` (named in errors) optimised in
    /// `direction`.
    pub fn evaluate(
        &self,
        study: &str,
        direction: StudyDirection,
        trials: &[ImportanceTrial<'_>],
    ) -> Result<Importances, ImportanceError> {
        let (target_q, region_q) = (self.target_quantile, self.region_quantile);
        if !(0.0 < target_q && target_q < region_q && region_q <= 1.0) {
            return Err(ImportanceError::Quantiles {
                target: target_q,
                region: region_q,
            });
        }
        let complete: Vec<&ImportanceTrial<'_>> = trials
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .collect();
        // Every parameter of a COMPLETE trial is assessed, also one seen only with a
        // non-finite value (it then scores 0).
        let mut names: Vec<&str> = complete
            .iter()
            .flat_map(|t| t.params.iter().map(|p| p.name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        let finite: Vec<(&ImportanceTrial<'_>, f64)> = complete
            .iter()
            .filter_map(|t| {
                t.value
                    .filter(|v| v.is_finite())
                    .map(|v| (*t, direction.loss(v)))
            })
            .collect();
        if finite.len() < MIN_TRIALS {
            return Err(ImportanceError::TooFewTrials {
                study: study.to_owned(),
                found: finite.len(),
                needed: MIN_TRIALS,
            });
        }
        let losses: Vec<f64> = finite.iter().map(|(_, l)| *l).collect();
        let in_top = top_quantile(&losses, target_q);
        let in_region = top_quantile(&losses, region_q);
        let region: Vec<usize> = (0..finite.len()).filter(|&i| in_region[i]).collect();
        let n_top = (0..finite.len())
            .filter(|&i| in_top[i] && in_region[i])
            .count();
        let n_region = region.len();
        // (γ′/γ)² of Theorem 4.2 (Conditional PED-ANOVA), as the realised shares.
        let quantile = n_top as f64 / n_region as f64;

        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let mut importance = 0.0;
            for (dist, members) in regimes(name, &region, &finite) {
                let Some(dist) = dist else { continue };
                let top: Vec<usize> = members.iter().copied().filter(|&i| in_top[i]).collect();
                if dist.single() || top.is_empty() {
                    continue;
                }
                let alpha = top.len() as f64 / n_top as f64;
                let beta = members.len() as f64 / n_region as f64;
                let divergence = self.pearson_divergence(name, dist, &top, &members, &finite)?;
                importance += alpha.powi(2) / beta * divergence;
            }
            out.push((name.to_owned(), importance * quantile.powi(2)));
        }
        // Optuna's `get_param_importances(normalize=True)`.
        let sum: f64 = out.iter().map(|(_, v)| v).sum();
        let n = out.len() as f64;
        let mut params: Vec<ParamImportance> = out
            .into_iter()
            .map(|(name, raw)| ParamImportance {
                name,
                importance: if sum == 0.0 { 1.0 / n } else { raw / sum },
                raw,
            })
            .collect();
        params.sort_by(|a, b| {
            b.importance
                .total_cmp(&a.importance)
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(Importances {
            params,
            n_trials: finite.len(),
            n_top,
            n_region,
            set_aside: Vec::new(),
        })
    }

    /// `Σ p_region (p_top / p_region − 1)²` on the grid of `dist`, between the estimators of
    /// the top trials and of the region's trials (or the uniform distribution, when not
    /// evaluating locally).
    fn pearson_divergence(
        &self,
        name: &str,
        dist: &OptunaDistribution,
        top: &[usize],
        region: &[usize],
        trials: &[(&ImportanceTrial<'_>, f64)],
    ) -> Result<f64, ImportanceError> {
        let categorical = matches!(dist, OptunaDistribution::Categorical(_));
        let pdf = |members: &[usize]| -> Result<Vec<f64>, ImportanceError> {
            let mut values = Vec::with_capacity(members.len());
            for &i in members {
                let t = trials[i].0;
                // Members of a regime have the parameter.
                if let Some(p) = t.params.iter().find(|p| p.name == name) {
                    values.push(p.internal);
                }
            }
            let counts = count_on_grid(dist, &values, N_STEPS).map_err(|message| {
                ImportanceError::BadValue {
                    number: first_bad(name, dist, members, trials),
                    param: name.to_owned(),
                    message,
                }
            })?;
            Ok(grid_pdf(&counts, categorical, PRIOR_WEIGHT)
                .into_iter()
                .map(|p| p + PDF_EPS)
                .collect())
        };
        let p_top = pdf(top)?;
        let p_local = if self.evaluate_on_local {
            pdf(region)?
        } else {
            vec![1.0 / p_top.len() as f64; p_top.len()]
        };
        Ok(p_local
            .iter()
            .zip(&p_top)
            .map(|(l, t)| l * (t / l - 1.0).powi(2))
            .sum())
    }
}

/// The number of the first trial among `members` whose value of `name` the grid refuses.
fn first_bad(
    name: &str,
    dist: &OptunaDistribution,
    members: &[usize],
    trials: &[(&ImportanceTrial<'_>, f64)],
) -> i64 {
    members
        .iter()
        .map(|&i| trials[i].0)
        .find(|t| {
            t.params
                .iter()
                .find(|p| p.name == name)
                .is_some_and(|p| count_on_grid(dist, &[p.internal], N_STEPS).is_err())
        })
        .map_or(-1, |t| t.number)
}

/// Which trials are at or better than the `⌈q·n⌉`-th smallest loss (Optuna's
/// `_QuantileFilter`; all of them when `q` is 1).
fn top_quantile(losses: &[f64], q: f64) -> Vec<bool> {
    if q == 1.0 {
        return vec![true; losses.len()];
    }
    let mut sorted = losses.to_vec();
    sorted.sort_by(f64::total_cmp);
    let k = ((q * losses.len() as f64).ceil() as usize).clamp(1, losses.len()) - 1;
    let cutoff = sorted[k];
    losses.iter().map(|l| *l <= cutoff).collect()
}

/// The region's trials split by the distribution `name` has in them (None: absent), in order
/// of first appearance, keeping regimes of at least [`MIN_TRIALS_IN_REGIME`] trials.
fn regimes<'t>(
    name: &str,
    region: &[usize],
    trials: &[(&'t ImportanceTrial<'_>, f64)],
) -> Vec<(Option<&'t OptunaDistribution>, Vec<usize>)> {
    let mut out: Vec<(Option<&'t OptunaDistribution>, Vec<usize>)> = Vec::new();
    for &i in region {
        let t: &'t ImportanceTrial<'_> = trials[i].0;
        let dist: Option<&'t OptunaDistribution> = t
            .params
            .iter()
            .find(|p| p.name == name)
            .map(|p| Arc::as_ref(&p.distribution));
        match out.iter_mut().find(|(d, _)| *d == dist) {
            Some((_, members)) => members.push(i),
            None => out.push((dist, vec![i])),
        }
    }
    out.retain(|(_, members)| members.len() >= MIN_TRIALS_IN_REGIME);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str, internal: f64, dist: &Arc<OptunaDistribution>) -> TrialParam {
        TrialParam {
            name: name.to_owned(),
            internal,
            distribution: dist.clone(),
        }
    }

    #[test]
    fn the_top_quantile_keeps_ties_and_rounds_up() {
        let l = [5.0, 1.0, 3.0, 1.0, 9.0];
        // ⌈0.1·5⌉ = 1: the best value, both trials that share it.
        assert_eq!(top_quantile(&l, 0.1), [false, true, false, true, false]);
        assert_eq!(top_quantile(&l, 0.5), [false, true, true, true, false]);
        assert_eq!(top_quantile(&l, 1.0), [true; 5]);
        // 0.14 · 50 = 7.000000000000001 in floating point: 8 trials, as in Optuna.
        let l: Vec<f64> = (0..50).map(f64::from).collect();
        assert_eq!(top_quantile(&l, 0.14).iter().filter(|b| **b).count(), 8);
    }

    #[test]
    fn a_parameter_that_decides_the_value_is_the_important_one() {
        let x = Arc::new(OptunaDistribution::float(0.0, 1.0, false, None).unwrap());
        let y = Arc::new(OptunaDistribution::float(0.0, 1.0, false, None).unwrap());
        let one = Arc::new(OptunaDistribution::int(3, 3, false, 1).unwrap());
        let params: Vec<Vec<TrialParam>> = (0..60)
            .map(|i| {
                let a = (i as f64 * 0.618_033_988_7).fract();
                let b = (i as f64 * 0.414_213_562_3).fract();
                vec![
                    param("x", a, &x),
                    param("y", b, &y),
                    param("one", 3.0, &one),
                ]
            })
            .collect();
        let trials: Vec<ImportanceTrial<'_>> = params
            .iter()
            .enumerate()
            .map(|(i, p)| ImportanceTrial {
                number: i as i64,
                state: TrialState::Complete,
                value: Some(p[0].internal + 0.01 * p[1].internal),
                params: p,
            })
            .collect();
        let imp = PedAnova::default()
            .evaluate("s", StudyDirection::Minimize, &trials)
            .unwrap();
        let names: Vec<&str> = imp.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "one"]);
        assert!(imp.params[0].importance > 0.8, "{imp:?}");
        assert_eq!(imp.params[2].raw, 0.0, "a single-valued range scores 0");
        let sum: f64 = imp.params.iter().map(|p| p.importance).sum();
        assert!((sum - 1.0).abs() < 1e-12);
        assert_eq!((imp.n_trials, imp.n_top, imp.n_region), (60, 6, 60));
        // Maximising the same values puts the other end on top; x still decides.
        let max = PedAnova::default()
            .evaluate("s", StudyDirection::Maximize, &trials)
            .unwrap();
        assert_eq!(max.params[0].name, "x");
        assert_ne!(max.params[0].raw, imp.params[0].raw);
    }

    #[test]
    fn too_few_trials_equal_values_and_bad_settings() {
        let x = Arc::new(OptunaDistribution::float(0.0, 1.0, false, None).unwrap());
        let params = [vec![param("x", 0.2, &x)], vec![param("x", 0.7, &x)]];
        let mk = |values: [Option<f64>; 2], state: TrialState| -> Vec<ImportanceTrial<'_>> {
            params
                .iter()
                .zip(values)
                .enumerate()
                .map(|(i, (p, value))| ImportanceTrial {
                    number: i as i64,
                    state,
                    value,
                    params: p,
                })
                .collect()
        };
        let e = PedAnova::default().evaluate(
            "s",
            StudyDirection::Minimize,
            &mk([Some(1.0), Some(f64::INFINITY)], TrialState::Complete),
        );
        assert!(
            matches!(
                e,
                Err(ImportanceError::TooFewTrials {
                    found: 1,
                    needed: 2,
                    ..
                })
            ),
            "{e:?}"
        );
        let e = PedAnova::default().evaluate(
            "s",
            StudyDirection::Minimize,
            &mk([Some(1.0), Some(2.0)], TrialState::Pruned),
        );
        assert!(matches!(
            e,
            Err(ImportanceError::TooFewTrials { found: 0, .. })
        ));
        // Equal values: the top trials are all trials, nothing differs, all equal.
        let imp = PedAnova::default()
            .evaluate(
                "s",
                StudyDirection::Minimize,
                &mk([Some(1.0), Some(1.0)], TrialState::Complete),
            )
            .unwrap();
        assert!(imp.all_equal());
        assert_eq!(imp.params[0].importance, 1.0);
        let bad = PedAnova {
            target_quantile: 0.5,
            region_quantile: 0.5,
            evaluate_on_local: true,
        };
        assert!(matches!(
            bad.evaluate("s", StudyDirection::Minimize, &[]),
            Err(ImportanceError::Quantiles { .. })
        ));
    }
}
