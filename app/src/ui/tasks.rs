//! Engine work off the UI thread. Each job runs on its own thread and reports through one
//! channel of [`TaskEvent`]s; every send wakes the UI (`request_repaint`), which drains the
//! channel once per frame. The UI thread never waits on a job.

mod report;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tradetune_engine::device::DeviceSpec;
use tradetune_engine::front::backtest::{self, SplitPart};
use tradetune_engine::front::launch::{LaunchEvent, StudyHandle, StudyLaunch};
use tradetune_engine::market::Dataset;
use tradetune_engine::market::load::DatasetConfig;
use tradetune_engine::storage::{Storage, StudySummary, TrialRecord};
use tradetune_engine::study::file::StudyFile;
use tradetune_engine::study::runner::StudyEvent;

use super::dialog::{FileDialogs, Pick};
use super::draft::{DataShape, Draft};
use super::panels::backtest::BacktestResult;
use super::panels::compare::Comparison;
use super::panels::studies::{Curves, LiveRequest, Polled, ReadRows, TrialColumn, TrialRow};

/// A loaded dataset, as the Configure panel shows it and a run uses it.
#[derive(Clone)]
pub struct DataInfo {
    /// The files (empty: the bundled sample).
    pub paths: Vec<PathBuf>,
    /// Where it came from, for people.
    pub source: String,
    /// Asset names in column order.
    pub assets: Vec<String>,
    /// Sizes the estimate needs.
    pub shape: DataShape,
    /// First and last timestamp (Unix seconds) of the aligned data.
    pub range: (i64, i64),
    /// The aligned data (its timestamps are what the draft's split is resolved over).
    pub dataset: Arc<Dataset>,
}

/// One study database as opened.
#[derive(Debug, Clone)]
pub struct DbContents {
    /// The file.
    pub path: PathBuf,
    /// Every study with its counts.
    pub studies: Vec<StudySummary>,
}

/// What a running study reports.
#[derive(Debug, Clone)]
pub enum StudyMsg {
    /// The data is loaded, the runner built and the study recorded in its database.
    Ready,
    /// An event of the runner.
    Event(StudyEvent),
    /// Something to tell the user (telemetry could not start, …).
    Notice(String),
    /// The study ended, or why it could not run.
    Done(Result<(), String>),
}

/// Everything a background job says.
#[derive(Debug)]
pub enum TaskEvent {
    /// Market data finished loading (or failed, with the reason naming file and line).
    Data {
        /// Which load request this answers (older answers are dropped).
        request: u64,
        /// The data or the error.
        result: Result<Box<DataInfoMsg>, String>,
    },
    /// A study database was opened.
    Database(Result<DbContents, String>),
    /// The trials of a (possibly aggregated) study were read and made into table rows.
    Trials {
        /// The studies they belong to.
        studies: Vec<String>,
        /// Rows, or why not.
        result: Result<ReadRows, String>,
    },
    /// An incremental read of the open study (see [`Tasks::poll_trials`]).
    Polled(Box<Polled>),
    /// A trial's learning curve was read: its trial id, the points by metric as (env steps,
    /// value), or why not.
    Curve(i64, Result<Curves, String>),
    /// A study's progress.
    Study(StudyMsg),
    /// A file dialog was answered.
    Picked(Pick, Vec<PathBuf>),
    /// A backtest finished.
    Backtested(Result<Box<BacktestResult>, String>),
    /// A comparison finished.
    Compared(Result<Box<Comparison>, String>),
    /// The devices, listed anew (see [`Tasks::refresh_devices`]).
    Devices(Vec<tradetune_engine::device::DeviceInfo>),
    /// A study's report was computed (see [`Tasks::study_report`]): what it was asked at, and
    /// the report or why not.
    Report(
        super::panels::studies::report::ReportKey,
        Result<Box<tradetune_engine::front::report::StudyReport>, String>,
    ),
    /// A re-run of a study's best trial with other seeds reports (see [`Tasks::reseed`]).
    Reseed(super::panels::studies::report::ReseedMsg),
    /// A CSV export finished: what was written ("trials", "telemetry rows"), where, and the
    /// rows written, or why not.
    Exported(&'static str, PathBuf, Result<usize, String>),
}

/// Wrapper so [`TaskEvent`] stays `Debug` without printing a whole dataset.
pub struct DataInfoMsg(pub DataInfo);

impl std::fmt::Debug for DataInfoMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataInfo({})", self.0.source)
    }
}

