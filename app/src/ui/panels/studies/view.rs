//! What the Studies panel shows, apart from how it draws it: the open database's studies
//! (parallel ones aggregated), the selected group's trials as formatted rows, their order,
//! filter and the trial whose details are open.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tradetune_engine::storage::{
    CategoricalChoice, ParamValue, StudyDirection, StudySummary, TrialParam, TrialRecord,
    TrialState,
};
use tradetune_engine::study::importance::{ImportanceTrial, PedAnova};

use super::importance::ImportanceView;
use crate::ui::tasks::DbContents;

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
    /// The parameters as stored (internal value and distribution), for the importances.
    pub stored_params: Vec<TrialParam>,
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
            stored_params: t.params.clone(),
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
    /// The PostgreSQL URL typed beside "Open database…".
    pub url_input: String,
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
    /// A study to select once the database it is in has opened (the run's, after it ends).
    pub pending_select: Option<String>,
    /// The selected group's parameter importances (PED-ANOVA).
    pub importance: Option<ImportanceView>,
    /// The note being edited, if any.
    pub note_edit: Option<NoteEdit>,
    /// Why the last note could not be saved.
    pub note_error: Option<String>,
}

/// A note being edited: whose, the text so far and the version it started from.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteEdit {
    /// The study (a member of the selected group).
    pub study: String,
    /// The trial (storage id, number), or None for the study's note.
    pub trial: Option<(i64, i64)>,
    pub text: String,
    pub version: i64,
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

impl StudiesView {
    /// Sorts by `column` (again: reverses the order).
    pub fn sort_by(&mut self, column: TrialColumn) {
        let (current, ascending) = self.sort;
        self.sort = (column, if current == column { !ascending } else { true });
        self.refresh();
    }

    /// Shows or hides `column`.
    pub fn toggle_column(&mut self, column: TrialColumn) {
        if let Some(i) = self.hidden.iter().position(|h| *h == column) {
            self.hidden.remove(i);
        } else {
            self.hidden.push(column);
        }
    }

    /// Shows only trials in `state` (None: all).
    pub fn filter(&mut self, state: Option<TrialState>) {
        self.state_filter = state;
        self.refresh();
    }

    /// The members of the selected group.
    pub fn selected_members(&self) -> Option<&[String]> {
        self.groups
            .iter()
            .find(|g| Some(&g.name) == self.selected.as_ref())
            .map(|g| g.members.as_slice())
    }

    /// The trials of `studies` were read (dropped when another study was selected meanwhile).
    pub fn trials_read(&mut self, studies: Vec<String>, result: Result<Vec<TrialRow>, String>) {
        if self.selected_members() != Some(studies.as_slice()) {
            return;
        }
        self.loading_trials = false;
        match result {
            Ok(rows) => {
                self.rows = rows;
                self.refresh();
                self.update_importance();
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Computes the selected group's parameter importances (PED-ANOVA over the COMPLETE
    /// trials of all its studies, in the group's direction), unless they were computed for the
    /// same group at the same trial counts.
    pub fn update_importance(&mut self) {
        let Some(group) = self
            .groups
            .iter()
            .find(|g| Some(&g.name) == self.selected.as_ref())
        else {
            self.importance = None;
            return;
        };
        let n_complete = self
            .rows
            .iter()
            .filter(|r| r.state == TrialState::Complete)
            .count();
        let previous = self.importance.take();
        if let Some(p) = &previous
            && p.group == group.name
            && p.n_rows == self.rows.len()
            && p.n_complete == n_complete
        {
            self.importance = previous;
            return;
        }
        let direction = if group.minimize {
            StudyDirection::Minimize
        } else {
            StudyDirection::Maximize
        };
        let trials: Vec<ImportanceTrial<'_>> = self
            .rows
            .iter()
            .map(|r| ImportanceTrial {
                number: r.number,
                state: r.state,
                value: r.value,
                params: &r.stored_params,
            })
            .collect();
        let result = PedAnova::default()
            .evaluate(&group.name, direction, &trials)
            .map_err(|e| e.to_string());
        self.importance = Some(ImportanceView {
            group: group.name.clone(),
            n_rows: self.rows.len(),
            n_complete,
            result,
            computations: previous.map_or(0, |p| p.computations) + 1,
        });
    }

    /// A trial's curves were read (kept only while that trial's details are shown).
    pub fn curve_read(&mut self, trial_id: i64, result: Result<Curves, String>) {
        let shown = self
            .detail
            .and_then(|i| self.rows.get(i))
            .map(|r| r.trial_id);
        if shown == Some(trial_id) {
            self.curve = Some((trial_id, result));
        }
    }
}
