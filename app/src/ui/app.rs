//! The frame loop: drain background events once, draw the tab bar and the current panel,
//! then handle the commands the panels produced.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tradetune_engine::device::DeviceInfo;
use tradetune_engine::telemetry::{
    DRM_ROOT, GpuDiscovery, Sampler, SamplerConfig, SamplerCore, SysinfoHostProbe, source,
};

use super::command::Command;
use super::dialog::{FileDialogs, Pick};
use super::panels;
use super::presets;
use super::search_form::SearchForm;
use super::state::{
    AppState, DataState, LiveTrial, RunView, Settings, StudiesView, StudyEnd, WorkerView,
};
use super::tasks::{DeviceProbe, StudyMsg, TaskEvent, Tasks};
use tradetune_engine::storage::TrialState;
use tradetune_engine::study::runner::StudyEvent;
use tradetune_engine::telemetry::ring::PlotPoint;

/// Where eframe keeps the settings.
pub const SETTINGS_KEY: &str = "tradetune-settings";

/// The desktop program.
pub struct TradeTuneApp {
    /// What it knows.
    pub state: AppState,
    tasks: Tasks,
    started: bool,
    frames: u64,
    pending_copy: Option<String>,
    /// A study to select once the database it is in has opened.
    pending_select: Option<String>,
    exit_after_frames: Option<u64>,
    /// Lists the devices again on "Refresh devices".
    device_probe: DeviceProbe,
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
            pending_copy: None,
            pending_select: None,
            exit_after_frames: None,
            device_probe: Arc::new(tradetune_engine::device::refresh_devices),
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
        self.device_probe = probe;
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
        let mut commands = Vec::new();
        panels::draw(ui, &mut self.state, &mut commands);
        for command in commands {
            self.handle(command);
        }
        if let Some(text) = self.pending_copy.take() {
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

    fn first_frame(&mut self) {
        let files = self.state.settings.data_files.clone();
        self.load_data(files);
        if let Some(db) = self.state.settings.database.clone() {
            self.open_database(db);
        }
    }

    fn load_data(&mut self, paths: Vec<PathBuf>) {
        self.state.data_requests += 1;
        let request = self.state.data_requests;
        self.state.data = DataState::Loading(request);
        self.tasks
            .load_data(request, paths, &self.state.settings.draft);
    }

    fn open_database(&mut self, path: PathBuf) {
        self.state.studies = StudiesView {
            opening: true,
            sort: self.state.studies.sort,
            ..StudiesView::default()
        };
        self.tasks.open_database(path);
    }

    /// Carries out one user action.
    pub fn handle(&mut self, command: Command) {
        let state = &mut self.state;
        match command {
            Command::SetTab(tab) => state.settings.tab = tab,
            Command::RefreshDevices => {
                if !state.refreshing_devices {
                    state.refreshing_devices = true;
                    self.tasks.refresh_devices(Arc::clone(&self.device_probe));
                }
            }
            Command::ApplyPreset(name) => {
                let all = presets::all(&state.presets, &state.settings.user_presets);
                match all.into_iter().find(|p| p.name == name) {
                    Some(p) => {
                        let lookback_changed =
                            p.draft.env.lookback != state.settings.draft.env.lookback;
                        state.settings.draft = p.draft;
                        state.settings.preset = Some(name.clone());
                        state.notice(format!("preset {name} applied"));
                        if lookback_changed {
                            let files = state.settings.data_files.clone();
                            self.load_data(files);
                        }
                    }
                    None => state.notice(format!("no preset named {name}")),
                }
            }
            Command::SavePreset(name) => {
                let name = name.trim().to_owned();
                if name.is_empty() {
                    state.notice("a preset needs a name");
                    return;
                }
                let draft = state.settings.draft.clone();
                let user = &mut state.settings.user_presets;
                match user.iter_mut().find(|p| p.name == name) {
                    Some(p) => p.draft = draft,
                    None => user.push(presets::UserPreset {
                        name: name.clone(),
                        draft,
                    }),
                }
                state.settings.preset = Some(name.clone());
                state.notice(format!("saved preset {name}"));
            }
            Command::DeletePreset(name) => {
                state.settings.user_presets.retain(|p| p.name != name);
            }
            Command::UseBundledData => {
                state.settings.data_files.clear();
                self.load_data(Vec::new());
            }
            Command::UseDataFiles(paths) => {
                state.settings.data_files = paths.clone();
                self.load_data(paths);
            }
            Command::ReloadData => {
                let files = state.settings.data_files.clone();
                self.load_data(files);
            }
            Command::PickDataFiles => self.tasks.pick(Pick::DataFiles),
            Command::Start => self.start(),
            Command::Stop => {
                self.tasks.stop_study();
                state.notice("stopping the study: running trials end now, no new ones start");
            }
            Command::StopTrial(number) => {
                if self.tasks.stop_trial(number) {
                    state.notice(format!("stopping trial {number}"));
                } else {
                    state.notice(format!("trial {number} is not running"));
                }
            }
            Command::SelectRunTrial(number) => state.run.selected = Some(number),
            Command::ShowRunInStudies => self.show_run_in_studies(),
            Command::AddSearch(name) => {
                let name = name.trim().to_owned();
                let draft = &mut state.settings.draft;
                if !draft.search.iter().any(|e| e.name == name) {
                    // An unknown name still gets a row: the study-file check then names it
                    // and lists the valid ones.
                    let spec = draft.fixed_value(&name).map_or_else(
                        || "{ low = 0.0, high = 1.0 }".to_owned(),
                        |v| SearchForm::around(&v).to_spec(),
                    );
                    draft.search.push(super::draft::SearchEntry { name, spec });
                }
                state.new_search.clear();
            }
            Command::RemoveSearch(name) => {
                state.settings.draft.search.retain(|e| e.name != name);
            }
            Command::AddDevice(name) => {
                let name = name.trim().to_owned();
                if !name.is_empty() {
                    state.settings.draft.study.devices.push(name);
                }
            }
            Command::RemoveDevice(i) => {
                let devices = &mut state.settings.draft.study.devices;
                if i < devices.len() {
                    devices.remove(i);
                }
            }
            Command::PickDatabase => self.tasks.pick(Pick::Database),
            Command::OpenDatabase(path) => {
                state.settings.database = Some(path.clone());
                self.open_database(path);
            }
            Command::SelectStudy(name) => {
                let Some(db) = &state.studies.db else { return };
                // A study name or the group it was aggregated into.
                let Some(group) = state
                    .studies
                    .groups
                    .iter()
                    .find(|g| g.name == name || g.members.contains(&name))
                else {
                    state.notice(format!("no study {name} in this database"));
                    return;
                };
                state.studies.selected = Some(group.name.clone());
                state.studies.rows.clear();
                state.studies.visible.clear();
                state.studies.detail = None;
                state.studies.loading_trials = true;
                self.tasks
                    .load_trials(db.path.clone(), group.members.clone());
            }
            Command::SortTrials(column) => {
                let (current, ascending) = state.studies.sort;
                state.studies.sort = (column, if current == column { !ascending } else { true });
                state.studies.refresh();
            }
            Command::ToggleColumn(c) => {
                let hidden = &mut state.studies.hidden;
                if let Some(i) = hidden.iter().position(|h| *h == c) {
                    hidden.remove(i);
                } else {
                    hidden.push(c);
                }
            }
            Command::ShowTrial(i) => {
                state.studies.detail = Some(i);
                state.studies.curve = None;
                if let (Some(row), Some(db)) = (state.studies.rows.get(i), &state.studies.db) {
                    self.tasks.load_curve(db.path.clone(), row.trial_id);
                }
            }
            Command::FilterTrials(filter) => {
                state.studies.state_filter = filter;
                state.studies.refresh();
            }
            Command::PickCheckpoint => self.tasks.pick(Pick::Checkpoint),
            Command::BacktestTrial(dir) => {
                state.backtest.checkpoint = Some(dir);
                state.backtest.result = None;
                state.settings.tab = super::state::Tab::Backtest;
                self.handle(Command::Backtest);
            }
            Command::Backtest => {
                if let Some(dir) = state.backtest.checkpoint.clone() {
                    state.backtest.running = true;
                    state.backtest.error = None;
                    self.tasks.backtest(dir, state.backtest.split.clone());
                }
            }
            Command::Compare(a, b) => {
                if let Some(db) = &state.studies.db {
                    state.compare.loading = true;
                    state.compare.error = None;
                    self.tasks.compare(db.path.clone(), a, b);
                }
            }
            Command::ExportTelemetry => {
                if let Some(name) = &state.studies.selected {
                    self.tasks
                        .pick(Pick::TelemetryCsv(format!("{name}_telemetry.csv")));
                }
            }
            Command::ExportTrials => {
                if let Some(name) = &state.studies.selected {
                    self.tasks
                        .pick(Pick::TrialsCsv(format!("{name}_trials.csv")));
                }
            }
            Command::InstallLauncher { on_desktop } => {
                // Two small files: quick enough for the UI thread.
                match crate::install::default_plan(on_desktop)
                    .and_then(|p| crate::install::install(&p))
                {
                    Ok(done) => {
                        let files: Vec<String> =
                            done.files.iter().map(|f| f.display().to_string()).collect();
                        state.notice(format!("installed {}", files.join(", ")));
                        for n in done.notes {
                            state.notice(n);
                        }
                    }
                    Err(e) => state.notice(format!("install failed: {e:#}")),
                }
            }
            Command::CopyTrials => {
                let csv = panels::studies::visible_csv(&state.studies);
                state.notice(format!(
                    "copied {} rows as CSV",
                    state.studies.visible.len()
                ));
                self.pending_copy = Some(csv);
            }
        }
    }

    fn start(&mut self) {
        let state = &mut self.state;
        if self.tasks.running() {
            state.notice("a study is already running");
            return;
        }
        let Some(data) = state.data.ready().cloned() else {
            state.notice("the data is not loaded yet");
            return;
        };
        let draft = state.settings.draft.clone();
        let files = state.settings.data_files.clone();
        if let Some(p) = state.problems().first() {
            state.notice(format!("cannot start: {}", p.message));
            return;
        }
        let memory = draft.memory(data.shape, state.device_bytes());
        if memory.over_budget() {
            state.notice(format!("cannot start: needs {}", memory.label()));
            return;
        }
        let file = match draft.study_file(&files) {
            Ok(f) => f,
            Err(e) => {
                state.notice(format!("cannot start: {e}"));
                return;
            }
        };
        let db = match &state.settings.study_db {
            Some(p) => p.clone(),
            None => match crate::launch::default_db() {
                Ok(p) => p,
                Err(e) => {
                    state.notice(format!("cannot start: {e:#}"));
                    return;
                }
            },
        };
        state.run = RunView {
            running: true,
            study: draft.study.name.clone(),
            db: Some(db.clone()),
            n_trials: draft.study.n_trials,
            started: Some(std::time::Instant::now()),
            ..RunView::default()
        };
        state.settings.tab = super::state::Tab::Run;
        state.notice(format!(
            "study {} starting in {}",
            draft.study.name,
            db.display()
        ));
        self.tasks.start_study(file, db);
    }

    /// Shows the run's study in the Studies panel (after it ends, or on demand).
    fn show_run_in_studies(&mut self) {
        let Some(db) = self.state.run.db.clone() else {
            return;
        };
        self.state.studies.selected = None;
        self.pending_select = Some(self.state.run.study.clone());
        self.open_database(db);
    }

    fn on_event(&mut self, event: TaskEvent) {
        let state = &mut self.state;
        match event {
            TaskEvent::Devices(devices) => {
                state.refreshing_devices = false;
                let usable = devices.iter().filter(|d| d.available).count();
                state.notice(format!(
                    "devices refreshed: {} listed, {usable} usable here",
                    devices.len()
                ));
                state.devices = devices;
            }
            TaskEvent::Data { request, result } => {
                if request != state.data_requests {
                    return; // a newer load superseded this one
                }
                state.data = match result {
                    Ok(info) => DataState::Ready(Box::new(info.0)),
                    Err(e) => {
                        state.notice(format!("data: {e}"));
                        DataState::Failed(e)
                    }
                };
            }
            TaskEvent::Database(result) => {
                state.studies.opening = false;
                match result {
                    Ok(db) => {
                        state.studies.groups = super::state::aggregate(&db.studies);
                        state.notice(format!(
                            "{}: {} studies",
                            db.path.display(),
                            db.studies.len()
                        ));
                        state.studies.db = Some(db);
                        state.studies.error = None;
                        if let Some(name) = self.pending_select.take() {
                            self.handle(Command::SelectStudy(name));
                        }
                    }
                    Err(e) => state.studies.error = Some(e),
                }
            }
            TaskEvent::Trials { studies, result } => {
                let wanted = state
                    .studies
                    .groups
                    .iter()
                    .find(|g| Some(&g.name) == state.studies.selected.as_ref())
                    .map(|g| g.members.clone());
                if wanted.as_ref() != Some(&studies) {
                    return; // the user selected another study meanwhile
                }
                state.studies.loading_trials = false;
                match result {
                    Ok(rows) => {
                        state.studies.rows = rows;
                        state.studies.refresh();
                    }
                    Err(e) => state.studies.error = Some(e),
                }
            }
            TaskEvent::Curve(trial_id, result) => {
                let shown = state
                    .studies
                    .detail
                    .and_then(|i| state.studies.rows.get(i))
                    .map(|r| r.trial_id);
                if shown == Some(trial_id) {
                    state.studies.curve = Some((trial_id, result));
                }
            }
            TaskEvent::Study(msg) => match msg {
                StudyMsg::Ready(stop) => self.tasks.study_ready(stop),
                StudyMsg::Event(e) => on_study_event(&mut state.run, e),
                StudyMsg::Notice(n) => state.notice(n),
                StudyMsg::Done(result) => {
                    self.tasks.study_finished();
                    state.run.running = false;
                    for w in &mut state.run.workers {
                        w.trial = None;
                    }
                    match result {
                        Ok(()) => {
                            let end = state.run.end.clone();
                            state.notice(match end {
                                Some(e) => format!(
                                    "study {} {}: {} complete, {} pruned, {} failed{}",
                                    state.run.study,
                                    if e.stopped { "stopped" } else { "finished" },
                                    e.counts[0],
                                    e.counts[1],
                                    e.counts[2],
                                    e.best.map_or(String::new(), |(n, v)| format!(
                                        "; best trial #{n} = {v:.6}"
                                    ))
                                ),
                                None => format!("study {} ended", state.run.study),
                            });
                        }
                        Err(e) => {
                            state.notice(format!("study failed: {e}"));
                            state.run.error = Some(e);
                        }
                    }
                    self.show_run_in_studies();
                }
            },
            TaskEvent::Picked(pick, paths) => match pick {
                Pick::DataFiles if !paths.is_empty() => {
                    self.handle(Command::UseDataFiles(paths));
                }
                Pick::Database => {
                    if let Some(p) = paths.into_iter().next() {
                        self.handle(Command::OpenDatabase(p));
                    }
                }
                Pick::TrialsCsv(_) => {
                    if let (Some(out), Some(db), Some(group)) = (
                        paths.into_iter().next(),
                        state.studies.db.as_ref(),
                        state.studies.selected.as_ref(),
                    ) {
                        let members = state
                            .studies
                            .groups
                            .iter()
                            .find(|g| &g.name == group)
                            .map(|g| g.members.clone())
                            .unwrap_or_default();
                        self.tasks.export_trials(db.path.clone(), members, out);
                    }
                }
                Pick::Checkpoint => {
                    if let Some(dir) = paths.into_iter().next() {
                        state.backtest.checkpoint = Some(dir);
                        state.backtest.result = None;
                        state.backtest.error = None;
                    }
                }
                Pick::TelemetryCsv(_) => {
                    if let (Some(out), Some(db), Some(group)) = (
                        paths.into_iter().next(),
                        state.studies.db.as_ref(),
                        state.studies.selected.as_ref(),
                    ) && let Some(g) = state.studies.groups.iter().find(|g| &g.name == group)
                    {
                        self.tasks
                            .export_telemetry(db.path.clone(), g.members.clone(), out);
                    }
                }
                _ => {}
            },
            TaskEvent::Backtested(result) => {
                state.backtest.running = false;
                match result {
                    Ok(r) => state.backtest.result = Some(*r),
                    Err(e) => state.backtest.error = Some(e),
                }
            }
            TaskEvent::Compared(result) => {
                state.compare.loading = false;
                match result {
                    Ok(c) => state.compare.result = Some(*c),
                    Err(e) => state.compare.error = Some(e),
                }
            }
            TaskEvent::Exported(what, path, result) => match result {
                Ok(rows) => state.notice(format!("wrote {rows} {what} to {}", path.display())),
                Err(e) => state.notice(format!("export failed: {e}")),
            },
        }
    }
}

fn on_study_event(run: &mut RunView, event: StudyEvent) {
    let now = run.now_s();
    match event {
        StudyEvent::StudyStarted {
            existing_trials,
            recovered,
            workers,
            n_trials,
            ..
        } => {
            run.existing_trials = existing_trials;
            run.recovered = recovered;
            run.n_trials = n_trials;
            run.workers = workers
                .into_iter()
                .map(|w| WorkerView {
                    worker: w.worker,
                    device: w.device,
                    backend: w.backend,
                    ..WorkerView::default()
                })
                .collect();
        }
        StudyEvent::TrialStarted {
            number,
            worker,
            device,
            params,
            ..
        } => {
            if let Some(w) = run.workers.get_mut(worker) {
                w.trial = Some(number);
                w.fraction = 0.0;
                w.message.clear();
                w.trial_started = Some(std::time::Instant::now());
            }
            let params = params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ");
            run.trials.push(LiveTrial {
                number,
                worker,
                device,
                state: TrialState::Running,
                value: None,
                span: (now, None),
                reason: None,
                params,
                curve: Vec::new(),
                metrics: Default::default(),
                update: 0,
                env_steps: 0,
            });
            if run.selected.is_none() {
                run.selected = Some(number);
            }
        }
        StudyEvent::Intermediate {
            number,
            step,
            value,
            ..
        } => {
            if let Some(t) = run.trial_mut(number) {
                t.curve.push(PlotPoint {
                    t: step as f64,
                    v: value,
                });
            }
        }
        StudyEvent::Metrics {
            number,
            worker,
            update,
            env_steps,
            values,
        } => {
            if let Some(w) = run.workers.get_mut(worker)
                && let Some(&sps) = values.get("charts/SPS")
            {
                w.samples_per_second = sps;
            }
            if let Some(t) = run.trial_mut(number) {
                t.update = update;
                t.env_steps = env_steps;
                for (name, v) in values {
                    t.metrics.entry(name).or_default().push(PlotPoint {
                        t: env_steps as f64,
                        v,
                    });
                }
            }
            let total: f64 = run.workers.iter().map(|w| w.samples_per_second).sum();
            run.samples_per_second.push(PlotPoint {
                t: unix_now(),
                v: total,
            });
        }
        StudyEvent::WorkerProgress {
            worker,
            fraction,
            message,
            ..
        } => {
            if let Some(w) = run.workers.get_mut(worker) {
                w.fraction = fraction;
                w.message = message;
            }
        }
        StudyEvent::TrialCompleted {
            number,
            worker,
            value,
            ..
        } => end_trial(
            run,
            number,
            worker,
            now,
            TrialState::Complete,
            Some(value),
            None,
        ),
        StudyEvent::TrialPruned {
            number,
            worker,
            value,
            reason,
            ..
        } => end_trial(
            run,
            number,
            worker,
            now,
            TrialState::Pruned,
            value,
            Some(reason),
        ),
        StudyEvent::TrialFailed {
            number,
            worker,
            reason,
            ..
        } => end_trial(
            run,
            number,
            worker,
            now,
            TrialState::Fail,
            None,
            Some(reason),
        ),
        StudyEvent::WorkerFinished { worker, .. } => {
            if let Some(w) = run.workers.get_mut(worker) {
                w.done = true;
                w.trial = None;
            }
        }
        StudyEvent::StudyFinished {
            completed,
            pruned,
            failed,
            stopped,
            best,
            ..
        } => {
            run.end = Some(StudyEnd {
                counts: [completed, pruned, failed],
                stopped,
                best,
            });
        }
    }
}

fn end_trial(
    run: &mut RunView,
    number: u64,
    worker: usize,
    now: f64,
    state: TrialState,
    value: Option<f64>,
    reason: Option<String>,
) {
    if let Some(t) = run.trial_mut(number) {
        t.state = state;
        t.value = value;
        t.span.1 = Some(now);
        t.reason = reason;
    }
    if let Some(w) = run.workers.get_mut(worker) {
        w.finished += 1;
        w.fraction = 1.0;
        w.samples_per_second = 0.0;
    }
}

/// Seconds since the Unix epoch: the telemetry charts' time axis.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl eframe::App for TradeTuneApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.frame(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, SETTINGS_KEY, &self.state.settings);
    }
}
