//! The PPO trial: build the environment and trainer from the trial's configuration, train with
//! an evaluation on the validation split every `train.eval_every` updates
//! ([`tradetune_rl::ppo::PeriodicEval`]; each is an intermediate value for the pruner, at step = the
//! update number), and return the objective of the evaluation after the last update.
//!
//! The trial configuration is `{ env: EnvConfig, ppo: PpoConfig, train: TrialSchedule }`; its
//! leaves are the names a study fixes or searches (`env.n_envs`, `ppo.learning_rate`,
//! `ppo.policy.net_arch.pi`, `train.total_timesteps`, …).
//!
//! - `check`: a configuration's problems and memory estimate, before anything runs.
//! - `run`: [`TrainingRun`], the one way an environment is placed, the estimate checked and
//!   the trainer built, for trials and for `tradetune train`, `study speed` and `study reseed`.
//! - `learn`: a trial's training loop, its events turned into progress, curve and values.
//! - `holdout` and `folds`: a trial scored on the validation split, or over
//!   cross-validation folds.

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::file::{DataSection, EvaluationSection, StudyFile, StudyFileError};
use crate::runner::{DeviceSlot, Reporter, TrialError, TrialFunction, TrialInput, TrialPlan};
use tradetune_device::DeviceSpec;
use tradetune_device::memory::MemoryEstimate;
use tradetune_device::precision::Precision;
use tradetune_env::{CpuVecEnv, EnvConfig, VecEnv};
use tradetune_market::Dataset;
use tradetune_market::load::DatasetConfig;
use tradetune_market::split::{Fold, SplitSpec};
use tradetune_rl::eval::Objective;
use tradetune_rl::ppo::PpoConfig;

mod check;
mod folds;
mod holdout;
mod learn;
mod placement;
mod run;

