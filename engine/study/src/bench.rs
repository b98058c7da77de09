//! Sampler quality and overhead, for `tradetune bench sampler` and the criterion benchmark.
//!
//! Quality: the median over seeds of the best value after N trials on standard test functions
//! (Branin 2-D, Hartmann 6-D, Rosenbrock 5-D on [−5, 10], and a mixed float/log/int/categorical
//! function), run sequentially (one trial at a time, as Optuna's reference figures were).
//! Overhead: wall time of one `sample` call with a history of ~1,000 trials.
//! `engine/benches/optuna_sampler_reference.py` runs Optuna's TPE on the same functions.

use std::f64::consts::PI;
use std::fmt::Write as _;
use std::time::Instant;

use serde::Serialize;

use super::sampler::{RandomSampler, SampleContext, Sampler, SamplerError, TpeConfig, TpeSampler};
use super::space::{CategoricalChoice, InternalParams, SearchSpace};
use super::trial::{Direction, Trial};

/// A test function to minimize.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchFunction {
    /// Branin–Hoo on [−5, 10] × [0, 15]; minimum 0.397887 (three minimizers).
    Branin,
    /// Hartmann 6-D on [0, 1]⁶; minimum −3.32237.
    Hartmann6,
    /// Rosenbrock 5-D on [−5, 10]⁵; minimum 0 at (1, …, 1).
    Rosenbrock5,
    /// `(x − 1.7)² + (log10 lr + 2.5)² + ((n − 24)/8)² + offset[act]` with x ∈ [−5, 5],
    /// lr ∈ [1e-4, 1] (log), n ∈ {2, 4, …, 64}, act ∈ {relu, tanh, elu, gelu} with offsets
    /// 0.6, 1.0, 0, 0.3; minimum 0 at (1.7, 10^−2.5, 24, elu).
    Mixed,
}

const MIXED_OFFSETS: [f64; 4] = [0.6, 1.0, 0.0, 0.3];

