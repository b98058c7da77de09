//! What the GPU runtime compiles, autotunes and launches, counted process-wide, and where it
//! keeps what it learnt between processes (issues 32 and 33).
//!
//! On a GPU the cost of a training step is per kernel launch and per host round-trip, and the
//! cost of a *new* configuration is its kernels' compilation and cubecl's autotune benchmarks
//! (181 kernels and 51 autotune runs for the tiny bench configuration on lavapipe, tens of
//! seconds on an H100's driver). Neither shows in a FLOP count, so both are counted here:
//!
//! - **dispatches**: every kernel launch, through cubecl's launch observer (called on the
//!   issuing thread before the kernel is submitted; autotune's benchmark launches included);
//! - **compilations**: every kernel cubecl compiles (a miss of the server's in-memory pipeline
//!   cache), through cubecl's compilation log, routed to the `log` crate and counted by a
//!   logger installed here;
//! - **autotune runs**: every operation cubecl benchmarks to choose a kernel (one "Fastest
//!   result" line of its autotune log at the minimal level).
//!
//! Of the launches, the **layout copies** are also counted on their own: cubecl's kernels
//! that make a strided (transposed) tensor contiguous (`cubecl_std::tensor::contiguous`),
//! which some matmul routines need before they run. Whether a step has any depends on the
//! routines the autotune cache picked, not on the code that asked for the product.
//!
//! `TRADETUNE_TRACE_LAUNCHES=1` also writes each launch's kernel name to stderr (`launch
//! <name>`), in launch order: what a step's count is made of (`mark` lines bracket a captured
//! graph's recorded run and note each replay); and each compilation and
//! autotuned operation as cubecl logs it (`compiled <line>`, `autotuned <line>`): what a new
//! configuration's compile time is made of.
//!
//! The counts are the whole process's (workers that share a process share them): read them
//! before and after the work to attribute, as [`KernelCounts::since`] does. Logging lines are
//! delivered by cubecl's logging task, a moment after the compilation they report: read the
//! counts after a device synchronisation and [`settle`].
//!
//! **The cache.** cubecl keeps autotune results in a store (its `persistence` feature, which
//! this crate turns on). By default it would live in the nearest `Cargo.toml`'s `target/` (a
//! source checkout) or the user cache; TradeTune puts it under its own data directory,
//! `~/.local/share/tradetune/gpu-cache`, in one environment per adapter and driver
//! (`nvidia-geforce-rtx-4080-vulkan-580-95`), so a driver update re-tunes instead of trusting
//! answers measured under another driver. A second trial of the same shapes then autotunes
//! nothing. `TRADETUNE_GPU_CACHE=DIR` moves it; `TRADETUNE_GPU_CACHE=off` turns it off. cubecl's
//! own settings (a `cubecl.toml`, `CUBECL_*` variables) are read first and kept where they
//! choose something; a store cubecl could not open is moved aside or reported when the device
//! opens ([`crate::cache_store`]). WGSL pipelines themselves are not stored by cubecl (only
//! its SPIR-V compiler stores compiled kernels), so a new process compiles its kernels again
//! and the driver's own shader cache (Mesa's, NVIDIA's) is what makes that cheaper.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Process-wide kernel counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct KernelCounts {
    /// Kernel launches (compute dispatches), autotune's benchmark launches included.
    pub dispatches: u64,
    /// Kernels compiled (misses of cubecl's in-memory pipeline cache).
    pub compiled: u64,
    /// Operations autotuned (benchmarked to choose among candidate kernels).
    pub autotune_runs: u64,
    /// Of the launches, those that made a strided tensor contiguous ([`is_layout_copy`]).
    #[serde(default)]
    pub layout_copies: u64,
    /// Of the launches, those replayed from a captured graph ([`crate::graph`]): the device runs
    /// them, but the host only encodes them again (the launch observer does not see them; each
    /// replay adds its recording's launches here and to `dispatches`).
    #[serde(default)]
    pub replayed: u64,
}

