//! Engine work off the UI thread. Each job runs on its own thread and reports through one
//! channel of [`TaskEvent`]s; every send wakes the UI (`request_repaint`), which drains the
//! channel once per frame. The UI thread never waits on a job.
//!
//! The jobs define what they answer (the payloads below and in their modules); the panels that
//! ask for them import those types, never the other way round. [`Jobs`] starts jobs (a cheap
//! handle the panels get through the app's context); [`Tasks`] is the app's end: it drains the
//! answers and holds the running study's controls.
//!
//! A job always answers: one that panics, or whose thread cannot start, answers with the
//! failure its caller gave when starting it (the event its answer would have been, carrying
//! why), so no panel waits for an answer that will not come.

pub mod columns;
mod data;
mod database;
pub mod live;
pub mod report;
pub mod results;
pub mod rows;
mod study;

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use tradetune_engine::front::launch::StudyHandle;

pub use self::columns::{Columns, Curves, ReadRows};
pub use self::data::{DataInfo, DataInfoMsg};
pub use self::database::{DbContents, NoteSaved, files_text};
pub use self::live::{LiveRequest, Polled};
pub use self::report::{ReportKey, ReseedMsg};
pub use self::results::{BacktestResult, Comparison};
pub use self::rows::{AxisPositions, ParamAxis, ParamCell, Scale, TrialColumn, TrialRow, sig4};
pub use self::study::StudyMsg;
use super::dialog::{FileDialogs, Pick};

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
    Database {
        /// The Studies panel's generation when asked (an answer to an open since replaced by
        /// another is dropped).
        generation: u64,
        /// Its studies, or why not.
        result: Result<DbContents, String>,
    },
    /// The trials of a (possibly aggregated) study were read and made into table rows.
    Trials {
        /// The Studies panel's generation when asked (a read for a selection or a database
        /// since replaced is dropped, even of a study of the same name).
        generation: u64,
        /// The studies they belong to.
        studies: Vec<String>,
        /// Rows, or why not.
        result: Result<ReadRows, String>,
    },
    /// An incremental read of the open study (see [`Jobs::poll_trials`]).
    Polled(Box<Polled>),
    /// A trial's learning curve was read: its trial id, the points by metric as (env steps,
    /// value), or why not.
    Curve(i64, Result<Curves, String>),
    /// A study's progress.
    Study(StudyMsg),
    /// A file dialog was answered.
    Picked(Pick, Vec<PathBuf>),
    /// A backtest finished.
    Backtested {
        /// Which request of the Backtest panel it answers (older answers are dropped).
        request: u64,
        /// The result or why not.
        result: Result<Box<BacktestResult>, String>,
    },
    /// A comparison finished.
    Compared(Result<Box<Comparison>, String>),
    /// The devices, listed anew (see [`Jobs::refresh_devices`]), or why not.
    Devices(Result<Vec<tradetune_engine::device::DeviceInfo>, String>),
    /// A study's report was computed (see [`Jobs::study_report`]): what it was asked at, and
    /// the report or why not.
    Report(
        ReportKey,
        Result<Box<tradetune_engine::front::report::StudyReport>, String>,
    ),
    /// A re-run of a study's best trial with other seeds reports (see [`Jobs::reseed`]).
    Reseed(ReseedMsg),
    /// A CSV export finished: what was written ("trials", "telemetry rows"), the file asked
    /// for, and the rows written with the files they went to (one per study of a group,
    /// beside the one asked for), or why not.
    Exported(&'static str, PathBuf, Result<(usize, Vec<PathBuf>), String>),
    /// A note was saved (see [`Jobs::save_note`]).
    NoteSaved(Box<NoteSaved>),
    /// A job that had nothing else to say stopped without answering: why (a notice).
    Failed(String),
}

impl TaskEvent {
    /// Whether this is a job's answer, after which it says nothing more: anything but a
    /// study's or a re-run's news on the way.
    fn ends_the_job(&self) -> bool {
        match self {
            TaskEvent::Study(msg) => matches!(msg, StudyMsg::Done(_)),
            TaskEvent::Reseed(msg) => matches!(msg, ReseedMsg::Done(..)),
            _ => true,
        }
    }
}

/// Starts background jobs; each answers on the app's channel and wakes the UI. Cloned into the
/// context the panels draw with, so a panel asks for its own jobs.
#[derive(Clone)]
pub struct Jobs {
    tx: Sender<TaskEvent>,
    waker: Waker,
    dialogs: Arc<dyn FileDialogs>,
    /// Jobs queued instead of started while held (see [`Jobs::hold`]).
    held: Arc<Mutex<Option<Vec<HeldJob>>>>,
    /// Lists the devices on "Refresh devices" (shared by the clones: a test's probe set on
    /// the app reaches the panels' handle too).
    device_probe: Arc<Mutex<DeviceProbe>>,
}