// Hartmann 6-D constants (Surjanovic & Bingham, Virtual Library of Simulation Experiments).
const H6_ALPHA: [f64; 4] = [1.0, 1.2, 3.0, 3.2];
const H6_A: [[f64; 6]; 4] = [
    [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
    [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
    [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
    [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
];
const H6_P: [[f64; 6]; 4] = [
    [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
    [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
    [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
    [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
];

impl BenchFunction {
    pub const ALL: [BenchFunction; 4] = [
        BenchFunction::Branin,
        BenchFunction::Hartmann6,
        BenchFunction::Rosenbrock5,
        BenchFunction::Mixed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BenchFunction::Branin => "branin",
            BenchFunction::Hartmann6 => "hartmann6",
            BenchFunction::Rosenbrock5 => "rosenbrock5",
            BenchFunction::Mixed => "mixed",
        }
    }

    /// Optuna 5.0's default `TPESampler`: median over seeds 0–9 of the best value after 100
    /// trials. Branin, Hartmann-6 and Rosenbrock-5 are issue 4's figures; the mixed one was
    /// measured with `engine/benches/optuna_sampler_reference.py` (Optuna 5.0.0, 0.0735).
    pub fn optuna_reference(self) -> f64 {
        match self {
            BenchFunction::Branin => 0.416,
            BenchFunction::Hartmann6 => -3.207,
            BenchFunction::Rosenbrock5 => 130.0,
            BenchFunction::Mixed => 0.0735,
        }
    }

    /// The global minimum.
    pub fn optimum(self) -> f64 {
        match self {
            BenchFunction::Branin => 0.397_887,
            BenchFunction::Hartmann6 => -3.322_37,
            BenchFunction::Rosenbrock5 | BenchFunction::Mixed => 0.0,
        }
    }

    /// The search space (bounds from the literature; the names are the Python script's).
    pub fn space(self) -> SearchSpace {
        let mut s = SearchSpace::new();
        // The bounds below are valid by construction.
        let ok = |r: Result<(), super::space::SpaceError>| {
            r.unwrap_or_else(|e| unreachable!("bench space: {e}"))
        };
        match self {
            BenchFunction::Branin => {
                ok(s.add_float("x1", -5.0, 10.0, false, None));
                ok(s.add_float("x2", 0.0, 15.0, false, None));
            }
            BenchFunction::Hartmann6 => {
                (0..6).for_each(|i| ok(s.add_float(&format!("x{i}"), 0.0, 1.0, false, None)))
            }
            BenchFunction::Rosenbrock5 => {
                (0..5).for_each(|i| ok(s.add_float(&format!("x{i}"), -5.0, 10.0, false, None)))
            }
            BenchFunction::Mixed => {
                ok(s.add_float("x", -5.0, 5.0, false, None));
                ok(s.add_float("lr", 1e-4, 1.0, true, None));
                ok(s.add_int("n", 2, 64, false, 2));
                let acts = ["relu", "tanh", "elu", "gelu"];
                ok(s.add_categorical(
                    "act",
                    acts.iter()
                        .map(|a| CategoricalChoice::Str((*a).into()))
                        .collect(),
                ));
            }
        }
        s
    }

    /// The function at `p` (internal representation: categorical = index).
    pub fn eval(self, p: &InternalParams) -> f64 {
        let g = |k: &str| p.get(k).copied().unwrap_or(f64::NAN);
        match self {
            BenchFunction::Branin => {
                let (x1, x2) = (g("x1"), g("x2"));
                let b = 5.1 / (4.0 * PI * PI);
                let c = 5.0 / PI;
                let t = 1.0 / (8.0 * PI);
                (x2 - b * x1 * x1 + c * x1 - 6.0).powi(2) + 10.0 * (1.0 - t) * x1.cos() + 10.0
            }
            BenchFunction::Hartmann6 => {
                let x: Vec<f64> = (0..6).map(|i| g(&format!("x{i}"))).collect();
                -(0..4)
                    .map(|i| {
                        let e: f64 = (0..6)
                            .map(|j| H6_A[i][j] * (x[j] - H6_P[i][j]).powi(2))
                            .sum();
                        H6_ALPHA[i] * (-e).exp()
                    })
                    .sum::<f64>()
            }
            BenchFunction::Rosenbrock5 => {
                let x: Vec<f64> = (0..5).map(|i| g(&format!("x{i}"))).collect();
                x.windows(2)
                    .map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2))
                    .sum()
            }
            BenchFunction::Mixed => {
                let act = MIXED_OFFSETS
                    .get(g("act") as usize)
                    .copied()
                    .unwrap_or(f64::NAN);
                (g("x") - 1.7).powi(2)
                    + (g("lr").log10() + 2.5).powi(2)
                    + ((g("n") - 24.0) / 8.0).powi(2)
                    + act
            }
        }
    }
}

/// Which sampler a benchmark row ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SamplerKind {
    Random,
    /// TradeTune's default TPE: Optuna 5.0's default (multivariate) with a 3 % bandwidth floor.
    Tpe,
    TpeUnivariate,
    /// Optuna 5.0's default TPE exactly, magic clip included (for comparison).
    TpeOptunaClip,
}

impl SamplerKind {
    pub const ALL: [SamplerKind; 4] = [
        SamplerKind::Tpe,
        SamplerKind::TpeUnivariate,
        SamplerKind::TpeOptunaClip,
        SamplerKind::Random,
    ];

    /// The name in tables, JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SamplerKind::Random => "random",
            SamplerKind::Tpe => "tpe",
            SamplerKind::TpeUnivariate => "tpe-univariate",
            SamplerKind::TpeOptunaClip => "tpe-optuna-clip",
        }
    }

    pub fn build(self, seed: u64) -> Result<Box<dyn Sampler>, SamplerError> {
        Ok(match self {
            SamplerKind::Random => Box::new(RandomSampler::new(seed)),
            SamplerKind::Tpe => Box::new(TpeSampler::new(TpeConfig {
                seed,
                ..TpeConfig::default()
            })?),
            SamplerKind::TpeUnivariate => Box::new(TpeSampler::new(TpeConfig {
                seed,
                multivariate: false,
                ..TpeConfig::default()
            })?),
            SamplerKind::TpeOptunaClip => Box::new(TpeSampler::new(TpeConfig {
                seed,
                min_bandwidth_factor: None,
                ..TpeConfig::default()
            })?),
        })
    }
}

/// Values of every trial and the time of every `sample` call of one sequential study.
pub struct StudyRun {
    pub values: Vec<f64>,
    pub suggest_seconds: Vec<f64>,
    /// The trials, COMPLETE, in order.
    pub history: Vec<Trial>,
}

impl StudyRun {
    pub fn best(&self) -> f64 {
        self.values.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

/// Minimizes `function` for `n_trials` trials, one at a time.
pub fn run_study(
    sampler: &dyn Sampler,
    function: BenchFunction,
    n_trials: usize,
) -> Result<StudyRun, SamplerError> {
    let space = function.space();
    let mut history: Vec<Trial> = Vec::with_capacity(n_trials);
    let mut values = Vec::with_capacity(n_trials);
    let mut suggest_seconds = Vec::with_capacity(n_trials);
    for number in 0..n_trials as u64 {
        let ctx = SampleContext::new(&space, &history, Direction::Minimize, number);
        let start = Instant::now();
        let proposal = sampler.sample(&ctx)?;
        suggest_seconds.push(start.elapsed().as_secs_f64());
        let value = function.eval(&proposal.params);
        values.push(value);
        history.push(Trial::complete(number, proposal.params, value));
    }
    Ok(StudyRun {
        values,
        suggest_seconds,
        history,
    })
}

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct SamplerBenchConfig {
    /// Trials per study for the quality figures (the bar: 100).
    pub trials: usize,
    /// One study per seed (the bar: 10 seeds).
    pub seeds: Vec<u64>,
    pub functions: Vec<BenchFunction>,
    pub samplers: Vec<SamplerKind>,
    /// Length of the study whose last 100 suggestions give the overhead figure (0: skip).
    pub overhead_trials: usize,
}

impl Default for SamplerBenchConfig {
    fn default() -> Self {
        Self {
            trials: 100,
            seeds: (0..10).collect(),
            functions: BenchFunction::ALL.to_vec(),
            samplers: vec![SamplerKind::Tpe, SamplerKind::Random],
            overhead_trials: 1000,
        }
    }
}

/// Median best value of one sampler on one function.
#[derive(Debug, Clone, Serialize)]
pub struct QualityRow {
    pub function: BenchFunction,
    pub sampler: SamplerKind,
    pub trials: usize,
    /// Best value of each seed's study, in seed order.
    pub best: Vec<f64>,
    pub median_best: f64,
    pub optimum: f64,
    /// Optuna 5.0's default TPE on the same function, 10 seeds × 100 trials.
    pub optuna_reference: f64,
    /// Mean time of one `sample` call over these studies.
    pub mean_suggest_ms: f64,
}

/// Per-suggestion overhead with a long history.
#[derive(Debug, Clone, Serialize)]
pub struct OverheadRow {
    pub function: BenchFunction,
    pub sampler: SamplerKind,
    pub trials: usize,
    /// Mean over the last 100 suggestions (history of trials − 100 … trials − 1).
    pub last_100_mean_ms: f64,
    /// Median of the same 100: robust to the scheduler pausing the thread on a shared machine.
    pub last_100_median_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SamplerBenchReport {
    pub config: SamplerBenchConfig,
    pub quality: Vec<QualityRow>,
    pub overhead: Vec<OverheadRow>,
}

/// Median of the values (mean of the two middle ones for an even count).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Runs the quality studies and the overhead studies of `cfg`.
pub fn run_sampler_bench(cfg: &SamplerBenchConfig) -> Result<SamplerBenchReport, SamplerError> {
    let mut quality = Vec::new();
    for &function in &cfg.functions {
        for &kind in &cfg.samplers {
            let mut best = Vec::with_capacity(cfg.seeds.len());
            let mut times = Vec::new();
            for &seed in &cfg.seeds {
                let run = run_study(kind.build(seed)?.as_ref(), function, cfg.trials)?;
                best.push(run.best());
                times.extend(run.suggest_seconds);
            }
            quality.push(QualityRow {
                function,
                sampler: kind,
                trials: cfg.trials,
                median_best: median(&best),
                best,
                optimum: function.optimum(),
                optuna_reference: function.optuna_reference(),
                mean_suggest_ms: 1e3 * times.iter().sum::<f64>() / times.len().max(1) as f64,
            });
        }
    }
    let mut overhead = Vec::new();
    if cfg.overhead_trials > 0 {
        for &function in &cfg.functions {
            for &kind in &cfg.samplers {
                let run = run_study(kind.build(0)?.as_ref(), function, cfg.overhead_trials)?;
                let t = &run.suggest_seconds;
                let last = &t[t.len().saturating_sub(100)..];
                overhead.push(OverheadRow {
                    function,
                    sampler: kind,
                    trials: cfg.overhead_trials,
                    last_100_mean_ms: 1e3 * last.iter().sum::<f64>() / last.len().max(1) as f64,
                    last_100_median_ms: 1e3 * median(last),
                    mean_ms: 1e3 * t.iter().sum::<f64>() / t.len().max(1) as f64,
                    max_ms: 1e3 * t.iter().copied().fold(0.0, f64::max),
                });
            }
        }
    }
    Ok(SamplerBenchReport {
        config: cfg.clone(),
        quality,
        overhead,
    })
}

impl SamplerBenchReport {
    /// A plain-text table of the figures, with the configuration that produced them.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let c = &self.config;
        let _ = writeln!(
            s,
            "sampler quality: median best value over {} seeds after {} trials",
            c.seeds.len(),
            c.trials
        );
        let _ = writeln!(
            s,
            "{:<12} {:<15} {:>12} {:>12} {:>12} {:>14}",
            "function", "sampler", "median best", "optuna tpe", "optimum", "ms / suggest"
        );
        for r in &self.quality {
            let _ = writeln!(
                s,
                "{:<12} {:<15} {:>12.4} {:>12.4} {:>12.4} {:>14.3}",
                r.function.name(),
                r.sampler.name(),
                r.median_best,
                r.optuna_reference,
                r.optimum,
                r.mean_suggest_ms
            );
        }
        if !self.overhead.is_empty() {
            let _ = writeln!(
                s,
                "\nsampler overhead: ms per suggestion with a history of ~{} trials",
                c.overhead_trials
            );
            let _ = writeln!(
                s,
                "{:<12} {:<15} {:>14} {:>16} {:>12} {:>10}",
                "function", "sampler", "last 100 mean", "last 100 median", "mean", "max"
            );
            for r in &self.overhead {
                let _ = writeln!(
                    s,
                    "{:<12} {:<15} {:>14.3} {:>16.3} {:>12.3} {:>10.3}",
                    r.function.name(),
                    r.sampler.name(),
                    r.last_100_mean_ms,
                    r.last_100_median_ms,
                    r.mean_ms,
                    r.max_ms
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_reach_their_known_minima() {
        let p = |kv: &[(&str, f64)]| {
            kv.iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect::<InternalParams>()
        };
        let b = BenchFunction::Branin.eval(&p(&[("x1", PI), ("x2", 2.275)]));
        assert!((b - 0.397_887).abs() < 1e-5, "{b}");
        let x = [0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573];
        let h = BenchFunction::Hartmann6.eval(
            &x.iter()
                .enumerate()
                .map(|(i, v)| (format!("x{i}"), *v))
                .collect(),
        );
        assert!((h + 3.32237).abs() < 1e-4, "{h}");
        let r = BenchFunction::Rosenbrock5.eval(&(0..5).map(|i| (format!("x{i}"), 1.0)).collect());
        assert_eq!(r, 0.0);
        let m = BenchFunction::Mixed.eval(&p(&[
            ("x", 1.7),
            ("lr", 10f64.powf(-2.5)),
            ("n", 24.0),
            ("act", 2.0),
        ]));
        assert!(m.abs() < 1e-12, "{m}");
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
