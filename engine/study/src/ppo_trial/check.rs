//! A trial configuration's problems and memory estimate, as engine calls a form shows before
//! anything runs: the same checks and the same estimate a trial makes.

use tradetune_device::memory::MemoryEstimate;
use tradetune_env::{EnvError, ResolvedPlacement};
use tradetune_market::Dataset;
use tradetune_rl::ppo::PpoError;

use std::ops::Range;

use tradetune_env::starts::StartTable;
use tradetune_rl::eval::EvalSplit;

use super::{PpoTrial, PpoTrialConfig};
use crate::catalogue::{self, SettingError};
use crate::config_path;
use crate::file::{PrunerSection, SamplerSection, StudySection};
use crate::space::SearchSpace;

/// The sizes of the data a trial trains on, which some checks and the estimate need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataShape {
    /// Bars (timestamps) of the whole dataset.
    pub n_bars: usize,
    /// Assets (the action size).
    pub n_assets: usize,
    /// Features per asset per bar.
    pub n_features: usize,
}

impl DataShape {
    pub fn of(d: &Dataset) -> DataShape {
        DataShape {
            n_bars: d.n_bars(),
            n_assets: d.n_assets(),
            n_features: d.n_features(),
        }
    }

    /// Bytes of the market data an env placed on the device uploads: prices `[T, M]` and
    /// features `[T, M·F]` in f32.
    pub fn device_bytes(&self) -> u64 {
        let (t, m, f) = (
            self.n_bars as u64,
            self.n_assets as u64,
            self.n_features as u64,
        );
        4 * t * m * (1 + f)
    }
}

/// The default of the catalogue's setting `name` (JSON; `null` for an optional setting absent
/// by default): the trial configuration's own defaults, and the study file's tables'.
pub fn setting_default(name: &str) -> Option<serde_json::Value> {
    let mut root = PpoTrialConfig::defaults_json();
    if let serde_json::Value::Object(map) = &mut root {
        let study = toml::from_str::<StudySection>("name = \"study\"")
            .ok()
            .and_then(|s| serde_json::to_value(s).ok());
        let sampler = serde_json::to_value(SamplerSection::default()).ok();
        let pruner = serde_json::to_value(PrunerSection::default()).ok();
        for (key, value) in [("study", study), ("sampler", sampler), ("pruner", pruner)] {
            if let Some(v) = value {
                map.insert(key.to_owned(), v);
            }
        }
    }
    catalogue::at(&root, name).cloned()
}

/// One thing wrong with a setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The setting's dotted name (`ppo.batch_size`), or its section's (`ppo`) when the problem
    /// is not one setting's.
    pub field: String,
    /// What is wrong, for people.
    pub message: String,
}

