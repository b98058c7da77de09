//! Pictures of the Studies panel over the Optuna reference database and a cross-validated
//! study: the study list and trial table, the plots, the report (see `ui_snapshots`).

use std::path::PathBuf;

use crate::common::snapshots::*;
use crate::common::{self, ui};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::panels::studies::Action as StudyAction;
use tradetune_app::ui::panels::studies::PlotTab;
use tradetune_app::ui::settings::{Settings, Tab};

#[test]
fn studies_of_the_optuna_reference_database() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = opened_reference_db(dir.path(), Tab::Studies);
    let group = h
        .state()
        .panels
        .studies
        .groups
        .iter()
        .find(|g| g.members.len() > 1)
        .map(|g| g.name.clone())
        .expect("an aggregated group");
    h.state_mut().handle(StudyAction::SelectStudy(group));
    step_until(&mut h, "the trials", |a| {
        !a.panels.studies.table.rows.is_empty()
    });
    // The path is a temp dir: hide it from the picture.
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("optuna-reference.db");
    }
    h.state_mut().cx.notices.clear();
    h.run_steps(4);
    snapshot(&mut h, "studies");
}

/// The parallel coordinates of the reference database's aggregated study (log, categorical
/// and mixed-choice axes), one axis brushed; its contour over a log and a linear parameter;
/// and the intermediate values of its other study.
#[test]
fn studies_parallel_coordinates_contour_and_intermediate_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = aggressive_selected(dir.path());
    h.state_mut()
        .handle(StudyAction::ShowPlot(PlotTab::ParallelCoordinates));
    h.state_mut().handle(StudyAction::BrushAxis(
        "activation".into(),
        Some((0.5, 1.5)),
    ));
    h.run_steps(4);
    snapshot(&mut h, "studies_parallel");
    h.state_mut()
        .handle(StudyAction::ShowPlot(PlotTab::Contour));
    h.state_mut()
        .handle(StudyAction::ContourParams("lr".into(), "gamma".into()));
    h.run_steps(4);
    snapshot(&mut h, "studies_contour");
    h.state_mut()
        .handle(StudyAction::SelectStudy("ref_single_max".into()));
    step_until(&mut h, "the trials", |a| {
        a.panels
            .studies
            .table
            .rows
            .iter()
            .any(|r| r.study == "ref_single_max")
    });
    h.state_mut()
        .handle(StudyAction::ShowPlot(PlotTab::Intermediate));
    h.run_steps(4);
    snapshot(&mut h, "studies_intermediate");

    // Workers across machines: labels as `tradetune worker` stores them (the reference study
    // was written by Optuna, which records none), then the hosts table and the timeline.
    for (i, r) in h
        .state_mut()
        .panels
        .studies
        .table
        .rows
        .iter_mut()
        .enumerate()
    {
        let (worker, device) = match i % 3 {
            0 => ("gpu-box#4711/worker-0", "wgpu:0"),
            1 => ("gpu-box#4711/worker-1", "wgpu:0"),
            _ => ("laptop#815/worker-0", "cpu"),
        };
        r.worker = worker.into();
        r.device = device.into();
    }
    h.state_mut()
        .handle(StudyAction::ShowPlot(PlotTab::Workers));
    h.run_steps(4);
    h.get_by_label("gpu-box");
    h.get_by_label("laptop");
    assert!(h.get_all_by_label("wgpu:0").next().is_some());
    snapshot(&mut h, "studies_workers");
}

/// The Report view of a cross-validated study built without training (six trials with stored
/// fold returns, common/cv_study.rs), with a stored seed spread: the best trial and its
/// folds, PBO with its logit histogram, the deflated Sharpe, the seed spread's box plots.
#[test]
fn studies_report() {
    use tradetune_engine::front::reseed::{RESEED_KEY, SeedResult, SeedSpread};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cv.db");
    let mut storage = common::cv_study::database(&db, 6);
    let spread = SeedSpread {
        trial: 5,
        bars: 480,
        seeds: [
            (0.41, 0.112),
            (0.18, 0.061),
            (0.77, 0.183),
            (-0.05, 0.004),
            (0.52, 0.139),
        ]
        .iter()
        .enumerate()
        .map(|(k, &(sharpe, total_return))| SeedResult {
            seed: 43 + k as u64,
            sharpe,
            total_return,
            objective: total_return,
        })
        .collect(),
        equal_weight_sharpe: 1.14,
        equal_weight_total_return: 0.249,
    };
    let cv = storage.study("cv").unwrap().study_id;
    storage
        .set_study_system_attr(
            cv,
            RESEED_KEY,
            &tradetune_engine::storage::JsonValue::from(serde_json::to_value(&spread).unwrap()),
        )
        .unwrap();
    drop(storage);
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    let mut h = ui::harness(app(settings, None), [1280.0, 1500.0]);
    h.state_mut().handle(StudyAction::OpenDatabase(db));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h.state_mut().handle(StudyAction::SelectStudy("cv".into()));
    step_until(&mut h, "the trials", |a| {
        a.panels.studies.table.rows.len() == 6 && !a.panels.studies.table.loading
    });
    h.state_mut().handle(StudyAction::ShowReport(true));
    step_until(&mut h, "the report", |a| {
        a.panels.studies.report.shown.is_some() && a.panels.studies.report.computing.is_none()
    });
    // The path is a temp dir: hide it from the picture.
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("cv.db");
    }
    h.state_mut().cx.notices.clear();
    h.run_steps(4);
    snapshot(&mut h, "studies_report");
}

/// The slice plots (objective against each parameter) and the empirical distribution function
/// of the reference database's aggregated study.
#[test]
fn studies_slice_and_edf() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = aggressive_selected(dir.path());
    h.state_mut().handle(StudyAction::ShowPlot(PlotTab::Slice));
    h.run_steps(4);
    snapshot(&mut h, "studies_slice");
    h.state_mut().handle(StudyAction::ShowPlot(PlotTab::Edf));
    h.run_steps(4);
    snapshot(&mut h, "studies_edf");
}

/// The reference database's aggregated study selected, not live, its temp path hidden from the
/// picture and the status bar empty.
fn aggressive_selected(dir: &std::path::Path) -> Harness<'static, TradeTuneApp> {
    let mut h = opened_reference_db(dir, Tab::Studies);
    h.state_mut().panels.studies.live.on = false;
    h.state_mut()
        .handle(StudyAction::SelectStudy("x_aggressive".into()));
    step_until(&mut h, "the trials", |a| {
        !a.panels.studies.table.rows.is_empty()
    });
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("optuna-reference.db");
    }
    h.state_mut().cx.notices.clear();
    h
}
