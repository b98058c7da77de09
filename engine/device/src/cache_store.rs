//! Whether the GPU cache's store of autotune answers can be used, checked once per process
//! before cubecl first reads or writes it (issue 32: "keep what can be kept").
//!
//! cubecl keeps its autotune answers in one database file per environment
//! (`<gpu-cache>/<environment>.db`, its `persistence` feature). Where it cannot open that
//! file (bytes that are not a database, a file cut short by a full disk or a copy stopped
//! halfway, a directory nobody may write) it logs a warning nobody sees and keeps the answers
//! in memory: every later process autotunes the same shapes again, which on a new
//! configuration is most of its compile time, and TradeTune said "a next run autotunes
//! nothing". Measured on lavapipe (2026-11-30, `tradetune train --device wgpu:cpu`, [48]
//! nets): a store overwritten with other bytes, or cut to its first 3,000 bytes, made every
//! run autotune its 21 operations again, silently.
//!
//! [`check`] opens the store as cubecl will. A file whose content is broken is moved aside
//! (renamed, with its write-ahead log, to `<name>.db.unreadable-<unix seconds>`: nothing is
//! deleted) and a new store started; a store that cannot be opened for another reason (no
//! directory can be made there, or an error that does not say the file is broken) is left
//! alone and reported, so the words about the next run can tell the truth; so is one that
//! opens but cannot be written (cubecl serves it read-only). A store another process holds
//! locked is neither: cubecl's own opens try again. Processes sharing the directory check one
//! at a time ([`check`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What is wrong with the store, if anything, once [`check`] has looked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum StoreTrouble {
    /// The file could not be read as a database: moved aside, and a new store started.
    Replaced {
        /// The store's file.
        file: PathBuf,
        /// Where the unreadable file went.
        moved_to: PathBuf,
        /// Why it could not be read.
        error: String,
    },
    /// The store cannot be opened (and was left as it is): autotune answers are kept in memory
    /// only, so every process autotunes again.
    Unusable {
        /// The store's file.
        file: PathBuf,
        /// Why.
        error: String,
    },
}

impl StoreTrouble {
    /// Whether a later process finds this one's autotune answers.
    pub fn keeps_answers(&self) -> bool {
        matches!(self, StoreTrouble::Replaced { .. })
    }
}

impl fmt::Display for StoreTrouble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreTrouble::Replaced {
                file,
                moved_to,
                error,
            } => write!(
                f,
                "TradeTune's GPU cache {} could not be read ({error}): moved to {} and a new one \
                 started, so this process autotunes its shapes afresh",
                file.display(),
                moved_to.display()
            ),
            StoreTrouble::Unusable { file, error } => write!(
                f,
                "TradeTune's GPU cache {} cannot be used ({error}): autotune answers are kept \
                 in memory only and every process autotunes again (TRADETUNE_GPU_CACHE=DIR \
                 puts the cache elsewhere)",
                file.display()
            ),
        }
    }
}

/// Checks the store `file` with `open` (which opens it as cubecl does, creating it where it is
/// missing, and writes to it): `None` where it opens, or another process holds it locked;
/// otherwise what was wrong and what was done ([`StoreTrouble`]). `now_s`: the unix seconds
/// that name a moved file.
///
/// A store is moved aside only under an exclusive lock on `<file>.check-lock` (processes that
/// share the cache directory check one at a time, so none moves a store another has just
/// started) and only where it failed twice, [`RETRY`] apart, with an error that says its bytes
/// are broken (an error a writer's moment could cause is not taken for one).
pub fn check(
    file: &Path,
    now_s: u64,
    open: impl Fn(&Path) -> Result<(), String>,
) -> Option<StoreTrouble> {
    let unusable = |error: String| {
        Some(StoreTrouble::Unusable {
            file: file.to_path_buf(),
            error,
        })
    };
    if let Some(dir) = file.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return unusable(format!("cannot create {}: {e}", dir.display()));
    }
    match open(file) {
        Ok(()) => return None,
        Err(e) if locked(&e) => return None,
        Err(_) => {}
    }
    let lock = match std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(with_suffix(file, ".check-lock"))
        .and_then(|f| f.lock().map(|()| f))
    {
        Ok(lock) => lock,
        Err(e) => return unusable(format!("cannot lock it to check it: {e}")),
    };
    // Under the lock: another process may have replaced it meanwhile, and one failure may be
    // a moment's.
    let mut error = String::new();
    for attempt in 0..2 {
        if attempt > 0 {
            std::thread::sleep(RETRY);
        }
        match open(file) {
            Ok(()) => return None,
            Err(e) if locked(&e) => return None,
            Err(e) => error = e,
        }
    }
    if !file.exists() || !broken(&error) {
        return unusable(error);
    }
    let moved_to = aside(file, now_s);
    if let Err(e) = std::fs::rename(file, &moved_to) {
        return unusable(format!("{error}; moving it aside failed: {e}"));
    }
    // Its write-ahead log and shared-memory index belong to the broken file: a new store
    // beside them could take the old log's frames for its own.
    for suffix in ["-wal", "-shm", "-tshm"] {
        let side = with_suffix(file, suffix);
        if side.exists()
            && let Err(e) = std::fs::rename(&side, with_suffix(&moved_to, suffix))
        {
            return unusable(format!(
                "{error}; moved to {}, but moving its {suffix} file failed: {e}",
                moved_to.display()
            ));
        }
    }
    let started = open(file);
    drop(lock);
    match started {
        Ok(()) => Some(StoreTrouble::Replaced {
            file: file.to_path_buf(),
            moved_to,
            error,
        }),
        Err(again) => unusable(format!(
            "{error}; moved to {}, and a new one could not be started: {again}",
            moved_to.display()
        )),
    }
}

