//! `tradetune study reseed (FILE | --preset P) [--db DB] [--seeds K] [--json]`: the study's best
//! trial trained again with K other seeds, each backtested on the test split beside equal
//! weight; the spread is stored with the study and shown by `tradetune study report`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tradetune_engine::front::min_median_max;
use tradetune_engine::front::reseed::reseed;
use tradetune_engine::storage::Storage;

#[derive(Debug, Args)]
pub struct ReseedArgs {
    #[command(flatten)]
    pub study: super::StudyFileArgs,
    #[arg(long, alias = "storage")]
    pub db: Option<PathBuf>,
    /// How many other seeds to train the best trial with.
    #[arg(long, default_value_t = 5)]
    pub seeds: usize,
    /// The spread as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ReseedArgs) -> anyhow::Result<()> {
    let file = args.study.study_file()?;
    let db = super::db_path(args.db)?;
    crate::launch::require_db(&db)?;
    let label = crate::launch::db_label(&db);
    let mut storage = Storage::open(&db).with_context(|| format!("opening {label}"))?;
    let json = args.json;
    let s = reseed(&mut storage, &file, args.seeds, |k, n| {
        if !json {
            eprintln!("seed {} of {n}…", k + 1);
        }
    })
    .with_context(|| format!("reseeding study '{}' in {label}", file.study.name))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "best trial #{} with {} other seeds, on the test split ({} bars):",
        s.trial,
        s.seeds.len(),
        s.bars
    );
    println!("{:>8} {:>10} {:>14}", "seed", "sharpe", "total return");
    for r in &s.seeds {
        println!(
            "{:>8} {:>10.3} {:>13.2} %",
            r.seed,
            r.sharpe,
            100.0 * r.total_return
        );
    }
    let sharpes: Vec<f64> = s.seeds.iter().map(|r| r.sharpe).collect();
    let returns: Vec<f64> = s.seeds.iter().map(|r| r.total_return).collect();
    if let (Some(a), Some(b)) = (min_median_max(&sharpes), min_median_max(&returns)) {
        println!(
            "sharpe min/median/max {:.3} / {:.3} / {:.3}; total return {:.2} / {:.2} / {:.2} %",
            a.0,
            a.1,
            a.2,
            100.0 * b.0,
            100.0 * b.1,
            100.0 * b.2
        );
    }
    println!(
        "equal weight: sharpe {:.3}, total return {:.2} %",
        s.equal_weight_sharpe,
        100.0 * s.equal_weight_total_return
    );
    Ok(())
}
