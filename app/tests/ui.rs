//! The desktop program's panels driven through egui_kittest: widgets found by their labels,
//! clicked and typed into, with the real engine behind them (bundled data, a real training run
//! on the CPU device, the Optuna reference database).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::ui::{self, step_until};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use tradetune_app::ui::app::SETTINGS_KEY;
use tradetune_app::ui::dialog::{FileDialogs, Pick};
use tradetune_app::ui::panels::widgets::WARN;
use tradetune_app::ui::presets::UserPreset;
use tradetune_app::ui::state::{DataState, Settings, Tab};
use tradetune_app::ui::{TradeTuneApp, draft::Draft};
use tradetune_engine::device::DeviceInfo;
use tradetune_engine::device::precision::Precision;
use tradetune_engine::market::split::SplitSpec;
use tradetune_engine::market::time::format_timestamp;
use tradetune_engine::storage::{
    APPLIED_CONFIG_KEY, JsonValue, NewTrial, OptunaDistribution, Storage, StudyDirection,
    TrialState,
};
use tradetune_engine::study::file::SearchSpec;
use tradetune_engine::telemetry::{GpuInfo, GpuVendor};

/// Answers every dialog with a path chosen by the test.
struct TestDialogs {
    database: Option<PathBuf>,
    save_as: Option<PathBuf>,
}

/// Answers the checkpoint dialog.
struct CheckpointDialog(PathBuf);

impl FileDialogs for CheckpointDialog {
    fn pick(&self, pick: &Pick) -> Vec<PathBuf> {
        match pick {
            Pick::Checkpoint => vec![self.0.clone()],
            _ => Vec::new(),
        }
    }
}

impl FileDialogs for TestDialogs {
    fn pick(&self, pick: &Pick) -> Vec<PathBuf> {
        match pick {
            Pick::Database => self.database.clone().into_iter().collect(),
            Pick::TrialsCsv(_) | Pick::TelemetryCsv(_) => {
                self.save_as.clone().into_iter().collect()
            }
            Pick::DataFiles | Pick::Checkpoint => Vec::new(),
        }
    }
}

fn app_with(settings: Settings, dialogs: TestDialogs) -> TradeTuneApp {
    ui::app(settings, Arc::new(dialogs))
}

fn no_dialogs() -> TestDialogs {
    TestDialogs {
        database: None,
        save_as: None,
    }
}

fn harness(app: TradeTuneApp) -> Harness<'static, TradeTuneApp> {
    ui::harness(app, [1400.0, 1100.0])
}

/// A click is handled in the frame that sees it and its effect drawn in the next; text that
/// follows a changed value (layer lists) catches up one frame later still.
fn settle(h: &mut Harness<'_, TradeTuneApp>) {
    h.run_steps(4);
}

fn data_loaded(app: &TradeTuneApp) -> bool {
    !matches!(app.state.data, DataState::Loading(_) | DataState::None)
}

