//! Achieved against predicted (`tradetune study speed`): each trial's training samples/s as it
//! ran in its study, against what the same configuration does on this machine when it runs
//! alone — its trainer on the study's own train bars, one warm-up update, then the median of
//! three windows of timed updates without evaluation, each long enough to time, as `tradetune
//! bench train` measures — and the likely cause of a gap,
//! with its fix:
//! - **oversubscribed cores**: other trials trained on the same host at the same time; CPU
//!   workers of one process share one thread pool, so each gets a share of the cores;
//! - **evaluation cost**: the periodic validation evaluations took a large share of the trial
//!   (the achieved figure counts them; the prediction does not);
//! - **compile time**: on a GPU, compiling and autotuning the configuration's kernels took a
//!   large share of a short trial (the achieved figure counts it; the prediction, after its
//!   warm-up update, does not), with the trial's steady rate beside it;
//! - **tiny minibatches**: every minibatch pays a fixed per-operation cost, so batches under
//!   [`SMALL_BATCH`] spend their time in overhead rather than arithmetic (then the prediction is
//!   low too: the configuration itself is slow).
//!
//! Each distinct configuration (environments, rollout, batch, epochs, nets, precision, device)
//! is measured once; trials that share it share the prediction.

use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

use super::FrontError;
use crate::device::{DeviceSpec, open};
use crate::market::Dataset;
use crate::market::load::DatasetConfig;
use crate::storage::{Storage, TrialRecord, TrialState};
use crate::study::file::StudyFile;
use crate::study::ppo_trial::{PpoTrialConfig, TrainingRun};

/// Below this share of the prediction a trial is "slower than its configuration".
pub const SLOW_RATIO: f64 = 0.8;
/// Evaluation at or above this share of a trial's timed phases is named as a cause.
pub const EVAL_SHARE: f64 = 0.25;
/// Compiling at or above this share of a trial's phases is named as a cause.
pub const COMPILE_SHARE: f64 = 0.25;
/// Minibatches smaller than this are named as a cause.
pub const SMALL_BATCH: usize = 128;

/// One trial: what it achieved, what its configuration does alone, and why they differ.
#[derive(Debug, Clone, Serialize)]
pub struct TrialSpeed {
    pub number: i64,
    pub worker: Option<String>,
    pub device: String,
    /// n_envs, n_steps, batch_size, n_epochs, pi and vf widths, precision.
    pub configuration: String,
    pub batch_size: usize,
    /// Training samples/s the trial reached in the study (evaluations included).
    pub achieved: f64,
    /// Samples/s of its configuration alone on this machine (the median window's); None when
    /// its device is not here.
    pub predicted: Option<f64>,
    /// Every window of that measurement: the median, the slowest, the fastest.
    pub alone: Option<Alone>,
    /// `achieved / predicted`.
    pub ratio: Option<f64>,
    /// Trials of the same host training at the trial's midpoint, itself included.
    pub concurrent: usize,
    /// Share of the trial's timed phases (compiling included) spent evaluating, where its
    /// telemetry recorded them.
    pub eval_share: Option<f64>,
    /// Share of the trial's phases spent compiling and autotuning kernels (a GPU's first
    /// updates and first evaluation), where it compiled.
    pub compile_share: Option<f64>,
    /// Training samples/s without the compile phase, where there was one.
    pub steady: Option<f64>,
    /// The likely causes of a gap (or of a slow configuration), each with its fix.
    pub causes: Vec<String>,
}

/// Every trial measured, with the machine it was measured on.
#[derive(Debug, Clone, Serialize)]
pub struct SpeedReport {
    pub study: String,
    /// Logical cores of this machine.
    pub cores: usize,
    /// Timed updates per window of a prediction (after one warm-up update), at least.
    pub updates: usize,
    /// The 1-minute load average as measuring began (Linux), against `cores`: a machine busy
    /// with other work makes every "alone" figure low.
    pub load_average: Option<f64>,
    pub trials: Vec<TrialSpeed>,
}

/// A trial's configuration as far as speed goes, the key predictions are shared under.
fn shape(cfg: &PpoTrialConfig, device: &str) -> String {
    let arch = &cfg.ppo.policy.net_arch;
    format!(
        "{} envs × {} steps, batch {}, {} epochs, pi {:?} vf {:?}, {} on {device}",
        cfg.env.n_envs,
        cfg.ppo.n_steps,
        cfg.ppo.batch_size,
        cfg.ppo.n_epochs,
        arch.pi,
        arch.vf,
        cfg.ppo.precision
    )
}

