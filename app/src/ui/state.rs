//! What the app knows, apart from how it is drawn: the remembered settings, the loaded data,
//! the open database, the running run. Panels read it and edit the draft in place; actions go
//! through [`super::command::Command`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use tradetune_engine::device::{DeviceInfo, DeviceSpec};
use tradetune_engine::eval::EvalReport;
use tradetune_engine::ppo::PhaseTimes;
use tradetune_engine::storage::{
    CategoricalChoice, ParamValue, StudyDirection, StudySummary, TrialRecord, TrialState,
};
use tradetune_engine::telemetry::ring::PlotPoint;
use tradetune_engine::telemetry::{GpuInfo, SamplerHandle};

use super::draft::Problem;
use super::presets::Preset;
use super::search_form::SearchForm;
use super::tasks::{DataInfo, DbContents};

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

/// A worker of the running study.
#[derive(Debug, Clone, Default)]
pub struct WorkerView {
    /// 0-based.
    pub worker: usize,
    /// The device it is bound to (`cpu`, `cpu#1`, `wgpu:0`).
    pub device: String,
    /// Its backend.
    pub backend: String,
    /// The trial it runs.
    pub trial: Option<u64>,
    /// How far that trial is (0 to 1).
    pub fraction: f64,
    /// The trial's last progress note.
    pub message: String,
    /// When that trial started.
    pub trial_started: Option<std::time::Instant>,
    /// Trials it ran.
    pub finished: usize,
    /// Samples per second of its current trial (0 between trials).
    pub samples_per_second: f64,
    /// No more trials for it.
    pub done: bool,
}

/// A trial of the running study, as the live table and the timeline show it.
#[derive(Debug, Clone)]
pub struct LiveTrial {
    /// Trial number.
    pub number: u64,
    /// Worker that ran it.
    pub worker: usize,
    /// Device it ran on.
    pub device: String,
    /// Its state so far.
    pub state: TrialState,
    /// Objective (complete) or last intermediate value (pruned).
    pub value: Option<f64>,
    /// Seconds after the study started that it started / ended.
    pub span: (f64, Option<f64>),
    /// Why it failed or was pruned.
    pub reason: Option<String>,
    /// `name=value` of its parameters.
    pub params: String,
    /// Intermediate values: (update, objective on the validation split).
    pub curve: Vec<PlotPoint>,
    /// Training metrics by name (`losses/policy_loss`, `rollout/ep_return_mean`, `charts/SPS`,
    /// `time/update_s`, …): (env steps, value) per update.
    pub metrics: BTreeMap<String, Vec<PlotPoint>>,
    /// The last update reported and the env steps trained on by then.
    pub update: u64,
    pub env_steps: u64,
}

impl LiveTrial {
    /// The newest value of `metric`.
    pub fn latest(&self, metric: &str) -> Option<f64> {
        self.metrics.get(metric)?.last().map(|p| p.v)
    }

    /// Seconds spent per phase over all its updates so far, by the phase's name.
    pub fn phase_seconds(&self) -> Vec<(&'static str, f64)> {
        PhaseTimes::default()
            .metrics()
            .iter()
            .map(|(name, _)| {
                let total = self
                    .metrics
                    .get(*name)
                    .map_or(0.0, |points| points.iter().map(|p| p.v).sum());
                (*name, total)
            })
            .collect()
    }
}

/// How a finished study ended.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyEnd {
    /// Trials COMPLETE, PRUNED, FAIL in this run.
    pub counts: [usize; 3],
    /// Whether the user stopped it.
    pub stopped: bool,
    /// Best trial of the whole study: (number, value).
    pub best: Option<(u64, f64)>,
}

/// The study being run (or the last one).
#[derive(Debug, Clone, Default)]
pub struct RunView {
    /// Whether it is going.
    pub running: bool,
    /// Its name.
    pub study: String,
    /// Its database.
    pub db: Option<PathBuf>,
    /// Trials asked for in this run.
    pub n_trials: usize,
    /// Trials already in the study before it.
    pub existing_trials: usize,
    /// Trials of dead processes found RUNNING and failed.
    pub recovered: Vec<u64>,
    /// Workers.
    pub workers: Vec<WorkerView>,
    /// Trials of this run, in start order.
    pub trials: Vec<LiveTrial>,
    /// The trial whose curve is shown.
    pub selected: Option<u64>,
    /// Samples per second of all workers together, at each update of any of them: (Unix
    /// seconds, as the telemetry charts, whose time axis it shares; samples/s).
    pub samples_per_second: Vec<PlotPoint>,
    /// When it started.
    pub started: Option<std::time::Instant>,
    /// How it ended.
    pub end: Option<StudyEnd>,
    /// Why it could not run.
    pub error: Option<String>,
}