/// How long [`check`] waits before it opens a failing store again.
pub const RETRY: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether an open failed only because another process holds the file: not a fault of the
/// file, and cubecl's own opens try again. The words are turso's own for exactly those errors
/// (turso_sdk_kit 0.8's `TursoError` from `LimboError`), which end the message cubecl hands
/// on (after its own `it cannot be written: ` where a write failed):
/// - `Busy` (SQLite's busy code): "database is locked" (turso_core's own words for it,
///   "Database is busy", where one reaches cubecl unconverted);
/// - `BusySnapshot` (another writer committed meanwhile): "database snapshot is stale, …" or
///   "Commit dependency aborted, …";
/// - a `LockingError` on the file or the shared WAL coordination file that the OS refused
///   with `WouldBlock`: "… File is locked by another process".
///
/// Nothing else is: the OS's "Device or resource busy" (EBUSY) or "resource busy" (an I/O error
/// of kind `ResourceBusy`) says the disk or file cannot be used, whoever asks.
fn locked(error: &str) -> bool {
    const CONTENTION: [&str; 5] = [
        "database is locked",
        "Database is busy",
        "database snapshot is stale, rollback and retry the transaction",
        "Commit dependency aborted, rollback and retry the whole transaction",
        "File is locked by another process",
    ];
    // Anywhere in the message (a caller may add to it), in any case.
    let e = error.to_lowercase();
    CONTENTION.iter().any(|k| e.contains(&k.to_lowercase()))
}

/// Whether an open failed because the file's bytes are broken (turso's errors for bytes that
/// are not a database, a database file cut short before a page its opening reads, a damaged
/// page), as opposed to permissions, a read-only file or its write-ahead log, where the file
/// is left alone.
fn broken(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    [
        "not a database",
        "short read on page",
        "short read on database header",
        "corrupt",
        "malformed",
    ]
    .iter()
    .any(|k| e.contains(k))
}

/// `<file>.unreadable-<now_s>`, or with `-2`, `-3`… where that name is taken.
fn aside(file: &Path, now_s: u64) -> PathBuf {
    let mut n = 1;
    loop {
        let tail = if n == 1 {
            format!(".unreadable-{now_s}")
        } else {
            format!(".unreadable-{now_s}-{n}")
        };
        let candidate = with_suffix(file, &tail);
        if !candidate.exists() {
            return candidate;
        }
        n += 1;
    }
}

fn with_suffix(file: &Path, suffix: &str) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The store's reads and writes that failed in this process after [`check`] (cubecl logs each
/// as a warning, and goes on without: a full disk, a page damaged past what opening reads), and
/// the first one's words.
static FAILURES: AtomicU64 = AtomicU64::new(0);
static FIRST_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Notes one of cubecl's warnings about its store (`message`, as cubecl wrote it).
#[cfg(feature = "wgpu")]
pub(crate) fn note_failure(message: &str) {
    // The count moves under the first's lock, so whoever reads a count reads the first's words.
    let mut first = FIRST_FAILURE.lock().unwrap_or_else(|p| p.into_inner());
    if first.is_none() {
        *first = Some(message.to_owned());
    }
    FAILURES.fetch_add(1, Ordering::Relaxed);
}

/// Forgets the failures noted since there were `before` ([`check`]'s own write to a store it
/// then reports): nothing where none was noted meanwhile.
#[cfg(feature = "wgpu")]
pub(crate) fn forget_failures_since(before: u64) {
    let mut first = FIRST_FAILURE.lock().unwrap_or_else(|p| p.into_inner());
    if FAILURES.load(Ordering::Relaxed) > before {
        FAILURES.store(before, Ordering::Relaxed);
        if before == 0 {
            *first = None;
        }
    }
}

