//! The study file: one TOML file says what a study searches and how it runs.
//!
//! ```toml
//! [study]
//! name = "rtx4080"
//! direction = "maximize"          # or "minimize"
//! objective = "sharpe_excess"     # what a trial's value measures on the validation split
//! n_trials = 50
//! workers = 3
//! devices = ["wgpu:0"]            # each worker is bound to one of them
//! assignment = "round_robin"      # or "least_loaded" (by memory)
//! memory_fraction = 0.8           # of each device, shared by its workers
//! device_memory_gib = 16          # the device class, for the budget where it is not detected
//!
//! [data]
//! paths = []                      # empty = the bundled sample
//! assets = []
//!
//! [split]
//! by = "fractions"
//! train = 0.7
//! validation = 0.15
//!
//! [fixed]                         # any field of the trial configuration, by dotted name
//! env.n_envs = 32
//! ppo.policy.net_arch.pi = [2048, 1024, 512]
//! train.total_timesteps = 500_000
//!
//! [search]                        # searched ranges, Optuna's distributions
//! "ppo.learning_rate" = { low = 1e-5, high = 1e-3, log = true }
//! "ppo.batch_size" = { choices = [512, 1024, 2048] }
//! "ppo.n_epochs" = { low = 4, high = 16, step = 4 }        # integers: an int range
//!
//! [sampler]
//! kind = "tpe"                    # tpe | random | grid
//! seed = 42
//! enqueue = [{ "ppo.learning_rate" = 3e-4 }]   # "baseline" trials run first
//!
//! [pruner]
//! kind = "median"                 # none | median | percentile | successive_halving | hyperband
//! n_startup_trials = 5
//! n_warmup_steps = 2
//! ```
//!
//! Every name in `[fixed]`, `[search]` and the sampler's lists is checked against the trial
//! configuration before anything runs; errors name the file, the line and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::device::DeviceSpec;
use crate::market::split::SplitSpec;
use crate::study::config_path::{self, ConfigPathError};
use crate::study::pruner::{
    HyperbandPruner, NopPruner, PercentilePruner, Pruner, SuccessiveHalvingPruner,
};
use crate::study::runner::{Assignment, DeviceSlot, RunnerConfig};
use crate::study::sampler::{
    EnqueuedSampler, GridSampler, RandomSampler, Sampler, TpeConfig, TpeSampler,
};
use crate::study::space::{Distribution, ParamValue, SearchSpace};
use crate::study::trial::Direction;

/// A study file that cannot be used, with where the problem is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct StudyFileError {
    pub path: String,
    /// 1-based line of the key, when found.
    pub line: Option<usize>,
    /// The key concerned (`search."ppo.learning_rate"`, `study.workers`).
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for StudyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

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

/// A parsed, checked study file.
#[derive(Debug, Clone)]
pub struct StudyFile {
    /// Where it came from (a path, or `preset:NAME`), for messages.
    pub path: String,
    pub study: StudySection,
    pub data: DataSection,
    pub split: SplitSpec,
    /// The trial configuration every trial starts from: the defaults with `[fixed]` laid over.
    pub base_config: serde_json::Value,
    pub space: SearchSpace,
    pub sampler: SamplerSection,
    pub pruner: PrunerSection,
    /// Enqueued trials and grid values, external values by name (checked against the space).
    enqueued: Vec<BTreeMap<String, ParamValue>>,
    grid: BTreeMap<String, Vec<ParamValue>>,
    text: String,
}

/// The file's tables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sections {
    study: Option<StudySection>,
    #[serde(default)]
    data: DataSection,
    #[serde(default)]
    split: SplitSpec,
    #[serde(default)]
    fixed: toml::Table,
    #[serde(default)]
    search: toml::Table,
    #[serde(default)]
    sampler: SamplerSection,
    #[serde(default)]
    pruner: PrunerSection,
}

