//! The configuration of a `tradetune train` run and the record of its data source.
//!
//! Sources, later sources overriding earlier ones: SB3's defaults → `--config FILE.toml`
//! → `--ppo`/`--env` JSON files → command-line flags. The TOML file holds the run's options at
//! the top level and the PPO and environment fields in `[ppo]` and `[env]` tables, with the
//! same names as the JSON files. Paths in it (`out`, `data`) are relative to the file.
//!
//! ```toml
//! total_timesteps = 200000
//! out = "runs/first"
//! eval_every = 10            # updates; 0 = no periodic evaluation
//! objective = "sharpe_excess"
//! [ppo]
//! learning_rate = 3e-4
//! n_steps = 256
//! [ppo.policy.net_arch]
//! pi = [256, 256]
//! vf = [256, 256]
//! [env]
//! n_envs = 16
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::{Deserialize, Serialize};
use tradetune_engine::device::DeviceSpec;
use tradetune_engine::device::memory::DEFAULT_MEMORY_FRACTION;
use tradetune_engine::device::precision::Precision;
use tradetune_engine::env::EnvConfig;
use tradetune_engine::eval::Objective;
use tradetune_engine::ppo::PpoConfig;
use tradetune_engine::study::catalogue;
use tradetune_engine::study::ppo_trial::{PpoTrialConfig, TrialSchedule};

pub use tradetune_engine::front::data_source::{DATA_FILE, DataSource, ENV_FILE, LoadedData};

/// The arguments of `tradetune train`, resolved once into a [`Run`] ([`Run::from_args`]).
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Run configuration (TOML): run options at the top level, `[ppo]` and `[env]` tables with
    /// the fields of the JSON configs. Flags given on the command line override it.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Device: cpu, wgpu, wgpu:N (N-th discrete GPU), wgpu:integrated:N, wgpu:cpu, cuda:N,
    /// rocm:N (`tradetune devices` lists those here). Default cpu.
    #[arg(long)]
    pub device: Option<DeviceSpec>,
    /// Compute precision: f32, bf16 or f16. Default f32.
    #[arg(long)]
    pub precision: Option<Precision>,
    /// Samples to train on (n_steps × n_envs per update; rounded up to whole updates); with
    /// `--resume`, samples to add. Default 100000.
    #[arg(long)]
    pub total_timesteps: Option<usize>,
    /// Checkpoint directory (required; default with `--resume`: the resumed one). Checked
    /// before the run trains; written at its end, or at Ctrl-C with what it trained so far.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// PPO configuration (JSON, every field optional; defaults are SB3's).
    #[arg(long)]
    pub ppo: Option<PathBuf>,
    /// Environment configuration (JSON, every field optional).
    #[arg(long)]
    pub env: Option<PathBuf>,
    /// Fraction of the device's memory this run may use. Default 0.8.
    #[arg(long)]
    pub memory_fraction: Option<f64>,
    /// Market files to train on (per-asset CSV, long CSV with a ticker column, Binance klines;
    /// gzip read transparently). Default: the bundled sample (AAPL, GOOG, IBM, MSFT daily).
    /// Training uses the train split only; the scaler is fitted on it.
    #[arg(long = "data", value_name = "FILE")]
    pub data: Vec<PathBuf>,
    /// Train on a seeded synthetic market of this many bars (7 assets) instead of market files
    /// (its train split; validation and test splits as for market files).
    #[arg(long, conflicts_with = "data", value_name = "BARS")]
    pub synthetic_bars: Option<usize>,
    /// Evaluate the deterministic policy on the validation split every N updates (0 = never).
    #[arg(long, value_name = "N")]
    pub eval_every: Option<usize>,
    /// Objective reported by the periodic evaluation: sharpe_excess (default), sharpe,
    /// sortino_excess, sortino, excess_return, total_return.
    #[arg(long)]
    pub objective: Option<Objective>,
    /// Resume from this checkpoint directory: its PPO and environment configs, data, weights,
    /// optimiser state, normalisation statistics and sample count.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["ppo", "env", "data", "synthetic_bars"])]
    pub resume: Option<PathBuf>,
    /// Print one JSON event per line instead of a progress bar.
    #[arg(long)]
    pub json: bool,
}

/// The run options a TOML config may set (top level), besides `[ppo]` and `[env]`: the same
/// engine types the flags parse into, read by their names (`"wgpu:0"`, `"bf16"`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
struct RunOptions {
    #[serde(with = "by_name")]
    device: Option<DeviceSpec>,
    #[serde(with = "by_name")]
    precision: Option<Precision>,
    total_timesteps: Option<usize>,
    out: Option<PathBuf>,
    memory_fraction: Option<f64>,
    data: Vec<PathBuf>,
    synthetic_bars: Option<usize>,
    eval_every: Option<usize>,
    #[serde(with = "by_name")]
    objective: Option<Objective>,
}

