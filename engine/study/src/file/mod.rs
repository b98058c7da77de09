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
//! gpu_sharing = "serial"          # one trial per GPU at a time; "shared": all at once
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
//! [evaluation]                    # holdout (default) | walk_forward | cpcv
//! scheme = "cpcv"                 # folds over train + validation; test stays held out
//! n_groups = 6
//! k_test = 2
//! purge_bars = 10
//! embargo_bars = 49               # ≥ the features' memory: indicator warm-up (49) + the
//!                                 # longest lookback − 1, or a note says so
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
//! enqueue = [{ "ppo.learning_rate" = 3e-4 }]   # "baseline" trials run first; with
//!                                 # kind = "grid" each entry fixes every parameter
//! # [sampler.grid]                # kind = "grid": the values to try, for every searched
//! # "ppo.n_epochs" = [4, 8, 16]   # parameter (the grid is every combination of them)
//!
//! [pruner]
//! kind = "median"                 # none | median | percentile | successive_halving | hyperband
//! n_startup_trials = 5
//! n_warmup_steps = 2
//! ```
//!
//! Every name in `[fixed]`, `[search]` and the sampler's lists is checked against the trial
//! configuration before anything runs; errors name the file, the line and the key. A
//! `[sampler]` or `[pruner]` setting the chosen kind does not use ([`SAMPLER_SETTINGS`],
//! [`PRUNER_SETTINGS`]) is named the same way by [`StudyFile::unused_settings`], for a note.

mod build;
mod checks;
mod line;
mod search_spec;
mod sections;
mod spec;
mod text;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

pub use checks::check_study_name;
pub use line::{key_at, line_of};
pub use search_spec::SearchSpec;
use search_spec::param_value;
pub use sections::{
    DIRECTIONS, DataSection, EvaluationSection, PRUNER_ATTR, PRUNER_SETTINGS, PrunerKind,
    PrunerSection, SAMPLER_SETTINGS, SamplerKind, SamplerSection, StudySection, direction_name,
};
use spec::{flatten, search_specs, set_fixed};

use checks::check_study;

use crate::catalogue::Type;
use crate::config_path::{self, ConfigPathError};
use crate::space::{OptunaDistribution, ParamValue, SearchSpace};
use crate::trial::Direction;
use tradetune_market::split::SplitSpec;

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

