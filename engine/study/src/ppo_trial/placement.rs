//! `env.placement = "auto"` on a GPU: the environment goes where a rollout step costs less,
//! measured, not assumed (issue 33). On a real card the device env's kernel is one thread per
//! env looping over its assets, and the host env pays a read of the actions and an upload of
//! the observations every step; which is cheaper depends on the card, its driver, the number of
//! envs and assets and the network, so the run measures both.
//!
//! A measurement is a few rollout steps on each placement after a warm-up that compiles their
//! kernels: the run's policy network (freshly initialised, in the run's compute precision)
//! reads the observations, its action means go to the env, the env's observations come back,
//! and the device is synchronised at the end. The host is chosen when its step is at least
//! [`HOST_MARGIN`] cheaper (the device env keeps the CPU free and reads nothing per step, so a
//! near-tie goes to the device).
//!
//! The decision is kept per adapter and driver (the GPU cache's environment of the card the
//! run is on, see `tradetune_device::kernels::environment_of`: trials of one process on two
//! cards keep theirs apart) and per shape of the run, in `env-placement.json`: the trials of
//! a study share one decision instead of each measuring (and possibly deciding otherwise on a
//! near-tie), and the later ones pay nothing. Deleting the file measures again; with the GPU
//! cache off (`TRADETUNE_GPU_CACHE=off`) every run measures. Trials that decide at once (in
//! one process or several) write the file one at a time, under an advisory lock on
//! `env-placement.json.lock`, each adding its decision to what is there then.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use tradetune_device::kernels::{self, KernelCounts};
use tradetune_env::{CpuVecEnv, ResolvedPlacement, TensorVecEnv};
use tradetune_market::Dataset;
use tradetune_rl::ppo::{HostEnv, PpoError, RolloutEnv, Trainer};

use super::{DataShape, PpoTrialConfig, TrainingRunError};

/// The host is chosen only where its step takes at most this share of the device's.
pub const HOST_MARGIN: f64 = 0.9;
/// The rollouts' length on each placement: the run's own `n_steps`, at most this (a replayed
/// rollout captures its policy step once, so a rollout this long pays that about as the run's
/// do).
const MAX_STEPS: usize = 64;
/// Rollouts run on each placement before timing (kernel compilation, autotune, first uploads).
const WARM_ROLLOUTS: usize = 1;
/// Rollouts timed on each placement.
const TIMED_ROLLOUTS: usize = 1;
/// The decisions' file in the GPU cache's environment directory.
const FILE: &str = "env-placement.json";

/// Where `auto` put a run's environment, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoPlacement {
    pub placement: ResolvedPlacement,
    /// Milliseconds per rollout step (the trainer's: policy step, env step, the buffer's rows)
    /// with the env on the device and on the host.
    pub device_ms: f64,
    pub host_ms: f64,
    /// Whether the rollouts measured replayed their policy step (`TRADETUNE_REPLAY_POLICY`), as
    /// the run's do: a replayed step costs the host less, and more so with the env on the
    /// device, so the two are decided apart.
    #[serde(default)]
    pub replayed: bool,
    /// When the measurement was taken (RFC 3339).
    pub measured_at: String,
    /// Seconds the measurement took, its kernels' compilation included (the first run of a
    /// shape on a GPU compiles both placements' kernels here, before the run trains).
    #[serde(default)]
    pub measure_s: f64,
    /// What the process compiled and autotuned while measuring (its counters: where trials run
    /// at once, theirs too).
    #[serde(default)]
    pub measure_kernels: KernelCounts,
    /// Whether this run took an earlier run's decision from the cache.
    #[serde(skip)]
    pub cached: bool,
    /// Whether the decision is kept for later runs of the shape (taken from the cache, or
    /// written to it): not where TradeTune's GPU cache is off or could not be written.
    #[serde(skip)]
    pub kept: bool,
}

impl AutoPlacement {
    /// What measuring cost this run before it trained: seconds and kernels, where it measured
    /// (none where it took an earlier run's decision).
    pub fn overhead(&self) -> Option<(f64, KernelCounts)> {
        (!self.cached).then_some((self.measure_s, self.measure_kernels))
    }