/// An optional setting (de)serialized by its name, read with its own parser (so a bad name
/// gets that parser's message, which lists the valid ones).
mod by_name {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<T: Display, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_some(&v.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        Option::<String>::deserialize(d)?
            .map(|name| name.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// The kind of a JSON value, for type errors.
fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a table",
    }
}

/// A field of a config that cannot take the value given: `field` is its dotted name inside
/// its table (`batch_size`, `reward.kind`), for a caller that knows the file's text to name
/// its line.
#[derive(Debug)]
struct FieldError {
    field: String,
    message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FieldError {}

fn field_error(field: &str, message: String) -> anyhow::Error {
    FieldError {
        field: field.to_owned(),
        message,
    }
    .into()
}

/// Lays `given` over `base` field by field (nested objects too); rejects unknown fields,
/// values of another type than the default's and anything but a whole number from 0 on where
/// the default is one (the configs' integer fields are all unsigned), naming the field. A
/// `null` default (an optional field) takes any value, its name kept in `optional`: its type
/// is checked when the whole config is read ([`merge`] names it then).
fn overlay(
    base: &mut serde_json::Value,
    given: serde_json::Value,
    at: &str,
    optional: &mut Vec<String>,
) -> anyhow::Result<()> {
    use serde_json::Value;
    match (base, given) {
        (Value::Object(b), Value::Object(g)) => {
            for (key, value) in g {
                let name = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match b.get_mut(&key) {
                    Some(slot) => overlay(slot, value, &name, optional)?,
                    None => {
                        let valid: Vec<&str> = b.keys().map(String::as_str).collect();
                        let guess = tradetune_engine::study::config_path::closest(
                            &key,
                            valid.iter().copied(),
                        )
                        .map(|g| format!(" (did you mean '{g}'?)"))
                        .unwrap_or_default();
                        return Err(field_error(
                            &name,
                            format!(
                                "unknown field '{name}'{guess}; valid fields: {}",
                                valid.join(", ")
                            ),
                        ));
                    }
                }
            }
            Ok(())
        }
        (slot, value) => {
            let same = std::mem::discriminant(&*slot) == std::mem::discriminant(&value);
            // Enum fields are strings or tables (tagged); both kinds may replace each other.
            let enum_like = matches!(
                (&*slot, &value),
                (Value::String(_), Value::Object(_)) | (Value::Object(_), Value::String(_))
            );
            if !(same || enum_like || slot.is_null()) {
                return Err(field_error(
                    at,
                    format!(
                        "field '{at}' must be {} like its default {slot}, not {} ({value})",
                        kind(slot),
                        kind(&value)
                    ),
                ));
            }
            // A count (every integer field of the configs is unsigned) takes whole numbers
            // from 0 on: said here with its name, where reading the merged config would say
            // "expected usize" without one.
            if slot.is_u64() && !value.is_u64() {
                return Err(field_error(
                    at,
                    format!(
                        "field '{at}' must be a whole number from 0 on like its default {slot}, \
                         not {value}"
                    ),
                ));
            }
            if slot.is_null() && !value.is_null() {
                optional.push(at.to_owned());
            }
            *slot = value;
            Ok(())
        }
    }
}

/// `defaults` with `given` laid over them, read back as `T`; errors name `what` and the field.
fn merge<T: Serialize + serde::de::DeserializeOwned>(
    defaults: T,
    given: serde_json::Value,
    what: &str,
) -> anyhow::Result<T> {
    let mut merged = serde_json::to_value(defaults)?;
    let mut optional = Vec::new();
    overlay(&mut merged, given, "", &mut optional).with_context(|| format!("in {what}"))?;
    let e = match T::deserialize(&merged) {
        Ok(config) => return Ok(config),
        Err(e) => e,
    };
    // serde's message names the type it expected, not the field: the optional field given
    // a value of another type is the one without which the config reads.
    let culprit = optional.iter().find(|name| {
        let mut without = merged.clone();
        let pointer = format!("/{}", name.replace('.', "/"));
        without
            .pointer_mut(&pointer)
            .map(|slot| *slot = serde_json::Value::Null)
            .is_some()
            && T::deserialize(&without).is_ok()
    });
    match culprit {
        Some(name) => Err(field_error(
            name,
            format!("field '{name}': {}", in_words(&e.to_string())),
        ))
        .with_context(|| format!("in {what}")),
        None => Err(e).with_context(|| format!("reading {what}")),
    }
}

/// serde's type names as a config's reader knows them (`expected usize`: a whole number).
fn in_words(message: &str) -> String {
    [
        ("expected usize", "expected a whole number from 0 on"),
        ("expected u64", "expected a whole number from 0 on"),
        ("expected u32", "expected a whole number from 0 on"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
    ]
    .iter()
    .fold(message.to_owned(), |m, (from, to)| m.replace(from, to))
}

/// Reads a JSON config in which every field is optional, laid over `defaults`.
fn read_json<T: Serialize + serde::de::DeserializeOwned>(
    path: &Path,
    defaults: T,
) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let given: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    merge(defaults, given, &path.display().to_string())
}

/// A TOML run config: the run options and the `[ppo]` and `[env]` tables (as JSON values).
struct TomlConfig {
    run: RunOptions,
    ppo: Option<serde_json::Value>,
    env: Option<serde_json::Value>,
    /// The file's text, for the line of a field a table refuses.
    text: String,
}

/// `e`, a field of `[table]` in the TOML file `file` (its text `text`) refused, said at the
/// field's line as a study file's errors are (`run.toml:3: [ppo] field 'batch_size' …`).
fn at_line(e: anyhow::Error, text: &str, file: &str, table: &str) -> anyhow::Error {
    let Some(f) = e.downcast_ref::<FieldError>() else {
        return e;
    };
    match tradetune_engine::study::file::line_of(text, &format!("{table}.{}", f.field)) {
        Some(line) => anyhow::anyhow!("{file}:{line}: [{table}] {}", f.message),
        None => e,
    }
}

fn read_toml(path: &Path) -> anyhow::Result<TomlConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut json = serde_json::to_value(table)
        .with_context(|| format!("reading {} (dates are not config values)", path.display()))?;
    let map = json
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("{}: not a table", path.display()))?;
    let ppo = map.remove("ppo");
    let env = map.remove("env");
    for (name, section) in [("ppo", &ppo), ("env", &env)] {
        if let Some(v) = section
            && !v.is_object()
        {
            anyhow::bail!("{}: '{name}' must be a table ([{name}])", path.display());
        }
    }
    // Options read by name must be names: say which one is not (serde's own error would not).
    for name in ["device", "precision", "objective"] {
        if let Some(v) = map.get(name)
            && !v.is_string()
        {
            anyhow::bail!(
                "{}: field '{name}' must be a name in quotes (like \"{}\"), not {} ({v})",
                path.display(),
                match name {
                    "device" => "wgpu:0",
                    "precision" => "bf16",
                    _ => "sharpe_excess",
                },
                kind(v)
            );
        }
    }
    let mut run: RunOptions = merge(RunOptions::default(), json, &path.display().to_string())?;
    // Paths in the file are relative to the file, so a config works from any directory.
    let base = path.parent().unwrap_or(Path::new(""));
    let rebase = |p: &mut PathBuf| {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    };
    run.data.iter_mut().for_each(rebase);
    if let Some(out) = &mut run.out {
        rebase(out);
    }
    Ok(TomlConfig {
        run,
        ppo,
        env,
        text,
    })
}