impl KernelCounts {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &KernelCounts) -> KernelCounts {
        KernelCounts {
            dispatches: self.dispatches.saturating_sub(earlier.dispatches),
            compiled: self.compiled.saturating_sub(earlier.compiled),
            autotune_runs: self.autotune_runs.saturating_sub(earlier.autotune_runs),
            layout_copies: self.layout_copies.saturating_sub(earlier.layout_copies),
            replayed: self.replayed.saturating_sub(earlier.replayed),
        }
    }

    /// Whether anything was compiled or autotuned.
    pub fn compiled_anything(&self) -> bool {
        self.compiled > 0 || self.autotune_runs > 0
    }
}

static DISPATCHES: AtomicU64 = AtomicU64::new(0);
static COMPILED: AtomicU64 = AtomicU64::new(0);
static AUTOTUNED: AtomicU64 = AtomicU64::new(0);
static LAYOUT_COPIES: AtomicU64 = AtomicU64::new(0);
static REPLAYED: AtomicU64 = AtomicU64::new(0);
/// Whether compilations and autotune runs are being counted (the logger installed).
static COUNTING_COMPILES: AtomicBool = AtomicBool::new(false);
/// Whether launches are being counted (the observer installed).
static COUNTING_DISPATCHES: AtomicBool = AtomicBool::new(false);

/// The counters now.
pub fn counts() -> KernelCounts {
    KernelCounts {
        dispatches: DISPATCHES.load(Ordering::Relaxed),
        compiled: COMPILED.load(Ordering::Relaxed),
        autotune_runs: AUTOTUNED.load(Ordering::Relaxed),
        layout_copies: LAYOUT_COPIES.load(Ordering::Relaxed),
        replayed: REPLAYED.load(Ordering::Relaxed),
    }
}

/// Counts one replay of a graph whose recorded run launched `recorded` (its dispatches and
/// layout copies): they are launches the device runs again, and replayed ones.
pub(crate) fn count_replayed(recorded: &KernelCounts) {
    DISPATCHES.fetch_add(recorded.dispatches, Ordering::Relaxed);
    LAYOUT_COPIES.fetch_add(recorded.layout_copies, Ordering::Relaxed);
    REPLAYED.fetch_add(recorded.dispatches, Ordering::Relaxed);
}

/// Whether the kernel named `kernel` (as cubecl's launch observer names it: the kernel type's
/// path) makes a strided tensor contiguous: `cubecl_std::tensor::contiguous::base::copy_kernel::
/// CopyKernel` and its packing variants, the copies a matmul routine that needs contiguous
/// operands launches before it runs.
pub fn is_layout_copy(kernel: &str) -> bool {
    kernel.starts_with("cubecl_std::tensor::contiguous::")
}

/// Whether [`counts`] sees compilations and autotune runs (a GPU device was opened in this
/// process, and no other `log` logger was installed first).
pub fn counting_compiles() -> bool {
    COUNTING_COMPILES.load(Ordering::Relaxed)
}

/// Whether [`counts`] sees kernel launches (a GPU device was opened in this process).
pub fn counting_dispatches() -> bool {
    COUNTING_DISPATCHES.load(Ordering::Relaxed)
}

/// Waits until the compilation log has delivered what it has (its lines arrive through a
/// logging task, a moment after the compilations): until the count stays the same over 20 ms,
/// at most 0.5 s. Call it after a device synchronisation, before reading [`counts`].
pub fn settle() {
    if !counting_compiles() {
        return;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    let mut last = counts();
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = counts();
        if now.compiled == last.compiled && now.autotune_runs == last.autotune_runs {
            return;
        }
        last = now;
    }
}

/// Where the GPU cache goes: `TRADETUNE_GPU_CACHE` (a directory, or `off`), else
/// `<data dir>/tradetune/gpu-cache`. `None`: no persistent cache.
pub fn cache_root() -> Option<PathBuf> {
    match std::env::var_os("TRADETUNE_GPU_CACHE") {
        Some(v) if v == "off" || v == "0" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => dirs::data_dir().map(|d| d.join("tradetune").join("gpu-cache")),
    }
}

