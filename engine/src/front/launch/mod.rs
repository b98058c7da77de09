//! Launching a study, the one way `tradetune study run`, `tradetune worker` and the desktop
//! app's Start button all do it.
//!
//! A [`StudyLaunch`] is built from a study file or preset (the CLI), from the study recorded in
//! a database (a worker), or from a study the app's Configure panel made; overrides of its
//! fixed values, the trial count, workers, devices and liveness are laid over it. Its
//! [`StudyLaunch::launch`] returns at once with a [`StudyHandle`] that stops it (also while
//! its data is still loading) and the receiver of its [`LaunchEvent`]s; on its own thread it
//! then loads the data, records the study file with the study in its database (so it can be
//! re-run and joined whichever front end started it), starts the telemetry sampler and runs
//! the trials.

mod handle;
mod record;
mod run;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

pub use handle::StudyHandle;
pub use record::{ChangedSetting, RecordedStudy, apply_overrides, changed_settings, keys};

use super::FrontError;
use crate::storage::{DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_STALE_AFTER, Storage, is_postgres_url};
use crate::study::file::StudyFile;
use crate::study::ppo_trial::{PpoTrialConfig, read_study_file};
use crate::study::preset;
use crate::study::runner::{StudyEvent, StudyReport};

/// Where a study is kept: its database, and the folder its trials' checkpoints go under.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyPlace {
    /// A SQLite file or a `postgresql://` URL.
    pub db: PathBuf,
    /// Each COMPLETE trial's policy goes under `<checkpoints>/<study>/`: an absolute folder of
    /// this database's own, so two databases' studies of one name keep apart.
    pub checkpoints: PathBuf,
}

impl StudyPlace {
    /// The database `db` with its checkpoints beside it in `checkpoints/<file stem>/` for a
    /// `.db` SQLite file (`runs/a.db` keeps them in `runs/checkpoints/a/`) and
    /// `checkpoints/<file name>/` for another (`runs/a.sqlite`: `runs/checkpoints/a.sqlite/`),
    /// so that two databases in one folder never share one, or under `home` in
    /// `checkpoints/<server and database>/` for a PostgreSQL database (each machine keeps the
    /// checkpoints of the trials it ran; `home` is the user's data folder, which a PostgreSQL
    /// study cannot do without). The folder is made absolute, so the path each trial records
    /// holds from any working directory. Studies run before a database had its own folder keep
    /// theirs: each trial records its checkpoint's path.
    pub fn new(db: PathBuf, home: Option<&Path>) -> Result<StudyPlace, FrontError> {
        let url = db.to_string_lossy();
        let checkpoints = if is_postgres_url(&url) {
            home.ok_or_else(|| {
                FrontError::Invalid(
                    "a study in PostgreSQL keeps its checkpoints in the user's data folder, and \
                     this machine has none (HOME unset?)"
                        .into(),
                )
            })?
            .join("checkpoints")
            .join(postgres_folder(&url))
        } else {
            // `a.db` keeps `a` (the folder every `.db` database has had); `a.sqlite` beside
            // it takes `a.sqlite`, rather than sharing `a` and the study names in it.
            let is_db = db.extension().is_some_and(|e| e.eq_ignore_ascii_case("db"));
            let name = if is_db {
                db.file_stem()
            } else {
                db.file_name()
            };
            let name = name
                .map(|s| s.to_string_lossy().into_owned())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| FrontError::file(&db, "not a database file name"))?;
            db.parent()
                .unwrap_or(Path::new(""))
                .join("checkpoints")
                .join(name)
        };
        let checkpoints = std::path::absolute(&checkpoints)
            .map_err(|e| FrontError::file(&checkpoints, format!("cannot resolve the path: {e}")))?;
        Ok(StudyPlace { db, checkpoints })
    }
}

/// A PostgreSQL database's checkpoint folder name: `pg-<host[:port]>-<database>` from its URL,
/// without the user, password and options, every character but letters, digits, `.`, `-` and
/// `_` replaced by `_`.
fn postgres_folder(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let (host, database) = rest.split_once('/').unwrap_or((rest, ""));
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
            .replace("..", "_")
    };
    format!("pg-{}-{}", clean(host), clean(database))
}

