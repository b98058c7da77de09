//! The Studies panel's column-wise, live trial table and its plots (issue 17), driven through
//! egui_kittest as in `ui.rs`: a column per parameter (4 significant digits, categorical ones
//! by their choice), sorted and hidden; trials that start or finish while the study is open
//! appear after a refresh and on the timer (incremental reads); the slice, parallel-coordinates
//! (brushing filters the table) and intermediate-values plots of a study with log-scaled and
//! categorical parameters.

use std::path::Path;
use std::time::Duration;

use crate::common::ui::{self, step_until};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::panels::studies::Action as StudyAction;
use tradetune_app::ui::panels::studies::{PcAxes, TrialMarkers, pc_axes_id, plot_points_id};
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_app::ui::tasks::TrialColumn;
use tradetune_engine::storage::{
    CategoricalChoice, JsonValue, NewTrial, OptunaDistribution, Storage, StudyDirection, TrialState,
};

/// The app with `db` remembered as the last database (it opens on launch).
fn harness(db: &Path) -> Harness<'static, TradeTuneApp> {
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(db.to_path_buf()),
        ..Settings::default()
    };
    ui::harness(ui::app(settings, ui::no_dialogs()), [1400.0, 1400.0])
}

fn distributions() -> [OptunaDistribution; 3] {
    [
        OptunaDistribution::float(1e-5, 1e-2, true, None).unwrap(),
        OptunaDistribution::categorical(vec![
            CategoricalChoice::Int(32),
            CategoricalChoice::Int(64),
            CategoricalChoice::Int(256),
        ])
        .unwrap(),
        OptunaDistribution::float(0.9, 0.999, false, None).unwrap(),
    ]
}

/// Trial `k`'s parameters: a log-scaled learning rate, a categorical batch size (choice
/// `k % 3`) and gamma.
fn params(k: usize) -> Vec<(String, f64, OptunaDistribution)> {
    let [lr, batch, gamma] = distributions();
    vec![
        (
            "ppo.learning_rate".into(),
            1.234_567_89e-4 * (1 + k) as f64,
            lr,
        ),
        ("ppo.batch_size".into(), (k % 3) as f64, batch),
        ("ppo.gamma".into(), 0.9 + 0.01 * k as f64, gamma),
    ]
}

/// A study `tuning` with 5 COMPLETE trials (values 0.5, 0.4, …), one PRUNED and one RUNNING
/// trial; returns the running trial's id.
fn study_db(path: &Path) -> i64 {
    let mut s = Storage::open(path).unwrap();
    let study = s
        .create_study("tuning", &[StudyDirection::Minimize])
        .unwrap();
    for k in 0..5 {
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![0.5 - 0.1 * k as f64]);
        t.params = params(k);
        t.intermediate_values = vec![(0, 1.0), (1, 0.8 - 0.1 * k as f64)];
        t.user_attrs = vec![("worker".into(), JsonValue::from("host-a/0"))];
        s.add_trial(study, &t).unwrap();
    }
    let mut t = NewTrial::new(TrialState::Pruned);
    t.params = params(5);
    t.intermediate_values = vec![(0, 2.0), (1, 1.9)];
    s.add_trial(study, &t).unwrap();
    let mut t = NewTrial::new(TrialState::Running);
    t.params = params(6);
    s.add_trial(study, &t).unwrap().trial_id
}

fn opened(db: &Path) -> Harness<'static, TradeTuneApp> {
    let mut h = harness(db);
    step_until(&mut h, "the database", |a| {
        a.panels.studies.db.is_some() || a.panels.studies.error.is_some()
    });
    assert_eq!(h.state().panels.studies.error, None);
    h.get_by_label("tuning").click();
    step_until(&mut h, "the trials", |a| {
        a.panels.studies.table.rows.len() == 7
    });
    h
}

/// The numbers of the visible rows, in order.
fn shown_numbers(h: &Harness<'_, TradeTuneApp>) -> Vec<i64> {
    let v = &h.state().panels.studies;
    v.table
        .visible
        .iter()
        .map(|&i| v.table.rows[i].number)
        .collect()
}

