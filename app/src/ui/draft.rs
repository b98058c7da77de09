//! The configuration being edited: environment, PPO, the run's budget and where it runs. It is
//! what a preset fills in, what the Configure panel edits, what Start hands to the engine and
//! what the app remembers between launches.

use serde::{Deserialize, Serialize};

use std::path::PathBuf;
use tradetune_engine::device::memory::{
    DEFAULT_MEMORY_FRACTION, MemoryBudget, MemoryEstimate, fmt_bytes,
};

use tradetune_engine::device::DeviceSpec;
use tradetune_engine::env::EnvConfig;
use tradetune_engine::eval::Objective;
use tradetune_engine::market::split::{HoldOut, SplitError, SplitSpec};
use tradetune_engine::ppo::PpoConfig;
use tradetune_engine::study::Direction;
use tradetune_engine::study::file::{
    DataSection, EvaluationSection, PrunerSection, SamplerSection, SearchSpec, StudyFile,
    StudyFileError, StudyParts, StudySection,
};
pub use tradetune_engine::study::ppo_trial::{DataShape, Problem};
use tradetune_engine::study::ppo_trial::{PpoTrialConfig, TrialSchedule};
use tradetune_engine::study::preset::Preset;

/// One searched parameter: its dotted name and its range, typed but judged only by the engine
/// ([`SearchSpec::distribution`], when the study is built). Settings store the range as a study
/// file's inline table (`{ low = 1e-5, high = 1e-3, log = true }`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchEntry {
    /// `ppo.learning_rate`.
    pub name: String,
    /// The range or choices.
    pub spec: SearchSpec,
}

/// A searched parameter as saved settings hold it: its range as the study file's text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct StoredSearchEntry {
    /// `ppo.learning_rate`.
    pub name: String,
    /// `{ low = 1e-5, high = 1e-3, log = true }`.
    pub spec: String,
}

impl StoredSearchEntry {
    /// The entry, or why its range no longer reads.
    pub(crate) fn read(&self) -> Result<SearchEntry, String> {
        SearchSpec::parse(&self.spec).map(|spec| SearchEntry {
            name: self.name.clone(),
            spec,
        })
    }
}

/// The searched parameters of saved settings; an entry whose range no longer reads (text
/// typed into a settings file by hand) is dropped, leaving that field fixed, rather than
/// losing every other setting. The settings' loader names each one dropped in a warning
/// ([`super::settings::load`]).
fn lenient_search<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<SearchEntry>, D::Error> {
    let stored = Vec::<StoredSearchEntry>::deserialize(d)?;
    Ok(stored.iter().filter_map(|e| e.read().ok()).collect())
}

/// Everything Start needs besides the data: a study file's contents, with the fixed
/// configuration as typed structs so the panels edit fields, not text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Draft {
    /// The trading environment.
    pub env: EnvConfig,
    /// The learner.
    pub ppo: PpoConfig,
    /// How long each trial trains and how often it is evaluated.
    pub train: TrialSchedule,
    /// How the data's bars are cut into train, validation and test (the study file's
    /// `[split]`).
    pub split: SplitSpec,
    /// How a trial is scored: hold-out or cross-validation folds (the study file's
    /// `[evaluation]`).
    pub evaluation: EvaluationSection,
    /// Name, direction, objective, trials, workers, devices, memory fraction.
    pub study: StudySection,
    /// The sampler.
    pub sampler: SamplerSection,
    /// The pruner.
    pub pruner: PrunerSection,
    /// Searched parameters (empty: every trial runs the fixed configuration).
    #[serde(deserialize_with = "lenient_search")]
    pub search: Vec<SearchEntry>,
}

impl Default for Draft {
    fn default() -> Self {
        // Small enough that a first run on a laptop CPU finishes in about a minute.
        let mut ppo = PpoConfig::new();
        ppo.n_steps = 256;
        ppo.batch_size = 256;
        ppo.n_epochs = 4;
        let mut env = EnvConfig::new();
        env.n_envs = 8;
        Draft {
            env,
            ppo,
            train: TrialSchedule {
                total_timesteps: 50_000,
                eval_every: 5,
            },
            split: SplitSpec::default(),
            evaluation: EvaluationSection::default(),
            study: StudySection {
                name: "tradetune".into(),
                direction: Direction::Maximize,
                objective: Objective::default(),
                n_trials: 1,
                workers: 1,
                devices: vec!["cpu".into()],
                assignment: Default::default(),
                gpu_sharing: Default::default(),
                memory_fraction: DEFAULT_MEMORY_FRACTION,
                device_memory_gib: None,
                device_class: None,
                description: None,
            },
            sampler: SamplerSection::default(),
            pruner: PrunerSection::default(),
            search: Vec::new(),
        }
    }
}

