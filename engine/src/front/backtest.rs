//! A checkpoint's deterministic policy over a held-out split, against the equal-weight
//! buy-and-hold: `tradetune backtest` prints it, the app's Backtest tab shows it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::data_source::{DATA_FILE, DataSource, ENV_FILE};
use super::{FrontError, read_json};
use crate::device::{DeviceSpec, open};
use crate::env::EnvConfig;
use crate::eval::{EvalReport, EvalSplit, Objective};
use crate::ppo::{checkpoint, evaluate_policy};

/// Which part of the data a backtest runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SplitPart {
    /// The held-out test split (the default: what nothing was tuned on).
    #[default]
    Test,
    /// The validation split (what a study's trials were scored on).
    Validation,
    /// The training split.
    Train,
}

impl SplitPart {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            SplitPart::Test => "test",
            SplitPart::Validation => "validation",
            SplitPart::Train => "train",
        }
    }
}

impl fmt::Display for SplitPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SplitPart {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "test" => Ok(SplitPart::Test),
            "validation" | "val" => Ok(SplitPart::Validation),
            "train" => Ok(SplitPart::Train),
            other => Err(format!(
                "unknown split '{other}': test, validation (val) or train"
            )),
        }
    }
}

/// A checkpoint file that must exist, or an error naming it.
fn required(dir: &Path, name: &str) -> Result<PathBuf, FrontError> {
    let path = dir.join(name);
    if !path.is_file() {
        return Err(FrontError::file(
            &path,
            format!(
                "missing from checkpoint {} (is it a directory written by training?)",
                dir.display()
            ),
        ));
    }
    Ok(path)
}

/// The objective the checkpoint in `dir` was scored by, as its `data.json` records it (None
/// for a checkpoint that records none, or none that can be read): what the app's Backtest tab
/// scores it by, as the study report does.
pub fn recorded_objective(dir: &Path) -> Option<Objective> {
    read_json::<DataSource>(&dir.join(DATA_FILE))
        .ok()
        .and_then(|d| d.objective)
}

/// A backtest's result: the report, the checkpoint's sample count, and the data it ran on.
pub struct Backtest {
    /// Metrics, objective and equity curves.
    pub report: EvalReport,
    /// Samples the checkpoint was trained on.
    pub timesteps: usize,
    /// The data, for people, with the notes after it.
    pub about: String,
    /// What people should know about the data (that it changed since training and how it was
    /// cut, or that an older checkpoint's cannot be checked), one line each; also in `about`.
    pub notes: Vec<String>,
}

/// Evaluates the checkpoint in `dir` on `split`, on the data it was trained on or on `data`,
/// on `device`; errors name the missing or corrupt file.
pub fn backtest(
    dir: &Path,
    split: SplitPart,
    data: &[PathBuf],
    objective: Objective,
    device: DeviceSpec,
) -> Result<Backtest, FrontError> {
    if !dir.is_dir() {
        return Err(FrontError::file(
            dir,
            "no such checkpoint directory: it does not exist",
        ));
    }
    for name in ["model.bpk", "ppo.json", "state.json"] {
        required(dir, name)?;
    }
    let env: EnvConfig = read_json(&required(dir, ENV_FILE)?)?;
    let (recorded, source): (DataSource, DataSource) = if data.is_empty() {
        let r: DataSource = read_json(&required(dir, DATA_FILE)?)?;
        (r.clone(), r)
    } else {
        // Other files, cut as the run's were: its split and, when it kept some, its assets.
        let recorded: DataSource = match dir.join(DATA_FILE) {
            p if p.is_file() => read_json(&p)?,
            _ => DataSource::default(),
        };
        let source = DataSource {
            assets: recorded.assets.clone(),
            split: recorded.split.clone(),
            ..DataSource::new(data, None)?
        };
        (recorded, source)
    };
    let device = open(device)?;
    let ckpt = checkpoint::load(dir, &device)?;
    let loaded = if data.is_empty() {
        // The data it trained on: cut at the recorded dates where the files changed since.
        source.load_recorded(&env, &dir.join(DATA_FILE), &[split.name()])?
    } else {
        let loaded = source.load(&env)?;
        let files: Vec<String> = data.iter().map(|p| p.display().to_string()).collect();
        recorded.check_names(&loaded, &format!("--data {}", files.join(" ")))?;
        loaded
    };
    let range = match split {
        SplitPart::Test => loaded.split.test.clone(),
        SplitPart::Validation => loaded.split.validation.clone(),
        SplitPart::Train => loaded.split.train.clone(),
    };
    let eval_split = EvalSplit::new(split.name(), loaded.dataset.clone(), range, &env);
    let report = evaluate_policy(
        &ckpt.model,
        &ckpt.state.normalization,
        &ckpt.config,
        &eval_split,
        objective,
    )?;
    let mut about = loaded.about;
    for note in &loaded.notes {
        about = format!("{about}; note: {note}");
    }
    Ok(Backtest {
        report,
        timesteps: ckpt.state.timesteps,
        about,
        notes: loaded.notes,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_names_read_back_and_unknown_ones_list_the_valid_ones() {
        for p in [SplitPart::Test, SplitPart::Validation, SplitPart::Train] {
            assert_eq!(p.name().parse::<SplitPart>(), Ok(p));
        }
        assert_eq!("val".parse::<SplitPart>(), Ok(SplitPart::Validation));
        let e = "holdout".parse::<SplitPart>().unwrap_err();
        assert!(e.contains("test, validation (val) or train"), "{e}");
    }
}
