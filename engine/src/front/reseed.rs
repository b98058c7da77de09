//! Seed spread: the best trial of a study trained again with K other seeds and each policy
//! backtested on the held-out test split, beside equal weight (`tradetune study reseed`). A
//! best trial that only one seed makes good is luck, whatever its validation score said.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::FrontError;
use crate::env::EnvPlacement;
use crate::eval::EvalSplit;
use crate::market::load::DatasetConfig;
use crate::ppo::evaluate_trainer;
use crate::storage::{JsonValue, Storage};
use crate::study::file::StudyFile;
use crate::study::ppo_trial::{PpoTrialConfig, TrainingRun};

/// The study system attribute the spread is stored under (JSON).
pub const RESEED_KEY: &str = "tradetune:reseed";

/// One seed's policy on the test split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedResult {
    pub seed: u64,
    pub sharpe: f64,
    pub total_return: f64,
    pub objective: f64,
}

/// The spread of the best trial over seeds, with equal weight on the same bars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedSpread {
    /// The trial re-run.
    pub trial: i64,
    /// Test bars.
    pub bars: usize,
    pub seeds: Vec<SeedResult>,
    pub equal_weight_sharpe: f64,
    pub equal_weight_total_return: f64,
}

/// The study file recorded with `study` in `storage` (whichever front end ran it), its
/// overrides applied and relative data paths against the recorded file's folder where that
/// file is here (else the current directory), with where it came from; `None` for a study
/// run before studies were recorded, or by another program. What `tradetune study reseed` and
/// the app's Report tab both reseed from.
pub fn recorded_study_file(
    storage: &Storage,
    study: &str,
) -> Result<Option<(StudyFile, String)>, FrontError> {
    let stored = storage.study(study)?;
    let Some(record) = super::launch::RecordedStudy::of(&stored) else {
        return Ok(None);
    };
    let data_dir = match record.source_dir() {
        Some(dir) => dir,
        None => std::env::current_dir()
            .map_err(|e| FrontError::file(std::path::Path::new("."), e.to_string()))?,
    };
    let file = record.study_file(study, &data_dir)?;
    Ok(Some((
        file,
        format!("{}, recorded with the study", record.source),
    )))
}

/// Refuses a study file given for a study that has one recorded when its data (files, assets)
/// or split differ from the recorded one's: the spread would be on other bars than the study's.
/// `given` names the file in the error.
pub fn check_same_data(
    recorded: &StudyFile,
    file: &StudyFile,
    given: &str,
) -> Result<(), FrontError> {
    let abs = |f: &StudyFile| -> Vec<std::path::PathBuf> {
        f.data
            .paths
            .iter()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            .collect()
    };
    let mut differ = Vec::new();
    if abs(recorded) != abs(file) {
        differ.push("[data] paths");
    }
    if recorded.data.assets != file.data.assets {
        differ.push("[data] assets");
    }
    if recorded.split != file.split {
        differ.push("[split]");
    }
    if differ.is_empty() {
        return Ok(());
    }
    Err(FrontError::Invalid(format!(
        "{given}: its {} differ from those recorded with study '{}': the study's recorded file \
         is used on its own (give only --name)",
        differ.join(", "),
        recorded.study.name
    )))
}

/// Trains the best COMPLETE trial of `file`'s study in `storage` again with `seeds` seeds
/// (its own seed + 1, + 2, …, for the learner and the environment), each on the train split
/// on the CPU, backtests each on the test split, stores the spread in the study and returns it.
/// `progress` hears "seed i of K" as each starts.
pub fn reseed(
    storage: &mut Storage,
    file: &StudyFile,
    seeds: usize,
    progress: impl FnMut(usize, usize),
) -> Result<SeedSpread, FrontError> {
    reseed_until(storage, file, seeds, progress, &AtomicBool::new(false))
}

