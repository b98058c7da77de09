//! The Backtest and Compare panels' jobs and what they answer: a checkpoint's backtest with
//! its equity curves, and two studies or trials side by side.

use std::path::{Path, PathBuf};

use tradetune_engine::device::DeviceSpec;
use tradetune_engine::eval::EvalReport;
use tradetune_engine::front::backtest::{self, SplitPart};
use tradetune_engine::storage::Storage;

use super::{Jobs, TaskEvent};

/// A backtest as shown: the text parts and the two equity curves.
#[derive(Debug, Clone, PartialEq)]
pub struct BacktestResult {
    /// Checkpoint, samples, split and data, for people.
    pub about: String,
    /// The metrics table.
    pub table: String,
    /// (days since the first bar, equity) of the agent.
    pub agent: Vec<[f64; 2]>,
    /// The same for equal weight.
    pub equal_weight: Vec<[f64; 2]>,
}

impl BacktestResult {
    /// The panel's view of `report`, introduced by `about`.
    pub fn of(about: String, report: &EvalReport) -> BacktestResult {
        let t0 = report.timestamps.first().copied().unwrap_or(0);
        let curve = |equity: &[f64]| -> Vec<[f64; 2]> {
            report
                .timestamps
                .iter()
                .zip(equity)
                .map(|(&t, &e)| [(t - t0) as f64 / 86_400.0, e])
                .collect()
        };
        BacktestResult {
            about,
            table: tradetune_engine::front::backtest::table(report),
            agent: curve(&report.agent_equity),
            equal_weight: curve(&report.equal_weight_equity),
        }
    }
}

/// A comparison as computed: the table and each side's values by trial number.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Side A as typed.
    pub a: String,
    /// Side B as typed.
    pub b: String,
    /// The side-by-side table (as `tradetune compare` prints it).
    pub table: String,
    /// (trial number, value) of A's complete trials.
    pub a_values: Vec<[f64; 2]>,
    /// Same for B.
    pub b_values: Vec<[f64; 2]>,
}

impl Jobs {
    /// Backtests the checkpoint `dir` on `split` (on the CPU device), for the Backtest panel's
    /// `request`.
    pub fn backtest(&self, dir: PathBuf, split: String, request: u64) {
        let lost = move |why| TaskEvent::Backtested {
            request,
            result: Err(why),
        };
        self.spawn("backtest", lost, move |reply| {
            let result = backtest(&dir, &split)
                .map(Box::new)
                .map_err(|e| crate::out::error_text(&e));
            reply.send(TaskEvent::Backtested { request, result });
        });
    }

    /// Compares `a` and `b` (`study` or `study#N`) of the database `db`.
    pub fn compare(&self, db: PathBuf, a: String, b: String) {
        let lost = |why| TaskEvent::Compared(Err(why));
        self.spawn("compare", lost, move |reply| {
            let result = compare(&db, &a, &b)
                .map(Box::new)
                .map_err(|e| crate::out::error_text(&e));
            reply.send(TaskEvent::Compared(result));
        });
    }
}

fn backtest(dir: &Path, split: &str) -> anyhow::Result<BacktestResult> {
    let split: SplitPart = split.parse().map_err(anyhow::Error::msg)?;
    // Scored by the objective the run was (a study trial's, `train --objective`'s), as the
    // study report scores it; the default for a checkpoint that records none.
    let objective = backtest::recorded_objective(dir).unwrap_or_default();
    let b = backtest::backtest(dir, split, &[], objective, DeviceSpec::Cpu)?;
    let r = &b.report;
    let about = format!(
        "{} ({} samples) on {}: {} split, {} bars",
        dir.display(),
        b.timesteps,
        b.about,
        r.split,
        r.bars
    );
    Ok(BacktestResult::of(about, r))
}

fn compare(db: &Path, a: &str, b: &str) -> anyhow::Result<Comparison> {
    use tradetune_engine::front::compare::{load_side, table};
    let storage = Storage::open_read_only(db)?;
    let side_a = load_side(&storage, a)?;
    let side_b = load_side(&storage, b)?;
    let points = |values: &[(i64, f64)]| -> Vec<[f64; 2]> {
        values.iter().map(|&(n, v)| [n as f64, v]).collect()
    };
    Ok(Comparison {
        a: a.to_owned(),
        b: b.to_owned(),
        table: table(&side_a, &side_b),
        a_values: points(&side_a.values),
        b_values: points(&side_b.values),
    })
}