/// The device a trial ran on, from its label (`cpu`, `wgpu:0`, `cpu#1` for a second slot).
fn device_of(label: &str) -> Result<DeviceSpec, String> {
    let spec = label.split('#').next().unwrap_or(label);
    spec.parse::<DeviceSpec>().map_err(|e| e.to_string())
}

/// The machine of a worker label (`box#4711/worker-2`: `box`, whichever of its processes),
/// or "" for a bare `worker-2`: trials of two processes on one machine share its cores.
fn host_of(worker: Option<&str>) -> &str {
    worker
        .and_then(|w| w.rsplit_once('/'))
        .map_or("", |(h, _)| h.split('#').next().unwrap_or(h))
}

fn user_number(t: &TrialRecord, key: &str) -> Option<f64> {
    t.user_attrs
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| serde_json::Value::from(v).as_f64())
}

/// When a trial ran, and where: its worker's label (`host/worker-2`) and its device's slot
/// label (`wgpu:0`, `cpu#1`).
#[derive(Debug, Clone, Copy)]
struct Span<'a> {
    trial_id: i64,
    start: Option<chrono::NaiveDateTime>,
    complete: Option<chrono::NaiveDateTime>,
    worker: Option<&'a str>,
    device: Option<&'a str>,
}

/// Whether two slot labels are one device (`cpu` and `cpu#1` are); a label unknown on either
/// side may be.
fn same_device(a: Option<&str>, b: Option<&str>) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return true;
    };
    match (device_of(a), device_of(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a.split('#').next() == b.split('#').next(),
    }
}