impl RunView {
    /// Seconds since the study started.
    pub fn now_s(&self) -> f64 {
        self.started.map_or(0.0, |s| s.elapsed().as_secs_f64())
    }

    /// The trial with `number`.
    pub fn trial_mut(&mut self, number: u64) -> Option<&mut LiveTrial> {
        self.trials.iter_mut().find(|t| t.number == number)
    }

    /// Trials finished in this run.
    pub fn finished(&self) -> usize {
        self.trials.iter().filter(|t| t.span.1.is_some()).count()
    }
}

/// A study, or several parallel studies (`x_1`, `x_2`, `x_3`) shown as one.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyGroup {
    /// The shared name (`x`), or the study's own name.
    pub name: String,
    /// The studies in it.
    pub members: Vec<String>,
    /// Trials in each state, summed.
    pub n_by_state: [usize; 5],
    /// Best value over the members (by each study's direction).
    pub best: Option<f64>,
    /// Whether smaller values are better (the first member's direction).
    pub minimize: bool,
}

impl StudyGroup {
    /// Trials in all states.
    pub fn n_trials(&self) -> usize {
        self.n_by_state.iter().sum()
    }

    /// Trials in `state`.
    pub fn n(&self, state: TrialState) -> usize {
        self.n_by_state[state.index()]
    }
}

/// Groups studies named `base_N` (two or more sharing `base`) into one entry; the others stay
/// alone. The user runs three parallel copies of one study this way.
pub fn aggregate(studies: &[StudySummary]) -> Vec<StudyGroup> {
    fn base(name: &str) -> Option<&str> {
        let (base, n) = name.rsplit_once('_')?;
        (!base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(base)
    }
    let mut groups: Vec<StudyGroup> = Vec::new();
    for s in studies {
        let name = &s.study.name;
        let shared = base(name).filter(|b| {
            studies
                .iter()
                .filter(|o| base(&o.study.name) == Some(*b))
                .count()
                >= 2
        });
        let key = shared.unwrap_or(name);
        let minimize = s
            .study
            .directions
            .first()
            .is_none_or(|d| *d == StudyDirection::Minimize);
        let best = s.best.map(|(_, v)| v);
        match groups.iter_mut().find(|g| g.name == key) {
            Some(g) => {
                g.members.push(name.clone());
                for (acc, n) in g.n_by_state.iter_mut().zip(s.n_trials_by_state) {
                    *acc += n;
                }
                g.best = match (g.best, best) {
                    (Some(a), Some(b)) => Some(if minimize { a.min(b) } else { a.max(b) }),
                    (a, b) => a.or(b),
                };
            }
            None => groups.push(StudyGroup {
                name: key.to_owned(),
                members: vec![name.clone()],
                n_by_state: s.n_trials_by_state,
                best,
                minimize,
            }),
        }
    }
    groups
}

/// Columns of the trial table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrialColumn {
    /// Study the trial belongs to.
    Study,
    /// Trial number.
    #[default]
    Number,
    /// State.
    State,
    /// Objective value.
    Value,
    /// Wall time.
    Duration,
    /// Device it ran on.
    Device,
}

impl TrialColumn {
    /// Every column, in order.
    pub const ALL: [TrialColumn; 6] = [
        TrialColumn::Study,
        TrialColumn::Number,
        TrialColumn::State,
        TrialColumn::Value,
        TrialColumn::Duration,
        TrialColumn::Device,
    ];

    /// Header text.
    pub fn label(self) -> &'static str {
        match self {
            TrialColumn::Study => "study",
            TrialColumn::Number => "number",
            TrialColumn::State => "state",
            TrialColumn::Value => "value",
            TrialColumn::Duration => "duration s",
            TrialColumn::Device => "device",
        }
    }
}

