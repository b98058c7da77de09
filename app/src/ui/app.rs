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
use super::state::{AppState, DataState, RunView, Settings, StudiesView, TrialRow};
use super::tasks::{RunMsg, TaskEvent, Tasks};
use tradetune_engine::ppo::TrainEvent;
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
    exit_after_frames: Option<u64>,
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
        TradeTuneApp {
            state: AppState::new(settings, devices),
            tasks: Tasks::new(dialogs),
            started: false,
            frames: 0,
            pending_copy: None,
            exit_after_frames: None,
            _sampler: None,
        }
    }

    /// Closes the window after `n` frames (the smoke test's clean exit).
    pub fn exit_after_frames(mut self, n: Option<u64>) -> Self {
        self.exit_after_frames = n;
        self
    }

    /// Starts the telemetry sampler (CPU, process and whatever GPUs answer) at 1 s.
    pub fn start_telemetry(&mut self) {
        let started = (|| -> Result<Sampler, String> {
            let pid = std::process::id();
            let host = SysinfoHostProbe::new(Some(pid)).map_err(|e| e.to_string())?;
            let discovery = GpuDiscovery::discover(std::path::Path::new(DRM_ROOT), pid);
            if let Some(why) = discovery.no_gpu_reason() {
                self.state
                    .notice(format!("telemetry: {why}; CPU and process figures only"));
            }
            let core = SamplerCore::new(
                SamplerConfig::default(),
                source::sources(discovery, Some(Box::new(host))),
                None,
            )
            .map_err(|e| e.to_string())?;
            Sampler::start(core).map_err(|e| e.to_string())
        })();
        match started {
            Ok(sampler) => {
                self.state.telemetry = Some(sampler.handle());
                self._sampler = Some(sampler);
            }
            Err(e) => self.state.notice(format!("telemetry is off: {e}")),
        }
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
        if self.state.run.running || self.state.studies.opening {
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
            Command::ApplyPreset(name) => {
                let all = presets::all(&state.settings.user_presets);
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
                self.tasks.stop_run();
                state.notice("stopping after the current update");
            }
            Command::PickDatabase => self.tasks.pick(Pick::Database),
            Command::OpenDatabase(path) => {
                state.settings.database = Some(path.clone());
                self.open_database(path);
            }
            Command::SelectStudy(name) => {
                let Some(db) = &state.studies.db else { return };
                let Some(group) = state.studies.groups.iter().find(|g| g.name == name) else {
                    return;
                };
                state.studies.selected = Some(name);
                self.tasks
                    .load_trials(db.path.clone(), group.members.clone());
            }
            Command::SortTrials(column) => {
                let (current, ascending) = state.studies.sort;
                state.studies.sort = (column, if current == column { !ascending } else { true });
                state.studies.refresh();
            }
            Command::FilterTrials(filter) => {
                state.studies.state_filter = filter;
                state.studies.refresh();
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
            state.notice("a run is already going");
            return;
        }
        let Some(data) = state.data.ready().cloned() else {
            state.notice("the data is not loaded yet");
            return;
        };
        let draft = state.settings.draft.clone();
        let problems = draft.problems(Some(data.shape));
        if let Some(p) = problems.first() {
            state.notice(format!("cannot start: {}", p.message));
            return;
        }
        let memory = draft.memory(data.shape, state.device_bytes());
        if memory.over_budget() {
            state.notice(format!("cannot start: needs {}", memory.label()));
            return;
        }
        state.run = RunView {
            running: true,
            timesteps: (0, draft.total_timesteps),
            started: Some(std::time::Instant::now()),
            ..RunView::default()
        };
        state.settings.tab = super::state::Tab::Run;
        self.tasks.start_run(draft, data);
    }

    fn on_event(&mut self, event: TaskEvent) {
        let state = &mut self.state;
        match event {
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
                match result {
                    Ok(trials) => {
                        state.studies.rows =
                            trials.iter().map(|(s, t)| TrialRow::of(s, t)).collect();
                        state.studies.refresh();
                    }
                    Err(e) => state.studies.error = Some(e),
                }
            }
            TaskEvent::Run(msg) => on_run(&mut state.run, msg, &mut state.notices),
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
                _ => {}
            },
            TaskEvent::Exported(path, result) => match result {
                Ok(rows) => state.notice(format!("wrote {rows} trials to {}", path.display())),
                Err(e) => state.notice(format!("export failed: {e}")),
            },
        }
        if !self.state.run.running && self.tasks.running() {
            self.tasks.run_finished();
        }
    }
}

fn on_run(run: &mut RunView, msg: RunMsg, notices: &mut Vec<String>) {
    match msg {
        RunMsg::Train(event) => match event {
            TrainEvent::Started {
                device,
                total_timesteps,
                ..
            } => {
                run.device = device;
                run.timesteps.1 = total_timesteps;
            }
            TrainEvent::Progress {
                timesteps,
                samples_per_second,
                phases,
                ..
            } => {
                run.timesteps.0 = timesteps;
                let t = run.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
                run.samples_per_second.push(PlotPoint {
                    t,
                    v: samples_per_second,
                });
                run.phases.add(&phases);
            }
            TrainEvent::Episodes(e) => {
                let x = run.timesteps.0 as f64;
                run.episode_reward.push(PlotPoint {
                    t: x,
                    v: e.mean_reward as f64,
                });
                run.episode_return.push(PlotPoint {
                    t: x,
                    v: e.mean_return as f64,
                });
                run.equal_weight_return.push(PlotPoint {
                    t: x,
                    v: e.mean_equal_weight_return as f64,
                });
                run.last_episodes = Some(e);
            }
            TrainEvent::Update { update, stats } => {
                let x = update as f64;
                run.policy_loss.push(PlotPoint {
                    t: x,
                    v: stats.policy_loss as f64,
                });
                run.value_loss.push(PlotPoint {
                    t: x,
                    v: stats.value_loss as f64,
                });
                run.entropy.push(PlotPoint {
                    t: x,
                    v: stats.entropy as f64,
                });
                run.last_update = Some(stats);
            }
            TrainEvent::Finished { .. } => {}
        },
        RunMsg::Done(result) => {
            run.running = false;
            match result {
                Ok(report) => {
                    notices.push(format!(
                        "run {}: {} samples in {:.1} s ({:.0} samples/s)",
                        if report.stopped {
                            "stopped"
                        } else {
                            "finished"
                        },
                        report.timesteps,
                        report.elapsed_s,
                        report.samples_per_second
                    ));
                    run.report = Some(*report);
                }
                Err(e) => {
                    notices.push(format!("run failed: {e}"));
                    run.error = Some(e);
                }
            }
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
}
