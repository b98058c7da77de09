//! Where this machine keeps a study's files, shared by the CLI and the desktop app: the default
//! database in the user's data directory, checkpoints beside the database, and how a database
//! is named in messages. Running the study itself is the engine's front door
//! (`tradetune_engine::front::study_run`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use tradetune_engine::front::study_run::{self, Prepared};
use tradetune_engine::storage::{is_postgres_url, redact};
use tradetune_engine::study::file::StudyFile;
use tradetune_engine::study::runner::RunnerConfig;

/// How a study database is named in messages: the path, or the PostgreSQL URL without its
/// password.
pub fn db_label(db: &Path) -> String {
    redact(&db.to_string_lossy())
}

/// A database to read must exist: a SQLite file is checked here (so a typo does not create an
/// empty file); a PostgreSQL database is checked by connecting.
pub fn require_db(db: &Path) -> anyhow::Result<()> {
    if is_postgres_url(&db.to_string_lossy()) {
        return Ok(());
    }
    anyhow::ensure!(
        db.is_file(),
        "{}: no such study database: the file does not exist (give a SQLite file, or \
         postgresql://user@host[:port]/dbname)",
        db.display()
    );
    Ok(())
}

/// `studies.db` in the user's data directory (`~/.local/share/tradetune` on Linux).
pub fn default_db() -> anyhow::Result<PathBuf> {
    let dir = dirs::data_dir()
        .context("no user data directory (HOME unset?); pass --db FILE")?
        .join("tradetune");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.join("studies.db"))
}

/// Where a study's trial checkpoints go: beside a SQLite database, or under the user data
/// directory for a PostgreSQL one (each machine keeps the checkpoints of the trials it ran).
pub fn checkpoint_root(db: &Path) -> anyhow::Result<PathBuf> {
    if is_postgres_url(&db.to_string_lossy()) {
        let dir = default_db()?;
        return Ok(dir.parent().unwrap_or(Path::new(".")).join("checkpoints"));
    }
    Ok(db.parent().unwrap_or(Path::new(".")).join("checkpoints"))
}

/// A runner for `file` with the settings `rc`, its data loaded, keeping each COMPLETE trial's
/// policy under [`checkpoint_root`] of the study's database.
pub fn prepare(file: &StudyFile, rc: RunnerConfig) -> anyhow::Result<Prepared> {
    let checkpoints = checkpoint_root(&rc.storage)?;
    Ok(study_run::prepare(file, rc, &checkpoints)?)
}
