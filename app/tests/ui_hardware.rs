//! The Hardware & presets panel driven through egui_kittest: the devices and GPUs listed, refreshed and
//! checked, the presets applied (on a first launch, the one for this machine) and the memory bar.

use std::sync::Arc;

use crate::common::panels::*;
use crate::common::ui::step_until;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use tradetune_app::ui::presets::UserPreset;
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_app::ui::{TradeTuneApp, draft::Draft};
use tradetune_engine::device::DeviceInfo;
use tradetune_engine::device::precision::Precision;
use tradetune_engine::telemetry::{GpuInfo, GpuVendor};

#[test]
fn first_launch_loads_the_bundled_data_and_lists_the_cpu() {
    let mut h = harness(app_with(Settings::default(), no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    assert!(
        h.state().cx.data.ready().is_some(),
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
    app.cx.gpus = vec![GpuInfo {
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
    app.cx.no_gpu_reason = Some("no GPU present (NVML: libnvidia-ml.so not found)".into());
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
    assert!(h.state().cx.refreshing_devices);
    h.get_by_label("asking the drivers…");
    assert!(
        h.get_by_label("Refresh devices")
            .accesskit_node()
            .is_disabled()
    );
    assert_eq!(h.state_mut().release_jobs(), 1, "one job lists the devices");
    step_until(&mut h, "the devices", |a| !a.cx.refreshing_devices);
    assert_eq!(probed.load(Ordering::SeqCst), 1);

    let names: Vec<&str> = h
        .state()
        .cx
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
            .cx
            .notices
            .iter()
            .any(|n| n == "devices refreshed: 3 listed, 2 usable here"),
        "{:?}",
        h.state().cx.notices
    );
    // The new adapter can be trained on: "Train on" offers it.
    h.get_by_label("Train on").click();
    settle(&mut h);
    h.get_by_role_and_label(Role::Button, "wgpu:cpu").click();
    settle(&mut h);
    assert_eq!(h.state().cx.settings.draft.study.devices[0], "wgpu:cpu");

    // A second refresh asks again (the click is handled in the next frame: wait for the
    // probe's second answer, not only for the flag).
    h.get_by_label("Refresh devices").click();
    step_until(&mut h, "the second refresh", |a| {
        probed.load(Ordering::SeqCst) == 2 && !a.cx.refreshing_devices
    });
    assert_eq!(probed.load(Ordering::SeqCst), 2);
}

/// A probe that panics (a driver's fault while it is asked) ends the refresh with a notice
/// saying so; the devices listed before stay, and the button works again: the job's failure
/// reaches the panel that waits on it.
#[test]
fn a_device_probe_that_panics_ends_the_refresh_with_a_notice() {
    let app = TradeTuneApp::new(
        Settings::default(),
        Arc::new(no_dialogs()),
        cpu_only(8 << 30),
    )
    .with_device_probe(Arc::new(|| panic!("the driver fell over")));
    let mut h = harness(app);
    settle(&mut h);
    let names = |h: &Harness<'_, TradeTuneApp>| -> Vec<String> {
        h.state()
            .cx
            .devices
            .iter()
            .map(|d| d.name.clone())
            .collect()
    };
    let before = names(&h);
    h.get_by_label("Refresh devices").click();
    step_until(&mut h, "the refresh to end", |a| {
        a.cx.notices
            .iter()
            .any(|n| n.contains("could not list the devices"))
    });
    assert!(!h.state().cx.refreshing_devices);
    let notice = h
        .state()
        .cx
        .notices
        .iter()
        .find(|n| n.contains("could not list the devices"))
        .cloned()
        .unwrap();
    assert!(
        notice.contains("the devices job stopped unexpectedly")
            && notice.contains("the driver fell over")
            && notice.contains("the list is the one from before"),
        "{notice}"
    );
    assert_eq!(names(&h), before);
    assert!(
        !h.get_by_label("Refresh devices")
            .accesskit_node()
            .is_disabled()
    );
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
    h.state_mut().cx.settings.draft.study.devices = vec!["wgpu:9".into()];
    settle(&mut h);
    assert!(start_disabled(&h));
    let problems = h.state().cx.device_problems();
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
    assert_eq!(h.state().cx.settings.draft, wide);
    assert_eq!(h.state().cx.settings.preset.as_deref(), Some("wide nets"));
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

/// "Apply <preset>" over a draft kept in no preset (edited since) asks first: "Cancel" keeps
/// the draft as it was, "Replace" applies the preset. A draft that is some preset's (the one
/// just applied) is replaced at once: nothing is lost.
#[test]
fn applying_a_preset_over_unsaved_edits_asks_first() {
    use tradetune_app::ui::panels::hardware::{CANCEL, REPLACE};
    let mut wide = Draft::default();
    wide.ppo.policy.net_arch.pi = vec![1024, 1024];
    wide.env.n_envs = 16;
    let mut mine = Draft::default();
    mine.study.name = "my study".into();
    mine.ppo.n_epochs = 7;
    let settings = Settings {
        draft: mine.clone(),
        user_presets: vec![UserPreset {
            name: "wide nets".into(),
            draft: wide.clone(),
        }],
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    let question = "Replace the draft with preset wide nets?";
    assert!(h.query_by_label_contains(question).is_none());

    h.get_by_label("Apply wide nets").click();
    settle(&mut h);
    assert_eq!(h.state().cx.settings.draft, mine, "replaced without asking");
    h.get_by_label_contains(question);
    h.get_by_label_contains("(study \"my study\", 0 searched parameters)");
    h.get_by_label(CANCEL).click();
    settle(&mut h);
    assert_eq!(h.state().cx.settings.draft, mine);
    assert_eq!(h.state().cx.settings.preset, None);
    assert!(h.query_by_label_contains(question).is_none());

    h.get_by_label("Apply wide nets").click();
    settle(&mut h);
    h.get_by_label(REPLACE).click();
    settle(&mut h);
    assert_eq!(h.state().cx.settings.draft, wide);
    assert_eq!(h.state().cx.settings.preset.as_deref(), Some("wide nets"));
    assert!(h.query_by_label_contains(question).is_none());

    // The draft is the preset's as applied: another preset replaces it without a question.
    let cpu = h.state().cx.presets[0].clone();
    h.get_by_label(&format!("Apply {}", cpu.name)).click();
    settle(&mut h);
    assert_eq!(h.state().cx.settings.draft, cpu.draft);
    assert!(
        h.query_by_label_contains("Replace the draft with")
            .is_none()
    );
}

/// "delete <preset>" asks first: "Cancel" keeps the preset (and writes nothing), "Delete"
/// forgets it and says so.
#[test]
fn deleting_a_saved_preset_asks_first() {
    use tradetune_app::ui::panels::hardware::{CANCEL, DELETE};
    let mut mine = Draft::default();
    mine.ppo.n_epochs = 7;
    let settings = Settings {
        user_presets: vec![UserPreset {
            name: "mine".into(),
            draft: mine,
        }],
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    let question = "Delete the saved preset mine? It cannot be brought back.";

    h.get_by_label("delete mine").click();
    settle(&mut h);
    assert_eq!(
        h.state().cx.settings.user_presets.len(),
        1,
        "deleted at once"
    );
    h.get_by_label(question);
    h.get_by_label(CANCEL).click();
    settle(&mut h);
    assert_eq!(h.state().cx.settings.user_presets.len(), 1);
    assert!(!h.state().cx.save_now);
    assert!(h.query_by_label(question).is_none());

    h.get_by_label("delete mine").click();
    settle(&mut h);
    h.get_by_label(DELETE).click();
    settle(&mut h);
    assert!(h.state().cx.settings.user_presets.is_empty());
    assert!(h.query_by_label("delete mine").is_none());
    assert_eq!(
        h.state().cx.notices.last().map(String::as_str),
        Some("preset mine deleted")
    );
}

#[test]
fn a_first_launch_applies_the_preset_for_this_hardware() {
    let mut app = app_with(Settings::default(), no_dialogs());
    app.apply_hardware_preset(&[]);
    assert_eq!(
        app.cx.settings.preset.as_deref(),
        Some("cpu"),
        "{:?}",
        app.cx.notices
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
    assert_eq!(again.cx.settings.preset.as_deref(), Some("rtx4080"));
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
    let devices = |h: &Harness<'_, TradeTuneApp>| h.state().cx.settings.draft.study.devices.clone();
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
        .cx
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
    h.state_mut().cx.settings.draft.study.devices = vec!["wgpu:0".into()];
    settle(&mut h);
    assert!(start_disabled(&h));
    h.get_by_label_contains(
        "cannot start: study.devices: device wgpu:0 cannot be used here: this build has no wgpu",
    );

    // Remembered with the draft.
    h.state_mut().cx.settings.draft.study.devices = vec!["cpu".into(), "cpu".into()];
    let restored = saved_settings(&mut h);
    assert_eq!(restored.draft.study.devices, ["cpu", "cpu"]);
    assert_eq!(restored.draft.study.workers, 3);
}

/// A machine with two different cards: wgpu's default adapter (`wgpu`, listed first) is the
/// 4 GiB integrated one, `wgpu:1` a 24 GiB card. Training on `wgpu:1` takes the budget from
/// that card, not from the default adapter whose name `wgpu:1` starts with; a name written
/// another way (`wgpu:discrete:1`) finds the same card.
#[test]
fn the_memory_budget_is_the_chosen_cards_not_the_default_adapters() {
    let gpu = |name: &str, gib: u64| DeviceInfo {
        name: name.into(),
        backend: "wgpu".into(),
        available: true,
        detail: format!("a card of {gib} GiB"),
        memory_bytes: Some(gib << 30),
        precisions: vec![Precision::F32],
        reports_pool_usage: true,
        adapter: None,
    };
    let mut devices = cpu_only(64 << 30);
    devices.retain(|d| d.name == "cpu");
    devices.extend([
        gpu("wgpu", 4),
        gpu("wgpu:0", 12),
        gpu("wgpu:1", 24),
        gpu("wgpu:integrated:0", 4),
    ]);
    let mut draft = Draft::default();
    draft.study.device_memory_gib = None;
    draft.study.devices = vec!["wgpu:1".into()];
    let settings = Settings {
        draft,
        preset: Some("mine".into()),
        ..Settings::default()
    };
    let app = TradeTuneApp::new(settings, Arc::new(no_dialogs()), devices);
    let mut h = harness(app);
    step_until(&mut h, "the bundled data", data_loaded);
    assert_eq!(h.state().cx.device_bytes(), Some(24 << 30));
    let on_24 = memory_text(&h);
    for (name, gib) in [
        ("wgpu:discrete:1", 24),
        ("wgpu:0", 12),
        ("wgpu:integrated:0", 4),
        ("wgpu", 4),
    ] {
        h.state_mut().cx.settings.draft.study.devices = vec![name.into()];
        settle(&mut h);
        assert_eq!(h.state().cx.device_bytes(), Some(gib << 30), "{name}");
    }
    assert_ne!(
        memory_text(&h),
        on_24,
        "the memory bar did not follow the card"
    );
}