/// Trials of `t`'s host and device running at its midpoint, `t` included: a trial on another
/// card (or a GPU trial beside CPU ones) does not share what `t` trained on.
fn concurrent_at_midpoint(t: i64, all: &[Span<'_>]) -> usize {
    let Some(me) = all.iter().find(|o| o.trial_id == t) else {
        return 1;
    };
    let (Some(start), Some(end)) = (me.start, me.complete) else {
        return 1;
    };
    let mid = start + (end - start) / 2;
    let host = host_of(me.worker);
    all.iter()
        .filter(|o| {
            host_of(o.worker) == host
                && same_device(o.device, me.device)
                && o.start.is_some_and(|s| s <= mid)
                && o.complete.is_none_or(|c| c >= mid)
        })
        .count()
        .max(1)
}

/// Measures the trials of `file`'s study in `storage` (those numbered in `only`, else the
/// `limit` most recent COMPLETE ones that recorded their speed), each distinct configuration
/// with `updates` timed updates. `progress` hears (configuration i, of n) as each starts.
pub fn speed(
    storage: &Storage,
    file: &StudyFile,
    only: Option<&[i64]>,
    limit: usize,
    updates: usize,
    mut progress: impl FnMut(usize, usize),
) -> Result<SpeedReport, FrontError> {
    if updates == 0 {
        return Err(FrontError::Invalid(
            "speed needs at least one timed update".into(),
        ));
    }
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok());
    let name = &file.study.name;
    let study = storage.study(name)?;
    let trials = storage.trials(study.study_id)?;
    let mut with_meta = Vec::with_capacity(trials.len());
    for t in trials {
        let meta = storage.run_metadata(t.trial_id)?;
        with_meta.push((t, meta));
    }
    let workers: Vec<Span<'_>> = with_meta
        .iter()
        .map(|(t, m)| Span {
            trial_id: t.trial_id,
            start: t.datetime_start,
            complete: t.datetime_complete,
            worker: m.as_ref().and_then(|m| m.worker.as_deref()),
            device: m.as_ref().map(|m| m.device.as_str()),
        })
        .collect();
    let mut chosen: Vec<_> = with_meta
        .iter()
        .filter(|(t, m)| {
            t.state == TrialState::Complete
                && m.is_some()
                && user_number(t, "train_samples_per_s").is_some()
        })
        .filter(|(t, _)| only.is_none_or(|o| o.contains(&t.number)))
        .collect();
    if let Some(o) = only
        && let Some(missing) = o
            .iter()
            .find(|n| !chosen.iter().any(|(t, _)| t.number == **n))
    {
        return Err(FrontError::Invalid(format!(
            "trial #{missing} of '{name}' is not a COMPLETE trial with a recorded speed"
        )));
    }
    if chosen.is_empty() {
        return Err(FrontError::Invalid(format!(
            "study '{name}' has no COMPLETE trial that recorded its speed (train_samples_per_s)"
        )));
    }
    if only.is_none() && chosen.len() > limit {
        chosen.drain(..chosen.len() - limit);
    }

    // The configurations, decoded once.
    let mut decoded = Vec::with_capacity(chosen.len());
    for (t, meta) in &chosen {
        let Some(meta) = meta else { continue };
        let cfg =
            PpoTrialConfig::from_json(&serde_json::Value::from(&meta.config)).map_err(|e| {
                FrontError::Invalid(format!("trial #{}'s configuration: {e}", t.number))
            })?;
        decoded.push((t, meta, cfg));
    }
    let first = &decoded[0].2;
    let loaded = DatasetConfig {
        paths: file.data.paths.clone(),
        assets: file.data.assets.clone(),
        lookback: first.env.lookback,
        episode_bars: first.env.episode_bars,
        split: file.split.clone(),
        ..DatasetConfig::default()
    }
    .load()?;
    let dataset = Arc::new(loaded.dataset);
    let train = loaded.split.train.clone();

    let distinct = {
        let mut shapes: Vec<String> = decoded
            .iter()
            .map(|(_, m, c)| shape(c, &m.device))
            .collect();
        shapes.sort();
        shapes.dedup();
        shapes.len()
    };
    let mut predicted: Vec<(String, Option<Alone>, Option<String>)> = Vec::new();
    let mut out = Vec::with_capacity(decoded.len());
    for (t, meta, cfg) in &decoded {
        let key = shape(cfg, &meta.device);
        let known = predicted.iter().find(|(k, _, _)| *k == key).cloned();
        let (alone, not_here) = match known {
            Some((_, alone, why)) => (alone, why),
            None => {
                progress(predicted.len(), distinct);
                let (alone, why) = match device_of(&meta.device) {
                    Err(e) => (None, Some(e)),
                    Ok(spec) => match open(spec) {
                        Err(e) => (None, Some(format!("{} is not here: {e}", meta.device))),
                        Ok(device) => {
                            let bars = train.clone();
                            let alone = alone_rate(cfg, &dataset, bars, &device, updates)?;
                            (Some(alone), None)
                        }
                    },
                };
                predicted.push((key.clone(), alone, why.clone()));
                (alone, why)
            }
        };
        let rate = alone.map(|a| a.median);
        let achieved = user_number(t, "train_samples_per_s").unwrap_or(f64::NAN);
        let (eval_share, compile) = phase_shares(|p: &str| user_number(t, &format!("phase_{p}_s")));
        let compile_not_apart = t.user_attrs.iter().any(|(k, _)| k == "compile_not_apart");
        let steady = user_number(t, "steady_samples_per_s");
        let concurrent = concurrent_at_midpoint(t.trial_id, &workers);
        let ratio = rate.map(|p| achieved / p);
        let causes = causes(&Evidence {
            not_here: not_here.as_deref(),
            rate,
            ratio,
            concurrent,
            eval_share,
            compile,
            compile_not_apart,
            steady,
            cfg,
        });
        out.push(TrialSpeed {
            number: t.number,
            worker: meta.worker.clone(),
            device: meta.device.clone(),
            configuration: key,
            batch_size: cfg.ppo.batch_size,
            achieved,
            predicted: rate,
            alone,
            ratio,
            concurrent,
            eval_share,
            compile_share: compile.map(|(_, share)| share),
            steady,
            causes,
        });
    }
    Ok(SpeedReport {
        study: name.clone(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        updates,
        load_average,
        trials: out,
    })
}

/// The shares of a trial's timed phases (`phase(name)` its seconds in the phase named, as
/// stored: `env`, `inference`, `update`, `eval`, `compile`) spent evaluating, and compiling with
/// its seconds where it compiled: both of one total, compiling included (a trial recorded
/// before the compile phase has none), so that both read as shares "of the trial".
fn phase_shares(phase: impl Fn(&str) -> Option<f64>) -> (Option<f64>, Option<(f64, f64)>) {
    let compiling = phase("compile").unwrap_or(0.0);
    let four = ["env", "inference", "update", "eval"].map(&phase);
    let total = compiling + four.iter().flatten().sum::<f64>();
    let eval_share = match four {
        [Some(_), Some(_), Some(_), Some(e)] if total > 0.0 => Some(e / total),
        _ => None,
    };
    let compile = (compiling > 0.0).then(|| (compiling, compiling / total));
    (eval_share, compile)
}

/// What a trial's records say of its speed.
struct Evidence<'a> {
    /// Why its configuration could not be measured here, if it could not.
    not_here: Option<&'a str>,
    /// Its configuration's samples/s alone here.
    rate: Option<f64>,
    /// Achieved against `rate`.
    ratio: Option<f64>,
    /// Trials of its host training at its midpoint, itself included.
    concurrent: usize,
    eval_share: Option<f64>,
    /// Seconds compiling, and their share of all the trial's phases (the base of `eval_share`
    /// too).
    compile: Option<(f64, f64)>,
    /// Every update compiled (the trial attribute `compile_not_apart`): their compiling is
    /// inside their other phases, not in `compile`.
    compile_not_apart: bool,
    /// Samples/s without the compile phase.
    steady: Option<f64>,
    cfg: &'a PpoTrialConfig,
}