/// One row of the trial table, with its cells already formatted (10,000 rows must draw
/// within a frame).
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRow {
    /// Study name.
    pub study: String,
    /// Trial number.
    pub number: i64,
    /// State.
    pub state: TrialState,
    /// Objective.
    pub value: Option<f64>,
    /// Seconds from start to end.
    pub duration_s: Option<f64>,
    /// Where it ran (the `device` attribute TradeTune stores).
    pub device: String,
    /// `name=value` of each parameter.
    pub params: String,
    /// Why it failed, when it did.
    pub fail_reason: Option<String>,
    /// Numeric parameters (categorical ones by their choice's index), for the
    /// parameter-vs-objective plot.
    pub numeric_params: Vec<(String, f64)>,
    /// Intermediate values (step, value): the trial's learning curve.
    pub intermediate: Vec<(i64, f64)>,
    /// What limited the trial, with a suggestion (the `verdict` attribute).
    pub verdict: Option<String>,
    /// Samples per second end to end (the `samples_per_s` attribute).
    pub samples_per_s: Option<f64>,
    /// Where its policy was saved (the `checkpoint` attribute), for a backtest.
    pub checkpoint: Option<PathBuf>,
    /// Backend, precision and worker, as stored with the trial.
    pub placement: String,
    /// The configuration the trial ran with, every field, as pretty JSON.
    pub applied_config: Option<String>,
    /// The storage's trial id (its learning curve and telemetry are keyed by it).
    pub trial_id: i64,
    /// The trial's telemetry summary as stored in its user attributes (`wall_s`, `phase_*_s`,
    /// `gpu0_mean_util_pct`, `host_peak_rss_mib`, …): (name, value as text).
    pub telemetry: Vec<(String, String)>,
}

/// Whether a user attribute belongs to the per-trial telemetry summary the runner stores.
fn is_telemetry_attr(key: &str) -> bool {
    key == "wall_s"
        || key.starts_with("phase_")
        || key.starts_with("host_")
        || key.starts_with("gpu")
}

impl TrialRow {
    /// The row of one stored trial.
    pub fn of(study: &str, t: &TrialRecord) -> TrialRow {
        let attr = |k: &str| {
            t.user_attr(k)
                .or_else(|| t.system_attr(k))
                .map(|v| v.python_str())
        };
        let duration_s = match (t.datetime_start, t.datetime_complete) {
            (Some(a), Some(b)) => Some((b - a).as_seconds_f64()),
            _ => None,
        };
        let params = t
            .params
            .iter()
            .map(|p| match p.external() {
                Ok(v) => format!("{}={}", p.name, param_text(&v)),
                Err(_) => format!("{}=?", p.name),
            })
            .collect::<Vec<_>>()
            .join(", ");
        TrialRow {
            trial_id: t.trial_id,
            telemetry: t
                .user_attrs
                .iter()
                .filter(|(k, _)| is_telemetry_attr(k))
                .map(|(k, v)| {
                    let text = match v.as_f64() {
                        Some(x) if x.fract() != 0.0 => format!("{x:.2}"),
                        _ => v.python_str(),
                    };
                    (k.clone(), text)
                })
                .collect(),
            study: study.to_owned(),
            number: t.number,
            state: t.state,
            value: t.value(),
            duration_s,
            device: attr("device").unwrap_or_default(),
            params,
            fail_reason: attr(tradetune_engine::storage::FAIL_REASON_KEY),
            numeric_params: t
                .params
                .iter()
                .map(|p| {
                    let v = match p.external() {
                        Ok(ParamValue::Float(x)) => x,
                        Ok(ParamValue::Int(i)) => i as f64,
                        _ => p.internal,
                    };
                    (p.name.clone(), v)
                })
                .collect(),
            intermediate: t.intermediate_values.clone(),
            verdict: attr("verdict"),
            samples_per_s: t.user_attr("samples_per_s").and_then(|v| v.as_f64()),
            checkpoint: attr("checkpoint").map(PathBuf::from),
            placement: ["backend", "precision", "worker"]
                .iter()
                .filter_map(|k| attr(k).map(|v| format!("{k} {v}")))
                .collect::<Vec<_>>()
                .join(", "),
            applied_config: t
                .user_attr(tradetune_engine::storage::APPLIED_CONFIG_KEY)
                .or_else(|| t.system_attr(tradetune_engine::storage::APPLIED_CONFIG_KEY))
                .map(|v| {
                    serde_json::from_str::<serde_json::Value>(&v.dumps())
                        .and_then(|j| serde_json::to_string_pretty(&j))
                        .unwrap_or_else(|_| v.dumps())
                }),
        }
    }

