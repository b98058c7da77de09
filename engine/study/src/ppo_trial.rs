//! The PPO trial: build the environment and trainer from the trial's configuration, train with
//! an evaluation on the validation split every `train.eval_every` updates
//! ([`tradetune_rl::ppo::PeriodicEval`]; each is an intermediate value for the pruner, at step = the
//! update number), and return the objective of the evaluation after the last update.
//!
//! The trial configuration is `{ env: EnvConfig, ppo: PpoConfig, train: TrialSchedule }`; its
//! leaves are the names a study fixes or searches (`env.n_envs`, `ppo.learning_rate`,
//! `ppo.policy.net_arch.pi`, `train.total_timesteps`, …).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use crate::file::{DataSection, EvaluationSection, StudyFile, StudyFileError};
use crate::runner::{DeviceSlot, Reporter, TrialError, TrialFunction, TrialInput, TrialPlan};
use tradetune_device::DeviceSpec;
use tradetune_device::memory::MemoryEstimate;
use tradetune_device::precision::Precision;
use tradetune_env::{CpuVecEnv, EnvConfig, ResolvedPlacement, TensorVecEnv, VecEnv};
use tradetune_market::Dataset;
use tradetune_market::load::DatasetConfig;
use tradetune_market::split::{Fold, SplitSpec};
use tradetune_rl::eval::{EvalSplit, Objective};
use tradetune_rl::ppo::evaluate_trainer;
use tradetune_rl::ppo::{
    HostEnv, PeriodicEval, PhaseTimes, PpoConfig, RolloutEnv, TrainEvent, TrainReport, Trainer,
};
use tradetune_telemetry::{GpuWork, PhaseSplit};

mod check;
mod folds;

pub use check::{DataShape, Problem, setting_default};

/// How long a trial trains and how often it is evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrialSchedule {
    /// Samples to train on (rounded up to whole updates of `n_steps × n_envs`).
    pub total_timesteps: usize,
    /// Updates between evaluations on the validation split; 0 = only at the end.
    pub eval_every: usize,
}

impl Default for TrialSchedule {
    fn default() -> Self {
        TrialSchedule {
            total_timesteps: 100_000,
            eval_every: 5,
        }
    }
}

/// One trial's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PpoTrialConfig {
    pub env: EnvConfig,
    pub ppo: PpoConfig,
    #[serde(default)]
    pub train: TrialSchedule,
}

impl Default for PpoTrialConfig {
    fn default() -> Self {
        PpoTrialConfig {
            env: EnvConfig::new(),
            ppo: PpoConfig::new(),
            train: TrialSchedule::default(),
        }
    }
}

impl PpoTrialConfig {
    /// The defaults as JSON: the tree whose leaves a study file may fix or search.
    pub fn defaults_json() -> serde_json::Value {
        serde_json::to_value(PpoTrialConfig::default()).unwrap_or(serde_json::Value::Null)
    }

    /// Reads an applied configuration back, checking enum names and types.
    pub fn from_json(config: &serde_json::Value) -> Result<Self, TrialError> {
        serde_json::from_value(config.clone())
            .map_err(|e| TrialError::Failed(format!("trial configuration: {e}")))
    }
}

/// Reads a study file whose trials are PPO trials.
pub fn read_study_file(path: impl Into<std::path::PathBuf>) -> Result<StudyFile, StudyFileError> {
    StudyFile::read(path, &PpoTrialConfig::defaults_json())
}

/// Parses a PPO study file's text (`path` names it in errors).
pub fn parse_study_file(text: &str, path: &str) -> Result<StudyFile, StudyFileError> {
    StudyFile::parse(text, path, &PpoTrialConfig::defaults_json())
}

/// Every precision the study's trials can ask for: the fixed `ppo.precision` and, when it is
/// searched, each of its choices.
pub fn study_precisions(f: &StudyFile) -> Result<Vec<Precision>, StudyFileError> {
    let base = PpoTrialConfig::from_json(&f.base_config)
        .map_err(|e| f.key_error("fixed", e.to_string()))?;
    let mut out = vec![base.ppo.precision];
    if let Some(crate::space::OptunaDistribution::Categorical(d)) = f.space.get("ppo.precision") {
        for choice in &d.choices {
            let p = match choice {
                crate::space::CategoricalChoice::Str(s) => s
                    .parse::<Precision>()
                    .map_err(|e| f.key_error("search.ppo.precision", e))?,
                other => {
                    return Err(f.key_error(
                        "search.ppo.precision",
                        format!("choice {other} is not a precision name"),
                    ));
                }
            };
            if !out.contains(&p) {
                out.push(p);
            }
        }
    } else if f.space.get("ppo.precision").is_some() {
        return Err(f.key_error(
            "search.ppo.precision",
            "must be a list of choices (f32, bf16, f16)".into(),
        ));
    }
    Ok(out)
}

