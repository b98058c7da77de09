//! The pruner's thresholds in the intermediate-values plot, from the study's pruner settings as
//! its run stored them ([`PRUNER_ATTR`]): the median or percentile line the percentile pruners
//! compare a trial with at each step, or the rungs where successive halving and Hyperband
//! decide. A study whose pruner is not stored (Optuna's own, older ones) gets the median of its
//! complete trials, said to be only that.

use tradetune_engine::study::file::{PRUNER_ATTR, PrunerKind, PrunerSection};

/// What to draw for the pruner.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// One sentence under the plot's title: which pruner, and how it decides.
    pub caption: String,
    /// Threshold lines by step: (legend name, points).
    pub lines: Vec<(String, Vec<[f64; 2]>)>,
    /// Steps where successive halving's rungs are (vertical lines).
    pub rungs: Vec<f64>,
}

/// The thresholds of `pruner` (`None`: not stored) for a study in direction `maximize`, over
/// the intermediate values of its COMPLETE trials `complete`.
pub fn thresholds(
    pruner: Option<&PrunerSection>,
    maximize: bool,
    complete: &[&[(i64, f64)]],
) -> Thresholds {
    let last_step = complete
        .iter()
        .filter_map(|c| c.last().map(|&(s, _)| s))
        .max()
        .unwrap_or(0)
        .max(0) as u64;
    let Some(p) = pruner else {
        return Thresholds {
            caption: format!(
                "the study's pruner is not stored (no {PRUNER_ATTR} attribute): the line is the \
                 median of the complete trials at each step"
            ),
            lines: vec![(
                "median of complete trials".into(),
                percentile_by_step(complete, 50.0, 0),
            )],
            rungs: Vec::new(),
        };
    };
    let startup = |what: &str| {
        format!(
            "{what} of the complete trials at the same step (from step {}, once {} trials have \
             completed)",
            p.n_warmup_steps, p.n_startup_trials
        )
    };
    match p.kind {
        PrunerKind::None => Thresholds {
            caption: "no pruner: no trial is pruned".into(),
            lines: Vec::new(),
            rungs: Vec::new(),
        },
        PrunerKind::Median => Thresholds {
            caption: format!(
                "median pruner: a trial is pruned when its best value so far is worse than the {}",
                startup("median")
            ),
            lines: vec![(
                "median pruner threshold".into(),
                percentile_by_step(complete, 50.0, p.n_warmup_steps),
            )],
            rungs: Vec::new(),
        },
        PrunerKind::Percentile => {
            // Optuna keeps the best `percentile` %: for maximisation that is above the
            // (100 − percentile)th percentile of the values.
            let q = if maximize {
                100.0 - p.percentile
            } else {
                p.percentile
            };
            Thresholds {
                caption: format!(
                    "percentile pruner ({} %): a trial is pruned when its best value so far is \
                     worse than the {}",
                    p.percentile,
                    startup(&format!("{q}th percentile"))
                ),
                lines: vec![(
                    format!("{} % percentile pruner threshold", p.percentile),
                    percentile_by_step(complete, q, p.n_warmup_steps),
                )],
                rungs: Vec::new(),
            }
        }
        PrunerKind::SuccessiveHalving => {
            let eta = p.reduction_factor.unwrap_or(4).max(2);
            // Optuna's "auto": a hundredth of the first complete trial's steps, at least 1.
            let (min, auto) = match p.min_resource {
                Some(m) => (m.max(1), ""),
                None => (last_step.div_ceil(100).max(1), " (auto)"),
            };
            let rungs = rung_steps(min, eta, last_step.max(min));
            Thresholds {
                caption: format!(
                    "successive halving: rungs at steps {} (min_resource {min}{auto}, reduction \
                     factor {eta}); at each rung a trial goes on only when it is in the top 1/{eta} \
                     of the trials that reached it",
                    list(&rungs)
                ),
                lines: Vec::new(),
                rungs: rungs.iter().map(|&s| s as f64).collect(),
            }
        }
        PrunerKind::Hyperband => {
            let eta = p.reduction_factor.unwrap_or(3).max(2);
            let min = p.min_resource.unwrap_or(1).max(1);
            let max = p.max_resource.unwrap_or(last_step).max(min);
            let rungs = rung_steps(min, eta, max);
            Thresholds {
                caption: format!(
                    "hyperband: {} brackets of successive halving (reduction factor {eta}); rungs \
                     at steps {}, bracket b deciding from the b-th on",
                    rungs.len(),
                    list(&rungs)
                ),
                lines: Vec::new(),
                rungs: rungs.iter().map(|&s| s as f64).collect(),
            }
        }
    }
}

