//! `tradetune study note NAME [--trial N] [--set TEXT | --file FILE]`: read or write the note
//! of a study or of one of its trials, stored where optuna-dashboard keeps notes
//! (`tradetune_study::notes`), so either tool shows what the other wrote.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tradetune_engine::storage::Storage;
use tradetune_engine::study::notes::{read_note, save_note};

#[derive(Debug, Args)]
pub struct NoteArgs {
    /// The study's name.
    pub name: String,
    /// The note of this trial (its number) instead of the study's.
    #[arg(long)]
    pub trial: Option<i64>,
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
    pub db: Option<PathBuf>,
    /// Save this text (Markdown) as the note.
    #[arg(long, value_name = "TEXT", conflicts_with = "file")]
    pub set: Option<String>,
    /// Save this file's text (Markdown) as the note.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The note (version and body) as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: NoteArgs) -> anyhow::Result<()> {
    let db = super::db_path(args.db)?;
    crate::launch::require_db(&db)?;
    let body = match (&args.set, &args.file) {
        (Some(text), _) => Some(text.clone()),
        (None, Some(path)) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        (None, None) => None,
    };
    let whose = match args.trial {
        Some(n) => format!("trial {n} of '{}'", args.name),
        None => format!("study '{}'", args.name),
    };
    let note = match body {
        Some(body) => {
            let mut storage = Storage::open(&db)?;
            let note = save_note(&mut storage, &args.name, args.trial, &body, None)?;
            if !args.json {
                outln!("saved the note of {whose} (version {})", note.version);
                return Ok(());
            }
            note
        }
        None => read_note(&Storage::open_read_only(&db)?, &args.name, args.trial)?,
    };
    if args.json {
        let v = serde_json::json!({
            "study": args.name,
            "trial": args.trial,
            "version": note.version,
            "body": note.body,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else if note.version == 0 {
        errln!("no note on {whose}");
    } else {
        outln!("{}", note.body);
    }
    Ok(())
}