/// The handle the app holds: spawns jobs, hands out their events.
pub struct Tasks {
    tx: Sender<TaskEvent>,
    rx: Receiver<TaskEvent>,
    waker: Waker,
    dialogs: Arc<dyn FileDialogs>,
    /// The running study's controls (there from Start on, before its data loads).
    study: Option<StudyHandle>,
    /// Jobs queued instead of started while held (see [`Tasks::hold`]).
    held: Mutex<Option<Vec<HeldJob>>>,
    /// Lists the devices on "Refresh devices".
    device_probe: DeviceProbe,
}

/// How the app lists its devices: the engine's [`refresh_devices`] (tests give their own).
///
/// [`refresh_devices`]: tradetune_engine::device::refresh_devices
pub type DeviceProbe = Arc<dyn Fn() -> Vec<tradetune_engine::device::DeviceInfo> + Send + Sync>;

/// A job waiting for [`Tasks::release`]: its thread name and its work.
type HeldJob = (String, Box<dyn FnOnce() + Send>);

/// Wakes the UI from any thread once it has drawn its first frame.
#[derive(Clone, Default)]
pub struct Waker(Arc<Mutex<Option<egui::Context>>>);

impl Waker {
    /// Remembers the context to wake (called every frame; cheap).
    pub fn set(&self, ctx: &egui::Context) {
        if let Ok(mut slot) = self.0.lock()
            && slot.is_none()
        {
            *slot = Some(ctx.clone());
        }
    }

    fn wake(&self) {
        if let Ok(slot) = self.0.lock()
            && let Some(ctx) = slot.as_ref()
        {
            ctx.request_repaint();
        }
    }
}

/// Sends and wakes.
#[derive(Clone)]
struct Reply {
    tx: Sender<TaskEvent>,
    waker: Waker,
}

impl Reply {
    fn send(&self, event: TaskEvent) {
        // A closed channel means the app is gone; nothing is left to tell.
        let _ = self.tx.send(event);
        self.waker.wake();
    }
}

impl Tasks {
    /// A task handle whose file dialogs are answered by `dialogs`.
    pub fn new(dialogs: Arc<dyn FileDialogs>) -> Self {
        let (tx, rx) = channel();
        Tasks {
            tx,
            rx,
            waker: Waker::default(),
            dialogs,
            study: None,
            held: Mutex::new(None),
            device_probe: Arc::new(tradetune_engine::device::refresh_devices),
        }
    }

    /// Lists the devices through `probe` from now on (tests: a fixed list; the default asks
    /// wgpu again, [`tradetune_engine::device::refresh_devices`]).
    pub fn set_device_probe(&mut self, probe: DeviceProbe) {
        self.device_probe = probe;
    }

    /// From now on jobs are queued instead of started, until [`Self::release`]: a test steps
    /// frames while a job is certainly still in flight, whatever the machine's speed.
    pub fn hold(&self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get_or_insert_with(Vec::new);
    }

    /// Starts the jobs queued since [`Self::hold`] (in order) and stops holding; returns how
    /// many there were.
    pub fn release(&self) -> usize {
        let jobs = self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default();
        let n = jobs.len();
        for (name, job) in jobs {
            self.start_thread(name, job);
        }
        n
    }

    /// The waker the frame loop keeps current.
    pub fn waker(&self) -> &Waker {
        &self.waker
    }

    fn reply(&self) -> Reply {
        Reply {
            tx: self.tx.clone(),
            waker: self.waker.clone(),
        }
    }

    /// Events that arrived since the last call.
    pub fn drain(&self) -> Vec<TaskEvent> {
        self.rx.try_iter().collect()
    }

    fn spawn(&self, name: &str, job: impl FnOnce(Reply) + Send + 'static) {
        let reply = self.reply();
        let job: Box<dyn FnOnce() + Send> = Box::new(move || job(reply));
        let name = format!("tradetune-{name}");
        {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(queue) = held.as_mut() {
                queue.push((name, job));
                return;
            }
        }
        self.start_thread(name, job);
    }