impl StudyFile {
    /// Reads and checks a study file; `defaults` is the trial configuration's default JSON
    /// (its leaves are the names that may be fixed or searched).
    pub fn read(
        path: impl Into<PathBuf>,
        defaults: &serde_json::Value,
    ) -> Result<StudyFile, StudyFileError> {
        let path = path.into();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| StudyFileError {
            path: name.clone(),
            line: None,
            key: None,
            message: format!("cannot read it: {e}"),
        })?;
        let mut file = StudyFile::parse(&text, &name, defaults)?;
        // Data paths are relative to the study file, so a study travels with its data.
        if let Some(dir) = path.parent() {
            for p in &mut file.data.paths {
                if p.is_relative() {
                    *p = dir.join(&*p);
                }
            }
        }
        Ok(file)
    }

    /// Parses and checks a study file's text; `path` names it in errors.
    pub fn parse(
        text: &str,
        path: &str,
        defaults: &serde_json::Value,
    ) -> Result<StudyFile, StudyFileError> {
        let err = |key: Option<String>, message: String| StudyFileError {
            path: path.to_owned(),
            line: key.as_deref().and_then(|k| line_of(text, k)),
            key,
            message,
        };
        // One typed pass over the whole text: syntax errors, unknown sections and wrong types
        // all come with the line they are on.
        let sections: Sections = toml::from_str(text).map_err(|e| StudyFileError {
            path: path.to_owned(),
            line: e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1)),
            key: None,
            message: e.message().trim().to_owned(),
        })?;
        let Sections {
            study,
            data,
            split,
            fixed,
            search,
            sampler,
            pruner,
        } = sections;
        let study = study.ok_or_else(|| {
            err(
                None,
                "missing [study] table (at least `name = \"...\"`)".into(),
            )
        })?;
        check_study(&study, &err)?;

        let mut base_config = defaults.clone();
        {
            let mut leaves = Vec::new();
            flatten(&fixed, "", &mut leaves);
            for (name, value) in leaves {
                set_fixed(&mut base_config, &name, value)
                    .map_err(|m| err(Some(format!("fixed.{name}")), m))?;
            }
        }

        let mut space = SearchSpace::new();
        {
            let mut specs = Vec::new();
            search_specs(&search, "", &mut specs);
            for (name, spec) in specs {
                let key = format!("search.\"{name}\"");
                let dist = distribution(&spec).map_err(|m| err(Some(key.clone()), m))?;
                space
                    .insert(&name, dist)
                    .map_err(|e| err(Some(key.clone()), e.to_string()))?;
            }
        }
        config_path::check_names(&base_config, &space).map_err(|e| {
            let name = match &e {
                ConfigPathError::UnknownName { name, .. }
                | ConfigPathError::NotALeaf { name, .. } => Some(format!("search.\"{name}\"")),
                _ => None,
            };
            err(name, e.to_string())
        })?;

        let to_values = |values: &BTreeMap<String, toml::Value>, what: &str| {
            values
                .iter()
                .map(|(k, v)| {
                    param_value(v)
                        .map(|p| (k.clone(), p))
                        .map_err(|m| err(Some(format!("sampler.{what}.\"{k}\"")), m))
                })
                .collect::<Result<BTreeMap<_, _>, _>>()
        };
        let enqueued = sampler
            .enqueue
            .iter()
            .map(|e| to_values(e, "enqueue"))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, e) in enqueued.iter().enumerate() {
            space.to_internal(e).map_err(|m| {
                err(
                    Some("sampler.enqueue".into()),
                    format!("entry {}: {m}", i + 1),
                )
            })?;
        }
        let grid = sampler
            .grid
            .iter()
            .map(|(k, values)| {
                values
                    .iter()
                    .map(param_value)
                    .collect::<Result<Vec<_>, _>>()
                    .map(|v| (k.clone(), v))
                    .map_err(|m| err(Some(format!("sampler.grid.\"{k}\"")), m))
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?;
        let file = StudyFile {
            path: path.to_owned(),
            study,
            data,
            split,
            base_config,
            space,
            sampler,
            pruner,
            enqueued,
            grid,
            text: text.to_owned(),
        };
        // Build both once so a bad sampler or pruner setting fails now, not at run time.
        file.build_sampler()?;
        file.build_pruner()?;
        Ok(file)
    }

    /// An error about `key` of this file, with its line.
    pub fn key_error(&self, key: &str, message: String) -> StudyFileError {
        StudyFileError {
            path: self.path.clone(),
            line: line_of(&self.text, key),
            key: Some(key.to_owned()),
            message,
        }
    }

    pub fn direction(&self) -> Direction {
        if self.study.direction.eq_ignore_ascii_case("minimize") {
            Direction::Minimize
        } else {
            Direction::Maximize
        }
    }

    /// The sampler the file asks for (enqueued trials first when listed).
    pub fn build_sampler(&self) -> Result<Box<dyn Sampler>, StudyFileError> {
        let s = &self.sampler;
        let inner: Box<dyn Sampler> = match s.kind.as_str() {
            "random" => Box::new(RandomSampler::new(s.seed)),
            "tpe" => {
                let d = TpeConfig::default();
                let cfg = TpeConfig {
                    seed: s.seed,
                    n_startup_trials: s.n_startup_trials.unwrap_or(d.n_startup_trials),
                    n_ei_candidates: s.n_ei_candidates.unwrap_or(d.n_ei_candidates),
                    multivariate: s.multivariate.unwrap_or(d.multivariate),
                    constant_liar: s.constant_liar.unwrap_or(d.constant_liar),
                    ..d
                };
                Box::new(
                    TpeSampler::new(cfg).map_err(|e| self.key_error("sampler", e.to_string()))?,
                )
            }
            "grid" => Box::new(
                GridSampler::new(self.grid.clone(), &self.space, s.seed)
                    .map_err(|e| self.key_error("sampler.grid", e.to_string()))?,
            ),
            other => {
                return Err(self.key_error(
                    "sampler.kind",
                    format!("unknown sampler '{other}': expected tpe, random or grid"),
                ));
            }
        };
        if self.enqueued.is_empty() {
            return Ok(inner);
        }
        Ok(Box::new(
            EnqueuedSampler::new(self.enqueued.clone(), &self.space, inner)
                .map_err(|e| self.key_error("sampler.enqueue", e.to_string()))?,
        ))
    }

    /// The pruner the file asks for.
    pub fn build_pruner(&self) -> Result<Box<dyn Pruner>, StudyFileError> {
        let p = &self.pruner;
        let e = |e: crate::study::pruner::PrunerError| self.key_error("pruner", e.to_string());
        Ok(match p.kind.as_str() {
            "none" => Box::new(NopPruner),
            "median" => Box::new(
                PercentilePruner::median(p.n_startup_trials, p.n_warmup_steps, p.interval_steps)
                    .map_err(e)?,
            ),
            "percentile" => Box::new(
                PercentilePruner::new(
                    p.percentile,
                    p.n_startup_trials,
                    p.n_warmup_steps,
                    p.interval_steps,
                    1,
                )
                .map_err(e)?,
            ),
            "successive_halving" => Box::new(
                SuccessiveHalvingPruner::new(p.min_resource, p.reduction_factor.unwrap_or(4), 0, 0)
                    .map_err(e)?,
            ),
            "hyperband" => Box::new(
                HyperbandPruner::new(
                    p.min_resource.unwrap_or(1),
                    p.max_resource,
                    p.reduction_factor.unwrap_or(3),
                    0,
                )
                .map_err(e)?,
            ),
            other => {
                return Err(self.key_error(
                    "pruner.kind",
                    format!(
                        "unknown pruner '{other}': expected none, median, percentile, \
                         successive_halving or hyperband"
                    ),
                ));
            }
        })
    }

    /// The devices of `[study] devices`, with their memory: the host's RAM for the CPU (the
    /// file's `device_memory_gib` where it cannot be read), `device_memory_gib` for GPUs (None
    /// when the file gives none: no budget check there, as their memory is not detected yet).
    pub fn device_slots(&self, devices: &[String]) -> Result<Vec<DeviceSlot>, StudyFileError> {
        let class = self
            .study
            .device_memory_gib
            .map(|g| (g * (1u64 << 30) as f64) as u64);
        devices
            .iter()
            .map(|d| {
                let spec: DeviceSpec = d.parse().map_err(|e: crate::device::DeviceError| {
                    self.key_error("study.devices", e.to_string())
                })?;
                let memory = match spec {
                    DeviceSpec::Cpu => crate::device::memory::host_memory_bytes().or(class),
                    _ => class,
                };
                Ok(DeviceSlot::new(spec, memory))
            })
            .collect()
    }

    /// The runner settings of this file, writing into `storage`.
    pub fn runner_config(
        &self,
        storage: impl Into<PathBuf>,
    ) -> Result<RunnerConfig, StudyFileError> {
        let mut c = RunnerConfig::new(self.study.name.clone(), storage);
        c.direction = self.direction();
        c.n_trials = self.study.n_trials;
        c.workers = self.study.workers;
        c.devices = self.device_slots(&self.study.devices)?;
        c.assignment = self.study.assignment;
        c.memory_fraction = self.study.memory_fraction;
        Ok(c)
    }

    /// Every value each searched parameter can take at its ends: the bounds of ranges and
    /// every choice of categoricals, for worst-case checks (memory of presets).
    pub fn extreme_values(&self) -> Vec<(String, Vec<ParamValue>)> {
        self.space
            .iter()
            .map(|(name, d)| {
                let values = match d {
                    Distribution::Float(f) => {
                        vec![ParamValue::Float(f.low()), ParamValue::Float(f.high())]
                    }
                    Distribution::Int(i) => {
                        let top = i.low() + (i.high() - i.low()) / i.step() * i.step();
                        vec![ParamValue::Int(i.low()), ParamValue::Int(top)]
                    }
                    Distribution::Categorical(c) => c.choices().to_vec(),
                };
                (name.to_owned(), values)
            })
            .collect()
    }
}