#[test]
fn parameters_are_sortable_hideable_columns_and_new_trials_appear_live() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let running = study_db(&db);
    let mut h = opened(&db);
    // Long polls only: this test asks for reads itself until it tries the timer.
    h.state_mut().panels.studies.live.poll_every = Duration::from_secs(3600);

    // A column per parameter; 4 significant digits; the categorical one by its choices.
    for name in ["ppo.learning_rate", "ppo.batch_size", "ppo.gamma"] {
        h.get_by_role_and_label(Role::Button, name);
    }
    h.get_by_label("1.235e-4");
    assert!(h.query_by_label_contains("1.23456789").is_none());
    assert!(h.query_all_by_label("256").count() >= 2, "choice labels");
    // The trial detail keeps every digit.
    h.state_mut().handle(StudyAction::ShowTrial(0));
    h.run_steps(3);
    h.get_by_label_contains("ppo.learning_rate=0.000123456789");

    // Sort by a parameter, both ways.
    h.get_by_role_and_label(Role::Button, "ppo.gamma").click();
    h.run_steps(3);
    assert_eq!(shown_numbers(&h), vec![0, 1, 2, 3, 4, 5, 6]);
    h.get_by_role_and_label(Role::Button, "ppo.gamma (asc)")
        .click();
    h.run_steps(3);
    assert_eq!(shown_numbers(&h), vec![6, 5, 4, 3, 2, 1, 0]);
    // The categorical one sorts by its choice (index 0, 1, 2 = 32, 64, 256).
    h.get_by_role_and_label(Role::Button, "ppo.batch_size")
        .click();
    h.run_steps(3);
    let batch: Vec<i64> = shown_numbers(&h).iter().map(|n| n % 3).collect();
    assert_eq!(batch, vec![0, 0, 0, 1, 1, 2, 2]);

    // Hide a parameter column; show a user attribute's.
    h.state_mut()
        .handle(StudyAction::ToggleColumn(TrialColumn::Param(
            "ppo.learning_rate".into(),
        )));
    h.run_steps(3);
    assert!(
        h.query_by_role_and_label(Role::Button, "ppo.learning_rate")
            .is_none()
    );
    assert!(h.query_by_label("1.235e-4").is_none());
    assert!(h.query_by_label("host-a/0").is_none());
    h.state_mut()
        .handle(StudyAction::ToggleColumn(TrialColumn::Attr(
            "worker".into(),
        )));
    h.run_steps(3);
    h.get_by_role_and_label(Role::Button, "worker");
    assert_eq!(h.query_all_by_label("host-a/0").count(), 5);

    // The running trial finishes and a new one starts: a refresh reads just those.
    h.state_mut()
        .handle(StudyAction::SortTrials(TrialColumn::Number));
    {
        let mut s = Storage::open(&db).unwrap();
        s.complete_trial(running, &[0.05]).unwrap();
        let study = s.study_id("tuning").unwrap();
        let mut t = NewTrial::new(TrialState::Running);
        t.params = params(7);
        s.add_trial(study, &t).unwrap();
    }
    let polls = h.state().panels.studies.live.polls;
    h.get_by_label("Refresh").click();
    step_until(&mut h, "the refresh", |a| {
        a.panels.studies.live.polls > polls
    });
    let v = &h.state().panels.studies;
    assert_eq!(v.table.rows.len(), 8);
    let states: Vec<TrialState> = v
        .table
        .visible
        .iter()
        .map(|&i| v.table.rows[i].state)
        .collect();
    assert_eq!(states[6], TrialState::Complete, "{states:?}");
    assert_eq!(states[7], TrialState::Running, "{states:?}");
    h.get_by_label("8 of 8 trials");
    // The study list's counts and best follow.
    let g = &v.groups[0];
    assert_eq!((g.n(TrialState::Complete), g.best), (6, Some(0.05)));

    // On the timer, without a click.
    {
        let mut s = Storage::open(&db).unwrap();
        let study = s.study_id("tuning").unwrap();
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![0.3]);
        t.params = params(8);
        s.add_trial(study, &t).unwrap();
    }
    h.state_mut().panels.studies.live.poll_every = Duration::from_millis(50);
    step_until(&mut h, "the timed read", |a| {
        a.panels.studies.table.rows.len() == 9
    });
    h.get_by_label("9 of 9 trials");
}

