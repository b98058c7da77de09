//! The plain tables of a study file and their defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::study::runner::Assignment;

/// The `[study]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudySection {
    pub name: String,
    #[serde(default = "default_direction")]
    pub direction: String,
    #[serde(default = "default_objective")]
    pub objective: String,
    #[serde(default = "default_n_trials")]
    pub n_trials: usize,
    #[serde(default = "one")]
    pub workers: usize,
    #[serde(default = "default_devices")]
    pub devices: Vec<String>,
    #[serde(default)]
    pub assignment: Assignment,
    #[serde(default = "default_fraction")]
    pub memory_fraction: f64,
    /// Memory of the device class (GiB) where the device's own is unknown (GPUs, presets).
    pub device_memory_gib: Option<f64>,
    /// What the file is for (`NVIDIA RTX 4080 16 GB`), shown in preset lists.
    pub device_class: Option<String>,
    pub description: Option<String>,
}

fn default_direction() -> String {
    "maximize".into()
}
/// The objective used when a file names none (see [`crate::study::ppo_trial`]).
pub const DEFAULT_OBJECTIVE: &str = "sharpe_excess";
fn default_objective() -> String {
    DEFAULT_OBJECTIVE.into()
}
fn default_n_trials() -> usize {
    20
}
fn one() -> usize {
    1
}
fn default_devices() -> Vec<String> {
    vec!["cpu".into()]
}
fn default_fraction() -> f64 {
    crate::device::memory::DEFAULT_MEMORY_FRACTION
}

/// The `[data]` table.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataSection {
    /// Market files; empty = the bundled sample. Relative paths are relative to the study file.
    pub paths: Vec<PathBuf>,
    pub assets: Vec<String>,
}

/// The `[sampler]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SamplerSection {
    /// `tpe`, `random` or `grid`.
    pub kind: String,
    pub seed: u64,
    pub n_startup_trials: Option<usize>,
    pub n_ei_candidates: Option<usize>,
    pub multivariate: Option<bool>,
    pub constant_liar: Option<bool>,
    /// Grid values per parameter (`kind = "grid"`).
    pub grid: BTreeMap<String, Vec<toml::Value>>,
    /// Fixed (possibly partial) parameter sets tried first.
    pub enqueue: Vec<BTreeMap<String, toml::Value>>,
}

impl Default for SamplerSection {
    fn default() -> Self {
        SamplerSection {
            kind: "tpe".into(),
            seed: 0,
            n_startup_trials: None,
            n_ei_candidates: None,
            multivariate: None,
            constant_liar: None,
            grid: BTreeMap::new(),
            enqueue: Vec::new(),
        }
    }
}

/// The `[pruner]` table; fields apply to the kinds that use them, with Optuna's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrunerSection {
    /// `none`, `median`, `percentile`, `successive_halving` or `hyperband`.
    pub kind: String,
    pub percentile: f64,
    pub n_startup_trials: usize,
    pub n_warmup_steps: u64,
    pub interval_steps: u64,
    pub min_resource: Option<u64>,
    pub max_resource: Option<u64>,
    pub reduction_factor: Option<u64>,
}

impl Default for PrunerSection {
    fn default() -> Self {
        PrunerSection {
            kind: "median".into(),
            percentile: 50.0,
            n_startup_trials: 5,
            n_warmup_steps: 0,
            interval_steps: 1,
            min_resource: None,
            max_resource: None,
            reduction_factor: None,
        }
    }
}
