//! Cross-validated PPO trials: a fresh policy trained and scored on each fold of the study's
//! `[evaluation]`, the folds' objectives reported as intermediate values and their per-bar
//! out-of-sample returns stored.

use std::ops::Range;
use std::sync::Arc;

use super::learn::{Work, learn};
use super::{PlacedEnv, PpoTrial, PpoTrialConfig, TrainingRun};
use crate::runner::{Reporter, TrialError, TrialInput};
use tradetune_market::Dataset;
use tradetune_market::scaling::FeatureScaler;
use tradetune_market::split::Fold;
use tradetune_rl::eval::EvalSplit;
use tradetune_rl::ppo::{Trainer, evaluate_trainer};

impl PpoTrial {
    /// Trains and scores a fresh policy on each fold in turn: its objective on the fold's
    /// test bars is the intermediate value at step = the fold's index (so a pruner can stop a
    /// hopeless trial after a few folds), its per-bar returns are stored, and the trial's value
    /// is the mean over folds (their spread is the user attribute `fold_std`).
    pub(super) fn train_folds(
        &self,
        cfg: &PpoTrialConfig,
        input: &TrialInput<'_>,
        reporter: &mut Reporter<'_>,
        folds: &[Fold],
        device: &burn::tensor::Device,
    ) -> Result<f64, TrialError> {
        // Every fold's test blocks can be scored with this trial's lookback: refused before
        // any fold trains, not after the first one has.
        for fold in folds {
            for block in merge_adjacent(&fold.test) {
                EvalSplit::new("fold test", self.dataset.clone(), block, &cfg.env)
                    .steps()
                    .map_err(TrialError::failed)?;
            }
        }
        let mut done = Work::begin();
        let mut values = Vec::with_capacity(folds.len());
        for (i, fold) in folds.iter().enumerate() {
            // A fold's training bars may be several blocks (CPCV): they are joined, as
            // FinRL_Crypto indexes its arrays by the training indices, with each later block's
            // prices rescaled so that the step across a joint has a zero return (`select`).
            let scaled = self.fold_dataset(fold)?;
            let data = Arc::new(scaled.select(&fold.train));
            let run =
                TrainingRun::build(cfg, &data, 0..data.n_bars(), device, input.budget.as_ref())
                    .map_err(TrialError::failed)?;
            if i == 0 {
                for (key, value) in run.placement_attrs() {
                    reporter.set_user_attr(key, value);
                }
            }
            // Each fold's measuring, where the decision was not kept (the GPU cache off).
            done.add_placement(run.auto.as_ref());
            let at = (i, folds.len());
            let (value, returns) = self.fold_on(
                cfg,
                input,
                reporter,
                at,
                (fold, scaled),
                run.trainer,
                &mut done,
            )?;
            reporter.fold_returns(i as u64, &returns)?;
            values.push(value);
            // The last fold's value is reported, not judged: every fold has trained, and a
            // prune would only call the finished trial pruned.
            if i + 1 < folds.len() {
                reporter.report_and_check(i as u64, value)?;
            } else {
                reporter.report_last(i as u64, value)?;
            }
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        reporter.set_user_attr("objective", self.objective.name());
        reporter.set_user_attr("folds", values.len() as i64);
        reporter.set_user_attr("fold_std", std);
        reporter.set_user_attr("train_timesteps", done.samples as i64);
        // Over every fold's timed phases (evaluation included), as a hold-out trial's figure:
        // `auto`'s measuring before a fold trained is not training.
        let seconds = done.phases.total_s() - done.placement_s;
        if seconds > 0.0 {
            reporter.set_user_attr("train_samples_per_s", done.samples as f64 / seconds);
        }
        Ok(mean)
    }

    /// The whole dataset with its features scaled by a scaler fitted on `fold`'s training bars
    /// only, so that no statistic of the fold's test bars reaches its training or scoring (the
    /// study's dataset is scaled on the hold-out train split, which covers some folds' test
    /// bars). Without the unscaled features (a hold-out study), the study's dataset.
    pub(super) fn fold_dataset(&self, fold: &Fold) -> Result<Arc<Dataset>, TrialError> {
        let Some(unscaled) = &self.unscaled else {
            return Ok(self.dataset.clone());
        };
        let clip = self
            .dataset
            .scaler
            .as_ref()
            .map_or(FeatureScaler::DEFAULT_CLIP, |s| s.clip);
        let scaler = FeatureScaler::fit_ranges(unscaled, &fold.train).with_clip(clip);
        let mut features = (**unscaled).clone();
        scaler
            .try_apply(&mut features)
            .map_err(TrialError::failed)?;
        let d = &self.dataset;
        Ok(Arc::new(Dataset {
            names: d.names.clone(),
            timestamps: d.timestamps.clone(),
            prices: d.prices.clone(),
            features,
            feature_names: d.feature_names.clone(),
            scaler: Some(scaler),
        }))
    }

    /// One fold, `at` = (index, count): trains `trainer` (on the fold's training bars), then
    /// scores each contiguous block of the fold's test bars (on `scaled`, the whole dataset
    /// scaled for this fold, so each block's first observation window is its own bars). The fold's objective is the blocks'
    /// objectives weighted by their bars; the returns are the agent's and equal weight's
    /// per-bar simple returns over the blocks, in order.
    #[allow(clippy::too_many_arguments)]
    fn fold_on(
        &self,
        cfg: &PpoTrialConfig,
        input: &TrialInput<'_>,
        reporter: &mut Reporter<'_>,
        at: (usize, usize),
        (fold, scaled): (&Fold, Arc<Dataset>),
        mut trainer: Trainer<PlacedEnv>,
        done: &mut Work,
    ) -> Result<(f64, BarReturns), TrialError> {
        learn(&mut trainer, cfg, input, reporter, Some(at), done)?;
        let (mut weighted, mut bars) = (0.0, 0usize);
        let mut returns = Vec::new();
        for block in merge_adjacent(&fold.test) {
            let split = EvalSplit::new("fold test", scaled.clone(), block, &cfg.env);
            let r =
                evaluate_trainer(&trainer, &split, self.objective).map_err(TrialError::failed)?;
            weighted += r.objective * r.bars as f64;
            bars += r.bars;
            let ew = r.equal_weight_equity.windows(2);
            for ((w, e), t) in (r.agent_equity.windows(2).zip(ew)).zip(r.timestamps.iter().skip(1))
            {
                returns.push((*t, w[1] / w[0] - 1.0, e[1] / e[0] - 1.0));
            }
        }
        if bars == 0 {
            return Err(TrialError::Failed("a fold has no test bars".into()));
        }
        Ok((weighted / bars as f64, returns))
    }
}

/// A fold's out-of-sample bars: (bar time, the agent's return, equal weight's return).
type BarReturns = Vec<(i64, f64, f64)>;

/// Ranges with touching ends joined (`0..5, 5..9` is `0..9`).
pub(super) fn merge_adjacent(ranges: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for r in ranges {
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::{DataSection, EvaluationSection};
    use tradetune_market::split::SplitSpec;
    use tradetune_rl::eval::Objective;

    /// Review env44 finding 8: a study on data where one asset misses a week says so once,
    /// in its notes and in the data line `study run` prints, naming the asset and the gap.
    #[test]
    fn a_study_on_data_with_an_assets_long_gap_says_so() {
        use tradetune_market::synth::{self, SynthConfig};
        let mut bars = synth::generate(&SynthConfig {
            assets: 2,
            bars: 3_000,
            bar_seconds: 3_600,
            ..SynthConfig::default()
        })
        .unwrap();
        let a = &mut bars[0];
        let (name, from, to) = (a.name.clone(), a.timestamps[999], a.timestamps[1_168]);
        a.remove_bars(1_000..1_168);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gappy.csv");
        synth::write_long_csv(&path, &bars).unwrap();
        let data = DataSection {
            paths: vec![path],
            assets: Vec::new(),
        };
        let trial = PpoTrial::load(
            &data,
            &SplitSpec::default(),
            &PpoTrialConfig::default(),
            Objective::Sharpe,
        )
        .unwrap();
        assert_eq!(trial.notes.len(), 1, "{:?}", trial.notes);
        let expected = format!(
            "{name} has a gap longer than 10h in its bars of 1h, the longest 7d 1h from {} to {}",
            tradetune_market::time::format_timestamp(from),
            tradetune_market::time::format_timestamp(to)
        );
        assert!(trial.notes[0].contains(&expected), "{:?}", trial.notes);
        assert!(
            (trial.source).contains(&format!("; note: {}", trial.notes[0])),
            "{}",
            trial.source
        );
    }

    /// Each CPCV fold trains and scores on features scaled by a scaler fitted on its own
    /// training bars: the statistics are those of those bars of the unscaled features alone,
    /// not of the hold-out train split (which covers fold 0's test groups).
    #[test]
    fn a_fold_scales_with_statistics_of_its_training_bars_only() {
        let trial = PpoTrial::load(
            &DataSection::default(),
            &SplitSpec::default(),
            &PpoTrialConfig::default(),
            Objective::Sharpe,
        )
        .unwrap()
        .with_evaluation(&EvaluationSection::Cpcv {
            n_groups: 6,
            k_test: 2,
            purge_bars: 10,
            embargo_bars: 10,
        })
        .unwrap();
        let folds = trial.folds().unwrap().to_vec();
        let fold = &folds[0];
        assert_eq!(fold.groups, [0, 1]);
        let unscaled = trial.unscaled.clone().unwrap();
        let d = trial.fold_dataset(fold).unwrap();
        let scaler = d.scaler.clone().unwrap();
        assert_eq!(scaler.fitted_blocks(), fold.train);
        let rows: Vec<usize> = fold.train.iter().flat_map(|r| r.clone()).collect();
        let (_, m, f) = unscaled.dim();
        for a in 0..m {
            for k in 0..f {
                let v: Vec<f64> = rows.iter().map(|&i| unscaled[[i, a, k]] as f64).collect();
                let n = v.len() as f64;
                let mu = v.iter().sum::<f64>() / n;
                let sd = (v.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / n).sqrt();
                let tol = 1e-4 * (1.0 + mu.abs());
                assert!((scaler.mean[[a, k]] as f64 - mu).abs() < tol, "{a} {k}");
                assert!(
                    (scaler.std[[a, k]] as f64 - sd).abs() < 1e-4 * (1.0 + sd),
                    "{a} {k}"
                );
            }
        }
        // The study's dataset is scaled on the hold-out train split, not this fold's bars.
        assert_ne!(trial.dataset.scaler.as_ref().unwrap().mean, scaler.mean);
        // And the fold's features are the unscaled ones under its own scaler.
        let mut want = (*unscaled).clone();
        scaler.apply(&mut want);
        assert_eq!(d.features, want);
        assert_eq!(d.prices, trial.dataset.prices);
        // Its embargo of 10 is shorter than the features' memory: a note, not a refusal.
        assert_eq!(trial.notes.len(), 1, "{:?}", trial.notes);
        assert!(
            trial.notes[0].contains("embargo_bars = 10"),
            "{:?}",
            trial.notes
        );
        assert!(trial.source.contains(&trial.notes[0]));
    }

    /// An embargo covering the features' memory (warm-up + lookback − 1) gets no note.
    #[test]
    fn an_embargo_covering_the_features_memory_gets_no_note() {
        let base = PpoTrialConfig::default();
        let load = || {
            PpoTrial::load(
                &DataSection::default(),
                &SplitSpec::default(),
                &base,
                Objective::Sharpe,
            )
            .unwrap()
        };
        let memory = load().memory_bars;
        assert_eq!(memory, 49 + base.env.lookback - 1);
        let cv = |embargo_bars| EvaluationSection::Cpcv {
            n_groups: 4,
            k_test: 1,
            purge_bars: 0,
            embargo_bars,
        };
        assert!(
            load()
                .with_evaluation(&cv(memory))
                .unwrap()
                .notes
                .is_empty()
        );
        let short = load().with_evaluation(&cv(memory - 1)).unwrap();
        assert!(
            short.notes[0].contains("the first 1 training bars"),
            "{:?}",
            short.notes
        );

        // A searched lookback: the embargo is judged against the longest a trial can have.
        let mut space = crate::space::SearchSpace::new();
        space.add_int("env.lookback", 1, 64, false, 1).unwrap();
        let searched = load().searching(&space);
        assert_eq!(searched.memory_bars, 49 + 63);
        let covered_for_the_base = searched.with_evaluation(&cv(memory)).unwrap();
        assert!(
            covered_for_the_base.notes[0].contains("the 112 bars"),
            "{:?}",
            covered_for_the_base.notes
        );
        let mut choices = crate::space::SearchSpace::new();
        choices
            .add_categorical(
                "env.lookback",
                [4, 16]
                    .map(|v| crate::space::ParamValue::Int(v).into_choice())
                    .to_vec(),
            )
            .unwrap();
        assert_eq!(load().searching(&choices).memory_bars, 49 + 15);
        // Searching something else leaves the base configuration's.
        assert_eq!(
            load()
                .searching(&crate::space::SearchSpace::new())
                .memory_bars,
            memory
        );
    }
}