/// Where errors of the generated study file point.
pub const DRAFT_SOURCE: &str = "the Configure panel";

impl Draft {
    /// The draft of a bundled preset: its fixed configuration, study settings, sampler, pruner
    /// and searched ranges.
    pub fn from_preset(p: &Preset) -> Result<Draft, String> {
        let base = PpoTrialConfig::from_json(&p.study.base_config).map_err(|e| e.to_string())?;
        let search = p
            .study
            .search_specs()
            .into_iter()
            .map(|(name, spec)| SearchEntry { name, spec })
            .collect();
        Ok(Draft {
            env: base.env,
            ppo: base.ppo,
            train: base.train,
            split: p.study.split.clone(),
            evaluation: p.study.evaluation.clone(),
            study: p.study.study.clone(),
            sampler: p.study.sampler.clone(),
            pruner: p.study.pruner.clone(),
            search,
        })
    }

    /// The device trials run on (the first of the study's devices).
    pub fn device(&self) -> &str {
        self.study.devices.first().map_or("cpu", String::as_str)
    }

    /// The study file this draft amounts to, training on `data` (empty: the bundled sample).
    /// Errors name the field (`search.ppo.gamma`, `sampler.kind`).
    pub fn study_file(&self, data: &[PathBuf]) -> Result<StudyFile, StudyFileError> {
        StudyFile::from_parts(
            StudyParts {
                study: self.study.clone(),
                data: DataSection {
                    paths: data.to_vec(),
                    assets: Vec::new(),
                },
                split: self.split.clone(),
                evaluation: self.evaluation.clone(),
                base_config: self.base_json(),
                search: self
                    .search
                    .iter()
                    .map(|e| (e.name.clone(), e.spec.clone()))
                    .collect(),
                sampler: self.sampler.clone(),
                pruner: self.pruner.clone(),
            },
            DRAFT_SOURCE,
        )
    }
}

impl Draft {
    /// The trial configuration it fixes: `{ env, ppo, train }`.
    pub fn trial_config(&self) -> PpoTrialConfig {
        PpoTrialConfig {
            env: self.env.clone(),
            ppo: self.ppo.clone(),
            train: self.train.clone(),
        }
    }

    /// The fixed configuration as the study file's base: `{ env, ppo, train }` (the fields a
    /// search can set are its leaves, the engine's catalogue's trial settings).
    pub(crate) fn base_json(&self) -> serde_json::Value {
        serde_json::to_value(self.trial_config()).unwrap_or_default()
    }

    /// The fixed value of `name`, if it names a field.
    pub fn fixed_value(&self, name: &str) -> Option<serde_json::Value> {
        let base = self.base_json();
        name.split('.')
            .try_fold(&base, |v, part| v.get(part))
            .cloned()
    }
}

/// The estimated need of a draft against its device's budget.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryCheck {
    /// What the run needs, by part.
    pub estimate: MemoryEstimate,
    /// What it may use (None when the device's memory is unknown).
    pub budget: Option<MemoryBudget>,
}

impl MemoryCheck {
    /// Need as a fraction of the budget (None when there is no budget).
    pub fn fraction(&self) -> Option<f64> {
        self.budget
            .as_ref()
            .map(|b| self.estimate.total() as f64 / b.bytes.max(1) as f64)
    }

    /// Whether the run would be refused before it starts.
    pub fn over_budget(&self) -> bool {
        self.budget
            .as_ref()
            .is_some_and(|b| b.check(&self.estimate).is_err())
    }

    /// "1.2 GiB of 12.8 GiB".
    pub fn label(&self) -> String {
        match &self.budget {
            Some(b) => format!(
                "{} of {} budget",
                fmt_bytes(self.estimate.total()),
                fmt_bytes(b.bytes)
            ),
            None => format!(
                "{} (device memory unknown)",
                fmt_bytes(self.estimate.total())
            ),
        }
    }
}

