//! `tradetune study speed (FILE | --preset P) [--db DB] [--trials N,…] [--limit K] [--json]`:
//! each trial's training samples/s as it ran in the study against its configuration's alone on
//! this machine (measured now), and the likely cause of a gap with its fix.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tradetune_engine::front::speed::{SLOW_RATIO, WINDOWS, speed};
use tradetune_engine::storage::Storage;

#[derive(Debug, Args)]
pub struct SpeedArgs {
    #[command(flatten)]
    pub study: super::StudyFileArgs,
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
    pub db: Option<PathBuf>,
    /// Trial numbers to measure, comma-separated (default: the --limit most recent COMPLETE
    /// trials).
    #[arg(long, value_delimiter = ',')]
    pub trials: Option<Vec<i64>>,
    /// How many of the most recent trials to measure when --trials is not given.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Timed updates per configuration (after one warm-up update).
    #[arg(long, default_value_t = 2)]
    pub updates: usize,
    /// The figures as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SpeedArgs) -> anyhow::Result<()> {
    // Before anything is read: 0 was measured as 1 (--limit), or refused without the flag's
    // name (--updates).
    anyhow::ensure!(args.limit >= 1, "--limit: must be at least 1, got 0");
    anyhow::ensure!(args.updates >= 1, "--updates: must be at least 1, got 0");
    let file = args.study.study_file()?;
    let db = super::db_path(args.db)?;
    crate::launch::require_db(&db)?;
    let label = crate::launch::db_label(&db);
    let storage = Storage::open_read_only(&db).with_context(|| format!("opening {label}"))?;
    let json = args.json;
    let r = speed(
        &storage,
        &file,
        args.trials.as_deref(),
        args.limit,
        args.updates,
        |k, n| {
            if !json {
                errln!("measuring configuration {} of {n} alone…", k + 1);
            }
        },
    )
    .with_context(|| format!("measuring study '{}' in {label}", file.study.name))?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    if let Some(load) = r.load_average.filter(|&l| l > 0.75 * r.cores as f64) {
        errln!(
            "note: this machine was busy as measuring began (load average {load:.1} on {} \
             cores): the figures alone may be low; measure on an otherwise idle machine",
            r.cores
        );
    }
    outln!(
        "study '{}': training samples/s achieved in the study against the same configuration \
         alone on this machine ({} cores; alone: the median of {WINDOWS} windows of at least {} \
         timed updates, after a warm-up)",
        r.study,
        r.cores,
        r.updates
    );
    outln!(
        "{:>6} {:>14} {:>10} {:>12} {:>12} {:>7} {:>9}",
        "trial",
        "worker",
        "device",
        "achieved",
        "alone",
        "ratio",
        "at once"
    );
    for t in &r.trials {
        let fmt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
        outln!(
            "{:>6} {:>14} {:>10} {:>12.0} {:>12} {:>7} {:>9}",
            t.number,
            t.worker.as_deref().unwrap_or("-"),
            t.device,
            t.achieved,
            fmt(t.predicted),
            t.ratio.map_or("-".to_owned(), |r| format!("{r:.2}")),
            t.concurrent
        );
        match &t.alone {
            Some(a) if a.high > a.low => outln!(
                "{:>6} {}; alone {:.0} to {:.0} over windows of {} updates",
                "",
                t.configuration,
                a.low,
                a.high,
                a.updates_per_window
            ),
            _ => outln!("{:>6} {}", "", t.configuration),
        }
        for c in &t.causes {
            outln!("{:>6} - {c}", "");
        }
    }
    let slow = r
        .trials
        .iter()
        .filter(|t| t.ratio.is_some_and(|x| x < SLOW_RATIO))
        .count();
    outln!(
        "{slow} of {} trials below {:.0} % of their configuration's speed alone",
        r.trials.len(),
        SLOW_RATIO * 100.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(limit: usize, updates: usize) -> SpeedArgs {
        SpeedArgs {
            study: crate::cli::study::StudyFileArgs {
                file: None,
                preset: Some("cpu".into()),
            },
            db: Some(PathBuf::from("/nonexistent/tradetune-speed-test.db")),
            trials: None,
            limit,
            updates,
            json: true,
        }
    }

    /// `--limit 0` was measured as 1 without a word, and `--updates 0`'s error did not name
    /// the flag: each is refused naming it, before the study is read.
    #[test]
    fn a_zero_limit_or_updates_is_refused_naming_the_flag() {
        let e = run(args(0, 2)).expect_err("refused").to_string();
        assert!(e.contains("--limit"), "{e}");
        let e = run(args(10, 0)).expect_err("refused").to_string();
        assert!(e.contains("--updates"), "{e}");
    }
}
