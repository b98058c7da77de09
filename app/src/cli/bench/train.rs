//! `tradetune bench train`: training throughput after a warm-up update on the chosen configurations, and
//! with `--peer PYTHON` Stable-Baselines3 (or a CleanRL-style PPO) on the Python port of the
//! env in the same run, interleaved, with the update's GFLOP/s against a matmul probe.

use tradetune_engine::device::precision::Precision;
use tradetune_engine::device::{DeviceSpec, open};
use tradetune_engine::ppo::bench::{MatmulProbe, TrainBenchConfig, TrainBenchResult};

use super::*;

/// Issue 18: targets on the CPU device against Stable-Baselines3 measured live (`--peer`), as
/// multiples of its samples/s.
fn target_ratio(name: &str) -> Option<f64> {
    match name {
        "small" => Some(10.0),
        "tiny_rollout" => Some(5.0),
        _ => None,
    }
}

/// The target for the JSON: as in the table, only on the CPU device (the targets are set
/// there) and only beside a measured ratio.
fn json_target_ratio(spec: DeviceSpec, ratio: Option<f64>, name: &str) -> Option<f64> {
    ratio
        .and(target_ratio(name))
        .filter(|_| spec == DeviceSpec::Cpu)
}

/// The peer scripts, built into the binary so `--peer` needs no checkout: written to a
/// temporary folder for the run.
const PEER_SCRIPT: &str = include_str!("../../../../benches/peers/sb3_ppo.py");
const PEER_ENV: &str = include_str!("../../../../benches/peers/tradetune_env.py");
/// The CleanRL-style peer, which `bench gpu --peer` runs on torch's GPU.
const PEER_CLEANRL: &str = include_str!("../../../../benches/peers/cleanrl_ppo.py");

/// The built-in peer scripts written to a temporary folder (`sb3_ppo.py`, `cleanrl_ppo.py`
/// and the env port they import).
pub(super) fn peer_scripts() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("tradetune-peer")
        .tempdir()
        .map_err(|e| anyhow::anyhow!("--peer: cannot create a temporary folder: {e}"))?;
    crate::leave::remove_on_leave(dir.path());
    for (name, text) in [
        ("sb3_ppo.py", PEER_SCRIPT),
        ("cleanrl_ppo.py", PEER_CLEANRL),
        ("tradetune_env.py", PEER_ENV),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("--peer: cannot write {}: {e}", path.display()))?;
    }
    Ok(dir)
}

/// What one run of the peer printed (its last line of output, JSON).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct PeerRun {
    /// The peer's name (`stable-baselines3`).
    peer: String,
    /// Versions of what it ran on (stable_baselines3, torch, …).
    #[serde(default)]
    versions: serde_json::Map<String, serde_json::Value>,
    /// Threads it computed with (torch's).
    threads: usize,
    samples: usize,
    seconds: f64,
    samples_per_second: f64,
    /// The part of `seconds` spent stepping the env, where the peer measures it.
    #[serde(default)]
    env_seconds: Option<f64>,
    /// The device it trained on and in what precision, where it says (the GPU peer).
    #[serde(default)]
    pub(super) device: Option<String>,
    #[serde(default)]
    pub(super) precision: Option<String>,
    /// Its first (cold) update's seconds, where it says.
    #[serde(default)]
    pub(super) cold_update_seconds: Option<f64>,
}

impl PeerRun {
    pub(super) fn samples_per_second(&self) -> f64 {
        self.samples_per_second
    }

    /// The share of its time its env took (the numpy env on the CPU, for the GPU peer), where
    /// it measured it.
    pub(super) fn env_share(&self) -> Option<f64> {
        self.env_seconds
            .filter(|_| self.seconds > 0.0)
            .map(|e| e / self.seconds)
    }

    /// `peer (torch 2.11.0)`.
    pub(super) fn name(&self) -> String {
        match self.versions.get("torch").and_then(|v| v.as_str()) {
            Some(t) => format!("{} (torch {t})", self.peer),
            None => self.peer.clone(),
        }
    }
}

/// min, median, max of `v` (NaN for none).
fn min_median_max(v: &[f64]) -> (f64, f64, f64) {
    tradetune_engine::front::min_median_max(v).unwrap_or((f64::NAN, f64::NAN, f64::NAN))
}