/// Everything a run needs, after the config sources are combined.
pub(crate) struct Run {
    pub(crate) device: DeviceSpec,
    pub(crate) out: PathBuf,
    pub(crate) memory_fraction: f64,
    pub(crate) data: DataSource,
    pub(crate) objective: Objective,
    /// The environment, PPO and schedule (`train.total_timesteps`, `train.eval_every`), as a
    /// trial's: what [`TrainingRun::build`](tradetune_engine::study::ppo_trial::TrainingRun)
    /// builds the run from.
    pub(crate) config: PpoTrialConfig,
    /// Settings changed from a resumed checkpoint's, to tell the user.
    pub(crate) notes: Vec<String>,
}

impl Run {
    pub(crate) fn from_args(args: &TrainArgs) -> anyhow::Result<Self> {
        let toml = args.config.as_deref().map(read_toml).transpose()?;
        let file = toml.as_ref().map(|t| t.run.clone()).unwrap_or_default();
        let cfg_name = args
            .config
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();

        let (mut ppo, env, data) = match &args.resume {
            Some(dir) => {
                if let Some(t) = &toml {
                    anyhow::ensure!(
                        t.ppo.is_none()
                            && t.env.is_none()
                            && t.run.data.is_empty()
                            && t.run.synthetic_bars.is_none(),
                        "{cfg_name}: --resume trains on with the checkpoint's [ppo], [env] and \
                         data (data, synthetic_bars); remove them from the file"
                    );
                }
                anyhow::ensure!(
                    dir.is_dir(),
                    "--resume {}: no such checkpoint directory (the --out of an earlier `tradetune \
                     train`)",
                    dir.display()
                );
                let ppo = read_json(&dir.join("ppo.json"), PpoConfig::new())?;
                let env = read_json(&dir.join(ENV_FILE), EnvConfig::new())?;
                let data = read_json(&dir.join(DATA_FILE), DataSource::default())?;
                (ppo, env, data)
            }
            None => {
                let mut ppo = PpoConfig::new();
                let mut env = EnvConfig::new();
                if let Some(t) = &toml {
                    if let Some(v) = &t.ppo {
                        ppo = merge(ppo, v.clone(), &format!("{cfg_name} [ppo]"))
                            .map_err(|e| at_line(e, &t.text, &cfg_name, "ppo"))?;
                    }
                    if let Some(v) = &t.env {
                        env = merge(env, v.clone(), &format!("{cfg_name} [env]"))
                            .map_err(|e| at_line(e, &t.text, &cfg_name, "env"))?;
                    }
                }
                if let Some(p) = &args.ppo {
                    ppo = read_json(p, ppo)?;
                }
                if let Some(p) = &args.env {
                    env = read_json(p, env)?;
                }
                let (paths, synthetic) = if !args.data.is_empty() || args.synthetic_bars.is_some() {
                    (args.data.clone(), args.synthetic_bars)
                } else {
                    (file.data.clone(), file.synthetic_bars)
                };
                anyhow::ensure!(
                    paths.is_empty() || synthetic.is_none(),
                    "{cfg_name}: give data or synthetic_bars, not both"
                );
                (ppo, env, DataSource::new(&paths, synthetic)?)
            }
        };

        // The precision flag or top-level option wins; otherwise the PPO config's (f32 unless
        // [ppo] or a resumed checkpoint says otherwise).
        let mut notes = Vec::new();
        if let Some(p) = args.precision.or(file.precision) {
            if let Some(dir) = &args.resume
                && p != ppo.precision
            {
                let from = if args.precision.is_some() {
                    "--precision".to_owned()
                } else {
                    format!("{cfg_name} precision")
                };
                notes.push(format!(
                    "{from}: the resumed run trains in {p}, where checkpoint {} was trained in \
                     {}; its new checkpoint records {p}",
                    dir.display(),
                    ppo.precision,
                ));
            }
            ppo.precision = p;
        }
        // A resumed run keeps the objective its checkpoint was scored by unless told another.
        let objective = args
            .objective
            .or(file.objective)
            .or(data.objective)
            .unwrap_or_default();
        let out = args
            .out
            .clone()
            .or(file.out)
            .or_else(|| args.resume.clone())
            .ok_or_else(|| {
                anyhow::anyhow!("no checkpoint directory: give --out DIR (or `out` in --config)")
            })?;
        let total_timesteps = args
            .total_timesteps
            .or(file.total_timesteps)
            .unwrap_or(100_000);
        let eval_every = args.eval_every.or(file.eval_every).unwrap_or(0);
        // Every setting in the range the engine's catalogue gives it, as a study's would be.
        let config = PpoTrialConfig {
            env,
            ppo,
            train: TrialSchedule {
                total_timesteps,
                eval_every,
            },
        };
        catalogue::check_config(&serde_json::to_value(&config)?).with_context(|| {
            if cfg_name.is_empty() {
                "the run's settings".to_owned()
            } else {
                format!("the run's settings ({cfg_name} and the flags)")
            }
        })?;
        let memory_fraction = args
            .memory_fraction
            .or(file.memory_fraction)
            .unwrap_or(DEFAULT_MEMORY_FRACTION);
        // Refused before the data loads, naming where it came from.
        anyhow::ensure!(
            memory_fraction.is_finite() && memory_fraction > 0.0 && memory_fraction <= 1.0,
            "{}: {memory_fraction} must be above 0 and at most 1 (a share of the memory)",
            if args.memory_fraction.is_some() {
                "--memory-fraction".to_owned()
            } else {
                format!("memory_fraction in {cfg_name}")
            }
        );
        Ok(Self {
            device: args.device.or(file.device).unwrap_or(DeviceSpec::Cpu),
            out,
            memory_fraction,
            data,
            objective,
            config,
            notes,
        })
    }
}
