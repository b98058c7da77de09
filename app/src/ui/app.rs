//! The frame loop: drain background events once, draw the tab bar and the current panel,
//! then carry out the commands the panels produced. The app composes the panels
//! ([`Panels`]) over one [`Context`]; it routes each job's answer to the panel that asked and
//! carries out the app-level [`Command`]s (effects reaching beyond one panel). A panel's own
//! actions stay in it; [`Action`] names any of them, so a test can send each one.

use std::sync::Arc;
use std::time::Duration;

use tradetune_engine::device::DeviceInfo;
use tradetune_engine::telemetry::{
    DRM_ROOT, GpuDiscovery, Sampler, SamplerConfig, SamplerCore, SysinfoHostProbe, source,
};

use super::close::{self, Choice, Closing};
use super::context::{Command, Context};
use super::dialog::{FileDialogs, Pick};
use super::panels::studies::{Export, StudiesView};
use super::panels::{self, Panels, backtest, compare, configure, hardware, run, studies};
use super::presets;
use super::settings::{Loaded, Settings};
use super::tasks::{self, DeviceProbe, TaskEvent, Tasks};

/// Any action of any panel, or an app-level command: what [`TradeTuneApp::handle`] takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// An effect for the app itself.
    App(Command),
    /// The Hardware & presets panel's.
    Hardware(hardware::Action),
    /// The Configure panel's.
    Configure(configure::Action),
    /// The Run panel's.
    Run(run::Action),
    /// The Studies panel's.
    Studies(studies::Action),
    /// The Compare panel's.
    Compare(compare::Action),
    /// The Backtest panel's.
    Backtest(backtest::Action),
}

macro_rules! action_from {
    ($($variant:ident: $ty:ty),*) => {
        $(impl From<$ty> for Action {
            fn from(a: $ty) -> Self {
                Action::$variant(a)
            }
        })*
    };
}
action_from!(App: Command, Hardware: hardware::Action, Configure: configure::Action,
    Run: run::Action, Studies: studies::Action, Compare: compare::Action,
    Backtest: backtest::Action);

/// Where eframe keeps the settings.
pub use super::settings::SETTINGS_KEY;

/// The desktop program.
pub struct TradeTuneApp {
    /// The context below the panels.
    pub cx: Context,
    /// The panels, each with its own state.
    pub panels: Panels,
    tasks: Tasks,
    started: bool,
    frames: u64,
    /// Text for the clipboard, put there at the end of the frame.
    clipboard: Option<String>,
    exit_after_frames: Option<u64>,
    /// Closing the window while a study runs (the dialog, and "finish running trials").
    pub closing: Closing,
    // Kept so the sampler thread lives as long as the app.
    _sampler: Option<Sampler>,
}

impl TradeTuneApp {
    /// An app with `settings` whose file dialogs are answered by `dialogs` and which knows
    /// `devices`. Nothing starts until the first frame.
    pub fn new(
        settings: Settings,
        dialogs: Arc<dyn FileDialogs>,
        devices: Vec<DeviceInfo>,
    ) -> Self {
        let tasks = Tasks::new(dialogs);
        let mut cx = Context::new(settings, devices, tasks.jobs().clone());
        match presets::bundled() {
            Ok(p) => cx.presets = p,
            Err(e) => cx.notice(format!(
                "warning: the bundled presets could not be read: {e}"
            )),
        }
        TradeTuneApp {
            cx,
            panels: Panels::default(),
            tasks,
            started: false,
            frames: 0,
            clipboard: None,
            exit_after_frames: None,
            closing: Closing::default(),
            _sampler: None,
        }
    }

    /// [`Self::new`] on the settings a launch read ([`super::settings::load`]): what they could
    /// not keep is told in a warning each.
    pub fn from_loaded(
        loaded: Loaded,
        dialogs: Arc<dyn FileDialogs>,
        devices: Vec<DeviceInfo>,
    ) -> Self {
        let mut app = Self::new(loaded.settings, dialogs, devices);
        for w in loaded.warnings {
            app.cx.notice(w);
        }
        app
    }

