//! The Studies panel's Report view (issue 16), driven through egui_kittest as in
//! `ui_importance.rs`: a real SQLite study built here with cross-validated trials and their
//! stored fold returns (fixed numbers, no training), opened in the app; the view shows the
//! engine's PBO with its logit histogram and the best trial's deflated Sharpe, computed in the
//! background once per trial count (again when a live read brings a trial); a study without
//! fold returns says why; a stored seed spread shows as a table and box plots; a re-run without
//! a study file says what is missing.

use crate::common;

use std::path::Path;

use crate::common::ui::{self, step_until};
use common::cv_study::{add_cv_trial, cpcv_database, database};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::panels::studies::Action as StudyAction;
use tradetune_app::ui::panels::studies::report::{PARTITIONS, histogram_heading, spread_heading};
use tradetune_engine::front::report::study_report;
use tradetune_engine::front::reseed::{RESEED_KEY, SeedResult, SeedSpread};
use tradetune_engine::storage::JsonValue;

fn open_report(h: &mut Harness<'_, TradeTuneApp>, study: &str, trials: usize) {
    h.run_steps(4);
    h.get_by_label("Open database…").click();
    step_until(h, "the database", |a| {
        a.panels.studies.db.is_some() || a.panels.studies.error.is_some()
    });
    assert_eq!(h.state().panels.studies.error, None);
    h.get_by_label(study).click();
    step_until(h, "the trials", |a| {
        a.panels.studies.table.rows.len() == trials && !a.panels.studies.table.loading
    });
    h.get_by_label("Report").click();
    step_until(h, "the report", |a| {
        a.panels.studies.report.shown.is_some() && a.panels.studies.report.computing.is_none()
    });
}

fn computations(h: &Harness<'_, TradeTuneApp>) -> u64 {
    h.state().panels.studies.report.computations
}

#[test]
fn the_report_shows_pbo_with_its_histogram_and_the_deflated_sharpe() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut storage = database(&db, 6);
    let mut h = ui::studies(&db, [1400.0, 1400.0]);
    open_report(&mut h, "cv", 6);

    // What the engine computes from the same file.
    let want = study_report(&storage, "cv", PARTITIONS).unwrap();
    let p = want.pbo.result.as_ref().expect("a PBO");
    assert_eq!((p.strategies, p.combinations), (6, 12_870));
    h.get_by_label_contains(&format!(
        "PBO {:.3} over 6 trials ({PARTITIONS} partitions, 12870 combinations",
        p.pbo
    ));
    h.get_by_label_contains(&format!("probability of loss {:.3}", p.probability_of_loss));
    h.get_by_label_contains("performance degradation: ");
    assert!(!want.pbo.histogram.is_empty());
    h.get_by_label(&histogram_heading(p.combinations, want.pbo.histogram.len()));
    let d = want.dsr.result.as_ref().expect("a deflated Sharpe ratio");
    h.get_by_label("deflated Sharpe ratio");
    h.get_by_label(&format!("{:.3}", d.dsr));
    h.get_by_label("probabilistic Sharpe ratio (vs 0)");
    let best = want.best.as_ref().unwrap();
    assert_eq!(best.number, 5);
    h.get_by_label_contains("trial #5: value");
    h.get_by_label_contains("mean of 4 folds");
    h.get_by_label_contains("trial #5 was cross-validated");
    h.get_by_label_contains("no seed spread yet");
    let shown = h.state().panels.studies.report.shown.clone().unwrap();
    let shown = shown.result.unwrap();
    assert_eq!(shown.pbo.histogram, want.pbo.histogram);
    assert_eq!(shown.pbo.result.as_ref().map(|p| p.pbo), Some(p.pbo));

    // Not recomputed while drawing; recomputed once when a live read brings a trial.
    assert_eq!(computations(&h), 1);
    h.run_steps(20);
    assert_eq!(computations(&h), 1, "recomputed by drawing frames");
    let cv = storage.study("cv").unwrap().study_id;
    add_cv_trial(&mut storage, cv, 6);
    h.state_mut().handle(StudyAction::RefreshTrials);
    step_until(&mut h, "the new trial's report", |a| {
        a.panels.studies.report.shown.as_ref().is_some_and(|s| {
            s.result
                .as_ref()
                .is_ok_and(|r| r.pbo.result.as_ref().is_some_and(|p| p.strategies == 7))
        })
    });
    assert_eq!(computations(&h), 2);
    h.get_by_label_contains("PBO ");
    h.get_by_label_contains(" over 7 trials");

    // A study without fold returns says why there is no PBO.
    h.get_by_label("Trials").click();
    h.run_steps(2);
    h.get_by_label("holdout").click();
    step_until(&mut h, "the holdout trials", |a| {
        a.panels.studies.table.rows.len() == 2 && !a.panels.studies.table.loading
    });
    h.get_by_label("Report").click();
    step_until(&mut h, "the holdout report", |a| {
        a.panels
            .studies
            .report
            .shown
            .as_ref()
            .is_some_and(|s| s.key.study == "holdout")
    });
    h.get_by_label_contains("PBO not available: needs at least 2 COMPLETE trials");
    h.get_by_label_contains("deflated Sharpe not available");
    h.get_by_label_contains("hold-out: no folds");
}

