//! What the app knows, apart from how it is drawn: the remembered settings, the machine's
//! devices, the loaded data, the status bar, and each panel's own view state (defined in its
//! panel module). Panels read it and edit the draft in place; actions go through
//! [`super::command::Command`].

use tradetune_engine::device::{DeviceInfo, DeviceSpec};
use tradetune_engine::telemetry::{GpuInfo, SamplerHandle};

use super::draft::Problem;
use super::presets::Preset;
use super::tasks::{DataInfo, DataInfoMsg};

pub use super::panels::backtest::{BacktestResult, BacktestView};
pub use super::panels::compare::{CompareView, Comparison};
pub use super::panels::configure::ConfigureView;
pub use super::panels::run::{LiveTrial, RunView, StudyEnd, WorkerView};
pub use super::panels::studies::{
    Curves, StudiesView, StudyGroup, TrialColumn, TrialRow, aggregate,
};
pub use super::settings::{Settings, Tab};

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

/// Everything the app knows.
pub struct AppState {
    /// Remembered between launches.
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
    /// The current run.
    pub run: RunView,
    /// The Studies panel.
    pub studies: StudiesView,
    /// The Compare panel.
    pub compare: CompareView,
    /// The Backtest panel.
    pub backtest: BacktestView,
    /// Live telemetry (None when the sampler could not start; the reason is in `notices`).
    pub telemetry: Option<SamplerHandle>,
    /// Messages for the status bar, newest last.
    pub notices: Vec<String>,
    /// The bundled presets.
    pub presets: Vec<Preset>,
    /// The Configure panel.
    pub configure: ConfigureView,
}

impl AppState {
    /// The state of a first launch with `settings`.
    pub fn new(settings: Settings, devices: Vec<DeviceInfo>) -> Self {
        AppState {
            settings,
            devices,
            refreshing_devices: false,
            gpus: Vec::new(),
            no_gpu_reason: None,
            data: DataState::None,
            data_requests: 0,
            run: RunView::default(),
            studies: StudiesView {
                sort: (TrialColumn::Number, true),
                live: true,
                poll_every: crate::ui::panels::studies::POLL_EVERY,
                ..StudiesView::default()
            },
            compare: CompareView::default(),
            backtest: BacktestView::default(),
            telemetry: None,
            notices: Vec::new(),
            presets: Vec::new(),
            configure: ConfigureView::default(),
        }
    }

    /// Adds a status-bar message.
    pub fn notice(&mut self, message: impl Into<String>) {
        self.notices.push(message.into());
        if self.notices.len() > 50 {
            self.notices.remove(0);
        }
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
            crate::ui::panels::configure::search_form_problems(&self.configure.search_forms)
                .into_iter()
                .filter(|p| {
                    draft
                        .search
                        .iter()
                        .any(|e| p.field == format!("search.{}", e.name))
                }),
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
        let wanted = self.settings.draft.device();
        self.devices
            .iter()
            .find(|d| d.name == wanted || (wanted.starts_with(&d.name) && d.name != "cpu"))
            .and_then(|d| d.memory_bytes)
            .or(class)
    }
}