fn check_study(
    s: &StudySection,
    err: &dyn Fn(Option<String>, String) -> StudyFileError,
) -> Result<(), StudyFileError> {
    if s.name.trim().is_empty() {
        return Err(err(
            Some("study.name".into()),
            "the study needs a name".into(),
        ));
    }
    if !["maximize", "minimize"].contains(&s.direction.to_ascii_lowercase().as_str()) {
        return Err(err(
            Some("study.direction".into()),
            format!("'{}': expected maximize or minimize", s.direction),
        ));
    }
    if s.workers == 0 {
        return Err(err(
            Some("study.workers".into()),
            "need at least one worker".into(),
        ));
    }
    if s.devices.is_empty() {
        return Err(err(
            Some("study.devices".into()),
            "list at least one device".into(),
        ));
    }
    for d in &s.devices {
        d.parse::<DeviceSpec>()
            .map_err(|e| err(Some("study.devices".into()), e.to_string()))?;
    }
    if !(s.memory_fraction > 0.0 && s.memory_fraction <= 1.0) {
        return Err(err(
            Some("study.memory_fraction".into()),
            format!("{}: must be in (0, 1]", s.memory_fraction),
        ));
    }
    if let Some(g) = s.device_memory_gib
        && !(g.is_finite() && g > 0.0)
    {
        return Err(err(
            Some("study.device_memory_gib".into()),
            format!("{g}: must be a positive number of GiB"),
        ));
    }
    Ok(())
}