/// `min · eta^k` for k = 0, 1, … up to `max`.
fn rung_steps(min: u64, eta: u64, max: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut s = min;
    while s <= max {
        out.push(s);
        match s.checked_mul(eta) {
            Some(next) => s = next,
            None => break,
        }
    }
    out
}

fn list(steps: &[u64]) -> String {
    let v: Vec<String> = steps.iter().map(|s| s.to_string()).collect();
    v.join(", ")
}

/// At each step from `from`, the `q`th percentile (numpy's linear interpolation) of the values
/// `curves` reported there; infinite and NaN values are left out.
pub fn percentile_by_step(curves: &[&[(i64, f64)]], q: f64, from: u64) -> Vec<[f64; 2]> {
    let mut by_step: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
    for curve in curves {
        for &(step, v) in *curve {
            if v.is_finite() && step >= 0 && step as u64 >= from {
                by_step.entry(step).or_default().push(v);
            }
        }
    }
    by_step
        .into_iter()
        .map(|(step, mut v)| {
            v.sort_by(f64::total_cmp);
            let rank = q.clamp(0.0, 100.0) / 100.0 * (v.len() - 1) as f64;
            let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
            let value = v[lo] + (v[hi] - v[lo]) * (rank - lo as f64);
            [step as f64, value]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [(i64, f64); 3] = [(0, 1.0), (1, 0.5), (2, 0.1)];
    const C: [(i64, f64); 2] = [(0, 2.0), (1, 0.7)];

    #[test]
    fn percentiles_of_each_step_over_the_curves_that_reached_it() {
        let b = [(0, 3.0), (1, f64::NAN)];
        let curves = [&A[..], &b[..], &C[..]];
        assert_eq!(
            percentile_by_step(&curves, 50.0, 0),
            vec![[0.0, 2.0], [1.0, 0.6], [2.0, 0.1]]
        );
        assert_eq!(
            percentile_by_step(&curves, 25.0, 1),
            vec![[1.0, 0.55], [2.0, 0.1]]
        );
    }

    #[test]
    fn each_pruner_draws_its_own_thresholds() {
        let complete = [&A[..], &C[..]];
        let not_stored = thresholds(None, true, &complete);
        assert_eq!(not_stored.lines[0].0, "median of complete trials");
        assert!(not_stored.caption.contains("not stored"));

        let percentile = PrunerSection {
            kind: PrunerKind::Percentile,
            percentile: 25.0,
            n_warmup_steps: 1,
            ..PrunerSection::default()
        };
        // Maximising: the line is the 75th percentile (the best quarter lies above it).
        let t = thresholds(Some(&percentile), true, &complete);
        assert_eq!(t.lines[0].0, "25 % percentile pruner threshold");
        let close = |got: &[[f64; 2]], want: &[[f64; 2]]| {
            got.len() == want.len()
                && got
                    .iter()
                    .zip(want)
                    .all(|(g, w)| g[0] == w[0] && (g[1] - w[1]).abs() < 1e-12)
        };
        assert!(close(&t.lines[0].1, &[[1.0, 0.65], [2.0, 0.1]]), "{t:?}");
        let t = thresholds(Some(&percentile), false, &complete);
        assert!(close(&t.lines[0].1, &[[1.0, 0.55], [2.0, 0.1]]), "{t:?}");

        let none = PrunerSection {
            kind: PrunerKind::None,
            ..PrunerSection::default()
        };
        assert!(thresholds(Some(&none), true, &complete).lines.is_empty());

        let long: Vec<(i64, f64)> = (0..=40).map(|s| (s, 0.0)).collect();
        let sha = PrunerSection {
            kind: PrunerKind::SuccessiveHalving,
            min_resource: Some(2),
            reduction_factor: Some(3),
            ..PrunerSection::default()
        };
        let t = thresholds(Some(&sha), true, &[&long[..]]);
        assert_eq!(t.rungs, vec![2.0, 6.0, 18.0]);
        assert!(
            t.caption.contains("rungs at steps 2, 6, 18"),
            "{}",
            t.caption
        );

        let hyperband = PrunerSection {
            kind: PrunerKind::Hyperband,
            max_resource: Some(27),
            ..PrunerSection::default()
        };
        let t = thresholds(Some(&hyperband), true, &[&long[..]]);
        assert_eq!(t.rungs, vec![1.0, 3.0, 9.0, 27.0]);
        assert!(
            t.caption.starts_with("hyperband: 4 brackets"),
            "{}",
            t.caption
        );
    }
}