/// The environment name of an adapter and driver: lowercase letters and digits, runs of
/// anything else as one `-` (`NVIDIA H100 80GB HBM3` + `NVIDIA 580.159.04` →
/// `nvidia-h100-80gb-hbm3-nvidia-580-159-04`), at most 96 characters. A longer name keeps
/// its first 79 characters and ends with `-` and 16 hex digits of [`fnv1a64`] of the whole
/// name, so two adapters or drivers that differ only past the cut (the driver's version comes
/// last) keep separate environments.
pub fn environment_name(adapter: &str, driver: &str) -> String {
    let mut out = String::new();
    for c in format!("{adapter} {driver}").chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.len() > MAX_ENVIRONMENT_NAME {
        let hash = fnv1a64(out.as_bytes());
        // Only ASCII was pushed, so any byte index is a char boundary.
        out.truncate(MAX_ENVIRONMENT_NAME - 17);
        while out.ends_with('-') {
            out.pop();
        }
        out.push_str(&format!("-{hash:016x}"));
    }
    if out.is_empty() {
        out.push_str("unnamed-adapter");
    }
    out
}

/// The longest [`environment_name`].
const MAX_ENVIRONMENT_NAME: usize = 96;

/// FNV-1a, 64 bits, of `bytes`: the same on every run, platform and Rust version (a store's
/// name must not move when TradeTune is rebuilt, as std's `DefaultHasher` may).
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The variable that turns the driver's own shader cache off, if the environment sets one:
/// Mesa's `MESA_SHADER_CACHE_DISABLE` (lavapipe, RADV) or NVIDIA's `__GL_SHADER_DISK_CACHE=0`.
/// cubecl keeps no compiled WGSL pipelines between processes, so that cache is what makes a
/// later process's compilation cheap: the tiny bench configuration's cold first update on
/// lavapipe took 22.2 s with Mesa's cache fresh and 8.2 s with it kept (2026-11-27).
pub fn driver_shader_cache_off() -> Option<&'static str> {
    driver_shader_cache_off_in(|name| std::env::var(name).ok())
}

fn driver_shader_cache_off_in(var: impl Fn(&str) -> Option<String>) -> Option<&'static str> {
    // Mesa reads a boolean the way its `env_var_as_boolean` does.
    let yes = |v: String| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "y" | "yes"
        )
    };
    if var("MESA_SHADER_CACHE_DISABLE").is_some_and(yes) {
        return Some("MESA_SHADER_CACHE_DISABLE");
    }
    if var("__GL_SHADER_DISK_CACHE").is_some_and(|v| v.trim() == "0") {
        return Some("__GL_SHADER_DISK_CACHE=0");
    }
    None
}

/// What [`configure`] settled, for `tradetune devices` and the logs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheSetting {
    /// The directory of the environments, None when the cache is off.
    pub root: Option<PathBuf>,
    /// The environment (adapter and driver) autotune results are kept in.
    pub environment: String,
    /// What was wrong with the environment's store when this process first opened it, if
    /// anything ([`crate::cache_store`]): a broken file moved aside, or a store that cannot
    /// be opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::cache_store::StoreTrouble>,
    /// Whether cubecl's own settings turn its autotune cache off (a `cubecl.toml`, a
    /// `CUBECL_*` variable), whatever [`Self::root`] says.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cubecl_cache_off: bool,
}

impl CacheSetting {
    /// Whether a later process finds this one's autotune answers: the cache is on and its
    /// store could be opened (or was started anew).
    pub fn keeps_answers(&self) -> bool {
        self.root.is_some()
            && !self.cubecl_cache_off
            && self.store.as_ref().is_none_or(|t| t.keeps_answers())
    }
}

static SETTING: std::sync::OnceLock<CacheSetting> = std::sync::OnceLock::new();

/// The store's trouble ([`CacheSetting::store`]: a broken store moved aside, or one that
/// cannot be opened) as a warning line, the first time a front end asks once a GPU device has
/// opened in this process; `None` before, after, and where the store is fine. Each front end
/// asks where it says things (`train` before its run, a study's launch among its notices), so
/// it is said once, where it is seen.
pub fn store_warning_once() -> Option<String> {
    static SAID: AtomicBool = AtomicBool::new(false);
    let trouble = SETTING.get()?.store.as_ref()?;
    (!SAID.swap(true, Ordering::Relaxed)).then(|| format!("warning: {trouble}"))
}