/// How a running study shows it is alive, and what it measures while it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Liveness {
    /// Time between heartbeats of a running trial.
    pub heartbeat: Duration,
    /// A RUNNING trial whose heartbeat is older than this was left by a dead process and is
    /// marked FAIL before the next trial starts.
    pub stale_after: Duration,
    /// Time between telemetry samples stored with the study; `None`: no telemetry.
    pub telemetry: Option<Duration>,
}

impl Default for Liveness {
    /// A heartbeat every 10 s, stale after 60 s (Optuna's RDB settings, scaled), a telemetry
    /// sample every second.
    fn default() -> Self {
        Liveness {
            heartbeat: DEFAULT_HEARTBEAT_INTERVAL,
            stale_after: DEFAULT_STALE_AFTER,
            telemetry: Some(Duration::from_secs(1)),
        }
    }
}

use crate::device::compiling::CompileStatus;

/// What a launched study reports, in order: `Ready` once, then notices and the runner's
/// events, and `Finished` last (also when it could not start).
#[derive(Debug)]
pub enum LaunchEvent {
    /// The data is loaded, the runner built and the study recorded in its database: where the
    /// data came from (for people) and its fingerprint.
    Ready { source: String, fingerprint: String },
    /// Something to tell the user (telemetry could not start, or lost rows).
    Notice(String),
    /// An event of the runner.
    Study(StudyEvent),
    /// The process is compiling GPU kernels (a trial's first update, or its first evaluation):
    /// about once a second while it goes on, and its totals once it stops
    /// ([`crate::device::compiling`]; the process's count, all trials running together).
    Compiling(CompileStatus),
    /// The study ended (its report), or why it could not run.
    Finished(Result<StudyReport, FrontError>),
}

/// A study about to be launched: its study file with overrides, what is recorded with it, where
/// it is kept and how it runs.
#[derive(Debug, Clone)]
pub struct StudyLaunch {
    file: StudyFile,
    record: RecordedStudy,
    place: StudyPlace,
    liveness: Liveness,
    devices: Option<Vec<String>>,
    host: Option<String>,
    /// Joining a study created for workers: its whole budget and its data's fingerprint.
    join: Option<(usize, String)>,
}

impl StudyLaunch {
    fn new(file: StudyFile, text: String, source: String, place: StudyPlace) -> StudyLaunch {
        StudyLaunch {
            file,
            record: RecordedStudy {
                text,
                source,
                overrides: Vec::new(),
                budget: None,
                fingerprint: None,
            },
            place,
            liveness: Liveness::default(),
            devices: None,
            host: None,
            join: None,
        }
    }