/// The app's end of the jobs: their answers, and the running study's controls.
pub struct Tasks {
    jobs: Jobs,
    rx: Receiver<TaskEvent>,
    /// The running study's controls (there from Start on, before its data loads).
    study: Option<StudyHandle>,
}

/// How the app lists its devices: the engine's [`refresh_devices`] (tests give their own).
///
/// [`refresh_devices`]: tradetune_engine::device::refresh_devices
pub type DeviceProbe = Arc<dyn Fn() -> Vec<tradetune_engine::device::DeviceInfo> + Send + Sync>;

/// A job waiting for [`Jobs::release`].
struct HeldJob {
    /// Its thread's name.
    name: String,
    /// Its work.
    job: Box<dyn FnOnce() + Send>,
    /// Its reply, holding its answer for stopping without one.
    reply: Reply,
}

/// What a job answers where it stops without its answer: the event, from why.
type LostAnswer = Arc<Mutex<Option<Box<dyn FnOnce(String) -> TaskEvent + Send>>>>;

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

/// Sends and wakes. A job's reply holds the job's answer for stopping without one, until the
/// job sends its answer ([`TaskEvent::ends_the_job`]).
#[derive(Clone)]
struct Reply {
    tx: Sender<TaskEvent>,
    waker: Waker,
    lost: Option<LostAnswer>,
}

