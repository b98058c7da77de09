//! Closing the window while a study runs (or the best trial is re-run with other seeds) asks
//! how: stop now (running trials end FAIL "interrupted"), finish the running trials and then
//! close, or cancel. A signal does not ask.
//! The close request is the one the window system sends (a viewport `Close` event).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::ui;
use egui::accesskit::Role;
use egui::{ViewportCommand, ViewportEvent, ViewportId};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::close::{
    CANCEL, CLOSE_AGAIN, FINISH, FINISH_RESEED, STOP_NOW, STOP_RESEED, STOPPING, stopping_text,
};
use tradetune_app::ui::context::DataState;
use tradetune_app::ui::draft::{Draft, SearchEntry};
use tradetune_app::ui::panels::studies::report::ReseedRun;
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_engine::storage::Storage;
use tradetune_engine::study::file::{PrunerKind, PrunerSection, SearchSpec};

fn tiny_draft(name: &str) -> Draft {
    let mut draft = Draft::default();
    draft.env.n_envs = 2;
    draft.ppo.n_steps = 32;
    draft.ppo.batch_size = 32;
    draft.ppo.n_epochs = 2;
    draft.ppo.policy.net_arch.pi = vec![16];
    draft.ppo.policy.net_arch.vf = vec![16];
    draft.train.total_timesteps = 256;
    draft.train.eval_every = 2;
    draft.study.name = name.into();
    draft.study.n_trials = 2;
    draft.pruner.kind = PrunerKind::None;
    draft.search = vec![SearchEntry {
        name: "ppo.learning_rate".into(),
        spec: SearchSpec::parse("{ low = 1e-4, high = 1e-3, log = true }").unwrap(),
    }];
    draft
}

/// The app on `settings`, in a 1280 × 900 window.
fn harness(settings: Settings) -> Harness<'static, TradeTuneApp> {
    let app = TradeTuneApp::new(
        settings,
        ui::no_dialogs(),
        tradetune_engine::device::describe_devices(),
    );
    ui::harness(app, [1280.0, 900.0])
}

/// A harness whose study was started with its job held back (so it is certainly running and
/// has not got anywhere yet).
fn started(db: PathBuf, name: &str) -> Harness<'static, TradeTuneApp> {
    let mut h = harness(Settings {
        tab: Tab::Run,
        draft: tiny_draft(name),
        study_db: Some(db),
        ..Settings::default()
    });
    let limit = Instant::now() + Duration::from_secs(120);
    while matches!(h.state().cx.data, DataState::Loading(_) | DataState::None) {
        assert!(Instant::now() < limit, "the bundled data did not load");
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    h.run_steps(3);
    h.state_mut().hold_jobs();
    h.get_by_role_and_label(Role::Button, "Start").click();
    h.run_steps(3);
    assert!(h.state().panels.run.running, "{:?}", h.state().cx.notices);
    h
}

/// The window system asks to close (the title bar's button), and one frame runs.
fn request_close(h: &mut Harness<'_, TradeTuneApp>) {
    h.input_mut()
        .viewports
        .entry(ViewportId::ROOT)
        .or_default()
        .events
        .push(ViewportEvent::Close);
    h.step();
}

fn sent(h: &Harness<'_, TradeTuneApp>, command: &ViewportCommand) -> bool {
    h.output()
        .viewport_output
        .get(&ViewportId::ROOT)
        .is_some_and(|o| o.commands.contains(command))
}

#[test]
fn closing_while_a_study_runs_asks_and_stop_now_closes() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = started(dir.path().join("studies.db"), "close_stop");
    request_close(&mut h);
    assert!(sent(&h, &ViewportCommand::CancelClose), "the close is held");
    h.run_steps(2);
    h.get_by_label("A study is running");
    // Cancel keeps the window and the study.
    h.get_by_label(CANCEL).click();
    h.run_steps(2);
    assert!(h.query_by_label("A study is running").is_none());
    assert!(!h.state().closing.confirmed);
    assert!(h.state().panels.run.running);

    request_close(&mut h);
    h.run_steps(2);
    h.get_by_label(STOP_NOW).click();
    h.step();
    // The window stays, drawn, saying what it waits for, until the study has stored its
    // running trials as interrupted (none started yet: its job is held).
    assert!(
        !sent(&h, &ViewportCommand::Close),
        "not before the study has ended"
    );
    assert!(!h.state().closing.confirmed);
    h.run_steps(2);
    h.get_by_label(STOPPING);
    h.get_by_label(&stopping_text(0));
    assert!(h.state().panels.run.running);
    h.get_by_label(CLOSE_AGAIN);
    // The study starts now, interrupted before its runner was built: it ends, and the window
    // closes from the frame that sees its end.
    assert_eq!(h.state_mut().release_jobs(), 1);
    let limit = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < limit, "the study did not end");
        h.step();
        if sent(&h, &ViewportCommand::Close) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(h.state().closing.confirmed);
    assert!(!h.state().panels.run.running);
    // The close that follows goes through (on_exit has no study left to wait for).
    request_close(&mut h);
    assert!(!sent(&h, &ViewportCommand::CancelClose));
}

