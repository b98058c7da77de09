//! Every bundled preset, shrunk with `--set` on its fixed values (tiny networks, one short
//! rollout), runs one trial to COMPLETE on its device class: the CPU preset on the CPU, the GPU
//! presets on wgpu (Mesa's software Vulkan in CI; any GPU elsewhere), with the environment on
//! the device and the precision the preset asks for. The first trial of each preset is its
//! enqueued one, so the searched values it runs with are known.
//!
//! Without a wgpu adapter the GPU presets print a loud SKIP, unless `TRADETUNE_REQUIRE_GPU=1`
//! (set by `.ci/run`, which installs `mesa-vulkan-drivers`).

use crate::common;

use common::{scratch, text, tradetune, tradetune_with, wgpu_here};
use tradetune_engine::storage::{JsonValue, Storage, TrialState};

fn attr(attrs: &[(String, JsonValue)], key: &str) -> String {
    attrs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.dumps())
        .unwrap_or_else(|| panic!("no attribute {key}: {attrs:?}"))
}

/// Runs `preset` for one trial on `device` with a rollout of `n_envs × n_steps` samples (at
/// least the preset's enqueued batch size) and checks the stored trial.
fn run_preset(preset: &str, device: &str, n_envs: usize, n_steps: usize, precision: &str) {
    run_preset_with(preset, device, n_envs, n_steps, precision, &[], preset);
}

/// [`run_preset`] with environment variables `vars` set for the process, the study named
/// `name`; returns the trial's user attributes.
fn run_preset_with(
    preset: &str,
    device: &str,
    n_envs: usize,
    n_steps: usize,
    precision: &str,
    vars: &[(&str, &str)],
    name: &str,
) -> Vec<(String, JsonValue)> {
    // The CPU preset searches its network sizes (`--set` refuses searched values); the GPU
    // presets fix theirs, shrunk here.
    let nets_fixed = preset != "cpu";
    let dir = scratch("cli_presets_device", name);
    let db = dir.join("studies.db");
    let rollout = n_envs * n_steps;
    let mut sets = vec![
        format!("env.n_envs={n_envs}"),
        format!("ppo.n_steps={n_steps}"),
        format!("train.total_timesteps={rollout}"),
        "train.eval_every=1".to_owned(),
    ];
    if nets_fixed {
        sets.push("ppo.policy.net_arch.pi=[16, 16]".to_owned());
        sets.push("ppo.policy.net_arch.vf=[16, 16]".to_owned());
    }
    let mut args = vec![
        "study",
        "run",
        "--preset",
        preset,
        "--trials",
        "1",
        "--workers",
        "1",
        "--devices",
        device,
        "--db",
        db.to_str().unwrap(),
        "--name",
        name,
        "--telemetry-interval",
        "0",
    ];
    for s in &sets {
        args.extend(["--set", s.as_str()]);
    }
    let o = tradetune_with(&args, vars);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(
        o.status.success(),
        "{preset}: stdout:\n{out}\nstderr:\n{err}"
    );
    let st = Storage::open_read_only(&db).unwrap();
    let trials = st.trials(st.study_id(name).unwrap()).unwrap();
    assert_eq!(trials.len(), 1, "{preset}: {out}");
    let t = &trials[0];
    assert_eq!(
        t.state,
        TrialState::Complete,
        "{preset}: {:?}\n{out}\n{err}",
        t.system_attr("fail_reason")
    );
    assert_eq!(attr(&t.user_attrs, "device"), format!("\"{device}\""));
    // The trial's line says what compiling cost where it recorded a compile phase (a GPU's).
    let compile_s = t
        .user_attr("phase_compile_s")
        .and_then(|v| serde_json::Value::from(v).as_f64());
    // Where every update compiled (`compile_not_apart`, these one-update trials), the phase
    // holds none of their compiling and the line claims none.
    let not_apart = t.user_attr("compile_not_apart").is_some();
    let compiled = compile_s.is_some_and(|c| c > 0.0) && !not_apart;
    let line = out
        .lines()
        .find(|l| l.contains(" COMPLETE "))
        .unwrap_or_default();
    assert_eq!(
        line.ends_with(" s compiling)") || line.ends_with(" ms compiling)"),
        compiled,
        "{preset}: {line}"
    );
    // What it compiled, `study run` said (its output is no terminal here: a line every 10 s
    // of a long compiling, and the totals of one that took a second or more); the CPU says
    // nothing of the kind.
    let said = |start: &str| {
        out.lines()
            .any(|l| l.starts_with(start) && l.contains(" GPU kernel"))
    };
    let phase = compile_s.is_some_and(|c| c > 0.0);
    if device == "cpu" {
        assert!(!phase && !not_apart, "{preset}: the CPU compiles nothing");
        assert!(!said("compiling ") && !said("compiled "), "{preset}: {out}");
    } else {
        if phase {
            assert!(said("compiled "), "{preset}: {out}");
        }
        // One update (a rollout's samples), in a new process: it compiled, with no steady
        // update to measure that against.
        assert!(not_apart, "{preset}: {:?}", t.user_attrs);
    }
    assert_eq!(attr(&t.user_attrs, "precision"), format!("\"{precision}\""));
    // `auto`: the host on the CPU; on a GPU where a rollout step measured cheaper, the
    // measurement recorded beside it.
    let placement = attr(&t.user_attrs, "env_placement");
    if device == "cpu" {
        assert_eq!(placement, "\"host\"", "{preset}");
        assert!(!t.user_attrs.iter().any(|(k, _)| k == "env_placement_auto"));
    } else {
        let measured = attr(&t.user_attrs, "env_placement_auto");
        let chosen = placement.trim_matches('"');
        assert!(
            measured.contains(&format!("auto: {chosen}, ")) && measured.contains(" ms a step"),
            "{preset}: {placement} {measured}"
        );
        // Where it measured (not a decision kept from an earlier run), the trial waited for
        // it before training: its compile phase holds it (the words round to 0.1 s, or 1 s
        // from 10 s on).
        if let Some(rest) = measured.split(" (measured in ").nth(1) {
            let secs: f64 = rest
                .split(" s")
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert!(
                compile_s.is_some_and(|c| c >= secs - 0.5),
                "{preset}: {measured}, compile phase {compile_s:?}"
            );
        }
    }
    t.user_attrs.clone()
}