/// The likely causes of a trial's gap to its configuration alone (or of a slow
/// configuration), each with its fix.
fn causes(e: &Evidence<'_>) -> Vec<String> {
    let mut causes = Vec::new();
    if let Some(why) = e.not_here {
        causes.push(format!("not measured: {why}"));
    }
    let slow = e.ratio.is_some_and(|r| r < SLOW_RATIO);
    if slow && e.concurrent > 1 {
        causes.push(format!(
            "oversubscribed: {} trials trained at once on this device of this host, sharing \
             it — run fewer workers per device (alone it reaches {:.0} samples/s)",
            e.concurrent,
            e.rate.unwrap_or(f64::NAN)
        ));
    }
    if let Some(share) = e.eval_share.filter(|s| *s >= EVAL_SHARE) {
        causes.push(format!(
            "evaluation took {:.0} % of the trial — evaluate less often (train.eval_every) \
             or on a shorter validation split",
            share * 100.0
        ));
    }
    if e.compile_not_apart {
        causes.push(
            "compiling kernels inside every update: each of the trial's updates compiled, so \
             its compiling hides in their phases and no steady rate was measured — a GPU \
             compiles and autotunes a configuration's kernels in its first updates: the next \
             trial of the same shapes autotunes nothing (TradeTune's GPU cache), and a longer \
             trial (train.total_timesteps) spreads it"
                .into(),
        );
    } else if let Some((secs, share)) = e.compile.filter(|(_, s)| *s >= COMPILE_SHARE) {
        let steady = match (e.steady, e.rate) {
            (Some(steady), Some(rate)) if rate > 0.0 => format!(
                "; without it {steady:.0} samples/s (its evaluations still in), {:.0} % of its \
                 configuration alone",
                100.0 * steady / rate
            ),
            (Some(steady), _) => {
                format!("; without it {steady:.0} samples/s (its evaluations still in)")
            }
            _ => String::new(),
        };
        causes.push(format!(
            "compiling kernels took {:.0} % of the trial ({secs:.1} s){steady} — a GPU compiles \
             and autotunes a configuration's kernels in its first updates and evaluation: the \
             next trial of the same shapes autotunes nothing (TradeTune's GPU cache) and \
             compiles from the driver's shader cache where it keeps one; a longer trial \
             (train.total_timesteps) spreads it",
            share * 100.0
        ));
    }
    let (ppo, env) = (&e.cfg.ppo, &e.cfg.env);
    if ppo.batch_size < SMALL_BATCH {
        let calls = (ppo.n_steps * env.n_envs).div_ceil(ppo.batch_size.max(1));
        causes.push(format!(
            "tiny minibatches: batch_size {} makes {calls} minibatches per epoch, each paying \
             a fixed per-operation cost — a batch of 256 or more spends the time on arithmetic",
            ppo.batch_size
        ));
    }
    if slow && causes.is_empty() {
        causes.push(
            "slower than its configuration alone, with no cause in the records: was the \
             machine busy with something else?"
                .into(),
        );
    }
    causes
}

