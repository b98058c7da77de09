//! `tradetune bench gpu`: what a GPU owner runs once to see where the card's time goes: per
//! configuration, the cold first update and the steady rate, what was compiled and autotuned,
//! kernel launches and host round-trips, the phase split, the matmul probe (square and at the
//! update's own shapes), the memory pool and the card's own utilisation; with `--peer`, a
//! CleanRL-style PyTorch peer on the same shapes, in the same run.

use std::time::Duration;

use tradetune_engine::device::precision::Precision;
use tradetune_engine::device::{DeviceSpec, open};
use tradetune_engine::ppo::DispatchProfile;
use tradetune_engine::ppo::KernelTimeProfile;
use tradetune_engine::ppo::bench::{ReplayProbe, TrainBenchConfig, TrainBenchResult};
use tradetune_engine::telemetry::TrialTotals;

use super::GpuArgs;
use super::train::{PeerRun, peer_scripts, run_peer};

mod replay_gains;
use replay_gains::{GAINS_NOTE, replay_gains};

/// What the GPU probes saw of one run: per card, mean utilisation over its measured (steady)
/// updates and over the whole run, and peak memory used.
#[derive(Debug, Clone, serde::Serialize)]
struct GpuSeen {
    gpu: String,
    /// Over the measured updates only (None where no probe sample fell inside them: a window
    /// shorter than the sampling interval).
    util_pct_mean: Option<f64>,
    /// Over the whole run: the cold update's compiling, the timed updates and the probes too.
    util_pct_mean_run: Option<f64>,
    mem_used_mib_max: Option<f64>,
}

/// What the probes saw of a run: its utilisation and peak memory over the whole run from its
/// totals (`run`: the sampler's running totals from the run's start to its end, whatever its
/// length), its utilisation over the `steady` window of its measured updates (seconds since
/// the Unix epoch) from the live rings, which keep their last `ring_capacity` points.
fn gpu_seen(
    sampler: &tradetune_engine::telemetry::SamplerHandle,
    run: &TrialTotals,
    steady: (f64, f64),
) -> Vec<GpuSeen> {
    use tradetune_engine::telemetry::{DeviceTag, Metric};
    let mut gpus: Vec<DeviceTag> = run
        .series
        .series
        .keys()
        .map(|(d, _)| *d)
        .filter(|d| matches!(d, DeviceTag::Gpu(_)))
        .collect();
    gpus.dedup();
    gpus.into_iter()
        .map(|d| {
            let steady: Vec<f64> = sampler
                .series(d, Metric::UtilPct, usize::MAX)
                .iter()
                .filter(|p| p.t >= steady.0 && p.t <= steady.1)
                .map(|p| p.v)
                .collect();
            let whole = |m: Metric| run.series.series.get(&(d, m));
            GpuSeen {
                gpu: d.to_string(),
                util_pct_mean: (!steady.is_empty())
                    .then(|| steady.iter().sum::<f64>() / steady.len() as f64),
                util_pct_mean_run: whole(Metric::UtilPct).and_then(|s| s.mean()),
                mem_used_mib_max: whole(Metric::MemUsedMib).and_then(|s| s.peak),
            }
        })
        .collect()
}

/// `12.3` or `-` for a figure that was not measured.
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A step's launches, `own+copies` where some were layout copies (see [`COPIES_NOTE`]).
fn launches(total: Option<f64>, copies: Option<f64>, digits: usize) -> String {
    match (total, copies) {
        (Some(t), Some(c)) if c > 0.0 => format!("{:.digits$}+{c:.digits$}", t - c),
        _ => opt(total, digits),
    }
}

/// Printed under the table when a row's launches include layout copies.
const COPIES_NOTE: &str = "d/pol, d/mb as a+b: the step's own launches + layout copies (contiguous \
     copies of an operand that the matmul routine this autotune cache picked wants in another \
     layout; TRADETUNE_TRACE_LAUNCHES=1 names every launch)";

/// `name precision placement`, `replayed` where the rollouts replay their policy step and
/// `minibatches replayed` where the updates replay theirs: how the lines under the table name
/// a run.
fn run_label(c: &TrainBenchConfig) -> String {
    let replayed = if c.replay_policy { " replayed" } else { "" };
    let minibatches = if c.replay_update {
        " minibatches replayed"
    } else {
        ""
    };
    format!(
        "{} {} {}{replayed}{minibatches}",
        c.name,
        c.precision,
        c.placement.name()
    )
}

/// The table's `pol` column: how the policy step runs (direct, replay), `+mb` where the
/// minibatches are replayed too.
fn pol_column(c: &TrainBenchConfig) -> String {
    let pol = if c.replay_policy { "replay" } else { "direct" };
    let mb = if c.replay_update { "+mb" } else { "" };
    format!("{pol}{mb}")
}

/// A policy step's steady launches in a run whose rollouts replay it, as a line under the table.
fn replayed_line(c: &TrainBenchConfig, p: &DispatchProfile) -> String {
    format!(
        "  {}: {:.2} launches a policy step, {:.2} replayed from the run's captured step and \
         {:.2} prepared one by one (the weights' and noise's writes into the graph included, \
         once a rollout of {} steps)",
        run_label(c),
        p.per_policy_step,
        p.replayed_per_policy_step,
        p.per_policy_step - p.replayed_per_policy_step,
        c.n_steps,
    )
}

/// Printed above the lines of the runs whose rollouts replay their policy step.
const REPLAYED_NOTE: &str = "pol replay: the run captures its policy step once (both networks' \
     forward passes, the noise added and the action clipped) and replays the recorded launches \
     at each step, the step's observations written into the captured input in place and its noise \
     row read by a step counter on the device; each rollout writes its weights and noise into the \
     graph's buffers in place (TRADETUNE_REPLAY_POLICY=1 does this in trials); d/pol counts the \
     replayed launches too";