#[test]
fn the_cpu_preset_completes_on_the_cpu() {
    run_preset("cpu", "cpu", 4, 64, "f32");
}

#[test]
fn the_rtx4080_presets_complete_on_wgpu_in_f16() {
    if !wgpu_here("the_rtx4080_presets_complete_on_wgpu_in_f16") {
        return;
    }
    // Enqueued batch 1024: one rollout of 8 × 128.
    run_preset("rtx4080", "wgpu", 8, 128, "f16");
    run_preset("rtx4080_laptop", "wgpu", 8, 128, "f16");
}

/// The replays a user opts into for trials (`TRADETUNE_REPLAY_POLICY=1`,
/// `TRADETUNE_REPLAY_UPDATE=1`, issue 33) reach a study's trial: the rtx4080 preset's trial in
/// f16 (its policy step replayed from a graph captured each rollout, its minibatches from one
/// captured once) completes, records that both replayed, and records no fallback. Without them
/// a trial records neither.
#[test]
fn a_trial_replays_its_policy_step_and_minibatches_when_asked() {
    if !wgpu_here("a_trial_replays_its_policy_step_and_minibatches_when_asked") {
        return;
    }
    let has = |attrs: &[(String, JsonValue)], key: &str| attrs.iter().any(|(k, _)| k == key);
    let vars = [
        ("TRADETUNE_REPLAY_POLICY", "1"),
        ("TRADETUNE_REPLAY_UPDATE", "1"),
    ];
    // One rollout of 8 × 128 in a minibatch of 1024 an epoch (4 to 16 epochs): the first
    // minibatch captured, the others replayed.
    let attrs = run_preset_with("rtx4080", "wgpu", 8, 128, "f16", &vars, "replayed");
    for key in ["policy_steps_replayed", "minibatches_replayed"] {
        assert_eq!(attr(&attrs, key), "true", "{attrs:?}");
    }
    for key in ["policy_replay_fallback", "update_replay_fallback"] {
        assert!(!has(&attrs, key), "{key}: {attrs:?}");
    }
    let off = [
        ("TRADETUNE_REPLAY_POLICY", "0"),
        ("TRADETUNE_REPLAY_UPDATE", "0"),
    ];
    let attrs = run_preset_with("rtx4080", "wgpu", 8, 128, "f16", &off, "direct");
    for key in ["policy_steps_replayed", "minibatches_replayed"] {
        assert!(!has(&attrs, key), "{key}: {attrs:?}");
    }
}

