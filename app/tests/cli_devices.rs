//! `tradetune devices` lists every wgpu adapter under its own name with its type, memory and
//! driver, and a device name that names no adapter is a clear error at every entry point
//! (`train --device`, a study's devices), never a panic inside the GPU runtime.
//!
//! Mesa's lavapipe (a software Vulkan adapter) stands in for a GPU; without any adapter the
//! listing test prints a loud SKIP, unless `TRADETUNE_REQUIRE_GPU=1` (CI).

use crate::common;

use common::{scratch, text, tradetune, wgpu_here};
use tradetune_engine::device::{DeviceSpec, adapters};

#[test]
fn devices_lists_every_adapter_with_its_type_memory_and_driver() {
    if !wgpu_here("devices_lists_every_adapter_with_its_type_memory_and_driver") {
        return;
    }
    let o = tradetune(&["devices", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let listed = listed.as_array().unwrap();
    let names: Vec<&str> = listed.iter().filter_map(|d| d["name"].as_str()).collect();
    // Every adapter wgpu finds here, by the name `--device` takes.
    let here = adapters::adapters();
    assert!(!here.is_empty());
    for a in here.iter() {
        let name = DeviceSpec::of_adapter(a).to_string();
        assert!(names.contains(&name.as_str()), "{name} not in {names:?}");
    }
    // lavapipe: the CPU adapter, `wgpu:cpu`, usable, with its memory and driver.
    if let Some(lavapipe) = here
        .iter()
        .find(|a| a.kind == adapters::AdapterKind::Cpu && a.index == 0)
    {
        let d = listed.iter().find(|d| d["name"] == "wgpu:cpu").unwrap();
        assert_eq!(d["available"], true, "{d}");
        assert_eq!(d["adapter"]["kind"], "cpu", "{d}");
        assert_eq!(d["adapter"]["name"], lavapipe.name.as_str());
        assert!(d["memory_bytes"].as_u64().is_some_and(|b| b > 0), "{d}");
        assert!(!d["adapter"]["driver"].as_str().unwrap().is_empty(), "{d}");

        let table = tradetune(&["devices"]);
        assert!(table.status.success());
        let out = text(&table.stdout);
        let line = out
            .lines()
            .find(|l| l.starts_with("wgpu:cpu "))
            .unwrap_or_else(|| panic!("no wgpu:cpu line in\n{out}"));
        assert!(
            line.contains("software renderer") && line.contains(&lavapipe.name),
            "{line}"
        );
    } else {
        assert!(
            std::env::var("TRADETUNE_REQUIRE_GPU").is_err(),
            "CI installs lavapipe, but wgpu lists no CPU adapter: {here:?}"
        );
    }
}

/// The error names the device, says it is not there and lists what is.
/// `--version` says which language this build compiles GPU kernels to (`benches/gpu/run.sh`
/// tells a `vulkan` build by it): WGSL in the default build, whose `devices` list no adapter
/// with SPIR-V kernels.
#[test]
fn the_version_names_the_language_of_the_gpu_kernels() {
    let o = tradetune(&["--version"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let version = text(&o.stdout);
    assert_eq!(
        version.trim(),
        format!("tradetune {}", tradetune_app::cli::VERSION)
    );
    if adapters::SPIRV_BUILD {
        assert!(version.contains("SPIR-V kernels"), "{version}");
    } else {
        assert!(version.contains("(GPU: wgpu, WGSL kernels)"), "{version}");
        let o = tradetune(&["devices"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!text(&o.stdout).contains("SPIR-V"), "{}", text(&o.stdout));
    }
}

fn assert_clear_error(o: &std::process::Output, what: &str) {
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{what} succeeded");
    assert!(
        err.contains("device 'wgpu:9' is not available"),
        "{what}: {err}"
    );
    assert!(!err.contains("panicked"), "{what} panicked: {err}");
    if !adapters::adapters().is_empty() {
        assert!(err.contains("tradetune devices"), "{what}: {err}");
    }
}

#[test]
fn train_on_a_missing_adapter_is_a_clear_error() {
    let dir = scratch("cli_devices", "train");
    let o = tradetune(&[
        "train",
        "--device",
        "wgpu:9",
        "--total-timesteps",
        "64",
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert_clear_error(&o, "train --device wgpu:9");
}

#[test]
fn a_study_on_a_missing_adapter_is_refused_before_it_starts() {
    let dir = scratch("cli_devices", "study");
    let db = dir.join("studies.db");
    let o = tradetune(&[
        "study",
        "run",
        "--preset",
        "cpu",
        "--trials",
        "1",
        "--devices",
        "wgpu:9",
        "--db",
        db.to_str().unwrap(),
        "--telemetry-interval",
        "0",
    ]);
    assert_clear_error(&o, "study run --devices wgpu:9");
}

/// In a shell without a desktop session (no `XDG_RUNTIME_DIR`), probing the devices says
/// nothing about the missing Wayland display: Mesa's device-selection layer asks libwayland
/// for a compositor, and libwayland's complaint is not the command's business.
#[test]
fn a_shell_without_a_desktop_session_gets_no_window_system_errors() {
    if !wgpu_here("a_shell_without_a_desktop_session_gets_no_window_system_errors") {
        return;
    }
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args(["devices"])
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("WAYLAND_DISPLAY")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
    assert!(!text(&o.stdout).is_empty());
}