/// The store's reads and writes that failed in this process since its device opened, and the
/// first one's words.
pub fn failures() -> (u64, Option<String>) {
    let first = FIRST_FAILURE.lock().unwrap_or_else(|p| p.into_inner());
    (FAILURES.load(Ordering::Relaxed), first.clone())
}

/// The failures already said by [`failures_warning_unsaid`].
static SAID_UP_TO: AtomicU64 = AtomicU64::new(0);

/// The [`failures`] not yet said, as a warning line (`None` where there are none): a next run
/// may autotune again what this process's failed writes did not keep. A study's launch asks
/// while it runs, so the app and the CLI say a full disk as its trials meet it, and once more
/// at its end for any since; the CLI asks after every command, and says what is left.
pub fn failures_warning_unsaid() -> Option<String> {
    let (n, first) = failures();
    let said = SAID_UP_TO.fetch_max(n, Ordering::Relaxed);
    (n > said).then(|| failures_line(n, said, first.as_deref().unwrap_or("")))
}

/// `n` failures in all, `said` of them said before, the first's words.
fn failures_line(n: u64, said: u64, first: &str) -> String {
    let reads = |k: u64, more: &str| {
        if k == 1 {
            format!("1 {more}read or write")
        } else {
            format!("{k} {more}reads and writes")
        }
    };
    if said > 0 {
        return format!(
            "warning: {} of TradeTune's GPU cache failed ({n} in this process): autotune \
             answers it did not keep are measured again by a next run of the same shapes",
            reads(n - said, "more ")
        );
    }
    format!(
        "warning: {} of TradeTune's GPU cache failed in this process (the first: {first}): \
         autotune answers it did not keep are measured again by a next run of the same shapes",
        reads(n, "")
    )
}

