//! The frame loop: drain background events once, draw the tab bar and the current panel,
//! then carry out the commands the panels produced. Commands and the jobs' answers are routed
//! to the panel modules that own them; what several panels share (the data, the telemetry
//! sampler, the clipboard) stays here and in [`Cx`].

use std::sync::Arc;
use std::time::Duration;

use tradetune_engine::device::DeviceInfo;
use tradetune_engine::telemetry::{
    DRM_ROOT, GpuDiscovery, Sampler, SamplerConfig, SamplerCore, SysinfoHostProbe, source,
};

use super::close::{self, Choice, Closing};
use super::command::{Command, Cx};
use super::dialog::{FileDialogs, Pick};
use super::panels::studies::{Export, report};
use super::panels::{self, backtest, compare, configure, hardware, run, studies};
use super::presets;
use super::state::{AppState, Settings};
use super::tasks::{DeviceProbe, TaskEvent, Tasks};

/// Where eframe keeps the settings.
pub const SETTINGS_KEY: &str = "tradetune-settings";

/// The desktop program.
pub struct TradeTuneApp {
    /// What it knows.
    pub state: AppState,
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
        let mut state = AppState::new(settings, devices);
        match presets::bundled() {
            Ok(p) => state.presets = p,
            Err(e) => state.notice(format!("the bundled presets could not be read: {e}")),
        }
        TradeTuneApp {
            state,
            tasks: Tasks::new(dialogs),
            started: false,
            frames: 0,
            clipboard: None,
            exit_after_frames: None,
            closing: Closing::default(),
            _sampler: None,
        }
    }

    /// On a first launch (no preset chosen yet), applies the bundled preset for this machine's
    /// GPU (`gpu_names` as the probes report them), or the CPU one; says so when the card has
    /// no preset of its own and the closest was taken.
    pub fn apply_hardware_preset(&mut self, gpu_names: &[String]) {
        if self.state.settings.preset.is_some() {
            return;
        }
        let found = presets::match_hardware(gpu_names);
        self.handle(Command::ApplyPreset(found.preset.to_owned()));
        if let (Some(card), Some(why)) = (&found.card, found.closest_because)
            && self.state.settings.preset.as_deref() == Some(found.preset)
        {
            self.state.notice(format!(
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
        self.tasks.hold();
    }

    /// Starts the jobs queued since [`Self::hold_jobs`]; returns how many.
    pub fn release_jobs(&mut self) -> usize {
        self.tasks.release()
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
        self.state.gpus = discovery.devices();
        self.state.no_gpu_reason = discovery.no_gpu_reason();
        let gpus: Vec<String> = self.state.gpus.iter().map(|g| g.name.clone()).collect();
        if let Some(why) = &self.state.no_gpu_reason {
            self.state
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
                self.state.telemetry = Some(sampler.handle());
                self._sampler = Some(sampler);
            }
            Err(e) => self.state.notice(format!("telemetry is off: {e}")),
        }
        gpus
    }

    /// Draws one frame into `ui` (the whole window).
    pub fn frame(&mut self, ui: &mut egui::Ui) {
        self.tasks.waker().set(ui.ctx());
        if !self.started {
            self.started = true;
            self.first_frame();
        }
        for event in self.tasks.drain() {
            self.on_event(event);
        }
        self.close_request(ui.ctx());
        let mut commands = Vec::new();
        panels::draw(ui, &mut self.state, &mut commands);
        for command in commands {
            self.handle(command);
        }
        if let Some(text) = self.clipboard.take() {
            ui.ctx().copy_text(text);
        }
        if self.state.run.running || self.state.studies.opening || self.state.studies.loading_trials
        {
            ui.ctx().request_repaint_after(Duration::from_millis(250));
        } else if self.state.telemetry.is_some() {
            // Live telemetry charts move once a second.
            ui.ctx().request_repaint_after(Duration::from_secs(1));
        }
        self.frames += 1;
        if let Some(n) = self.exit_after_frames
            && self.frames >= n
        {
            eprintln!("tradetune: drew {} frames, closing", self.frames);
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    /// A close request while a study runs asks first (see [`close`]); "finish running trials"
    /// closes the window once the study has ended.
    fn close_request(&mut self, ctx: &egui::Context) {
        let running = self.tasks.running();
        self.closing.on_request(ctx, running);
        let trials = self
            .state
            .run
            .workers
            .iter()
            .filter(|w| w.trial.is_some())
            .count();
        if let Some(choice) = close::dialog(ctx, &self.closing, trials) {
            let tasks = &mut self.tasks;
            self.closing.choose(ctx, choice, || {
                tasks.finish_running_trials();
            });
            if choice == Choice::Finish {
                self.state.notice(
                    "finishing the running trials: no new trial starts, and the window closes \
                     when they end",
                );
            }
        }
        self.closing.when_finished(ctx, running);
    }

    /// What a command or a job's answer is carried out with.
    fn cx(&mut self) -> Cx<'_> {
        Cx {
            state: &mut self.state,
            tasks: &mut self.tasks,
            clipboard: &mut self.clipboard,
        }
    }

    fn first_frame(&mut self) {
        let mut cx = self.cx();
        cx.reload_data();
        if let Some(db) = cx.state.settings.database.clone() {
            studies::open_database(&mut cx, db);
        } else if let Some(db) = studies::launch_database(&cx.state.settings) {
            // The database the Run panel writes to, when it exists: a study running from
            // another window or the command line shows at once.
            studies::open_unremembered(&mut cx, db);
        }
    }

    /// Carries out one user action: routes it to the panel that owns it.
    pub fn handle(&mut self, command: Command) {
        let mut cx = self.cx();
        let cx = &mut cx;
        match command {
            Command::SetTab(tab) => cx.state.settings.tab = tab,
            // Hardware & presets.
            Command::RefreshDevices => hardware::refresh_devices(cx),
            Command::ApplyPreset(name) => hardware::apply_preset(cx, &name),
            Command::DeletePreset(name) => hardware::delete_preset(cx.state, &name),
            Command::InstallLauncher { on_desktop } => {
                hardware::install_launcher(cx.state, on_desktop)
            }
            // Configure.
            Command::SavePreset(name) => configure::save_preset(cx.state, &name),
            Command::UseBundledData => configure::use_data(cx, Vec::new()),
            Command::UseDataFiles(paths) => configure::use_data(cx, paths),
            Command::PickDataFiles => cx.tasks.pick(Pick::DataFiles),
            Command::ReloadData => cx.reload_data(),
            Command::AddSearch(name) => configure::add_search(cx.state, &name),
            Command::RemoveSearch(name) => configure::remove_search(cx.state, &name),
            Command::AddDevice(name) => configure::add_device(cx.state, &name),
            Command::RemoveDevice(i) => configure::remove_device(cx.state, i),
            // Run.
            Command::Start => run::start(cx),
            Command::Stop => run::stop(cx),
            Command::StopTrial(number) => run::stop_trial(cx, number),
            Command::SelectRunTrial(number) => cx.state.run.selected = Some(number),
            Command::ShowRunInStudies => run::show_in_studies(cx),
            // Studies.
            Command::PickDatabase => cx.tasks.pick(Pick::Database),
            Command::OpenDatabase(path) => studies::open_database(cx, path),
            Command::SelectStudy(name) => studies::select(cx, &name),
            Command::SortTrials(column) => cx.state.studies.sort_by(column),
            Command::ToggleColumn(column) => cx.state.studies.toggle_column(column),
            Command::RefreshTrials => studies::live::poll(cx),
            Command::SetLive(on) => cx.state.studies.live = on,
            Command::BrushAxis(name, range) => cx.state.studies.set_brush(&name, range),
            Command::ShowPlot(tab) => cx.state.studies.plot_tab = tab,
            Command::ContourParams(x, y) => cx.state.studies.contour = Some((x, y)),
            Command::ShowTrial(i) => studies::show_trial(cx, i),
            Command::ShowReport(open) => report::show_report(cx, open),
            Command::ReportStudy(name) => report::report_study(cx, name),
            Command::RefreshReport => report::refresh(cx),
            Command::Reseed(seeds) => report::start_reseed(cx, seeds),
            Command::SetReseedSeeds(seeds) => cx.state.studies.report.seeds = seeds,
            Command::CancelReseed => report::cancel_reseed(cx),
            Command::FilterTrials(filter) => cx.state.studies.filter(filter),
            Command::ExportTrials => studies::ask_export(cx, Export::Trials),
            Command::ExportTelemetry => studies::ask_export(cx, Export::Telemetry),
            Command::CopyTrials => studies::copy_visible(cx),
            // Compare.
            Command::Compare(a, b) => compare::compare(cx, a, b),
            // Backtest.
            Command::PickCheckpoint => cx.tasks.pick(Pick::Checkpoint),
            Command::Backtest => backtest::run(cx),
            Command::BacktestTrial(dir) => backtest::run_trial(cx, dir),
        }
    }

    /// Takes in one background job's answer: routes it to the panel that asked.
    fn on_event(&mut self, event: TaskEvent) {
        let mut cx = self.cx();
        let cx = &mut cx;
        match event {
            TaskEvent::Devices(devices) => hardware::devices_listed(cx.state, devices),
            TaskEvent::Data { request, result } => cx.state.data_loaded(request, result),
            TaskEvent::Database(result) => studies::database_opened(cx, result),
            TaskEvent::Trials { studies, result } => cx.state.studies.trials_read(studies, result),
            TaskEvent::Polled(polled) => studies::live::polled(cx, *polled),
            TaskEvent::Curve(trial_id, result) => cx.state.studies.curve_read(trial_id, result),
            TaskEvent::Report(key, result) => report::computed(&mut cx.state.studies, key, result),
            TaskEvent::Reseed(msg) => report::on_reseed(cx, msg),
            TaskEvent::Study(msg) => run::on_study(cx, msg),
            TaskEvent::Picked(pick, paths) => {
                let first = paths.first().cloned();
                match pick {
                    Pick::DataFiles if !paths.is_empty() => configure::use_data(cx, paths),
                    Pick::DataFiles => {}
                    Pick::Database => {
                        if let Some(path) = first {
                            studies::open_database(cx, path);
                        }
                    }
                    Pick::TrialsCsv(_) => studies::export_to(cx, Export::Trials, first),
                    Pick::TelemetryCsv(_) => studies::export_to(cx, Export::Telemetry, first),
                    Pick::Checkpoint => cx.state.backtest.checkpoint_picked(first),
                }
            }
            TaskEvent::Backtested(result) => cx.state.backtest.finished(result),
            TaskEvent::Compared(result) => cx.state.compare.finished(result),
            TaskEvent::Exported(what, path, result) => match result {
                Ok(rows) => cx
                    .state
                    .notice(format!("wrote {rows} {what} to {}", path.display())),
                Err(e) => cx.state.notice(format!("export failed: {e}")),
            },
        }
    }
}

impl eframe::App for TradeTuneApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.frame(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, SETTINGS_KEY, &self.state.settings);
    }

    /// The window is closing: a running study is interrupted and given time to store its
    /// trials as FAIL "interrupted", so none is left RUNNING in the database.
    fn on_exit(&mut self) {
        if !self.tasks.interrupt_study_and_wait(Duration::from_secs(60)) {
            eprintln!(
                "the study did not stop within 60 s; its running trials will be failed by the \
                 next run once their heartbeat is stale"
            );
        }
    }
}