/// A configuration's samples/s alone: the median of [`WINDOWS`] timed windows, with the
/// slowest and the fastest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Alone {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// Updates in each window: `updates`, or more where those took under [`MIN_WINDOW_S`].
    pub updates_per_window: usize,
}

/// Timed windows per configuration: their median is the prediction, so one window slowed by
/// something else on the machine does not make it.
pub const WINDOWS: usize = 3;
/// A window shorter than this is lengthened: a tiny configuration's two updates took a few
/// milliseconds, and five runs of one study said 1,971 to 56,766 samples/s alone.
pub const MIN_WINDOW_S: f64 = 0.25;
/// The most a window is lengthened by.
const MAX_STRETCH: usize = 64;

/// Samples/s of `cfg` trained alone on `device` over `bars` of `data`: one warm-up update (and
/// those the trainer times again after it compiled), then [`WINDOWS`] windows of `updates`
/// timed updates (more where those are too short to time) without evaluation.
fn alone_rate(
    cfg: &PpoTrialConfig,
    data: &Arc<Dataset>,
    bars: Range<usize>,
    device: &burn::tensor::Device,
    updates: usize,
) -> Result<Alone, FrontError> {
    let per_update = cfg.ppo.n_steps * cfg.env.n_envs;
    let mut trainer = TrainingRun::build(cfg, data, bars, device, None)?.trainer;
    trainer.learn(per_update, &mut |_| {})?;
    // Where the warm-up compiled (a GPU's), the trainer times the next update's phases too
    // (a synchronisation after each): that one is warm-up as well, not the rate measured.
    while trainer.retiming() {
        trainer.learn(per_update, &mut |_| {})?;
    }
    let mut window = updates;
    let mut rates = Vec::with_capacity(WINDOWS);
    let first = trainer.learn(per_update * window, &mut |_| {})?;
    if first.elapsed_s < MIN_WINDOW_S {
        // Long enough to time; the short first window still counts as warm-up only.
        let stretch = (MIN_WINDOW_S / first.elapsed_s.max(1e-6)).ceil() as usize;
        window *= stretch.clamp(1, MAX_STRETCH);
    } else {
        rates.push(first.samples_per_second);
    }
    while rates.len() < WINDOWS {
        let report = trainer.learn(per_update * window, &mut |_| {})?;
        rates.push(report.samples_per_second);
    }
    Ok(summarise(rates, window))
}

