//! `tradetune study report NAME [--json]`: the best trial with its folds, the probability of
//! backtest overfitting over the trials' out-of-sample returns and the best trial's deflated
//! Sharpe ratio (the engine's `front::report`).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use tradetune_engine::eval::pbo;
use tradetune_engine::front::report::study_report;
use tradetune_engine::storage::Storage;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The study's name.
    pub name: String,
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
    pub db: Option<PathBuf>,
    /// Partitions S of the PBO's combinatorially symmetric cross-validation (even).
    #[arg(long, default_value_t = 16)]
    pub partitions: usize,
    /// The report as JSON, at full precision.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    // A partition count CSCV cannot use is the user's to mend, not a PBO "not available".
    pbo::check_partitions(args.partitions).context("--partitions")?;
    let db = super::db_path(args.db)?;
    crate::launch::require_db(&db)?;
    let storage = Storage::open_read_only(&db)?;
    let report = study_report(&storage, &args.name, args.partitions)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", report.text());
    }
    Ok(())
}
