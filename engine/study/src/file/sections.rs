//! The plain tables of a study file and their defaults.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::runner::Assignment;
use crate::trial::Direction;
use tradetune_rl::eval::Objective;

/// The `[study]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudySection {
    pub name: String,
    /// `maximize` (the default) or `minimize`, any case.
    #[serde(default = "maximize", with = "direction_name")]
    pub direction: Direction,
    #[serde(default)]
    pub objective: Objective,
    #[serde(default = "default_n_trials")]
    pub n_trials: usize,
    #[serde(default = "one")]
    pub workers: usize,
    #[serde(default = "default_devices")]
    pub devices: Vec<String>,
    #[serde(default)]
    pub assignment: Assignment,
    /// Whether workers bound to one GPU take turns on it (`serial`, the default) or share it
    /// (`shared`); see [`crate::runner::GpuSharing`].
    #[serde(default)]
    pub gpu_sharing: crate::runner::GpuSharing,
    #[serde(default = "default_fraction")]
    pub memory_fraction: f64,
    /// Memory of the device class (GiB) where the device's own is unknown (GPUs, presets).
    pub device_memory_gib: Option<f64>,
    /// What the file is for (`NVIDIA RTX 4080 16 GB`), shown in preset lists.
    pub device_class: Option<String>,
    pub description: Option<String>,
}

fn maximize() -> Direction {
    Direction::Maximize
}

/// A direction as study files write it: `maximize` or `minimize`.
pub fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Maximize => "maximize",
        Direction::Minimize => "minimize",
    }
}

/// Both directions, in the order menus list them.
pub const DIRECTIONS: [Direction; 2] = [Direction::Maximize, Direction::Minimize];

/// (De)serializes `[study] direction` by its study-file name, reading any case.
mod direction_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::trial::Direction;

    pub fn serialize<S: Serializer>(d: &Direction, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(super::direction_name(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Direction, D::Error> {
        let name = String::deserialize(d)?;
        match name.to_ascii_lowercase().as_str() {
            "maximize" => Ok(Direction::Maximize),
            "minimize" => Ok(Direction::Minimize),
            _ => Err(serde::de::Error::custom(format!(
                "'{name}': expected maximize or minimize"
            ))),
        }
    }
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
    tradetune_device::memory::DEFAULT_MEMORY_FRACTION
}

/// The `[data]` table.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataSection {
    /// Market files; empty = the bundled sample. Relative paths are relative to the study file.
    pub paths: Vec<PathBuf>,
    pub assets: Vec<String>,
}

/// The `[evaluation]` table: how a trial is scored. Cross-validation runs over the train and
/// validation bars together (the test split stays held out); each fold trains a fresh policy
/// on its training bars and scores it on its test bars, the folds in a fixed order per study.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "scheme", rename_all = "snake_case", deny_unknown_fields)]
pub enum EvaluationSection {
    /// Train on the train split, score on the validation split.
    #[default]
    Holdout,
    /// `n_folds` consecutive test windows at the end, each trained on the bars before it
    /// (all of them, or the last `train_bars`), `purge_bars` left out in between.
    WalkForward {
        n_folds: usize,
        /// Bars per test window; 0 = an equal share (see `tradetune_market::split`).
        #[serde(default)]
        test_bars: usize,
        /// Bars per training window; 0 = expanding.
        #[serde(default)]
        train_bars: usize,
        #[serde(default)]
        purge_bars: usize,
    },
    /// Combinatorial purged cross-validation (López de Prado): `n_groups` contiguous groups,
    /// every choice of `k_test` of them tested once, trained on the rest minus `purge_bars`
    /// before and `embargo_bars` after each test block.
    Cpcv {
        n_groups: usize,
        k_test: usize,
        #[serde(default)]
        purge_bars: usize,
        #[serde(default)]
        embargo_bars: usize,
    },
}

impl EvaluationSection {
    /// The folds over `n` bars, in their fixed order; None for a hold-out.
    pub fn folds(
        &self,
        n: usize,
    ) -> Result<Option<Vec<tradetune_market::split::Fold>>, tradetune_market::split::SplitError>
    {
        use tradetune_market::split::{Cpcv, WalkForward, cpcv, walk_forward};
        Ok(match self {
            EvaluationSection::Holdout => None,
            EvaluationSection::WalkForward {
                n_folds,
                test_bars,
                train_bars,
                purge_bars,
            } => Some(walk_forward(
                n,
                &WalkForward {
                    n_folds: *n_folds,
                    test_bars: *test_bars,
                    train_bars: *train_bars,
                    purge_bars: *purge_bars,
                },
            )?),
            EvaluationSection::Cpcv {
                n_groups,
                k_test,
                purge_bars,
                embargo_bars,
            } => Some(cpcv(
                n,
                &Cpcv {
                    n_groups: *n_groups,
                    k_test: *k_test,
                    purge_bars: *purge_bars,
                    embargo_bars: *embargo_bars,
                },
            )?),
        })
    }

    /// Its name in study files and reports.
    pub fn name(&self) -> &'static str {
        match self {
            EvaluationSection::Holdout => "holdout",
            EvaluationSection::WalkForward { .. } => "walk_forward",
            EvaluationSection::Cpcv { .. } => "cpcv",
        }
    }
}