    /// `auto: host, 0.41 ms a step against 0.93 on the device (measured in 12 s)`; `…
    /// (measured in 12 s, the policy step replayed)` where the rollouts replay it; `… (as
    /// measured 2026-11-29T…)` where an earlier run's decision was taken.
    pub fn describe(&self) -> String {
        let (chosen, other, other_name) = match self.placement {
            ResolvedPlacement::Host => (self.host_ms, self.device_ms, "device"),
            ResolvedPlacement::Device => (self.device_ms, self.host_ms, "host"),
        };
        format!(
            "auto: {}, {chosen:.2} ms a step against {other:.2} on the {other_name} ({}{})",
            self.placement.name(),
            if self.cached {
                format!("as measured {}", self.measured_at)
            } else {
                let digits = if self.measure_s >= 10.0 { 0 } else { 1 };
                format!("measured in {:.digits$} s", self.measure_s)
            },
            if self.replayed {
                ", the policy step replayed"
            } else {
                ""
            }
        )
    }
}

/// The placement of a step costing `device_ms` with the env on the device and `host_ms` with
/// it on the host.
pub fn choose(device_ms: f64, host_ms: f64) -> ResolvedPlacement {
    if host_ms < HOST_MARGIN * device_ms {
        ResolvedPlacement::Host
    } else {
        ResolvedPlacement::Device
    }
}

/// `auto`'s placement of `cfg`'s environment over `bars` of `data` on the GPU `device`: the
/// cached decision for this adapter and shape, else a measurement (then cached).
pub fn auto(
    cfg: &PpoTrialConfig,
    data: &Arc<Dataset>,
    bars: Range<usize>,
    device: &Device,
) -> Result<AutoPlacement, TrainingRunError> {
    let root = tradetune_device::kernels::cache_setting().and_then(|s| s.root.as_deref());
    let file = decisions_file(root, tradetune_device::wgpu_adapter_of(device).as_ref());
    let replay = tradetune_rl::ppo::replay_policy_from_env();
    auto_with(cfg, data, bars, device, file.as_deref(), replay)
}

/// The decisions' file of the card `adapter` (the device the run is on) in the GPU cache
/// `root`: in that card's environment, not the one of the process's first card. `None` (measured
/// every time) where the cache is off or the device's adapter is not known.
fn decisions_file(
    root: Option<&Path>,
    adapter: Option<&tradetune_device::adapters::Adapter>,
) -> Option<PathBuf> {
    Some(root?.join(kernels::environment_of(adapter?)).join(FILE))
}

/// [`auto`] with the decisions kept in `file` (`None`: measured every time), for rollouts that
/// replay their policy step or not (`replay`).
pub fn auto_with(
    cfg: &PpoTrialConfig,
    data: &Arc<Dataset>,
    bars: Range<usize>,
    device: &Device,
    file: Option<&Path>,
    replay: bool,
) -> Result<AutoPlacement, TrainingRunError> {
    let key = shape_key(cfg, data, replay);
    if let Some(mut known) = file.and_then(|f| read(f).remove(&key)) {
        known.cached = true;
        known.kept = true;
        return Ok(known);
    }
    let mut measured = measure(cfg, data, bars, device, replay)?;
    if let Some(f) = file {
        // A decision that cannot be kept is measured again next time; the run goes on.
        match keep(f, key, &measured) {
            Ok(()) => measured.kept = true,
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "env placement: not kept in {}: {e}",
                    f.display()
                );
            }
        }
    }
    Ok(measured)
}

/// What a step's cost depends on: envs, assets, observation, network and precision, and
/// whether the policy step is replayed.
fn shape_key(cfg: &PpoTrialConfig, data: &Dataset, replay: bool) -> String {
    let shape = DataShape::of(data);
    let (m, f) = (shape.n_assets, shape.n_features);
    let arch = &cfg.ppo.policy.net_arch;
    format!(
        "envs {} assets {m} obs {} pi {:?} vf {:?} {}{}",
        cfg.env.n_envs,
        cfg.env.obs_dim(m, f),
        arch.pi,
        arch.vf,
        cfg.ppo.precision,
        if replay { " replayed" } else { "" }
    )
}

