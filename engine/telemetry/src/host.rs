//! CPU and process probes through `sysinfo`: per-core usage and the watched process's CPU and
//! resident memory (the training process, or `monitor --pid`).

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use super::TelemetryError;
use super::metric::{MIB, Metric};

/// One reading of the machine and the watched process.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct HostSample {
    /// All CPUs, 0–100.
    pub cpu_pct: Option<f64>,
    /// Each core, 0–100.
    pub core_pct: Vec<f64>,
    /// The watched process; 100 = one full core.
    pub process_cpu_pct: Option<f64>,
    pub rss_bytes: Option<u64>,
}

impl HostSample {
    pub fn metrics(&self) -> Vec<(Metric, f64)> {
        let mut out = Vec::with_capacity(3 + self.core_pct.len());
        if let Some(v) = self.cpu_pct {
            out.push((Metric::CpuPct, v));
        }
        if let Some(v) = self.process_cpu_pct {
            out.push((Metric::ProcessCpuPct, v));
        }
        if let Some(b) = self.rss_bytes {
            out.push((Metric::RssMib, b as f64 / MIB));
        }
        for (i, v) in self.core_pct.iter().enumerate() {
            out.push((Metric::CoreCpuPct(i as u16), *v));
        }
        out
    }
}

/// A way of reading the CPUs and one process.
pub trait HostProbe: Send {
    fn sample(&mut self) -> HostSample;
}

/// The watched process's CPU use, from its own CPU time over the probe's own clock.
///
/// sysinfo's `Process::cpu_usage` divides the process's CPU time since the last refresh by
/// the machine's CPU window, which it moves only every `MINIMUM_CPU_UPDATE_INTERVAL` (200 ms):
/// a sample sooner than that after the one before (a trial's begin and end samples, taken
/// between ticks; every tick at a 0.1 s interval) divided a few milliseconds of the process's
/// time by the whole older window, and read 2 % of a busy process, or half. Here each sample is
/// measured back to the latest earlier one at least [`ProcessWindow::MIN`] old (kept from the
/// samples before), so a sample taken a moment after another still covers 200 ms or more.
#[derive(Debug, Default)]
struct ProcessWindow {
    /// (when, the process's CPU milliseconds then), oldest first.
    seen: std::collections::VecDeque<(std::time::Instant, u64)>,
}

impl ProcessWindow {
    /// The shortest window a figure is measured over: sysinfo's, and 20 of the kernel's 10 ms
    /// ticks of CPU time.
    const MIN: std::time::Duration = sysinfo::MINIMUM_CPU_UPDATE_INTERVAL;

    /// The process's CPU use (100 = one core) from the latest earlier reading at least
    /// [`Self::MIN`] before `now` to `cpu_ms` at `now`; `None` until one is that old.
    fn pct(&mut self, now: std::time::Instant, cpu_ms: u64) -> Option<f64> {
        // The latest reading old enough; the ones before it are no longer needed.
        let base = self
            .seen
            .iter()
            .rposition(|(t, _)| now.saturating_duration_since(*t) >= Self::MIN);
        if let Some(i) = base {
            self.seen.drain(..i);
        }
        let out = base.and_then(|_| {
            let (t, ms) = *self.seen.front()?;
            let wall_ms = now.saturating_duration_since(t).as_secs_f64() * 1e3;
            Some(cpu_ms.saturating_sub(ms) as f64 / wall_ms * 100.0)
        });
        self.seen.push_back((now, cpu_ms));
        out
    }
}

/// The `sysinfo` implementation.
pub struct SysinfoHostProbe {
    system: System,
    pid: Pid,
    process_window: ProcessWindow,
    /// When the priming refresh ran, until the first sample: sysinfo leaves the CPUs' times
    /// as they were on a refresh sooner than `MINIMUM_CPU_UPDATE_INTERVAL` after the last,
    /// which read every core at 0 % and the whole machine at its average since boot.
    primed: Option<std::time::Instant>,
}

impl SysinfoHostProbe {
    /// Watches process `pid` (this process when `None`).
    pub fn new(pid: Option<u32>) -> Result<SysinfoHostProbe, TelemetryError> {
        let pid = match pid {
            Some(p) => Pid::from_u32(p),
            None => sysinfo::get_current_pid().map_err(|e| {
                TelemetryError::HostProbe(format!("cannot find this process's id: {e}"))
            })?,
        };
        let system =
            System::new().map_err(|e| TelemetryError::HostProbe(format!("sysinfo: {e}")))?;
        let mut probe = SysinfoHostProbe {
            system,
            pid,
            process_window: ProcessWindow::default(),
            primed: None,
        };
        // CPU usage is a difference between two refreshes; prime the first one so the first
        // real sample is meaningful rather than 0 %.
        probe.refresh();
        let now = std::time::Instant::now();
        probe.primed = Some(now);
        if let Some(p) = probe.system.process(probe.pid) {
            probe.process_window.pct(now, p.accumulated_cpu_time());
        }
        Ok(probe)
    }