/// Refuses a study before anything starts when one of its devices is not available here or
/// lacks a precision its trials can ask for, naming the device and what it supports.
pub fn check_devices(f: &StudyFile, slots: &[DeviceSlot]) -> Result<(), StudyFileError> {
    let precisions = study_precisions(f)?;
    for slot in slots {
        for p in &precisions {
            tradetune_device::check_precision(slot.spec, *p)
                .map_err(|e| f.key_error("study.devices", e.to_string()))?;
        }
    }
    Ok(())
}

/// Trains and scores PPO trials on one prepared dataset, shared by every worker.
pub struct PpoTrial {
    dataset: Arc<Dataset>,
    train: Range<usize>,
    validation: Range<usize>,
    objective: Objective,
    /// Where the data came from, for reports.
    pub source: String,
    /// The market files (empty: the bundled sample), for the checkpoints' `data.json`.
    paths: Vec<std::path::PathBuf>,
    /// Where each COMPLETE trial's policy is saved (`<dir>/trial_<N>`), when set.
    checkpoints: Option<std::path::PathBuf>,
    /// Cross-validation folds over the train and validation bars (None: hold-out).
    folds: Option<Vec<Fold>>,
}

impl PpoTrial {
    /// Loads the study's data (the bundled sample when it lists no files) and its split.
    pub fn load(
        data: &DataSection,
        split: &SplitSpec,
        base: &PpoTrialConfig,
        objective: Objective,
    ) -> Result<Self, tradetune_market::DataError> {
        let loaded = DatasetConfig {
            paths: data.paths.clone(),
            assets: data.assets.clone(),
            lookback: base.env.lookback,
            episode_bars: base.env.episode_bars,
            split: split.clone(),
            ..DatasetConfig::default()
        }
        .load()?;
        Ok(PpoTrial {
            source: format!(
                "{}: {} (train bars {}..{}, validation {}..{})",
                loaded.source_name,
                loaded.dataset.names.join(", "),
                loaded.split.train.start,
                loaded.split.train.end,
                loaded.split.validation.start,
                loaded.split.validation.end
            ),
            train: loaded.split.train.clone(),
            validation: loaded.split.validation.clone(),
            dataset: Arc::new(loaded.dataset),
            objective,
            paths: data
                .paths
                .iter()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
                .collect(),
            checkpoints: None,
            folds: None,
        })
    }

    /// Scores each trial as `evaluation` says: hold-out, or the mean over cross-validation
    /// folds cut from the train and validation bars (the test split stays held out).
    pub fn with_evaluation(
        mut self,
        evaluation: &EvaluationSection,
    ) -> Result<Self, tradetune_market::DataError> {
        self.folds = evaluation.folds(self.validation.end)?;
        if let Some(folds) = &self.folds {
            self.source = format!(
                "{}, {} {} folds",
                self.source,
                folds.len(),
                evaluation.name()
            );
        }
        Ok(self)
    }

    /// The cross-validation folds, when the study has them.
    pub fn folds(&self) -> Option<&[Fold]> {
        self.folds.as_deref()
    }

    /// The loaded market data's [`tradetune_market::Dataset::fingerprint`].
    pub fn data_fingerprint(&self) -> String {
        self.dataset.fingerprint()
    }

    /// Saves each COMPLETE trial's policy in `dir/trial_<N>`, laid out as `tradetune train
    /// --out` lays out a checkpoint (model, configs, normalisation, `env.json`, `data.json`), so
    /// `tradetune backtest` and the app's Backtest panel evaluate it; the trial's `checkpoint`
    /// user attribute names the directory.
    pub fn with_checkpoints(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.checkpoints = Some(dir.into());
        self
    }

    /// Observation and action sizes of `env` on this dataset.
    pub fn sizes(&self, env: &EnvConfig) -> Result<(usize, usize), TrialError> {
        let one = env.clone().with_n_envs(1);
        let e = CpuVecEnv::new(one, self.dataset.clone(), self.train.clone())
            .map_err(TrialError::failed)?;
        Ok((e.obs_dim(), e.action_dim()))
    }

    /// The memory estimate of a configuration on the CPU (the host env keeps the dataset on
    /// the host).
    pub fn estimate(&self, cfg: &PpoTrialConfig) -> Result<MemoryEstimate, TrialError> {
        self.estimate_on(cfg, true)
    }