/// Closing again while "Stop now" waits for the study lets the window go at once (on_exit
/// then gives the study its bounded wait): a hung driver or a long compile never holds the
/// window for good.
#[test]
fn closing_again_while_stopping_closes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = started(dir.path().join("studies.db"), "close_again");
    request_close(&mut h);
    h.run_steps(2);
    h.get_by_label(STOP_NOW).click();
    h.run_steps(2);
    h.get_by_label(STOPPING);
    assert!(!h.state().closing.confirmed);
    // The study's job is held: it has not ended.
    request_close(&mut h);
    assert!(
        !sent(&h, &ViewportCommand::CancelClose),
        "the second close goes through"
    );
    assert!(h.state().closing.confirmed);
    assert!(h.state().panels.run.running, "the study is still stopping");
    // (The study then ends, interrupted before its runner was built, as on_exit would wait.)
    assert_eq!(h.state_mut().release_jobs(), 1);
    let limit = Instant::now() + Duration::from_secs(120);
    while h.state().panels.run.running {
        assert!(Instant::now() < limit, "the study did not end");
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// "Stop now" while a trial trains: the window shows how many trials it stores, stays open
/// until the study has stored the trial as FAIL "interrupted", then closes (on_exit has
/// nothing left to do).
#[test]
fn stop_now_stores_the_running_trial_before_the_window_closes() {
    use tradetune_engine::storage::{JsonValue, TrialState};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut long = tiny_draft("close_stop_trial");
    // Long enough that the trial is still training when "Stop now" is clicked.
    long.train.total_timesteps = 100_000_000;
    long.study.n_trials = 1;
    let mut h = harness(Settings {
        tab: Tab::Run,
        draft: long,
        study_db: Some(db.clone()),
        ..Settings::default()
    });
    let limit = Instant::now() + Duration::from_secs(120);
    while matches!(h.state().cx.data, DataState::Loading(_) | DataState::None) {
        assert!(Instant::now() < limit, "the bundled data did not load");
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    h.run_steps(3);
    h.get_by_role_and_label(Role::Button, "Start").click();
    let limit = Instant::now() + Duration::from_secs(300);
    while !h
        .state()
        .panels
        .run
        .workers
        .iter()
        .any(|w| w.trial.is_some())
    {
        assert!(
            Instant::now() < limit,
            "no trial started: {:?}",
            h.state().cx.notices
        );
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    request_close(&mut h);
    h.run_steps(2);
    h.get_by_label_contains("1 trial is running");
    h.get_by_label(STOP_NOW).click();
    h.run_steps(2);
    h.get_by_label(STOPPING);
    h.get_by_label(&stopping_text(1));
    let limit = Instant::now() + Duration::from_secs(300);
    loop {
        assert!(Instant::now() < limit, "the study did not stop");
        h.step();
        if sent(&h, &ViewportCommand::Close) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(h.state().closing.confirmed);
    assert!(!h.state().panels.run.running);
    let s = Storage::open_read_only(&db).unwrap();
    let stored = s.trials(s.study_id("close_stop_trial").unwrap()).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].state, TrialState::Fail);
    assert_eq!(
        stored[0].system_attr("fail_reason"),
        Some(&JsonValue::from("interrupted"))
    );
}

/// What the stopping window says, by the trials it stores.
#[test]
fn the_stopping_window_counts_the_trials_it_stores() {
    assert_eq!(
        stopping_text(1),
        "stopping: storing 1 running trial as interrupted…"
    );
    assert_eq!(
        stopping_text(3),
        "stopping: storing 3 running trials as interrupted…"
    );
    assert!(stopping_text(0).contains("no trial was running"));
}

#[test]
fn a_signal_closes_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = started(dir.path().join("studies.db"), "close_signal");
    h.state().closing.signalled.store(true, Ordering::Relaxed);
    request_close(&mut h);
    assert!(!sent(&h, &ViewportCommand::CancelClose));
    assert!(!h.state().closing.asking);
}

#[test]
fn finish_running_trials_starts_no_new_one_and_closes_when_the_study_ends() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut h = started(db.clone(), "close_finish");
    // A re-run of another study's best trial trains too: finishing waits for it as well.
    reseeding(&mut h);
    request_close(&mut h);
    h.run_steps(2);
    h.get_by_label_contains("re-run with other seeds is training too (seed 2 of 5)");
    h.get_by_label(FINISH).click();
    h.run_steps(2);
    assert!(h.state().closing.finishing);
    assert!(
        h.state().cx.notices.iter().any(
            |n| n.contains("when they end") && n.contains("and the re-run's last seed is done")
        ),
        "{:?}",
        h.state().cx.notices
    );
    h.state_mut().panels.studies.report.reseed = None;
    assert!(
        !sent(&h, &ViewportCommand::Close),
        "not before the study ends"
    );
    // The study starts now, told to finish before its runner was built: no trial starts.
    assert_eq!(h.state_mut().release_jobs(), 1);
    let limit = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < limit, "the study did not end");
        h.step();
        if sent(&h, &ViewportCommand::Close) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = &h.state().panels.run;
    assert!(!run.running);
    assert!(run.trials.is_empty(), "{} trials started", run.trials.len());
    assert!(run.end.as_ref().is_some_and(|e| e.stopped));
    // The run stored its pruner's settings for the intermediate-values plot.
    let storage = Storage::open_read_only(&db).unwrap();
    let study = storage.study("close_finish").unwrap();
    let pruner = PrunerSection::from_attrs(&study.system_attrs).expect("the pruner is stored");
    assert_eq!(pruner.kind, PrunerKind::None);
}