/// Times the run's rollouts with the env on the device, then on the host.
fn measure(
    cfg: &PpoTrialConfig,
    data: &Arc<Dataset>,
    bars: Range<usize>,
    device: &Device,
    replay: bool,
) -> Result<AutoPlacement, TrainingRunError> {
    let started = std::time::Instant::now();
    let counted = kernels::counts();
    let on_device = TensorVecEnv::new(cfg.env.clone(), data, bars.clone(), device)?;
    let device_ms = time_rollouts(on_device, cfg, device, replay)?;
    let host = CpuVecEnv::new(cfg.env.clone(), data.clone(), bars)?;
    let host_ms = time_rollouts(HostEnv::new(host, device), cfg, device, replay)?;
    Ok(AutoPlacement {
        placement: choose(device_ms, host_ms),
        device_ms,
        host_ms,
        replayed: replay,
        measured_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        measure_s: started.elapsed().as_secs_f64(),
        measure_kernels: {
            // The compilation log's late lines are the measuring's, not the first update's.
            kernels::settle();
            kernels::counts().since(&counted)
        },
        cached: false,
        kept: false,
    })
}

/// Milliseconds per rollout step of `env` under a trainer of `cfg`'s shape (its network,
/// precision and normalisation; rollouts of at most [`MAX_STEPS`]), nothing trained.
fn time_rollouts<E: RolloutEnv>(
    env: E,
    cfg: &PpoTrialConfig,
    device: &Device,
    replay: bool,
) -> Result<f64, PpoError> {
    let mut ppo = cfg.ppo.clone();
    ppo.n_steps = ppo.n_steps.clamp(1, MAX_STEPS);
    ppo.batch_size = ppo.batch_size.clamp(1, ppo.n_steps * env.n_envs());
    let mut trainer = Trainer::new(ppo, env, device)?;
    trainer.set_replay_policy(replay);
    trainer.time_rollout_steps(WARM_ROLLOUTS, TIMED_ROLLOUTS)
}

/// The decisions in `file`; none where it is missing or unreadable (it is then rewritten).
fn read(file: &Path) -> BTreeMap<String, AutoPlacement> {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}

/// Adds `decision` under `key` to the decisions in `file`, under an exclusive advisory lock on
/// `<file>.lock` (the OS drops it with the process that held it), so a trial deciding at the
/// same time, in this process or another, neither loses its entry nor takes this one's away.
fn keep(file: &Path, key: String, decision: &AutoPlacement) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut lock_name = file.as_os_str().to_owned();
    lock_name.push(".lock");
    let lock_file = PathBuf::from(lock_name);
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_file)
        .and_then(|f| f.lock().map(|()| f))
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("locking {}: {e}", lock_file.display()))
        })?;
    let mut all = read(file);
    all.insert(key, decision.clone());
    let written = write(file, &all);
    drop(lock);
    written
}

