//! `tradetune compare A B [--db FILE] [--json]`: two runs side by side — whole studies (`NAME`)
//! or single trials (`NAME#NUMBER`) — the "baseline vs experiment" table users make by hand:
//! duration, samples/s, complete/failed counts, mean and peak GPU utilisation and memory per
//! device, peak temperature, objective, and B's change against A.
//!
//! Everything comes from the study database: trial states, times and values from Optuna's
//! tables, samples/s from the trials' `samples_per_s` user attribute (the per-trial telemetry
//! summary), device figures from the `tradetune_telemetry` rows of the trials.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tradetune_engine::storage::Storage;

use tradetune_engine::front::compare::{load_side, table};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a study name, or `STUDY#N` for its trial number N.
    pub a: String,
    /// The experiment, in the same form.
    pub b: String,
    /// The study database: a SQLite file (Optuna's schema) or postgresql://user@host[:port]/dbname
    /// (password from ~/.pgpass or PGPASSWORD). Default: studies.db in the user data dir, as
    /// for `tradetune study`.
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
    pub db: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let db = match args.db {
        Some(db) => db,
        None => crate::launch::default_db()?,
    };
    crate::launch::require_db(&db)?;
    let storage = Storage::open_read_only(&db)
        .with_context(|| format!("opening {}", crate::launch::db_label(&db)))?;
    let a = load_side(&storage, &args.a)?;
    let b = load_side(&storage, &args.b)?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "a": a, "b": b }))?
        );
    } else {
        out!("{}", table(&a, &b));
    }
    Ok(())
}