    /// The memory estimate on a device that is (`on_cpu`) or is not the CPU: an env placed on
    /// the device holds the market data there.
    pub fn estimate_on(
        &self,
        cfg: &PpoTrialConfig,
        on_cpu: bool,
    ) -> Result<MemoryEstimate, TrialError> {
        let (obs, act) = self.sizes(&cfg.env)?;
        let dataset = match cfg.env.placement_on(on_cpu) {
            ResolvedPlacement::Host => 0,
            ResolvedPlacement::Device => dataset_bytes(&self.dataset),
        };
        Ok(cfg.ppo.memory_estimate(cfg.env.n_envs, obs, act, dataset))
    }
}

/// Bytes of the market data a device env uploads: prices `[T, M]` and features `[T, M·F]`
/// in f32.
pub fn dataset_bytes(d: &Dataset) -> u64 {
    DataShape::of(d).device_bytes()
}

/// The trainer's phases in the telemetry's four: buffer writes count as inference (both are
/// the rollout's non-env work), GAE as update.
fn phase_split(p: &PhaseTimes) -> PhaseSplit {
    PhaseSplit {
        env_s: p.env_step,
        inference_s: p.inference + p.buffer,
        update_s: p.advantages + p.update,
        eval_s: p.evaluation,
        compile_s: p.compile,
    }
}

/// The trainer's checkpoint plus the environment and the data source, as `tradetune train`
/// writes them (`env.json`; `data.json` = `{"paths": [...]}`).
fn save_checkpoint<E: tradetune_rl::ppo::RolloutEnv>(
    dir: &std::path::Path,
    trainer: &Trainer<E>,
    env: &EnvConfig,
    paths: &[std::path::PathBuf],
) -> Result<(), TrialError> {
    tradetune_rl::ppo::checkpoint::save(dir, trainer).map_err(TrialError::failed)?;
    let write = |name: &str, value: serde_json::Value| {
        let path = dir.join(name);
        let text = serde_json::to_string_pretty(&value).map_err(TrialError::failed)?;
        std::fs::write(&path, text)
            .map_err(|e| TrialError::Failed(format!("writing {}: {e}", path.display())))
    };
    write(
        "env.json",
        serde_json::to_value(env).map_err(TrialError::failed)?,
    )?;
    write("data.json", serde_json::json!({ "paths": paths }))
}

impl TrialFunction for PpoTrial {
    type Config = PpoTrialConfig;

    fn config(&self, applied: &serde_json::Value) -> Result<PpoTrialConfig, TrialError> {
        PpoTrialConfig::from_json(applied)
    }

    fn plan(&self, cfg: &PpoTrialConfig, input: &TrialInput<'_>) -> Result<TrialPlan, TrialError> {
        let on_cpu = input.device.spec == DeviceSpec::Cpu;
        Ok(TrialPlan {
            precision: cfg.ppo.precision.to_string(),
            memory: Some(self.estimate_on(cfg, on_cpu)?),
        })
    }

    fn run(
        &self,
        cfg: &PpoTrialConfig,
        input: &TrialInput<'_>,
        reporter: &mut Reporter<'_>,
    ) -> Result<f64, TrialError> {
        tradetune_device::check_precision(input.device.spec, cfg.ppo.precision)
            .map_err(TrialError::failed)?;
        let device = tradetune_device::open(input.device.spec).map_err(TrialError::failed)?;
        let placement = cfg.env.placement_on(input.device.spec == DeviceSpec::Cpu);
        reporter.set_user_attr("env_placement", placement.name());
        match &self.folds {
            None => {
                let part = Part {
                    data: self.dataset.clone(),
                    range: self.train.clone(),
                    fold: None,
                };
                self.with_env(cfg, &part, placement, &device, |env| {
                    self.train_holdout(cfg, input, reporter, env, &device)
                })?
            }
            Some(folds) => self.train_folds(cfg, input, reporter, folds, placement, &device),
        }
    }
}

/// What one training run of a trial trains on: the data and its bar range, and which fold
/// it is (index, count) when cross-validating.
pub(crate) struct Part {
    data: Arc<Dataset>,
    range: Range<usize>,
    fold: Option<(usize, usize)>,
}