#[test]
fn first_launch_loads_the_bundled_data_and_lists_the_cpu() {
    let mut h = harness(app_with(Settings::default(), no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    assert!(
        h.state().state.data.ready().is_some(),
        "bundled data failed to load"
    );
    h.get_by_label("Hardware & presets");
    h.get_by_label_contains("burn-flex");
    h.get_by_label_contains("memory:");
    h.get_by_label("Configure").click();
    settle(&mut h);
    h.get_by_label_contains("AAPL, GOOG, IBM, MSFT");
    h.get_by_label_contains("split: train 1469");
}

#[test]
fn the_gpus_the_probes_found_show_with_their_driver() {
    let mut app = app_with(Settings::default(), no_dialogs());
    // What the NVML probe reports on an RTX 4080 machine (there is no GPU here).
    app.state.gpus = vec![GpuInfo {
        vendor: GpuVendor::Nvidia,
        name: "NVIDIA GeForce RTX 4080".into(),
        pci_bus_id: "0000:01:00.0".parse().ok(),
        uuid: None,
        mem_total_bytes: Some(16 * 1024 * 1024 * 1024),
        driver: Some("NVIDIA 560.35.03".into()),
    }];
    let mut h = harness(app);
    settle(&mut h);
    h.get_by_label("NVIDIA GeForce RTX 4080");
    h.get_by_label("NVIDIA 560.35.03");
    h.get_by_label("0000:01:00.0");
    h.get_by_label("16.0 GiB");

    // Without GPUs the probes' reason is shown instead.
    let mut app = app_with(Settings::default(), no_dialogs());
    app.state.no_gpu_reason = Some("no GPU present (NVML: libnvidia-ml.so not found)".into());
    let mut h = harness(app);
    settle(&mut h);
    h.get_by_label_contains("libnvidia-ml.so not found");
}

/// "Refresh devices" lists the devices anew off the UI thread: an adapter that appeared since
/// the start (here a software Vulkan one, from a fixed probe) is listed with its type, memory
/// and driver and can be chosen; the button is disabled while the drivers are asked.
#[test]
fn refresh_devices_lists_an_adapter_found_since_the_start() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tradetune_engine::device::adapters::{Adapter, AdapterKind};
    let mut later = cpu_only(8 << 30);
    later.push(DeviceInfo {
        name: "wgpu:cpu".into(),
        backend: "wgpu".into(),
        available: true,
        detail:
            "llvmpipe (LLVM 15.0.6, 256 bits) (software renderer, Vulkan; slow, for checks only)"
                .into(),
        memory_bytes: Some(3 << 30),
        precisions: vec![Precision::F32],
        reports_pool_usage: true,
        adapter: Some(Adapter {
            name: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
            kind: AdapterKind::Cpu,
            index: 0,
            api: "Vulkan".into(),
            driver: "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)".into(),
            vendor: 0x10005,
            device: 0,
            pci_bus_id: String::new(),
            shader_f16: false,
            memory_bytes: Some(3 << 30),
        }),
    });
    let probed = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&probed);
    let app = TradeTuneApp::new(
        Settings::default(),
        Arc::new(no_dialogs()),
        cpu_only(8 << 30),
    )
    .with_device_probe(Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        later.clone()
    }));
    let mut h = harness(app);
    settle(&mut h);
    assert!(h.query_by_label("wgpu:cpu").is_none());

    // Held back until the test lets it go, so the in-flight state is seen on any machine.
    h.state_mut().hold_jobs();
    h.get_by_label("Refresh devices").click();
    h.run_steps(2);
    assert!(h.state().state.refreshing_devices);
    h.get_by_label("asking the drivers…");
    assert!(
        h.get_by_label("Refresh devices")
            .accesskit_node()
            .is_disabled()
    );
    assert_eq!(h.state_mut().release_jobs(), 1, "one job lists the devices");
    step_until(&mut h, "the devices", |a| !a.state.refreshing_devices);
    assert_eq!(probed.load(Ordering::SeqCst), 1);

    let names: Vec<&str> = h
        .state()
        .state
        .devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["cpu", "wgpu", "wgpu:cpu"]);
    h.get_by_label("wgpu:cpu");
    h.get_by_label("software renderer");
    h.get_by_label("3.0 GiB");
    h.get_by_label("llvmpipe Mesa 22.3.6 (LLVM 15.0.6)");
    assert!(
        h.state()
            .state
            .notices
            .iter()
            .any(|n| n == "devices refreshed: 3 listed, 2 usable here"),
        "{:?}",
        h.state().state.notices
    );
    // The new adapter can be trained on: "Train on" offers it.
    h.get_by_label("Train on").click();
    settle(&mut h);
    h.get_by_role_and_label(Role::Button, "wgpu:cpu").click();
    settle(&mut h);
    assert_eq!(h.state().state.settings.draft.study.devices[0], "wgpu:cpu");

    // A second refresh asks again (the click is handled in the next frame: wait for the
    // probe's second answer, not only for the flag).
    h.get_by_label("Refresh devices").click();
    step_until(&mut h, "the second refresh", |a| {
        probed.load(Ordering::SeqCst) == 2 && !a.state.refreshing_devices
    });
    assert_eq!(probed.load(Ordering::SeqCst), 2);
}

/// A study device naming no adapter here (`wgpu:9`) is flagged where the devices are edited
/// and keeps Start disabled, with this machine's real device list (lavapipe, a GPU or none).
#[test]
fn a_device_naming_no_adapter_keeps_start_disabled() {
    let settings = Settings {
        tab: Tab::Configure,
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    assert!(!start_disabled(&h));
    h.state_mut().state.settings.draft.study.devices = vec!["wgpu:9".into()];
    settle(&mut h);
    assert!(start_disabled(&h));
    let problems = h.state().state.device_problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let message = &problems[0].message;
    assert!(
        message.contains("wgpu:9") && !message.contains("panicked"),
        "{message}"
    );
    h.get_by_label_contains("cannot start: study.devices");
}

#[test]
fn clicking_a_preset_changes_the_fields_and_the_memory_bar() {
    let mut wide = Draft::default();
    wide.ppo.policy.net_arch.pi = vec![1024, 1024];
    wide.ppo.policy.net_arch.vf = vec![1024, 1024];
    wide.env.n_envs = 16;
    let settings = Settings {
        user_presets: vec![UserPreset {
            name: "wide nets".into(),
            draft: wide.clone(),
        }],
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    let before = memory_text(&h);
    h.get_by_label("Apply wide nets").click();
    settle(&mut h);
    assert_eq!(h.state().state.settings.draft, wide);
    assert_eq!(
        h.state().state.settings.preset.as_deref(),
        Some("wide nets")
    );
    let after = memory_text(&h);
    assert_ne!(before, after, "the memory bar did not follow the preset");
    // The Configure panel shows the preset's values in its fields.
    h.get_by_label("Configure").click();
    settle(&mut h);
    let n_envs = h.get_by_role_and_label(Role::SpinButton, "n_envs");
    assert_eq!(n_envs.value().as_deref(), Some("16"));
    let pi = h.get_by_role_and_label(Role::TextInput, "net_arch.pi");
    assert_eq!(pi.value().as_deref(), Some("1024, 1024"));
}

fn memory_text(h: &Harness<'_, TradeTuneApp>) -> String {
    let node = h.get_by_label_contains("memory:");
    format!("{:?}", node.accesskit_node().label())
}

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
        let d = &h.state().state.settings.draft;
        d.ppo.n_steps * d.env.n_envs
    };
    h.get_by_role_and_label(Role::SpinButton, "batch_size")
        .set_value_accesskit((rollout * 4) as f64);
    h.run_steps(3);
    assert_eq!(h.state().state.settings.draft.ppo.batch_size, rollout * 4);
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

/// Replaces the text of the text field named `label` with `text`, as a user would: click,
/// select all, type.
fn retype(h: &mut Harness<'_, TradeTuneApp>, label: &str, text: &str) {
    h.get_by_role_and_label(Role::TextInput, label).click();
    settle(h);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.run_steps(1);
    h.get_by_role_and_label(Role::TextInput, label)
        .type_text(text);
    settle(h);
}

fn search_spec(h: &Harness<'_, TradeTuneApp>, name: &str) -> Option<String> {
    let draft = &h.state().state.settings.draft;
    draft
        .search
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.spec.to_string())
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
        h.state().state.settings.draft.search
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
    let file = h.state().state.settings.draft.study_file(&[]).unwrap();
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

fn start_disabled(h: &Harness<'_, TradeTuneApp>) -> bool {
    h.get_by_role_and_label(Role::Button, "Start")
        .accesskit_node()
        .is_disabled()
}

#[test]
fn a_first_launch_applies_the_preset_for_this_hardware() {
    let mut app = app_with(Settings::default(), no_dialogs());
    app.apply_hardware_preset(&[]);
    assert_eq!(
        app.state.settings.preset.as_deref(),
        Some("cpu"),
        "{:?}",
        app.state.notices
    );
    let mut h = harness(app);
    step_until(&mut h, "the bundled data", data_loaded);
    h.get_by_label_contains("(applied)");
    // A preset chosen once is not replaced on the next launch.
    let mut again = app_with(
        Settings {
            preset: Some("rtx4080".into()),
            ..Settings::default()
        },
        no_dialogs(),
    );
    again.apply_hardware_preset(&["NVIDIA GeForce RTX 4080 Laptop GPU".to_owned()]);
    assert_eq!(again.state.settings.preset.as_deref(), Some("rtx4080"));
}

/// A study of two trials that train for 256 samples with a searched learning rate: seconds
/// on a CPU.
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
    draft.pruner.kind = tradetune_engine::study::file::PrunerKind::None;
    draft.search = vec![tradetune_app::ui::draft::SearchEntry {
        name: "ppo.learning_rate".into(),
        spec: SearchSpec::parse("{ low = 1e-4, high = 1e-3, log = true }").unwrap(),
    }];
    draft
}

