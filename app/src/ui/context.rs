//! What every panel draws with, below them all: the read-mostly [`Context`] (the remembered
//! settings and the draft in them, the machine's devices and GPUs, the market data, the live
//! telemetry, the status bar's notices, the presets, and the handle that starts background
//! jobs) and the app-level [`Command`]s, effects a panel asks of the app because they reach
//! beyond its own state (show a tab, load the data, open a dialog, start the study, show a
//! study in the Studies panel, put text on the clipboard).
//!
//! Each panel owns its own state and its own actions (`panels::*::Action`); it reads the
//! context and pushes commands. Only the Configure panel, which edits the draft, gets the
//! context mutably.

use std::path::PathBuf;

use tradetune_engine::device::{DeviceInfo, DeviceSpec};
use tradetune_engine::telemetry::{GpuInfo, SamplerHandle};

use super::dialog::Pick;
use super::draft::Problem;
use super::presets::Preset;
use super::settings::{Settings, Tab};
use super::tasks::{DataInfo, DataInfoMsg, Jobs};

/// An effect a panel asks of the app: what reaches beyond the panel's own state.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Show a panel.
    SetTab(Tab),
    /// Tell the user in the status bar.
    Notice(String),
    /// The user has read the warnings up to this number (those the window showed).
    DismissWarnings(u64),
    /// Put this text on the clipboard (at the end of the frame).
    Copy(String),
    /// Train on these files from now on (empty: the bundled sample) and load them.
    UseData(Vec<PathBuf>),
    /// Load the data files again (after a lookback change).
    ReloadData,
    /// Open this file dialog; the answer goes to the panel that asked.
    Pick(Pick),
    /// Apply the preset with this name to the draft (the data reloads when its lookback
    /// differs).
    ApplyPreset(String),
    /// Start the study the draft describes.
    Start,
    /// Stop the study: running trials end, no new ones start.
    Stop,
    /// Stop one running trial of the study.
    StopTrial(u64),
    /// Open this database in the Studies panel and select this study once it is there (the
    /// run's study; the database is not remembered).
    ShowInStudies {
        /// The database.
        db: PathBuf,
        /// The study.
        study: String,
    },
    /// The run's study in this database has ended: the Studies panel refreshes it where it
    /// shows it, opens it where it shows nothing, and otherwise stays where the user is (see
    /// [`crate::ui::panels::studies::StudiesView::study_ended`]).
    StudyEnded {
        /// The database.
        db: PathBuf,
        /// The study.
        study: String,
    },
    /// Remember this database (its label: a URL without its password) for the next launch.
    RememberDatabase(PathBuf),
    /// Run → Start writes its studies to this database from now on, remembered for the next
    /// launch as its label (a URL without its password, which comes from ~/.pgpass or
    /// PGPASSWORD).
    WriteRunsTo(PathBuf),
    /// Backtest a trial's saved policy (its checkpoint directory) in the Backtest panel.
    BacktestTrial(PathBuf),
}

/// The market data's state.
#[derive(Clone, Default)]
pub enum DataState {
    /// Nothing asked yet.
    #[default]
    None,
    /// Request `n` is loading.
    Loading(u64),
    /// Loaded.
    Ready(Box<DataInfo>),
    /// The files could not be used; the message names file and line.
    Failed(String),
}

impl DataState {
    /// The loaded data, if any.
    pub fn ready(&self) -> Option<&DataInfo> {
        match self {
            DataState::Ready(d) => Some(d),
            _ => None,
        }
    }
}

/// What every panel may know of the study the app runs (the Run panel owns the rest), kept
/// current by the app each frame.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunStatus {
    /// A study is running.
    pub running: bool,
    /// The status bar's words for it.
    pub line: String,
    /// The last samples per second it measured.
    pub samples_per_s: Option<f64>,
}