    /// On a first launch (no preset chosen yet), applies the bundled preset for this machine's
    /// GPU (`gpu_names` as the probes report them), or the CPU one; says so when the card has
    /// no preset of its own and the closest was taken.
    pub fn apply_hardware_preset(&mut self, gpu_names: &[String]) {
        if self.cx.settings.preset.is_some() {
            return;
        }
        let found = presets::match_hardware(gpu_names);
        self.handle(Command::ApplyPreset(found.preset.to_owned()));
        if let (Some(card), Some(why)) = (&found.card, found.closest_because)
            && self.cx.settings.preset.as_deref() == Some(found.preset)
        {
            self.cx.notice(format!(
                "no bundled preset was written for the {card}; {} is the closest: {why}",
                found.preset
            ));
        }
    }

    /// What a start does with the machine's GPUs: the telemetry sampler over `discovery`'s
    /// probes (see [`Self::start_telemetry_with`]) and, on a first launch, the preset for the
    /// cards they found (see [`Self::apply_hardware_preset`]).
    pub fn detect_hardware(&mut self, discovery: GpuDiscovery) {
        let gpus = self.start_telemetry_with(discovery);
        self.apply_hardware_preset(&gpus);
    }

    /// Lists the devices through `probe` when the user refreshes them (tests: a fixed list;
    /// the default asks wgpu again, [`tradetune_engine::device::refresh_devices`]).
    pub fn with_device_probe(mut self, probe: DeviceProbe) -> Self {
        self.tasks.set_device_probe(probe);
        self
    }

    /// Closes the window after `n` frames (the smoke test's clean exit).
    pub fn exit_after_frames(mut self, n: Option<u64>) -> Self {
        self.exit_after_frames = n;
        self
    }

    /// Queues background jobs (data, databases, trials, exports, …) instead of starting them,
    /// until [`Self::release_jobs`]: tests step frames while a job is certainly in flight.
    pub fn hold_jobs(&mut self) {
        self.tasks.jobs().hold();
    }

    /// Starts the jobs queued since [`Self::hold_jobs`]; returns how many.
    pub fn release_jobs(&mut self) -> usize {
        self.tasks.jobs().release()
    }