#[test]
fn a_tiny_study_on_the_cpu_runs_live_and_its_trials_complete_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let csv = dir.path().join("tiny.csv");
    let draft = tiny_draft("ui_tiny");
    let settings = Settings {
        tab: Tab::Run,
        draft,
        study_db: Some(db.clone()),
        ..Settings::default()
    };
    let dialogs = TestDialogs {
        database: None,
        save_as: Some(csv.clone()),
    };
    let mut h = harness(app_with(settings, dialogs));
    step_until(&mut h, "the bundled data", data_loaded);
    h.get_by_role_and_label(Role::Button, "Start").click();
    settle(&mut h);
    assert!(
        h.state().state.run.running,
        "Start did not start the study: {:?}",
        h.state().state.notices
    );
    step_until(&mut h, "the first trial to start", |a| {
        !a.state.run.trials.is_empty() || !a.state.run.running
    });
    // The Run panel says it; the status bar may say it too, at the same moment.
    assert!(
        h.query_all_by_label_contains("worker 0 on cpu").count() >= 1,
        "no label names the worker"
    );
    step_until(&mut h, "the study to finish", |a| !a.state.run.running);
    let run = &h.state().state.run;
    assert_eq!(run.error, None, "{:?}", h.state().state.notices);
    let end = run.end.clone().expect("the study reported its end");
    assert_eq!(end.counts, [2, 0, 0], "{:?}", run.trials);
    for t in &run.trials {
        assert!(
            !t.curve.is_empty(),
            "trial {} reported no intermediate values",
            t.number
        );
    }
    h.get_by_label_contains("finished: 2 complete, 0 pruned, 0 failed");
    // Each update's losses, samples/s and phase times arrived live (256 samples at 64 per
    // update: 4 updates) and the selected trial shows them.
    for t in &run.trials {
        for metric in [
            "losses/policy_loss",
            "losses/value_loss",
            "charts/SPS",
            "time/update_s",
        ] {
            let points = t.metrics.get(metric).map_or(0, Vec::len);
            assert_eq!(
                points, 4,
                "trial {}: {metric} has {points} points",
                t.number
            );
        }
    }
    assert!(!run.samples_per_second.is_empty());
    h.get_by_label_contains("update 4 · 256 samples");
    h.get_by_label_contains("where the time goes");
    h.get_by_label_contains("advantages ");
    h.get_by_label("samples/s, all workers");

    // The Studies panel opens the database and shows the study's trials as COMPLETE.
    step_until(&mut h, "the study's trials in the Studies panel", |a| {
        a.state.studies.rows.len() == 2
    });
    assert_eq!(h.state().state.settings.tab, Tab::Run);
    h.get_by_label("Studies").click();
    settle(&mut h);
    assert_eq!(h.query_all_by_label("COMPLETE").count(), 2);
    assert!(
        h.state()
            .state
            .studies
            .rows
            .iter()
            .all(|r| r.device == "cpu"),
        "{:?}",
        h.state().state.studies.rows
    );

    // A trial's details read its stored training curves (one point per update).
    h.state_mut()
        .handle(tradetune_app::ui::command::Command::ShowTrial(0));
    step_until(&mut h, "the stored training curves", |a| {
        a.state.studies.curve.is_some()
    });
    let (_, curves) = h.state().state.studies.curve.clone().unwrap();
    let curves = curves.expect("the curves read");
    assert_eq!(
        curves.get("losses/policy_loss").map(Vec::len),
        Some(4),
        "{curves:?}"
    );
    assert_eq!(
        curves["losses/policy_loss"].last().map(|p| p[0]),
        Some(256.0),
        "x is the env step"
    );
    settle(&mut h);
    h.get_by_label("training losses by env step");
    // Its telemetry summary, as stored with it.
    h.get_by_label("telemetry summary").click();
    settle(&mut h);
    h.get_by_label("wall_s");
    h.get_by_label("phase_update_s");

    // Export: the CSV has those rows.
    h.get_by_label("Export trials CSV…").click();
    step_until(&mut h, "the export", |a| {
        a.state
            .notices
            .iter()
            .any(|n| n.starts_with("wrote ") || n.starts_with("export failed"))
    });
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows.iter().all(|r| r.ends_with(",COMPLETE")), "{text}");

    // Telemetry export: one row per sample, columns named with units.
    let before = h.state().state.notices.len();
    h.get_by_label("Export telemetry CSV…").click();
    step_until(&mut h, "the telemetry export", |a| {
        a.state.notices[before..]
            .iter()
            .any(|n| n.starts_with("wrote ") || n.starts_with("export failed"))
    });
    let notice = h.state().state.notices.last().cloned().unwrap();
    assert!(notice.contains("telemetry rows"), "{notice}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let header = text.lines().next().unwrap_or_default();
    for column in ["cpu_pct", "rss_mib", "trial", "gpu0_util_pct"] {
        assert!(
            header.split(',').any(|c| c == column),
            "no {column} in {header}"
        );
    }
    // The verdict of each trial is stored with it and shown in the Run panel.
    assert!(
        h.state()
            .state
            .studies
            .rows
            .iter()
            .all(|r| r.verdict.is_some()),
        "{:?}",
        h.state().state.studies.rows
    );
    h.get_by_label("Run").click();
    settle(&mut h);
    h.get_by_label_contains("Bottleneck of trial");

    // Each COMPLETE trial's policy is saved beside the database and backtests from its row.
    let row = h.state().state.studies.rows[0].clone();
    let applied = row
        .applied_config
        .clone()
        .expect("the applied configuration is stored");
    assert!(applied.contains("\"n_envs\": 2"), "{applied}");
    assert!(row.placement.contains("backend flex"), "{}", row.placement);
    let ckpt = row.checkpoint.clone().expect("a checkpoint attribute");
    assert!(
        ckpt.starts_with(dir.path().join("checkpoints").join("ui_tiny")),
        "{}",
        ckpt.display()
    );
    h.state_mut()
        .handle(tradetune_app::ui::command::Command::BacktestTrial(ckpt));
    settle(&mut h);
    step_until(&mut h, "the trial's backtest", |a| {
        !a.state.backtest.running
    });
    let b = &h.state().state.backtest;
    assert_eq!(b.error, None);
    assert!(
        b.result
            .as_ref()
            .is_some_and(|r| r.table.contains("sharpe"))
    );
    assert_eq!(h.state().state.settings.tab, Tab::Backtest);
}