/// The leaves of a TOML table as (dotted name, value); arrays are leaves.
fn flatten(t: &toml::Table, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
    for (k, v) in t {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(inner) => flatten(inner, &name, out),
            _ => out.push((name, v.clone())),
        }
    }
}

const SPEC_KEYS: [&str; 6] = ["type", "low", "high", "log", "step", "choices"];

/// The search specs of `[search]`, whether written `"a.b" = {…}` or as nested tables.
fn search_specs(t: &toml::Table, prefix: &str, out: &mut Vec<(String, toml::Table)>) {
    for (k, v) in t {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(inner) if inner.keys().any(|k| SPEC_KEYS.contains(&k.as_str())) => {
                out.push((name, inner.clone()))
            }
            toml::Value::Table(inner) => search_specs(inner, &name, out),
            _ => out.push((name, toml::Table::new())),
        }
    }
}

/// One search spec → a distribution.
fn distribution(spec: &toml::Table) -> Result<Distribution, String> {
    if spec.is_empty() {
        return Err("expected a range `{ low = …, high = … }` or `{ choices = [...] }`".into());
    }
    for k in spec.keys() {
        if !SPEC_KEYS.contains(&k.as_str()) {
            return Err(format!("unknown key '{k}'; keys: {}", SPEC_KEYS.join(", ")));
        }
    }
    let kind = spec.get("type").and_then(toml::Value::as_str);
    if let Some(choices) = spec.get("choices") {
        let toml::Value::Array(items) = choices else {
            return Err("choices must be a list".into());
        };
        let values = items
            .iter()
            .map(param_value)
            .collect::<Result<Vec<_>, _>>()?;
        return crate::study::space::CategoricalDistribution::new(values)
            .map(Distribution::Categorical)
            .map_err(|e| e.to_string());
    }
    let (Some(low), Some(high)) = (spec.get("low"), spec.get("high")) else {
        return Err("a range needs both low and high".into());
    };
    let log = match spec.get("log") {
        None => false,
        Some(toml::Value::Boolean(b)) => *b,
        Some(_) => return Err("log must be true or false".into()),
    };
    let all_ints = matches!(low, toml::Value::Integer(_))
        && matches!(high, toml::Value::Integer(_))
        && spec
            .get("step")
            .is_none_or(|s| matches!(s, toml::Value::Integer(_)));
    let is_int = match kind {
        Some("int") => true,
        Some("float") => false,
        None => all_ints,
        Some(other) => {
            return Err(format!(
                "type '{other}': expected int, float or categorical"
            ));
        }
    };
    let num = |v: &toml::Value, what: &str| -> Result<f64, String> {
        match v {
            toml::Value::Integer(i) => Ok(*i as f64),
            toml::Value::Float(f) => Ok(*f),
            _ => Err(format!("{what} must be a number")),
        }
    };
    if is_int {
        let int = |v: &toml::Value, what: &str| -> Result<i64, String> {
            match v {
                toml::Value::Integer(i) => Ok(*i),
                _ => Err(format!("{what} must be an integer for an int range")),
            }
        };
        let step = spec
            .get("step")
            .map(|s| int(s, "step"))
            .transpose()?
            .unwrap_or(1);
        crate::study::space::IntDistribution::new(int(low, "low")?, int(high, "high")?, log, step)
            .map(Distribution::Int)
            .map_err(|e| e.to_string())
    } else {
        let step = spec.get("step").map(|s| num(s, "step")).transpose()?;
        crate::study::space::FloatDistribution::new(num(low, "low")?, num(high, "high")?, log, step)
            .map(Distribution::Float)
            .map_err(|e| e.to_string())
    }
}