impl Draft {
    /// Every problem of the draft training on `data`, field by field; empty when Start may
    /// run it. The trial configuration's are the engine's own
    /// ([`PpoTrialConfig::problems`]), so the app flags exactly what a run would refuse.
    pub fn problems(&self, shape: Option<DataShape>, data: &[PathBuf]) -> Vec<Problem> {
        let mut out = self.trial_config().problems(shape.map(|s| s.n_assets));
        // The study settings, searched ranges, sampler and pruner: the engine's own parser.
        if let Err(e) = self.study_file(data) {
            // The parser quotes dotted names (`search."ppo.gamma"`); fields are named bare.
            let field = e.key.as_deref().unwrap_or("study").replace('"', "");
            out.push(Problem {
                field,
                message: e.to_string(),
            });
        }
        out
    }

    /// The estimate of what one trial needs on the study's first device (the engine's,
    /// [`PpoTrialConfig::memory_estimate`]: the data counts where the env is placed on the
    /// device) and that device's share for it. `device_bytes` is the device's memory (host RAM
    /// for the CPU) when known. The share is the runner's: the whole fraction where the
    /// workers take turns on a GPU ([`runs_sharing_budget`]), else split between them.
    ///
    /// [`runs_sharing_budget`]: tradetune_engine::study::runner::GpuSharing::runs_sharing_budget
    pub fn memory(&self, shape: DataShape, device_bytes: Option<u64>) -> MemoryCheck {
        // A device that does not parse is the draft's own problem; until then, the CPU's.
        let spec = self
            .device()
            .parse::<DeviceSpec>()
            .unwrap_or(DeviceSpec::Cpu);
        let estimate = self
            .trial_config()
            .memory_estimate(shape, spec == DeviceSpec::Cpu);
        let shared_by = self.trials_at_once(spec);
        let budget = device_bytes
            .and_then(|bytes| MemoryBudget::new(bytes, self.study.memory_fraction, shared_by).ok());
        MemoryCheck { estimate, budget }
    }

    /// The trials the study trains at once on `spec` (its first device): one where its workers
    /// take turns on a GPU, else one per worker. They share a device's memory budget, and the
    /// samples/s a run measures over all its workers.
    pub fn trials_at_once(&self, spec: DeviceSpec) -> usize {
        self.study
            .gpu_sharing
            .runs_sharing_budget(spec, self.study.workers)
    }

    /// [`Self::trials_at_once`] on the draft's first device (the CPU where it does not parse).
    pub fn trials_at_once_here(&self) -> usize {
        self.trials_at_once(self.device().parse().unwrap_or(DeviceSpec::Cpu))
    }

    /// The train, validation and test ranges of the draft's split over bars at `timestamps`
    /// (the engine's own resolution, as a run makes it).
    pub fn split_ranges(&self, timestamps: &[i64]) -> Result<HoldOut, SplitError> {
        self.split.resolve(timestamps)
    }

    /// The number of cross-validation folds over the loaded bars at `timestamps` (None for a
    /// hold-out); the error says why the folds cannot be cut.
    pub fn fold_count(&self, timestamps: &[i64]) -> Result<Option<usize>, String> {
        let h = self.split_ranges(timestamps).map_err(|e| e.to_string())?;
        self.evaluation
            .folds(h.validation.end)
            .map(|f| f.map(|f| f.len()))
            .map_err(|e| e.to_string())
    }

    /// Problems of the evaluation over the loaded bars: folds the engine cannot cut (too many
    /// for the bars, k ≥ N).
    pub fn evaluation_problems(&self, timestamps: &[i64]) -> Vec<Problem> {
        if self.split_ranges(timestamps).is_err() {
            return Vec::new(); // the split's own problem says it
        }
        match self.fold_count(timestamps) {
            Err(e) => vec![Problem {
                field: "evaluation".into(),
                message: format!("evaluation: {e}"),
            }],
            Ok(_) => Vec::new(),
        }
    }