/// The `[sampler]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SamplerSection {
    pub kind: SamplerKind,
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
            kind: SamplerKind::Tpe,
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
    pub kind: PrunerKind,
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
            kind: PrunerKind::Median,
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

/// The `[sampler]` settings only some kinds use, with those kinds (`kind`, `seed` and
/// `enqueue` serve every kind).
pub const SAMPLER_SETTINGS: &[(&str, &[SamplerKind])] = &[
    ("n_startup_trials", &[SamplerKind::Tpe]),
    ("n_ei_candidates", &[SamplerKind::Tpe]),
    ("multivariate", &[SamplerKind::Tpe]),
    ("constant_liar", &[SamplerKind::Tpe]),
    ("grid", &[SamplerKind::Grid]),
];

/// The `[pruner]` settings and the kinds that use them (`kind = "none"` uses none).
pub const PRUNER_SETTINGS: &[(&str, &[PrunerKind])] = &[
    ("percentile", &[PrunerKind::Percentile]),
    (
        "n_startup_trials",
        &[PrunerKind::Median, PrunerKind::Percentile],
    ),
    (
        "n_warmup_steps",
        &[PrunerKind::Median, PrunerKind::Percentile],
    ),
    (
        "interval_steps",
        &[PrunerKind::Median, PrunerKind::Percentile],
    ),
    (
        "min_resource",
        &[PrunerKind::SuccessiveHalving, PrunerKind::Hyperband],
    ),
    ("max_resource", &[PrunerKind::Hyperband]),
    (
        "reduction_factor",
        &[PrunerKind::SuccessiveHalving, PrunerKind::Hyperband],
    ),
];

/// Whether `kind` uses setting `key` of a table whose kind-bound settings are `settings`
/// (a setting not listed serves every kind).
pub fn uses<K: PartialEq>(settings: &[(&str, &[K])], kind: &K, key: &str) -> bool {
    (settings.iter())
        .find(|(name, _)| *name == key)
        .is_none_or(|(_, kinds)| kinds.contains(kind))
}

/// Drops from `table` (a `[sampler]` or `[pruner]` table) the settings `kind` does not use.
pub fn keep_used<K: PartialEq>(table: &mut toml::Table, settings: &[(&str, &[K])], kind: &K) {
    table.retain(|key, _| uses(settings, kind, key));
}

/// The settings written in `table` that `kind` does not use, each with why (the kinds that
/// do); an empty table or list (such as an empty `[sampler.grid]`) says nothing and is passed
/// over.
pub fn unused_in<'a, K: PartialEq + fmt::Display>(
    table: &toml::Table,
    settings: &'a [(&'a str, &'a [K])],
    kind: &K,
) -> Vec<(&'a str, String)> {
    (settings.iter())
        .filter(|(name, kinds)| {
            !kinds.contains(kind)
                && table.get(*name).is_some_and(|v| match v {
                    toml::Value::Table(t) => !t.is_empty(),
                    toml::Value::Array(a) => !a.is_empty(),
                    _ => true,
                })
        })
        .map(|(name, kinds)| {
            let users: Vec<String> = kinds.iter().map(|k| format!("\"{k}\"")).collect();
            let why = format!(
                "not used by kind = \"{kind}\" (only by {}): it has no effect; remove it or \
                 choose a kind that uses it",
                users.join(" and ")
            );
            (*name, why)
        })
        .collect()
}

/// The study system attribute holding its `[pruner]` table as JSON, stored when the study
/// runs: the Studies panel draws the pruner's thresholds from it.
pub const PRUNER_ATTR: &str = "tradetune:pruner";

impl PrunerSection {
    /// This table as the value of [`PRUNER_ATTR`].
    pub fn to_attr(&self) -> tradetune_storage::JsonValue {
        // A struct of numbers and a kind name always serialises.
        tradetune_storage::JsonValue::from(serde_json::to_string(self).unwrap_or_default().as_str())
    }

