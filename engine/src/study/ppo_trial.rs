//! The PPO trial: build the environment and trainer from the trial's configuration, train,
//! evaluate on the validation split every `train.eval_every` updates (the pruner's intermediate
//! values), and return the objective of the last evaluation.
//!
//! The trial configuration is `{ env: EnvConfig, ppo: PpoConfig, train: TrialSchedule }`; its
//! leaves are the names a study fixes or searches (`env.n_envs`, `ppo.learning_rate`,
//! `ppo.policy.net_arch.pi`, `train.total_timesteps`, …).
//!
//! Training runs in chunks of `eval_every` updates (one `Trainer::learn` call each, which
//! continues the same run: environment state, timesteps and optimiser carry over) with an
//! evaluation between chunks. A linear learning-rate schedule decays over one `learn` call, so
//! with `lr_schedule = "linear"` the trial trains in one call and evaluates once, at the end.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::device::memory::MemoryEstimate;
use crate::env::{CpuVecEnv, EnvConfig, VecEnv};
use crate::eval::{EvalSplit, Objective, evaluate_trainer};
use crate::market::Dataset;
use crate::market::load::DatasetConfig;
use crate::market::split::SplitSpec;
use crate::ppo::{HostEnv, LrSchedule, PhaseTimes, PpoConfig, TrainEvent, Trainer};
use crate::study::file::{DataSection, StudyFile, StudyFileError};
use crate::study::runner::{Reporter, TrialError, TrialFunction, TrialInput, TrialPlan};
use crate::telemetry::PhaseSplit;

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

/// Reads a study file whose trials are PPO trials, checking the objective's name too.
pub fn read_study_file(path: impl Into<std::path::PathBuf>) -> Result<StudyFile, StudyFileError> {
    let f = StudyFile::read(path, &PpoTrialConfig::defaults_json())?;
    check_objective(&f)?;
    Ok(f)
}

/// Parses a PPO study file's text (`path` names it in errors).
pub fn parse_study_file(text: &str, path: &str) -> Result<StudyFile, StudyFileError> {
    let f = StudyFile::parse(text, path, &PpoTrialConfig::defaults_json())?;
    check_objective(&f)?;
    Ok(f)
}

fn check_objective(f: &StudyFile) -> Result<(), StudyFileError> {
    f.study
        .objective
        .parse::<Objective>()
        .map(|_| ())
        .map_err(|message| f.key_error("objective", message))
}

/// Trains and scores PPO trials on one prepared dataset, shared by every worker.
pub struct PpoTrial {
    dataset: Arc<Dataset>,
    train: Range<usize>,
    validation: Range<usize>,
    objective: Objective,
    /// Where the data came from, for reports.
    pub source: String,
}

impl PpoTrial {
    /// Loads the study's data (the bundled sample when it lists no files) and its split.
    pub fn load(
        data: &DataSection,
        split: &SplitSpec,
        base: &PpoTrialConfig,
        objective: &str,
    ) -> Result<Self, crate::market::DataError> {
        let loaded = DatasetConfig {
            paths: data.paths.clone(),
            assets: data.assets.clone(),
            lookback: base.env.lookback,
            episode_bars: base.env.episode_bars,
            split: split.clone(),
            ..DatasetConfig::default()
        }
        .load()?;
        let objective = objective.parse::<Objective>().unwrap_or_default();
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
        })
    }

    /// Observation and action sizes of `env` on this dataset.
    pub fn sizes(&self, env: &EnvConfig) -> Result<(usize, usize), TrialError> {
        let one = env.clone().with_n_envs(1);
        let e = CpuVecEnv::new(one, self.dataset.clone(), self.train.clone())
            .map_err(TrialError::failed)?;
        Ok((e.obs_dim(), e.action_dim()))
    }

    /// The memory estimate of a configuration (the CPU env keeps the dataset on the host).
    pub fn estimate(&self, cfg: &PpoTrialConfig) -> Result<MemoryEstimate, TrialError> {
        let (obs, act) = self.sizes(&cfg.env)?;
        Ok(MemoryEstimate::of(&cfg.ppo, cfg.env.n_envs, obs, act, 0))
    }
}