fn reference_db(dir: &Path) -> PathBuf {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/testdata/optuna-reference.db");
    let db = dir.join("optuna-reference.db");
    std::fs::copy(&src, &db).unwrap_or_else(|e| panic!("copying {}: {e}", src.display()));
    db
}

#[test]
fn the_optuna_reference_database_opens_aggregated_sorts_filters_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let db = reference_db(dir.path());
    let csv = dir.path().join("export.csv");
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    let dialogs = TestDialogs {
        database: Some(db.clone()),
        save_as: Some(csv.clone()),
    };
    let mut h = harness(app_with(settings, dialogs));
    settle(&mut h);
    h.get_by_label("Open database…").click();
    step_until(&mut h, "the database", |a| {
        a.state.studies.db.is_some() || a.state.studies.error.is_some()
    });
    let studies = &h.state().state.studies;
    assert_eq!(studies.error, None);
    let db_studies = studies.db.as_ref().unwrap().studies.len();
    assert_eq!(db_studies, 4, "the reference database holds four studies");
    let groups: HashMap<String, Vec<String>> = studies
        .groups
        .iter()
        .map(|g| (g.name.clone(), g.members.clone()))
        .collect();
    assert_eq!(groups.len(), 3, "{groups:?}");
    let (aggregated, members) = groups
        .iter()
        .find(|(_, m)| m.len() == 2)
        .expect("the two x_aggressive_N studies are one entry");
    assert!(aggregated.ends_with("aggressive"), "{aggregated}");
    let total: usize = h
        .state()
        .state
        .studies
        .groups
        .iter()
        .find(|g| &g.name == aggregated)
        .map(|g| g.n_trials())
        .unwrap();

    h.get_by_label(aggregated.as_str()).click();
    step_until(&mut h, "the trials", |a| !a.state.studies.rows.is_empty());
    let view = &h.state().state.studies;
    assert_eq!(view.rows.len(), total);
    for m in members {
        assert!(view.rows.iter().any(|r| &r.study == m), "no rows of {m}");
    }

    // Sort by value: the visible rows come out ordered, missing values last.
    h.get_by_label("value").click();
    settle(&mut h);
    let values: Vec<Option<f64>> = {
        let v = &h.state().state.studies;
        v.visible.iter().map(|&i| v.rows[i].value).collect()
    };
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    assert!(present.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
    h.get_by_label("value (asc)").click();
    settle(&mut h);
    let first = {
        let v = &h.state().state.studies;
        v.rows[v.visible[0]].value
    };
    assert_eq!(
        first,
        present.last().copied(),
        "descending puts the largest first"
    );

    // Columns can be hidden.
    assert!(h.query_by_label("device").is_some());
    h.state_mut()
        .handle(tradetune_app::ui::command::Command::ToggleColumn(
            tradetune_app::ui::state::TrialColumn::Device,
        ));
    settle(&mut h);
    assert!(
        h.query_by_label("device").is_none(),
        "the device column is still shown"
    );

    // Filter by state.
    let complete = view_count(&h, "COMPLETE");
    h.state_mut()
        .handle(tradetune_app::ui::command::Command::FilterTrials(Some(
            TrialState::Complete,
        )));
    settle(&mut h);
    assert_eq!(h.state().state.studies.visible.len(), complete);
    h.get_by_label_contains(&format!("{complete} of {total} trials"));

    // Export through the (test) save dialog: one file per member of the group.
    h.get_by_label("Export trials CSV…").click();
    step_until(&mut h, "the export", |a| {
        a.state
            .notices
            .iter()
            .any(|n| n.starts_with("wrote ") || n.starts_with("export failed"))
    });
    let notice = h.state().state.notices.last().cloned().unwrap();
    assert!(
        notice.starts_with(&format!("wrote {total} trials")),
        "{notice}"
    );
    let mut rows = 0;
    for m in members {
        let path = dir.path().join(format!("export-{m}.csv"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let header = text.lines().next().unwrap_or_default();
        assert!(
            header.contains(",number,") && header.ends_with(",state"),
            "{header}"
        );
        rows += text.lines().count() - 1;
    }
    assert_eq!(rows, total);
}

fn view_count(h: &Harness<'_, TradeTuneApp>, state: &str) -> usize {
    h.state()
        .state
        .studies
        .rows
        .iter()
        .filter(|r| r.state.to_string() == state)
        .count()
}

/// eframe's storage, in memory.
#[derive(Default)]
struct MemoryStorage(HashMap<String, String>);

impl eframe::Storage for MemoryStorage {
    fn get_string(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }
    fn set_string(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
    fn remove_string(&mut self, key: &str) {
        self.0.remove(key);
    }
    fn flush(&mut self) {}
}

#[test]
fn the_app_restarts_with_its_saved_settings() {
    let mut h = harness(app_with(Settings::default(), no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    h.get_by_label("Configure").click();
    settle(&mut h);
    h.get_by_role_and_label(Role::SpinButton, "n_epochs")
        .set_value_accesskit(7.0);
    h.get_by_role_and_label(Role::TextInput, "preset name")
        .click();
    h.run_steps(1);
    h.get_by_role_and_label(Role::TextInput, "preset name")
        .type_text("mine");
    settle(&mut h);
    h.get_by_label("Save as preset").click();
    settle(&mut h);

    let mut storage = MemoryStorage::default();
    eframe::App::save(h.state_mut(), &mut storage);
    let restored: Settings = eframe::get_value(&storage, SETTINGS_KEY).expect("settings saved");
    assert_eq!(restored, h.state().state.settings);
    assert_eq!(restored.tab, Tab::Configure);
    assert_eq!(restored.draft.ppo.n_epochs, 7);
    assert_eq!(restored.user_presets.len(), 1);
    assert_eq!(restored.user_presets[0].name, "mine");

    // A new app from those settings shows them.
    let mut again = harness(app_with(restored, no_dialogs()));
    step_until(&mut again, "the bundled data", data_loaded);
    let epochs = again.get_by_role_and_label(Role::SpinButton, "n_epochs");
    assert_eq!(epochs.value().as_deref(), Some("7"));
    again.get_by_label("Hardware & presets").click();
    settle(&mut again);
    again.get_by_label("mine");
}

#[test]
fn settings_from_an_older_version_still_load() {
    // Every field has a default: a file with only some of them loads, the rest default.
    let mut storage = MemoryStorage::default();
    storage
        .0
        .insert(SETTINGS_KEY.into(), "(tab: Studies)".into());
    let s: Settings = eframe::get_value(&storage, SETTINGS_KEY).expect("partial settings load");
    assert_eq!(s.tab, Tab::Studies);
    assert_eq!(s.draft, Draft::default());
}

#[test]
fn two_studies_compare_side_by_side_and_a_wrong_name_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = reference_db(dir.path());
    let settings = Settings {
        tab: Tab::Compare,
        database: Some(db),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.state.studies.db.is_some());
    for (field, text) in [("A", "x_aggressive_1"), ("B", "x_aggressive_2")] {
        h.get_by_role_and_label(Role::TextInput, field).click();
        settle(&mut h);
        h.get_by_role_and_label(Role::TextInput, field)
            .type_text(text);
        settle(&mut h);
    }
    h.get_by_label("Compare A with B").click();
    settle(&mut h);
    assert!(
        h.state().state.compare.loading || h.state().state.compare.result.is_some(),
        "the button did not start a comparison"
    );
    step_until(&mut h, "the comparison", |a| !a.state.compare.loading);
    let c = h
        .state()
        .state
        .compare
        .result
        .clone()
        .unwrap_or_else(|| panic!("no comparison: {:?}", h.state().state.compare));
    assert_eq!(h.state().state.compare.error, None);
    assert!(
        c.table.contains("x_aggressive_1") && c.table.contains("x_aggressive_2"),
        "{}",
        c.table
    );
    assert!(!c.a_values.is_empty() && !c.b_values.is_empty());
    h.get_by_label_contains("samples/s");

    h.state_mut()
        .handle(tradetune_app::ui::command::Command::Compare(
            "x_aggressive_1".into(),
            "no_such_study".into(),
        ));
    step_until(&mut h, "the failed comparison", |a| {
        !a.state.compare.loading
    });
    let e = h.state().state.compare.error.clone().expect("an error");
    assert!(e.contains("no_such_study"), "{e}");
}

#[test]
fn a_trained_checkpoint_backtests_against_equal_weight() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("run1");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args(["train", "--total-timesteps", "256", "--out"])
        .arg(&ckpt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let settings = Settings {
        tab: Tab::Backtest,
        ..Settings::default()
    };
    let app = TradeTuneApp::new(
        settings,
        Arc::new(CheckpointDialog(ckpt.clone())),
        tradetune_engine::device::describe_devices(),
    );
    let mut h = harness(app);
    settle(&mut h);
    h.get_by_label("Choose checkpoint…").click();
    step_until(&mut h, "the dialog", |a| {
        a.state.backtest.checkpoint.is_some()
    });
    h.get_by_label("Run backtest").click();
    settle(&mut h);
    step_until(&mut h, "the backtest", |a| !a.state.backtest.running);
    let b = &h.state().state.backtest;
    assert_eq!(b.error, None);
    let r = b.result.clone().unwrap();
    assert!(r.about.contains("test split"), "{}", r.about);
    assert!(
        r.table.contains("sharpe") && r.table.contains("equal weight"),
        "{}",
        r.table
    );
    assert_eq!(r.agent.len(), r.equal_weight.len());
    assert!(r.agent.len() > 100, "{} bars", r.agent.len());
    h.get_by_label_contains("max drawdown");

    // A directory that is not a checkpoint: the error names the missing file.
    h.state_mut().state.backtest.checkpoint = Some(dir.path().to_path_buf());
    h.state_mut()
        .handle(tradetune_app::ui::command::Command::Backtest);
    step_until(&mut h, "the failed backtest", |a| !a.state.backtest.running);
    let e = h.state().state.backtest.error.clone().expect("an error");
    assert!(e.contains("model.bpk"), "{e}");
}

/// The devices of a machine with only a CPU of `cpu_bytes` and a build without wgpu, fixed so
/// the tests do not depend on this machine.
fn cpu_only(cpu_bytes: u64) -> Vec<DeviceInfo> {
    vec![
        DeviceInfo {
            name: "cpu".into(),
            backend: "flex".into(),
            available: true,
            detail: "burn-flex on 2 threads (SIMD, rayon)".into(),
            memory_bytes: Some(cpu_bytes),
            precisions: vec![Precision::F32],
            reports_pool_usage: false,
            adapter: None,
        },
        DeviceInfo {
            name: "wgpu".into(),
            backend: "wgpu".into(),
            available: false,
            detail: "this build has no wgpu backend; rebuild with `--features wgpu`".into(),
            memory_bytes: None,
            precisions: Vec::new(),
            reports_pool_usage: false,
            adapter: None,
        },
    ]
}

fn saved_settings(h: &mut Harness<'_, TradeTuneApp>) -> Settings {
    let mut storage = MemoryStorage::default();
    eframe::App::save(h.state_mut(), &mut storage);
    eframe::get_value(&storage, SETTINGS_KEY).expect("settings saved")
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
        .state
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
        h.state().state.settings.draft.split,
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
    let file = h.state().state.settings.draft.study_file(&[]).unwrap();
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
    let (validation_start, test_start) = match h.state().state.settings.draft.split.clone() {
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
        h.state()
            .state
            .settings
            .draft
            .study_file(&[])
            .unwrap()
            .split,
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
    let t = h.state().state.settings.draft.train.total_timesteps;
    h.get_by_label_contains(&format!(
        "training ≈ 15 folds × {t} samples = {} samples per trial",
        15 * t
    ));
    assert!(!start_disabled(&h));
    let file = h.state().state.settings.draft.study_file(&[]).unwrap();
    assert_eq!(file.evaluation.name(), "cpcv");
    h.get_by_role_and_label(Role::SpinButton, "test groups (k)")
        .set_value_accesskit(6.0);
    settle(&mut h);
    assert!(start_disabled(&h));
    h.get_by_label_contains("cannot start: evaluation:");
}

#[test]
fn the_devices_are_listed_with_repeats_bound_to_workers_and_checked() {
    let settings = Settings {
        tab: Tab::Configure,
        ..Settings::default()
    };
    let app = TradeTuneApp::new(settings, Arc::new(no_dialogs()), cpu_only(32 << 30));
    let mut h = harness(app);
    step_until(&mut h, "the bundled data", data_loaded);
    let devices =
        |h: &Harness<'_, TradeTuneApp>| h.state().state.settings.draft.study.devices.clone();
    assert_eq!(devices(&h), ["cpu"]);
    h.get_by_label("worker 0");

    // The CPU twice: two slots, `cpu` and `cpu#1`, and three workers spread over them.
    h.get_by_role_and_label(Role::Button, "Add device").click();
    settle(&mut h);
    assert_eq!(devices(&h), ["cpu", "cpu"]);
    h.get_by_label("cpu#1");
    h.get_by_label("no worker");
    h.get_by_role_and_label(Role::SpinButton, "workers")
        .set_value_accesskit(3.0);
    settle(&mut h);
    h.get_by_label("workers 0, 2");
    h.get_by_label("worker 1");
    assert!(!start_disabled(&h));
    // What Start runs: three workers over both slots.
    let dir = tempfile::tempdir().unwrap();
    let rc = h
        .state()
        .state
        .settings
        .draft
        .study_file(&[])
        .unwrap()
        .runner_config(dir.path().join("studies.db"))
        .unwrap();
    assert_eq!(rc.workers, 3);
    let specs: Vec<String> = rc.devices.iter().map(|d| d.spec.to_string()).collect();
    assert_eq!(specs, ["cpu", "cpu"]);

    // "add device" offers only what this build can use here.
    h.get_by_role_and_label(Role::ComboBox, "add device")
        .click();
    settle(&mut h);
    assert!(h.query_by_label("wgpu").is_none(), "wgpu is offered");
    h.key_press(egui::Key::Escape);
    settle(&mut h);

    // Removing every device: the engine's check flags the list and Start is disabled.
    h.get_by_label("remove device 2").click();
    settle(&mut h);
    assert_eq!(devices(&h), ["cpu"]);
    h.get_by_label("remove device 1").click();
    settle(&mut h);
    assert!(devices(&h).is_empty());
    assert!(start_disabled(&h));
    assert_eq!(
        h.query_all_by_label_contains("list at least one device")
            .count(),
        2,
        "the devices problem is shown under the list and beside Start"
    );
    h.get_by_label_contains("cannot start: study.devices");

    // A device from elsewhere (a preset, a settings file) this machine cannot use: flagged
    // with the reason the Hardware panel gives.
    h.state_mut().state.settings.draft.study.devices = vec!["wgpu:0".into()];
    settle(&mut h);
    assert!(start_disabled(&h));
    h.get_by_label_contains(
        "cannot start: study.devices: device wgpu:0 cannot be used here: this build has no wgpu",
    );

    // Remembered with the draft.
    h.state_mut().state.settings.draft.study.devices = vec!["cpu".into(), "cpu".into()];
    let restored = saved_settings(&mut h);
    assert_eq!(restored.draft.study.devices, ["cpu", "cpu"]);
    assert_eq!(restored.draft.study.workers, 3);
}

/// The colour the memory bar is filled with in the last frame: the last rectangle painted from
/// the bar's left edge at its full height (its background comes first, then the fill).
fn memory_bar_fill(h: &Harness<'_, TradeTuneApp>) -> Option<egui::Color32> {
    fn rects(shape: &egui::Shape, out: &mut Vec<(egui::Rect, egui::Color32)>) {
        match shape {
            egui::Shape::Rect(r) => out.push((r.rect, r.fill)),
            egui::Shape::Vec(v) => v.iter().for_each(|s| rects(s, out)),
            _ => {}
        }
    }
    let bar = h.get_by_label_contains("memory:").rect();
    let mut all = Vec::new();
    for c in &h.output().shapes {
        rects(&c.shape, &mut all);
    }
    let near = |a: f32, b: f32| (a - b).abs() < 1.0;
    all.into_iter()
        .filter(|(r, _)| {
            near(r.min.x, bar.min.x) && near(r.min.y, bar.min.y) && near(r.height(), bar.height())
        })
        .map(|(_, c)| c)
        .next_back()
}

fn close_to(a: egui::Color32, b: egui::Color32) -> bool {
    a.to_array()
        .iter()
        .zip(b.to_array())
        .all(|(x, y)| x.abs_diff(y) <= 2)
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

#[test]
fn copy_table_as_csv_puts_the_visible_rows_on_the_clipboard() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(reference_db(dir.path())),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.state.studies.db.is_some());
    let group = h
        .state()
        .state
        .studies
        .groups
        .iter()
        .find(|g| g.n(TrialState::Complete) > 0 && g.n(TrialState::Complete) < g.n_trials())
        .map(|g| g.name.clone())
        .expect("a study with complete and other trials");
    h.get_by_label(group.as_str()).click();
    step_until(&mut h, "the trials", |a| !a.state.studies.rows.is_empty());
    h.state_mut()
        .handle(tradetune_app::ui::command::Command::FilterTrials(Some(
            TrialState::Complete,
        )));
    settle(&mut h);

    h.get_by_label("Copy table as CSV").click();
    let mut copied = None;
    for _ in 0..5 {
        h.step();
        copied = copied.or_else(|| {
            h.output()
                .platform_output
                .commands
                .iter()
                .find_map(|c| match c {
                    egui::OutputCommand::CopyText(t) => Some(t.clone()),
                    _ => None,
                })
        });
    }
    let text = copied.expect("nothing was copied");
    let view = &h.state().state.studies;
    let mut lines = text.lines();
    // The fixed columns, then one per parameter (every digit).
    let mut header = "study,number,state,value,duration_s,device".to_owned();
    for a in &view.param_axes {
        header.push(',');
        header.push_str(&a.name);
    }
    assert_eq!(lines.next(), Some(header.as_str()));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), view.visible.len(), "{text}");
    assert!(
        view.visible.len() < view.rows.len(),
        "the filter hid nothing"
    );
    for (line, &i) in rows.iter().zip(&view.visible) {
        let r = &view.rows[i];
        assert!(
            line.starts_with(&format!("{},{},COMPLETE,", r.study, r.number)),
            "{line}"
        );
    }
    h.get_by_label_contains(&format!("copied {} rows as CSV", rows.len()));
}

/// A study database of `n` COMPLETE trials written through the engine's storage, as a long
/// TradeTune study leaves it (parameters, device and applied configuration with each trial);
/// trial `best` has the highest value.
fn many_trials_db(path: &Path, n: usize, best: usize) {
    let mut s = Storage::open(path).unwrap();
    let study = s.create_study("many", &[StudyDirection::Maximize]).unwrap();
    let lr = OptunaDistribution::float(1e-5, 1e-3, true, None).unwrap();
    let base = Draft::default().study_file(&[]).unwrap().base_config;
    let applied = JsonValue::from(&base);
    for k in 0..n {
        let mut t = NewTrial::new(TrialState::Complete);
        let value = if k == best {
            2.0
        } else {
            ((k * 7919) % 1000) as f64 / 1000.0
        };
        t.values = Some(vec![value]);
        t.params = vec![(
            "ppo.learning_rate".into(),
            1e-5 + 1e-7 * (k % 1000) as f64,
            lr.clone(),
        )];
        t.user_attrs = vec![
            ("device".into(), JsonValue::from("cpu")),
            (APPLIED_CONFIG_KEY.into(), applied.clone()),
        ];
        s.add_trial(study, &t).unwrap();
    }
}

#[test]
fn a_study_of_10000_trials_loads_while_frames_go_on_and_fills_the_table() {
    const N: usize = 10_000;
    const BEST: usize = 4321;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("many.db");
    many_trials_db(&db, N, BEST);
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(db.clone()),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.state.studies.db.is_some());
    // The trials are read and made into rows on a background thread while the harness keeps
    // stepping frames, and the panel says it is reading. The job is held back until the test
    // lets it go, so "frames go on while it loads" holds however fast or loaded the machine is.
    h.state_mut().hold_jobs();
    h.get_by_label("many").click();
    h.run_steps(2);
    assert!(
        h.state().state.studies.loading_trials,
        "the click asked for no trials"
    );
    for _ in 0..5 {
        h.step();
        assert!(h.state().state.studies.loading_trials);
        assert!(h.state().state.studies.rows.is_empty());
    }
    h.get_by_label("reading trials…");
    assert_eq!(h.state_mut().release_jobs(), 1, "one job reads the trials");
    // The job sends the rows made (`TaskEvent::Trials` carries `TrialRow`s): no frame makes
    // them.
    step_until(&mut h, "the trials", |a| !a.state.studies.rows.is_empty());
    let view = &h.state().state.studies;
    assert_eq!(view.rows.len(), N);
    assert_eq!(view.visible.len(), N);
    assert!(!view.loading_trials);
    assert!(
        view.rows.iter().all(|r| r.applied_config.is_some()),
        "a row lost its applied configuration"
    );
    h.get_by_label(&format!("{N} of {N} trials"));
    // Only the rows in view are laid out: the first numbers are there, the last are not.
    h.get_by_role_and_label(Role::Link, "0");
    h.get_by_role_and_label(Role::Link, "1");
    assert!(h.query_by_role_and_label(Role::Link, "9999").is_none());

    // The best trial is the one the table highlights, whatever the order.
    let best_number = |h: &Harness<'_, TradeTuneApp>| {
        let v = &h.state().state.studies;
        v.best_row().map(|i| v.rows[i].number)
    };
    assert_eq!(best_number(&h), Some(BEST as i64));
    h.get_by_label("value").click();
    settle(&mut h);
    assert_eq!(best_number(&h), Some(BEST as i64));
}

