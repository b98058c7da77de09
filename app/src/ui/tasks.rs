//! Engine work off the UI thread. Each job runs on its own thread and reports through one
//! channel of [`TaskEvent`]s; every send wakes the UI (`request_repaint`), which drains the
//! channel once per frame. The UI thread never waits on a job.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use tradetune_engine::device::{DeviceSpec, open};
use tradetune_engine::env::{CpuVecEnv, VecEnv};
use tradetune_engine::market::Dataset;
use tradetune_engine::market::load::DatasetConfig;
use tradetune_engine::ppo::{HostEnv, TrainEvent, TrainReport, Trainer};
use tradetune_engine::storage::{Storage, StudySummary, TrialRecord};

use super::dialog::{FileDialogs, Pick};
use super::draft::{DataShape, Draft};

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
    /// Bars in train / validation / test.
    pub split_bars: [usize; 3],
    /// First and last timestamp (Unix seconds) of the aligned data.
    pub range: (i64, i64),
    /// The aligned, scaled data.
    pub dataset: Arc<Dataset>,
    /// The train split's bars.
    pub train: std::ops::Range<usize>,
}

/// One study database as opened.
#[derive(Debug, Clone)]
pub struct DbContents {
    /// The file.
    pub path: PathBuf,
    /// Every study with its counts.
    pub studies: Vec<StudySummary>,
}

/// What a run reports.
#[derive(Debug, Clone)]
pub enum RunMsg {
    /// A training event (progress, episodes, update diagnostics).
    Train(TrainEvent),
    /// The run ended: its report or why it failed.
    Done(Result<Box<TrainReport>, String>),
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
    /// The trials of a (possibly aggregated) study were read.
    Trials {
        /// The studies they belong to.
        studies: Vec<String>,
        /// Rows, or why not.
        result: Result<Vec<(String, TrialRecord)>, String>,
    },
    /// A run's progress.
    Run(RunMsg),
    /// A file dialog was answered.
    Picked(Pick, Vec<PathBuf>),
    /// A CSV export finished: the rows written, or why not.
    Exported(PathBuf, Result<usize, String>),
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
    run_stop: Option<Arc<AtomicBool>>,
}

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
            run_stop: None,
        }
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
        let failed = reply.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tradetune-{name}"))
            .spawn(move || job(reply));
        if let Err(e) = spawned {
            failed.send(TaskEvent::Run(RunMsg::Done(Err(format!(
                "could not start a background thread: {e}"
            )))));
        }
    }

    /// Opens the dialog for `pick`; the answer arrives as [`TaskEvent::Picked`].
    pub fn pick(&self, pick: Pick) {
        let dialogs = self.dialogs.clone();
        self.spawn("dialog", move |reply| {
            let paths = dialogs.pick(&pick);
            reply.send(TaskEvent::Picked(pick, paths));
        });
    }

    /// Loads market data (empty `paths`: the bundled sample) with the draft's lookback.
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
                let split = &loaded.split;
                let ts = &d.timestamps;
                Box::new(DataInfoMsg(DataInfo {
                    paths,
                    source: loaded.source_name.clone(),
                    assets: d.names.clone(),
                    shape: DataShape {
                        n_assets: d.n_assets(),
                        n_features: d.n_features(),
                        train_bars: split.train.len(),
                    },
                    split_bars: [split.train.len(), split.validation.len(), split.test.len()],
                    range: (
                        ts.first().copied().unwrap_or(0),
                        ts.last().copied().unwrap_or(0),
                    ),
                    train: split.train.clone(),
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

    /// Reads the trials of `studies` (one study, or the members of an aggregated group).
    pub fn load_trials(&self, path: PathBuf, studies: Vec<String>) {
        self.spawn("trials", move |reply| {
            let result =
                read_trials(&path, &studies).map_err(|e| format!("{}: {e}", path.display()));
            reply.send(TaskEvent::Trials { studies, result });
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
            reply.send(TaskEvent::Exported(out, result));
        });
    }

    /// Whether a run is going.
    pub fn running(&self) -> bool {
        self.run_stop.is_some()
    }

    /// Asks the running run to stop after its current update.
    pub fn stop_run(&self) {
        if let Some(stop) = &self.run_stop {
            stop.store(true, Ordering::Relaxed);
        }
    }

    /// Marks the run finished (its `Done` arrived).
    pub fn run_finished(&mut self) {
        self.run_stop = None;
    }

    /// Trains one agent on `data` with `draft`, reporting every event.
    pub fn start_run(&mut self, draft: Draft, data: DataInfo) {
        let stop = Arc::new(AtomicBool::new(false));
        self.run_stop = Some(stop.clone());
        self.spawn("run", move |reply| {
            let result = train(&draft, &data, &stop, &reply);
            reply.send(TaskEvent::Run(RunMsg::Done(result)));
        });
    }
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
    let storage = Storage::open_read_only(db).map_err(|e| format!("{}: {e}", db.display()))?;
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

fn train(
    draft: &Draft,
    data: &DataInfo,
    stop: &Arc<AtomicBool>,
    reply: &Reply,
) -> Result<Box<TrainReport>, String> {
    let spec: DeviceSpec = draft.device.parse().map_err(|e| format!("device: {e}"))?;
    let device = open(spec).map_err(|e| format!("device {}: {e}", draft.device))?;
    let env = CpuVecEnv::new(draft.env.clone(), data.dataset.clone(), data.train.clone())
        .map_err(|e| e.to_string())?;
    debug_assert_eq!(env.action_dim(), data.shape.n_assets);
    let mut trainer = Trainer::new(draft.ppo.clone(), HostEnv::new(env, &device), &device)
        .map_err(|e| e.to_string())?;
    let trainer_stop = trainer.stop_flag();
    trainer
        .learn(draft.total_timesteps, &mut |event| {
            if stop.load(Ordering::Relaxed) {
                trainer_stop.store(true, Ordering::Relaxed);
            }
            reply.send(TaskEvent::Run(RunMsg::Train(event)));
        })
        .map(Box::new)
        .map_err(|e| e.to_string())
}