    fn start_thread(&self, name: String, job: Box<dyn FnOnce() + Send>) {
        let failed = self.reply();
        let spawned = std::thread::Builder::new().name(name).spawn(job);
        if let Err(e) = spawned {
            failed.send(TaskEvent::Study(StudyMsg::Done(Err(format!(
                "could not start a background thread: {e}"
            )))));
        }
    }

    /// Lists the devices anew through the device probe (it asks the graphics drivers, which may
    /// take a moment); the answer arrives as [`TaskEvent::Devices`].
    pub fn refresh_devices(&self) {
        let probe = Arc::clone(&self.device_probe);
        self.spawn("devices", move |reply| {
            reply.send(TaskEvent::Devices(probe()));
        });
    }

    /// Opens the dialog for `pick`; the answer arrives as [`TaskEvent::Picked`].
    pub fn pick(&self, pick: Pick) {
        let dialogs = self.dialogs.clone();
        self.spawn("dialog", move |reply| {
            let paths = dialogs.pick(&pick);
            reply.send(TaskEvent::Picked(pick, paths));
        });
    }

    /// Loads market data (empty `paths`: the bundled sample) with the draft's lookback. The
    /// split stays the default one: the bars do not depend on it, and the panels resolve the
    /// draft's own split over them as it is typed, so a bad split is flagged on the split
    /// rather than failing the load.
    pub fn load_data(&self, request: u64, paths: Vec<PathBuf>, draft: &Draft) {
        let config = DatasetConfig {
            paths: paths.clone(),
            lookback: draft.env.lookback,
            episode_bars: draft.env.episode_bars,
            ..DatasetConfig::default()
        };
        self.spawn("data", move |reply| {
            let result = config.load().map_err(|e| e.to_string()).map(|loaded| {
                let d = &loaded.dataset;
                let ts = &d.timestamps;
                Box::new(DataInfoMsg(DataInfo {
                    paths,
                    source: loaded.source_name.clone(),
                    assets: d.names.clone(),
                    shape: DataShape::of(d),
                    range: (
                        ts.first().copied().unwrap_or(0),
                        ts.last().copied().unwrap_or(0),
                    ),
                    dataset: Arc::new(loaded.dataset),
                }))
            });
            reply.send(TaskEvent::Data { request, result });
        });
    }

    /// Opens a study database read-only and lists its studies.
    pub fn open_database(&self, path: PathBuf) {
        self.spawn("database", move |reply| {
            let result = Storage::open_read_only(&path)
                .and_then(|s| s.study_summaries())
                .map(|studies| DbContents {
                    path: path.clone(),
                    studies,
                })
                .map_err(|e| format!("{}: {e}", path.display()));
            reply.send(TaskEvent::Database(result));
        });
    }

    /// Reads the learning curve of trial `trial_id` (empty for a database Optuna wrote).
    pub fn load_curve(&self, path: PathBuf, trial_id: i64) {
        self.spawn("learning curve", move |reply| {
            let result = Storage::open_read_only(&path)
                .and_then(|s| s.learning_curve(trial_id))
                .map(|points| {
                    let mut by_metric = Curves::new();
                    for p in points {
                        by_metric
                            .entry(p.metric)
                            .or_default()
                            .push([p.env_steps as f64, p.value]);
                    }
                    by_metric
                })
                .map_err(|e| format!("{}: {e}", path.display()));
            reply.send(TaskEvent::Curve(trial_id, result));
        });
    }

    /// Reads the trials of `studies` (one study, or the members of an aggregated group) and
    /// makes them into table rows here, off the UI thread: formatting 10,000 trials (each
    /// applied configuration pretty-printed) takes longer than a frame.
    /// Their columns are derived and they are sorted by `sort` here too (see [`ReadRows`]).
    pub fn load_trials(&self, path: PathBuf, studies: Vec<String>, sort: (TrialColumn, bool)) {
        self.spawn("trials", move |reply| {
            let result = read_trials(&path, &studies)
                .map(|trials| {
                    let rows = trials.iter().map(|(s, t)| TrialRow::of(s, t)).collect();
                    ReadRows::new(rows, &sort)
                })
                .map_err(|e| format!("{}: {e}", path.display()));
            reply.send(TaskEvent::Trials { studies, result });
        });
    }