impl PpoTrialConfig {
    /// Every problem of the configuration, setting by setting: values outside the catalogue's
    /// ranges, and the environment's and PPO's own checks (a batch larger than a rollout);
    /// `n_assets` is the data's, when it is loaded (the environment's checks need it). Empty
    /// when a trial would accept it.
    pub fn problems(&self, n_assets: Option<usize>) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut bad = |field: String, message: String| {
            if !out.iter().any(|p: &Problem| p.field == field) {
                out.push(Problem { field, message });
            }
        };
        if let Ok(json) = serde_json::to_value(self) {
            for s in catalogue::trial() {
                let value = s.name.split('.').try_fold(&json, |v, part| v.get(part));
                if let Some(Err(e)) = value.map(|v| s.check(v)) {
                    let name = match &e {
                        SettingError::OutOfRange { name, .. }
                        | SettingError::WrongType { name, .. }
                        | SettingError::NotAChoice { name, .. } => name.clone(),
                    };
                    bad(name, e.to_string());
                }
            }
        }
        for p in self.refused(n_assets) {
            bad(p.field, p.message);
        }
        let n_envs = self.env.n_envs.max(1);
        let rollout = self.ppo.n_steps * n_envs;
        if self.train.total_timesteps < rollout {
            bad(
                "train.total_timesteps".into(),
                format!(
                    "{} is less than one rollout (n_steps × n_envs = {rollout})",
                    self.train.total_timesteps
                ),
            );
        }
        out
    }

    /// The problems a trial refuses the configuration for as it starts: PPO's and the
    /// environment's own checks (the latter where `n_assets` is known).
    pub fn refused(&self, n_assets: Option<usize>) -> Vec<Problem> {
        let mut out = Vec::new();
        let n_envs = self.env.n_envs.max(1);
        match self.ppo.validate(n_envs) {
            Err(e @ PpoError::Config { field, .. }) => out.push(Problem {
                field: format!("ppo.{field}"),
                message: e.to_string(),
            }),
            Err(e) => out.push(Problem {
                field: "ppo".into(),
                message: e.to_string(),
            }),
            Ok(()) => {}
        }
        if let Some(n_assets) = n_assets {
            match self.env.validate(n_assets) {
                Err(e @ EnvError::Config { field, .. }) => out.push(Problem {
                    field: format!("env.{field}"),
                    message: e.to_string(),
                }),
                Err(e) => out.push(Problem {
                    field: "env".into(),
                    message: e.to_string(),
                }),
                Ok(()) => {}
            }
        }
        out
    }

    /// Whether no trial of the study searching `space` over `base` (the defaults with its fixed
    /// settings) could run: the problems a trial refuses its configuration for as it starts
    /// (`refused`: PPO's and the environment's checks, [`Self::refused`], and where the data
    /// is loaded whether it holds the episodes and evaluations, [`PpoTrial::refused`]; the
    /// catalogue's ranges are the file's), judged
    /// over each searched parameter's ends ([`SearchSpace::extreme_values`]) in every
    /// combination, up to [`COMBINATIONS_TRIED`] of them: the one rule between settings, a
    /// batch within a rollout (`n_steps × n_envs`), holds somewhere in a range when it holds at
    /// one of its ends. `None` when one combination has no problem, or
    /// when there are more combinations than that; else the first combination's problems
    /// (the fixed settings alone, for a study that searches nothing).
    pub fn unrunnable(
        base: &serde_json::Value,
        space: &SearchSpace,
        refused: impl Fn(&PpoTrialConfig) -> Vec<Problem>,
    ) -> Option<Vec<Problem>> {
        let params = space.extreme_values();
        let mut combinations: usize = 1;
        for (_, values) in &params {
            combinations = combinations.saturating_mul(values.len().max(1));
        }
        if combinations > COMBINATIONS_TRIED || params.iter().any(|(_, v)| v.is_empty()) {
            return None;
        }
        let mut first: Option<Vec<Problem>> = None;
        for k in 0..combinations {
            // The k-th combination, each parameter a digit of a mixed-radix number.
            let mut config = base.clone();
            let mut rest = k;
            let mut applied = Ok(());
            for (name, values) in &params {
                let value = &values[rest % values.len()];
                rest /= values.len();
                applied = applied.and_then(|()| config_path::apply_value(&mut config, name, value));
            }
            let problems = match applied {
                Err(e) => vec![Problem {
                    field: "search".into(),
                    message: e.to_string(),
                }],
                // What a trial refuses as it starts (the catalogue's ranges were checked
                // when the file was read; fewer timesteps than a rollout train one rollout).
                Ok(()) => match PpoTrialConfig::from_json(&config) {
                    Ok(c) => refused(&c),
                    Err(e) => vec![Problem {
                        field: "fixed".into(),
                        message: e.to_string(),
                    }],
                },
            };
            if problems.is_empty() {
                return None;
            }
            first.get_or_insert(problems);
        }
        first
    }

    /// What one trial of this configuration needs on a device that is (`on_cpu`) or is not
    /// the CPU, training on data of `shape`: an env placed on the device holds the market data
    /// there.
    pub fn memory_estimate(&self, shape: DataShape, on_cpu: bool) -> MemoryEstimate {
        let obs_dim = self.env.obs_dim(shape.n_assets, shape.n_features);
        let dataset = match self.env.placement_on(on_cpu) {
            ResolvedPlacement::Host => 0,
            ResolvedPlacement::Device => shape.device_bytes(),
        };
        self.ppo
            .memory_estimate(self.env.n_envs, obs_dim, shape.n_assets, dataset)
    }
}

