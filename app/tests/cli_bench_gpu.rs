//! `tradetune bench gpu` (no timing assertion): the tiny configuration with the environment
//! on the host and on the device, in f32 and f16, on wgpu (Mesa's software Vulkan in CI): the
//! cold and steady figures, what was compiled and autotuned, the launches per part of an
//! update (held at or under their caps, issue 33) and the matmul probe; then a second process
//! on the same autotune cache, which autotunes (almost) nothing (issue 32). Without a wgpu
//! adapter it runs on the CPU device instead, unless `TRADETUNE_REQUIRE_GPU=1` makes that a
//! failure.

use std::path::Path;
use std::process::{Command, Output};

use crate::common;

use common::{scratch, text, tradetune, wgpu_here};

/// Kernel launches of the tiny configuration (nets [16]: one hidden layer and the output, so
/// layers = 2) that CI holds the code to, so they cannot creep back, as measured on lavapipe on
/// 2026-11-27:
/// - env step on the device: 1, the step as one CubeCL kernel that also writes its episode-log
///   row into the rollout's log in place (74 as tensor operations, 2 with the row copied in);
/// - buffer step: 1 (below);
/// - policy step: 7.2 in f32 and 7.4 in f16, both placements: a rollout casts the weights once,
///   the buffer's kernel casts the next step's observations in its own launch (9.3–10.3 in f16
///   before), the rollout's log-probabilities go to the buffer at once (8.2–9.2 in f32 and 17.2
///   in f16 before that; 18 and 28 before the env kernel);
/// - minibatch: 21.5–24.5 in f32 and 23.5–24 in f16, by the matmul a fresh cache picks: the
///   loss and its gradient, and the tally, as CubeCL kernels, the weights read as views of
///   Adam's flat buffer and of its f16 copy, f16's weight and hidden bias gradients written
///   straight in f32 by burn's matmul and reduction (28 in f16 before that; 59 and 77 with the
///   hand-written backward pass in tensor operations, 118 and 135 with burn's autodiff, 175
///   and 155 before that).
///
/// The targets are 4 per env step, 2·layers + 4 = 8 per policy step and
/// 6·layers + 12 = 24 per minibatch: every step's own launches are held at its target. The layout
/// copies the matmul routines a fresh autotune cache picks may launch first are counted apart
/// (`layout_copies_per_*`) and held to their own caps.
const MAX_DISPATCHES_PER_ENV_STEP: f64 = 1.0;
const MAX_DISPATCHES_PER_POLICY_STEP: f64 = 8.0;
const MAX_DISPATCHES_PER_MINIBATCH: f64 = 24.0;
/// Layout copies (cubecl's `CopyKernel`): an operand a matmul routine wants in another layout
/// is copied first (cubek-matmul 0.3.1: `gemm` and `naive` want the left side row-major and the
/// right side K-contiguous, so a row-major `[in, out]` weight and a transposed activation are
/// copied; the tiled routines take either). Whether any run depends on the routines a fresh
/// autotune cache picks, so the caps are what the products allow, not what a pick gave: the
/// tiny configuration has one hidden layer, so 4 forward products (2·(layers + 1)), each with
/// one operand a routine may copy, and 4 weight gradients `xᵀ·∂y` with two; its input gradients
/// `∂y·Wᵀ` come in the layouts those routines want. Seen on lavapipe with fresh caches
/// (2026-11-28): 1 a policy step (the action head's weight, `gemm`) and 0, 2 or 3 a minibatch.
/// Since 2026-11-29 (session 28) a rollout's snapshot of the weights is K-major
/// (`ActorCritic::k_major`): a copy a weight once a rollout (3 at tiny, 0.09 a step over 32
/// steps), and no copy a step where `gemm` was picked (tiny with session 27's cache: 8.16
/// launches a policy step, 1.0 of them copies, in f32 and 9.38, 2.0, in f16; 7.25 and 7.47 with
/// 0.09 after). A routine may still copy a K-major operand it wants row-major, so the caps stay
/// what the products allow.
const LAYOUT_COPIES_PER_POLICY_STEP: f64 = 4.0;
const LAYOUT_COPIES_PER_MINIBATCH: f64 = 4.0 + 2.0 * 4.0;
/// And once a rollout: its first step casts the observations it starts from itself (the later
/// steps' come cast by the buffer's kernel), and the first layer's product may copy them (f16,
/// host env: 33 copies in 32 steps, `TRADETUNE_TRACE_LAUNCHES=1`, 2026-11-28).
const LAYOUT_COPIES_PER_ROLLOUT: f64 = 1.0;
/// Writing a step's rows of the rollout buffer: one kernel for all of them (5 `slice_assign`s
/// before).
const MAX_DISPATCHES_PER_BUFFER_STEP: f64 = 1.0;

/// The matmul probe's square sizes in these tests: 1024² (the default's largest) is most of a
/// cold run's time on a software adapter, autotuned and timed for nothing these tests check.
const PROBE_SIZES: &str = "64,128,256";

/// What a configuration's launches are held to: its own launches per policy step and per
/// minibatch, and the layout copies apart (per policy step, plus [`LAYOUT_COPIES_PER_ROLLOUT`]
/// once a rollout).
struct LaunchCaps {
    policy: f64,
    policy_copies: f64,
    minibatch: f64,
    minibatch_copies: f64,
}

/// Holds run `r`'s advantage stage, an update's launches from the bootstrap value to the
/// update's batch, for nets of `layers` (hidden layers + the output layer): the bootstrap
/// value's forward pass (a product a layer, a fused activation between two) and the GAE kernel,
/// which also counts what is not finite and gives the spread the explained variance is pooled
/// from on the host: 2·layers. f16 takes the bootstrap value from the rollout's own f16
/// weights (it cast its learner's weights and biases again before: 2·layers + 1 more) and at
/// most casts the last observations (1 more); where the rollout replayed its policy step it has
/// no such weights and still casts them (2·layers + 1 more). The routines a fresh autotune cache picks may
/// copy an operand of each product (the learner's weights are row-major, not a rollout's
/// K-major snapshot) and the observations ([`LAYOUT_COPIES_PER_ROLLOUT`]): `layers` + 1 more.
/// On lavapipe (2026-11-30): tiny 4 in f32 and in f16 (9 in f16 with the casts), where the two
/// variances and the count on the device made them 12 and 17; nets [16, 16, 16] 6 and 14
/// before the casts went.
fn hold_advantage_stage(r: &serde_json::Value, layers: f64) -> f64 {
    let res = &r["result"];
    let launches = res["dispatch_profile"]["advantages"]
        .as_f64()
        .unwrap_or_else(|| panic!("{r}"));
    let replayed = res["config"]["replay_policy"] == true;
    let own = match res["config"]["precision"].as_str() {
        Some("f16") if replayed => 4.0 * layers + 1.0,
        Some("f16") => 2.0 * layers + 1.0,
        _ => 2.0 * layers,
    };
    let copies = layers + 1.0;
    assert!(
        launches > 0.0 && launches <= own + copies,
        "{launches} > {own} + {copies}: {r}"
    );
    launches
}

/// The tiny configuration's caps (nets [16]).
const TINY_CAPS: LaunchCaps = LaunchCaps {
    policy: MAX_DISPATCHES_PER_POLICY_STEP,
    policy_copies: LAYOUT_COPIES_PER_POLICY_STEP,
    minibatch: MAX_DISPATCHES_PER_MINIBATCH,
    minibatch_copies: LAYOUT_COPIES_PER_MINIBATCH,
};