/// A TOML value as a parameter value; a list becomes its text (`"[512, 256]"`), which list
/// fields such as `ppo.policy.net_arch.pi` accept (see [`config_path`]).
fn param_value(v: &toml::Value) -> Result<ParamValue, String> {
    match v {
        toml::Value::Integer(i) => Ok(ParamValue::Int(*i)),
        toml::Value::Float(f) => Ok(ParamValue::Float(*f)),
        toml::Value::Boolean(b) => Ok(ParamValue::Bool(*b)),
        toml::Value::String(s) => Ok(ParamValue::Str(s.clone())),
        toml::Value::Array(items) => {
            let nums: Option<Vec<String>> = items
                .iter()
                .map(|x| match x {
                    toml::Value::Integer(i) => Some(i.to_string()),
                    toml::Value::Float(f) => Some(f.to_string()),
                    _ => None,
                })
                .collect();
            nums.map(|n| ParamValue::Str(format!("[{}]", n.join(", "))))
                .ok_or_else(|| "a list value must hold numbers only".into())
        }
        other => Err(format!("unsupported value {other}")),
    }
}

/// Sets the leaf `name` of `root` to a fixed TOML value; the leaf must exist and the value must
/// have its type (a number for a number, a list for a list, …).
fn set_fixed(root: &mut serde_json::Value, name: &str, value: toml::Value) -> Result<(), String> {
    let json = serde_json::to_value(&value).map_err(|e| e.to_string())?;
    // Reuse the dotted-name check (unknown names list the valid ones, "did you mean").
    let probe = match &json {
        serde_json::Value::Array(_) => ParamValue::Str(json.to_string()),
        _ => param_value(&value)?,
    };
    let mut scratch = root.clone();
    config_path::apply_value(&mut scratch, name, &probe).map_err(|e| e.to_string())?;
    *root = scratch;
    Ok(())
}