impl PpoTrial {
    /// Builds the environment of `part` where `placement` says and hands it to `f`.
    fn with_env<T>(
        &self,
        cfg: &PpoTrialConfig,
        part: &Part,
        placement: ResolvedPlacement,
        device: &burn::tensor::Device,
        f: impl FnOnce(AnyEnv) -> T,
    ) -> Result<T, TrialError> {
        Ok(match placement {
            ResolvedPlacement::Host => {
                let env = CpuVecEnv::new(cfg.env.clone(), part.data.clone(), part.range.clone())
                    .map_err(TrialError::failed)?;
                f(AnyEnv::Host(Box::new(HostEnv::new(env, device))))
            }
            ResolvedPlacement::Device => {
                // The market data goes to the device once; every step stays there.
                let env =
                    TensorVecEnv::new(cfg.env.clone(), &part.data, part.range.clone(), device)
                        .map_err(TrialError::failed)?;
                f(AnyEnv::Device(Box::new(env)))
            }
        })
    }

    /// Trains on `env` (on `device`) with the periodic validation evaluations as intermediate
    /// values, and scores the trial on the validation split.
    fn train_holdout(
        &self,
        cfg: &PpoTrialConfig,
        input: &TrialInput<'_>,
        reporter: &mut Reporter<'_>,
        env: AnyEnv,
        device: &burn::tensor::Device,
    ) -> Result<f64, TrialError> {
        match env {
            AnyEnv::Host(env) => self.holdout_on(cfg, input, reporter, *env, device),
            AnyEnv::Device(env) => self.holdout_on(cfg, input, reporter, *env, device),
        }
    }

    fn holdout_on<E: RolloutEnv>(
        &self,
        cfg: &PpoTrialConfig,
        input: &TrialInput<'_>,
        reporter: &mut Reporter<'_>,
        env: E,
        device: &burn::tensor::Device,
    ) -> Result<f64, TrialError> {
        let split = EvalSplit::new(
            "validation",
            self.dataset.clone(),
            self.validation.clone(),
            &cfg.env,
        );
        let mut trainer = Trainer::new(cfg.ppo.clone(), env, device).map_err(TrialError::failed)?;
        if let Some(budget) = &input.budget {
            trainer = trainer.with_memory_budget(budget.clone());
        }
        if cfg.train.eval_every > 0 {
            trainer = trainer
                .with_evaluation(PeriodicEval {
                    every: cfg.train.eval_every,
                    split: split.clone(),
                    objective: self.objective,
                })
                .map_err(TrialError::failed)?;
        }
        let mut done = Work::default();
        let report = learn(&mut trainer, cfg, input, reporter, None, &mut done)?;
        // The value is the policy after the last update: reuse the periodic evaluation when it
        // fell on that update, else evaluate now.
        let last = match report.last_evaluation {
            Some(e)
                if cfg.train.eval_every > 0
                    && report.updates.is_multiple_of(cfg.train.eval_every) =>
            {
                e
            }
            _ => {
                let e = evaluate_trainer(&trainer, &split, self.objective)
                    .map_err(TrialError::failed)?
                    .summary();
                reporter.report_and_check(report.updates as u64, e.objective)?;
                e
            }
        };
        reporter.set_user_attr("objective", self.objective.name());
        reporter.set_user_attr("val_total_return", last.agent.total_return);
        reporter.set_user_attr("val_sharpe", last.agent.sharpe);
        reporter.set_user_attr("val_max_drawdown", last.agent.max_drawdown);
        reporter.set_user_attr(
            "val_equal_weight_total_return",
            last.equal_weight.total_return,
        );
        reporter.set_user_attr("val_equal_weight_sharpe", last.equal_weight.sharpe);
        reporter.set_user_attr("train_timesteps", report.timesteps as i64);
        reporter.set_user_attr("train_samples_per_s", report.samples_per_second);
        if let Some(root) = &self.checkpoints {
            let dir = root.join(format!("trial_{}", input.number));
            save_checkpoint(&dir, &trainer, &cfg.env, &self.paths)?;
            reporter.set_user_attr("checkpoint", dir.display().to_string());
        }
        Ok(last.objective)
    }
}

/// A trial's environment on the host or on the device.
pub(crate) enum AnyEnv {
    Host(Box<HostEnv<CpuVecEnv>>),
    Device(Box<TensorVecEnv>),
}

/// What a trial has trained so far, over its folds.
#[derive(Default)]
pub(crate) struct Work {
    samples: u64,
    updates: u64,
    phases: PhaseSplit,
    /// What the GPU runtime compiled and launched, on a GPU.
    gpu: Option<GpuWork>,
}