    /// The study of the study file `path` (relative data paths against its folder).
    pub fn from_path(path: &Path, place: StudyPlace) -> Result<StudyLaunch, FrontError> {
        let file = read_study_file(path)?;
        let source = std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_owned())
            .display()
            .to_string();
        let text = file.source_text().to_owned();
        Ok(StudyLaunch::new(file, text, source, place))
    }

    /// The study of the bundled preset `name`.
    pub fn from_preset(name: &str, place: StudyPlace) -> Result<StudyLaunch, FrontError> {
        let p = preset::find(name)?;
        Ok(StudyLaunch::new(
            p.study,
            p.text.to_owned(),
            format!("preset:{name}"),
            place,
        ))
    }

    /// A study built in memory (the app's Configure panel): recorded as the study-file text it
    /// amounts to, its `path` as the source.
    pub fn from_study(file: StudyFile, place: StudyPlace) -> Result<StudyLaunch, FrontError> {
        let text = match file.source_text() {
            "" => file.to_toml(&PpoTrialConfig::defaults_json())?,
            t => t.to_owned(),
        };
        let source = file.path.clone();
        Ok(StudyLaunch::new(file, text, source, place))
    }

    /// Joins `study`, created for workers in `place`'s database (`tradetune study create`):
    /// its recorded study file and overrides, relative data paths against `data_dir`; its
    /// whole budget shared with the other workers, and its data must have the recorded
    /// fingerprint. Fails with [`FrontError::NotRecorded`] when the study was not created
    /// for workers.
    pub fn join(
        storage: &Storage,
        study: &str,
        data_dir: &Path,
        place: StudyPlace,
    ) -> Result<StudyLaunch, FrontError> {
        let stored = storage.study(study)?;
        let not_recorded = || FrontError::NotRecorded {
            study: study.to_owned(),
        };
        let record = RecordedStudy::of(&stored).ok_or_else(not_recorded)?;
        let (Some(budget), Some(fingerprint)) = (record.budget, record.fingerprint.clone()) else {
            return Err(not_recorded());
        };
        let mut file = record.study_file(study, data_dir)?;
        file.study.n_trials = budget;
        Ok(StudyLaunch {
            join: Some((budget, fingerprint)),
            ..StudyLaunch::new(file, record.text.clone(), record.source.clone(), place)
        })
    }

    /// Lays `NAME=VALUE` overrides over the fixed values (recorded with the study).
    pub fn set(&mut self, overrides: &[String]) -> Result<(), FrontError> {
        apply_overrides(&mut self.file, overrides)?;
        self.record.overrides.extend(overrides.iter().cloned());
        Ok(())
    }

    /// Runs `n` trials now (a worker: stops after `n` here, whatever the study's budget);
    /// refuses 0, which would run nothing.
    pub fn trials(&mut self, n: usize) -> Result<(), FrontError> {
        if n == 0 {
            return Err(FrontError::Invalid(
                "run at least one trial (0 runs nothing)".into(),
            ));
        }
        self.file.study.n_trials = n;
        Ok(())
    }

    /// Runs `n` parallel workers.
    pub fn workers(&mut self, n: usize) -> Result<(), FrontError> {
        if n == 0 {
            return Err(FrontError::Invalid("need at least one worker".into()));
        }
        self.file.study.workers = n;
        Ok(())
    }

    /// Names the study in its database; refuses a name that is not a plain folder name (its
    /// checkpoints go in a folder of that name), naming `--name`.
    pub fn name(&mut self, name: &str) -> Result<(), FrontError> {
        crate::study::file::check_study_name(name)
            .map_err(|e| FrontError::Invalid(format!("--name: {e}")))?;
        self.file.study.name = name.to_owned();
        Ok(())
    }

    /// Runs on `devices` (`cpu`, `wgpu:0`, …) instead of the study file's.
    pub fn devices(&mut self, devices: Vec<String>) -> Result<(), FrontError> {
        if devices.is_empty() {
            return Err(FrontError::Invalid("list at least one device".into()));
        }
        // Checked now, before anything loads.
        self.file.device_slots(&devices)?;
        self.devices = Some(devices);
        Ok(())
    }

    /// Heartbeats and telemetry.
    pub fn liveness(&mut self, liveness: Liveness) {
        self.liveness = liveness;
    }

    /// This machine's name, prefixed to each trial's worker label.
    pub fn host(&mut self, host: String) {
        self.host = Some(host);
    }

    /// The study as it will run.
    pub fn file(&self) -> &StudyFile {
        &self.file
    }

    /// Where it is kept.
    pub fn place(&self) -> &StudyPlace {
        &self.place
    }

    /// What is recorded with it.
    pub fn record(&self) -> &RecordedStudy {
        &self.record
    }

    /// The whole budget of the study this launch joins (`None`: not a worker).
    pub fn budget(&self) -> Option<usize> {
        self.join.as_ref().map(|(b, _)| *b)
    }

    /// Starts the study on its own thread; returns at once with its handle, its events and
    /// the thread (which a caller about to exit waits for: [`StudyThread`]).
    pub fn launch(self) -> (StudyHandle, Receiver<LaunchEvent>, StudyThread) {
        let (tx, rx) = channel();
        let failed = tx.clone();
        let (handle, job) = self.into_job(move |e| {
            // A receiver that is gone has nothing left to be told.
            let _ = tx.send(e);
        });
        let thread = match std::thread::Builder::new()
            .name("tradetune-study".into())
            .spawn(move || job.run())
        {
            Ok(t) => Some(t),
            Err(e) => {
                let _ = failed.send(LaunchEvent::Finished(Err(FrontError::Invalid(format!(
                    "could not start the study's thread: {e}"
                )))));
                None
            }
        };
        (handle, rx, StudyThread(thread))
    }

    /// The study's handle, and its work to run on a thread of the caller's choosing (the app
    /// queues its jobs), handing each event to `on_event`.
    pub fn into_job(
        self,
        on_event: impl FnMut(LaunchEvent) + Send + 'static,
    ) -> (StudyHandle, run::LaunchJob) {
        let handle = StudyHandle::default();
        (handle.clone(), run::LaunchJob::new(self, handle, on_event))
    }

    /// Records the study for workers without running it: loads its data (and checks its
    /// devices) as a worker will, for the fingerprint, and creates it with its study file,
    /// overrides, whole `budget` and fingerprint. Returns where the data came from and its
    /// fingerprint.
    pub fn create(mut self, budget: usize) -> Result<(String, String), FrontError> {
        if budget == 0 {
            return Err(FrontError::Invalid(
                "the study needs at least one trial".into(),
            ));
        }
        // A new study's name becomes its checkpoints' folder.
        crate::study::file::check_study_name(&self.file.study.name)
            .map_err(|e| self.file.key_error("study.name", e))?;
        let rc = run::runner_config(&self)?;
        let prepared = run::prepare(&self.file, rc, &self.place.checkpoints)?;
        let mut storage = run::open_for_writing(&self.place.db)?;
        self.record.budget = Some(budget);
        self.record.fingerprint = Some(prepared.fingerprint.clone());
        self.record
            .create(&mut storage, &self.file.study.name, self.file.direction())?;
        Ok((prepared.source, prepared.fingerprint))
    }
}

