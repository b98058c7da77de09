//! `tradetune study reseed (FILE | --preset P | --name NAME) [--db DB] [--seeds K] [--json]`:
//! the study's best trial trained again with K other seeds, each backtested on the test split
//! beside equal weight; the spread is stored with the study and shown by `tradetune study
//! report`. The study file recorded with the study is used, as the app does; FILE or the preset
//! only name the study (unless `--name` does) and stand in for a study with none recorded.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tradetune_engine::front::min_median_max;
use tradetune_engine::front::reseed::{check_same_data, recorded_study_file, reseed};
use tradetune_engine::storage::Storage;

#[derive(Debug, Args)]
pub struct ReseedArgs {
    /// The study file: names the study (unless --name does); its data and split must be the
    /// recorded ones, and it is used only for a study that has no study file recorded.
    #[arg(conflicts_with = "preset", required_unless_present_any = ["preset", "name"])]
    pub file: Option<PathBuf>,
    /// A bundled preset instead of a file.
    #[arg(long)]
    pub preset: Option<String>,
    /// The study in the database (as `study run --name` named it).
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
    pub db: Option<PathBuf>,
    /// How many other seeds to train the best trial with.
    #[arg(long, default_value_t = 5)]
    pub seeds: usize,
    /// The spread as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ReseedArgs) -> anyhow::Result<()> {
    let given = super::StudyFileArgs {
        file: args.file.clone(),
        preset: args.preset.clone(),
    };
    let given = match (&args.file, &args.preset) {
        (None, None) => None,
        _ => Some(given.study_file()?),
    };
    let name = match (&args.name, &given) {
        (Some(n), _) => n.clone(),
        (None, Some(f)) => f.study.name.clone(),
        (None, None) => anyhow::bail!("give --name NAME, a study file or --preset NAME"),
    };
    let db = super::db_path(args.db)?;
    crate::launch::require_db(&db)?;
    let label = crate::launch::db_label(&db);
    let mut storage = Storage::open(&db).with_context(|| format!("opening {label}"))?;
    let what = || match (&args.file, &args.preset) {
        (Some(p), _) => p.display().to_string(),
        (None, Some(p)) => format!("--preset {p}"),
        (None, None) => String::new(),
    };
    let file = match recorded_study_file(&storage, &name)
        .with_context(|| format!("study '{name}' in {label}"))?
    {
        Some((recorded, _)) => {
            if let Some(f) = &given {
                check_same_data(&recorded, f, &what())?;
            }
            recorded
        }
        None => {
            let mut f = given.with_context(|| {
                format!(
                    "study '{name}' in {label} has no recorded study file: give the file or \
                     --preset it was run from"
                )
            })?;
            f.study.name = name.clone();
            f
        }
    };
    let json = args.json;
    let s = reseed(&mut storage, &file, args.seeds, |k, n| {
        if !json {
            errln!("seed {} of {n}…", k + 1);
        }
    })
    .with_context(|| format!("reseeding study '{}' in {label}", file.study.name))?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    outln!(
        "best trial #{} with {} other seeds, on the test split ({} bars):",
        s.trial,
        s.seeds.len(),
        s.bars
    );
    outln!("{:>8} {:>10} {:>14}", "seed", "sharpe", "total return");
    for r in &s.seeds {
        outln!(
            "{:>8} {:>10.3} {:>13.2} %",
            r.seed,
            r.sharpe,
            100.0 * r.total_return
        );
    }
    let sharpes: Vec<f64> = s.seeds.iter().map(|r| r.sharpe).collect();
    let returns: Vec<f64> = s.seeds.iter().map(|r| r.total_return).collect();
    if let (Some(a), Some(b)) = (min_median_max(&sharpes), min_median_max(&returns)) {
        outln!(
            "sharpe min/median/max {:.3} / {:.3} / {:.3}; total return {:.2} / {:.2} / {:.2} %",
            a.0,
            a.1,
            a.2,
            100.0 * b.0,
            100.0 * b.1,
            100.0 * b.2
        );
    }
    outln!(
        "equal weight: sharpe {:.3}, total return {:.2} %",
        s.equal_weight_sharpe,
        100.0 * s.equal_weight_total_return
    );
    Ok(())
}