#[test]
fn start_runs_the_split_and_the_devices_set_in_configure() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        tab: Tab::Configure,
        draft: tiny_draft("ui_split_devices"),
        study_db: Some(dir.path().join("studies.db")),
        ..Settings::default()
    };
    let app = TradeTuneApp::new(settings, Arc::new(no_dialogs()), cpu_only(32 << 30));
    let mut h = harness(app);
    step_until(&mut h, "the bundled data", data_loaded);
    let n = h
        .state()
        .state
        .data
        .ready()
        .unwrap()
        .dataset
        .timestamps
        .len();
    // Half the bars to train on; the CPU twice, a worker on each.
    h.get_by_role_and_label(Role::SpinButton, "train fraction")
        .set_value_accesskit(0.5);
    h.get_by_role_and_label(Role::SpinButton, "workers")
        .set_value_accesskit(2.0);
    settle(&mut h);
    h.get_by_role_and_label(Role::Button, "Add device").click();
    settle(&mut h);
    h.get_by_role_and_label(Role::Button, "Start").click();
    settle(&mut h);
    assert!(
        h.state().state.run.running,
        "Start did not start the study: {:?}",
        h.state().state.notices
    );
    step_until(&mut h, "the study to finish", |a| !a.state.run.running);
    let state = &h.state().state;
    assert_eq!(state.run.error, None, "{:?}", state.notices);
    assert_eq!(
        state.run.end.as_ref().map(|e| e.counts),
        Some([2, 0, 0]),
        "{:?}",
        state.notices
    );
    // The runner bound one worker to each CPU slot...
    let devices: Vec<&str> = state
        .run
        .workers
        .iter()
        .map(|w| w.device.as_str())
        .collect();
    assert_eq!(devices, ["cpu", "cpu#1"]);
    // ...and trained on the split typed in Configure (the run reports its data as loaded).
    let (train, validation) = (n / 2, (n as f64 * 0.15).floor() as usize);
    let expected = format!(
        "(train bars 0..{train}, validation {train}..{})",
        train + validation
    );
    assert!(
        state
            .notices
            .iter()
            .any(|m| m.starts_with("data: ") && m.ends_with(&expected)),
        "no {expected} in {:?}",
        state.notices
    );
}