    /// Reads what changed in the open study since the rows the table holds (see
    /// [`super::panels::studies::live`]); the answer arrives as [`TaskEvent::Polled`].
    pub fn poll_trials(&self, path: PathBuf, request: LiveRequest) {
        self.spawn("poll trials", move |reply| {
            let polled = super::panels::studies::live::read(&path, request);
            reply.send(TaskEvent::Polled(Box::new(polled)));
        });
    }

    /// Writes the trials of `studies` as Optuna's `trials_dataframe().to_csv()` would: one
    /// study to `out`; several (an aggregated group, whose parameters may differ) to one file
    /// each beside it, `out`'s stem followed by `-<study>`.
    pub fn export_trials(&self, db: PathBuf, studies: Vec<String>, out: PathBuf) {
        self.spawn("export", move |reply| {
            let result = if studies.len() == 1 {
                export_trials(&db, &studies[0], &out)
            } else {
                let stem = out
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "trials".into());
                studies.iter().try_fold(0, |rows, study| {
                    let path = out.with_file_name(format!("{stem}-{study}.csv"));
                    export_trials(&db, study, &path).map(|n| rows + n)
                })
            };
            reply.send(TaskEvent::Exported("trials", out, result));
        });
    }

    /// Backtests the checkpoint `dir` on `split` (on the CPU device).
    pub fn backtest(&self, dir: PathBuf, split: String) {
        self.spawn("backtest", move |reply| {
            let result = backtest(&dir, &split)
                .map(Box::new)
                .map_err(|e| format!("{e:#}"));
            reply.send(TaskEvent::Backtested(result));
        });
    }

    /// Compares `a` and `b` (`study` or `study#N`) of the database `db`.
    pub fn compare(&self, db: PathBuf, a: String, b: String) {
        self.spawn("compare", move |reply| {
            let result = compare(&db, &a, &b)
                .map(Box::new)
                .map_err(|e| format!("{e:#}"));
            reply.send(TaskEvent::Compared(result));
        });
    }

    /// Writes the telemetry of `studies` as CSV, one row per sample (the columns of
    /// `tradetune study export --telemetry`); several studies to one file each, as trials.
    pub fn export_telemetry(&self, db: PathBuf, studies: Vec<String>, out: PathBuf) {
        self.spawn("export", move |reply| {
            let one = |study: &str, path: &Path| -> Result<usize, String> {
                let storage = Storage::open_read_only(&db)
                    .map_err(|e| format!("{}: {e}", crate::launch::db_label(&db)))?;
                let record = storage.study(study).map_err(|e| e.to_string())?;
                let trials = storage.trials(record.study_id).map_err(|e| e.to_string())?;
                tradetune_engine::front::export::export_telemetry(&storage, &trials, path)
                    .map(|out| out.rows)
                    .map_err(|e| format!("{}: {e}", record.name))
            };
            let result = if studies.len() == 1 {
                one(&studies[0], &out)
            } else {
                let stem = out
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "telemetry".into());
                studies.iter().try_fold(0, |rows, study| {
                    one(study, &out.with_file_name(format!("{stem}-{study}.csv"))).map(|n| rows + n)
                })
            };
            reply.send(TaskEvent::Exported("telemetry rows", out, result));
        });
    }

    /// Whether a study is going.
    pub fn running(&self) -> bool {
        self.study.is_some()
    }

    /// Stops the whole study: running trials end as PRUNED (if they reported values) or FAIL
    /// with "stopped by user"; no new ones start.
    /// Closing the window: interrupts the running study — no new trial, the running ones end
    /// as FAIL "interrupted", its telemetry is flushed — and waits up to `limit` for the runner
    /// to have stored them (other events are dropped: the window is gone). Returns whether the
    /// study ended in time (true when none was running).
    pub fn interrupt_study_and_wait(&mut self, limit: Duration) -> bool {
        use std::sync::mpsc::RecvTimeoutError;
        let Some(study) = &self.study else {
            return true;
        };
        study.interrupt();
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            match self.rx.recv_timeout(left) {
                Ok(TaskEvent::Study(StudyMsg::Done(_))) => {
                    self.study = None;
                    return true;
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => return true,
            }
        }
    }

    pub fn stop_study(&mut self) {
        if let Some(study) = &self.study {
            study.stop_study();
        }
    }

    /// No new trial starts; the running ones go on to their end (closing the window with
    /// "finish running trials"). Returns whether a study is running.
    pub fn finish_running_trials(&mut self) -> bool {
        let Some(study) = &self.study else {
            return false;
        };
        study.finish_running();
        true
    }

    /// Stops one running trial; the study goes on.
    pub fn stop_trial(&self, number: u64) -> bool {
        self.study.as_ref().is_some_and(|s| s.stop_trial(number))
    }

    /// The study's `Done` arrived.
    pub fn study_finished(&mut self) {
        self.study = None;
    }

    /// Runs `file` into the database `db` as `tradetune study run` does (the engine's
    /// [`StudyLaunch`]: recorded with the study, the same heartbeat and telemetry), on a
    /// background thread; every event is forwarded. Its controls work from now on, also while
    /// its data loads.
    pub fn start_study(&mut self, file: StudyFile, db: PathBuf) {
        let launch =
            crate::launch::place(db).and_then(|place| Ok(StudyLaunch::from_study(file, place)?));
        let launch = match launch {
            Ok(l) => l,
            Err(e) => {
                self.reply()
                    .send(TaskEvent::Study(StudyMsg::Done(Err(format!("{e:#}")))));
                return;
            }
        };
        let reply = self.reply();
        let (handle, job) = launch.into_job(move |event| {
            let msg = match event {
                LaunchEvent::Ready { source, .. } => {
                    reply.send(TaskEvent::Study(StudyMsg::Notice(format!(
                        "data: {source}"
                    ))));
                    StudyMsg::Ready
                }
                LaunchEvent::Notice(n) => StudyMsg::Notice(n),
                LaunchEvent::Study(e) => StudyMsg::Event(e),
                LaunchEvent::Finished(r) => {
                    StudyMsg::Done(r.map(|_| ()).map_err(|e| e.to_string()))
                }
            };
            reply.send(TaskEvent::Study(msg));
        });
        self.study = Some(handle);
        self.spawn("study", move |_| job.run());
    }
}