/// The cache setting of this process, once a GPU device has been opened.
pub fn cache_setting() -> Option<&'static CacheSetting> {
    SETTING.get()
}

/// What a later process running the same shapes finds of this one's autotune answers: what
/// `train`'s summary says of a next run, and a study trial's compile-bound verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// All of them: the GPU cache kept them (or there were none: the CPU).
    All,
    /// None: the cache is off (`TRADETUNE_GPU_CACHE=off`, or cubecl's own setting).
    Off,
    /// None: the cache's store cannot be used (said in a warning).
    Unusable,
    /// Maybe not all: this many of the store's reads and writes failed during the run.
    WritesFailed(u64),
}

/// [`Kept`] of the process's GPU cache `cache` (none: no GPU opened) and the store's `failed`
/// reads and writes.
pub fn kept(cache: Option<&CacheSetting>, failed: u64) -> Kept {
    match cache {
        None => Kept::All,
        Some(c) if c.root.is_none() || c.cubecl_cache_off => Kept::Off,
        Some(c) if !c.keeps_answers() => Kept::Unusable,
        Some(_) if failed > 0 => Kept::WritesFailed(failed),
        Some(_) => Kept::All,
    }
}

/// [`kept`] of this process now.
pub fn kept_now() -> Kept {
    kept_since(0)
}

/// [`kept`] of what was autotuned since the store's failures were `before`
/// ([`crate::cache_store::failures`]): a study trial's, whose answers a failure earlier in the
/// process (another trial's, a disk since freed) did not lose.
pub fn kept_since(before: u64) -> Kept {
    kept(
        cache_setting(),
        crate::cache_store::failures().0.saturating_sub(before),
    )
}

/// The environment `adapter`'s autotune answers (and `auto`'s env placements) are kept in: its
/// name and driver, and `-spirv` where this build compiles its kernels to SPIR-V. cubecl keys
/// an answer by the operation's shapes and the candidates' list, not by the shader language, and
/// a routine's speed depends on it (cooperative matrices exist only through SPIR-V), so the
/// two builds on one card keep apart.
pub fn environment_of(adapter: &crate::adapters::Adapter) -> String {
    let plain = environment_name(&adapter.name, &adapter.driver);
    match crate::adapters::Compiler::of(adapter) {
        crate::adapters::Compiler::Wgsl => plain,
        crate::adapters::Compiler::Spirv => format!("{plain}-spirv"),
    }
}

/// Configures cubecl for this process before its first device opens: the persistent autotune
/// cache under [`cache_root`] in `adapter`'s environment ([`environment_of`]), and the
/// counters. Only the first call configures (cubecl's settings are fixed once read); later
/// calls return the first one's setting.
#[cfg(feature = "wgpu")]
pub fn configure(adapter: &crate::adapters::Adapter) -> &'static CacheSetting {
    SETTING.get_or_init(|| {
        let mut setting = CacheSetting {
            root: cache_root(),
            environment: environment_of(adapter),
            store: None,
            cubecl_cache_off: false,
        };
        (setting.cubecl_cache_off, setting.store) = runtime::configure(&setting);
        setting
    })
}

/// Writes `mark <what>` to stderr among the launches `TRADETUNE_TRACE_LAUNCHES=1` names (where
/// a captured graph's recorded run starts and ends, and each replay): nothing otherwise.
pub fn trace_mark(what: std::fmt::Arguments<'_>) {
    #[cfg(feature = "wgpu")]
    runtime::trace_mark(what);
    #[cfg(not(feature = "wgpu"))]
    let _ = what;
}

