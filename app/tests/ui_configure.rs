//! The Configure panel driven through egui_kittest: fields flagged where they are typed, searched
//! parameters edited as fields, the split with its bar counts, and the memory bar that keeps Start
//! disabled.

use std::sync::Arc;

use crate::common::panels::*;
use crate::common::ui::step_until;
use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::panels::widgets::WARN;
use tradetune_app::ui::presets::UserPreset;
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_app::ui::{TradeTuneApp, draft::Draft};
use tradetune_engine::market::split::SplitSpec;
use tradetune_engine::market::time::format_timestamp;

#[test]
fn an_impossible_batch_size_is_flagged_and_start_is_disabled() {
    let settings = Settings {
        tab: Tab::Configure,
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    assert!(
        !start_disabled(&h),
        "Start should be enabled on the defaults"
    );
    let rollout = {
        let d = &h.state().cx.settings.draft;
        d.ppo.n_steps * d.env.n_envs
    };
    h.get_by_role_and_label(Role::SpinButton, "batch_size")
        .set_value_accesskit((rollout * 4) as f64);
    h.run_steps(3);
    assert_eq!(h.state().cx.settings.draft.ppo.batch_size, rollout * 4);
    // Flagged under the field and beside the disabled Start button.
    assert_eq!(
        h.query_all_by_label_contains("ppo.batch_size = ").count(),
        2,
        "the batch_size problem is shown under the field and beside Start"
    );
    assert!(
        start_disabled(&h),
        "Start must be disabled with an impossible batch"
    );
    h.get_by_label_contains("cannot start: ppo.batch_size = ");
}

#[test]
fn a_searched_parameter_is_added_and_edited_as_fields() {
    let settings = Settings {
        tab: Tab::Configure,
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    assert!(!start_disabled(&h));
    // Name the field, Add: a first range around its fixed value (gamma 0.99).
    retype(&mut h, "search parameter", "ppo.gamma");
    h.get_by_role_and_label(Role::Button, "Add").click();
    settle(&mut h);
    assert_eq!(
        search_spec(&h, "ppo.gamma").as_deref(),
        Some("{ low = 0.099, high = 1.0 }")
    );
    assert!(
        !start_disabled(&h),
        "{:?}",
        h.state().cx.settings.draft.search
    );

    // low above high: the engine's check flags the field, Start is disabled.
    retype(&mut h, "ppo.gamma low", "0.999");
    retype(&mut h, "ppo.gamma high", "0.95");
    assert_eq!(
        search_spec(&h, "ppo.gamma").as_deref(),
        Some("{ low = 0.999, high = 0.95 }")
    );
    assert!(start_disabled(&h));
    h.get_by_label_contains("cannot start: search.ppo.gamma");
    // Text that is no number: the engine's reader says why, the draft keeps the last range.
    retype(&mut h, "ppo.gamma low", "0.9x");
    assert!(start_disabled(&h));
    h.get_by_label_contains("cannot start: search.ppo.gamma");
    assert_eq!(
        search_spec(&h, "ppo.gamma").as_deref(),
        Some("{ low = 0.999, high = 0.95 }")
    );
    // Fixed: a valid stepped range again.
    retype(&mut h, "ppo.gamma low", "0.9");
    retype(&mut h, "ppo.gamma step", "0.01");
    assert_eq!(
        search_spec(&h, "ppo.gamma").as_deref(),
        Some("{ low = 0.9, high = 0.95, step = 0.01 }")
    );
    assert!(!start_disabled(&h));

    // A list field searched among choices, written in brackets.
    retype(&mut h, "search parameter", "ppo.policy.net_arch.pi");
    h.get_by_role_and_label(Role::Button, "Add").click();
    settle(&mut h);
    retype(
        &mut h,
        "ppo.policy.net_arch.pi choices",
        "[64, 64], [256, 128]",
    );
    assert_eq!(
        search_spec(&h, "ppo.policy.net_arch.pi").as_deref(),
        Some("{ choices = [[64, 64], [256, 128]] }")
    );
    assert!(!start_disabled(&h));
    // The study file the panel amounts to searches both, as the engine reads them.
    let file = h.state().cx.settings.draft.study_file(&[]).unwrap();
    let names: Vec<&str> = file.space.names().collect();
    assert_eq!(names, ["ppo.gamma", "ppo.policy.net_arch.pi"]);

    // An unknown name is flagged with the valid ones listed.
    retype(&mut h, "search parameter", "ppo.gama");
    h.get_by_role_and_label(Role::Button, "Add").click();
    settle(&mut h);
    assert!(start_disabled(&h));
    h.get_by_label_contains("cannot start: search.ppo.gama");
    h.get_by_label("fix ppo.gama").click();
    settle(&mut h);
    assert!(!start_disabled(&h));
}

#[test]
fn the_split_is_edited_where_typed_with_its_bar_counts_and_reaches_the_study() {
    let settings = Settings {
        tab: Tab::Configure,
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    let ts = h
        .state()
        .cx
        .data
        .ready()
        .expect("the bundled data loads")
        .dataset
        .timestamps
        .clone();
    let n = ts.len();
    let counts = |train: usize, validation: usize| {
        format!(
            "split: train {train} · validation {validation} · test {} bars",
            n - train - validation
        )
    };
    let part = |f: f64| (n as f64 * f).floor() as usize;
    h.get_by_label(&counts(part(0.7), part(0.15)));

    // A new train fraction: the bar counts follow at once.
    h.get_by_role_and_label(Role::SpinButton, "train fraction")
        .set_value_accesskit(0.5);
    settle(&mut h);
    assert_eq!(
        h.state().cx.settings.draft.split,
        SplitSpec::Fractions {
            train: 0.5,
            validation: 0.15
        }
    );
    h.get_by_label(&counts(part(0.5), part(0.15)));
    assert!(!start_disabled(&h));

    // Nothing left for the test split: the engine's message under the split and beside Start.
    h.get_by_role_and_label(Role::SpinButton, "validation fraction")
        .set_value_accesskit(0.6);
    settle(&mut h);
    assert!(start_disabled(&h));
    assert_eq!(
        h.query_all_by_label_contains("validation = 0.6 must be in (0, 1) with a sum below 1")
            .count(),
        2,
        "the split problem is shown under the split and beside Start"
    );
    h.get_by_label_contains("cannot start: split: fractions train = 0.5");
    h.get_by_role_and_label(Role::SpinButton, "validation fraction")
        .set_value_accesskit(0.2);
    settle(&mut h);
    assert!(!start_disabled(&h));
    h.get_by_label(&counts(part(0.5), part(0.2)));
    // The study Start runs cuts the data the same way.
    let file = h.state().cx.settings.draft.study_file(&[]).unwrap();
    assert_eq!(
        file.split,
        SplitSpec::Fractions {
            train: 0.5,
            validation: 0.2
        }
    );

    // By dates: the editor starts from where the current split cuts.
    h.get_by_role_and_label(Role::ComboBox, "split by").click();
    settle(&mut h);
    h.get_by_label("dates").click();
    settle(&mut h);
    let (validation_start, test_start) = match h.state().cx.settings.draft.split.clone() {
        SplitSpec::Dates {
            validation_start,
            test_start,
        } => (validation_start, test_start),
        other => panic!("still {other:?}"),
    };
    assert_eq!(validation_start, format_timestamp(ts[part(0.5)]));
    assert_eq!(test_start, format_timestamp(ts[part(0.5) + part(0.2)]));
    h.get_by_label(&counts(part(0.5), part(0.2)));
    // A test start before the validation start is flagged where it is typed.
    retype(&mut h, "test_start", "2001-01-01");
    assert!(start_disabled(&h));
    h.get_by_label_contains("cannot start: split: test_start 2001-01-01 must be after");
    retype(&mut h, "test_start", &test_start);
    assert!(!start_disabled(&h));
    assert_eq!(
        h.state().cx.settings.draft.study_file(&[]).unwrap().split,
        SplitSpec::Dates {
            validation_start: validation_start.clone(),
            test_start: test_start.clone()
        }
    );

    // Remembered with the draft.
    let restored = saved_settings(&mut h);
    assert_eq!(
        restored.draft.split,
        SplitSpec::Dates {
            validation_start,
            test_start
        }
    );

    // Cross-validation: the scheme's folds are counted on the loaded bars, reach the study
    // file, and folds that cannot be cut keep Start disabled with the engine's reason.
    h.get_by_role_and_label(Role::ComboBox, "evaluation")
        .click();
    settle(&mut h);
    h.get_by_label("combinatorial purged CV").click();
    settle(&mut h);
    h.get_by_label_contains("15 folds over the train and validation bars");
    // The training before Start counts every fold.
    let t = h.state().cx.settings.draft.train.total_timesteps;
    h.get_by_label_contains(&format!(
        "training ≈ 15 folds × {t} samples = {} samples per trial",
        15 * t
    ));
    assert!(!start_disabled(&h));
    let file = h.state().cx.settings.draft.study_file(&[]).unwrap();
    assert_eq!(file.evaluation.name(), "cpcv");
    h.get_by_role_and_label(Role::SpinButton, "test groups (k)")
        .set_value_accesskit(6.0);
    settle(&mut h);
    assert!(start_disabled(&h));
    h.get_by_label_contains("cannot start: evaluation:");
}

#[test]
fn the_memory_bar_turns_red_when_a_run_would_be_refused() {
    let mut huge = Draft::default();
    huge.ppo.policy.net_arch.pi = vec![4096, 4096, 4096];
    huge.ppo.policy.net_arch.vf = vec![4096, 4096, 4096];
    let settings = Settings {
        user_presets: vec![UserPreset {
            name: "huge nets".into(),
            draft: huge,
        }],
        ..Settings::default()
    };
    // A machine with 1 GiB of memory: the defaults fit, the huge nets do not.
    let app = TradeTuneApp::new(settings, Arc::new(no_dialogs()), cpu_only(1 << 30));
    let mut h = harness(app);
    step_until(&mut h, "the bundled data", data_loaded);
    let fill = memory_bar_fill(&h).expect("the memory bar is drawn");
    // Green well within the budget (widgets::memory_bar's colour below 80 %).
    assert!(
        close_to(fill, egui::Color32::from_rgb(0x30, 0x90, 0x50)),
        "not green on the defaults: {fill:?}"
    );
    assert!(
        h.query_by_label_contains("a run would be refused")
            .is_none()
    );

    h.get_by_label("Apply huge nets").click();
    settle(&mut h);
    h.get_by_label_contains("over budget, a run would be refused");
    let fill = memory_bar_fill(&h).expect("the memory bar is drawn");
    assert!(close_to(fill, WARN), "not red over budget: {fill:?}");
    // And Start refuses it, saying why.
    h.get_by_label("Configure").click();
    settle(&mut h);
    assert!(start_disabled(&h));
    h.get_by_label_contains("cannot start: the estimate is over the memory budget");
}

/// The data is loaded with the episode length too (the loader refuses data too short for
/// it): changing `episode_bars` loads it again, as changing `lookback` does, so an error that
/// told the user to lower it goes once they have.
#[test]
fn changing_episode_bars_loads_the_data_again() {
    let settings = Settings {
        tab: Tab::Configure,
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    let before = h.state().cx.data_requests;
    let bars = h.state().cx.settings.draft.env.episode_bars;
    h.get_by_role_and_label(Role::SpinButton, "episode_bars")
        .set_value_accesskit((bars + 100) as f64);
    h.run_steps(3);
    assert_eq!(h.state().cx.settings.draft.env.episode_bars, bars + 100);
    assert_eq!(
        h.state().cx.data_requests,
        before + 1,
        "the data was not loaded again"
    );
    step_until(&mut h, "the data", data_loaded);
}