fn backtest(dir: &Path, split: &str) -> anyhow::Result<BacktestResult> {
    let split: SplitPart = split.parse().map_err(anyhow::Error::msg)?;
    let b = backtest::backtest(dir, split, &[], Default::default(), DeviceSpec::Cpu)?;
    let r = &b.report;
    let about = format!(
        "{} ({} samples) on {}: {} split, {} bars",
        dir.display(),
        b.timesteps,
        b.about,
        r.split,
        r.bars
    );
    Ok(BacktestResult::of(about, r))
}

fn compare(db: &Path, a: &str, b: &str) -> anyhow::Result<Comparison> {
    use tradetune_engine::front::compare::{load_side, table};
    let storage = Storage::open_read_only(db)?;
    let side_a = load_side(&storage, a)?;
    let side_b = load_side(&storage, b)?;
    let points = |values: &[(i64, f64)]| -> Vec<[f64; 2]> {
        values.iter().map(|&(n, v)| [n as f64, v]).collect()
    };
    Ok(Comparison {
        a: a.to_owned(),
        b: b.to_owned(),
        table: table(&side_a, &side_b),
        a_values: points(&side_a.values),
        b_values: points(&side_b.values),
    })
}

fn read_trials(
    path: &Path,
    studies: &[String],
) -> Result<Vec<(String, TrialRecord)>, tradetune_engine::storage::StorageError> {
    let storage = Storage::open_read_only(path)?;
    let mut rows = Vec::new();
    for name in studies {
        let id = storage.study_id(name)?;
        rows.extend(storage.trials(id)?.into_iter().map(|t| (name.clone(), t)));
    }
    Ok(rows)
}

fn export_trials(db: &Path, study: &str, out: &Path) -> Result<usize, String> {
    let storage =
        Storage::open_read_only(db).map_err(|e| format!("{}: {e}", crate::launch::db_label(db)))?;
    let mut bytes = Vec::new();
    storage
        .export_csv(study, &mut bytes)
        .map_err(|e| format!("{study}: {e}"))?;
    std::fs::write(out, &bytes).map_err(|e| format!("{}: {e}", out.display()))?;
    // Rows = lines minus the header; a quoted field never holds a newline in this export.
    Ok(bytes
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        .saturating_sub(1))
}