/// The 1-based line where `key` is written: `key =`, `"key" =`, `[key]`, `[search."key"]`, or
/// the last segment of a dotted key followed by `=`. A key that starts with a section name
/// (`pruner.kind`) is looked for inside that section first.
pub fn line_of(text: &str, key: &str) -> Option<usize> {
    let bare = key.replace('"', "");
    let lines: Vec<&str> = text.lines().collect();
    let section = bare.split('.').next().unwrap_or("");
    let header = lines.iter().position(|l| {
        let l = l.trim();
        l == format!("[{section}]") || l.starts_with(&format!("[{section}."))
    });
    let range = match header {
        Some(h) if bare.contains('.') => {
            let end = lines[h + 1..]
                .iter()
                .position(|l| {
                    let l = l.trim_start();
                    l.starts_with('[') && !l.starts_with(&format!("[{section}"))
                })
                .map_or(lines.len(), |e| h + 1 + e);
            h..end
        }
        _ => 0..lines.len(),
    };
    if bare == section
        && let Some(h) = header
    {
        return Some(h + 1);
    }
    let last = bare.rsplit('.').next().unwrap_or(&bare).to_owned();
    let inner = key
        .split_once(".\"")
        .map(|(_, rest)| rest.trim_end_matches('"').to_owned());
    let unsectioned = bare.split_once('.').map(|(_, rest)| rest.to_owned());
    let candidates: Vec<String> = [Some(bare.clone()), inner, unsectioned, Some(last)]
        .into_iter()
        .flatten()
        .collect();
    for c in &candidates {
        for i in range.clone() {
            let l = lines[i].trim_start().trim_start_matches('[');
            for form in [c.clone(), format!("\"{c}\""), format!("search.\"{c}\"")] {
                if let Some(rest) = l.strip_prefix(&form) {
                    let rest = rest.trim_start();
                    if rest.starts_with('=') || rest.starts_with(']') {
                        return Some(i + 1);
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defaults() -> serde_json::Value {
        json!({
            "env": {"n_envs": 8, "lookback": 1},
            "ppo": {"learning_rate": 3e-4, "batch_size": 64, "n_epochs": 10, "precision": "f32",
                    "policy": {"net_arch": {"pi": [64, 64], "vf": [64, 64]}}},
            "train": {"total_timesteps": 100000}
        })
    }

    const GOOD: &str = r#"
[study]
name = "t"
workers = 2
devices = ["cpu", "cpu"]

[fixed]
env.n_envs = 32
ppo.policy.net_arch.pi = [2048, 1024, 512]

[search]
"ppo.learning_rate" = { low = 1e-5, high = 1e-3, log = true }
"ppo.batch_size" = { choices = [512, 1024] }
ppo.n_epochs = { low = 4, high = 16, step = 4 }
"ppo.policy.net_arch.vf" = { choices = [[256, 128], [512, 256]] }

[sampler]
kind = "tpe"
seed = 3
enqueue = [{ "ppo.learning_rate" = 3e-4 }]

[pruner]
kind = "hyperband"
min_resource = 1
"#;

    #[test]
    fn a_full_file_parses_into_its_parts() {
        let f = StudyFile::parse(GOOD, "good.toml", &defaults()).unwrap();
        assert_eq!(f.base_config["env"]["n_envs"], json!(32));
        assert_eq!(
            f.base_config["ppo"]["policy"]["net_arch"]["pi"],
            json!([2048, 1024, 512])
        );
        let names: Vec<&str> = f.space.names().collect();
        assert_eq!(
            names,
            [
                "ppo.batch_size",
                "ppo.learning_rate",
                "ppo.n_epochs",
                "ppo.policy.net_arch.vf"
            ]
        );
        assert!(matches!(
            f.space.get("ppo.n_epochs"),
            Some(Distribution::Int(_))
        ));
        assert!(f.build_sampler().unwrap().name().contains("tpe"));
        let rc = f.runner_config("x.db").unwrap();
        assert_eq!(rc.workers, 2);
        assert_eq!(rc.devices.len(), 2);
        let ends: Vec<String> = f.extreme_values()[2]
            .1
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(ends, ["4", "16"]);
    }

    #[test]
    fn errors_name_the_file_line_and_key() {
        let bad = GOOD.replace("\"ppo.learning_rate\" = {", "\"ppo.learning_rat\" = {");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("bad.toml:12: search.\"ppo.learning_rat\""),
            "{msg}"
        );
        assert!(msg.contains("did you mean 'ppo.learning_rate'"), "{msg}");

        let bad = GOOD.replace("env.n_envs = 32", "env.n_env = 32");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert_eq!(e.line, Some(8), "{e}");
        assert_eq!(e.key.as_deref(), Some("fixed.env.n_env"));

        let bad = GOOD.replace("env.n_envs = 32", "env.n_envs = \"many\"");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert!(e.to_string().contains("expects an integer"), "{e}");

        let bad = GOOD.replace("workers = 2", "workers = 0");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(4), Some("study.workers")),
            "{e}"
        );
        let bad = GOOD.replace("workers = 2", "workers = \"two\"");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("invalid type"), "{e}");
        let bad = GOOD.replace(
            "[pruner]\nkind = \"hyperband\"",
            "[pruner]\nkind = \"never\"",
        );
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert_eq!(e.line, Some(23), "{e}");

        let e = StudyFile::parse(
            "[study]\nname = \"x\"\nworkers = [",
            "syntax.toml",
            &defaults(),
        )
        .unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");

        let bad = GOOD.replace("kind = \"tpe\"", "kind = \"cmaes\"");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert!(
            e.to_string()
                .contains("sampler.kind: unknown sampler 'cmaes'"),
            "{e}"
        );

        let bad = format!("{GOOD}\n[extra]\nx = 1\n");
        assert!(StudyFile::parse(&bad, "bad.toml", &defaults()).is_err());
        let bad = GOOD.replace("min_resource = 1", "min_resourc = 1");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert!(e.to_string().contains("min_resourc"), "{e}");
        let bad = GOOD.replace(
            "{ low = 4, high = 16, step = 4 }",
            "{ low = 4, high = 15, step = 4 }",
        );
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert!(e.to_string().contains("not a multiple of step"), "{e}");
    }
}