fn phase_split(p: &PhaseTimes, eval_s: f64) -> PhaseSplit {
    PhaseSplit {
        env_s: p.env_step,
        inference_s: p.inference + p.buffer,
        update_s: p.advantages + p.update,
        eval_s,
    }
}

impl TrialFunction for PpoTrial {
    fn plan(&self, input: &TrialInput<'_>) -> Result<TrialPlan, TrialError> {
        let cfg = PpoTrialConfig::from_json(input.config)?;
        Ok(TrialPlan {
            precision: cfg.ppo.precision.to_string(),
            memory: Some(self.estimate(&cfg)?),
        })
    }

    fn run(&self, input: &TrialInput<'_>, reporter: &mut Reporter<'_>) -> Result<f64, TrialError> {
        let cfg = PpoTrialConfig::from_json(input.config)?;
        let device = crate::device::open(input.device.spec).map_err(TrialError::failed)?;
        let env = CpuVecEnv::new(cfg.env.clone(), self.dataset.clone(), self.train.clone())
            .map_err(TrialError::failed)?;
        let per_update = cfg.ppo.n_steps * env.n_envs();
        let mut trainer = Trainer::new(cfg.ppo.clone(), HostEnv::new(env, &device), &device)
            .map_err(TrialError::failed)?;
        let split = EvalSplit::new(
            "validation",
            self.dataset.clone(),
            self.validation.clone(),
            &cfg.env,
        );
        let total = cfg.train.total_timesteps.max(1);
        let chunk = if cfg.train.eval_every == 0 || cfg.ppo.lr_schedule == LrSchedule::Linear {
            total
        } else {
            cfg.train.eval_every * per_update
        };
        let trainer_stop = trainer.stop_flag();
        let user_stop = reporter.stop_flag();
        let mut phases = PhaseTimes::default();
        let mut eval_s = 0.0;
        let mut last = None;
        let mut done = 0;
        while done < total {
            let this = chunk.min(total - done);
            let report = {
                let reporter = &*reporter;
                trainer
                    .learn(this, &mut |event| {
                        if user_stop.is_set() {
                            trainer_stop.store(true, Ordering::Relaxed);
                        }
                        if let TrainEvent::Progress {
                            timesteps,
                            samples_per_second,
                            ..
                        } = event
                        {
                            reporter.progress(
                                timesteps as f64 / total as f64,
                                format!("{timesteps}/{total} samples, {samples_per_second:.0} samples/s"),
                            );
                        }
                    })
                    .map_err(TrialError::failed)?
            };
            phases.add(&report.phases);
            done = report.timesteps;
            if report.stopped || user_stop.is_set() {
                reporter.set_work(done as u64, Some(phase_split(&phases, eval_s)));
                return Err(TrialError::Stopped);
            }
            let t = Instant::now();
            let eval = evaluate_trainer(&trainer, &split, self.objective).map_err(TrialError::failed)?;
            eval_s += t.elapsed().as_secs_f64();
            reporter.set_work(done as u64, Some(phase_split(&phases, eval_s)));
            let value = eval.objective;
            last = Some(eval);
            reporter.report_and_check(report.updates as u64, value)?;
        }
        let Some(eval) = last else {
            return Err(TrialError::Failed("the trial trained no update".into()));
        };
        reporter.set_user_attr("objective", self.objective.name());
        reporter.set_user_attr("val_total_return", eval.agent.total_return);
        reporter.set_user_attr("val_sharpe", eval.agent.sharpe);
        reporter.set_user_attr("val_max_drawdown", eval.agent.max_drawdown);
        reporter.set_user_attr("val_equal_weight_total_return", eval.equal_weight.total_return);
        reporter.set_user_attr("val_equal_weight_sharpe", eval.equal_weight.sharpe);
        reporter.set_user_attr("train_timesteps", done as i64);
        Ok(eval.objective)
    }
}