/// A minibatch's steady launches in a run whose updates replay them, as a line under the table.
fn minibatch_line(c: &TrainBenchConfig, p: &DispatchProfile) -> String {
    format!(
        "  {}: {:.2} launches a minibatch, {:.2} replayed from the captured minibatch and {:.2} \
         prepared one by one (the state's copy; once an update the rollout's, the plan's and the \
         state's writes and the state handed back)",
        run_label(c),
        p.per_minibatch,
        p.replayed_per_minibatch,
        p.per_minibatch - p.replayed_per_minibatch,
    )
}

/// Printed above the lines of the runs whose updates replay their minibatches.
const MINIBATCHES_NOTE: &str = "+mb: the first update captures a minibatch once (forward and \
     backward passes, the tally, Adam's step) and every later minibatch of the run replays the \
     recorded launches, reading its indices, bias corrections and learning rate from a plan \
     uploaded once an update, the state carried in one buffer (TRADETUNE_REPLAY_UPDATE=1 does \
     this in trials); d/mb counts the replayed launches too";

/// What the device ran in one update of `c`, by part, as a line under the table.
fn kernel_line(c: &TrainBenchConfig, k: &KernelTimeProfile) -> String {
    let ms = |t: &tradetune_engine::device::kernel_timing::KernelTime| 1e3 * t.sum_s;
    let total = k.total();
    let clock = if total.device_clock {
        "device clock"
    } else {
        "host clock around each kernel: an upper bound"
    };
    let unmeasured = if total.unmeasured > 0 {
        format!(", {} unmeasured", total.unmeasured)
    } else {
        String::new()
    };
    format!(
        "  {}: env {:.1}, inference {:.1}, buffer {:.1}, gae {:.1}, update {:.1}; busy \
         {:.1} ms with {} kernels ({clock}{unmeasured})",
        run_label(c),
        ms(&k.env_step),
        ms(&k.inference),
        ms(&k.buffer),
        ms(&k.advantages),
        ms(&k.update),
        1e3 * k.busy_s,
        total.kernels,
    )
}

/// A run's policy step, direct and replayed, as a line under the table.
fn replay_line(c: &TrainBenchConfig, p: &ReplayProbe) -> String {
    let how = if !p.hardware {
        "; this backend has no graphs, so a replay ran the step again".to_string()
    } else if p.max_abs_diff == 0.0 {
        "; the same outputs".to_string()
    } else {
        format!("; outputs differ by up to {:.2e}", p.max_abs_diff)
    };
    // What the policy steps of one rollout of this configuration would cost each way.
    let rollout_ms = |us: f64| us * c.n_steps as f64 / 1e3;
    format!(
        "  {}: {:.1} launches a step, {:.0} µs direct, {:.0} µs replayed ({:.1} µs a \
         launch saved; a rollout's {} policy steps {:.1} ms direct, {:.1} ms replayed; capture \
         {:.0} ms; {} steps each way{how})",
        run_label(c),
        p.launches_per_step,
        p.direct_us_per_step,
        p.replay_us_per_step,
        p.saved_us_per_launch(),
        c.n_steps,
        rollout_ms(p.direct_us_per_step),
        rollout_ms(p.replay_us_per_step),
        p.capture_ms,
        p.steps,
    )
}

/// Printed above the evaluation lines.
const EVAL_NOTE: &str = "evaluation: the trained policy's deterministic evaluation on the \
     market's last bars, one env stepped bar by bar as a trial's periodic evaluation steps its \
     validation split (each bar the policy's launches and the env's kernel, which writes the \
     state log's row; the curves read once), the second of two runs; cold: the first run, what it \
     compiled and autotuned, and its first half's time beyond its pace (a trial's compile \
     phase takes that from its first evaluation)";

/// An evaluation probe's figures, as a line under the table.
fn eval_line(c: &TrainBenchConfig, e: &tradetune_engine::ppo::bench::EvalProbe) -> String {
    let launches = e
        .launches_per_bar
        .map(|l| format!(", {l:.1} launches a bar"))
        .unwrap_or_default();
    let compiled = e
        .first_compiled
        .map(|k| format!(", {k} compiled or autotuned"))
        .unwrap_or_default();
    format!(
        "  {}: {} bars in {:.3} s ({:.0} bars/s){launches}; cold {:.3} s{compiled}, slow start {:.3} s",
        run_label(c),
        e.bars,
        e.seconds,
        e.bars_per_second,
        e.first_seconds,
        e.first_slow_start_s
    )
}

/// Printed above the replay lines.
const REPLAY_NOTE: &str = "the policy step replayed: the trained model's policy step (both \
     networks, the noise, the clip) run directly and replayed from a graph captured once \
     (burn::tensor::capture), steps queued back to back, the host's wall time per step: what a \
     rollout built on replays would save";

/// Printed above the agreement lines.
const AGREEMENT_NOTE: &str = "agreement with the CPU: each configuration's update on this \
     device (its network, precision, observation width and minibatch; two updates of two \
     minibatches of a made-up rollout from the same weights, f16's loss scale starting at 16) \
     against the CPU's host engine in f32: the largest difference of the diagnostics (losses, \
     entropy, approx KL, clip fraction, gradient norm), each relative to its own size (at \
     least 0.01), and, the largest over the parameter tensors, the norm of the difference of \
     their moves over the norm of the CPU's";

/// Printed under the table when the kernels were timed on the device.
const KERNEL_NOTE: &str = "krn%: the device busy with this run's kernels, in % of a steady \
     update (each kernel timed on the device's clock in an update of its own); idle/l: the \
     device's idle time per kernel launched, in µs (the host's cost per launch: building, \
     submitting, synchronising). Each kernel is timed in a pass of its own, which a card \
     that overlaps kernels would have run side by side: the sum is an upper bound, and krn% \
     above 100 says the card overlaps them (idle/l is then 0). cubecl reads the device's \
     timestamps through f64: a driver whose clock counts from far back (nanoseconds since 1970 \
     are about 2^60) has them in steps of 256 ns, which a kernel of a few µs feels";