    /// Orders two rows by `column` (missing values last).
    pub fn cmp_by(&self, other: &TrialRow, column: TrialColumn) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let opt = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => a.total_cmp(&b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        match column {
            TrialColumn::Study => self
                .study
                .cmp(&other.study)
                .then(self.number.cmp(&other.number)),
            TrialColumn::Number => self
                .number
                .cmp(&other.number)
                .then(self.study.cmp(&other.study)),
            TrialColumn::State => self.state.index().cmp(&other.state.index()),
            TrialColumn::Value => opt(self.value, other.value),
            TrialColumn::Duration => opt(self.duration_s, other.duration_s),
            TrialColumn::Device => self.device.cmp(&other.device),
        }
    }
}

/// A parameter value as a person reads it.
fn param_text(v: &ParamValue) -> String {
    match v {
        ParamValue::Float(x) => format!("{x:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned(),
        ParamValue::Int(i) => i.to_string(),
        ParamValue::Choice(c) => match c {
            CategoricalChoice::None => "None".into(),
            CategoricalChoice::Bool(b) => b.to_string(),
            CategoricalChoice::Int(i) => i.to_string(),
            CategoricalChoice::Float(x) => x.to_string(),
            CategoricalChoice::Str(s) => s.clone(),
        },
    }
}

/// The Studies panel's view of the open database.
#[derive(Debug, Clone, Default)]
pub struct StudiesView {
    /// The open database.
    pub db: Option<DbContents>,
    /// Its studies, parallel ones aggregated.
    pub groups: Vec<StudyGroup>,
    /// Whether a database is being opened.
    pub opening: bool,
    /// Whether the selected study's trials are being read.
    pub loading_trials: bool,
    /// Why the last open failed.
    pub error: Option<String>,
    /// The group shown in the trial table.
    pub selected: Option<String>,
    /// Its trials, sorted and filtered by the fields below.
    pub rows: Vec<TrialRow>,
    /// The rows shown (indices into `rows`) after the state filter.
    pub visible: Vec<usize>,
    /// Sort column and direction.
    pub sort: (TrialColumn, bool),
    /// Show only this state.
    pub state_filter: Option<TrialState>,
    /// The row whose details are shown.
    pub detail: Option<usize>,
    /// The learning curve of the trial shown (its trial id, then the points by metric as
    /// (env steps, value), or why they could not be read); None while it loads.
    pub curve: Option<(i64, Result<Curves, String>)>,
    /// The parameter on the x axis of the parameter-vs-objective plot.
    pub plot_param: Option<String>,
    /// Columns hidden from the trial table.
    pub hidden: Vec<TrialColumn>,
}

impl StudiesView {
    /// Sorts `rows` and recomputes `visible` (after loading, sorting or filtering).
    pub fn refresh(&mut self) {
        let (column, ascending) = self.sort;
        self.rows.sort_by(|a, b| {
            let o = a.cmp_by(b, column);
            if ascending { o } else { o.reverse() }
        });
        self.visible = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| self.state_filter.is_none_or(|s| r.state == s))
            .map(|(i, _)| i)
            .collect();
        self.detail = None;
    }

    /// The row (an index into `rows`) of the best complete trial, which the table highlights:
    /// the one whose value is the selected group's best (by each study's direction, as the
    /// study list shows it).
    pub fn best_row(&self) -> Option<usize> {
        let group = self
            .groups
            .iter()
            .find(|g| Some(&g.name) == self.selected.as_ref())?;
        let best = group.best?;
        self.rows
            .iter()
            .position(|r| r.state == TrialState::Complete && r.value == Some(best))
    }
}

/// A trial's stored training curves: (env steps, value) points by metric name.
pub type Curves = BTreeMap<String, Vec<[f64; 2]>>;