/// [`reseed`] that gives up, storing nothing, once `cancel` is set (the training of the seed
/// under way stops at its next update).
pub fn reseed_until(
    storage: &mut Storage,
    file: &StudyFile,
    seeds: usize,
    mut progress: impl FnMut(usize, usize),
    cancel: &AtomicBool,
) -> Result<SeedSpread, FrontError> {
    let cancelled = || FrontError::Invalid("reseeding cancelled: nothing was stored".into());
    if seeds == 0 {
        return Err(FrontError::Invalid("reseed needs at least one seed".into()));
    }
    let name = &file.study.name;
    let study = storage.study(name)?;
    let best = storage
        .best_trial(study.study_id)?
        .ok_or_else(|| FrontError::Invalid(format!("study '{name}' has no COMPLETE trial")))?;
    let meta = storage.run_metadata(best.trial_id)?.ok_or_else(|| {
        FrontError::Invalid(format!(
            "trial #{} of '{name}' has no stored configuration (was it run by TradeTune?)",
            best.number
        ))
    })?;
    let config: PpoTrialConfig = PpoTrialConfig::from_json(&serde_json::Value::from(&meta.config))
        .map_err(|e| FrontError::Invalid(format!("trial #{}'s configuration: {e}", best.number)))?;
    let loaded = DatasetConfig {
        paths: file.data.paths.clone(),
        assets: file.data.assets.clone(),
        lookback: config.env.lookback,
        episode_bars: config.env.episode_bars,
        split: file.split.clone(),
        ..DatasetConfig::default()
    }
    .load()?;
    // Trained and tested on other bars than the study's trials were, the spread would say
    // nothing about them: data that changed since the study ran (a fingerprint recorded with
    // it that this data's is not) is refused, as a study run on it is.
    if let Some(recorded) =
        super::launch::RecordedStudy::of(&study).and_then(|r| r.fingerprint.clone())
    {
        let here = loaded.dataset.fingerprint();
        if here != recorded {
            return Err(FrontError::DataMismatch {
                study: name.clone(),
                here,
                recorded,
                data: loaded.source_name.clone(),
            });
        }
    }
    let dataset = Arc::new(loaded.dataset);
    let device = crate::device::open(crate::device::DeviceSpec::Cpu)?;
    let test = EvalSplit::new(
        "test",
        dataset.clone(),
        loaded.split.test.clone(),
        &config.env,
    );
    let mut results = Vec::with_capacity(seeds);
    let mut equal_weight = (f64::NAN, f64::NAN, 0usize);
    for k in 0..seeds {
        if cancel.load(Ordering::Relaxed) {
            return Err(cancelled());
        }
        progress(k, seeds);
        let mut cfg = config.clone();
        let seed = cfg.ppo.seed.wrapping_add(1 + k as u64);
        cfg.ppo.seed = seed;
        cfg.env.seed = cfg.env.seed.wrapping_add(1 + k as u64);
        // Every seed trains with the environment on the host, whatever the trial ran with.
        cfg.env.placement = Some(EnvPlacement::Host);
        let train = loaded.split.train.clone();
        let mut trainer = TrainingRun::build(&cfg, &dataset, train, &device, None)?.trainer;
        let stop = trainer.stop_flag();
        trainer.learn(cfg.train.total_timesteps.max(1), &mut |_| {
            if cancel.load(Ordering::Relaxed) {
                stop.store(true, Ordering::Relaxed);
            }
        })?;
        if cancel.load(Ordering::Relaxed) {
            return Err(cancelled());
        }
        let r = evaluate_trainer(&trainer, &test, file.study.objective)?;
        equal_weight = (r.equal_weight.sharpe, r.equal_weight.total_return, r.bars);
        results.push(SeedResult {
            seed,
            sharpe: r.agent.sharpe,
            total_return: r.agent.total_return,
            objective: r.objective,
        });
    }
    let out = SeedSpread {
        trial: best.number,
        bars: equal_weight.2,
        seeds: results,
        equal_weight_sharpe: equal_weight.0,
        equal_weight_total_return: equal_weight.1,
    };
    let json = serde_json::to_value(&out)
        .map_err(|e| FrontError::Invalid(format!("the seed spread as JSON: {e}")))?;
    storage.set_study_system_attr(study.study_id, RESEED_KEY, &JsonValue::from(json))?;
    Ok(out)
}

/// The spread stored in a study, if any.
pub fn stored(storage: &Storage, name: &str) -> Result<Option<SeedSpread>, FrontError> {
    let study = storage.study(name)?;
    Ok(study
        .system_attrs
        .iter()
        .find(|(k, _)| k == RESEED_KEY)
        .and_then(|(_, v)| serde_json::from_value(serde_json::Value::from(v)).ok()))
}
