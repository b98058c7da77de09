//! A checkpoint's deterministic policy over a held-out split, against the equal-weight
//! buy-and-hold: `tradetune backtest` prints it, the app's Backtest tab shows it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use tradetune_engine::device::{DeviceSpec, open};
use tradetune_engine::env::EnvConfig;
use tradetune_engine::eval::{EvalReport, EvalSplit, Objective};
use tradetune_engine::ppo::checkpoint;
use tradetune_engine::ppo::evaluate_policy;

use crate::ops::data_source::{DATA_FILE, DataSource, ENV_FILE};

/// A checkpoint file that must exist, or an error naming it.
fn required(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    anyhow::ensure!(
        path.is_file(),
        "checkpoint {}: {} is missing (is this a directory written by `tradetune train --out`?)",
        dir.display(),
        path.display()
    );
    Ok(path)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A backtest's result: the report, the checkpoint's sample count, and the data it ran on.
pub struct Backtest {
    /// Metrics, objective and equity curves.
    pub report: EvalReport,
    /// Samples the checkpoint was trained on.
    pub timesteps: usize,
    /// The data, for people.
    pub about: String,
}

/// Evaluates the checkpoint in `dir` on `split` (test, validation/val, train), on the data it
/// was trained on or on `data`; errors name the missing or corrupt file.
pub fn backtest(
    dir: &Path,
    split: &str,
    data: &[PathBuf],
    objective: Objective,
    device: &str,
) -> anyhow::Result<Backtest> {
    anyhow::ensure!(
        dir.is_dir(),
        "checkpoint directory {} does not exist",
        dir.display()
    );
    for name in ["model.bpk", "ppo.json", "state.json"] {
        required(dir, name)?;
    }
    let env: EnvConfig = read_json(&required(dir, ENV_FILE)?)?;
    let source = if data.is_empty() {
        read_json(&required(dir, DATA_FILE)?)?
    } else {
        DataSource::new(data, None)?
    };
    let spec: DeviceSpec = device.parse()?;
    let device = open(spec)?;
    let ckpt = checkpoint::load(dir, &device)?;
    let loaded = source.load(&env)?;
    let (name, range) = match split {
        "test" => ("test", loaded.split.test.clone()),
        "validation" | "val" => ("validation", loaded.split.validation.clone()),
        "train" => ("train", loaded.split.train.clone()),
        other => anyhow::bail!("--split {other}: use test, validation (val) or train"),
    };
    let eval_split = EvalSplit::new(name, loaded.dataset.clone(), range, &env);
    let report = evaluate_policy(
        &ckpt.model,
        &ckpt.state.normalization,
        &ckpt.config,
        &eval_split,
        objective,
    )
    .with_context(|| format!("backtesting {}", dir.display()))?;
    Ok(Backtest {
        report,
        timesteps: ckpt.state.timesteps,
        about: loaded.about,
    })
}

/// The metrics of agent and equal weight side by side, and the objective.
pub fn table(r: &EvalReport) -> String {
    let (a, e) = (&r.agent, &r.equal_weight);
    let pct = |v: f64| format!("{:.2} %", 100.0 * v);
    let num = |v: f64| format!("{v:.3}");
    let rows = [
        ("total return", pct(a.total_return), pct(e.total_return)),
        ("sharpe", num(a.sharpe), num(e.sharpe)),
        ("sortino", num(a.sortino), num(e.sortino)),
        ("max drawdown", pct(a.max_drawdown), pct(e.max_drawdown)),
        ("volatility", pct(a.volatility), pct(e.volatility)),
        ("turnover", num(a.turnover), num(e.turnover)),
        (
            "fees paid",
            format!("{:.2}", a.fees_paid),
            format!("{:.2}", e.fees_paid),
        ),
    ];
    let mut s = format!("{:<14} {:>14} {:>14}\n", "", "agent", "equal weight");
    for (name, x, y) in rows {
        s += &format!("{name:<14} {x:>14} {y:>14}\n");
    }
    s += &format!("objective {} = {:.4}\n", r.objective_name, r.objective);
    s
}