/// The median, slowest and fastest of `rates` (not empty).
fn summarise(mut rates: Vec<f64>, updates_per_window: usize) -> Alone {
    rates.sort_by(f64::total_cmp);
    Alone {
        median: rates[rates.len() / 2],
        low: rates[0],
        high: rates[rates.len() - 1],
        updates_per_window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prediction_is_the_median_window_with_the_spread_beside_it() {
        let a = summarise(vec![55_017.0, 1_971.0, 56_766.0], 8);
        assert_eq!(
            a,
            Alone {
                median: 55_017.0,
                low: 1_971.0,
                high: 56_766.0,
                updates_per_window: 8
            }
        );
    }

    #[test]
    fn hosts_come_from_worker_labels() {
        assert_eq!(host_of(Some("box#12/worker-1")), "box");
        assert_eq!(host_of(Some("worker-0")), "");
        assert_eq!(host_of(None), "");
    }

    /// A short GPU trial whose compile phase was most of it: that is the cause named, with its
    /// steady rate against its configuration alone, not "no cause in the records".
    #[test]
    fn a_trial_mostly_compiling_is_told_so_with_its_steady_rate() {
        let mut cfg = PpoTrialConfig::default();
        cfg.ppo.batch_size = 256;
        let evidence = |compile| Evidence {
            not_here: None,
            rate: Some(1000.0),
            ratio: Some(0.3),
            concurrent: 1,
            eval_share: Some(0.05),
            compile,
            compile_not_apart: false,
            steady: Some(950.0),
            cfg: &cfg,
        };
        let named = causes(&evidence(Some((21.0, 0.7))));
        assert_eq!(named.len(), 1, "{named:?}");
        assert!(
            named[0].starts_with(
                "compiling kernels took 70 % of the trial (21.0 s); without it 950 samples/s (its \
                 evaluations still in), 95 % of its configuration alone — a GPU compiles"
            ),
            "{named:?}"
        );
        // Under the share, and where nothing compiled, the old verdict stands.
        for compile in [Some((2.0, 0.1)), None] {
            let named = causes(&evidence(compile));
            assert_eq!(named.len(), 1, "{named:?}");
            assert!(named[0].contains("no cause in the records"), "{named:?}");
        }
    }

    /// Compiling 10 s, evaluating 2 s and training 2 s: compiling is 71 % of the trial and
    /// evaluating 14 %, of one total (not 50 %, of the phases without compiling).
    #[test]
    fn evaluation_and_compiling_are_shares_of_one_total() {
        let phases = |p: &str| match p {
            "env" => Some(1.5),
            "inference" => Some(0.0),
            "update" => Some(0.5),
            "eval" => Some(2.0),
            "compile" => Some(10.0),
            _ => None,
        };
        let (eval, compile) = phase_shares(phases);
        assert_eq!(eval, Some(2.0 / 14.0));
        assert_eq!(compile, Some((10.0, 10.0 / 14.0)));
        // Recorded before the compile phase: the four phases only.
        let (eval, compile) = phase_shares(|p| (p != "compile").then(|| phases(p)).flatten());
        assert_eq!(eval, Some(0.5));
        assert_eq!(compile, None);
    }

    /// A one-update GPU trial compiled in its every update (`compile_not_apart`): compiling is
    /// the cause named, not "no cause in the records".
    #[test]
    fn a_trial_compiling_in_every_update_is_told_so() {
        let mut cfg = PpoTrialConfig::default();
        cfg.ppo.batch_size = 256;
        let named = causes(&Evidence {
            not_here: None,
            rate: Some(1000.0),
            ratio: Some(0.3),
            concurrent: 1,
            eval_share: Some(0.05),
            compile: Some((0.5, 0.1)),
            compile_not_apart: true,
            steady: None,
            cfg: &cfg,
        });
        assert_eq!(named.len(), 1, "{named:?}");
        assert!(
            named[0].starts_with("compiling kernels inside every update"),
            "{named:?}"
        );
    }

    /// Two overlapping trials, one on `wgpu:0` and one on the CPU: neither shared the
    /// other's device, so neither is "oversubscribed"; two CPU slots of one host are.
    #[test]
    fn only_trials_on_the_same_device_count_as_at_once() {
        let at =
            |s: i64| chrono::DateTime::from_timestamp(1_700_000_000 + s, 0).map(|d| d.naive_utc());
        let span = |trial_id, device| Span {
            trial_id,
            start: at(0),
            complete: at(100),
            worker: Some("box/worker-0"),
            device: Some(device),
        };
        let gpu_and_cpu = [span(0, "wgpu:0"), span(1, "cpu")];
        assert_eq!(concurrent_at_midpoint(0, &gpu_and_cpu), 1);
        let two_cards = [span(0, "wgpu:0"), span(1, "wgpu:1")];
        assert_eq!(concurrent_at_midpoint(0, &two_cards), 1);
        let two_cpu_slots = [span(0, "cpu"), span(1, "cpu#1")];
        assert_eq!(concurrent_at_midpoint(0, &two_cpu_slots), 2);
        // A slow trial alone on its card is not told it was oversubscribed.
        let cfg = PpoTrialConfig::default();
        let named = causes(&Evidence {
            not_here: None,
            rate: Some(1000.0),
            ratio: Some(0.5),
            concurrent: concurrent_at_midpoint(0, &gpu_and_cpu),
            eval_share: None,
            compile: None,
            compile_not_apart: false,
            steady: None,
            cfg: &cfg,
        });
        assert!(
            !named.iter().any(|c| c.contains("oversubscribed")),
            "{named:?}"
        );
    }

    #[test]
    fn slot_labels_name_their_device() {
        assert_eq!(device_of("cpu#1"), Ok(DeviceSpec::Cpu));
        assert_eq!(device_of("cpu"), Ok(DeviceSpec::Cpu));
        assert!(device_of("abacus").is_err());
    }
}