fn header() {
    outln!(
        "{:<10} {:>4} {:>5} {:>5} {:<18} {:>4} {:<6} {:<9} | {:>7} {:>7} {:>9} {:>9} {:>7} | {:>7} {:>5} | {:>7} {:>7} {:>7} {:>7} {:>6} | {:>4} {:>4} {:>4} {:>4} {:>4} | {:>5} {:>6} | {:>8} | gpus (steady util % (whole run's), peak mem MiB)",
        "config",
        "envs",
        "steps",
        "batch",
        "net",
        "prec",
        "env",
        "pol",
        "cold s",
        "comp s",
        "steady/s",
        "e2e/s",
        "upd GF/s",
        "kernels",
        "tuned",
        "d/env",
        "d/pol",
        "d/buf",
        "d/mb",
        "sync/u",
        "env%",
        "inf%",
        "buf%",
        "gae%",
        "upd%",
        "krn%",
        "idle/l",
        "pool MiB",
    );
}

fn row(c: &TrainBenchConfig, r: &TrainBenchResult, seen: &[GpuSeen]) {
    let wall = r.seconds.max(1e-9);
    let p = &r.phases;
    let pct = |x: f64| 100.0 * x / wall;
    let gpus: Vec<String> = seen
        .iter()
        .map(|g| {
            // The whole run's beside the steady updates' (those may fall between two samples
            // on a fast card): the cold update's compiling is what lowers it.
            format!(
                "{} {} (run {}) {}",
                g.gpu,
                opt(g.util_pct_mean, 0),
                opt(g.util_pct_mean_run, 0),
                opt(g.mem_used_mib_max, 0)
            )
        })
        .collect();
    outln!(
        "{} | {:>7.1} {:>7} {:>9.0} {:>9.0} {:>7.1} | {:>7} {:>5} | {:>7} {:>7} {:>7} {:>7} {:>6} | {:>4.0} {:>4.0} {:>4.0} {:>4.0} {:>4.0} | {:>5} {:>6} | {:>8} | {}",
        config_columns(
            c,
            &c.precision.to_string(),
            c.placement.name(),
            &pol_column(c)
        ),
        r.cold_update_s,
        opt(r.compile_s, 1),
        r.samples_per_second,
        r.end_to_end_samples_per_second,
        r.update_gflops_per_second,
        r.kernels_compiled.map_or("-".into(), |k| k.to_string()),
        r.autotune_runs.map_or("-".into(), |k| k.to_string()),
        opt(r.dispatches_per_env_step, 1),
        launches(
            r.dispatches_per_policy_step,
            r.layout_copies_per_policy_step,
            1
        ),
        opt(r.dispatches_per_buffer_step, 1),
        launches(r.dispatches_per_minibatch, r.layout_copies_per_minibatch, 0),
        r.syncs_per_update.map_or("-".into(), |k| k.to_string()),
        pct(p.env_step),
        pct(p.inference),
        pct(p.buffer),
        pct(p.advantages),
        pct(p.update),
        opt(r.kernel_busy_pct, 0),
        opt(r.device_idle_us_per_launch, 0),
        r.pool_reserved_bytes
            .map_or("-".into(), |b| format!("{:.0}", b as f64 / 1048576.0)),
        if gpus.is_empty() {
            "no GPU probe answers (no NVML, no amdgpu)".to_owned()
        } else {
            gpus.join(", ")
        }
    );
}

/// The peer's run of `cfg` in `precision` (`tf32`, `bf16`), as a table row.
fn peer_row(c: &TrainBenchConfig, precision: &str, run: &PeerRun, ours_best: Option<f64>) {
    let ratio = ours_best.map_or(String::new(), |o| {
        format!(
            "; ours (best of this config) / peer = {:.2}",
            o / run.samples_per_second()
        )
    });
    // What its samples/s owes to its env (the numpy env stepping on the CPU) against ours.
    let env = run.env_share().map_or(String::new(), |e| {
        format!(", its env {:.0} % of its time", 100.0 * e)
    });
    outln!(
        "{} | {:>7} {:>7} {:>9.0} {:>9} | peer: {} on {}{env}{ratio}",
        config_columns(c, precision, "host", "-"),
        opt(run.cold_update_seconds, 1),
        "-",
        run.samples_per_second(),
        "-",
        run.name(),
        run.device.as_deref().unwrap_or("?"),
    );
}

/// The `--precisions` asked for, split by whether the device computes in them.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Precisions {
    pub kept: Vec<Precision>,
    /// Each precision skipped, with why.
    pub skipped: Vec<(Precision, String)>,
}

impl Precisions {
    /// `[{precision, reason}]`, for the JSON: a skipped precision is said there too.
    pub fn skipped_json(&self) -> serde_json::Value {
        self.skipped
            .iter()
            .map(|(p, why)| serde_json::json!({ "precision": p.to_string(), "reason": why }))
            .collect()
    }
}

/// The `--precisions` asked for that `spec` computes in; each other one is skipped with a note
/// on stderr (stdout may be JSON) and in the result, and none at all is an error.
pub(super) fn device_precisions(spec: DeviceSpec, names: &[String]) -> anyhow::Result<Precisions> {
    precisions_where(names, |p| {
        tradetune_engine::device::check_precision(spec, p).map_err(|e| e.to_string())
    })
}