    /// Problems of the split over the loaded bars at `timestamps`: one the engine cannot make,
    /// or a training split too short for one observation window and episode (the check the
    /// data loader makes before a run).
    pub fn split_problems(&self, timestamps: &[i64]) -> Vec<Problem> {
        let problem = |message: String| {
            vec![Problem {
                field: "split".into(),
                message,
            }]
        };
        match self.split_ranges(timestamps) {
            Err(e) => problem(e.to_string()),
            Ok(h) => {
                let needed = self.env.lookback + self.env.episode_bars.max(1);
                if h.train.len() < needed {
                    problem(format!(
                        "split: the training split has {} bars, but lookback {} + one episode \
                         need {needed}: give train a larger share",
                        h.train.len(),
                        self.env.lookback
                    ))
                } else {
                    Vec::new()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> DataShape {
        DataShape {
            n_bars: 2000,
            n_assets: 4,
            n_features: 8,
        }
    }

    #[test]
    fn the_default_draft_is_runnable() {
        assert_eq!(Draft::default().problems(Some(shape()), &[]), vec![]);
    }

    #[test]
    fn a_batch_larger_than_a_rollout_is_flagged_on_batch_size() {
        let mut d = Draft::default();
        d.ppo.batch_size = d.ppo.n_steps * d.env.n_envs + 1;
        let problems = d.problems(Some(shape()), &[]);
        assert!(
            problems.iter().any(|p| p.field == "ppo.batch_size"),
            "{problems:?}"
        );
    }

    /// The data counts where the env is placed on a GPU, not on the CPU.
    #[test]
    fn the_estimate_counts_the_data_on_a_gpu() {
        let mut d = Draft::default();
        let cpu = d.memory(shape(), None).estimate.total();
        d.study.devices = vec!["wgpu:0".into()];
        let gpu = d.memory(shape(), None).estimate.total();
        assert_eq!(gpu, cpu + shape().device_bytes());
    }

    #[test]
    fn the_estimate_grows_with_the_network_and_is_refused_over_budget() {
        let d = Draft::default();
        let small = d.memory(shape(), Some(1 << 34));
        let mut big = d.clone();
        big.ppo.policy.net_arch.pi = vec![4096, 4096, 4096];
        big.ppo.policy.net_arch.vf = vec![4096, 4096, 4096];
        let large = big.memory(shape(), Some(1 << 34));
        assert!(large.estimate.total() > 10 * small.estimate.total());
        assert!(!small.over_budget());
        let tiny_device = big.memory(shape(), Some(64 << 20));
        assert!(tiny_device.over_budget());
        assert!(tiny_device.fraction().is_some_and(|f| f > 1.0));
    }

    /// The draft's check divides the card as the runner does: workers taking turns on a GPU
    /// each have the whole fraction (the RTX 4080 preset's three workers were each shown a
    /// third of the card); sharing it, or on the CPU, they split it.
    #[test]
    fn workers_taking_turns_on_a_gpu_each_have_the_whole_budget() {
        use tradetune_engine::study::runner::GpuSharing;
        let mut d = Draft::default();
        d.study.workers = 3;
        d.study.memory_fraction = 0.8;
        let card: u64 = 16 << 30;
        let budget = |d: &Draft| d.memory(shape(), Some(card)).budget.map(|b| b.bytes);
        let whole = (card as f64 * 0.8) as u64;
        let third = (card as f64 * 0.8 / 3.0) as u64;
        assert_eq!(budget(&d), Some(third), "the CPU is never taken in turns");
        d.study.devices = vec!["wgpu:0".into()];
        d.study.gpu_sharing = GpuSharing::Serial;
        assert_eq!(budget(&d), Some(whole));
        d.study.gpu_sharing = GpuSharing::Shared;
        assert_eq!(budget(&d), Some(third));
    }

    #[test]
    fn every_bundled_preset_becomes_a_runnable_draft() {
        let presets = tradetune_engine::study::preset::bundled().unwrap();
        assert_eq!(presets.len(), 4);
        for p in &presets {
            let d = Draft::from_preset(p).unwrap();
            assert!(!d.search.is_empty(), "{}", p.name);
            assert_eq!(d.problems(Some(shape()), &[]), vec![], "{}", p.name);
            // The study file it amounts to searches what the preset searches.
            let file = d.study_file(&[]).unwrap();
            assert_eq!(file.search_specs(), p.study.search_specs(), "{}", p.name);
            assert_eq!(file.base_config, p.study.base_config, "{}", p.name);
            assert_eq!(file.study, p.study.study);
            assert_eq!(file.split, p.study.split, "{}", p.name);
        }
    }

    /// Daily bars from 1970-01-01.
    fn days(n: i64) -> Vec<i64> {
        (0..n).map(|i| i * 86_400).collect()
    }

    #[test]
    fn the_split_reaches_the_study_file_and_is_checked_over_the_bars() {
        let mut d = Draft {
            split: SplitSpec::Fractions {
                train: 0.5,
                validation: 0.25,
            },
            ..Draft::default()
        };
        assert_eq!(d.study_file(&[]).unwrap().split, d.split);
        let ts = days(1000);
        let h = d.split_ranges(&ts).unwrap();
        assert_eq!(
            (h.train.len(), h.validation.len(), h.test.len()),
            (500, 250, 250)
        );
        assert_eq!(d.split_problems(&ts), vec![]);

        // Nothing left for the test split: the engine's message, on the split.
        d.split = SplitSpec::Fractions {
            train: 0.6,
            validation: 0.5,
        };
        let p = d.split_problems(&ts);
        assert!(
            p.len() == 1 && p[0].field == "split" && p[0].message.contains("sum below 1"),
            "{p:?}"
        );

        // A training split shorter than one observation window and an episode.
        d.split = SplitSpec::Fractions {
            train: 0.01,
            validation: 0.5,
        };
        d.env.lookback = 20;
        let p = d.split_problems(&ts);
        assert!(
            p.len() == 1 && p[0].message.contains("has 10 bars"),
            "{p:?}"
        );

        // By dates, as a study file writes them.
        d.split = SplitSpec::Dates {
            validation_start: "1971-01-01".into(),
            test_start: "1972-01-01".into(),
        };
        let h = d.split_ranges(&ts).unwrap();
        assert_eq!(
            (h.train.len(), h.validation.len(), h.test.len()),
            (365, 365, 270)
        );
        assert_eq!(d.study_file(&[]).unwrap().split, d.split);
        d.split = SplitSpec::Dates {
            validation_start: "1972-01-01".into(),
            test_start: "1971-01-01".into(),
        };
        let p = d.split_problems(&ts);
        assert!(
            p.len() == 1 && p[0].message.contains("must be after validation_start"),
            "{p:?}"
        );
    }

    #[test]
    fn cross_validation_reaches_the_study_file_and_bad_folds_are_flagged() {
        let ts = days(1000);
        let mut d = Draft::default();
        assert_eq!(d.fold_count(&ts), Ok(None));
        d.evaluation = EvaluationSection::Cpcv {
            n_groups: 6,
            k_test: 2,
            purge_bars: 5,
            embargo_bars: 5,
        };
        assert_eq!(d.fold_count(&ts), Ok(Some(15)));
        assert_eq!(d.evaluation_problems(&ts), vec![]);
        assert_eq!(d.study_file(&[]).unwrap().evaluation, d.evaluation);
        d.evaluation = EvaluationSection::Cpcv {
            n_groups: 3,
            k_test: 3,
            purge_bars: 0,
            embargo_bars: 0,
        };
        let p = d.evaluation_problems(&ts);
        assert!(p.len() == 1 && p[0].field == "evaluation", "{p:?}");
    }

    #[test]
    fn a_draft_saved_before_the_split_existed_loads_with_the_default_split() {
        let mut old = serde_json::to_value(Draft::default()).unwrap();
        let fields = old.as_object_mut().unwrap();
        assert!(fields.remove("split").is_some());
        fields.insert(
            "train".into(),
            serde_json::json!({ "total_timesteps": 1234 }),
        );
        let d: Draft = serde_json::from_value(old).unwrap();
        assert_eq!(d.split, SplitSpec::default());
        assert_eq!(d.train.total_timesteps, 1234);
    }

    #[test]
    fn a_bad_range_is_flagged_on_its_parameter() {
        let mut d = Draft::default();
        d.search.push(SearchEntry {
            name: "ppo.gamma".into(),
            spec: SearchSpec::parse("{ low = 0.99, high = 0.9 }").unwrap(),
        });
        let problems = d.problems(Some(shape()), &[]);
        assert!(
            problems.iter().any(|p| p.field == "search.ppo.gamma"),
            "{problems:?}"
        );
        d.search[0] = SearchEntry {
            name: "ppo.gama".into(),
            spec: SearchSpec::parse("{ low = 0.9, high = 0.99 }").unwrap(),
        };
        let problems = d.problems(Some(shape()), &[]);
        assert!(
            problems.iter().any(|p| p.message.contains("ppo.gamma")),
            "a misspelt name suggests the right one: {problems:?}"
        );
    }
}