/// Trains `trainer` for the trial's budget, turning its events into the trial's progress,
/// learning curve and (for a hold-out) intermediate values; adds the run to `done` and
/// records the total as the trial's work. `fold` is (index, count) when cross-validating: the
/// progress spans all folds and the curve's updates continue from the previous fold's.
pub(crate) fn learn<E: RolloutEnv>(
    trainer: &mut Trainer<E>,
    cfg: &PpoTrialConfig,
    input: &TrialInput<'_>,
    reporter: &mut Reporter<'_>,
    fold: Option<(usize, usize)>,
    done: &mut Work,
) -> Result<TrainReport, TrialError> {
    let total = cfg.train.total_timesteps.max(1);
    let trainer_stop = trainer.stop_flag();
    let user_stop = reporter.stop_flag();
    let (update_offset, step_offset) = (done.updates, done.samples);
    // Why the callback asked the trainer to stop: pruned at a step, or a storage error.
    let mut ended: Option<TrialError> = None;
    // One update's metrics, gathered from its events and sent with its `Progress`.
    let mut metrics: BTreeMap<String, f64> = BTreeMap::new();
    let report = trainer
        .learn(total, &mut |event| {
            if user_stop.is_set() {
                trainer_stop.store(true, Ordering::Relaxed);
            }
            match event {
                TrainEvent::Evaluation {
                    update, summary, ..
                } if ended.is_none() && fold.is_none() => {
                    if let Err(e) = reporter.report_and_check(update as u64, summary.objective) {
                        ended = Some(e);
                        trainer_stop.store(true, Ordering::Relaxed);
                    }
                }
                TrainEvent::Episodes(summary) => {
                    metrics.extend(summary.metrics().map(|(k, v)| (k.to_owned(), v)));
                }
                TrainEvent::Update { update, stats } => {
                    // NVML's figure for this process on the trial's card, against the
                    // budget (the pool check runs in the trainer).
                    if let (Some(budget), Some(bytes)) = (
                        &input.budget,
                        input.process_memory.as_ref().and_then(|m| m.bytes()),
                    ) && let Err(e) =
                        budget.check_in_use(bytes, update, "NVML per-process memory")
                        && ended.is_none()
                    {
                        ended = Some(TrialError::Failed(e.to_string()));
                        trainer_stop.store(true, Ordering::Relaxed);
                    }
                    metrics.extend(stats.metrics().map(|(k, v)| (k.to_owned(), v)));
                }
                TrainEvent::Progress {
                    update,
                    timesteps,
                    samples_per_second,
                    phases,
                    ..
                } => {
                    let here = timesteps as f64 / total as f64;
                    let (fraction, message) = match fold {
                        None => (
                            here,
                            format!(
                                "{timesteps}/{total} samples, {samples_per_second:.0} samples/s"
                            ),
                        ),
                        Some((i, n)) => (
                            (i as f64 + here) / n as f64,
                            format!(
                                "fold {}/{n}: {timesteps}/{total} samples, \
                                 {samples_per_second:.0} samples/s",
                                i + 1
                            ),
                        ),
                    };
                    reporter.progress(fraction, message);
                    metrics.insert("charts/SPS".to_owned(), samples_per_second);
                    metrics.extend(phases.metrics().map(|(k, v)| (k.to_owned(), v)));
                    let values = std::mem::take(&mut metrics);
                    if let Err(e) = reporter.metrics(
                        update_offset + update as u64,
                        step_offset + timesteps as u64,
                        values,
                    ) && ended.is_none()
                    {
                        ended = Some(e);
                        trainer_stop.store(true, Ordering::Relaxed);
                    }
                }
                _ => {}
            }
        })
        .map_err(TrialError::failed)?;
    let phases = phase_split(&report.phases);
    done.samples += report.timesteps as u64;
    done.updates += report.updates as u64;
    done.phases.add(&phases);
    reporter.set_work(done.samples, Some(done.phases));
    if trainer.train_device().clone().without_autodiff() != burn::tensor::Device::flex() {
        let mut gpu = done.gpu.unwrap_or_default();
        gpu.kernels_compiled += report.kernels.compiled;
        gpu.autotune_runs += report.kernels.autotune_runs;
        if let Some(d) = report.dispatches {
            gpu.dispatches_per_minibatch = Some(d.per_minibatch);
            gpu.dispatches_per_env_step = Some(d.per_env_step);
            gpu.syncs_per_update = d.syncs_per_update.or(gpu.syncs_per_update);
        }
        gpu.n_steps = Some(cfg.ppo.n_steps);
        done.gpu = Some(gpu);
        reporter.set_gpu_work(gpu);
    }
    if let Some(e) = ended {
        return Err(e);
    }
    if report.stopped || user_stop.is_set() {
        return Err(TrialError::Stopped);
    }
    Ok(report)
}
