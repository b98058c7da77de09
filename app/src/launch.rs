//! Where this machine keeps a study's files, shared by the CLI and the desktop app: the default
//! database in the user's data directory, checkpoints beside the database (the engine's
//! [`StudyPlace`]), and how a database is named in messages. Launching the study itself is the
//! engine's front door (`tradetune_engine::front::launch`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use tradetune_engine::front::launch::StudyPlace;
use tradetune_engine::storage::{is_postgres_url, redact, same_database};

/// How a study database is named in messages: the path, or the PostgreSQL URL without its
/// password.
pub fn db_label(db: &Path) -> String {
    redact(&db.to_string_lossy())
}

/// Whether two names of a study database name one database: a SQLite file written two ways
/// (a relative and an absolute path, or through a link) is one file, and a PostgreSQL URL is
/// the same with or without its password or default port (nothing is looked up: this runs on
/// the UI thread).
pub fn same_db(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    let (sa, sb) = (a.to_string_lossy(), b.to_string_lossy());
    match (is_postgres_url(&sa), is_postgres_url(&sb)) {
        (true, true) => same_database(&sa, &sb),
        (false, false) => match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
        _ => false,
    }
}

/// A database to read must exist: a SQLite file is checked here (so a typo does not create an
/// empty file); a PostgreSQL database is checked by connecting.
pub fn require_db(db: &Path) -> anyhow::Result<()> {
    if is_postgres_url(&db.to_string_lossy()) {
        return Ok(());
    }
    anyhow::ensure!(
        !db.is_dir(),
        "{}: is a folder, not a study database: give the SQLite file in it (studies.db), or \
         postgresql://user@host[:port]/dbname",
        db.display()
    );
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

/// A study database as `--db` or `--storage` takes it: a SQLite file or
/// `postgresql://user@host[:port]/dbname`, and the forms Optuna users paste from their
/// scripts: `sqlite:///runs/a.db` is the file `runs/a.db` (`sqlite:////tmp/a.db` is
/// `/tmp/a.db`), and `postgresql+psycopg2://…` is `postgresql://…` (SQLAlchemy's driver name
/// dropped). Another scheme (`mysql://`) is refused by name, where it was taken for a file.
pub fn study_location(given: &str) -> Result<PathBuf, String> {
    if let Some(path) = given.strip_prefix("sqlite:///") {
        if path.is_empty() {
            return Err("sqlite:/// names no file: write sqlite:///runs/a.db, or the path".into());
        }
        return Ok(PathBuf::from(path));
    }
    if let Some((scheme, rest)) = given.split_once("://")
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    {
        let base = scheme.split('+').next().unwrap_or(scheme);
        if base == "postgresql" || base == "postgres" {
            return Ok(PathBuf::from(format!("postgresql://{rest}")));
        }
        return Err(format!(
            "{scheme}:// is not a storage TradeTune opens: give a SQLite file (a path, or \
             sqlite:///path) or postgresql://user@host[:port]/dbname"
        ));
    }
    Ok(PathBuf::from(given))
}

/// A study database as a field of the desktop app takes it: what [`study_location`] takes,
/// and a leading `~` or `~/` for the home directory, which a shell expands on the CLI's
/// command line but nothing expands in a text field.
pub fn field_location(given: &str) -> Result<PathBuf, String> {
    location_from_home(given, dirs::home_dir().as_deref())
}

/// [`field_location`] with the home directory `home` (None: unknown). `~user/…` (another
/// user's home) is refused rather than taken for a file named `~user`.
fn location_from_home(given: &str, home: Option<&Path>) -> Result<PathBuf, String> {
    let Some(rest) = given.strip_prefix('~') else {
        return study_location(given);
    };
    let rest = match rest.strip_prefix('/') {
        Some(rest) => rest.trim_start_matches('/'),
        None if rest.is_empty() => "",
        None => {
            return Err(format!(
                "{given}: only ~ and ~/… (your home directory) are expanded here, not another \
                 user's ~name: write the path in full"
            ));
        }
    };
    let home = home.ok_or_else(|| {
        format!(
            "{given}: ~ stands for your home directory, which is unknown here (HOME is not \
             set): write the path in full"
        )
    })?;
    Ok(if rest.is_empty() {
        home.to_path_buf()
    } else {
        home.join(rest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optuna_storage_urls_name_the_same_databases() {
        let loc = |s: &str| study_location(s).map(|p| p.display().to_string());
        assert_eq!(loc("runs/a.db").unwrap(), "runs/a.db");
        assert_eq!(loc("sqlite:///runs/a.db").unwrap(), "runs/a.db");
        assert_eq!(loc("sqlite:////tmp/a.db").unwrap(), "/tmp/a.db");
        assert_eq!(
            loc("postgresql+psycopg2://u@h:5432/d").unwrap(),
            "postgresql://u@h:5432/d"
        );
        assert_eq!(loc("postgres://u@h/d").unwrap(), "postgresql://u@h/d");
        assert!(
            loc("mysql://u@h/d")
                .unwrap_err()
                .contains("mysql:// is not a storage")
        );
        assert!(loc("sqlite:///").is_err());
    }

    /// A field's leading `~` or `~/` is the home directory; another user's `~name` and a `~`
    /// with no home directory known are refused, saying why; a `~` further on is left alone.
    #[test]
    fn a_fields_leading_tilde_is_the_home_directory() {
        let home = Path::new("/home/me");
        let loc = |s: &str| location_from_home(s, Some(home));
        assert_eq!(loc("~/runs/a.db"), Ok(PathBuf::from("/home/me/runs/a.db")));
        assert_eq!(loc("~//a.db"), Ok(PathBuf::from("/home/me/a.db")));
        assert_eq!(loc("~"), Ok(PathBuf::from("/home/me")));
        assert_eq!(loc("runs/~/a.db"), Ok(PathBuf::from("runs/~/a.db")));
        assert_eq!(loc("sqlite:///tmp/a.db"), Ok(PathBuf::from("tmp/a.db")));
        let other = loc("~bob/a.db").unwrap_err();
        assert!(other.contains("not another user's ~name"), "{other}");
        let unknown = location_from_home("~/a.db", None).unwrap_err();
        assert!(
            unknown.starts_with("~/a.db: ") && unknown.contains("HOME is not set"),
            "{unknown}"
        );
        assert_eq!(
            location_from_home("/tmp/a.db", None),
            Ok(PathBuf::from("/tmp/a.db"))
        );
    }

    /// One SQLite file named relatively and absolutely is one database; two files are two;
    /// a PostgreSQL URL is one with or without its password, its default port or the short
    /// scheme, and never a file.
    #[test]
    fn one_database_written_two_ways_is_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("studies.db");
        std::fs::write(&file, b"").unwrap();
        std::fs::write(dir.path().join("other.db"), b"").unwrap();
        let roundabout = dir.path().join(".").join("studies.db");
        assert!(same_db(&file, &roundabout));
        assert!(!same_db(&file, &dir.path().join("other.db")));
        assert!(!same_db(&file, &dir.path().join("missing.db")));
        let pg = Path::new("postgresql://me:secret@db.local:5432/studies");
        assert!(same_db(pg, Path::new("postgres://me@db.local/studies")));
        assert!(!same_db(pg, Path::new("postgresql://me@db.local/others")));
        assert!(!same_db(
            pg,
            Path::new("postgresql://me@db.local:5433/studies")
        ));
        assert!(!same_db(
            pg,
            Path::new("postgresql://me@db.local/studies?options=-csearch_path%3Dother")
        ));
        assert!(!same_db(pg, &file));
    }
}