#[test]
fn the_rx7900gre_preset_completes_on_wgpu() {
    if !wgpu_here("the_rx7900gre_preset_completes_on_wgpu") {
        return;
    }
    // Enqueued batch 16384 in f32: one rollout of 32 × 512.
    run_preset("rx7900gre", "wgpu", 32, 512, "f32");
}

/// The memory guard: a wgpu trial whose device pool grows past its budget while it trains
/// becomes FAIL with "memory budget exceeded: X of Y on wgpu", and the CPU trial running beside
/// it goes on to COMPLETE. The budget is tiny (`device_memory_gib` = 0.0001, about 105 KiB):
/// the tiny network's estimate fits it, so the trial starts, and the pool wgpu reserves for the
/// first update does not.
#[test]
fn the_memory_guard_fails_an_over_budget_wgpu_trial_and_the_cpu_trial_goes_on() {
    if !wgpu_here("the_memory_guard_fails_an_over_budget_wgpu_trial") {
        return;
    }
    let dir = scratch("cli_presets_device", "guard");
    let db = dir.join("studies.db");
    let file = dir.join("guard.toml");
    // 40 updates: the CPU trial is still training long after the wgpu one has failed at its
    // first update, whichever worker claims a trial first.
    std::fs::write(
        &file,
        r#"[study]
name = "guard"
n_trials = 2
workers = 2
devices = ["wgpu", "cpu"]
device_memory_gib = 0.0001
memory_fraction = 1.0

[fixed]
env.n_envs = 2
env.placement = "host"
ppo.n_steps = 16
ppo.batch_size = 32
ppo.n_epochs = 1
ppo.policy.net_arch.pi = [8]
ppo.policy.net_arch.vf = [8]
train.total_timesteps = 1280
train.eval_every = 0

[search]
"ppo.learning_rate" = { low = 1e-4, high = 1e-3, log = true }

[sampler]
kind = "random"
seed = 3

[pruner]
kind = "none"
"#,
    )
    .unwrap();
    let o = tradetune(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--telemetry-interval",
        "0",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    let st = Storage::open_read_only(&db).unwrap();
    let trials = st.trials(st.study_id("guard").unwrap()).unwrap();
    assert_eq!(trials.len(), 2, "{out}");
    let on = |device: &str| {
        trials
            .iter()
            .find(|t| attr(&t.user_attrs, "device") == format!("\"{device}\""))
            .unwrap_or_else(|| panic!("no trial on {device}: {out}"))
    };
    let gpu = on("wgpu");
    assert_eq!(gpu.state, TrialState::Fail, "{out}");
    match gpu.system_attr("fail_reason") {
        Some(JsonValue::Str(r)) => {
            assert!(r.contains("memory budget exceeded"), "{r}");
            assert!(r.contains(" on wgpu"), "{r}");
        }
        other => panic!("fail_reason: {other:?}"),
    }
    assert_eq!(on("cpu").state, TrialState::Complete, "{out}");
}

/// A precision the device lacks is refused before anything starts, naming the device and what
/// it supports: bf16 on wgpu (WGSL has no bf16), by `study run` and by `train`.
#[test]
fn a_precision_the_device_lacks_is_refused_up_front() {
    if !wgpu_here("a_precision_the_device_lacks_is_refused_up_front") {
        return;
    }
    let dir = scratch("cli_presets_device", "bf16");
    let db = dir.join("never.db");
    let o = tradetune(&[
        "study",
        "run",
        "--preset",
        "cpu",
        "--devices",
        "wgpu",
        "--set",
        "ppo.precision=\"bf16\"",
        "--db",
        db.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("device 'wgpu'"), "{err}");
    assert!(err.contains("does not compute in bf16"), "{err}");
    assert!(err.contains("it supports f32"), "{err}");
    // Nothing was created: the study was refused before the database was touched.
    let st = Storage::open_read_only(&db);
    assert!(
        !st.is_ok_and(|s| s.study_id("cpu").is_ok()),
        "the study exists"
    );

    let out = dir.join("run");
    let o = tradetune(&[
        "train",
        "--device",
        "wgpu",
        "--precision",
        "bf16",
        "--total-timesteps",
        "64",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("does not compute in bf16"), "{err}");
    assert!(!out.exists(), "train wrote a checkpoint");
}