impl Reply {
    fn send(&self, event: TaskEvent) {
        if event.ends_the_job()
            && let Some(lost) = &self.lost
        {
            lost.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
        // A closed channel means the app is gone; nothing is left to tell.
        let _ = self.tx.send(event);
        self.waker.wake();
    }

    /// The job stopped without its answer: sends the answer it left for that, unless it has
    /// answered already.
    fn lost(&self, why: String) {
        let answer =
            (self.lost.as_ref()).and_then(|l| l.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(answer) = answer {
            self.send(answer(why));
        }
    }
}

impl Tasks {
    /// A task handle whose file dialogs are answered by `dialogs`.
    pub fn new(dialogs: Arc<dyn FileDialogs>) -> Self {
        let (tx, rx) = channel();
        Tasks {
            jobs: Jobs {
                tx,
                waker: Waker::default(),
                dialogs,
                held: Arc::new(Mutex::new(None)),
                device_probe: Arc::new(Mutex::new(Arc::new(
                    tradetune_engine::device::refresh_devices,
                ))),
            },
            rx,
            study: None,
        }
    }

    /// The handle that starts jobs.
    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    /// Lists the devices through `probe` from now on (tests: a fixed list; the default asks
    /// wgpu again, [`tradetune_engine::device::refresh_devices`]).
    pub fn set_device_probe(&mut self, probe: DeviceProbe) {
        *self
            .jobs
            .device_probe
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = probe;
    }

    /// Events that arrived since the last call.
    pub fn drain(&self) -> Vec<TaskEvent> {
        self.rx.try_iter().collect()
    }
}

impl Jobs {
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
        for job in jobs {
            self.start_thread(job);
        }
        n
    }

    /// Starts the jobs queued since [`Self::hold`] (in order) but those of the kind `name`
    /// (a job's name, such as `"note"`), which stay queued, and keeps holding; returns how
    /// many started. A test lets other jobs answer while one stays in flight.
    pub fn release_except(&self, name: &str) -> usize {
        let kept = format!("tradetune-{name}");
        let jobs = {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            let Some(queue) = held.as_mut() else {
                return 0;
            };
            let (keep, start) = std::mem::take(queue)
                .into_iter()
                .partition::<Vec<_>, _>(|j| j.name == kept);
            *queue = keep;
            start
        };
        let n = jobs.len();
        for job in jobs {
            self.start_thread(job);
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
            lost: None,
        }
    }

    /// A reply for a job that answers `lost(why)` where it stops without its answer (see
    /// [`Self::start`]).
    fn reply_or(&self, lost: impl FnOnce(String) -> TaskEvent + Send + 'static) -> Reply {
        Reply {
            lost: Some(Arc::new(Mutex::new(Some(Box::new(lost))))),
            ..self.reply()
        }
    }

    /// Starts `job` on a thread of its own; where it panics, or its thread cannot start, before
    /// it has sent its answer, the app is sent `lost(why)` instead.
    fn spawn(
        &self,
        name: &str,
        lost: impl FnOnce(String) -> TaskEvent + Send + 'static,
        job: impl FnOnce(Reply) + Send + 'static,
    ) {
        self.start(name, self.reply_or(lost), job);
    }

    /// [`Self::spawn`] with the reply made beforehand ([`Self::reply_or`]), for a job whose
    /// work is handed its reply before it starts.
    fn start(&self, name: &str, reply: Reply, job: impl FnOnce(Reply) + Send + 'static) {
        let (told, what) = (reply.clone(), name.to_owned());
        let job: Box<dyn FnOnce() + Send> = Box::new(move || {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(told.clone())));
            if let Err(panic) = ran {
                let why = tradetune_engine::study::runner::panic_message(&panic);
                told.lost(format!(
                    "the {what} job stopped unexpectedly (a panic: {why})"
                ));
            }
        });
        let job = HeldJob {
            name: format!("tradetune-{name}"),
            job,
            reply,
        };
        {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(queue) = held.as_mut() {
                queue.push(job);
                return;
            }
        }
        self.start_thread(job);
    }

    fn start_thread(&self, held: HeldJob) {
        let HeldJob { name, job, reply } = held;
        if let Err(e) = std::thread::Builder::new().name(name).spawn(job) {
            reply.lost(format!("could not start a background thread: {e}"));
        }
    }

    /// Lists the devices anew through the device probe (it asks the graphics drivers, which may
    /// take a moment); the answer arrives as [`TaskEvent::Devices`].
    pub fn refresh_devices(&self) {
        let probe = Arc::clone(&self.device_probe.lock().unwrap_or_else(|p| p.into_inner()));
        self.spawn(
            "devices",
            |why| TaskEvent::Devices(Err(why)),
            move |reply| reply.send(TaskEvent::Devices(Ok(probe()))),
        );
    }

    /// Opens the dialog for `pick`; the answer arrives as [`TaskEvent::Picked`].
    pub fn pick(&self, pick: Pick) {
        let dialogs = self.dialogs.clone();
        self.spawn("dialog", TaskEvent::Failed, move |reply| {
            let paths = dialogs.pick(&pick);
            reply.send(TaskEvent::Picked(pick, paths));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    struct NoDialogs;
    impl FileDialogs for NoDialogs {
        fn pick(&self, _: &Pick) -> Vec<PathBuf> {
            Vec::new()
        }
    }

    /// The events of `tasks` that arrive within `wait`.
    fn events(tasks: &Tasks, wait: Duration) -> Vec<TaskEvent> {
        let end = Instant::now() + wait;
        let mut got = Vec::new();
        while Instant::now() < end {
            got.extend(tasks.drain());
            std::thread::sleep(Duration::from_millis(10));
        }
        got
    }

    /// A job that panics before its answer answers with its failure; one that panics after
    /// it (in a drop, say) answers once; news on the way does not count as the answer.
    #[test]
    fn a_job_answers_once_whether_or_not_it_panics() {
        let tasks = Tasks::new(Arc::new(NoDialogs));
        let jobs = tasks.jobs();
        jobs.spawn("before", TaskEvent::Failed, |_| panic!("no answer"));
        let got = events(&tasks, Duration::from_secs(1));
        assert!(
            matches!(&got[..], [TaskEvent::Failed(why)]
                if why == "the before job stopped unexpectedly (a panic: no answer)"),
            "{got:?}"
        );

        jobs.spawn("after", TaskEvent::Failed, |reply| {
            reply.send(TaskEvent::Compared(Err("answered".into())));
            panic!("{}", String::from("too late"));
        });
        let got = events(&tasks, Duration::from_secs(1));
        assert!(
            matches!(&got[..], [TaskEvent::Compared(Err(e))] if e == "answered"),
            "{got:?}"
        );

        let lost = |why| TaskEvent::Reseed(ReseedMsg::Done("s".into(), Err(why)));
        jobs.spawn("on the way", lost, |reply| {
            reply.send(TaskEvent::Reseed(ReseedMsg::Progress(1, 3)));
            panic!("midway");
        });
        let got = events(&tasks, Duration::from_secs(1));
        assert!(
            matches!(&got[..], [
                TaskEvent::Reseed(ReseedMsg::Progress(1, 3)),
                TaskEvent::Reseed(ReseedMsg::Done(_, Err(why))),
            ] if why.contains("midway")),
            "{got:?}"
        );
    }
}