/// A comparison as computed: the table and each side's values by trial number.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Side A as typed.
    pub a: String,
    /// Side B as typed.
    pub b: String,
    /// The side-by-side table (as `tradetune compare` prints it).
    pub table: String,
    /// (trial number, value) of A's complete trials.
    pub a_values: Vec<[f64; 2]>,
    /// Same for B.
    pub b_values: Vec<[f64; 2]>,
}

/// The Compare panel.
#[derive(Debug, Clone, Default)]
pub struct CompareView {
    /// Side A (`study` or `study#N`).
    pub a: String,
    /// Side B.
    pub b: String,
    /// Being computed.
    pub loading: bool,
    /// The last result.
    pub result: Option<Comparison>,
    /// Why the last comparison failed.
    pub error: Option<String>,
}

/// A backtest as shown: the text parts and the two equity curves.
#[derive(Debug, Clone, PartialEq)]
pub struct BacktestResult {
    /// Checkpoint, samples, split and data, for people.
    pub about: String,
    /// The metrics table.
    pub table: String,
    /// (days since the first bar, equity) of the agent.
    pub agent: Vec<[f64; 2]>,
    /// The same for equal weight.
    pub equal_weight: Vec<[f64; 2]>,
}

impl BacktestResult {
    /// The panel's view of `report`, introduced by `about`.
    pub fn of(about: String, report: &EvalReport) -> BacktestResult {
        let t0 = report.timestamps.first().copied().unwrap_or(0);
        let curve = |equity: &[f64]| -> Vec<[f64; 2]> {
            report
                .timestamps
                .iter()
                .zip(equity)
                .map(|(&t, &e)| [(t - t0) as f64 / 86_400.0, e])
                .collect()
        };
        BacktestResult {
            about,
            table: crate::ops::backtest::table(report),
            agent: curve(&report.agent_equity),
            equal_weight: curve(&report.equal_weight_equity),
        }
    }
}

/// The Backtest panel.
#[derive(Debug, Clone)]
pub struct BacktestView {
    /// The checkpoint directory.
    pub checkpoint: Option<PathBuf>,
    /// test, validation or train.
    pub split: String,
    /// Being computed.
    pub running: bool,
    /// The last result.
    pub result: Option<BacktestResult>,
    /// Why the last one failed.
    pub error: Option<String>,
}

impl Default for BacktestView {
    fn default() -> Self {
        BacktestView {
            checkpoint: None,
            split: "test".into(),
            running: false,
            result: None,
            error: None,
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
    /// Name typed into "Save as preset".
    pub new_preset_name: String,
    /// The `net_arch.pi` and `net_arch.vf` lists as typed.
    pub net_text: [String; 2],
    /// The bundled presets.
    pub presets: Vec<Preset>,
    /// The name of a new searched parameter being typed.
    pub new_search: String,
    /// The searched parameters' editor forms by name, with the stored text each was read from
    /// (a change of that text elsewhere, e.g. a preset, re-reads it).
    pub search_forms: std::collections::HashMap<String, (String, Option<SearchForm>)>,
    /// The device chosen in Configure's "add device".
    pub new_device: String,
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
                ..StudiesView::default()
            },
            compare: CompareView::default(),
            backtest: BacktestView::default(),
            telemetry: None,
            notices: Vec::new(),
            new_preset_name: String::new(),
            net_text: Default::default(),
            presets: Vec::new(),
            new_search: String::new(),
            search_forms: Default::default(),
            new_device: "cpu".into(),
        }
    }

    /// Adds a status-bar message.
    pub fn notice(&mut self, message: impl Into<String>) {
        self.notices.push(message.into());
        if self.notices.len() > 50 {
            self.notices.remove(0);
        }
    }

    /// Every problem of the draft with the loaded data and this machine's devices, field by
    /// field: what the panels flag where it is typed and what keeps Start disabled.
    pub fn problems(&self) -> Vec<Problem> {
        let draft = &self.settings.draft;
        let data = self.data.ready();
        let mut out = draft.problems(data.map(|d| d.shape), &self.settings.data_files);
        if let Some(d) = data {
            out.extend(draft.split_problems(&d.dataset.timestamps));
        }
        out.extend(self.device_problems());
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