/// The context below the panels.
pub struct Context {
    /// Remembered between launches (the draft is in it).
    pub settings: Settings,
    /// Devices this build can train on here (and why not others).
    pub devices: Vec<DeviceInfo>,
    /// A "Refresh devices" is under way.
    pub refreshing_devices: bool,
    /// The GPUs the telemetry probes found (name, memory, driver, PCI bus), and why none when
    /// none answered.
    pub gpus: Vec<GpuInfo>,
    pub no_gpu_reason: Option<String>,
    /// The market data.
    pub data: DataState,
    /// Load requests made so far (answers to older ones are dropped).
    pub data_requests: u64,
    /// Live telemetry (None when the sampler could not start; the reason is in `notices`).
    pub telemetry: Option<SamplerHandle>,
    /// Messages for the status bar, newest last (the last 50).
    pub notices: Vec<String>,
    /// The warnings among them (notices that start `warning:`), kept apart as well (the last
    /// 50, each with its number in order of arrival), so the status bar's button reaches them
    /// however many notices came after (a study's summary at its end).
    pub warnings: Vec<(u64, String)>,
    /// Warnings so far, and how many of the first of them the user has dismissed.
    pub warnings_total: u64,
    pub warnings_dismissed: u64,
    /// The bundled presets.
    pub presets: Vec<Preset>,
    /// The running study, as every panel may see it.
    pub run: RunStatus,
    /// The problems of the Configure panel's forms that the draft cannot hold (a searched
    /// range's text that does not parse), kept current by the app: Start stays disabled.
    pub form_problems: Vec<Problem>,
    /// Starts background jobs; their answers come back to the app, which routes them.
    pub jobs: Jobs,
    /// The settings changed in a way not to be lost to a crash before eframe's next autosave
    /// (a preset saved or deleted): the window saves them at the end of this frame.
    pub save_now: bool,
}

/// Whether a notice is a warning (the engine's and the CLI's `warning: …` lines).
pub fn is_warning(notice: &str) -> bool {
    notice.starts_with("warning:")
}

impl Context {
    /// The context of a first launch with `settings`.
    pub fn new(settings: Settings, devices: Vec<DeviceInfo>, jobs: Jobs) -> Self {
        Context {
            settings,
            devices,
            refreshing_devices: false,
            gpus: Vec::new(),
            no_gpu_reason: None,
            data: DataState::None,
            data_requests: 0,
            telemetry: None,
            notices: Vec::new(),
            warnings: Vec::new(),
            warnings_total: 0,
            warnings_dismissed: 0,
            presets: Vec::new(),
            run: RunStatus::default(),
            form_problems: Vec::new(),
            jobs,
            save_now: false,
        }
    }

    /// The warnings the user has not dismissed.
    pub fn unread_warnings(&self) -> u64 {
        self.warnings_total.saturating_sub(self.warnings_dismissed)
    }

    /// Adds a status-bar message.
    pub fn notice(&mut self, message: impl Into<String>) {
        let message = message.into();
        if is_warning(&message) {
            self.warnings_total += 1;
            self.warnings.push((self.warnings_total, message.clone()));
            if self.warnings.len() > 50 {
                self.warnings.remove(0);
            }
        }
        self.notices.push(message);
        if self.notices.len() > 50 {
            self.notices.remove(0);
        }
    }

    /// Loads the market data from `paths` (empty: the bundled sample) with the draft's
    /// lookback; answers to older loads are dropped.
    pub fn load_data(&mut self, paths: Vec<PathBuf>) {
        self.data_requests += 1;
        self.data = DataState::Loading(self.data_requests);
        self.jobs
            .load_data(self.data_requests, paths, &self.settings.draft);
    }

    /// Loads the data files of the settings again (the lookback changed).
    pub fn reload_data(&mut self) {
        let files = self.settings.data_files.clone();
        self.load_data(files);
    }

    /// Market data load `request` finished (dropped when a newer load superseded it).
    pub fn data_loaded(&mut self, request: u64, result: Result<Box<DataInfoMsg>, String>) {
        if request != self.data_requests {
            return;
        }
        self.data = match result {
            Ok(info) => DataState::Ready(Box::new(info.0)),
            Err(e) => {
                self.notice(format!("data: {e}"));
                DataState::Failed(e)
            }
        };
    }