    /// The table stored in a study's system attributes; `None` when none is (a study Optuna
    /// ran, or one from before it was stored) or it cannot be read.
    pub fn from_attrs(attrs: &[(String, tradetune_storage::JsonValue)]) -> Option<PrunerSection> {
        match attrs.iter().find(|(k, _)| k == PRUNER_ATTR)? {
            (_, tradetune_storage::JsonValue::Str(text)) => serde_json::from_str(text).ok(),
            _ => None,
        }
    }
}

/// Declares a study setting's kinds: an enum whose variants are written in snake case in study
/// files, with every variant, its name, and an error for an unknown name that lists them.
macro_rules! named_kinds {
    ($(#[$doc:meta])* $name:ident, $what:literal, { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "&'static str")]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every kind, in the order menus list them.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The name written in study files.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|k| k.name() == s.trim())
                    .ok_or_else(|| {
                        let valid: Vec<&str> = $name::ALL.iter().map(|k| k.name()).collect();
                        format!(concat!("unknown ", $what, " '{}' (valid: {})"), s, valid.join(", "))
                    })
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;

            fn try_from(s: String) -> Result<Self, String> {
                s.parse()
            }
        }

        impl From<$name> for &'static str {
            fn from(k: $name) -> &'static str {
                k.name()
            }
        }
    };
}

named_kinds!(
    /// The sampler that proposes each trial's parameters (`[sampler] kind`).
    SamplerKind, "sampler", {
        /// Tree-structured Parzen estimator (Optuna's default).
        Tpe => "tpe",
        /// Independent uniform draws.
        Random => "random",
        /// Every combination of `[sampler] grid`.
        Grid => "grid",
    }
);

named_kinds!(
    /// The pruner that stops unpromising trials early (`[pruner] kind`).
    PrunerKind, "pruner", {
        /// No pruning.
        None => "none",
        /// Below the median of earlier trials at the same step.
        Median => "median",
        /// Below a percentile of earlier trials at the same step.
        Percentile => "percentile",
        /// Asynchronous successive halving.
        SuccessiveHalving => "successive_halving",
        /// Hyperband's brackets of successive halving.
        Hyperband => "hyperband",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluation_tables_read_by_scheme_and_refuse_unknown_keys() {
        let t: EvaluationSection =
            toml::from_str("scheme = \"cpcv\"\nn_groups = 6\nk_test = 2\n").unwrap();
        assert_eq!(
            t,
            EvaluationSection::Cpcv {
                n_groups: 6,
                k_test: 2,
                purge_bars: 0,
                embargo_bars: 0
            }
        );
        assert_eq!(t.folds(600).unwrap().map(|f| f.len()), Some(15));
        let wf: EvaluationSection =
            toml::from_str("scheme = \"walk_forward\"\nn_folds = 3\n").unwrap();
        assert_eq!(wf.folds(400).unwrap().map(|f| f.len()), Some(3));
        assert_eq!(EvaluationSection::default().folds(400).unwrap(), None);
        assert!(
            toml::from_str::<EvaluationSection>("scheme = \"cpcv\"\nn_group = 6\nk_test = 2\n")
                .is_err()
        );
        assert!(toml::from_str::<EvaluationSection>("scheme = \"kfold\"\n").is_err());
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(
            serde_json::from_value::<EvaluationSection>(json).unwrap(),
            t
        );
    }

    #[test]
    fn kinds_round_trip_and_unknown_names_list_the_valid_ones() {
        for k in SamplerKind::ALL {
            assert_eq!(k.name().parse::<SamplerKind>(), Ok(*k));
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(serde_json::from_str::<SamplerKind>(&json).unwrap(), *k);
        }
        for k in PrunerKind::ALL {
            assert_eq!(k.to_string().parse::<PrunerKind>(), Ok(*k));
        }
        let e = "cmaes".parse::<SamplerKind>().unwrap_err();
        assert_eq!(e, "unknown sampler 'cmaes' (valid: tpe, random, grid)");
        let pruner = PrunerSection {
            kind: PrunerKind::Percentile,
            percentile: 25.0,
            n_warmup_steps: 3,
            ..PrunerSection::default()
        };
        let attrs = vec![(PRUNER_ATTR.to_owned(), pruner.to_attr())];
        assert_eq!(PrunerSection::from_attrs(&attrs), Some(pruner));
        assert_eq!(PrunerSection::from_attrs(&[]), None);
        let e = serde_json::from_str::<PrunerKind>("\"asha\"").unwrap_err();
        assert!(e.to_string().contains("unknown pruner 'asha'"), "{e}");
    }
}