impl PpoTrial {
    /// The problems a trial of `cfg` refuses as it starts on this study's data: the
    /// configuration's own ([`PpoTrialConfig::refused`], with the data's assets), else whether
    /// its episodes fit the bars it trains on (the train split, or each fold's training bars
    /// joined) and its evaluations the bars it is scored on (the validation split, or each
    /// fold's test blocks): a longer `env.lookback` or `env.episode_bars` leaves them too
    /// short. The first such problem only: one is enough to refuse the trial.
    pub fn refused(&self, cfg: &PpoTrialConfig) -> Vec<Problem> {
        let out = cfg.refused(Some(self.dataset.n_assets()));
        if !out.is_empty() {
            return out;
        }
        let problem = |field: &str, message: String| {
            vec![Problem {
                field: field.into(),
                message,
            }]
        };
        // (what, bars) trained on; (split name, bars) scored.
        type Named<S> = Vec<(S, Range<usize>)>;
        let (trained, scored): (Named<String>, Named<&str>) = match &self.folds {
            None => (
                vec![("the train split".into(), self.train.clone())],
                vec![("validation", self.validation.clone())],
            ),
            // A fold study's memory estimate builds its env on the hold-out train split.
            Some(folds) => (
                std::iter::once(("the train split".into(), self.train.clone()))
                    .chain(folds.iter().enumerate().map(|(i, f)| {
                        let bars = f.train.iter().map(|r| r.len()).sum();
                        (format!("fold {i}'s training bars"), 0..bars)
                    }))
                    .collect(),
                (folds.iter())
                    .flat_map(|f| super::folds::merge_adjacent(&f.test))
                    .map(|block| ("fold test", block))
                    .collect(),
            ),
        };
        for (what, bars) in trained {
            if let Err(e) = StartTable::check(&cfg.env, bars.clone()) {
                // The episodes' length where the lookback alone fits.
                let lookback_fits =
                    StartTable::check(&cfg.env.clone().with_episode_bars(0), bars).is_ok();
                let field = if lookback_fits {
                    "env.episode_bars"
                } else {
                    "env.lookback"
                };
                return problem(field, format!("{what}: {e}"));
            }
        }
        for (name, block) in scored {
            let split = EvalSplit::new(name, self.dataset.clone(), block, &cfg.env);
            if let Err(e) = split.steps() {
                return problem("env.lookback", e.to_string());
            }
        }
        Vec::new()
    }
}