    /// Every problem of the draft with the loaded data and this machine's devices, field by
    /// field: what the panels flag where it is typed and what keeps Start disabled.
    pub fn problems(&self) -> Vec<Problem> {
        let draft = &self.settings.draft;
        let data = self.data.ready();
        let mut out = draft.problems(data.map(|d| d.shape), &self.settings.data_files);
        if let Some(d) = data {
            out.extend(draft.split_problems(&d.dataset.timestamps));
            out.extend(draft.evaluation_problems(&d.dataset.timestamps));
        }
        out.extend(self.device_problems());
        out.extend(
            self.form_problems
                .iter()
                .filter(|p| {
                    draft
                        .search
                        .iter()
                        .any(|e| p.field == format!("search.{}", e.name))
                })
                .cloned(),
        );
        out
    }

    /// The draft's devices that this build or machine cannot train on (as the Hardware panel
    /// lists them). Names the engine cannot parse are flagged by its own check instead.
    pub fn device_problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        for name in &self.settings.draft.study.devices {
            let Ok(spec) = name.parse::<DeviceSpec>() else {
                continue;
            };
            let same_kind: Vec<&DeviceInfo> = self
                .devices
                .iter()
                .filter(|d| {
                    d.name
                        .parse::<DeviceSpec>()
                        .is_ok_and(|s| std::mem::discriminant(&s) == std::mem::discriminant(&spec))
                })
                .collect();
            let exact = same_kind
                .iter()
                .find(|d| d.name.parse::<DeviceSpec>().is_ok_and(|s| s == spec));
            let usable = match exact {
                Some(d) => d.available,
                None => same_kind.is_empty() || same_kind.iter().any(|d| d.available),
            };
            if !usable {
                let why = exact
                    .or(same_kind.first())
                    .map_or(String::new(), |d| format!(": {}", d.detail));
                out.push(Problem {
                    field: "study.devices".into(),
                    message: format!("device {name} cannot be used here{why}"),
                });
            }
        }
        // A device that is not here or lacks a precision the trials can ask for (bf16 on wgpu),
        // by the same check that refuses the study at Start.
        if out.is_empty()
            && let Ok(file) = self.settings.draft.study_file(&self.settings.data_files)
            && let Ok(slots) = file.device_slots(&file.study.devices)
            && let Err(e) = tradetune_engine::study::ppo_trial::check_devices(&file, &slots)
        {
            out.push(Problem {
                field: "study.devices".into(),
                message: e.message.clone(),
            });
        }
        out
    }

    /// Memory of the device the draft trains on, when known: the device's own, else the
    /// device class's the study names (`device_memory_gib`, from its preset).
    pub fn device_bytes(&self) -> Option<u64> {
        let study = &self.settings.draft.study;
        let class = study
            .device_memory_gib
            .map(|gib| (gib * (1u64 << 30) as f64) as u64);
        device_memory(&self.devices, self.settings.draft.device()).or(class)
    }
}

/// The memory of the device named `wanted` among `devices`: the one of that exact name, else
/// the one naming the same device another way (`cuda` and `cuda:0`, `wgpu:discrete:1` and
/// `wgpu:1`, `flex` and `cpu`), as the runner parses `--device`. Never another device whose
/// name `wanted` merely starts with: `wgpu:1` is not the default adapter `wgpu`.
pub fn device_memory(devices: &[DeviceInfo], wanted: &str) -> Option<u64> {
    let spec = wanted.parse::<DeviceSpec>().ok();
    devices
        .iter()
        .find(|d| d.name == wanted)
        .or_else(|| {
            let spec = spec?;
            devices
                .iter()
                .find(|d| d.name.parse::<DeviceSpec>().ok() == Some(spec))
        })
        .and_then(|d| d.memory_bytes)
}