/// Holds run `r`'s launches per policy step and per minibatch to `caps` (own launches and
/// layout copies apart); returns them, copies included, and the copies:
/// `(policy, policy_copies, minibatch, minibatch_copies)`.
fn hold_launches(r: &serde_json::Value, caps: &LaunchCaps) -> (f64, f64, f64, f64) {
    let res = &r["result"];
    let d = |k: &str| res[k].as_f64().unwrap_or_else(|| panic!("{k}: {r}"));
    let (policy, policy_copies) = (
        d("dispatches_per_policy_step"),
        d("layout_copies_per_policy_step"),
    );
    let (minibatch, minibatch_copies) = (
        d("dispatches_per_minibatch"),
        d("layout_copies_per_minibatch"),
    );
    assert!((0.0..=policy).contains(&policy_copies), "{r}");
    assert!((0.0..=minibatch).contains(&minibatch_copies), "{r}");
    assert!(policy - policy_copies <= caps.policy, "{r}");
    let steps = res["config"]["n_steps"].as_f64().unwrap();
    assert!(
        policy_copies <= caps.policy_copies + LAYOUT_COPIES_PER_ROLLOUT / steps,
        "{r}"
    );
    assert!(minibatch - minibatch_copies <= caps.minibatch, "{r}");
    assert!(minibatch_copies <= caps.minibatch_copies, "{r}");
    (policy, policy_copies, minibatch, minibatch_copies)
}