/// The most combinations of searched values [`PpoTrialConfig::unrunnable`] tries (the ends
/// of 12 ranges), each a copy of the configuration and PPO's and the
/// environment's checks.
pub const COMBINATIONS_TRIED: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Setting;
    use crate::config_path::leaf_paths;
    use crate::file::{PrunerKind, SamplerKind};
    use serde_json::json;
    use tradetune_env::EnvPlacement;
    use tradetune_rl::eval::Objective;

    /// Every leaf of the trial configuration is catalogued, and nothing else is a trial
    /// setting.
    #[test]
    fn the_catalogues_trial_settings_are_the_configurations_leaves() {
        let mut names: Vec<String> = catalogue::trial().map(|s| s.name.to_owned()).collect();
        names.sort();
        assert_eq!(names, leaf_paths(&PpoTrialConfig::defaults_json()));
    }

    #[test]
    fn every_setting_has_a_default_in_its_range() {
        for s in catalogue::all() {
            let d = setting_default(s.name).unwrap_or_else(|| panic!("{} has no default", s.name));
            s.check(&d)
                .unwrap_or_else(|e| panic!("the default of {}: {e}", s.name));
        }
    }

    /// Each choice of a trial setting is a value its configuration reads, and the study's
    /// choices are the kinds' own names.
    #[test]
    fn every_choice_of_the_catalogue_is_a_value_of_the_setting() {
        for s in catalogue::trial().filter(|s| !s.choices().is_empty()) {
            for c in s.choices() {
                let mut config = PpoTrialConfig::defaults_json();
                let mut slot = &mut config;
                for part in s.name.split('.') {
                    slot = &mut slot[part];
                }
                *slot = json!(c);
                PpoTrialConfig::from_json(&config)
                    .unwrap_or_else(|e| panic!("{} = {c}: {e}", s.name));
            }
        }
        let names = |name: &str| {
            catalogue::get(name)
                .map(Setting::choices)
                .unwrap_or_default()
        };
        let objectives: Vec<&str> = Objective::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(names("study.objective"), objectives);
        let samplers: Vec<&str> = SamplerKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names("sampler.kind"), samplers);
        let pruners: Vec<&str> = PrunerKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names("pruner.kind"), pruners);
    }

    /// A study no trial of which could run is told before its first trial, by the setting
    /// that stops it; one that some searched value rescues is not, nor is one whose searched
    /// ranges make more combinations than are tried.
    #[test]
    fn a_study_whose_every_trial_would_fail_is_found_by_the_ends_of_its_ranges() {
        let mut base = PpoTrialConfig::defaults_json();
        base["env"]["n_envs"] = json!(4);
        base["ppo"]["n_steps"] = json!(32);
        base["ppo"]["batch_size"] = json!(1024);
        base["train"]["total_timesteps"] = json!(100_000);
        let four_assets = |c: &PpoTrialConfig| c.refused(Some(4));
        // Nothing searched: the fixed settings alone.
        let space = SearchSpace::new();
        let problems = PpoTrialConfig::unrunnable(&base, &space, four_assets).expect("unrunnable");
        assert_eq!(problems[0].field, "ppo.batch_size", "{problems:?}");
        assert!(
            problems[0].message.contains("n_steps × n_envs = 128"),
            "{problems:?}"
        );
        // Searching what does not matter changes nothing.
        let mut space = SearchSpace::new();
        space
            .add_float("ppo.learning_rate", 1e-5, 1e-3, true, None)
            .unwrap();
        space
            .add_float("ppo.gamma", 0.9, 0.999, false, None)
            .unwrap();
        let problems = PpoTrialConfig::unrunnable(&base, &space, four_assets).expect("unrunnable");
        assert_eq!(problems[0].field, "ppo.batch_size");
        // Rollouts long enough at the top of a searched range: some trials run.
        let mut rescued = space.clone();
        rescued.add_int("ppo.n_steps", 32, 512, false, 32).unwrap();
        assert_eq!(
            PpoTrialConfig::unrunnable(&base, &rescued, four_assets),
            None
        );
        // Fewer timesteps than a rollout train one rollout: no refusal.
        let mut short = base.clone();
        short["ppo"]["batch_size"] = json!(64);
        short["train"]["total_timesteps"] = json!(100);
        assert_eq!(
            PpoTrialConfig::unrunnable(&short, &space, four_assets),
            None
        );
        // The top of a range far above what the batch needs runs.
        let mut far = space.clone();
        far.add_int("ppo.n_steps", 32, 1_000_000, true, 1).unwrap();
        assert_eq!(PpoTrialConfig::unrunnable(&base, &far, four_assets), None);
        // A good configuration is runnable; too many combinations are not judged.
        base["ppo"]["batch_size"] = json!(64);
        assert_eq!(PpoTrialConfig::unrunnable(&base, &space, four_assets), None);
        base["ppo"]["batch_size"] = json!(1024);
        let mut wide = space.clone();
        for name in [
            "ppo.ent_coef",
            "ppo.vf_coef",
            "ppo.clip_range",
            "ppo.gae_lambda",
            "ppo.max_grad_norm",
            "ppo.n_epochs",
        ] {
            if name == "ppo.n_epochs" {
                // A categorical's every choice is tried: 40 of them.
                let epochs = (1..=40).map(crate::space::CategoricalChoice::Int).collect();
                wide.add_categorical(name, epochs).unwrap();
            } else {
                wide.add_float(name, 0.1, 0.5, false, None).unwrap();
            }
        }
        assert!(wide.len() == 8, "{wide:?}");
        // 2^7 × 40 = 5,120 combinations, over the limit.
        assert_eq!(PpoTrialConfig::unrunnable(&base, &wide, four_assets), None);
    }

    fn shape() -> DataShape {
        DataShape {
            n_bars: 2000,
            n_assets: 4,
            n_features: 8,
        }
    }

    #[test]
    fn each_problem_is_named_by_its_setting() {
        let mut c = PpoTrialConfig::default();
        assert_eq!(c.problems(Some(4)), vec![]);
        c.ppo.gamma = 1.5;
        c.ppo.batch_size = c.ppo.n_steps * c.env.n_envs + 1;
        c.env.buy_fee = 0.9;
        c.train.total_timesteps = 1;
        let fields: Vec<String> = c.problems(Some(4)).into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "env.buy_fee",
                "ppo.gamma",
                "ppo.batch_size",
                "train.total_timesteps"
            ]
        );
        let p = c.problems(Some(4));
        assert!(p[1].message.contains("[0, 1]"), "{p:?}");
        // Without the data, the environment's own checks wait; the ranges do not.
        c.env.min_order_values = vec![1.0];
        assert!(
            c.problems(Some(4))
                .iter()
                .any(|p| p.field == "env.min_order_values")
        );
        assert!(
            !c.problems(None)
                .iter()
                .any(|p| p.field == "env.min_order_values")
        );
    }

    #[test]
    fn the_estimate_counts_the_data_only_on_the_device() {
        let mut c = PpoTrialConfig::default();
        let host = c.memory_estimate(shape(), true);
        let device = c.memory_estimate(shape(), false);
        assert_eq!(device.total(), host.total() + shape().device_bytes());
        c.env.placement = Some(EnvPlacement::Host);
        assert_eq!(c.memory_estimate(shape(), false).total(), host.total());
    }
}