/// A parsed, checked study file.
#[derive(Debug, Clone)]
pub struct StudyFile {
    /// Where it came from (a path, or `preset:NAME`), for messages.
    pub path: String,
    pub study: StudySection,
    pub data: DataSection,
    pub split: SplitSpec,
    /// How a trial is scored: hold-out validation or cross-validation folds.
    pub evaluation: EvaluationSection,
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

/// A study's parts as typed values: a study file's tables once read, or what the app's
/// Configure panel holds.
#[derive(Debug, Clone)]
pub struct StudyParts {
    pub study: StudySection,
    pub data: DataSection,
    pub split: SplitSpec,
    pub evaluation: EvaluationSection,
    /// The trial configuration every trial starts from (the trial's defaults with the fixed
    /// values set), as JSON: searched values are applied to it by dotted name.
    pub base_config: serde_json::Value,
    /// The searched parameters by dotted name, in order.
    pub search: Vec<(String, SearchSpec)>,
    pub sampler: SamplerSection,
    pub pruner: PrunerSection,
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
    evaluation: EvaluationSection,
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
        // all come with the line they are on. The line is counted by the newlines before the
        // span, not by `lines()`, which is one short for a span at a line's start (where toml
        // puts an unknown field: its key).
        let sections: Sections = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| {
                let start = s.start.min(text.len());
                text.as_bytes()[..start]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1
            });
            let message = with_suggestion(e.message().trim().to_owned());
            let mut key = line.and_then(|l| key_at(text, l));
            let mut line = line;
            // A table read by a tag (`[split]`'s `by`) has its unknown key reported at the
            // table's header: named at its own line instead.
            // (An unknown table, `[samplr]`, is reported at its header by its own name.)
            if let (Some(table), Some(field)) = (
                key.as_deref().filter(|k| !k.contains('.')),
                message
                    .strip_prefix("unknown field `")
                    .and_then(|rest| rest.split_once('`'))
                    .map(|(field, _)| field)
                    .filter(|field| key.as_deref() != Some(*field)),
            ) {
                let full = format!("{table}.{field}");
                if let Some(at) = line_of(text, &full) {
                    (line, key) = (Some(at), Some(full));
                }
            }
            StudyFileError {
                path: path.to_owned(),
                line,
                key,
                message,
            }
        })?;
        let Sections {
            study,
            data,
            split,
            evaluation,
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

        let mut base_config = defaults.clone();
        {
            let mut leaves = Vec::new();
            flatten(&fixed, "", &mut leaves);
            for (name, value) in leaves {
                set_fixed(&mut base_config, &name, value)
                    .map_err(|m| err(Some(format!("fixed.{name}")), m))?;
            }
        }
        let mut specs = Vec::new();
        search_specs(&search, "", &mut specs);
        let search = specs
            .into_iter()
            .map(|(name, spec)| {
                SearchSpec::from_table(&spec)
                    .map(|s| (name.clone(), s))
                    .map_err(|m| err(Some(format!("search.\"{name}\"")), m))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let file = StudyFile::assemble(
            StudyParts {
                study,
                data,
                split,
                evaluation,
                base_config,
                search,
                sampler,
                pruner,
            },
            path,
            text,
        )?;
        // (The app's Configure panel, which builds its parts, checks these on the loaded data
        // field by field, beside the rest.)
        checks::check_split_and_evaluation(&file.split, &file.evaluation, &err)?;
        Ok(file)
    }

    /// A study from its typed parts, checked as a study file is (what the app's Configure
    /// panel builds without writing a file); `path` names the source in errors, which carry
    /// no line.
    pub fn from_parts(parts: StudyParts, path: &str) -> Result<StudyFile, StudyFileError> {
        StudyFile::assemble(parts, path, "")
    }

    /// Checks `parts` and builds the study; errors name `path`, the key, and its line in
    /// `text` (the file's text; empty for typed parts).
    fn assemble(parts: StudyParts, path: &str, text: &str) -> Result<StudyFile, StudyFileError> {
        let err = |key: Option<String>, message: String| StudyFileError {
            path: path.to_owned(),
            line: key.as_deref().and_then(|k| line_of(text, k)),
            key,
            message,
        };
        let StudyParts {
            study,
            data,
            split,
            evaluation,
            base_config,
            search,
            sampler,
            pruner,
        } = parts;
        check_study(&study, &err)?;
        let mut space = SearchSpace::new();
        for (name, spec) in &search {
            let key = format!("search.\"{name}\"");
            let dist = spec.distribution().map_err(|m| err(Some(key.clone()), m))?;
            space
                .insert(name, dist)
                .map_err(|e| err(Some(key.clone()), e.to_string()))?;
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
            evaluation,
            base_config,
            space,
            sampler,
            pruner,
            enqueued,
            grid,
            text: text.to_owned(),
        };
        file.check_search_ranges()?;
        // Build both once so a bad sampler or pruner setting fails now, not at run time.
        file.build_sampler()?;
        file.build_pruner()?;
        Ok(file)
    }

    /// Fixes `name` to `value` (TOML syntax: `512`, `3e-4`, `"bf16"`, `[64, 64]`, `true`) on
    /// top of the file's `[fixed]` table. A searched name is refused (the search would
    /// overwrite it in every trial), as are unknown names and values of the wrong type; the
    /// file is unchanged on error. Errors name the key as `fixed.NAME`; a front end adds how
    /// the user wrote it (the CLI's `--set`, a form's field).
    pub fn override_fixed(&mut self, name: &str, value: &str) -> Result<(), StudyFileError> {
        let key = format!("fixed.{name}");
        let fail = |message: String| StudyFileError {
            path: self.path.clone(),
            line: None,
            key: Some(key.clone()),
            message,
        };
        if self.space.get(name).is_some() {
            return Err(fail(format!(
                "'{name}' is searched by this study ([search]); only settings that are not \
                 searched can be fixed"
            )));
        }
        // Parse as the right-hand side of a TOML key, so strings need their quotes and lists
        // their brackets; a bare word is taken as a string (`bf16` for `ppo.precision`).
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .or_else(|| {
                let bare = value.trim();
                (!bare.is_empty() && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                    .then(|| toml::Value::String(bare.to_owned()))
            })
            .ok_or_else(|| {
                fail(format!(
                    "'{value}' is not a value (write 512, 3e-4, \"bf16\" or [64, 64])"
                ))
            })?;
        set_fixed(&mut self.base_config, name, parsed).map_err(fail)
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

    /// The settings written in the file that have no effect, each as an error naming the file,
    /// line and key, for a front end to show as a note: `[sampler]` and `[pruner]` settings
    /// their kinds do not use (`n_startup_trials` under `kind = "random"`, `n_warmup_steps`
    /// under `"hyperband"`), and `[fixed]` values of searched names that the search cannot
    /// give (`ppo.gamma = 0.5` beside a search of 0.9 to 0.99); and a range of whole numbers,
    /// an int range, on a setting that takes any number (it searches the whole numbers alone).
    /// They are not refused: studies the app recorded before 2026-12-01 carry every pruner setting
    /// whatever the kind (its text now writes the kind's alone). None for a study built from
    /// typed parts, which has no text.
    pub fn unused_settings(&self) -> Vec<StudyFileError> {
        let Ok(doc) = toml::from_str::<toml::Table>(&self.text) else {
            return Vec::new();
        };
        let empty = toml::Table::new();
        let table = |name: &str| {
            doc.get(name)
                .and_then(toml::Value::as_table)
                .unwrap_or(&empty)
        };
        let sampler = sections::unused_in(table("sampler"), SAMPLER_SETTINGS, &self.sampler.kind);
        let pruner = sections::unused_in(table("pruner"), PRUNER_SETTINGS, &self.pruner.kind);
        let mut out: Vec<StudyFileError> = [("sampler", sampler), ("pruner", pruner)]
            .into_iter()
            .flat_map(|(section, unused)| {
                unused
                    .into_iter()
                    .map(move |(key, why)| (section, key, why))
            })
            .map(|(section, key, why)| self.key_error(&format!("{section}.{key}"), why))
            .collect();
        // A fixed value of a searched name is replaced in every trial. One the search can
        // give (the app's draft keeps a value in every field; a preset fixes the user's own
        // batch size and searches around it) is harmless; one it cannot is a mistake.
        let mut fixed = Vec::new();
        if let Some(t) = doc.get("fixed").and_then(toml::Value::as_table) {
            flatten(t, "", &mut fixed);
        }
        for (name, value) in fixed {
            let Some(dist) = self.space.get(&name) else {
                continue;
            };
            let searchable = param_value(&value).is_ok_and(|v| {
                self.space
                    .to_internal(&BTreeMap::from([(name.clone(), v)]))
                    .is_ok()
            });
            if !searchable {
                out.push(self.key_error(
                    &format!("fixed.{name}"),
                    format!(
                        "{value} is never used: '{name}' is also searched ({dist}), and every \
                         trial takes a searched value; remove it from [fixed] or widen the search"
                    ),
                ));
            }
        }
        // A range written with whole numbers is an int range (documented), which on a setting
        // that takes any number searches only the whole numbers (`clip_range = { low = 0,
        // high = 1 }` tries 0 and 1): rarely what its writer meant. Not refused: a study
        // stored with that int distribution must still resume.
        let mut specs = Vec::new();
        if let Some(t) = doc.get("search").and_then(toml::Value::as_table) {
            search_specs(t, "", &mut specs);
        }
        for (name, spec) in specs {
            let float = crate::catalogue::get(&name).is_some_and(|s| s.ty == Type::Float);
            let Some(OptunaDistribution::Int(d)) = self.space.get(&name) else {
                continue;
            };
            if float && !spec.contains_key("type") {
                out.push(self.key_error(
                    &format!("search.\"{name}\""),
                    format!(
                        "searches the whole numbers {}..={}{} only: '{name}' takes any number; \
                         write {}.0 (or type = \"float\") for a range of numbers, or \
                         type = \"int\" to keep whole numbers",
                        d.low,
                        d.high,
                        match d.step {
                            1 => String::new(),
                            step => format!(" in steps of {step}"),
                        },
                        d.low
                    ),
                ));
            }
        }
        out.sort_by_key(|e| e.line);
        out
    }

    /// The searched parameters as specs, by name (what a form edits).
    pub fn search_specs(&self) -> Vec<(String, SearchSpec)> {
        self.space
            .iter()
            .map(|(name, d)| (name.to_owned(), SearchSpec::of(d)))
            .collect()
    }

    pub fn direction(&self) -> Direction {
        self.study.direction
    }
}

/// toml's "unknown field `samplr`, expected one of `study`, `data`, …" with the expected name
/// closest to the unknown one, where one is close: "(did you mean `sampler`?)".
fn with_suggestion(message: String) -> String {
    let Some((field, tail)) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
    else {
        return message;
    };
    let expected = tail.split('`').skip(1).step_by(2);
    match config_path::closest(field, expected) {
        Some(name) => format!("{message} (did you mean `{name}`?)"),
        None => message,
    }
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
            Some(OptunaDistribution::Int(_))
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
        // A searched range past the catalogue's range of its setting, with that range.
        let bad = GOOD.replace("low = 4, high = 16", "low = 4, high = 4000");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("search.\"ppo.n_epochs\""), "{e}");
        assert!(e.to_string().contains("out of its range [1, 1000]"), "{e}");
        let bad = GOOD.replace("[[256, 128], [512, 256]]", "[[256, 128], [512, 0]]");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert!(e.to_string().contains("out of its range [1, 65536]"), "{e}");
        let bad = GOOD.replace(
            "{ low = 4, high = 16, step = 4 }",
            "{ low = 4, high = 15, step = 4 }",
        );
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert!(e.to_string().contains("not a multiple of step"), "{e}");
    }

    #[test]
    fn an_unknown_key_at_a_line_start_names_its_own_line_and_key() {
        let e = StudyFile::parse("[study]\nname = \"x\"\nworker = 2", "f.toml", &defaults())
            .unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("study.worker")),
            "{e}"
        );
        assert!(e.to_string().starts_with("f.toml:3: study.worker:"), "{e}");
        // The same mistake in a later section, after a blank first line.
        let bad = GOOD.replace("min_resource = 1", "min_resource = 1\nmax_resourc = 9");
        let e = StudyFile::parse(&bad, "bad.toml", &defaults()).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(25), Some("pruner.max_resourc")),
            "{e}"
        );
    }

    /// A grid without the values of a searched parameter says where they go, at the line
    /// that chose the grid when there is no `[sampler.grid]` yet.
    #[test]
    fn a_grid_without_values_says_where_they_go() {
        let text = "[study]\nname = \"g\"\n\n[search]\n\"ppo.n_epochs\" = { low = 4, high = 8 }\n\n\
                    [sampler]\nkind = \"grid\"\n";
        let e = StudyFile::parse(text, "g.toml", &defaults()).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(8), Some("sampler.kind")),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("[sampler.grid], as \"ppo.n_epochs\" = [a, b, c]"),
            "{e}"
        );
        let with = format!("{text}\n[sampler.grid]\n\"ppo.gamma\" = [0.9]\n");
        let e = StudyFile::parse(&with, "g.toml", &defaults()).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("sampler.grid"), "{e}");
    }

    /// A misspelt table or setting is named by itself, with the name it is closest to.
    #[test]
    fn a_misspelt_table_or_key_is_named_with_the_closest_name() {
        let e = StudyFile::parse(
            "[study]\nname = \"x\"\n\n[samplr]\nkind = \"tpe\"\n",
            "f.toml",
            &defaults(),
        )
        .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(4), Some("samplr")), "{e}");
        assert!(e.to_string().contains("(did you mean `sampler`?)"), "{e}");
        let e = StudyFile::parse(
            "[study]\nname = \"x\"\n\n[sampler]\nkind = \"tpe\"\nsed = 3\n",
            "f.toml",
            &defaults(),
        )
        .unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(6), Some("sampler.sed")),
            "{e}"
        );
        assert!(e.to_string().contains("(did you mean `seed`?)"), "{e}");
        // Nothing close: no guess.
        let e = StudyFile::parse("[study]\nname = \"x\"\n[zzzzzzzz]\n", "f.toml", &defaults())
            .unwrap_err();
        assert!(!e.to_string().contains("did you mean"), "{e}");
    }

    /// `[split]` refuses a key it does not know, as every other table does: a `test`
    /// fraction beside `train` and `validation` is not silently dropped.
    #[test]
    fn an_unknown_split_key_is_refused_naming_its_line() {
        let text = "[study]\nname = \"x\"\n\n[split]\nby = \"fractions\"\ntrain = 0.6\n\
                    validation = 0.2\ntest = 0.1\n";
        let e = StudyFile::parse(text, "f.toml", &defaults()).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(8), Some("split.test")),
            "{e}"
        );
        assert!(e.to_string().contains("unknown field `test`"), "{e}");
        let good = text.replace("test = 0.1\n", "");
        StudyFile::parse(&good, "f.toml", &defaults()).unwrap();
        // Values that need no data are refused as the file is read, by line and key, not
        // after the market files load (naming them).
        let over = good.replace("validation = 0.2", "validation = 0.5");
        let e = StudyFile::parse(&over, "f.toml", &defaults()).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(7), Some("split.validation")),
            "{e}"
        );
        assert!(e.to_string().contains("with a sum below 1"), "{e}");
        let dates = "[study]\nname = \"x\"\n\n[split]\nby = \"dates\"\n\
                     validation_start = \"2021-01-01\"\ntest_start = \"2020-06-01\"\n";
        let e = StudyFile::parse(dates, "f.toml", &defaults()).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(7), Some("split.test_start")),
            "{e}"
        );
        assert!(
            e.to_string().contains("must be after validation_start"),
            "{e}"
        );
        let cpcv = format!("{good}\n[evaluation]\nscheme = \"cpcv\"\nn_groups = 4\nk_test = 4\n");
        let e = StudyFile::parse(&cpcv, "f.toml", &defaults()).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(12), Some("evaluation.k_test")),
            "{e}"
        );
        assert!(e.to_string().contains("1 ≤ k < N"), "{e}");
    }

    /// Settings the chosen kinds do not use are named, with their lines, not refused; those
    /// the kinds use, an empty grid table, and a file without them say nothing.
    #[test]
    fn settings_the_chosen_kinds_do_not_use_are_named_with_their_lines() {
        let text = r#"
[study]
name = "u"

[search]
"ppo.learning_rate" = { low = 1e-5, high = 1e-3, log = true }

[sampler]
kind = "random"
seed = 4
n_startup_trials = 20
multivariate = true

[sampler.grid]

[pruner]
kind = "hyperband"
min_resource = 2
n_warmup_steps = 3
percentile = 25.0
"#;
        let file = StudyFile::parse(text, "u.toml", &defaults()).unwrap();
        let notes: Vec<String> = file
            .unused_settings()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            notes,
            [
                "u.toml:11: sampler.n_startup_trials: not used by kind = \"random\" (only by \
                 \"tpe\"): it has no effect; remove it or choose a kind that uses it",
                "u.toml:12: sampler.multivariate: not used by kind = \"random\" (only by \
                 \"tpe\"): it has no effect; remove it or choose a kind that uses it",
                "u.toml:19: pruner.n_warmup_steps: not used by kind = \"hyperband\" (only by \
                 \"median\" and \"percentile\"): it has no effect; remove it or choose a kind \
                 that uses it",
                "u.toml:20: pruner.percentile: not used by kind = \"hyperband\" (only by \
                 \"percentile\"): it has no effect; remove it or choose a kind that uses it",
            ]
        );
        // The same settings under kinds that use them.
        let used = text
            .replace("kind = \"random\"", "kind = \"tpe\"")
            .replace("min_resource = 2\n", "")
            .replace("kind = \"hyperband\"", "kind = \"percentile\"");
        let file = StudyFile::parse(&used, "u.toml", &defaults()).unwrap();
        assert!(
            file.unused_settings().is_empty(),
            "{:?}",
            file.unused_settings()
        );
        let plain = StudyFile::parse("[study]\nname = \"p\"\n", "p.toml", &defaults()).unwrap();
        assert!(plain.unused_settings().is_empty());
    }

    /// A range of whole numbers on a setting that takes any number is an int range, as
    /// documented, and noted by line: it searches the whole numbers alone. A range written
    /// with a decimal point, `type = "float"` or `type = "int"`, or one on an integer setting,
    /// says nothing.
    #[test]
    fn a_whole_number_range_on_a_float_setting_is_noted_with_its_line() {
        let mut base = defaults();
        base["ppo"]["clip_range"] = json!(0.2);
        let notes = |spec: &str| -> Vec<String> {
            let text = format!(
                "[study]\nname = \"w\"\n\n[search]\n\"ppo.clip_range\" = {spec}\n\
                 \"ppo.n_epochs\" = {{ low = 4, high = 16, step = 4 }}\n"
            );
            let file = StudyFile::parse(&text, "w.toml", &base).unwrap();
            file.unused_settings()
                .iter()
                .map(|e| e.to_string())
                .collect()
        };
        assert_eq!(
            notes("{ low = 0, high = 1 }"),
            [
                "w.toml:5: search.\"ppo.clip_range\": searches the whole numbers 0..=1 only: \
                 'ppo.clip_range' takes any number; write 0.0 (or type = \"float\") for a \
                 range of numbers, or type = \"int\" to keep whole numbers"
            ]
        );
        assert_eq!(
            notes("{ low = 0, high = 4, step = 2 }"),
            [
                "w.toml:5: search.\"ppo.clip_range\": searches the whole numbers 0..=4 in steps \
                 of 2 only: 'ppo.clip_range' takes any number; write 0.0 (or type = \"float\") \
                 for a range of numbers, or type = \"int\" to keep whole numbers"
            ]
        );
        for said in [
            "{ low = 0.0, high = 1 }",
            "{ type = \"int\", low = 0, high = 1 }",
            "{ type = \"float\", low = 0, high = 1 }",
        ] {
            assert!(notes(said).is_empty(), "{said}: {:?}", notes(said));
        }
    }

    #[test]
    fn a_fixed_value_the_search_cannot_give_is_named_with_its_line() {
        let text = r#"[study]
name = "f"

[fixed]
ppo.learning_rate = 0.5
ppo.batch_size = 64
ppo.n_epochs = 3

[search]
"ppo.learning_rate" = { low = 1e-5, high = 1e-3, log = true }
"ppo.batch_size" = { choices = [64, 128] }
"#;
        let file = StudyFile::parse(text, "f.toml", &defaults()).unwrap();
        let notes: Vec<String> = file
            .unused_settings()
            .iter()
            .map(|e| e.to_string())
            .collect();
        // The batch size the search can give (a preset's own) and the unsearched epochs pass.
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("f.toml:5: fixed.ppo.learning_rate: 0.5 is never used:")
                && notes[0].contains("also searched")
                && notes[0].contains("widen the search"),
            "{notes:?}"
        );
    }

    #[test]
    fn a_grid_with_a_partial_enqueued_entry_is_refused_naming_the_entry() {
        let file = |enqueue: &str| {
            format!(
                r#"
[study]
name = "g"

[search]
"ppo.learning_rate" = {{ low = 1e-5, high = 1e-3, log = true }}
"ppo.batch_size" = {{ choices = [512, 1024] }}

[sampler]
kind = "grid"
enqueue = [{enqueue}]

[sampler.grid]
"ppo.learning_rate" = [1e-4, 1e-3]
"ppo.batch_size" = [512, 1024]
"#
            )
        };
        let e = StudyFile::parse(
            &file(r#"{ "ppo.learning_rate" = 3e-4 }"#),
            "g.toml",
            &defaults(),
        )
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("sampler.enqueue"), "{e}");
        assert!(e.message.contains("enqueued trial 0"), "{e}");
        assert!(e.message.contains("does not fix ppo.batch_size"), "{e}");
        let ok = file(r#"{ "ppo.learning_rate" = 3e-4, "ppo.batch_size" = 512 }"#);
        StudyFile::parse(&ok, "g.toml", &defaults()).unwrap();
    }
}