pub use check::{DataShape, Problem, setting_default};
pub use placement::AutoPlacement;
pub use run::{PlacedEnv, TrainingRun, TrainingRunError};

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
    /// The study's `[data] assets` and `[split]`, for the checkpoints' `data.json` (a backtest
    /// rebuilds the same bars and the same scaler from them).
    assets: Vec<String>,
    split: SplitSpec,
    /// Where each COMPLETE trial's policy is saved (`<dir>/trial_<N>`), when set.
    checkpoints: Option<std::path::PathBuf>,
    /// Cross-validation folds over the train and validation bars (None: hold-out).
    folds: Option<Vec<Fold>>,
    /// The features before scaling, kept for cross-validation: each fold refits the scaler on
    /// its own training bars (`dataset`'s is fitted on the hold-out train split, which holds
    /// some folds' test bars). None for a hold-out study.
    unscaled: Option<Arc<ndarray::Array3<f32>>>,
    /// Bars back from a bar that its observation's features read: the features' warm-up plus
    /// the lookback window less one.
    memory_bars: usize,
    /// The bars the indicators need before their first value (the data's warm-up).
    warmup_bars: usize,
    /// Warnings about the study's settings or its data that do not stop it (also in `source`).
    pub notes: Vec<String>,
    /// [`Self::data_fingerprint`], computed once (every trial's checkpoint records it).
    fingerprint: std::sync::OnceLock<String>,
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
        let mut source = format!(
            "{}: {} (train bars {}..{}, validation {}..{})",
            loaded.source_name,
            loaded.dataset.names.join(", "),
            loaded.split.train.start,
            loaded.split.train.end,
            loaded.split.validation.start,
            loaded.split.validation.end
        );
        // An asset's long gaps, said where the study says its data.
        for note in &loaded.notes {
            source = format!("{source}; note: {note}");
        }
        Ok(PpoTrial {
            source,
            train: loaded.split.train.clone(),
            validation: loaded.split.validation.clone(),
            dataset: Arc::new(loaded.dataset),
            unscaled: Some(Arc::new(loaded.unscaled_features)),
            memory_bars: loaded.warmup_bars + base.env.lookback.saturating_sub(1),
            warmup_bars: loaded.warmup_bars,
            notes: loaded.notes,
            objective,
            paths: data
                .paths
                .iter()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
                .collect(),
            assets: data.assets.clone(),
            split: split.clone(),
            checkpoints: None,
            folds: None,
            fingerprint: std::sync::OnceLock::new(),
        })
    }

    /// Where the search sets `env.lookback`, the features' memory the CPCV embargo is judged
    /// against is the longest lookback any trial can have (the top of its range or its
    /// largest choice), not the base configuration's: call before [`PpoTrial::with_evaluation`].
    pub fn searching(mut self, space: &crate::space::SearchSpace) -> Self {
        use tradetune_storage::model::{CategoricalChoice, OptunaDistribution};
        let longest = match space.get("env.lookback") {
            Some(OptunaDistribution::Int(d)) => usize::try_from(d.high).ok(),
            Some(OptunaDistribution::Float(d)) if d.high.is_finite() && d.high >= 0.0 => {
                Some(d.high.floor() as usize)
            }
            Some(OptunaDistribution::Categorical(d)) => (d.choices.iter())
                .filter_map(|c| match c {
                    CategoricalChoice::Int(v) => usize::try_from(*v).ok(),
                    _ => None,
                })
                .max(),
            _ => None,
        };
        if let Some(longest) = longest {
            self.memory_bars = self
                .memory_bars
                .max(self.warmup_bars + longest.saturating_sub(1));
        }
        self
    }

    /// Scores each trial as `evaluation` says: hold-out, or the mean over cross-validation
    /// folds cut from the train and validation bars (the test split stays held out).
    pub fn with_evaluation(
        mut self,
        evaluation: &EvaluationSection,
    ) -> Result<Self, tradetune_market::DataError> {
        self.folds = evaluation.folds(self.validation.end)?;
        if self.folds.is_none() {
            self.unscaled = None;
        }
        if let Some(folds) = &self.folds {
            self.source = format!(
                "{}, {} {} folds",
                self.source,
                folds.len(),
                evaluation.name()
            );
        }
        if let EvaluationSection::Cpcv { embargo_bars, .. } = evaluation
            && *embargo_bars < self.memory_bars
        {
            let note = embargo_note(*embargo_bars, self.memory_bars);
            self.source = format!("{}; note: {note}", self.source);
            self.notes.push(note);
        }
        Ok(self)
    }

    /// What a trial's checkpoint records of its data (`data.json`, read back as
    /// `front::data_source::DataSource`): the market files, the assets kept, the split, the
    /// assets' names in column order, the objective trials are scored by, and what a backtest
    /// checks the data against and cuts data that changed since by: the data's fingerprint,
    /// the split's bars by time and the scaler fitted on the training bars.
    pub fn data_record(&self) -> serde_json::Value {
        let split = tradetune_market::split::HoldOut {
            train: self.train.clone(),
            validation: self.validation.clone(),
            test: self.validation.end..self.dataset.n_bars(),
        };
        serde_json::json!({
            "paths": self.paths,
            "assets": self.assets,
            "split": self.split,
            "names": self.dataset.names,
            "objective": self.objective,
            "fingerprint": self.data_fingerprint(),
            "split_dates": split.dates(&self.dataset.timestamps),
            "scaler": self.dataset.scaler,
        })
    }

    /// The cross-validation folds, when the study has them.
    pub fn folds(&self) -> Option<&[Fold]> {
        self.folds.as_deref()
    }

    /// The loaded market data's [`tradetune_market::Dataset::fingerprint`].
    pub fn data_fingerprint(&self) -> String {
        self.fingerprint
            .get_or_init(|| self.dataset.fingerprint())
            .clone()
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
    /// the device holds the market data there ([`PpoTrialConfig::memory_estimate`], after the
    /// environment's own checks of the configuration on this data).
    pub fn estimate_on(
        &self,
        cfg: &PpoTrialConfig,
        on_cpu: bool,
    ) -> Result<MemoryEstimate, TrialError> {
        self.sizes(&cfg.env)?;
        Ok(cfg.memory_estimate(DataShape::of(&self.dataset), on_cpu))
    }
}

/// A CPCV embargo shorter than the bars an observation's features read: the first training
/// bars after each test block see features computed from the test block's prices (AFML §7.4.2).
/// A warning, not a refusal: the recursive features' memory never ends, so where to stop is the
/// user's choice.
fn embargo_note(embargo_bars: usize, memory_bars: usize) -> String {
    format!(
        "embargo_bars = {embargo_bars} is shorter than the {memory_bars} bars an observation's \
         features look back (indicator warm-up plus the longest lookback a trial can have, less one): the first {} training bars \
         after each test block carry features computed from its prices; embargo_bars = \
         {memory_bars} leaves them out",
        memory_bars - embargo_bars
    )
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
        match &self.folds {
            None => self.train_holdout(cfg, input, reporter, &device),
            Some(folds) => self.train_folds(cfg, input, reporter, folds, &device),
        }
    }
}