#[test]
fn plots_of_a_study_with_log_and_categorical_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    study_db(&db);
    let mut h = opened(&db);
    h.state_mut().panels.studies.live.on = false;

    // The history first; slice plots: one per parameter, log and categorical axes named.
    h.get_by_label_contains("optimisation history (complete trials; best so far");
    // A click on trial 3's point opens its details.
    let id = {
        let v = &h.state().panels.studies;
        v.table
            .rows
            .iter()
            .find(|r| r.number == 3)
            .unwrap()
            .trial_id
    };
    let markers: TrialMarkers = h
        .ctx
        .data(|d| d.get_temp(plot_points_id("history")))
        .expect("the history stored its points");
    let at = markers.0.iter().find(|(t, _)| *t == id).unwrap().1;
    h.hover_at(at);
    h.step();
    h.drag_at(at);
    h.step();
    h.drop_at(at);
    h.run_steps(3);
    h.get_by_label_contains("trial 3 of tuning");
    h.get_by_label("slice").click();
    h.run_steps(3);
    h.get_by_label("slice: objective against");
    let axes = &h.state().panels.studies.table.param_axes;
    let scale = |name: &str| {
        axes.iter()
            .find(|a| a.name == name)
            .map(|a| a.scale.clone())
            .unwrap()
    };
    assert_eq!(
        scale("ppo.learning_rate"),
        tradetune_app::ui::tasks::Scale::Log
    );
    assert_eq!(
        scale("ppo.batch_size"),
        tradetune_app::ui::tasks::Scale::Choices(vec!["32".into(), "64".into(), "256".into()])
    );
    h.get_by_label("EDF").click();
    h.run_steps(3);
    h.get_by_label_contains("empirical distribution of the values (5 complete trials)");

    // Parallel coordinates; brushing the categorical axis to its last two choices keeps the
    // trials with batch size 64 or 256 in the plot and in the table.
    h.get_by_label("parallel coordinates").click();
    h.run_steps(3);
    h.get_by_label_contains("parallel coordinates: 5 of 5 complete trials");
    h.state_mut().handle(StudyAction::BrushAxis(
        "ppo.batch_size".into(),
        Some((0.5, 2.5)),
    ));
    h.run_steps(3);
    h.get_by_label_contains("parallel coordinates: 3 of 5 complete trials");
    let mut kept = shown_numbers(&h);
    kept.sort();
    assert_eq!(kept, vec![1, 2, 4, 5]);
    h.get_by_label("4 of 7 trials");
    // On the log axis: log10 units, 10^-3.5..10^-3 keeps learning rates from 3.2e-4 to 1e-3
    // (trials 2 to 6; of those, 2, 4 and 5 have the brushed batch sizes).
    h.state_mut().handle(StudyAction::BrushAxis(
        "ppo.learning_rate".into(),
        Some((-3.5, -3.0)),
    ));
    h.run_steps(3);
    let mut kept = shown_numbers(&h);
    kept.sort();
    assert_eq!(kept, vec![2, 4, 5]);
    h.get_by_label("Clear brushes").click();
    h.run_steps(3);
    assert_eq!(shown_numbers(&h).len(), 7);

    // The same with the mouse: a drag along the batch-size axis from just below its middle
    // choice (64) to past its top (256).
    let axes: PcAxes = h
        .ctx
        .data(|d| d.get_temp(pc_axes_id()))
        .expect("the plot stored its axes");
    let (_, low, high) = axes
        .0
        .iter()
        .find(|(n, _, _)| n == "ppo.batch_size")
        .cloned()
        .unwrap();
    let at = |u: f32| low + (high - low) * u;
    h.hover_at(at(0.4));
    h.step();
    h.drag_at(at(0.4));
    h.step();
    for u in [0.5, 0.7, 0.9, 1.05] {
        h.hover_at(at(u));
        h.step();
    }
    h.drop_at(at(1.05));
    h.run_steps(3);
    let brush = h.state().panels.studies.plots.brush.clone();
    assert_eq!(brush.len(), 1, "{brush:?}");
    let (name, lo, hi) = &brush[0];
    assert_eq!(name, "ppo.batch_size");
    assert!(
        (lo - 0.8).abs() < 0.05 && (hi - 2.0).abs() < 0.05,
        "{brush:?}"
    );
    h.get_by_label_contains("parallel coordinates: 3 of 5 complete trials");

    // A contour over two parameters (the first two, then two chosen).
    h.get_by_label("contour").click();
    h.run_steps(3);
    h.get_by_label(
        "contour of the objective over ppo.batch_size and ppo.gamma (5 complete trials)",
    );
    h.state_mut().handle(StudyAction::ContourParams(
        "ppo.learning_rate".into(),
        "ppo.gamma".into(),
    ));
    h.run_steps(3);
    h.get_by_label(
        "contour of the objective over ppo.learning_rate and ppo.gamma (5 complete trials)",
    );

    // Intermediate values of every trial, the pruned one marked.
    h.get_by_label("intermediate values").click();
    h.run_steps(3);
    h.get_by_label("intermediate values of 6 trials (1 pruned, marked ×)");
}

#[test]
fn the_database_the_run_panel_writes_to_opens_on_launch() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    study_db(&db);
    let launch = |study_db: &Path| {
        let settings = Settings {
            tab: Tab::Studies,
            study_db: Some(study_db.to_path_buf()),
            ..Settings::default()
        };
        ui::harness(ui::app(settings, ui::no_dialogs()), [1400.0, 900.0])
    };
    let mut h = launch(&db);
    step_until(&mut h, "the database", |a| {
        a.panels.studies.db.is_some() || a.panels.studies.error.is_some()
    });
    assert_eq!(h.state().panels.studies.error, None);
    h.get_by_label("tuning");
    // Opened, not remembered as the user's choice.
    assert_eq!(h.state().cx.settings.database, None);

    // No file there yet (a first run has not started): nothing is opened or created.
    let missing = dir.path().join("none.db");
    let mut h = launch(&missing);
    h.run_steps(5);
    h.get_by_label("no database open");
    assert!(!missing.exists());
}