    /// Where a preset was saved or deleted this frame ([`Context::save_now`]), writes the
    /// settings to `storage` and flushes it now, not at eframe's next autosave (up to 30 s on,
    /// lost to a crash or a power cut meanwhile); called at the end of every frame. Without a
    /// storage (persistence off) the request is dropped: there is nowhere to write.
    pub fn save_if_asked(&mut self, storage: Option<&mut (dyn eframe::Storage + 'static)>) {
        if std::mem::take(&mut self.cx.save_now)
            && let Some(storage) = storage
        {
            eframe::App::save(self, storage);
            storage.flush();
        }
    }

    /// Starts the jobs queued since [`Self::hold_jobs`] but those named `name` (`"note"`,
    /// `"database"`, …), which stay queued, and keeps holding; returns how many started.
    pub fn release_jobs_except(&mut self, name: &str) -> usize {
        self.tasks.jobs().release_except(name)
    }

    /// Starts the live telemetry sampler (CPU, process and whatever GPUs answer) at 1 s;
    /// returns the names of the GPUs found.
    pub fn start_telemetry(&mut self) -> Vec<String> {
        let discovery = GpuDiscovery::discover(std::path::Path::new(DRM_ROOT), std::process::id());
        self.start_telemetry_with(discovery)
    }

    /// [`Self::start_telemetry`] over the probes `discovery` found (tests give their own).
    pub fn start_telemetry_with(&mut self, discovery: GpuDiscovery) -> Vec<String> {
        let pid = std::process::id();
        self.cx.gpus = discovery.devices();
        self.cx.no_gpu_reason = discovery.no_gpu_reason();
        let gpus: Vec<String> = self.cx.gpus.iter().map(|g| g.name.clone()).collect();
        if let Some(why) = &self.cx.no_gpu_reason {
            self.cx
                .notice(format!("telemetry: {why}; CPU and process figures only"));
        }
        let started = SysinfoHostProbe::new(Some(pid))
            .and_then(|host| {
                SamplerCore::new(
                    SamplerConfig::default(),
                    source::sources(discovery, Some(Box::new(host))),
                    None,
                )
            })
            .and_then(Sampler::start);
        match started {
            Ok(sampler) => {
                self.cx.telemetry = Some(sampler.handle());
                self._sampler = Some(sampler);
            }
            Err(e) => self.cx.notice(format!("warning: telemetry is off: {e}")),
        }
        gpus
    }

    /// Draws one frame into `ui` (the whole window).
    pub fn frame(&mut self, ui: &mut egui::Ui) {
        self.tasks.jobs().waker().set(ui.ctx());
        if !self.started {
            self.started = true;
            self.first_frame();
        }
        for event in self.tasks.drain() {
            self.on_event(event);
        }
        self.close_request(ui.ctx());
        self.cx.run = self.panels.run.status();
        self.cx.form_problems = self.panels.configure.form_problems();
        let mut commands = Vec::new();
        panels::draw(ui, &mut self.panels, &mut self.cx, &mut commands);
        self.run_commands(commands);
        if let Some(text) = self.clipboard.take() {
            ui.ctx().copy_text(text);
        }
        let studies = &self.panels.studies;
        if self.panels.run.running || studies.opening || studies.table.loading {
            ui.ctx().request_repaint_after(Duration::from_millis(250));
        } else if self.cx.telemetry.is_some() {
            // Live telemetry charts move once a second.
            ui.ctx().request_repaint_after(Duration::from_secs(1));
        }
        self.frames += 1;
        if let Some(n) = self.exit_after_frames
            && self.frames >= n
        {
            errln!("tradetune: drew {} frames, closing", self.frames);
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    /// A close request while a study runs, or the best trial is re-run with other seeds, asks
    /// first (see [`close`]); "finish" closes the window once they have ended, and "stop now"
    /// once the study has stored its running trials as interrupted (the window says so
    /// meanwhile).
    fn close_request(&mut self, ctx: &egui::Context) {
        let reseed = self.panels.studies.report.reseed.as_ref();
        let busy = close::Busy {
            study: self.tasks.running(),
            trials: self
                .panels
                .run
                .workers
                .iter()
                .filter(|w| w.trial.is_some())
                .count(),
            reseed: reseed.map(|r| (r.at, r.seeds)),
        };
        self.closing.on_request(ctx, busy.any());
        if let Some(choice) = close::dialog(ctx, &self.closing, busy) {
            let tasks = &mut self.tasks;
            self.closing
                .choose(ctx, choice, busy, |choice| match choice {
                    Choice::StopNow => tasks.interrupt_study(),
                    Choice::Finish => {
                        tasks.finish_running_trials();
                    }
                    Choice::Cancel => {}
                });
            match choice {
                // The re-run stops at its next update (the process ends with the window).
                Choice::StopNow => {
                    if let Some(r) = reseed {
                        r.cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    if busy.study {
                        self.cx.notice(
                            "stopping the study: its running trials are stored as \
                             interrupted, then the window closes",
                        );
                    }
                }
                Choice::Finish if busy.study => self.cx.notice(format!(
                    "finishing the running trials: no new trial starts, and the window closes \
                     when they end{}",
                    if busy.reseed.is_some() {
                        " and the re-run's last seed is done and its spread stored"
                    } else {
                        ""
                    }
                )),
                Choice::Finish => self.cx.notice(
                    "the window closes when the re-run's last seed is done and its spread stored",
                ),
                Choice::Cancel => {}
            }
        }
        self.closing.when_finished(ctx, busy);
        close::stopping(ctx, &self.closing);
    }

    fn first_frame(&mut self) {
        self.cx.reload_data();
        let mut out = Vec::new();
        if let Some(db) = self.cx.settings.database.clone() {
            self.panels
                .studies
                .handle(studies::Action::OpenDatabase(db), &self.cx, &mut out);
        } else if let Some(db) = studies::launch_database(&self.cx.settings) {
            // The database the Run panel writes to, when it exists: a study running from
            // another window or the command line shows at once.
            self.panels.studies.open_unremembered(&self.cx, db);
        }
        self.run_commands(out);
    }

    /// Carries out one action of a panel, or an app-level command (a button, a shortcut and
    /// a test all come here).
    pub fn handle(&mut self, action: impl Into<Action>) {
        let mut out = Vec::new();
        let (p, cx) = (&mut self.panels, &mut self.cx);
        match action.into() {
            Action::App(c) => out.push(c),
            Action::Hardware(a) => p.hardware.handle(a, cx, &mut out),
            Action::Configure(a) => p.configure.handle(a, cx, &mut out),
            Action::Run(a) => p.run.handle(a, &mut out),
            Action::Studies(a) => p.studies.handle(a, cx, &mut out),
            Action::Compare(a) => p.compare.handle(a, cx, p.studies.db.as_ref()),
            Action::Backtest(a) => p.backtest.handle(a, cx, &mut out),
        }
        self.run_commands(out);
    }

    /// Carries out app-level commands, and those they lead to (a backtest of a trial shows its
    /// panel: a round or two; the bound only keeps a mistake from looping).
    fn run_commands(&mut self, mut commands: Vec<Command>) {
        let mut rounds = 0;
        while !commands.is_empty() && rounds < 16 {
            rounds += 1;
            let mut out = Vec::new();
            for c in commands {
                self.command(c, &mut out);
            }
            commands = out;
        }
    }

    /// Carries out one app-level command.
    fn command(&mut self, command: Command, out: &mut Vec<Command>) {
        let (p, cx) = (&mut self.panels, &mut self.cx);
        match command {
            Command::SetTab(tab) => cx.settings.tab = tab,
            Command::Notice(n) => cx.notice(n),
            Command::DismissWarnings(upto) => {
                cx.warnings_dismissed = cx.warnings_dismissed.max(upto.min(cx.warnings_total))
            }
            Command::Copy(text) => self.clipboard = Some(text),
            Command::UseData(paths) => {
                cx.settings.data_files = paths.clone();
                cx.load_data(paths);
            }
            Command::ReloadData => cx.reload_data(),
            Command::Pick(pick) => cx.jobs.pick(pick),
            Command::ApplyPreset(name) => hardware::apply_preset(cx, &name),
            Command::Start => p.run.start(cx, &mut self.tasks),
            Command::Stop => {
                self.tasks.stop_study();
                cx.notice("stopping the study: running trials end now, no new ones start");
            }
            Command::StopTrial(number) => {
                if self.tasks.stop_trial(number) {
                    cx.notice(format!("stopping trial {number}"));
                } else {
                    cx.notice(format!("trial {number} is not running"));
                }
            }
            Command::ShowInStudies { db, study } => p.studies.reveal(cx, db, study),
            Command::StudyEnded { db, study } => p.studies.study_ended(cx, db, study),
            Command::RememberDatabase(label) => cx.settings.database = Some(label),
            Command::WriteRunsTo(db) => {
                // Kept (and saved with the settings) without a password typed into its URL:
                // a run reads it from ~/.pgpass or PGPASSWORD, and is told so.
                let label = crate::launch::db_label(&db);
                let dropped = label != db.to_string_lossy();
                cx.notice(format!(
                    "new runs write their studies to {label}{}",
                    if dropped {
                        "; the password typed into its URL is not kept: a run reads it from \
                         ~/.pgpass or PGPASSWORD"
                    } else {
                        ""
                    }
                ));
                cx.settings.study_db = Some(std::path::PathBuf::from(label));
            }
            Command::BacktestTrial(dir) => {
                p.backtest
                    .handle(backtest::Action::BacktestTrial(dir), cx, out)
            }
        }
    }

    /// Takes in one background job's answer: routes it to the panel that asked.
    fn on_event(&mut self, event: TaskEvent) {
        let mut out = Vec::new();
        let (p, cx) = (&mut self.panels, &mut self.cx);
        match event {
            TaskEvent::Devices(devices) => hardware::devices_listed(cx, devices),
            TaskEvent::Failed(why) => cx.notice(why),
            TaskEvent::Data { request, result } => cx.data_loaded(request, result),
            TaskEvent::Database { generation, result } => {
                p.studies.database_opened(cx, generation, result, &mut out)
            }
            TaskEvent::Trials {
                generation,
                studies,
                result,
            } => p.studies.trials_read(generation, studies, result),
            TaskEvent::Polled(polled) => p.studies.polled(cx, *polled, &mut out),
            TaskEvent::Curve(trial_id, result) => p.studies.curve_read(trial_id, result),
            TaskEvent::Report(key, result) => p.studies.report_computed(key, result),
            TaskEvent::Reseed(msg) => p.studies.on_reseed(msg, &mut out),
            TaskEvent::Study(msg) => {
                if matches!(msg, tasks::StudyMsg::Done(_)) {
                    self.tasks.study_finished();
                }
                let idle = p.studies.db.is_none() && !p.studies.opening;
                p.run.on_study(msg, idle, &mut out);
                cx.run = p.run.status();
            }
            TaskEvent::Picked(pick, paths) => {
                let first = paths.first().cloned();
                match pick {
                    Pick::DataFiles if !paths.is_empty() => out.push(Command::UseData(paths)),
                    Pick::DataFiles => {}
                    Pick::Database => {
                        if let Some(path) = first {
                            p.studies
                                .handle(studies::Action::OpenDatabase(path), cx, &mut out);
                        }
                    }
                    Pick::TrialsCsv(of) => StudiesView::export_to(cx, Export::Trials, of, first),
                    Pick::TelemetryCsv(of) => {
                        StudiesView::export_to(cx, Export::Telemetry, of, first)
                    }
                    Pick::Checkpoint => {
                        p.backtest
                            .handle(backtest::Action::CheckpointPicked(first), cx, &mut out)
                    }
                }
            }
            TaskEvent::Backtested { request, result } => p.backtest.finished(request, result),
            TaskEvent::Compared(result) => p.compare.finished(result),
            TaskEvent::NoteSaved(saved) => p.studies.note_saved(*saved, &mut out),
            TaskEvent::Exported(what, path, result) => match result {
                Ok((rows, files)) => cx.notice(format!(
                    "wrote {rows} {what} to {}",
                    tasks::files_text(&files, &path)
                )),
                Err(e) => cx.notice(format!("export failed: {e}")),
            },
        }
        self.run_commands(out);
    }
}

impl eframe::App for TradeTuneApp {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        self.frame(ui);
        self.save_if_asked(frame.storage_mut());
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, SETTINGS_KEY, &self.cx.settings);
    }

    /// The window is closing: a study still running (a signal closed the window without the
    /// dialog; "Stop now" waits for the study with the window drawn) is interrupted and given
    /// time to store its trials as FAIL "interrupted", so none is left RUNNING in the
    /// database. The last resort: the window is no longer drawn meanwhile.
    fn on_exit(&mut self) {
        if !self.tasks.interrupt_study_and_wait(Duration::from_secs(60)) {
            errln!(
                "the study did not stop within 60 s; its running trials will be failed by the \
                 next run once their heartbeat is stale"
            );
        }
    }
}