/// Runs `cmd` to its end and gathers its output, or, past `limit`, kills it and the processes
/// it started (its own process group) and answers None. Without a limit, `Command::output`.
/// In its own group a terminal's Ctrl-C does not reach it, so it is killed when this process's
/// thread that started it ends (`PR_SET_PDEATHSIG`), and what it left running once it has
/// ended is killed too, rather than held the output pipes open.
pub(super) fn output_within(
    cmd: &mut std::process::Command,
    limit: Option<std::time::Duration>,
) -> std::io::Result<Option<std::process::Output>> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let Some(limit) = limit else {
        return cmd.output().map(Some);
    };
    let until = std::time::Instant::now() + limit;
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl(2),
    // which is async-signal-safe.
    let mut child = unsafe {
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
            .spawn()?
    };
    let group = libc::pid_t::try_from(child.id()).ok();
    let kill_group = || {
        if let Some(pid) = group {
            // SAFETY: kill(2) with a process group id and a signal number; no memory is shared.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    };
    fn gather<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let (stdout, stderr) = (gather(child.stdout.take()), gather(child.stderr.take()));
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // What it started and left running would hold the pipes open.
                kill_group();
                break Some(status);
            }
            Ok(None) if std::time::Instant::now() >= until => {
                // The whole group: a Python's own children would otherwise hold the pipes open.
                kill_group();
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => {
                kill_group();
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok(status.map(|status| std::process::Output {
        status,
        stdout,
        stderr,
    }))
}

/// Runs the peer once on `cfg`: `PEER SCRIPT <cfg's arguments> --threads N`, and reads the JSON
/// line it prints last; one still running after `limit` is stopped, and that is its error.
pub(super) fn run_peer(
    peer: &std::path::Path,
    script: &std::path::Path,
    cfg: &TrainBenchConfig,
    threads: usize,
    extra: &[&str],
    limit: Option<std::time::Duration>,
) -> anyhow::Result<PeerRun> {
    use anyhow::Context;
    let out = output_within(
        std::process::Command::new(peer)
            .arg(script)
            .args(cfg.peer_args(cfg.updates))
            .args(["--threads", &threads.to_string()])
            .args(extra)
            .stdin(std::process::Stdio::null()),
        limit,
    )
    .with_context(|| format!("--peer: cannot run {}", peer.display()))?;
    let Some(out) = out else {
        anyhow::bail!(
            "--peer: {} {} on configuration {} was stopped at --deadline, still running",
            peer.display(),
            script.display(),
            cfg.name,
        );
    };
    if !out.status.success() {
        anyhow::bail!(
            "--peer: {} {} failed on configuration {} ({}):\n{}\n(set up the peer as benches/peers/README.md says)",
            peer.display(),
            script.display(),
            cfg.name,
            out.status,
            stderr_tail(&out, 15)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = last_line(&stdout).ok_or_else(|| {
        anyhow::anyhow!(
            "--peer: {} {} printed nothing on configuration {}",
            peer.display(),
            script.display(),
            cfg.name
        )
    })?;
    let run: PeerRun = serde_json::from_str(line).with_context(|| {
        format!(
            "--peer: the last line {} printed is not the peer's JSON result \
             (peer, threads, samples, seconds, samples_per_second): {line}",
            script.display()
        )
    })?;
    anyhow::ensure!(
        run.samples_per_second.is_finite() && run.samples_per_second > 0.0,
        "--peer: samples_per_second = {} in {line}: must be a positive rate",
        run.samples_per_second
    );
    Ok(run)
}

/// One configuration measured `--repeat` times, ours and the peer's interleaved.
#[derive(Debug, serde::Serialize)]
struct ConfigRuns {
    config: TrainBenchConfig,
    ours: Vec<TrainBenchResult>,
    peer: Vec<PeerRun>,
    /// Ours with every update through burn's autodiff (`--compare-burn-update`).
    burn_update: Vec<TrainBenchResult>,
}

impl ConfigRuns {
    fn ours_sps(&self) -> (f64, f64, f64) {
        let v: Vec<f64> = self.ours.iter().map(|r| r.samples_per_second).collect();
        min_median_max(&v)
    }

    fn burn_update_sps(&self) -> Option<(f64, f64, f64)> {
        let v: Vec<f64> = self
            .burn_update
            .iter()
            .map(|r| r.samples_per_second)
            .collect();
        (!v.is_empty()).then(|| min_median_max(&v))
    }

    fn peer_sps(&self) -> Option<(f64, f64, f64)> {
        let v: Vec<f64> = self.peer.iter().map(|r| r.samples_per_second).collect();
        (!v.is_empty()).then(|| min_median_max(&v))
    }

    /// Our median over the peer's median, measured in this run; None without a peer.
    fn ratio(&self) -> Option<f64> {
        self.peer_sps().map(|p| self.ours_sps().1 / p.1)
    }

    /// Our run whose samples/s is the median one (the lower middle for an even count).
    fn median_run(&self) -> &TrainBenchResult {
        let mut idx: Vec<usize> = (0..self.ours.len()).collect();
        idx.sort_by(|a, b| {
            self.ours[*a]
                .samples_per_second
                .total_cmp(&self.ours[*b].samples_per_second)
        });
        &self.ours[idx[(idx.len() - 1) / 2]]
    }
}

pub(super) fn bench_train(args: TrainArgs) -> anyhow::Result<()> {
    use tradetune_engine::ppo::bench::{matmul_probe, rayon_threads};
    // One run of ours, with a line on stderr while it goes (when the GPU compiles, saying so).
    let run_ours = |c: &TrainBenchConfig, device| {
        crate::cli::while_running(format!("{} {}", c.name, c.precision), || {
            tradetune_engine::ppo::bench::run(c, device)
        })
    };
    let precision: Precision = args
        .precision
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--precision: {e}"))?;
    let spec: DeviceSpec = args.device.parse()?;
    let device = open(spec)?;
    let configs = TrainBenchConfig::all_named(&args.configs)
        .map_err(|e| anyhow::anyhow!("--configs: {e}"))?;
    anyhow::ensure!(args.updates != Some(0), "--updates must be at least 1");
    anyhow::ensure!(args.repeat > 0, "--repeat must be at least 1");
    let probe_sizes = super::probe_sizes(&args.probe_sizes)?;
    anyhow::ensure!(
        args.peer_threads != Some(0),
        "--peer-threads must be at least 1"
    );
    let ours_threads = rayon_threads();
    let peer_threads = args.peer_threads.unwrap_or(ours_threads);
    // The peer's scripts: the user's, or the built-in ones in a temporary folder.
    let scripts_dir = match (&args.peer, &args.peer_script) {
        (Some(_), None) => Some(peer_scripts()?),
        _ => None,
    };
    let script = match (&args.peer_script, &scripts_dir) {
        (Some(s), _) => Some(s.clone()),
        (None, Some(d)) => Some(d.path().join("sb3_ppo.py")),
        (None, None) => None,
    };
    if args.peer_script.is_some() && args.peer.is_none() {
        anyhow::bail!("--peer-script needs --peer PYTHON (the program that runs it)");
    }
    let build = if cfg!(debug_assertions) {
        "debug build: dependencies at opt-level 3, TradeTune's crates at opt-level 1"
    } else {
        "release build"
    };
    let load_before = load_average();
    let probe = matmul_probe(&device, probe_sizes)?;
    if !args.json {
        if cfg!(debug_assertions) {
            errln!(
                "note: this is a debug build; measure with `cargo run --release -p tradetune -- bench train`"
            );
        }
        outln!(
            "machine: {} ({} CPUs); load average before: {}",
            cpu_model().unwrap_or_else(|| "unknown CPU".into()),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            load_before.as_deref().unwrap_or("unknown")
        );
        outln!(
            "ours: tradetune {} ({build}), device {spec}, {precision}, {ours_threads} rayon threads",
            env!("CARGO_PKG_VERSION")
        );
        let sizes: Vec<String> = probe
            .sizes
            .iter()
            .map(|(n, g)| format!("{n}: {g:.1}"))
            .collect();
        let host: Vec<String> = probe
            .host_sizes
            .iter()
            .map(|(n, g)| format!("{n}: {g:.1}"))
            .collect();
        let host = if host.is_empty() {
            String::new()
        } else {
            format!(
                "; the host update's kernels, one product per thread: {}",
                host.join(", ")
            )
        };
        outln!(
            "matmul probe (f32, n×n by n×n, GFLOP/s): burn {}{host} -> peak {:.1} GFLOP/s",
            sizes.join(", "),
            probe.peak_gflops
        );
    }
    let mut all = Vec::new();
    for mut cfg in configs {
        cfg.precision = precision;
        if let Some(u) = args.updates {
            cfg.updates = u;
        }
        let mut runs = ConfigRuns {
            config: cfg.clone(),
            ours: Vec::new(),
            peer: Vec::new(),
            burn_update: Vec::new(),
        };
        let burn_cfg = TrainBenchConfig {
            burn_update: true,
            ..cfg.clone()
        };
        for rep in 0..args.repeat {
            // Interleaved, the order alternating, so a drift of the machine's speed during the
            // run touches both sides alike.
            let peer_first = rep % 2 == 1;
            if let (true, Some(peer), Some(script)) = (peer_first, &args.peer, &script) {
                runs.peer
                    .push(run_peer(peer, script, &cfg, peer_threads, &[], None)?);
            }
            if args.compare_burn_update && peer_first {
                runs.burn_update.push(run_ours(&burn_cfg, &device)?);
            }
            runs.ours.push(run_ours(&cfg, &device)?);
            if args.compare_burn_update && !peer_first {
                runs.burn_update.push(run_ours(&burn_cfg, &device)?);
            }
            if let (false, Some(peer), Some(script)) = (peer_first, &args.peer, &script) {
                runs.peer
                    .push(run_peer(peer, script, &cfg, peer_threads, &[], None)?);
            }
        }
        if !args.json {
            print_train_runs(&runs, all.is_empty(), &probe, spec == DeviceSpec::Cpu);
        }
        all.push(runs);
    }
    let load_after = load_average();
    if !args.json {
        if let (Some(peer), Some(run)) = (&args.peer, all.iter().find_map(|r| r.peer.first())) {
            let versions: Vec<String> = run
                .versions
                .iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().map_or(v.to_string(), str::to_owned)))
                .collect();
            outln!(
                "peer: {} ({}), {} threads, run as `{} {} …`",
                run.peer,
                versions.join(", "),
                run.threads,
                peer.display(),
                script
                    .as_deref()
                    .map_or(String::new(), |s| s.display().to_string())
            );
        }
        outln!(
            "load average after: {}",
            load_after.as_deref().unwrap_or("unknown")
        );
    } else {
        let configs: Vec<_> = all
            .iter()
            .map(|r| {
                let (lo, med, hi) = r.ours_sps();
                let median = r.median_run();
                serde_json::json!({
                    "config": r.config,
                    "ours": {
                        "runs": r.ours,
                        "samples_per_second": { "min": lo, "median": med, "max": hi },
                        "update_gflops_per_second": median.update_gflops_per_second,
                        "fraction_of_matmul_peak": median.update_gflops_per_second / probe.peak_gflops.max(1e-9),
                    },
                    "burn_update": r.burn_update_sps().map(|(lo, med, hi)| serde_json::json!({
                        "runs": r.burn_update,
                        "samples_per_second": { "min": lo, "median": med, "max": hi },
                        "ours_over_burn_update": med.max(1e-9).recip() * r.ours_sps().1,
                    })),
                    "peer": r.peer_sps().map(|(lo, med, hi)| serde_json::json!({
                        "runs": r.peer,
                        "samples_per_second": { "min": lo, "median": med, "max": hi },
                    })),
                    "ratio_median": r.ratio(),
                    "target_ratio": json_target_ratio(spec, r.ratio(), r.config.name),
                })
            })
            .collect();
        let v = serde_json::json!({
            "machine": { "cpu": cpu_model(), "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()) },
            "build": build,
            "device": spec.to_string(),
            "precision": precision.to_string(),
            "repeat": args.repeat,
            "ours_threads": ours_threads,
            "peer_threads": args.peer.as_ref().map(|_| peer_threads),
            "load_average_before": load_before,
            "load_average_after": load_after,
            "matmul_probe": probe,
            "configs": configs,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(())
}

fn print_train_runs(r: &ConfigRuns, header: bool, probe: &MatmulProbe, cpu: bool) {
    if header {
        outln!(
            "{:<12} {:>4} {:>5} {:>5} {:>6} {:<18} {:>4} | {:>26} | {:>26} | {:>9}",
            "config",
            "envs",
            "steps",
            "batch",
            "epochs",
            "net",
            "prec",
            "ours samples/s min/med/max",
            "peer samples/s min/med/max",
            "ours/peer"
        );
    }
    let c = &r.config;
    let (lo, med, hi) = r.ours_sps();
    let peer = r
        .peer_sps()
        .map_or("-".to_owned(), |(l, m, h)| format!("{l:.0}/{m:.0}/{h:.0}"));
    outln!(
        "{:<12} {:>4} {:>5} {:>5} {:>6} {:<18} {:>4} | {:>26} | {:>26} | {:>9}",
        c.name,
        c.n_envs,
        c.n_steps,
        c.batch_size,
        c.n_epochs,
        format!("{:?}", c.net),
        c.precision.to_string(),
        format!("{lo:.0}/{med:.0}/{hi:.0}"),
        peer,
        r.ratio().map_or("-".into(), |x| format!("{x:.2}x")),
    );
    // Phase shares of the median run's wall time; "other" is what no phase timer covered.
    let m = r.median_run();
    let wall = m.seconds.max(1e-9);
    let p = &m.phases;
    let pct = |x: f64| 100.0 * x / wall;
    outln!(
        "{:<12} median run: env {:.1}%, inference {:.1}%, buffer {:.1}%, gae {:.1}%, update {:.1}%, other {:.1}%",
        "",
        pct(p.env_step),
        pct(p.inference),
        pct(p.buffer),
        pct(p.advantages),
        pct(p.update),
        pct((m.seconds - p.total()).max(0.0)),
    );
    outln!(
        "{:<12} update: {:.2} GFLOP/s of matmuls (forward + backward), {:.1}% of the measured matmul peak ({:.1} GFLOP/s)",
        "",
        m.update_gflops_per_second,
        100.0 * m.update_gflops_per_second / probe.peak_gflops.max(1e-9),
        probe.peak_gflops
    );
    if let Some((lo, bmed, hi)) = r.burn_update_sps() {
        let burn = r
            .burn_update
            .iter()
            .min_by(|a, b| {
                (a.samples_per_second - bmed)
                    .abs()
                    .total_cmp(&(b.samples_per_second - bmed).abs())
            })
            .map_or(f64::NAN, |b| b.update_gflops_per_second);
        outln!(
            "{:<12} burn update (every update through burn's autodiff): {lo:.0}/{bmed:.0}/{hi:.0} samples/s, update {burn:.2} GFLOP/s; ours with the host step {:.2}x that",
            "",
            med / bmed.max(1e-9),
        );
    }
    // The peer's env share, where every run of it reported one.
    let env_shares: Option<Vec<f64>> = r
        .peer
        .iter()
        .map(|p| p.env_seconds.map(|e| e / p.seconds.max(1e-9)))
        .collect();
    if let Some(env) = env_shares.filter(|e| !e.is_empty()) {
        let (lo, med, hi) = min_median_max(&env);
        outln!(
            "{:<12} peer: env {:.1}% of its time (min {:.1}%, max {:.1}%)",
            "",
            100.0 * med,
            100.0 * lo,
            100.0 * hi
        );
    }
    if let (Some(got), Some(want), true) = (r.ratio(), target_ratio(c.name), cpu) {
        outln!(
            "{:<12} target on the CPU device: {want}x the peer -> {}",
            "",
            if got >= want { "met" } else { "NOT met" }
        );
    }
}

#[cfg(test)]
mod target_tests {
    use super::*;

    /// The JSON gave a target on any device while the table gives it on the CPU alone.
    #[test]
    fn the_json_target_is_given_on_the_cpu_only() {
        assert_eq!(
            json_target_ratio(DeviceSpec::Cpu, Some(3.0), "small"),
            Some(10.0)
        );
        assert_eq!(
            json_target_ratio(DeviceSpec::Wgpu(Some(0)), Some(3.0), "small"),
            None
        );
        assert_eq!(json_target_ratio(DeviceSpec::Cpu, None, "small"), None);
    }
}