#[cfg(feature = "wgpu")]
pub(crate) mod runtime {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use cubecl_environment::config::logger::LogCrateLevel;
    use cubecl_runtime::config::autotune::AutotuneLogLevel;
    use cubecl_runtime::config::cache::CacheConfig;
    use cubecl_runtime::config::compilation::CompilationLogLevel;
    use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};
    use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};

    use super::{
        AUTOTUNED, COMPILED, COUNTING_COMPILES, COUNTING_DISPATCHES, DISPATCHES, LAYOUT_COPIES,
    };

    const COMPILATION_TARGET: &str = "cubecl::compilation";
    const AUTOTUNE_TARGET: &str = "cubecl::autotune";
    /// cubecl's store of autotune answers, which warns of a read or write that failed.
    const STORE_TARGET: &str = "cubecl_environment::persistence";

    /// Whether launches, compilations and autotune runs are named on stderr.
    static TRACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// Counts a launch of `kernel` (and names it on stderr when tracing): what every observer
    /// TradeTune installs does first (`crate::kernel_timing`'s too).
    pub(crate) fn note_launch(kernel: &'static str) {
        if TRACE.load(Ordering::Relaxed) {
            eprintln!("launch {kernel}");
        }
        DISPATCHES.fetch_add(1, Ordering::Relaxed);
        if super::is_layout_copy(kernel) {
            LAYOUT_COPIES.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes `mark <what>` among the traced launches, when tracing.
    pub(crate) fn trace_mark(what: std::fmt::Arguments<'_>) {
        if TRACE.load(Ordering::Relaxed) {
            eprintln!("mark {what}");
        }
    }

    /// Counts launches.
    struct Launches;

    impl LaunchObserver for Launches {
        fn launched(&self, kernel: &'static str) {
            note_launch(kernel);
        }
    }

    /// Counts cubecl's compilation and autotune lines; everything else is dropped (TradeTune
    /// installs no other logger). When tracing, also writes each counted line to stderr
    /// (`compiled <line>`, `autotuned <line>`), among the launches.
    pub(super) struct Lines;

    impl log::Log for Lines {
        fn enabled(&self, metadata: &log::Metadata) -> bool {
            metadata.target().starts_with("cubecl::")
                || (metadata.target().starts_with(STORE_TARGET)
                    && metadata.level() <= log::Level::Warn)
        }

        fn log(&self, record: &log::Record) {
            match record.target() {
                COMPILATION_TARGET => {
                    COMPILED.fetch_add(1, Ordering::Relaxed);
                    if TRACE.load(Ordering::Relaxed) {
                        eprintln!("compiled {}", record.args());
                    }
                }
                AUTOTUNE_TARGET => {
                    // One line per autotuned operation at the minimal level; the full level
                    // adds one per candidate, which this does not count.
                    let line = record.args().to_string();
                    if line.starts_with("Fastest result") {
                        AUTOTUNED.fetch_add(1, Ordering::Relaxed);
                        if TRACE.load(Ordering::Relaxed) {
                            eprintln!("autotuned {line}");
                        }
                    }
                }
                t if t.starts_with(STORE_TARGET) && record.level() <= log::Level::Warn => {
                    crate::cache_store::note_failure(&record.args().to_string());
                }
                _ => {}
            }
        }

        fn flush(&self) {}
    }

    pub(super) static LINES: Lines = Lines;
    static OBSERVATION: std::sync::OnceLock<LaunchObservation> = std::sync::OnceLock::new();

    /// Configures cubecl, then checks the store its autotune answers will be kept in
    /// ([`crate::cache_store::check`]): whether cubecl's own settings turn its autotune cache
    /// off, and what was wrong with the store, if anything.
    pub(super) fn configure(
        setting: &super::CacheSetting,
    ) -> (bool, Option<crate::cache_store::StoreTrouble>) {
        // The user's cubecl.toml and CUBECL_* variables first, as cubecl reads them.
        let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
        match &setting.root {
            Some(root) => {
                if matches!(config.environment.path, CacheConfig::Target) {
                    config.environment.path = CacheConfig::Directory(root.clone());
                }
                if config.environment.name == CubeClRuntimeConfig::default().environment.name {
                    config.environment.name = setting.environment.clone();
                }
            }
            None => config.autotune.disable_cache = true,
        }
        // cubecl's build records (a row per compilation in the environment's database) only
        // when asked for: they cost a write per kernel.
        if std::env::var_os("CUBECL_ENVIRONMENT_RECORDS").is_none() {
            config.environment.records.level = cubecl_environment::records::RecordLevel::Off;
        }
        if matches!(
            config.compilation.logger.level,
            CompilationLogLevel::Disabled
        ) {
            config.compilation.logger.level = CompilationLogLevel::Basic;
        }
        config.compilation.logger.log = Some(LogCrateLevel::Info);
        if matches!(config.autotune.logger.level, AutotuneLogLevel::Disabled) {
            config.autotune.logger.level = AutotuneLogLevel::Minimal;
        }
        config.autotune.logger.log = Some(LogCrateLevel::Info);
        // Fails only when cubecl already read its settings (a device opened elsewhere first):
        // then what it logs is whatever those settings say, and the counts are on only if
        // they route both logs to the `log` crate.
        let _ = CubeClRuntimeConfig::try_set(config);
        let active = CubeClRuntimeConfig::get();
        let routed = active.compilation.logger.log.is_some()
            && !matches!(
                active.compilation.logger.level,
                CompilationLogLevel::Disabled
            )
            && active.autotune.logger.log.is_some()
            && !matches!(active.autotune.logger.level, AutotuneLogLevel::Disabled);
        if log::set_logger(&LINES).is_ok() && routed {
            log::set_max_level(log::LevelFilter::Info);
            COUNTING_COMPILES.store(true, Ordering::Relaxed);
        }
        let trace = std::env::var_os("TRADETUNE_TRACE_LAUNCHES").is_some_and(|v| v != "0");
        TRACE.store(trace, Ordering::Relaxed);
        OBSERVATION.get_or_init(|| LaunchObservation::new(Arc::new(Launches)));
        COUNTING_DISPATCHES.store(true, Ordering::Relaxed);
        // The store cubecl will use, where its answers are kept between processes at all (the
        // file comes from the settings cubecl holds, which a user's cubecl.toml may have set).
        let cubecl_off = setting.root.is_some() && active.autotune.disable_cache;
        if setting.root.is_none() || cubecl_off {
            return (cubecl_off, None);
        }
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (before, _) = crate::cache_store::failures();
        let trouble = crate::cache_store::check(
            &cubecl_environment::environment::path(),
            now_s,
            crate::cache_store::open_as_cubecl,
        );
        // The check's own failed write, if any, is its trouble, not a failure of the run's.
        crate::cache_store::forget_failures_since(before);
        (false, trouble)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cubecl's store warns of a read or write that failed and goes on without it: the logger
    /// counts each as the store's failure, for the warnings a study says as it runs and a
    /// command after it; its debug lines are not failures.
    #[cfg(feature = "wgpu")]
    #[test]
    fn cubecls_store_warnings_are_counted_as_its_failures() {
        use log::Log;
        let (before, _) = crate::cache_store::failures();
        let target = "cubecl_environment::persistence::turso";
        let warn = log::Record::builder()
            .target(target)
            .level(log::Level::Warn)
            .args(format_args!(
                "Unable to write Turso /c/env.db (autotune): disk full"
            ))
            .build();
        assert!(runtime::LINES.enabled(warn.metadata()));
        runtime::LINES.log(&warn);
        let debug = log::Record::builder()
            .target(target)
            .level(log::Level::Debug)
            .args(format_args!(
                "cubecl cache: /c/env.db is not writable; opening read-only"
            ))
            .build();
        assert!(!runtime::LINES.enabled(debug.metadata()));
        let (after, first) = crate::cache_store::failures();
        assert_eq!(after, before + 1);
        assert!(first.is_some_and(|f| !f.is_empty()));
    }

    #[test]
    fn the_drivers_shader_cache_is_off_only_where_a_variable_says_so() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            driver_shader_cache_off_in(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            })
        };
        assert_eq!(with(&[]), None);
        assert_eq!(
            with(&[("MESA_SHADER_CACHE_DISABLE", "true")]),
            Some("MESA_SHADER_CACHE_DISABLE")
        );
        assert_eq!(
            with(&[("MESA_SHADER_CACHE_DISABLE", " Yes ")]),
            Some("MESA_SHADER_CACHE_DISABLE")
        );
        assert_eq!(with(&[("MESA_SHADER_CACHE_DISABLE", "false")]), None);
        assert_eq!(
            with(&[("__GL_SHADER_DISK_CACHE", "0")]),
            Some("__GL_SHADER_DISK_CACHE=0")
        );
        assert_eq!(with(&[("__GL_SHADER_DISK_CACHE", "1")]), None);
    }

    #[test]
    fn environment_names_are_the_adapter_and_driver_in_plain_words() {
        assert_eq!(
            environment_name("NVIDIA H100 80GB HBM3", "NVIDIA 580.159.04"),
            "nvidia-h100-80gb-hbm3-nvidia-580-159-04"
        );
        assert_eq!(
            environment_name("llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe Mesa 22.3.6"),
            "llvmpipe-llvm-15-0-6-256-bits-llvmpipe-mesa-22-3-6"
        );
        assert_eq!(environment_name("", " ()"), "unnamed-adapter");
        assert!(environment_name(&"x".repeat(300), "").len() <= 96);
    }

    #[test]
    fn long_environment_names_keep_the_driver_version_apart() {
        let one = environment_name(&"a".repeat(100), "mesa 24.0.1");
        let two = environment_name(&"a".repeat(100), "mesa 24.0.2");
        assert_ne!(one, two);
        assert_eq!(one.len(), 96);
        assert!(one.starts_with(&"a".repeat(79)), "{one}");
        // The same inputs give the same name (a hash fixed here, not a per-run one).
        assert_eq!(one, environment_name(&"a".repeat(100), "mesa 24.0.1"));
        assert_eq!(
            one,
            format!(
                "{}-{:016x}",
                "a".repeat(79),
                fnv1a64(format!("{}-mesa-24-0-1", "a".repeat(100)).as_bytes())
            )
        );
        // A prefix cut at a `-` does not leave `--`.
        let cut = environment_name(&format!("{} b", "a".repeat(78)), &"c".repeat(40));
        assert!(!cut.contains("--"), "{cut}");
        // Names that fit are as before.
        let fits = environment_name(&"a".repeat(80), "mesa 24.0.1");
        assert_eq!(fits, format!("{}-mesa-24-0-1", "a".repeat(80)));
    }

    #[test]
    fn fnv1a64_is_the_published_function() {
        // Reference values of FNV-1a 64 (Fowler, Noll, Vo).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn counts_since_subtract_and_saturate() {
        let a = KernelCounts {
            dispatches: 10,
            compiled: 3,
            autotune_runs: 1,
            layout_copies: 4,
            replayed: 0,
        };
        let b = KernelCounts {
            dispatches: 25,
            compiled: 3,
            autotune_runs: 2,
            layout_copies: 6,
            replayed: 7,
        };
        let d = b.since(&a);
        assert_eq!(
            (
                d.dispatches,
                d.compiled,
                d.autotune_runs,
                d.layout_copies,
                d.replayed
            ),
            (15, 0, 1, 2, 7)
        );
        assert!(d.compiled_anything());
        assert_eq!(a.since(&b), KernelCounts::default());
    }

    #[test]
    fn layout_copies_are_cubecls_contiguous_kernels_only() {
        // Names as the launch observer gave them (TRADETUNE_TRACE_LAUNCHES=1, bench matmul on
        // lavapipe, 2026-11-28).
        for copy in [
            "cubecl_std::tensor::contiguous::base::copy_kernel::CopyKernel",
            "cubecl_std::tensor::contiguous::base::copy_kernel_pack::CopyKernelPack",
        ] {
            assert!(is_layout_copy(copy), "{copy}");
        }
        for other in [
            "burn_cubecl::kernel::unary_numeric::unary_numeric::UnaryNumeric<burn_cubecl::tensor::base::CubeTensor::copy::Copy>",
            "cubek_matmul::multi_level::components::batch::naive::matmul::matmul_entry::MatmulEntry<cubek_matmul::multi_level::args::TensorArgs>",
            "cubecl_std::throughput::runners::launch_overhead::launch_overhead::LaunchOverhead",
        ] {
            assert!(!is_layout_copy(other), "{other}");
        }
    }
}