pub use run::{LaunchJob, telemetry_sampler};

/// The thread a [`StudyLaunch::launch`] runs on. Its events end when the study's last event is
/// sent, while the thread still drops the launch and the study's handle, and then its own
/// thread-locals: a process about to exit waits for it ([`StudyThread::wait`]), so that its
/// libraries' exit handlers do not run beside that. Dropping it waits for nothing (a caller
/// unwinding from a panic, or dropping it at once, is not held until the study ends).
pub struct StudyThread(Option<std::thread::JoinHandle<()>>);

impl StudyThread {
    /// Waits for the study's thread to end (at once where it has, or never started).
    pub fn wait(self) {
        if let Some(t) = self.0 {
            // A panic on the study's thread ends its events without a result, which its
            // caller reports.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod place_tests {
    use super::*;

    #[test]
    fn each_database_keeps_its_checkpoints_in_a_folder_of_its_own() {
        let a = StudyPlace::new(PathBuf::from("/runs/a.db"), None).unwrap();
        let b = StudyPlace::new(PathBuf::from("/runs/b.db"), None).unwrap();
        assert_eq!(a.checkpoints, Path::new("/runs/checkpoints/a"));
        assert_eq!(b.checkpoints, Path::new("/runs/checkpoints/b"));
        // Another extension beside `a.db`: a folder of its own.
        let other = |name: &str| StudyPlace::new(Path::new("/runs").join(name), None).unwrap();
        assert_eq!(
            other("a.sqlite").checkpoints,
            Path::new("/runs/checkpoints/a.sqlite")
        );
        assert_eq!(other("a.DB").checkpoints, Path::new("/runs/checkpoints/a"));
        assert_eq!(
            other("optuna.sqlite3").checkpoints,
            Path::new("/runs/checkpoints/optuna.sqlite3")
        );
        // A relative database: an absolute folder, from the working directory.
        let here = StudyPlace::new(PathBuf::from("studies.db"), None).unwrap();
        assert!(
            here.checkpoints.is_absolute(),
            "{}",
            here.checkpoints.display()
        );
        assert!(here.checkpoints.ends_with("checkpoints/studies"));
        let home = Path::new("/home/u/.local/share/tradetune");
        let pg = |url: &str| StudyPlace::new(PathBuf::from(url), Some(home)).unwrap();
        assert_eq!(
            pg("postgresql://me:secret@db.lan:5432/runs?sslmode=require").checkpoints,
            home.join("checkpoints/pg-db.lan_5432-runs")
        );
        assert_ne!(
            pg("postgresql://db.lan/runs").checkpoints,
            pg("postgresql://db.lan/other").checkpoints
        );
        assert_eq!(
            pg("postgresql://h/../x").checkpoints.parent(),
            Some(home.join("checkpoints").as_path())
        );
    }
}