/// The binary with the autotune cache in `cache`.
fn bench(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args(args)
        .env("TRADETUNE_GPU_CACHE", cache)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the tradetune binary runs")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn bench_gpu_runs_each_placement_and_precision() {
    // Without an adapter: on the CPU device instead.
    let wgpu = wgpu_here("bench_gpu on wgpu");
    let device = if wgpu { "wgpu" } else { "cpu" };
    let cache = scratch("cli_bench_gpu", "cache");
    let v = json(&bench(
        &cache,
        &[
            "bench",
            "gpu",
            "--device",
            device,
            "--configs",
            "tiny",
            "--probe-sizes",
            PROBE_SIZES,
            "--json",
        ],
    ));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{v}");
    // Each precision's update held against the CPU's, and agreeing.
    let agreements = v["agreement"].as_array().unwrap();
    let precisions: Vec<&str> = agreements
        .iter()
        .map(|a| a["agreement"]["precision"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(precisions, ["f32", "f16"], "{v}");
    for a in agreements {
        let a = &a["agreement"];
        let tolerance = a["tolerance"].as_f64().unwrap();
        for key in ["diagnostics", "moves"] {
            let d = a[key].as_f64().unwrap();
            assert!((0.0..=tolerance).contains(&d), "{key}: {a}");
        }
        assert_eq!(a["skipped_steps"], 0, "{a}");
    }
    let mut seen = Vec::new();
    for r in runs {
        let res = &r["result"];
        for key in [
            "samples_per_second",
            "end_to_end_samples_per_second",
            "cold_update_s",
            "steady_update_s",
        ] {
            assert!(res[key].as_f64().unwrap() > 0.0, "{key}: {r}");
        }
        // The CPU compiles nothing: no compile time.
        if wgpu {
            assert!(res["compile_s"].as_f64().unwrap() >= 0.0, "{r}");
        } else {
            assert!(res["compile_s"].is_null(), "{r}");
        }
        assert!(res["phases"]["env_step"].as_f64().unwrap() > 0.0, "{r}");
        assert!(res["phases"]["update"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["gpus"].is_array(), "{r}");
        let placement = res["config"]["placement"].as_str().unwrap().to_owned();
        let precision = res["config"]["precision"].as_str().unwrap().to_owned();
        if wgpu {
            // wgpu reports its memory pool, what it compiled and what it launched.
            assert!(res["pool_reserved_bytes"].as_u64().unwrap() > 0, "{r}");
            assert!(res["kernels_compiled"].is_u64(), "{r}");
            assert!(res["autotune_runs"].is_u64(), "{r}");
            let d = |k: &str| res[k].as_f64().unwrap_or_else(|| panic!("{k}: {r}"));
            let (env, buffer) = (
                d("dispatches_per_env_step"),
                d("dispatches_per_buffer_step"),
            );
            let (policy, policy_copies, minibatch, minibatch_copies) = hold_launches(r, &TINY_CAPS);
            eprintln!(
                "{placement} {precision}: {env} launches per env step, {policy} per policy \
                 step ({policy_copies} layout copies), {buffer} per buffer step, {minibatch} \
                 per minibatch ({minibatch_copies} layout copies), {} syncs per update",
                res["syncs_per_update"]
            );
            assert!(policy > 0.0 && minibatch > 0.0 && buffer > 0.0, "{r}");
            assert!(buffer <= MAX_DISPATCHES_PER_BUFFER_STEP, "{r}");
            let advantages = hold_advantage_stage(r, 2.0);
            eprintln!("{placement} {precision}: {advantages} launches an advantage stage");
            // An update of its own timed each kernel on the device: as many kernels per part as
            // the profile's launches (steady updates launch the same), all of them measured,
            // and the device busy for no longer than their sum.
            let profile = &res["dispatch_profile"];
            let kt = &profile["kernel_time"];
            let part = |k: &str| &kt[k];
            let mut kernels = 0;
            let mut sum_s = 0.0;
            for k in ["env_step", "inference", "buffer", "advantages", "update"] {
                assert_eq!(part(k)["unmeasured"], 0, "{k}: {kt}");
                kernels += part(k)["kernels"].as_u64().unwrap();
                sum_s += part(k)["sum_s"].as_f64().unwrap();
            }
            assert_eq!(part("update")["kernels"], profile["update"], "{kt}");
            assert_eq!(part("advantages")["kernels"], profile["advantages"], "{kt}");
            assert!(kernels > 0 && sum_s > 0.0, "{kt}");
            let busy = kt["busy_s"].as_f64().unwrap();
            assert!(busy > 0.0 && busy <= sum_s + 1e-6, "{kt}");
            let busy_pct = d("kernel_busy_pct");
            assert!(busy_pct > 0.0, "{r}");
            assert!(d("device_idle_us_per_launch") >= 0.0, "{r}");
            eprintln!(
                "{placement} {precision}: the device ran its kernels {busy_pct:.0} % of a steady \
                 update ({kernels} kernels, {busy:.4} s)"
            );
            let syncs = res["syncs_per_update"].as_u64().unwrap();
            if placement == "device" {
                assert!(env > 0.0 && env <= MAX_DISPATCHES_PER_ENV_STEP, "{r}");
                // Nothing is read back inside a device rollout: one read per update.
                assert_eq!(syncs, 1, "{r}");
            } else {
                // The host env reads each step's actions: 32 steps, and the update's read.
                assert_eq!(syncs, 33, "{r}");
            }
            // The trained policy step replayed from a graph captured once: wgpu replays the
            // recorded launches, and their outputs are the step's own to within rounding (the
            // same operations on the same input; burn's fusion may cut a step queued among
            // others into other kernels than a step alone: 7.5e-9 apart in f32 once). A replay
            // of stale or wrong buffers is off by the size of the outputs (about 1). Its wall
            // times are printed, not held.
            let replay = &res["policy_replay"];
            assert!(res["policy_replay_error"].is_null(), "{r}");
            assert_eq!(replay["hardware"], true, "{r}");
            let tolerance = if precision == "f32" { 1e-5 } else { 1e-2 };
            assert!(replay["max_abs_diff"].as_f64().unwrap() <= tolerance, "{r}");
            assert!(replay["launches_per_step"].as_f64().unwrap() >= 1.0, "{r}");
            assert!(replay["steps"].as_u64().unwrap() >= 16, "{r}");
            assert!(replay["replay_us_per_step"].as_f64().unwrap() > 0.0, "{r}");
            let us = |k: &str| replay[k].as_f64().unwrap();
            eprintln!(
                "{placement} {precision}: policy step {:.0} µs direct, {:.0} µs replayed",
                us("direct_us_per_step"),
                us("replay_us_per_step")
            );
        } else {
            assert!(res["kernels_compiled"].is_null(), "{r}");
            assert!(res["kernel_busy_pct"].is_null(), "{r}");
            assert!(res["policy_replay"].is_null(), "{r}");
        }
        seen.push((placement, precision));
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            ("device".into(), "f16".into()),
            ("device".into(), "f32".into()),
            ("host".into(), "f16".into()),
            ("host".into(), "f32".into()),
        ]
    );
    // The probe: square sizes and the configuration's own update shapes.
    let sizes: Vec<u64> = v["probe"]["square"]["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[0].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [64, 128, 256], "{v}");
    assert!(
        !v["probe"]["update_shapes"][0]["shapes"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    if wgpu {
        // The first run (host, f32) was the cold one; a second process of the same
        // configuration finds its autotune answers in the cache.
        let cold = &runs[0]["result"];
        assert_eq!(cold["config"]["placement"], "host");
        let first = cold["autotune_runs"].as_u64().unwrap();
        assert!(
            first >= 10,
            "the first run autotuned {first} operations: {cold}"
        );
        assert!(cold["kernels_compiled"].as_u64().unwrap() > 0, "{cold}");
        let again = json(&bench(
            &cache,
            &[
                "bench",
                "gpu",
                "--device",
                device,
                "--configs",
                "tiny",
                "--placements",
                "host",
                "--precisions",
                "f32",
                "--probe-sizes",
                PROBE_SIZES,
                "--json",
            ],
        ));
        let warm = &again["runs"][0]["result"];
        let second = warm["autotune_runs"].as_u64().unwrap();
        eprintln!(
            "autotune runs: {first} cold, {second} from the cache; kernels compiled {} then {}",
            cold["kernels_compiled"], warm["kernels_compiled"]
        );
        assert!(
            second * 10 <= first,
            "a second process autotuned {second} of the first's {first}: {warm}"
        );
        assert!(
            std::fs::read_dir(&cache).unwrap().next().is_some(),
            "the cache lives where TRADETUNE_GPU_CACHE says"
        );
    }

    // A configuration it does not know is refused by name, and so is a probe size out of range.
    let o = tradetune(&["bench", "gpu", "--device", device, "--configs", "huge"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("unknown configuration 'huge'"));
    for (sizes, says) in [
        ("8", "--probe-sizes: 8 is outside 16..=8192"),
        ("256,9000", "--probe-sizes: 9000 is outside 16..=8192"),
    ] {
        let o = tradetune(&["bench", "gpu", "--device", device, "--probe-sizes", sizes]);
        assert!(!o.status.success());
        assert!(text(&o.stderr).contains(says), "{}", text(&o.stderr));
    }
}

/// The launches at the GPU presets' depth: `tiny_deep` is the tiny configuration with nets
/// [16, 16, 16], three hidden layers as both presets have, so layers = 4 and issue 33's targets
/// are 2·4 + 4 = 12 per policy step and 6·4 + 12 = 36 per minibatch. Measured on lavapipe with
/// fresh caches (2026-11-28), launches of our own (layout copies apart):
/// - policy step: 10.2 in f32 and 10.6–11.4 in f16, under the target;
/// - minibatch: 38.5 in f32 and f16: a steady minibatch launches 36, the target, and the
///   update's first 10 more, spread here over 4 minibatches (over 32 in the presets' updates).
///   The cap holds that. It was 117.5 and 123.5 with the CPU's rational tanh (two dozen
///   operations, each a launch in the update's forward pass), then 46.5 and 52.5 with the
///   device's tanh, before each network's forward pass became a fusion segment of its own
///   (burn's fusion search explores at most 5 independent blocks of a segment and launches
///   what it left one operation at a time).
///
/// Which kernels a fresh autotune cache picks moves these, as the layout copies: where autotune
/// answers a fused matmul (the product with its bias and tanh) with its fallback, the bias and
/// tanh run as a kernel of their own, one more launch for each of the 6 hidden-layer products
/// that does. The steady 36 had 2 such (`TRADETUNE_TRACE_LAUNCHES=1`), and a CI-like run had 3
/// (39.5 a minibatch), so the caps are the targets with that allowance: 12 + 6 a policy step, 36
/// + 4 a steady minibatch, and the update's first 10 over 4 minibatches.
///
/// The layout copies are capped at what the products allow, as for the tiny configuration:
/// 8 forward products (4 a network) with one each, 8 weight gradients with two.
const DEEP_CAPS: LaunchCaps = LaunchCaps {
    policy: 12.0 + FUSED_MATMUL_FALLBACKS,
    policy_copies: 8.0,
    minibatch: 36.0 + (FUSED_MATMUL_FALLBACKS - 2.0) + 10.0 / 4.0,
    minibatch_copies: 8.0 + 2.0 * 8.0,
};
/// Hidden-layer products at that depth (3 a network) whose fused matmul may fall back.
const FUSED_MATMUL_FALLBACKS: f64 = 6.0;

#[test]
fn bench_gpu_holds_the_launches_at_the_presets_depth() {
    if !wgpu_here("bench_gpu at the presets' depth") {
        return;
    }
    let cache = scratch("cli_bench_gpu_deep", "cache");
    let v = json(&bench(
        &cache,
        &[
            "bench",
            "gpu",
            "--configs",
            "tiny_deep",
            "--placements",
            "device",
            "--policy-steps",
            "direct,replay",
            "--probe-sizes",
            "64",
            "--json",
        ],
    ));
    let runs = v["runs"].as_array().unwrap();
    // f32 then f16, each direct then replayed.
    assert_eq!(runs.len(), 4, "{v}");
    for pair in runs.chunks(2) {
        check_replayed(&pair[0], &pair[1]);
    }
    // What the replay gained, from the runs' own figures: each replayed run against its
    // direct one, precision by precision.
    let gains = v["replay_gains"].as_array().unwrap();
    assert_eq!(gains.len(), 2, "{v}");
    for (g, pair) in gains.iter().zip(runs.chunks(2)) {
        let rate = |run: &serde_json::Value| run["result"]["samples_per_second"].clone();
        assert_eq!(g["replayed"], "policy_step", "{g}");
        assert_eq!(
            g["precision"], pair[1]["result"]["config"]["precision"],
            "{g}"
        );
        assert_eq!(g["samples_per_second"], rate(&pair[1]), "{g}");
        assert_eq!(g["counterpart_samples_per_second"], rate(&pair[0]), "{g}");
    }
    for r in runs {
        let res = &r["result"];
        assert_eq!(res["config"]["net"], serde_json::json!([16, 16, 16]), "{r}");
        let precision = res["config"]["precision"].as_str().unwrap();
        let (policy, policy_copies, minibatch, minibatch_copies) = hold_launches(r, &DEEP_CAPS);
        let advantages = hold_advantage_stage(r, 4.0);
        eprintln!("{precision}, nets [16, 16, 16]: {advantages} launches an advantage stage");
        eprintln!(
            "{precision}, nets [16, 16, 16]: {policy} launches per policy step ({policy_copies} \
             layout copies), {minibatch} per minibatch ({minibatch_copies} layout copies)"
        );
        let env = res["dispatches_per_env_step"].as_f64().unwrap();
        assert!(env > 0.0 && env <= MAX_DISPATCHES_PER_ENV_STEP, "{r}");
        // The trained policy's evaluation, a bar at a time: the actor's launches (at most a
        // policy step's target, 2 · layers + 4 with layers = 4) and one, the env's kernel, which
        // writes the state log's row (on lavapipe 2026-11-29: 7.3 in f32, 9.3 in f16, whose
        // actor then cast its input, with the log's write a launch of its own; 16 at tiny before
        // the log; since the env writes an f16 actor's observations in f16, tiny's f16 bar is
        // 4.35 where it was 6.34).
        let eval = &res["evaluation"];
        let per_bar = eval["launches_per_bar"]
            .as_f64()
            .unwrap_or_else(|| panic!("{r}"));
        // The first of the two runs, as a trial's first evaluation meets it: what it compiled
        // where the counters count (they do on lavapipe), and its slow start.
        let first_compiled = eval["first_compiled"]
            .as_u64()
            .unwrap_or_else(|| panic!("{r}"));
        let slow_start = eval["first_slow_start_s"].as_f64().unwrap();
        assert!(eval["first_seconds"].as_f64().unwrap() >= slow_start, "{r}");
        eprintln!(
            "{precision}: evaluation {per_bar:.2} launches a bar; its first run compiled or \
             autotuned {first_compiled}, slow start {slow_start:.3} s"
        );
        assert!(eval["bars"].as_u64().unwrap() > 200, "{r}");
        assert!(per_bar > 1.0 && per_bar <= 2.0 * 4.0 + 4.0 + 1.0, "{r}");
        assert!(res["evaluation_error"].is_null(), "{r}");
        // Deeper, not more: a minibatch still reads nothing back, one read an update, and a
        // rollout on a replayed policy step none (its capture's synchronised warm-ups are once
        // a run, in the warm-up update).
        assert_eq!(res["syncs_per_update"].as_u64(), Some(1), "{r}");
    }
}

/// Run `replay` of `bench gpu --policy-steps direct,replay` against run `direct`, the same
/// configuration with its rollouts' policy step launched directly (issue 33,
/// `TRADETUNE_REPLAY_POLICY`): the replayed run's policy step still runs its forward passes'
/// kernels, its noise's add and the action's clip (counted as replayed: the graph reads its
/// noise row by a step counter on the device), and the host prepares none of them; the
/// buffer's kernel writes the next observations into the graph's input. The capture (three
/// warm-ups, the recorded run) is once a run, in the warm-up update; once a rollout the graph's
/// weights (cast to the compute dtype) and noise are written in place, the counter reset and
/// the input's first step written. Measured on lavapipe (2026-11-29, tiny_deep, 32 steps),
/// launches a policy step: f32 13.2 direct, 13.6 replayed of which 13.0 replayed and 0.56
/// prepared by the host (1.9 when the capture was once a rollout, 2.8 when the noise was added
/// outside the graph too); f16 13.6 direct, 13.2 replayed, 13.0 and 0.22. That the replayed
/// rollout learns what the direct one learns is `engine/tests/ppo_replay.rs`.
fn check_replayed(direct: &serde_json::Value, replay: &serde_json::Value) {
    let profile = |run: &serde_json::Value, replayed: bool| {
        let r = &run["result"];
        assert_eq!(r["config"]["replay_policy"], replayed, "{r}");
        let p = &r["dispatch_profile"];
        let f = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{k}: {r}"));
        (f("per_policy_step"), f("replayed_per_policy_step"))
    };
    let (direct_total, direct_replayed) = profile(direct, false);
    let (total, replayed) = profile(replay, true);
    let r = &replay["result"];
    let steps = r["config"]["n_steps"].as_f64().unwrap();
    let host = total - replayed;
    eprintln!(
        "{} policy step: {direct_total:.2} launches direct; replayed {total:.2}, of which \
         {replayed:.2} replayed and {host:.2} prepared by the host",
        r["config"]["precision"]
    );
    assert_eq!(
        direct_replayed, 0.0,
        "nothing is replayed without the graph"
    );
    // Every step of each rollout replays what the capture recorded: at least the forward
    // passes' products (4 a network at this depth).
    let recorded = replayed;
    assert!(recorded >= 8.0, "{recorded} launches a replay: {r}");
    // The host: nothing a step; once a rollout a write of each weight (a weight and a bias a
    // layer, two networks; in f16 its cast may be a launch of its own), the noise's write and
    // its scaling, the counter's reset (two) and the first step's input.
    let layers = r["config"]["net"].as_array().unwrap().len() as f64 + 1.0;
    let casts = if r["config"]["precision"] == "f16" {
        2.0
    } else {
        1.0
    };
    let cap = (2.0 * 2.0 * layers * casts + 5.0) / steps;
    assert!(
        host <= cap,
        "{host} launches prepared by the host a step (cap {cap}): {r}"
    );
    assert!(
        host < 0.4 * direct_total,
        "{host} against {direct_total} directly: {r}"
    );
    // wgpu recorded the launches (no fallback to running each step again), and the replayed
    // run's own figures are the run's: no replay probe beside them.
    assert!(r["replay_fallback"].is_null(), "{r}");
    assert!(r["policy_replay"].is_null(), "{r}");
    assert!(direct["result"]["policy_replay"].is_object(), "{direct}");
}

/// `bench gpu --minibatches direct,replay` (issue 33, `TRADETUNE_REPLAY_UPDATE`): the replayed
/// run's minibatches still run their kernels on the device (counted as replayed, with the
/// state taken apart and put together, a launch each), while the host prepares one launch a
/// minibatch (the state's copy) instead of all of them, and once an update the rollout's, the
/// plan's and the state's writes and the state handed back. Measured on lavapipe (2026-11-29,
/// tiny_deep f32, replayed policy step, the steady update's 8 minibatches): 40 launches a
/// minibatch direct; replayed 45.75, of which 40 replayed and 5.75 prepared by the host (at
/// `small`'s 32 minibatches an update: 26 direct; 29.6, of which 1.6 by the host). Before the
/// state's two kernels, a replayed minibatch ran 54 launches on the device at tiny_deep. That
/// the replayed update learns what the direct one learns is `engine/tests/ppo_replay.rs`.
#[test]
fn bench_gpu_replays_the_minibatches() {
    if !wgpu_here("bench_gpu with replayed minibatches") {
        return;
    }
    let cache = scratch("cli_bench_gpu_minibatches", "cache");
    let v = json(&bench(
        &cache,
        &[
            "bench",
            "gpu",
            "--configs",
            "tiny_deep",
            "--placements",
            "device",
            "--precisions",
            "f32",
            "--policy-steps",
            "replay",
            "--minibatches",
            "direct,replay",
            "--probe-sizes",
            "64",
            "--json",
        ],
    ));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{v}");
    let profile = |run: &serde_json::Value, replayed: bool| {
        let r = &run["result"];
        assert_eq!(r["config"]["replay_update"], replayed, "{r}");
        assert!(r["update_replay_fallback"].is_null(), "{r}");
        let p = &r["dispatch_profile"];
        let f = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{k}: {r}"));
        (f("per_minibatch"), f("replayed_per_minibatch"))
    };
    let (direct, none) = profile(&runs[0], false);
    let (total, replayed) = profile(&runs[1], true);
    let host = total - replayed;
    eprintln!(
        "minibatch: {direct:.2} launches direct; replayed {total:.2}, of which {replayed:.2} \
         replayed and {host:.2} prepared by the host"
    );
    assert_eq!(none, 0.0, "nothing is replayed without the graph");
    // Every minibatch of the steady update replays what the capture recorded: at least the
    // direct minibatch's kernels, less its layout copies' and the tally's own.
    assert!(replayed >= 0.75 * direct, "{replayed} of {direct}");
    // ... and not many more: the state's two kernels where the direct minibatch has none, and
    // room for a layout copy the autotune cache's routines may add or drop.
    assert!(
        replayed <= direct + 4.0,
        "{replayed} replayed against {direct} directly"
    );
    // The host: the state's copy a minibatch, and once an update the rollout's, the plan's and
    // the state's writes and the state handed back (their share of each of the update's 8
    // minibatches), the update's diagnostics read as without the graph.
    assert!(
        host <= 7.5,
        "{host} launches prepared by the host a minibatch"
    );
    assert!(host < 0.4 * direct, "{host} against {direct} directly");
    // The replayed minibatches read nothing more back: one read an update in both runs (both
    // graphs' captures are once a run, in the warm-up update).
    for run in runs {
        assert_eq!(run["result"]["syncs_per_update"].as_u64(), Some(1), "{v}");
    }
    // Its gain is measured against the run that replays only the policy step.
    let gains = v["replay_gains"].as_array().unwrap();
    assert_eq!(gains.len(), 1, "{v}");
    assert_eq!(gains[0]["replayed"], "minibatches", "{v}");
    assert_eq!(
        gains[0]["counterpart_samples_per_second"], runs[0]["result"]["samples_per_second"],
        "{v}"
    );
}

/// A peer that logs its arguments to `args.log` beside it and prints a fixed result of the GPU
/// peer's protocol (the result is the last line).
fn fake_torch_peer(dir: &Path) -> std::path::PathBuf {
    common::fake_peer(
        dir,
        "{\"peer\": \"cleanrl-style\", \"device\": \"Fake GPU\", \"precision\": \"x\", \"cold_update_seconds\": 2.5, \"versions\": {\"torch\": \"0.0-fake\"}, \"threads\": 1, \"samples\": 256, \"seconds\": 0.256, \"samples_per_second\": 1000.0}",
    )
}

/// `bench gpu` of the tiny configuration on the CPU, host env, f32, one update, with `peer`.
fn tiny_cpu_bench_with_peer(peer: &Path) -> [&str; 14] {
    [
        "bench",
        "gpu",
        "--device",
        "cpu",
        "--configs",
        "tiny",
        "--placements",
        "host",
        "--precisions",
        "f32",
        "--updates",
        "1",
        "--peer",
        peer.to_str().unwrap(),
    ]
}

/// `--peer PYTHON` runs the built-in CleanRL-style script on each configuration, on torch's
/// GPU in TF32 and in bf16 autocast, in the same run, and prints it beside ours. torch is not
/// in CI: a fake interpreter speaking the protocol stands in (`benches/peers/cleanrl_ppo.py`
/// itself runs where torch is, `--peer-device cpu` without a GPU).
#[test]
fn bench_gpu_runs_the_pytorch_peer_in_the_same_run() {
    let dir = scratch("cli_bench_gpu", "peer");
    let peer = fake_torch_peer(&dir);
    let args = tiny_cpu_bench_with_peer(&peer);
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let v = json(&bench(&dir.join("cache"), &with_json));
    let peers = v["peer"].as_array().unwrap();
    assert_eq!(peers.len(), 2, "{v}");
    assert_eq!(peers[0]["precision"], "tf32");
    assert_eq!(peers[1]["precision"], "bf16");
    assert_eq!(peers[0]["run"]["samples_per_second"], 1000.0);
    assert!(
        peers[0]["ours_best_over_peer"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    let log = std::fs::read_to_string(dir.join("args.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    for (line, precision) in lines.iter().zip(["tf32", "bf16"]) {
        assert!(line.starts_with("script-exists "), "{line}");
        assert!(
            line.contains("cleanrl_ppo.py --n-envs 8 --n-steps 32"),
            "{line}"
        );
        assert!(
            line.ends_with(&format!("--device cuda --precision {precision}")),
            "{line}"
        );
    }
    // The table names the peer and the ratio.
    let o = bench(&dir.join("cache"), &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "peer: cleanrl-style (torch 0.0-fake) on Fake GPU; ours (best of this config) / peer = "
        ),
        "{out}"
    );
    assert!(
        out.contains("matmul probe, f32 GFLOP/s: square 256²: "),
        "{out}"
    );
    // The peer ran before our run, its figures on stderr as it ended (a bench stopped at its
    // limit keeps them); the probe after our run, whose cold update pays its own autotuning.
    let err = text(&o.stderr);
    assert!(
        err.contains("peer tiny tf32: 1000 samples/s steady, cold update 2.5 s (cleanrl-style (torch 0.0-fake) on Fake GPU)"),
        "{err}"
    );
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("no {needle}: {out}"))
    };
    assert!(at("\ntiny ") < at("matmul probe, f32 GFLOP/s"), "{out}");
    // Our row: the CPU compiles nothing, so its compile column ("comp s", after "cold s")
    // says "-", not a difference of update times.
    let ours = out
        .lines()
        .find(|l| l.starts_with("tiny") && !l.contains("peer:"))
        .unwrap_or_else(|| panic!("no row of ours: {out}"));
    let times: Vec<&str> = ours.split('|').nth(1).unwrap().split_whitespace().collect();
    assert_eq!(times[1], "-", "{ours}");
}

/// A peer that fails on one precision (bf16 here, as a card without it would) costs its own
/// row, not the bench: the other precision's row and our runs are printed (and in the JSON,
/// with the failure's words), and the command fails at its end, saying why.
#[test]
fn bench_gpu_goes_on_past_a_failing_peer_and_fails_at_its_end() {
    let dir = scratch("cli_bench_gpu", "failing_peer");
    let peer = dir.join("fake-python");
    std::fs::write(
        &peer,
        "#!/bin/sh\n\
         case \"$*\" in *bf16*) echo 'RuntimeError: bf16 is not supported here' >&2; exit 1;; esac\n\
         echo '{\"peer\": \"cleanrl-style\", \"device\": \"Fake GPU\", \"precision\": \"tf32\", \"cold_update_seconds\": 2.5, \"versions\": {\"torch\": \"0.0-fake\"}, \"threads\": 1, \"samples\": 256, \"seconds\": 0.256, \"env_seconds\": 0.064, \"samples_per_second\": 1000.0}'\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&peer, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let args = tiny_cpu_bench_with_peer(&peer);
    let o = bench(&dir.join("cache"), &args);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(!o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("peer: cleanrl-style (torch 0.0-fake) on Fake GPU, its env 25 % of its time"),
        "{out}"
    );
    assert!(out.contains("bf16 peer failed: --peer: "), "{out}");
    assert!(
        err.contains("RuntimeError: bf16 is not supported here"),
        "{err}"
    );
    assert!(
        err.contains("1 of the PyTorch peer's runs failed (their errors are above); every other figure was measured"),
        "{err}"
    );
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let o = bench(&dir.join("cache"), &with_json);
    assert!(!o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(1), "{v}");
    let peers = v["peer"].as_array().unwrap();
    assert_eq!(peers.len(), 2, "{v}");
    assert_eq!(peers[0]["run"]["samples_per_second"], 1000.0, "{v}");
    assert_eq!(peers[1]["precision"], "bf16", "{v}");
    assert!(
        peers[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("bf16 is not supported here")),
        "{v}"
    );
}

/// `--deadline` (a borrowed card's minutes): a run that would start past it is skipped and
/// named, a peer's run still going then is stopped (with the processes it started), and the
/// matmul probe is printed all the same. A peer that would run for a minute is stopped at the
/// two-second deadline: its failure is the command's (exit 1); with the deadline at zero
/// nothing runs but the probe, and the command succeeds.
#[test]
fn bench_gpu_stops_at_its_deadline_and_still_probes() {
    let dir = scratch("cli_bench_gpu", "deadline");
    let peer = dir.join("slow-python");
    // Its own child, found by its unusual argument once the command has ended (its output
    // elsewhere: left running, it would not hold the command's pipes).
    std::fs::write(
        &peer,
        "#!/bin/sh\nsleep 600.4142 >/dev/null 2>&1 &\nsleep 600\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&peer, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut args = tiny_cpu_bench_with_peer(&peer).to_vec();
    args.extend(["--deadline", "10", "--probe-sizes", "64"]);
    let o = bench(&dir.join("cache"), &args);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    // The peer's own child was stopped with it (its process group): left, it would have held
    // the output pipes, and the command, for a minute.
    let left = Command::new("pgrep")
        .args(["-f", "sleep 600.4142"])
        .output()
        .expect("pgrep runs");
    if left.status.success() {
        let _ = Command::new("pkill")
            .args(["-f", "sleep 600.4142"])
            .status();
        panic!("the peer's child outlived it: {}", text(&left.stdout));
    }
    assert!(
        err.contains("was stopped at --deadline, still running"),
        "{err}"
    );
    assert!(
        err.contains("--deadline 10 s: not run, the time being spent: tiny peer bf16, tiny "),
        "{err}"
    );
    assert!(err.contains(", tiny f32 agreement"), "{err}");
    assert!(out.contains("tf32 peer failed: --peer: "), "{out}");
    assert!(
        out.contains("matmul probe, f32 GFLOP/s: square 64²: "),
        "{out}"
    );
    assert!(
        !out.lines()
            .any(|l| l.starts_with("tiny ") && !l.contains("peer")),
        "{out}"
    );

    let args = [
        "bench",
        "gpu",
        "--device",
        "cpu",
        "--configs",
        "tiny",
        "--placements",
        "host",
        "--precisions",
        "f32",
        "--updates",
        "1",
        "--probe-sizes",
        "64",
        "--deadline",
        "0",
        "--json",
    ];
    let v = json(&bench(&dir.join("cache"), &args));
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(
        v["past_deadline"],
        serde_json::json!(["tiny f32 host", "tiny f32 agreement"]),
        "{v}"
    );
    assert!(v["probe"]["square"].is_object(), "{v}");
    let o = bench(&dir.join("cache"), &["bench", "gpu", "--deadline", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("'soon' is not a number of seconds from 0 to"),
        "{}",
        text(&o.stderr)
    );
}

/// `tradetune bench matmul` (no timing assertion): the routines it knows, its refusals, and
/// on wgpu one routine beside burn's autotuned matmul on every product of the tiny
/// configuration's minibatch, each answer checked, and the minibatch's products summed.
#[test]
fn bench_matmul_measures_each_routine_on_the_update_products() {
    let list = tradetune(&["bench", "matmul", "--list"]);
    assert!(list.status.success(), "{}", text(&list.stderr));
    let names = text(&list.stdout);
    assert!(names.lines().any(|l| l == "matmul_naive"), "{names}");
    assert!(names.lines().any(|l| l.contains("cmma")), "{names}");

    let o = tradetune(&["bench", "matmul", "--routines", "matmul_nope"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("--routines: unknown routine 'matmul_nope'"),
        "{}",
        text(&o.stderr)
    );
    let o = tradetune(&["bench", "matmul", "--device", "cpu"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("wgpu device"),
        "{}",
        text(&o.stderr)
    );

    if !wgpu_here("bench_matmul on wgpu") {
        return;
    }
    let dir = scratch("cli_bench_gpu", "bench_matmul");
    let args = [
        "bench",
        "matmul",
        "--configs",
        "tiny",
        "--precisions",
        "f32",
        "--routines",
        "matmul_naive",
        "--json",
    ];
    let v = json(&bench(&dir.join("cache"), &args));
    assert!(
        v["features"]["runtime"]
            .as_str()
            .unwrap()
            .starts_with("wgpu"),
        "{v}"
    );
    let sweeps = v["sweeps"].as_array().unwrap();
    // nets [16], 7 assets: per network its hidden layer's forward and weight gradient and its
    // head's forward, weight and input gradient; the hidden layer's are one product for both.
    assert_eq!(sweeps.len(), 8, "{v}");
    for s in sweeps {
        assert!(s["autotune"]["gflops"].as_f64().unwrap() > 0.0, "{s}");
        let routines = s["routines"].as_array().unwrap();
        assert_eq!(routines.len(), 1, "{s}");
        assert_eq!(routines[0]["name"], "matmul_naive");
        assert!(routines[0]["error"].is_null(), "{s}");
        assert!(routines[0]["rel_err"].as_f64().unwrap() < 1e-4, "{s}");
    }
    let m = &v["minibatches"][0];
    assert_eq!(m["config"], "tiny");
    let products = m["products"].as_array().unwrap();
    let per_minibatch: u64 = products
        .iter()
        .map(|p| p["per_minibatch"].as_u64().unwrap())
        .sum();
    assert_eq!(per_minibatch, 10, "{m}");
    let (auto, best) = (
        m["minibatch_ms_at_autotune"].as_f64().unwrap(),
        m["minibatch_ms_at_best"].as_f64().unwrap(),
    );
    assert!(best > 0.0 && best <= auto, "{m}");
}

/// `benches/gpu/run.sh`, the one script for whoever holds a GPU, over stand-ins for the
/// binaries that log how they are called: the machine file, the steps in the order of what
/// matters most (the RTX 4080 shape cold, the study of two trials and its export, on the warm
/// cache, the SPIR-V build's routines and run, the RX 7900 GRE shape, the routines, the
/// minibatches replayed) with the run's own cache and the peer passed on, the report packed into
/// one file after each step, and a budget that skips the steps it has no room for, as it says.
/// What would waste a borrowed card's minutes is found first: no GPU adapter stops the run
/// before any step, and a peer whose Python cannot run it is left out, said, not fatal.
#[test]
fn the_gpu_script_runs_its_steps_on_a_cache_of_its_own_within_its_budget() {
    use std::os::unix::fs::PermissionsExt;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/gpu/run.sh");
    let dir = scratch("cli_bench_gpu", "gpu_script");
    let log = dir.join("calls.log");
    let fake = dir.join("tradetune");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$* cache=$TRADETUNE_GPU_CACHE\" >> '{}'\n\
             if [ \"$1\" = --version ]; then echo 'tradetune 9.9.9'; fi\n\
             if [ \"$1\" = devices ]; then echo \"wgpu  wgpu  yes ${{FAKE_ADAPTER:-discrete GPU}}  80.0 GiB f32,f16  yes  default adapter\"; fi\n\
             if [ \"$1 $4\" = 'bench tiny' ] && [ -n \"$FAKE_SMOKE_FAILS\" ]; then echo 'validation error: the device was lost' >&2; exit 1; fi\n\
             if [ \"$1\" = bench ]; then echo \"table of $2\"; echo progress >&2; mkdir -p \"$TRADETUNE_GPU_CACHE\"; touch \"$TRADETUNE_GPU_CACHE/answers.db\"; fi\n",
            log.display()
        ),
    )
    .unwrap();
    let spirv = dir.join("tradetune-spirv");
    std::fs::write(
        &spirv,
        format!(
            "#!/bin/sh\necho \"spirv $* cache=$TRADETUNE_GPU_CACHE\" >> '{}'\n\
             if [ \"$1\" = --version ]; then echo 'tradetune 9.9.9 (GPU: wgpu, SPIR-V kernels)'; fi\n\
             if [ \"$1\" = bench ]; then echo \"spirv table of $2\"; fi\n",
            log.display()
        ),
    )
    .unwrap();
    let python = dir.join("python");
    std::fs::write(&python, "#!/bin/sh\nexit 0\n").unwrap();
    for f in [&fake, &spirv, &python] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run_with = |out: &Path, extra: &[&str], adapter: &str| {
        Command::new("bash")
            .arg(&script)
            .args(["--tradetune", fake.to_str().unwrap(), "--out"])
            .arg(out)
            .args(extra)
            .env("FAKE_ADAPTER", adapter)
            .output()
            .expect("bash runs the script")
    };
    let run = |out: &Path, extra: &[&str]| run_with(out, extra, "discrete GPU");

    let out = dir.join("report");
    let packed = dir.join("report.tgz");
    let o = run(
        &out,
        &[
            "--peer",
            python.to_str().unwrap(),
            "--spirv",
            spirv.to_str().unwrap(),
            "--pack",
            packed.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    let machine = std::fs::read_to_string(out.join("machine.txt")).unwrap();
    assert!(machine.starts_with("date: "), "{machine}");
    assert!(machine.contains("tradetune: tradetune 9.9.9"), "{machine}");
    assert!(
        machine.contains("tradetune (SPIR-V): tradetune 9.9.9 (GPU: wgpu, SPIR-V kernels)"),
        "{machine}"
    );
    let cache = format!("cache={}", out.join("gpu-cache").display());
    let calls: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| {
            l.starts_with("bench") || l.starts_with("spirv bench") || l.starts_with("study")
        })
        .map(|l| l.to_string())
        .collect();
    // The first small run on a cache of its own (left behind by none), then the steps, each
    // `bench gpu` with a deadline 45 s short of its limit.
    let smoke_cache = format!("cache={}", out.join("smoke-cache").display());
    assert!(!out.join("smoke-cache").exists());
    assert_eq!(
        calls,
        [
            format!(
                "bench gpu --configs tiny --placements device --precisions f32 --updates 1 \
                 --probe-sizes 256 {smoke_cache}"
            ),
            format!(
                "bench gpu --configs rtx4080 --updates 2 --probe-sizes 256,1024,4096 --deadline \
                 195 --peer {} {cache}",
                python.display()
            ),
            format!(
                "study run {} --db {} --telemetry-interval 0.25 {cache}",
                out.join("study.toml").display(),
                out.join("study.db").display()
            ),
            format!(
                "study export rtx4080_shape --db {} --trials {} {cache}",
                out.join("study.db").display(),
                out.join("study-trials.csv").display()
            ),
            format!(
                "bench gpu --configs rtx4080 --precisions f32 --policy-steps direct,replay \
                 --probe-sizes 256,1024,4096 --deadline 55 {cache}"
            ),
            format!("spirv bench matmul --configs rtx4080 {cache}"),
            format!(
                "spirv bench gpu --configs rtx4080 --probe-sizes 256,1024,4096 --deadline 105 \
                 {cache}"
            ),
            format!(
                "bench gpu --configs rx7900gre --updates 2 --probe-sizes 256,1024,4096 --deadline \
                 105 --peer {} {cache}",
                python.display()
            ),
            format!("bench matmul --configs rtx4080 {cache}"),
            format!(
                "bench gpu --configs rtx4080 --placements device --precisions f32 --policy-steps \
                 replay --minibatches direct,replay --probe-sizes 256,1024,4096 --deadline 45 \
                 {cache}"
            ),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(out.join("bench-matmul-spirv.txt")).unwrap(),
        "spirv table of matmul\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("bench-matmul.txt")).unwrap(),
        "table of matmul\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("bench-gpu.err")).unwrap(),
        "progress\n"
    );
    let steps = std::fs::read_to_string(out.join("steps.txt")).unwrap();
    assert_eq!(steps.matches("   done in ").count(), 10, "{steps}");
    // The report in one file, as it stood after the last step, without the autotune cache.
    let listed = Command::new("tar")
        .arg("-tzf")
        .arg(&packed)
        .output()
        .expect("tar runs");
    let listed = text(&listed.stdout);
    for f in [
        "./machine.txt",
        "./steps.txt",
        "./bench-gpu.txt",
        "./study.toml",
    ] {
        assert!(listed.lines().any(|l| l == f), "{f} not packed: {listed}");
    }
    assert!(out.join("gpu-cache/answers.db").is_file());
    assert!(
        !listed.lines().any(|l| l.starts_with("./gpu-cache")),
        "{listed}"
    );
    assert!(!dir.join("report.tgz.part").exists());
    // The study file the script writes is one TradeTune takes (recorded, not run: the
    // shape is the RTX 4080 preset's, for a card).
    let check = dir.join("study-check.db");
    let o = tradetune(&[
        "study",
        "create",
        out.join("study.toml").to_str().unwrap(),
        "--storage",
        check.to_str().unwrap(),
    ]);
    assert!(
        o.status.success() && text(&o.stdout).contains("study 'rtx4080_shape' recorded"),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );

    // A budget under a minute has room for nothing: every step says it was skipped.
    std::fs::remove_file(&log).unwrap();
    let out = dir.join("short");
    let o = run(&out, &["--budget", "30"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let steps = std::fs::read_to_string(out.join("steps.txt")).unwrap();
    assert_eq!(
        steps
            .matches("skipped, under a minute of the 30s budget left")
            .count(),
        7,
        "{steps}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        !calls
            .lines()
            .any(|l| l.starts_with("bench") || l.starts_with("study")),
        "{calls}"
    );

    // Refusals name what is wrong.
    let o = run(&dir.join("bad"), &["--budget", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--budget 'soon' is not a whole number"));
    let o = run(&dir.join("bad"), &["--peer", "/nonexistent/python"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--peer '/nonexistent/python' is no program here"),
        "{}",
        text(&o.stderr)
    );
    // No GPU adapter (the card's driver did not load): stopped before any step.
    std::fs::remove_file(&log).unwrap();
    let o = run_with(&dir.join("software"), &[], "software renderer");
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("wgpu's default adapter is a software renderer, not a GPU"),
        "{}",
        text(&o.stderr)
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(!calls.lines().any(|l| l.starts_with("bench")), "{calls}");
    // A Python without torch: the peer is left out, said, and the steps run without it.
    let no_torch = dir.join("python-without-torch");
    std::fs::write(
        &no_torch,
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&no_torch, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.join("no-torch");
    let o = run_with(
        &out,
        &["--peer", no_torch.to_str().unwrap(), "--allow-software"],
        "software renderer",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let steps = std::fs::read_to_string(out.join("steps.txt")).unwrap();
    assert!(
        steps.starts_with(&format!(
            "== the PyTorch peer is left out: {} cannot run it (ModuleNotFoundError: No module \
             named 'torch')",
            no_torch.display()
        )),
        "{steps}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls
            .lines()
            .any(|l| l.starts_with("bench gpu --configs rtx4080 --updates 2 --probe-sizes")),
        "{calls}"
    );
    assert!(!calls.contains("--peer"), "{calls}");
    // A first run on the card that fails (the device does not open, a kernel does not compile):
    // no step runs, and its words are in steps.txt.
    std::fs::remove_file(&log).unwrap();
    let out = dir.join("smoke-fails");
    let o = Command::new("bash")
        .arg(&script)
        .args(["--tradetune", fake.to_str().unwrap(), "--out"])
        .arg(&out)
        .env("FAKE_ADAPTER", "discrete GPU")
        .env("FAKE_SMOKE_FAILS", "1")
        .output()
        .expect("bash runs the script");
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    let steps = std::fs::read_to_string(out.join("steps.txt")).unwrap();
    assert!(steps.contains("failed (exit 1) after "), "{steps}");
    assert!(
        steps.contains("no step is run; its last words:\nvalidation error: the device was lost"),
        "{steps}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("bench")).count(),
        1,
        "{calls}"
    );
    let o = run(&dir.join("bad"), &["--spirv", fake.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("is not a tradetune built with --features vulkan"),
        "{}",
        text(&o.stderr)
    );
}

/// `benches/gpu/carry.sh` in a repository of its own, over stand-ins for cargo, strip and
/// apt-get: the binaries built (the SPIR-V one with `--features vulkan`), stripped and packed,
/// the loader's package fetched, the folder kept out of commits, the size checked, and the one
/// command it prints runs `run.sh` on the unpacked binaries (the loader's unpacking left out:
/// it writes to `/`).
#[test]
fn the_carry_script_packs_the_binaries_and_prints_the_command_that_runs_them() {
    use std::os::unix::fs::PermissionsExt;
    // The script packs with the real xz, for an x86-64 machine (CI installs xz-utils).
    let xz = Command::new("xz").arg("--version").output();
    if xz.is_err() || std::env::consts::ARCH != "x86_64" {
        eprintln!("skipped: carry.sh needs xz and an x86-64 host");
        return;
    }
    let benches = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/gpu");
    let dir = scratch("cli_bench_gpu", "carry");
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("benches/gpu")).unwrap();
    for f in ["carry.sh", "run.sh"] {
        std::fs::copy(benches.join(f), repo.join("benches/gpu").join(f)).unwrap();
    }
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git runs");
        assert!(o.status.success(), "git {args:?}: {}", text(&o.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("calls.log");
    // The stand-in tradetune that the stand-in cargo "builds": it says which build it is.
    let cargo = format!(
        "#!/bin/sh\necho \"cargo $*\" >> '{log}'\nmkdir -p \"$CARGO_TARGET_DIR/release\"\n\
         kind=default; case \"$*\" in *vulkan*) kind=spirv;; esac\n\
         out=\"$CARGO_TARGET_DIR/release/tradetune\"\n\
         printf '#!/bin/sh\\necho \"%s $* cache=$TRADETUNE_GPU_CACHE\" >> {log}\\n\
         if [ \"$1\" = --version ]; then echo \"tradetune 9.9.9 (%s)\"; fi\\n\
         if [ \"$1\" = devices ]; then echo \"wgpu  wgpu  yes discrete GPU\"; fi\\n' \
         \"$kind\" \"$kind\" > \"$out\"\n\
         [ $kind = spirv ] && sed -i 's/(spirv)/(GPU: wgpu, SPIR-V kernels)/' \"$out\"\n\
         chmod +x \"$out\"\n",
        log = log.display()
    );
    let strip = "#!/bin/sh\n[ \"$1\" = -o ] && cp \"$3\" \"$2\"\n";
    let apt = format!(
        "#!/bin/sh\necho \"apt-get $*\" >> '{}'\n\
         case \"$*\" in *download*) touch libvulkan1_1.0_amd64.deb;; esac\n",
        log.display()
    );
    for (name, body) in [
        ("cargo", cargo.as_str()),
        ("strip", strip),
        ("apt-get", &apt),
    ] {
        let f = bin.join(name);
        std::fs::write(&f, body).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let target = dir.join("target");
    let carry = |args: &[&str]| {
        Command::new("bash")
            .arg("benches/gpu/carry.sh")
            .args(args)
            .current_dir(&repo)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("bash runs the script")
    };

    let bad = carry(&["--budget", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("--budget 'soon' is not a whole number of seconds"),
        "{}",
        text(&bad.stderr)
    );

    let long = carry(&["--budget", "541"]);
    assert_eq!(long.status.code(), Some(2));
    assert!(
        text(&long.stderr).contains("at most 540"),
        "{}",
        text(&long.stderr)
    );

    let o = carry(&["--spirv", "--budget", "300"]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", text(&o.stderr));
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains("cargo build --release -p tradetune\n")
            && calls.contains("cargo build --release -p tradetune --features vulkan\n"),
        "{calls}"
    );
    assert!(
        calls.contains("download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2"),
        "{calls}"
    );
    let packed = repo.join(".gpu-carry");
    for f in [
        "tradetune.xz",
        "tradetune-spirv.xz",
        "libvulkan1_1.0_amd64.deb",
    ] {
        assert!(packed.join(f).is_file(), "{f} not packed: {stdout}");
    }
    let exclude = std::fs::read_to_string(repo.join(".git/info/exclude")).unwrap();
    assert_eq!(exclude.matches("/.gpu-carry/").count(), 1, "{exclude}");
    assert!(stdout.contains("MiB of the 64 a call carries"), "{stdout}");
    assert!(
        stdout.contains("with carry [\".gpu-carry\"] and timeout_s 360"),
        "{stdout}"
    );
    let command = stdout
        .lines()
        .find(|l| l.contains("benches/gpu/run.sh"))
        .unwrap_or_else(|| panic!("no command printed: {stdout}"));
    assert!(
        command.starts_with("for f in .gpu-carry/*.deb; do dpkg -x \"$f\" /; done; ldconfig;"),
        "{command}"
    );
    assert!(
        command.ends_with(
            "benches/gpu/run.sh --tradetune .gpu-carry/tradetune --spirv \
             .gpu-carry/tradetune-spirv --peer python3 --out $r --pack $OUT/gpu-report.tgz \
             --budget 300; tail -c 5000 $r/bench-gpu.txt"
        ),
        "{command}"
    );
    // A second run packs again without a second exclude line.
    let o = carry(&[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        !packed.join("tradetune-spirv.xz").exists(),
        "a stale SPIR-V binary left"
    );
    let exclude = std::fs::read_to_string(repo.join(".git/info/exclude")).unwrap();
    assert_eq!(exclude.matches("/.gpu-carry/").count(), 1, "{exclude}");
    let command = text(&o.stdout)
        .lines()
        .find(|l| l.contains("benches/gpu/run.sh"))
        .unwrap()
        .to_string();

    // The printed command, from the unpacking on, as the GPU machine runs it (with a python
    // for the peer that says it has torch).
    let python = bin.join("python3");
    std::fs::write(&python, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let from = command.find("r=$(mktemp -d)").unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::remove_file(&log).unwrap();
    let o = Command::new("bash")
        .args(["-c", &command[from..]])
        .current_dir(&repo)
        .env("PATH", &path)
        .env("OUT", &out)
        .output()
        .expect("bash runs the command");
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    // What comes back from the machine: the report packed into one file.
    let machine = Command::new("tar")
        .arg("-xzOf")
        .arg(out.join("gpu-report.tgz"))
        .arg("./machine.txt")
        .output()
        .expect("tar runs");
    let machine = text(&machine.stdout);
    assert!(
        machine.contains("tradetune: tradetune 9.9.9 (default)"),
        "{machine}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains(
            "default bench gpu --configs rtx4080 --updates 2 --probe-sizes 256,1024,4096 --deadline "
        ) && calls.contains(" --peer python3"),
        "{calls}"
    );
}

/// `--peer-device` without `--peer` was accepted and ignored: refused before anything runs.
#[test]
fn bench_gpu_refuses_a_peer_device_without_a_peer() {
    let out = tradetune(&["bench", "gpu", "--peer-device", "cpu"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--peer-device") && stderr.contains("--peer <PYTHON>"),
        "{stderr}"
    );
}
