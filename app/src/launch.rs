//! Where this machine keeps a study's files, shared by the CLI and the desktop app: the default
//! database in the user's data directory, checkpoints beside the database (the engine's
//! [`StudyPlace`]), and how a database is named in messages. Launching the study itself is the
//! engine's front door (`tradetune_engine::front::launch`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use tradetune_engine::front::launch::StudyPlace;
use tradetune_engine::storage::{is_postgres_url, redact};

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

/// The user's data directory for TradeTune (`~/.local/share/tradetune` on Linux), created.
fn data_home() -> anyhow::Result<PathBuf> {
    let dir = dirs::data_dir()
        .context("no user data directory (HOME unset?); pass --db FILE")?
        .join("tradetune");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// `studies.db` in the user's data directory (`~/.local/share/tradetune` on Linux).
pub fn default_db() -> anyhow::Result<PathBuf> {
    Ok(data_home()?.join("studies.db"))
}

/// The study database `db` and where its trials' checkpoints go: beside a SQLite database,
/// under the user data directory for a PostgreSQL one.
pub fn place(db: PathBuf) -> anyhow::Result<StudyPlace> {
    let home = if is_postgres_url(&db.to_string_lossy()) {
        Some(data_home()?)
    } else {
        None
    };
    Ok(StudyPlace::new(db, home.as_deref())?)
}
