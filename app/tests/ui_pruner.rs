//! The intermediate-values plot draws the thresholds of the pruner the study stored
//! (`tradetune:pruner`), and says so when a study (Optuna's own) stored none.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::ui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::panels::studies::Action as StudyAction;
use tradetune_app::ui::panels::studies::PlotTab;
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_engine::storage::Storage;
use tradetune_engine::study::file::{PRUNER_ATTR, PrunerKind, PrunerSection};

/// The reference database's `ref_single_max` (trials with intermediate values, some pruned),
/// copied to `dir`, with `pruner` stored on it.
fn reference_with(dir: &Path, pruner: Option<&PrunerSection>) -> PathBuf {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/testdata/optuna-reference.db");
    let db = dir.join("optuna-reference.db");
    std::fs::copy(&src, &db).unwrap();
    if let Some(p) = pruner {
        let mut storage = Storage::open(&db).unwrap();
        let id = storage.study_id("ref_single_max").unwrap();
        storage
            .set_study_system_attr(id, PRUNER_ATTR, &p.to_attr())
            .unwrap();
    }
    db
}

fn intermediate_plot(db: PathBuf) -> Harness<'static, TradeTuneApp> {
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    let app = TradeTuneApp::new(settings, ui::no_dialogs(), Vec::new());
    let mut h = ui::harness(app, [1280.0, 900.0]);
    h.state_mut().handle(StudyAction::OpenDatabase(db));
    let limit = Instant::now() + Duration::from_secs(120);
    let step = |h: &mut Harness<'_, TradeTuneApp>, done: &dyn Fn(&TradeTuneApp) -> bool| {
        while !done(h.state()) {
            assert!(Instant::now() < limit, "gave up waiting");
            h.step();
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    step(&mut h, &|a| a.panels.studies.db.is_some());
    h.state_mut().panels.studies.live.on = false;
    h.state_mut()
        .handle(StudyAction::SelectStudy("ref_single_max".into()));
    step(&mut h, &|a| {
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
    h
}

#[test]
fn the_stored_pruners_thresholds_are_drawn_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let percentile = PrunerSection {
        kind: PrunerKind::Percentile,
        percentile: 25.0,
        n_startup_trials: 3,
        n_warmup_steps: 2,
        ..PrunerSection::default()
    };
    let h = intermediate_plot(reference_with(dir.path(), Some(&percentile)));
    // ref_single_max is maximised: the best quarter lies above the 75th percentile.
    h.get_by_label(
        "percentile pruner (25 %): a trial is pruned when its best value so far is worse than \
         the 75th percentile of the complete trials at the same step (from step 2, once 3 trials \
         have completed)",
    );
    drop(h);

    let dir = tempfile::tempdir().unwrap();
    let sha = PrunerSection {
        kind: PrunerKind::SuccessiveHalving,
        min_resource: Some(1),
        reduction_factor: Some(2),
        ..PrunerSection::default()
    };
    let h = intermediate_plot(reference_with(dir.path(), Some(&sha)));
    h.get_by_label_contains("successive halving: rungs at steps 1, 2, 4");
}

#[test]
fn a_study_without_a_stored_pruner_shows_the_median_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let h = intermediate_plot(reference_with(dir.path(), None));
    h.get_by_label_contains("the study's pruner is not stored");
}