/// Opens the active environment's store as cubecl's stores will (the same database object,
/// which cubecl then shares), creating it where it is missing, and writes an entry of its own
/// and removes it: cubecl serves a store it cannot write (a read-only file or directory) as
/// read-only, where new answers are lost.
#[cfg(feature = "wgpu")]
pub(crate) fn open_as_cubecl(file: &Path) -> Result<(), String> {
    use cubecl_environment::persistence::{Access, Database, Insertion, Origin};
    const NAMESPACE: &str = "tradetune/store-check";
    let db = Database::open_at(file, Access::ReadWrite)?;
    match db.replace(NAMESPACE, b"written", b"1", Origin::Local) {
        Insertion::Stored | Insertion::Conflict(_) => {
            db.purge_key(NAMESPACE, b"written");
            Ok(())
        }
        Insertion::Failed(e) => Err(format!("it cannot be written: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tradetune-cache-store-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn failed_reads_and_writes_are_said_with_the_first() {
        assert_eq!(
            failures_line(
                3,
                0,
                "Unable to write Turso /c/env.db (autotune): disk full"
            ),
            "warning: 3 reads and writes of TradeTune's GPU cache failed in this process (the \
             first: Unable to write Turso /c/env.db (autotune): disk full): autotune answers it \
             did not keep are measured again by a next run of the same shapes"
        );
        assert!(failures_line(1, 0, "x").starts_with("warning: 1 read or write of"));
        // Those since the last line, with the count in all.
        assert_eq!(
            failures_line(14, 3, "x"),
            "warning: 11 more reads and writes of TradeTune's GPU cache failed (14 in this \
             process): autotune answers it did not keep are measured again by a next run of the \
             same shapes"
        );
        assert!(failures_line(4, 3, "x").starts_with("warning: 1 more read or write of"));
    }

    #[test]
    fn a_store_that_opens_or_is_locked_is_left_alone() {
        let d = dir("fine");
        let file = d.join("env.db");
        std::fs::write(&file, b"kept").unwrap();
        assert_eq!(check(&file, 7, |_| Ok(())), None);
        assert_eq!(check(&file, 7, |_| Err("database is locked".into())), None);
        assert_eq!(
            check(&file, 7, |_| Err(
                "it cannot be written: database is locked".into()
            )),
            None
        );
        assert_eq!(
            check(&file, 7, |_| Err("Locking error: Failed locking file \
                 '/c/env.db'. File is locked by another process"
                .into())),
            None
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"kept");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_broken_store_is_moved_aside_with_its_log_and_a_new_one_started() {
        let d = dir("broken");
        let file = d.join("env.db");
        std::fs::write(&file, b"garbage").unwrap();
        std::fs::write(d.join("env.db-wal"), b"log").unwrap();
        // A file of that name already moved aside once at this second: the next name is taken.
        std::fs::write(d.join("env.db.unreadable-7"), b"older").unwrap();
        let opens = std::cell::Cell::new(0);
        let trouble = check(&file, 7, |f| {
            opens.set(opens.get() + 1);
            if std::fs::read(f).is_ok_and(|b| b == b"garbage") {
                Err("file is not a database".into())
            } else {
                std::fs::write(f, b"new store").unwrap();
                Ok(())
            }
        })
        .unwrap();
        let moved = d.join("env.db.unreadable-7-2");
        assert_eq!(
            trouble,
            StoreTrouble::Replaced {
                file: file.clone(),
                moved_to: moved.clone(),
                error: "file is not a database".into()
            }
        );
        assert!(trouble.keeps_answers());
        // Once, twice more under the lock (RETRY apart), and the new store.
        assert_eq!(opens.get(), 4);
        assert_eq!(std::fs::read(&moved).unwrap(), b"garbage");
        assert_eq!(
            std::fs::read(d.join("env.db.unreadable-7-2-wal")).unwrap(),
            b"log"
        );
        assert!(!d.join("env.db-wal").exists());
        assert_eq!(std::fs::read(&file).unwrap(), b"new store");
        assert_eq!(
            std::fs::read(d.join("env.db.unreadable-7")).unwrap(),
            b"older"
        );
        let said = trouble.to_string();
        assert!(
            said.contains("could not be read (file is not a database)"),
            "{said}"
        );
        assert!(said.contains("env.db.unreadable-7-2"), "{said}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_store_that_fails_for_a_moment_is_left_alone() {
        let d = dir("moment");
        let file = d.join("env.db");
        std::fs::write(&file, b"being written").unwrap();
        // A short read of a page another process is writing, then fine.
        let opens = std::cell::Cell::new(0);
        let trouble = check(&file, 7, |_| {
            opens.set(opens.get() + 1);
            if opens.get() < 3 {
                Err("I/O error: short read on page 2: expected 4096 bytes, got 0".into())
            } else {
                Ok(())
            }
        });
        assert_eq!(trouble, None);
        assert_eq!(opens.get(), 3);
        assert_eq!(std::fs::read(&file).unwrap(), b"being written");
        // A short read of its write-ahead log is no sign of a broken database file.
        let trouble = check(&file, 7, |_| {
            Err("I/O error: short read on WAL frame 3 at offset 4152: expected 4096 bytes".into())
        })
        .unwrap();
        assert!(
            matches!(trouble, StoreTrouble::Unusable { .. }),
            "{trouble:?}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"being written");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_store_that_fails_for_another_reason_is_reported_and_kept() {
        let d = dir("other");
        let file = d.join("env.db");
        std::fs::write(&file, b"maybe fine").unwrap();
        let trouble = check(&file, 7, |_| Err("I/O error (PermissionDenied)".into())).unwrap();
        assert!(matches!(trouble, StoreTrouble::Unusable { .. }));
        assert!(!trouble.keeps_answers());
        assert_eq!(std::fs::read(&file).unwrap(), b"maybe fine");
        assert!(
            trouble
                .to_string()
                .contains("every process autotunes again")
        );
        // A store that cannot be started anew is reported with both errors.
        let trouble = check(&file, 8, |f| {
            if f.exists() {
                Err("I/O error: short read on page 1: expected 4096 bytes, got 3000".into())
            } else {
                Err("read-only file system".into())
            }
        })
        .unwrap();
        match trouble {
            StoreTrouble::Unusable { error, .. } => {
                assert!(error.contains("short read"), "{error}");
                assert!(error.contains("read-only file system"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_os_error_that_says_busy_is_no_other_process_holding_the_store() {
        let d = dir("ebusy");
        let file = d.join("env.db");
        std::fs::write(&file, b"on a busy device").unwrap();
        for error in [
            "I/O error (opening the store): Device or resource busy (os error 16)",
            "I/O error (creating the cache directory): resource busy",
            "disk busy",
        ] {
            assert!(!locked(error), "{error}");
            let trouble = check(&file, 7, |_| Err(error.to_owned()));
            match trouble {
                Some(StoreTrouble::Unusable { error: said, .. }) => assert_eq!(said, error),
                other => panic!("{error}: {other:?}"),
            }
        }
        // turso's own contention is told wherever it stands in the message.
        assert!(locked(
            "it cannot be written: Database is locked (while opening the store)"
        ));
        // Kept: it does not say the bytes are broken.
        assert_eq!(std::fs::read(&file).unwrap(), b"on a busy device");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_cache_directory_that_cannot_be_made_is_reported() {
        let d = dir("nodir");
        let blocker = d.join("not-a-dir");
        std::fs::write(&blocker, b"a file").unwrap();
        let file = blocker.join("env.db");
        let trouble = check(&file, 7, |_| panic!("not opened")).unwrap();
        match trouble {
            StoreTrouble::Unusable { error, .. } => {
                assert!(error.contains("cannot create"), "{error}")
            }
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