    /// Whether the watched process existed at the last refresh (a `--pid` of no process
    /// gives no process figures at all).
    pub fn process_exists(&self) -> bool {
        self.system.process(self.pid).is_some()
    }

    /// Logical CPUs the probe reports (one `cpuN_pct` column each).
    pub fn core_count(&self) -> usize {
        self.system.cpus().len()
    }

    fn refresh(&mut self) {
        self.system.refresh_cpu_usage();
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            true,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
    }
}

impl HostProbe for SysinfoHostProbe {
    fn sample(&mut self) -> HostSample {
        // sysinfo leaves the CPUs' times as they were on a refresh sooner than
        // MINIMUM_CPU_UPDATE_INTERVAL after the priming one (a sampler ticks as it starts):
        // that first sample has no CPU figures rather than false ones (every core at 0 %, the
        // machine at its average since boot, the process at 0 %). It does not wait: a tick
        // waits only so long for its probes' answers.
        let too_soon = self
            .primed
            .take()
            .is_some_and(|t| t.elapsed() < sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        self.refresh();
        let cores: Vec<f64> = if too_soon {
            Vec::new()
        } else {
            self.system
                .cpus()
                .iter()
                .map(|c| f64::from(c.usage()))
                .collect()
        };
        let process = self.system.process(self.pid);
        let now = std::time::Instant::now();
        let process_cpu_pct =
            process.and_then(|p| self.process_window.pct(now, p.accumulated_cpu_time()));
        HostSample {
            cpu_pct: (!cores.is_empty()).then(|| f64::from(self.system.global_cpu_usage())),
            core_pct: cores,
            process_cpu_pct,
            rss_bytes: process.map(|p| p.memory()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample taken as soon as the probe is made (sooner than sysinfo reads the CPUs' times
    /// again) has no CPU figures, where it read every core at 0 %; one taken after that
    /// interval reads a core kept busy meanwhile.
    #[test]
    fn a_first_sample_taken_at_once_has_no_cpu_figures_and_the_next_reads_the_cores() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = Arc::new(AtomicBool::new(false));
        let spin = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
        };
        let mut probe = SysinfoHostProbe::new(None).unwrap();
        let first = probe.sample();
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        let second = probe.sample();
        stop.store(true, Ordering::Relaxed);
        spin.join().unwrap();
        assert!(first.rss_bytes.unwrap() > 0);
        assert_eq!(
            (first.cpu_pct, first.core_pct.len(), first.process_cpu_pct),
            (None, 0, None),
            "{first:?}"
        );
        assert!(second.core_pct.iter().any(|&v| v > 0.0), "{second:?}");
        assert!(second.cpu_pct.is_some_and(|v| v > 0.0), "{second:?}");
    }

    /// A reading a moment after another is measured back to one at least 200 ms old: a
    /// process busy on 1.5 cores reads 150 % at a trial's begin sample 20 ms after a tick, and
    /// at every tick of a 0.1 s interval (sysinfo's own figure read 10 % and about 75 %).
    #[test]
    fn a_reading_soon_after_another_still_covers_200_ms() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // 1.5 CPU-milliseconds per millisecond.
        let cpu = |ms: u64| ms * 3 / 2;
        let mut w = ProcessWindow::default();
        assert_eq!(w.pct(at(0), cpu(0)), None, "nothing to measure from");
        assert_eq!(w.pct(at(100), cpu(100)), None, "100 ms is too short");
        for ms in [200, 220, 300, 400, 500, 520, 600, 700] {
            let pct = w.pct(at(ms), cpu(ms)).unwrap();
            assert!((pct - 150.0).abs() < 1e-9, "at {ms} ms: {pct}");
        }
        assert!(
            w.seen.len() <= 4,
            "older readings are dropped: {:?}",
            w.seen
        );
        // Idle since 700 ms: the window from 600 ms holds 100 ms of work in 250.
        let pct = w.pct(at(850), cpu(700)).unwrap();
        assert!((pct - 60.0).abs() < 1e-9, "{pct}");
    }

    #[test]
    fn this_process_has_resident_memory_and_cores_are_listed() {
        let mut probe = SysinfoHostProbe::new(None).unwrap();
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        let s = probe.sample();
        assert!(s.rss_bytes.unwrap() > 0);
        assert!(!s.core_pct.is_empty());
        assert!(s.core_pct.iter().all(|v| (0.0..=100.0).contains(v)));
        let names: Vec<String> = s.metrics().iter().map(|(m, _)| m.name()).collect();
        assert!(names.contains(&"rss_mib".to_string()));
        assert!(names.contains(&"cpu0_pct".to_string()));
    }

    #[test]
    fn a_process_that_does_not_exist_reports_nothing_for_it() {
        // PIDs are below 2^22 on Linux (pid_max); this one cannot exist.
        let mut probe = SysinfoHostProbe::new(Some(u32::MAX - 1)).unwrap();
        let s = probe.sample();
        assert_eq!(s.rss_bytes, None);
        assert_eq!(s.process_cpu_pct, None);
    }
}