/// Writes `all` to `file` whole (a temporary file renamed over it: a reader never sees half).
/// The temporary file's name is this call's own (process, and a count of this process's
/// writes), so writers in two threads never write one temporary file.
fn write(file: &Path, all: &BTreeMap<String, AutoPlacement>) -> std::io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp: PathBuf = file.with_extension(format!(
        "json.{}-{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let text = serde_json::to_string_pretty(all).map_err(std::io::Error::other)?;
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ppo_trial::TrainingRun;
    use tradetune_env::EnvPlacement;
    use tradetune_env::bench::bench_dataset;
    use tradetune_rl::ppo::{ActorCriticConfig, NetArch};

    /// A decision kept before measuring's time was (`env-placement.json` of an earlier
    /// version) is still read, not dropped and measured again.
    #[test]
    fn a_decision_kept_without_its_measuring_time_is_still_read() {
        let kept = AutoPlacement {
            placement: ResolvedPlacement::Device,
            device_ms: 1.0,
            host_ms: 2.0,
            replayed: false,
            measured_at: "2026-11-28T10:00:00Z".into(),
            measure_s: 12.0,
            measure_kernels: KernelCounts::default(),
            cached: false,
            kept: false,
        };
        let mut entry = serde_json::to_value(&kept).unwrap();
        assert!(entry.as_object_mut().unwrap().remove("measure_s").is_some());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(FILE);
        std::fs::write(&file, serde_json::json!({ "shape": entry }).to_string()).unwrap();
        let all = read(&file);
        let old = all.get("shape").expect("the old entry is read");
        assert_eq!(
            (old.placement, old.device_ms, old.host_ms, old.measure_s),
            (ResolvedPlacement::Device, 1.0, 2.0, 0.0)
        );
    }

    fn decision(placement: ResolvedPlacement) -> AutoPlacement {
        AutoPlacement {
            placement,
            device_ms: 1.0,
            host_ms: 2.0,
            replayed: false,
            measured_at: "2026-11-30T10:00:00Z".into(),
            measure_s: 1.0,
            measure_kernels: KernelCounts::default(),
            cached: false,
            kept: false,
        }
    }

    fn card(name: &str) -> tradetune_device::adapters::Adapter {
        tradetune_device::adapters::Adapter {
            name: name.into(),
            kind: tradetune_device::adapters::AdapterKind::DiscreteGpu,
            index: 0,
            api: "Vulkan".into(),
            driver: "NVIDIA 580.159.04".into(),
            vendor: 0x10de,
            device: 0,
            pci_bus_id: String::new(),
            shader_f16: true,
            memory_bytes: None,
        }
    }

    /// Two cards' decisions for one shape are kept apart: each card's file is in its own
    /// environment, and what card A measured is not what card B reads.
    #[test]
    fn two_cards_keep_their_decisions_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            card("NVIDIA H100 80GB HBM3"),
            card("NVIDIA GeForce RTX 4080"),
        );
        let file_a = decisions_file(Some(dir.path()), Some(&a)).unwrap();
        let file_b = decisions_file(Some(dir.path()), Some(&b)).unwrap();
        assert_ne!(file_a, file_b);
        assert_eq!(
            file_a,
            dir.path().join(kernels::environment_of(&a)).join(FILE)
        );
        keep(&file_a, "shape".into(), &decision(ResolvedPlacement::Host)).unwrap();
        assert!(read(&file_b).is_empty(), "card B reads card A's decision");
        keep(
            &file_b,
            "shape".into(),
            &decision(ResolvedPlacement::Device),
        )
        .unwrap();
        assert_eq!(read(&file_a)["shape"].placement, ResolvedPlacement::Host);
        assert_eq!(read(&file_b)["shape"].placement, ResolvedPlacement::Device);
        // No cache, or a device whose card is not known: nothing kept, measured every time.
        assert_eq!(decisions_file(None, Some(&a)), None);
        assert_eq!(decisions_file(Some(dir.path()), None), None);
    }

    /// Trials deciding at once (threads of one process here) each keep their decision: none
    /// is lost to another's read-modify-write, and none fails on another's temporary file.
    #[test]
    fn decisions_written_at_once_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("env").join(FILE);
        let (threads, each) = (8, 12);
        std::thread::scope(|s| {
            for t in 0..threads {
                let file = &file;
                s.spawn(move || {
                    for i in 0..each {
                        keep(
                            file,
                            format!("thread {t} shape {i}"),
                            &decision(ResolvedPlacement::Device),
                        )
                        .unwrap();
                    }
                });
            }
        });
        let all = read(&file);
        assert_eq!(all.len(), threads * each, "{:?}", all.keys());
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path().join("env"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    /// A device opened through `tradetune_device::open` is known by its card, so `auto` keeps
    /// its decisions in that card's environment.
    #[test]
    fn an_opened_device_is_known_by_its_card() {
        let test = "an_opened_device_is_known_by_its_card";
        let Some(device) = tradetune_device::wgpu_for_test(test) else {
            return;
        };
        let adapter = tradetune_device::wgpu_adapter_of(&device).expect("its card");
        assert_eq!(
            Some(&adapter),
            tradetune_device::adapters::default_adapter().as_ref()
        );
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            decisions_file(
                Some(dir.path()),
                tradetune_device::wgpu_adapter_of(&device).as_ref()
            ),
            Some(
                dir.path()
                    .join(kernels::environment_of(&adapter))
                    .join(FILE)
            )
        );
    }

    #[test]
    fn the_host_is_chosen_only_where_clearly_cheaper() {
        assert_eq!(choose(1.0, 0.5), ResolvedPlacement::Host);
        assert_eq!(choose(1.0, 0.89), ResolvedPlacement::Host);
        assert_eq!(choose(1.0, 0.95), ResolvedPlacement::Device);
        assert_eq!(choose(1.0, 3.0), ResolvedPlacement::Device);
    }

    /// On wgpu (lavapipe in CI): `auto` measures both placements, decides by the rule, keeps
    /// the decision, and the next run of the same shape takes it without measuring; another
    /// shape measures; an unreadable file is measured over and rewritten. A run built with
    /// `auto` is placed where the decision says and carries it.
    #[test]
    fn auto_measures_decides_and_keeps_its_decision() {
        let test = "auto_measures_decides_and_keeps_its_decision";
        let Some(device) = tradetune_device::wgpu_for_test(test) else {
            return;
        };
        let data = bench_dataset(600, 3, 4, 1);
        let mut cfg = PpoTrialConfig::default();
        cfg.env.n_envs = 4;
        cfg.env.episode_bars = 100;
        cfg.ppo.policy = ActorCriticConfig::new()
            .with_net_arch(NetArch::new().with_pi(vec![8]).with_vf(vec![8]));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("env").join(FILE);

        let first = auto_with(&cfg, &data, 0..400, &device, Some(&file), false).unwrap();
        assert!(!first.cached && first.kept, "{first:?}");
        let unkept = auto_with(&cfg, &data, 0..400, &device, None, false).unwrap();
        assert!(!unkept.cached && !unkept.kept, "{unkept:?}");
        assert!(first.device_ms > 0.0 && first.host_ms > 0.0, "{first:?}");
        assert_eq!(first.placement, choose(first.device_ms, first.host_ms));
        // How long measuring took (both placements' kernels compiled): the run waited for it.
        assert!(first.measure_s > 0.0, "{first:?}");
        assert_eq!(
            first.overhead(),
            Some((first.measure_s, first.measure_kernels))
        );
        assert!(
            first.describe().contains(" (measured in ") && first.describe().ends_with(" s)"),
            "{}",
            first.describe()
        );

        let again = auto_with(&cfg, &data, 0..400, &device, Some(&file), false).unwrap();
        assert!(again.cached && again.kept);
        assert_eq!(
            again.overhead(),
            None,
            "a kept decision costs the run nothing"
        );
        assert_eq!(
            (again.placement, again.device_ms, again.host_ms),
            (first.placement, first.device_ms, first.host_ms)
        );
        assert!(
            again.describe().contains("as measured"),
            "{}",
            again.describe()
        );

        // Rollouts that replay their policy step are measured so, and decided apart.
        let replayed = auto_with(&cfg, &data, 0..400, &device, Some(&file), true).unwrap();
        assert!(!replayed.cached && replayed.replayed, "{replayed:?}");
        assert!(!first.replayed, "{first:?}");
        assert_eq!(
            replayed.placement,
            choose(replayed.device_ms, replayed.host_ms)
        );
        assert!(
            replayed.describe().contains(" (measured in ")
                && replayed
                    .describe()
                    .ends_with(" s, the policy step replayed)"),
            "{}",
            replayed.describe()
        );
        assert_eq!(read(&file).len(), 2);
        let again = auto_with(&cfg, &data, 0..400, &device, Some(&file), true).unwrap();
        assert!(again.cached && again.replayed, "{again:?}");

        let mut wider = cfg.clone();
        wider.env.n_envs = 6;
        assert!(
            !auto_with(&wider, &data, 0..400, &device, Some(&file), false)
                .unwrap()
                .cached
        );
        assert_eq!(read(&file).len(), 3);

        std::fs::write(&file, "{ not json").unwrap();
        assert!(
            !auto_with(&cfg, &data, 0..400, &device, Some(&file), false)
                .unwrap()
                .cached
        );
        assert_eq!(read(&file).len(), 1);

        cfg.env.placement = Some(EnvPlacement::Auto);
        // A configuration the trainer refuses is refused before anything is measured: no
        // decision kept for its shape (seven envs: no other test's).
        let mut refused = cfg.clone();
        refused.env.n_envs = 7;
        refused.ppo.batch_size = 7 * refused.ppo.n_steps + 1;
        let err = TrainingRun::build(&refused, &data, 0..400, &device, None).err();
        assert!(
            matches!(&err, Some(TrainingRunError::Ppo(e)) if e.to_string().contains("batch_size")),
            "{err:?}"
        );
        if let Some(kept) = decisions_file(
            tradetune_device::kernels::cache_setting().and_then(|s| s.root.as_deref()),
            tradetune_device::wgpu_adapter_of(&device).as_ref(),
        ) {
            let key = shape_key(&refused, &data, tradetune_rl::ppo::replay_policy_from_env());
            assert!(!read(&kept).contains_key(&key), "measured for {key}");
        }
        let run = TrainingRun::build(&cfg, &data, 0..400, &device, None).unwrap();
        let auto = run.auto.expect("auto's decision on a GPU");
        assert_eq!(run.placement, auto.placement);
        match (run.placement, run.trainer.env()) {
            (ResolvedPlacement::Device, crate::ppo_trial::PlacedEnv::Device(_))
            | (ResolvedPlacement::Host, crate::ppo_trial::PlacedEnv::Host(_)) => {}
            _ => panic!("placed elsewhere than {:?}", run.placement),
        }
    }
}
