//! The Studies panel's parameter importance chart (issue 17), driven through egui_kittest as
//! in `ui.rs`: open a database, select a study, read the importances beside the chart (the
//! engine's PED-ANOVA numbers to 4 significant digits), computed once per trial count and not
//! per frame, recomputed when a trial was added, and a clear line for a study with too few
//! COMPLETE trials.

use crate::common::ui::{self, step_until};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::panels::studies::Action as StudyAction;
use tradetune_engine::front::format::significant;
use tradetune_engine::storage::{
    CategoricalChoice, NewTrial, OptunaDistribution, Storage, StudyDirection, TrialState,
};
use tradetune_engine::study::importance::{PedAnova, study_importances};

/// Adds `n` COMPLETE trials to `study`, numbered from `from`, whose value is decided by `x`.
fn add_trials(storage: &mut Storage, study: i64, from: usize, n: usize) {
    let x = OptunaDistribution::float(-1.0, 1.0, false, None).unwrap();
    let lr = OptunaDistribution::float(1e-5, 1e-1, true, None).unwrap();
    let act = OptunaDistribution::categorical(vec![
        CategoricalChoice::Str("relu".into()),
        CategoricalChoice::Str("tanh".into()),
    ])
    .unwrap();
    for i in from..from + n {
        let u = |k: f64| ((i + 1) as f64 * k).fract();
        let (xv, lrv, actv) = (
            -1.0 + 2.0 * u(0.618_033_988_75),
            (1e-5f64.ln() + u(0.754_877_666) * 1e4f64.ln()).exp(),
            (i % 2) as f64,
        );
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![xv * xv + 0.01 * lrv.log10() + 0.001 * actv]);
        t.params = vec![
            ("ppo.x".into(), xv, x.clone()),
            ("ppo.learning_rate".into(), lrv, lr.clone()),
            ("ppo.activation".into(), actv, act.clone()),
        ];
        storage.add_trial(study, &t).unwrap();
    }
}

fn computations(h: &Harness<'_, TradeTuneApp>) -> u64 {
    h.state()
        .panels
        .studies
        .importance
        .shown
        .as_ref()
        .map_or(0, |i| i.computations)
}

#[test]
fn the_open_study_shows_its_parameter_importances() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut storage = Storage::open(&db).unwrap();
    let study = storage
        .create_study("importance", &[StudyDirection::Minimize])
        .unwrap();
    add_trials(&mut storage, study, 0, 40);
    let few = storage
        .create_study("too_few", &[StudyDirection::Maximize])
        .unwrap();
    add_trials(&mut storage, few, 0, 1);

    let mut h = ui::studies(&db, [1400.0, 1100.0]);
    h.run_steps(4);
    h.get_by_label("Open database…").click();
    step_until(&mut h, "the database", |a| {
        a.panels.studies.db.is_some() || a.panels.studies.error.is_some()
    });
    assert_eq!(h.state().panels.studies.error, None);
    h.get_by_label("importance").click();
    step_until(&mut h, "the trials and their importances", |a| {
        a.panels.studies.table.rows.len() == 40 && a.panels.studies.importance.shown.is_some()
    });

    // What the engine computes from the same file, shown beside the chart.
    let want = study_importances(&storage, "importance", &PedAnova::default()).unwrap();
    assert_eq!(want.params[0].name, "ppo.x", "{want:?}");
    h.get_by_label("parameter importance (PED-ANOVA): top 4 of 40 COMPLETE trials");
    for p in &want.params {
        assert!(
            h.query_all_by_label(&p.name).count() >= 1,
            "no label {}",
            p.name
        );
        h.get_by_label(&significant(p.importance, 4));
    }
    let shown = h.state().panels.studies.importance.shown.clone().unwrap();
    assert_eq!(shown.result.as_ref().unwrap(), &want);

    // Not recomputed while drawing, nor when the same trials are read again.
    assert_eq!(computations(&h), 1);
    h.run_steps(20);
    assert_eq!(computations(&h), 1, "recomputed by drawing frames");
    h.state_mut()
        .handle(StudyAction::SelectStudy("importance".into()));
    step_until(&mut h, "the same trials read again", |a| {
        !a.panels.studies.table.loading
    });
    assert_eq!(computations(&h), 1, "recomputed for the same trial count");

    // A trial more: recomputed, and the chart says so.
    add_trials(&mut storage, study, 40, 1);
    h.state_mut()
        .handle(StudyAction::SelectStudy("importance".into()));
    step_until(&mut h, "the new trial", |a| {
        a.panels.studies.table.rows.len() == 41
    });
    assert_eq!(computations(&h), 2);
    h.get_by_label("parameter importance (PED-ANOVA): top 5 of 41 COMPLETE trials");

    // A study with one COMPLETE trial: why there is no chart.
    h.get_by_label("too_few").click();
    step_until(&mut h, "the other study", |a| {
        a.panels
            .studies
            .importance
            .shown
            .as_ref()
            .is_some_and(|i| i.group == "too_few")
    });
    h.get_by_label_contains(
        "importance not computed: parameter importance needs at least 2 COMPLETE trials with a \
         finite value; study `too_few` has 1",
    );
    assert!(
        h.query_by_label_contains("parameter importance (PED-ANOVA)")
            .is_none(),
        "the other study's chart is gone"
    );
}
