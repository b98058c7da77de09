//! The Studies panel's state at load, shared by the frame benchmark (`benches/frame.rs`) and
//! the test that draws parallel coordinates at that load (`tests/ui_parallel_load.rs`): a study
//! of `trials` COMPLETE trials over `params` parameters, held as the panel holds them after
//! reading a database, with the context it draws with.

#![allow(dead_code)] // each user takes what it needs

use std::path::PathBuf;
use std::sync::Arc;

use egui_kittest::Harness;

use tradetune_app::ui::context::Context;
use tradetune_app::ui::dialog::{FileDialogs, Pick};
use tradetune_app::ui::panels::studies::{PlotTab, StudiesView, StudyGroup};
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_app::ui::tasks::{DbContents, ParamCell, Tasks, TrialColumn, TrialRow, sig4};
use tradetune_engine::storage::{OptunaDistribution, TrialParam, TrialState};

/// Parameter `k` of trial `i`: its name, distribution and value. The first two are the
/// frame benchmark's original pair (a log-scaled learning rate, an integer env count); the
/// others alternate linear floats and integers.
fn param(k: usize, i: usize) -> (String, OptunaDistribution, f64) {
    match k {
        0 => (
            "ppo.learning_rate".into(),
            OptunaDistribution::float(1e-5, 1e-2, true, None).expect("a valid range"),
            1e-4 * (1 + i % 10) as f64,
        ),
        1 => (
            "env.n_envs".into(),
            OptunaDistribution::int(8, 64, false, 1).expect("a valid range"),
            (8 << (i % 4)) as f64,
        ),
        k if k % 2 == 0 => (
            format!("p{k}.float"),
            OptunaDistribution::float(0.0, 1.0, false, None).expect("a valid range"),
            ((i * (k + 3) * 7919) % 1000) as f64 / 1000.0,
        ),
        k => (
            format!("p{k}.int"),
            OptunaDistribution::int(1, 32, false, 1).expect("a valid range"),
            (1 + (i * (k + 5)) % 32) as f64,
        ),
    }
}

/// Dialogs that are all cancelled.
struct NoDialogs;

impl FileDialogs for NoDialogs {
    fn pick(&self, _: &Pick) -> Vec<PathBuf> {
        Vec::new()
    }
}

/// The Studies panel and the context it draws with (the jobs' answers are not read).
pub struct Studies {
    pub cx: Context,
    pub view: StudiesView,
    _tasks: Tasks,
}

impl Studies {
    /// Draws the panel into `ui` and carries out what was clicked (a brush), as the app does.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let mut commands = Vec::new();
        self.view.ui(ui, &self.cx, &mut commands);
    }
}

/// The Studies panel with `trials` COMPLETE trials over `params` parameters, sorted by value,
/// showing `plot`.
pub fn studies_state(trials: usize, params: usize, plot: PlotTab) -> Studies {
    let tasks = Tasks::new(Arc::new(NoDialogs));
    let cx = Context::new(
        Settings {
            tab: Tab::Studies,
            ..Settings::default()
        },
        Vec::new(),
        tasks.jobs().clone(),
    );
    let mut v = StudiesView::new();
    v.db = Some(DbContents {
        path: "bench.db".into(),
        studies: Vec::new(),
    });
    v.groups = vec![StudyGroup {
        name: "bench".into(),
        members: vec!["bench".into()],
        n_by_state: [0, trials, 0, 0, 0],
        best: Some(0.0),
        minimize: true,
    }];
    v.selected = Some("bench".into());
    v.table.rows = (0..trials).map(|i| row(i, params)).collect();
    v.table.sort = (TrialColumn::Value, false);
    v.plots.tab = plot;
    v.table.update_columns();
    v.table.refresh(&v.plots.brush);
    Studies {
        cx,
        view: v,
        _tasks: tasks,
    }
}

/// One frame as the desktop program draws it: the UI pass, then the tessellation of its shapes
/// into triangles (what eframe does before handing them to the GPU; the harness alone stops
/// after the pass). Returns the triangles' vertex count.
pub fn frame(harness: &mut Harness<'_, Studies>) -> usize {
    harness.step();
    let out = harness.output();
    harness
        .ctx
        .tessellate(out.shapes.clone(), out.pixels_per_point)
        .iter()
        .map(|p| match &p.primitive {
            egui::epaint::Primitive::Mesh(m) => m.vertices.len(),
            egui::epaint::Primitive::Callback(_) => 0,
        })
        .sum()
}

/// Trial `i` of the study of [`studies_state`] (COMPLETE, over `params` parameters), as the
/// panel holds it after reading it.
pub fn row(i: usize, params: usize) -> TrialRow {
    let distributions: Vec<Arc<OptunaDistribution>> =
        (0..params).map(|k| Arc::new(param(k, 0).1)).collect();
    let values: Vec<(String, f64)> = (0..params)
        .map(|k| {
            let (name, _, x) = param(k, i);
            (name, x)
        })
        .collect();
    TrialRow {
        param_cells: values
            .iter()
            .map(|(name, x)| ParamCell {
                name: name.clone(),
                text: sig4(*x),
                full: x.to_string(),
                key: *x,
            })
            .collect(),
        attrs: Vec::new(),
        started_s: Some(i as f64),
        ended_s: Some(i as f64 + 0.5),
        worker: format!("host#1/worker-{}", i % 4),
        trial_id: i as i64 + 1,
        telemetry: Vec::new(),
        study: "bench".into(),
        number: i as i64,
        state: TrialState::Complete,
        value: Some(((i * 7919) % 1000) as f64 / 1000.0),
        duration_s: Some(60.0 + (i % 97) as f64),
        device: format!("cpu:{}", i % 2),
        params: values
            .iter()
            .map(|(name, x)| format!("{name}={x}"))
            .collect::<Vec<_>>()
            .join(", "),
        fail_reason: None,
        numeric_params: values.clone(),
        intermediate: Vec::new(),
        stored_params: values
            .iter()
            .zip(&distributions)
            .map(|((name, x), d)| TrialParam {
                name: name.clone(),
                internal: *x,
                distribution: d.clone(),
            })
            .collect::<Vec<_>>()
            .into(),
        verdict: None,
        samples_per_s: Some(1000.0),
        steady_samples_per_s: Some(1200.0),
        checkpoint: None,
        placement: String::new(),
        applied_config: None,
        axis_positions: Default::default(),
    }
}