/// A harness on the Studies tab with nothing running.
fn idle() -> Harness<'static, TradeTuneApp> {
    let mut h = harness(Settings {
        tab: Tab::Studies,
        ..Settings::default()
    });
    h.run_steps(3);
    h
}

/// A re-run of the best trial with other seeds, as the Report view holds it while its thread
/// trains (seed 2 of 5).
fn reseeding(h: &mut Harness<'_, TradeTuneApp>) -> Arc<AtomicBool> {
    let cancel = Arc::new(AtomicBool::new(false));
    h.state_mut().panels.studies.report.reseed = Some(ReseedRun {
        study: "s".into(),
        seeds: 5,
        at: Some(1),
        cancel: cancel.clone(),
    });
    cancel
}

/// Closing the window while the best trial is re-run with other seeds (minutes of training,
/// kept only when the last seed is done) asks too: cancel keeps it, "close when the re-run
/// ends" waits for it, and stopping cancels it and closes. Nothing running: no question.
#[test]
fn closing_while_a_reseed_trains_asks_and_finish_waits_for_it() {
    let mut h = idle();
    request_close(&mut h);
    assert!(
        !sent(&h, &ViewportCommand::CancelClose),
        "nothing to ask about"
    );

    let mut h = idle();
    let cancel = reseeding(&mut h);
    request_close(&mut h);
    assert!(sent(&h, &ViewportCommand::CancelClose), "the close is held");
    h.run_steps(2);
    h.get_by_label("A re-run is training");
    h.get_by_label_contains("seed 2 of 5");
    h.get_by_label(CANCEL).click();
    h.run_steps(2);
    assert!(h.query_by_label("A re-run is training").is_none());
    assert!(!h.state().closing.confirmed);

    request_close(&mut h);
    h.run_steps(2);
    h.get_by_label(FINISH_RESEED).click();
    h.run_steps(2);
    assert!(h.state().closing.finishing);
    assert!(
        !sent(&h, &ViewportCommand::Close),
        "not before the re-run ends"
    );
    assert!(!cancel.load(Ordering::Relaxed));
    // Its last seed done: the Report view drops the run, and the window closes.
    h.state_mut().panels.studies.report.reseed = None;
    h.step();
    assert!(sent(&h, &ViewportCommand::Close));

    let mut h = idle();
    let cancel = reseeding(&mut h);
    request_close(&mut h);
    h.run_steps(2);
    h.get_by_label(STOP_RESEED).click();
    h.step();
    assert!(sent(&h, &ViewportCommand::Close), "stopping closes at once");
    assert!(cancel.load(Ordering::Relaxed), "and cancels the re-run");
}
