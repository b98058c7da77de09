//! A hold-out PPO trial: one policy trained on the train bars, evaluated on the validation
//! split every `train.eval_every` updates (each an intermediate value for the pruner), scored
//! by its evaluation after the last update, and saved as a checkpoint when the study keeps
//! them.

use super::learn::{Work, learn};
use super::{PpoTrial, PpoTrialConfig, TrainingRun};
use crate::runner::{Reporter, TrialError, TrialInput};
use tradetune_env::EnvConfig;
use tradetune_rl::eval::EvalSplit;
use tradetune_rl::ppo::{PeriodicEval, RolloutEnv, Trainer, evaluate_trainer};

impl PpoTrial {
    /// Trains on the train bars (on `device`) with the periodic validation evaluations as
    /// intermediate values, and scores the trial on the validation split.
    pub(super) fn train_holdout(
        &self,
        cfg: &PpoTrialConfig,
        input: &TrialInput<'_>,
        reporter: &mut Reporter<'_>,
        device: &burn::tensor::Device,
    ) -> Result<f64, TrialError> {
        let split = EvalSplit::new(
            "validation",
            self.dataset.clone(),
            self.validation.clone(),
            &cfg.env,
        );
        // Refused before training where this trial's lookback leaves the split too few bars.
        split.steps().map_err(TrialError::failed)?;
        let mut done = Work::begin();
        let run = TrainingRun::build(
            cfg,
            &self.dataset,
            self.train.clone(),
            device,
            input.budget.as_ref(),
        )
        .map_err(TrialError::failed)?;
        for (key, value) in run.placement_attrs() {
            reporter.set_user_attr(key, value);
        }
        done.add_placement(run.auto.as_ref());
        let mut trainer = run.trainer;
        if cfg.train.eval_every > 0 {
            trainer = trainer
                .with_evaluation(PeriodicEval {
                    every: cfg.train.eval_every,
                    split: split.clone(),
                    objective: self.objective,
                })
                .map_err(TrialError::failed)?;
        }
        let report = learn(&mut trainer, cfg, input, reporter, None, &mut done)?;
        // The value is the policy after the last update: reuse the periodic evaluation when it
        // fell on that update, else evaluate now.
        let last = match report.last_evaluation {
            Some(e)
                if cfg.train.eval_every > 0
                    && report.updates.is_multiple_of(cfg.train.eval_every) =>
            {
                e
            }
            _ => {
                let e = evaluate_trainer(&trainer, &split, self.objective)
                    .map_err(TrialError::failed)?
                    .summary();
                // Reported, not judged: the trial trained in full (see `learn`).
                reporter.report_last(report.updates as u64, e.objective)?;
                e
            }
        };
        reporter.set_user_attr("objective", self.objective.name());
        reporter.set_user_attr("val_total_return", last.agent.total_return);
        reporter.set_user_attr("val_sharpe", last.agent.sharpe);
        reporter.set_user_attr("val_max_drawdown", last.agent.max_drawdown);
        reporter.set_user_attr(
            "val_equal_weight_total_return",
            last.equal_weight.total_return,
        );
        reporter.set_user_attr("val_equal_weight_sharpe", last.equal_weight.sharpe);
        reporter.set_user_attr("train_timesteps", report.timesteps as i64);
        reporter.set_user_attr("train_samples_per_s", report.samples_per_second);
        if let Some(root) = &self.checkpoints {
            let dir = root.join(format!("trial_{}", input.number));
            save_checkpoint(&dir, &trainer, &cfg.env, self.data_record())?;
            reporter.set_user_attr("checkpoint", dir.display().to_string());
        }
        Ok(last.objective)
    }
}

/// The trainer's checkpoint plus the environment and the data source, as `tradetune train`
/// writes them (`env.json`; `data.json` = the study's files, assets and split, the fields of
/// `front::data_source::DataSource`), all written before any replaces the files of a previous
/// save (see [`tradetune_rl::ppo::checkpoint::save_with`]).
fn save_checkpoint<E: RolloutEnv>(
    dir: &std::path::Path,
    trainer: &Trainer<E>,
    env: &EnvConfig,
    data: serde_json::Value,
) -> Result<(), TrialError> {
    let env = serde_json::to_vec_pretty(env).map_err(TrialError::failed)?;
    let data = serde_json::to_vec_pretty(&data).map_err(TrialError::failed)?;
    tradetune_rl::ppo::checkpoint::save_with(
        dir,
        trainer,
        &[("env.json", env), ("data.json", data)],
    )
    .map_err(TrialError::failed)
}