fn precisions_where(
    names: &[String],
    check: impl Fn(Precision) -> Result<(), String>,
) -> anyhow::Result<Precisions> {
    let mut out = Precisions {
        kept: Vec::new(),
        skipped: Vec::new(),
    };
    for p in names {
        let p: Precision = p
            .trim()
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--precisions: {e}"))?;
        match check(p) {
            Ok(()) => out.kept.push(p),
            Err(e) => {
                errln!("skipping {p}: {e}");
                out.skipped.push((p, e));
            }
        }
    }
    anyhow::ensure!(
        !out.kept.is_empty(),
        "--precisions: no precision this device supports was asked for"
    );
    Ok(out)
}

pub(super) fn bench_gpu(args: GpuArgs) -> anyhow::Result<()> {
    use tradetune_engine::device::describe_spec;
    use tradetune_engine::env::ResolvedPlacement;
    use tradetune_engine::ppo::bench::{matmul_probe, matmul_probe_products};
    use tradetune_engine::telemetry::{
        DRM_ROOT, GpuDiscovery, Sampler, SamplerConfig, SamplerCore, source,
    };
    anyhow::ensure!(args.updates != Some(0), "--updates must be at least 1");
    let deadline = Deadline::after(args.deadline);
    let probe_sizes = super::probe_sizes(&args.probe_sizes)?;
    let spec: DeviceSpec = args.device.parse()?;
    let device = open(spec)?;
    let configs = TrainBenchConfig::all_named(&args.configs)
        .map_err(|e| anyhow::anyhow!("--configs: {e}"))?;
    let placements = args
        .placements
        .iter()
        .map(|p| match p.trim() {
            "host" => Ok(ResolvedPlacement::Host),
            "device" => Ok(ResolvedPlacement::Device),
            other => Err(anyhow::anyhow!(
                "--placements: unknown placement '{other}' (valid: host, device)"
            )),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let ways = |flag: &str, values: &[String]| {
        values
            .iter()
            .map(|p| match p.trim() {
                "direct" => Ok(false),
                "replay" => Ok(true),
                other => Err(anyhow::anyhow!(
                    "--{flag}: unknown way '{other}' (valid: direct, replay)"
                )),
            })
            .collect::<anyhow::Result<Vec<_>>>()
    };
    let policy_steps = ways("policy-steps", &args.policy_steps)?;
    let minibatches = ways("minibatches", &args.minibatches)?;
    // Each placement, each way of running the policy step, each way of running the minibatches.
    let mut runs: Vec<(ResolvedPlacement, bool, bool)> = Vec::new();
    for &p in &placements {
        for &r in &policy_steps {
            runs.extend(minibatches.iter().map(|&m| (p, r, m)));
        }
    }
    let asked = device_precisions(spec, &args.precisions)?;
    let precisions = asked.kept.clone();
    // The peer's scripts, written out before anything is measured (a failure is told first).
    let scripts = match &args.peer {
        Some(_) => Some(peer_scripts()?),
        None => None,
    };
    // The GPUs' own view while each run trains: NVML or amdgpu sysfs, every 0.1 s.
    let discovery = GpuDiscovery::discover(std::path::Path::new(DRM_ROOT), std::process::id());
    // Without it the rows' busy % and memory say only that no probe answered: the reason (no
    // NVML library found, say) is what a card's owner can act on.
    let no_gpu = discovery.no_gpu_reason();
    let sources = source::sources(discovery, None);
    let sampler = Sampler::start(SamplerCore::new(
        SamplerConfig::with_interval(Duration::from_millis(100))?,
        sources,
        None,
    )?)?;
    let handle = sampler.handle();
    let cache = tradetune_engine::device::kernels::cache_setting();
    if !args.json {
        outln!("device: {spec} ({})", describe_spec(spec));
        match cache {
            Some(c) => outln!(
                "autotune cache: {} (environment {})",
                c.root
                    .as_ref()
                    .map_or("off".into(), |r| r.display().to_string()),
                c.environment
            ),
            None => outln!("autotune cache: none (the CPU compiles nothing)"),
        }
        if let Some(line) = tradetune_engine::device::kernels::store_warning_once() {
            outln!("{line}");
        }
        if cache.is_some() {
            match tradetune_engine::device::kernels::driver_shader_cache_off() {
                Some(var) => outln!(
                    "driver shader cache: off ({var}): every process compiles every pipeline again"
                ),
                None => outln!(
                    "driver shader cache: the driver's default (a second process reuses its compiled pipelines where the driver keeps them)"
                ),
            }
        }
        if let Some(why) = no_gpu.as_deref().filter(|_| spec != DeviceSpec::Cpu) {
            outln!("GPU telemetry: {why}: the rows' busy % and memory are not sampled");
        }
        if cfg!(debug_assertions) {
            errln!(
                "note: this is a debug build; measure with `cargo run --release -p tradetune -- bench gpu`"
            );
        }
    }
    if !args.json {
        header();
    }
    let mut results = Vec::new();
    let mut peers = Vec::new();
    let mut peer_failures = 0;
    let mut run_failures = 0;
    // Each configuration's update in each precision against the CPU's.
    let mut agreements = Vec::new();
    let mut agreement_lines = Vec::new();
    let mut disagreements = 0;
    // The runs past --deadline, by label.
    let mut skipped: Vec<String> = Vec::new();
    let mut copies_seen = false;
    let mut kernel_lines = Vec::new();
    let mut replay_lines = Vec::new();
    let mut replayed_lines = Vec::new();
    let mut minibatch_lines = Vec::new();
    let mut eval_lines = Vec::new();
    // Each run's configuration and steady samples/s, for the replays' gains.
    let mut steady = Vec::new();
    // Each run is a "trial" of the sampler's, for its running totals.
    let mut run_id = 0;
    for cfg in &configs {
        // The peer first, its figures on stderr as each ends: a run stopped at its limit (a
        // borrowed card's minutes) keeps the comparison, which our rows could outlast.
        let mut peer_runs: Vec<(String, Result<PeerRun, String>)> = Vec::new();
        if let (Some(peer), Some(dir)) = (&args.peer, &scripts) {
            let script = dir.path().join("cleanrl_ppo.py");
            let mut c = cfg.clone();
            if let Some(u) = args.updates {
                c.updates = u;
            }
            let threads = tradetune_engine::ppo::bench::rayon_threads();
            for precision in ["tf32", "bf16"] {
                if deadline.passed() {
                    skipped.push(format!("{} peer {precision}", c.name));
                    continue;
                }
                let run = run_peer(
                    peer,
                    &script,
                    &c,
                    threads,
                    &["--device", &args.peer_device, "--precision", precision],
                    deadline.left(),
                );
                match &run {
                    Ok(run) => errln!(
                        "peer {} {precision}: {:.0} samples/s steady, cold update {} s ({} on {})",
                        c.name,
                        run.samples_per_second(),
                        opt(run.cold_update_seconds, 1),
                        run.name(),
                        run.device.as_deref().unwrap_or("?"),
                    ),
                    // A broken peer costs its own rows, not the runs after it (a card may be
                    // borrowed for minutes): said where its row would be, the whole error on
                    // stderr, and the command fails at its end.
                    Err(e) => errln!("{}", crate::out::error_text(e)),
                }
                peer_runs.push((
                    precision.to_owned(),
                    run.map_err(|e| crate::out::error_text(&e)),
                ));
            }
        }
        let mut best: Option<f64> = None;
        for &precision in &precisions {
            for &(placement, replay_policy, replay_update) in &runs {
                let mut c = cfg.clone();
                c.precision = precision;
                c.placement = placement;
                c.replay_policy = replay_policy;
                c.replay_update = replay_update;
                if let Some(u) = args.updates {
                    c.updates = u;
                }
                if deadline.passed() {
                    skipped.push(run_label(&c));
                    continue;
                }
                // The run's whole-run figures are its totals, taken as the sampler ticks.
                run_id += 1;
                handle.begin_trial(run_id, None);
                let r = crate::cli::while_running(run_label(&c), || {
                    caught(|| tradetune_engine::ppo::bench::run(&c, &device))
                });
                handle.end_trial(run_id);
                // A run that fails (a driver's error, a device lost, a panic) costs its own
                // row, not the runs after it (a card may be borrowed for minutes): said where
                // its row would be, the whole error on stderr, and the command fails at its end.
                let r = match r {
                    Ok(r) => r,
                    Err(why) => {
                        errln!("{}: {why}", run_label(&c));
                        if !args.json {
                            outln!("{}", failed_row(&c, &why));
                        }
                        results.push(serde_json::json!({
                            "config": c.name,
                            "run": run_label(&c),
                            "error": why,
                        }));
                        run_failures += 1;
                        continue;
                    }
                };
                let totals = handle.take_trial_totals(run_id).unwrap_or_default();
                let seen = gpu_seen(&handle, &totals, r.steady_window_s);
                best =
                    Some(best.map_or(r.samples_per_second, |b: f64| b.max(r.samples_per_second)));
                if !args.json {
                    row(&c, &r, &seen);
                }
                let before = [
                    kernel_lines.len(),
                    replayed_lines.len(),
                    minibatch_lines.len(),
                    replay_lines.len(),
                    eval_lines.len(),
                ];
                if let Some(k) = r.dispatch_profile.and_then(|p| p.kernel_time) {
                    kernel_lines.push(kernel_line(&c, &k));
                }
                if let Some(why) = &r.replay_fallback {
                    replayed_lines.push(format!(
                        "  {}: not replayed, each step ran directly (the capture recorded no \
                         launches: {why})",
                        run_label(&c)
                    ));
                } else if let Some(p) = r.dispatch_profile.filter(|_| c.replay_policy) {
                    replayed_lines.push(replayed_line(&c, &p));
                }
                if let Some(why) = &r.update_replay_fallback {
                    minibatch_lines.push(format!("  {}: {why}", run_label(&c)));
                } else if let Some(p) = r.dispatch_profile.filter(|_| c.replay_update) {
                    minibatch_lines.push(minibatch_line(&c, &p));
                }
                if let Some(p) = &r.policy_replay {
                    replay_lines.push(replay_line(&c, p));
                }
                if let Some(e) = &r.policy_replay_error {
                    replay_lines.push(format!("  {}: the replay probe failed: {e}", run_label(&c)));
                }
                if let Some(e) = &r.evaluation {
                    eval_lines.push(eval_line(&c, e));
                }
                if let Some(e) = &r.evaluation_error {
                    eval_lines.push(format!("  {}: the evaluation failed: {e}", run_label(&c)));
                }
                // The run's lines under the table, on stderr as it ends too: a bench stopped
                // at its limit (a borrowed card's minutes) keeps them.
                for (lines, from) in [
                    &kernel_lines,
                    &replayed_lines,
                    &minibatch_lines,
                    &replay_lines,
                    &eval_lines,
                ]
                .into_iter()
                .zip(before)
                {
                    for line in &lines[from..] {
                        errln!("{line}");
                    }
                }
                copies_seen |= r.layout_copies_per_policy_step.unwrap_or(0.0) > 0.0
                    || r.layout_copies_per_minibatch.unwrap_or(0.0) > 0.0;
                steady.push((c.clone(), r.samples_per_second));
                results.push(serde_json::json!({ "result": r, "gpus": seen }));
            }
        }
        // Each precision's update held against the CPU's, after the runs (whose cold update is
        // what a new configuration compiles): a card runs kernels no test ran (plane
        // reductions, other matmul routines), and a fast wrong run reads as a fast right one.
        for &precision in &precisions {
            let mut c = cfg.clone();
            c.precision = precision;
            if deadline.passed() {
                skipped.push(format!("{} {precision} agreement", c.name));
                continue;
            }
            let checked =
                crate::cli::while_running(format!("{} {precision}: agreement", c.name), || {
                    caught(|| tradetune_engine::ppo::bench::agreement(&c, &device))
                });
            let line = match &checked {
                Ok(a) => {
                    disagreements += usize::from(!a.agrees());
                    let skips = if a.skipped_steps > 0 {
                        format!(
                            ", {} f16 steps skipped for an overflow (the CPU's were not)",
                            a.skipped_steps
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        "  {} {precision}: diagnostics {:.1e}, parameters' moves {:.1e} \
                         (tolerance {:.0e}; {} samples of {} observations, minibatch {}{skips}): {}",
                        c.name,
                        a.diagnostics,
                        a.moves,
                        a.tolerance,
                        a.samples,
                        a.obs_dim,
                        a.batch_size,
                        if a.agrees() {
                            "agrees"
                        } else {
                            "DISAGREES: this device's figures are not to be trusted"
                        }
                    )
                }
                Err(why) => {
                    disagreements += 1;
                    format!("  {} {precision}: could not be checked: {why}", c.name)
                }
            };
            errln!("{line}");
            agreement_lines.push(line);
            agreements.push(match checked {
                Ok(a) => serde_json::json!({
                    "config": c.name,
                    "precision": precision.to_string(),
                    "agreement": a,
                }),
                Err(why) => serde_json::json!({
                    "config": c.name,
                    "precision": precision.to_string(),
                    "error": why,
                }),
            });
        }
        // The peer's rows, under ours: the ratio needs our best.
        for (precision, run) in peer_runs {
            match run {
                Ok(run) => {
                    if !args.json {
                        peer_row(cfg, &precision, &run, best);
                    }
                    peers.push(serde_json::json!({
                        "config": cfg.name,
                        "precision": precision,
                        "run": run,
                        "ours_best_over_peer": best.map(|b| b / run.samples_per_second()),
                    }));
                }
                Err(e) => {
                    if !args.json {
                        outln!(
                            "{:<10} {:>4} peer failed: {} (its error is on stderr)",
                            cfg.name,
                            precision,
                            e.lines().next().unwrap_or_default()
                        );
                    }
                    peers.push(serde_json::json!({
                        "config": cfg.name,
                        "precision": precision,
                        "error": e,
                    }));
                    peer_failures += 1;
                }
            }
        }
    }
    drop(sampler);
    // The matmul probe: square sizes, and each configuration's own update products in their
    // layouts (on a GPU: burn's autotuned matmul, products queued back to back). It runs after
    // the runs: run first, it autotuned the update's own f32 products, and the first row's cold
    // update, compile seconds and autotune count left out what a new configuration pays.
    // A probe that fails costs its own line, not the runs measured above it: said where its
    // line would be (and in the JSON), and the command fails at its end.
    let probed = (|| -> anyhow::Result<(serde_json::Value, Vec<serde_json::Value>)> {
        let probe = matmul_probe(&device, probe_sizes)?;
        let mut shape_rates = Vec::new();
        for c in &configs {
            let cases = c.update_matmuls();
            let rates: Vec<serde_json::Value> = matmul_probe_products(&device, &cases)?
                .into_iter()
                .zip(&cases)
                .map(|(g, c)| serde_json::json!({ "product": c, "gflops": g }))
                .collect();
            if !args.json {
                let square: Vec<String> = probe
                    .sizes
                    .iter()
                    .map(|(n, g)| format!("{n}²: {g:.0}"))
                    .collect();
                let own: Vec<String> = rates
                    .iter()
                    .zip(&cases)
                    .map(|(r, c)| {
                        let g = r["gflops"].as_f64().unwrap_or(0.0);
                        let digits = if g < 10.0 { 1 } else { 0 };
                        format!("{}: {g:.digits$}", c.label())
                    })
                    .collect();
                outln!(
                    "matmul probe, f32 GFLOP/s: square {}; {}'s update products {} (`tradetune bench \
                     matmul` measures every routine on them)",
                    square.join(", "),
                    c.name,
                    own.join(", ")
                );
            }
            shape_rates.push(serde_json::json!({ "config": c.name, "shapes": rates }));
        }
        Ok((serde_json::to_value(&probe)?, shape_rates))
    })();
    let (probe_json, probe_failure) = match probed {
        Ok((square, shapes)) => (
            serde_json::json!({ "square": square, "update_shapes": shapes }),
            None,
        ),
        Err(e) => {
            let e = crate::out::error_text(&e);
            if !args.json {
                outln!("matmul probe failed: {e}");
            }
            (serde_json::json!({ "error": e }), Some(e))
        }
    };
    if !kernel_lines.is_empty() && !args.json {
        outln!("{KERNEL_NOTE}");
        outln!("the device's ms per update, by part (each kernel timed):");
        for line in &kernel_lines {
            outln!("{line}");
        }
    }
    if !agreement_lines.is_empty() && !args.json {
        outln!("{AGREEMENT_NOTE}");
        for line in &agreement_lines {
            outln!("{line}");
        }
    }
    if !replayed_lines.is_empty() && !args.json {
        outln!("{REPLAYED_NOTE}");
        for line in &replayed_lines {
            outln!("{line}");
        }
    }
    if !minibatch_lines.is_empty() && !args.json {
        outln!("{MINIBATCHES_NOTE}");
        for line in &minibatch_lines {
            outln!("{line}");
        }
    }
    if !replay_lines.is_empty() && !args.json {
        outln!("{REPLAY_NOTE}");
        for line in &replay_lines {
            outln!("{line}");
        }
    }
    if !eval_lines.is_empty() && !args.json {
        outln!("{EVAL_NOTE}");
        for line in &eval_lines {
            outln!("{line}");
        }
    }
    let gains = replay_gains(&steady);
    if !gains.is_empty() && !args.json {
        outln!("{GAINS_NOTE}");
        for g in &gains {
            outln!("{}", g.line());
        }
    }
    if copies_seen && !args.json {
        outln!("{COPIES_NOTE}");
    }
    if args.json {
        let out = serde_json::json!({
            "device": spec.to_string(),
            "adapter": describe_spec(spec),
            "compiler": tradetune_engine::device::wgpu_adapter(spec)
                .ok()
                .map(|a| tradetune_engine::device::adapters::Compiler::of(&a)),
            "autotune_cache": cache,
            "driver_shader_cache_off": tradetune_engine::device::kernels::driver_shader_cache_off(),
            "probe": probe_json,
            "runs": results,
            "agreement": agreements,
            "replay_gains": gains,
            "peer": peers,
            "skipped_precisions": asked.skipped_json(),
            "past_deadline": skipped,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
    }
    if !skipped.is_empty() {
        errln!(
            "--deadline {} s: not run, the time being spent: {}",
            args.deadline.unwrap_or_default(),
            skipped.join(", ")
        );
    }
    if let Some(e) = probe_failure {
        anyhow::bail!("the matmul probe failed ({e}); every run above was measured");
    }
    anyhow::ensure!(
        disagreements == 0,
        "{disagreements} of the updates held against the CPU's disagree or could not be checked \
         (above): this device's figures are not to be trusted"
    );
    anyhow::ensure!(
        run_failures == 0,
        "{run_failures} of the runs failed (their errors are above); every other figure was \
         measured"
    );
    anyhow::ensure!(
        peer_failures == 0,
        "--peer: {peer_failures} of the PyTorch peer's runs failed (their errors are above); \
         every other figure was measured"
    );
    Ok(())
}

/// When the runs must have started by (`--deadline`), from the command's start.
struct Deadline(Option<std::time::Instant>);

impl Deadline {
    fn after(seconds: Option<f64>) -> Self {
        Self(seconds.map(|s| std::time::Instant::now() + Duration::from_secs_f64(s)))
    }

    /// The time left (None: no deadline; zero once it has passed).
    fn left(&self) -> Option<Duration> {
        self.0
            .map(|at| at.saturating_duration_since(std::time::Instant::now()))
    }

    fn passed(&self) -> bool {
        self.left().is_some_and(|l| l.is_zero())
    }
}

/// `run`'s result, or why it failed: its error, or the message of a panic inside it (a
/// driver's validation error panics in wgpu's default handler).
fn caught<T, E: std::fmt::Display>(run: impl FnOnce() -> Result<T, E>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(e.to_string()),
        Err(panic) => Err(format!(
            "panicked: {} (the device may be left unusable: a run after this one may fail for \
             it)",
            tradetune_engine::study::runner::panic_message(&panic)
        )),
    }
}

/// A run that failed, as a table row: its configuration's columns, then the error's first line.
fn failed_row(c: &TrainBenchConfig, why: &str) -> String {
    format!(
        "{} | failed: {} (the whole error is on stderr)",
        config_columns(
            c,
            &c.precision.to_string(),
            c.placement.name(),
            &pol_column(c)
        ),
        why.lines().next().unwrap_or_default()
    )
}

/// A row's first columns, under the header's `config envs steps batch net prec env pol`: the
/// configuration's shape with the run's precision, env placement and policy-step column.
fn config_columns(c: &TrainBenchConfig, precision: &str, env: &str, pol: &str) -> String {
    format!(
        "{:<10} {:>4} {:>5} {:>5} {:<18} {:>4} {:<6} {:<9}",
        c.name,
        c.n_envs,
        c.n_steps,
        c.batch_size,
        format!("{:?}", c.net),
        precision,
        env,
        pol,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that fails, by its error or by a panic (wgpu's default handler panics on a
    /// driver's validation error), is a failure to report, not the end of the command; its row
    /// has the configuration's columns and the error's first line.
    #[test]
    fn a_failed_run_is_caught_and_given_a_row() {
        assert_eq!(caught(|| Ok::<_, String>(3)), Ok(3));
        assert_eq!(
            caught(|| Err::<(), _>("out of memory\nmore".to_owned())),
            Err("out of memory\nmore".to_owned())
        );
        let panicked = caught(|| -> Result<(), String> { panic!("Validation Error: lost") });
        assert!(
            panicked
                .as_ref()
                .is_err_and(|e| e.starts_with("panicked: Validation Error: lost (")),
            "{panicked:?}"
        );
        let c = TrainBenchConfig::tiny();
        let row = failed_row(&c, "out of memory\nmore");
        assert!(row.starts_with("tiny "), "{row}");
        assert!(
            row.ends_with("| failed: out of memory (the whole error is on stderr)"),
            "{row}"
        );
    }

    #[test]
    fn a_deadline_leaves_time_until_it_passes() {
        assert_eq!(Deadline::after(None).left(), None);
        assert!(!Deadline::after(None).passed());
        assert!(Deadline::after(Some(0.0)).passed());
        let later = Deadline::after(Some(3600.0));
        assert!(!later.passed());
        assert!(later.left().is_some_and(|l| l > Duration::from_secs(3000)));
    }
    use tradetune_engine::device::kernel_timing::KernelTime;
    use tradetune_engine::telemetry::{
        GpuInfo, GpuProbe, GpuSample, GpuSource, GpuVendor, SamplerConfig, SamplerCore, Source,
    };

    /// A card busy 0 % for its first 20 samples and 100 % after, its memory used 2 GiB at
    /// the 5th sample and 1 GiB otherwise.
    struct Scripted {
        info: Vec<GpuInfo>,
        n: u32,
    }

    impl GpuProbe for Scripted {
        fn devices(&self) -> &[GpuInfo] {
            &self.info
        }
        fn split(self: Box<Self>) -> Vec<Box<dyn GpuProbe>> {
            vec![self]
        }
        fn sample(&mut self) -> Vec<GpuSample> {
            self.n += 1;
            vec![GpuSample {
                util_pct: Some(if self.n > 20 { 100.0 } else { 0.0 }),
                mem_used_bytes: Some(if self.n == 5 { 2 << 30 } else { 1 << 30 }),
                ..Default::default()
            }]
        }
    }

    /// A run's whole-run utilisation and peak memory cover the whole run, where the live
    /// rings keep only their last points (10 here, over a run of 30 ticks; 3600 in `bench
    /// gpu`: 6 minutes at its 0.1 s, less than a cold update and the probes can take).
    #[test]
    fn a_runs_whole_run_figures_cover_it_past_the_live_rings() {
        let config = SamplerConfig {
            ring_capacity: 10,
            ..SamplerConfig::with_interval(Duration::from_millis(100)).expect("an interval")
        };
        let card = Scripted {
            info: vec![GpuInfo {
                vendor: GpuVendor::Nvidia,
                name: "scripted".into(),
                pci_bus_id: None,
                uuid: None,
                mem_total_bytes: None,
                driver: None,
            }],
            n: 0,
        };
        let sources: Vec<Box<dyn Source>> =
            vec![Box::new(GpuSource::new("scripted", Box::new(card), 0))];
        let mut core = SamplerCore::new(config, sources, None).expect("a sampler");
        let handle = core.handle();
        handle.begin_trial(1, None);
        let t0 = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a time");
        for i in 0..30 {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            core.tick(t0 + chrono::Duration::seconds(i), deadline);
        }
        handle.end_trial(1);
        let totals = handle.take_trial_totals(1).expect("the run's totals");
        let at = |i: i64| (t0.timestamp() + i) as f64;
        let seen = gpu_seen(&handle, &totals, (at(25), at(29)));
        assert_eq!(seen.len(), 1, "{seen:?}");
        let run = seen[0].util_pct_mean_run.expect("a whole-run mean");
        assert!((run - 100.0 / 3.0).abs() < 1e-9, "{run}");
        assert_eq!(seen[0].util_pct_mean, Some(100.0));
        assert_eq!(seen[0].mem_used_mib_max, Some(2048.0));
    }

    /// A precision the device lacks is kept in the result with its reason, for the JSON
    /// (where the note on stderr was left out before).
    #[test]
    fn a_skipped_precision_is_in_the_json_with_its_reason() {
        let asked = precisions_where(&["f32".into(), "f16".into()], |p| match p {
            Precision::F16 => Err("no shader-f16 on this adapter".into()),
            _ => Ok(()),
        })
        .expect("f32 is kept");
        assert_eq!(asked.kept, [Precision::F32]);
        assert_eq!(
            asked.skipped_json(),
            serde_json::json!([{ "precision": "f16", "reason": "no shader-f16 on this adapter" }])
        );
        let none = precisions_where(&["f16".into()], |_| Err("no".into()))
            .expect_err("nothing left")
            .to_string();
        assert!(none.contains("--precisions"), "{none}");
    }

    #[test]
    fn a_kernel_line_gives_each_parts_device_time_and_says_which_clock() {
        let part = |kernels, ms: f64, device_clock| KernelTime {
            kernels,
            unmeasured: 0,
            sum_s: ms / 1e3,
            device_clock,
        };
        let mut k = KernelTimeProfile {
            env_step: part(32, 2.4, true),
            inference: part(229, 33.6, true),
            buffer: part(32, 2.6, true),
            advantages: part(35, 2.2, true),
            update: part(94, 23.3, true),
            busy_s: 0.064,
        };
        let c = TrainBenchConfig::tiny();
        let line = kernel_line(&c, &k);
        assert_eq!(
            line,
            format!(
                "  tiny {} {}: env 2.4, inference 33.6, buffer 2.6, gae 2.2, update 23.3; busy \
                 64.0 ms with 422 kernels (device clock)",
                c.precision,
                c.placement.name()
            )
        );
        k.update = part(94, 23.3, false);
        k.update.unmeasured = 2;
        let line = kernel_line(&c, &k);
        assert!(
            line.ends_with("(host clock around each kernel: an upper bound, 2 unmeasured)"),
            "{line}"
        );
    }

    #[test]
    fn a_replay_line_gives_a_step_and_a_rollout_each_way_and_what_a_launch_saves() {
        let mut p = ReplayProbe {
            steps: 122,
            launches_per_step: 8.0,
            direct_us_per_step: 1868.0,
            replay_us_per_step: 726.0,
            capture_ms: 9.2,
            hardware: true,
            max_abs_diff: 0.0,
        };
        let c = TrainBenchConfig::tiny();
        assert_eq!(
            replay_line(&c, &p),
            format!(
                "  tiny {} {}: 8.0 launches a step, 1868 µs direct, 726 µs replayed (142.8 µs a \
                 launch saved; a rollout's 32 policy steps 59.8 ms direct, 23.2 ms replayed; \
                 capture 9 ms; 122 steps each way; the same outputs)",
                c.precision,
                c.placement.name()
            )
        );
        p.max_abs_diff = 7.45e-9;
        assert!(
            replay_line(&c, &p).ends_with("; outputs differ by up to 7.45e-9)"),
            "{}",
            replay_line(&c, &p)
        );
        p.hardware = false;
        assert!(
            replay_line(&c, &p)
                .ends_with("; this backend has no graphs, so a replay ran the step again)"),
            "{}",
            replay_line(&c, &p)
        );
    }
}