/// A CPCV study's report: its bars make 2 backtest paths of single policies; the deflated
/// Sharpe shown is the median path's, with each path's beside it.
#[test]
fn a_cpcv_report_shows_the_deflated_sharpe_of_each_backtest_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cpcv.db");
    let storage = cpcv_database(&db, 4);
    let want = study_report(&storage, "cpcv", PARTITIONS).unwrap();
    drop(storage);
    assert_eq!((want.paths, want.dsr.paths.len()), (2, 2));
    let d = want.dsr.result.as_ref().expect("a deflated Sharpe ratio");
    let spread = want.dsr.paths_text().expect("two paths");
    let mut h = ui::studies(&db, [1400.0, 1400.0]);
    open_report(&mut h, "cpcv", 4);
    h.get_by_label_contains("each by 2 folds: 2 backtest paths of single policies");
    h.get_by_label(&format!("{:.3}", d.dsr));
    h.get_by_label(&format!("deflated Sharpe ratio: {spread}"));
    let p = want.pbo.result.as_ref().expect("a PBO");
    h.get_by_label_contains(&format!(
        "PBO {:.3} over 4 trials ({PARTITIONS} partitions, {} combinations",
        p.pbo,
        2 * 12_870
    ));
}

#[test]
fn a_stored_seed_spread_shows_as_a_table_and_a_re_run_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut storage = database(&db, 3);
    let spread = SeedSpread {
        trial: 2,
        bars: 480,
        seeds: (0..5)
            .map(|k| SeedResult {
                seed: 43 + k,
                sharpe: 0.2 * k as f64 - 0.1,
                total_return: 0.03 * k as f64 - 0.02,
                objective: 0.03 * k as f64 - 0.02,
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
            &JsonValue::from(serde_json::to_value(&spread).unwrap()),
        )
        .unwrap();
    drop(storage);
    let mut h = ui::studies(&db, [1400.0, 1400.0]);
    open_report(&mut h, "cv", 3);

    h.get_by_label(&spread_heading(&spread));
    for r in &spread.seeds {
        h.get_by_label(&r.seed.to_string());
    }
    h.get_by_label("held-out Sharpe");
    // The table's row, and the legend of each box plot (Sharpe, total return) beside the box
    // over the seeds.
    assert_eq!(h.query_all_by_label("equal weight").count(), 3);
    assert_eq!(h.query_all_by_label("agent, 5 seeds").count(), 2);
    h.get_by_label("1.140");
    h.get_by_label("24.90 %");
    // The median row repeats the middle seed's (k = 2) numbers.
    h.get_by_label("median");
    assert_eq!(h.query_all_by_label("0.300").count(), 2);
    assert_eq!(h.query_all_by_label("4.00 %").count(), 2);
    let shown = h.state().panels.studies.report.shown.clone().unwrap();
    assert_eq!(shown.result.unwrap().seeds, Some(spread));
    assert_eq!(h.state().panels.studies.report.seeds, 5, "K defaults to 5");

    // This study was not recorded with `study create` and Configure describes another one:
    // the re-run says so instead of training anything.
    h.get_by_label("Re-run best trial").click();
    step_until(&mut h, "the re-run's answer", |a| {
        a.panels.studies.report.reseed.is_none() && a.panels.studies.report.reseed_error.is_some()
    });
    h.get_by_label_contains("study cv has no recorded study file");
}

/// A tiny hold-out study (bundled data, small nets, few samples), recorded with
/// `tradetune study create` so its study file travels with it.
const TINY: &str = r#"[study]
name = "tiny"
n_trials = 2
objective = "total_return"

[fixed]
env.n_envs = 4
ppo.n_steps = 32
ppo.batch_size = 64
ppo.n_epochs = 1
ppo.policy.net_arch.pi = [8]
ppo.policy.net_arch.vf = [8]
train.total_timesteps = 128
train.eval_every = 0

[search]
"ppo.learning_rate" = { low = 1e-4, high = 1e-2, log = true }

[sampler]
kind = "random"
seed = 3

[pruner]
kind = "none"
"#;

#[test]
fn re_running_the_best_trial_with_k_seeds_stores_the_spread_and_can_be_cancelled() {
    use common::{scratch, text, tradetune};
    let dir = scratch("ui_report", "reseed");
    let (file, db) = (dir.join("tiny.toml"), dir.join("tiny.db"));
    std::fs::write(&file, TINY).unwrap();
    let (f, d) = (file.to_str().unwrap(), db.to_str().unwrap());
    let o = tradetune(&["study", "create", f, "--storage", d]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = tradetune(&[
        "worker",
        "--storage",
        d,
        "--study",
        "tiny",
        "--telemetry-interval",
        "0",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    let mut h = ui::studies(&db, [1400.0, 1400.0]);
    open_report(&mut h, "tiny", 2);
    h.get_by_label_contains("no seed spread yet");
    // The best trial kept its checkpoint: backtested on the test split beside equal weight.
    h.get_by_label_contains("'s checkpoint ");
    h.get_by_label("max drawdown");

    // Cancelled before its first seed: nothing trained, nothing stored.
    h.state_mut().hold_jobs();
    h.get_by_label("Re-run best trial").click();
    h.run_steps(2);
    assert!(h.state().panels.studies.report.reseed.is_some());
    h.get_by_label("loading the data…");
    h.get_by_label("Cancel").click();
    h.run_steps(2);
    h.get_by_label("cancelling…");
    assert_eq!(h.state_mut().release_jobs(), 1);
    step_until(&mut h, "the cancelled re-run", |a| {
        a.panels.studies.report.reseed.is_none()
    });
    let e = h.state().panels.studies.report.reseed_error.clone();
    assert!(
        e.as_deref().is_some_and(|e| e.contains("cancelled")),
        "{e:?}"
    );
    let stored = |db: &Path| {
        let s = tradetune_engine::storage::Storage::open_read_only(db).unwrap();
        tradetune_engine::front::reseed::stored(&s, "tiny").unwrap()
    };
    assert_eq!(stored(&db), None);

    // K = 2: two other seeds trained and backtested, the spread stored with the study and shown.
    h.state_mut().handle(StudyAction::SetReseedSeeds(2));
    h.get_by_label("Re-run best trial").click();
    h.run_steps(2);
    step_until(&mut h, "the re-run", |a| {
        a.panels.studies.report.reseed.is_none()
    });
    let e = h.state().panels.studies.report.reseed_error.clone();
    assert_eq!(e, None);
    let spread = stored(&db).expect("the spread stored with the study");
    assert_eq!(spread.seeds.len(), 2);
    let shown = h.state().panels.studies.report.shown.clone().unwrap();
    assert_eq!(shown.result.unwrap().seeds.as_ref(), Some(&spread));
    h.get_by_label_contains("recorded with the study");
    h.get_by_label(&spread_heading(&spread));
    assert_eq!(h.query_all_by_label("agent, 2 seeds").count(), 2);
}

/// A study started with the app's Start button is recorded with its study file exactly as
/// `tradetune study run` records one: "Re-run best trial" finds that file in the database,
/// although the Configure panel now describes another study.
#[test]
fn re_running_an_app_started_study_finds_its_recorded_file() {
    use std::time::{Duration, Instant};
    use tradetune_app::ui::context::DataState;
    use tradetune_app::ui::draft::{Draft, SearchEntry};
    use tradetune_app::ui::settings::{Settings, Tab};
    use tradetune_engine::front::launch::RecordedStudy;
    use tradetune_engine::study::file::{PrunerKind, SearchSpec};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut draft = Draft::default();
    draft.env.n_envs = 2;
    draft.ppo.n_steps = 32;
    draft.ppo.batch_size = 32;
    draft.ppo.n_epochs = 1;
    draft.ppo.policy.net_arch.pi = vec![8];
    draft.ppo.policy.net_arch.vf = vec![8];
    draft.train.total_timesteps = 128;
    draft.train.eval_every = 0;
    draft.study.name = "from_app".into();
    draft.study.n_trials = 2;
    draft.pruner.kind = PrunerKind::None;
    draft.search = vec![SearchEntry {
        name: "ppo.learning_rate".into(),
        spec: SearchSpec::parse("{ low = 1e-4, high = 1e-2, log = true }").unwrap(),
    }];
    let settings = Settings {
        tab: Tab::Run,
        draft: draft.clone(),
        study_db: Some(db.clone()),
        ..Settings::default()
    };
    let mut h = ui::harness(ui::app(settings, ui::no_dialogs()), [1280.0, 900.0]);
    let limit = Instant::now() + Duration::from_secs(120);
    while matches!(h.state().cx.data, DataState::Loading(_) | DataState::None) {
        assert!(Instant::now() < limit, "the bundled data did not load");
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    h.run_steps(3);
    h.get_by_role_and_label(egui::accesskit::Role::Button, "Start")
        .click();
    h.run_steps(2);
    step_until(&mut h, "the study's end", |a| {
        !a.panels.run.running && a.panels.run.end.is_some()
    });
    let notices = format!("{:?}", h.state().cx.notices);
    assert_eq!(
        h.state().panels.run.end.as_ref().map(|e| e.counts[0]),
        Some(2),
        "{notices}"
    );
    drop(h);

    // Recorded as the CLI records a study: its study file's text (which reads back to the
    // draft's study), where it came from, no overrides.
    let storage = tradetune_engine::storage::Storage::open_read_only(&db).unwrap();
    let record = RecordedStudy::of(&storage.study("from_app").unwrap()).expect("recorded");
    let want = draft.study_file(&[]).unwrap();
    let got = record.study_file("from_app", dir.path()).unwrap();
    assert_eq!(got.base_config, want.base_config);
    assert_eq!(got.search_specs(), want.search_specs());
    assert_eq!(record.source, tradetune_app::ui::draft::DRAFT_SOURCE);
    assert!(record.overrides.is_empty());
    drop(storage);

    // A new session, whose Configure panel holds the default study, not this one.
    let mut h = ui::studies(&db, [1400.0, 1400.0]);
    assert_ne!(h.state().cx.settings.draft.study.name, "from_app");
    open_report(&mut h, "from_app", 2);
    h.state_mut().handle(StudyAction::SetReseedSeeds(1));
    h.get_by_label("Re-run best trial").click();
    h.run_steps(2);
    step_until(&mut h, "the re-run", |a| {
        a.panels.studies.report.reseed.is_none()
    });
    assert_eq!(h.state().panels.studies.report.reseed_error, None);
    let source = h.state().panels.studies.report.reseed_source.clone();
    assert_eq!(
        source.as_deref(),
        Some("the Configure panel, recorded with the study")
    );
    h.get_by_label_contains("recorded with the study");
}
