//! `tradetune monitor`: live GPU, CPU and process figures, one line per device per tick (like
//! `nvidia-smi dmon`), and/or a CSV log whose columns name their units — the user's
//! GPU-monitor script, done right. Without a GPU it runs anyway and says plainly why none is
//! shown.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde_json::{Map, Value, json};
use tradetune_engine::telemetry::{
    CsvLog, DRM_ROOT, DeviceTag, GpuDiscovery, GpuInfo, Metric, Sampler, SamplerConfig,
    SamplerCore, SysinfoHostProbe, Tick, WideLayout, source,
};

#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Seconds between samples (0.1 to 60).
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Seconds to run; 0 runs until interrupted.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Also write every sample to this CSV file (one row per tick, columns named with units).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Print one JSON object per line (a status line, then one per tick) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The process whose CPU, resident memory and GPU memory to report (default: this one).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Where to look for AMD cards (the DRM class directory; tests point it at fixtures).
    #[arg(long, default_value = DRM_ROOT, hide = true)]
    pub drm_root: PathBuf,
}

pub fn run(args: MonitorArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.interval.is_finite(),
        "--interval: not a number of seconds: {}",
        args.interval
    );
    anyhow::ensure!(
        args.duration.is_finite() && args.duration >= 0.0,
        "--duration: must be 0 (run until interrupted) or a positive number of seconds, got {}",
        args.duration
    );
    let interval = Duration::try_from_secs_f64(args.interval.max(0.0))
        .with_context(|| format!("--interval {}", args.interval))?;
    let config = SamplerConfig::with_interval(interval).context("--interval")?;
    // A whole number of ticks, at least one: `--duration 2 --interval 0.5` is 4 samples.
    let ticks_wanted =
        (args.duration > 0.0).then(|| ((args.duration / args.interval).round() as u64).max(1));

    let watched = args.pid.unwrap_or_else(std::process::id);
    let host = SysinfoHostProbe::new(Some(watched)).context("CPU/process probe")?;
    if let Some(pid) = args.pid {
        anyhow::ensure!(host.process_exists(), "--pid {pid}: no such process");
    }
    let cores = host.core_count();
    let discovery = GpuDiscovery::discover(&args.drm_root, watched);
    let gpus = discovery.devices();
    let no_gpu = discovery.no_gpu_reason();
    let statuses: Vec<String> = discovery.statuses.iter().map(|s| s.to_string()).collect();

    if args.json {
        let status = json!({
            "type": "status",
            "interval_s": interval.as_secs_f64(),
            "pid": watched,
            "probes": statuses,
            "gpus": gpus.iter().enumerate().map(|(i, g)| gpu_json(i, g)).collect::<Vec<_>>(),
            "no_gpu": no_gpu,
        });
        outln!("{status}");
    } else {
        for s in &statuses {
            outln!("{s}");
        }
        for (i, g) in gpus.iter().enumerate() {
            outln!("gpu{i}: {}", describe(g));
        }
        if let Some(why) = &no_gpu {
            outln!("{why}: showing CPU and process figures only");
        }
        outln!(
            "watching process {watched}, every {:.1} s{}",
            interval.as_secs_f64(),
            match ticks_wanted {
                Some(n) => format!(", {n} samples"),
                None => " until interrupted".into(),
            }
        );
    }

    if let Some(path) = &args.csv
        && let Some(why) = tradetune_engine::market::source::database_in_the_way(path)
    {
        anyhow::bail!("--csv {}: {why}", path.display());
    }
    let mut csv = match &args.csv {
        Some(path) => Some(CsvLog::create(
            path,
            WideLayout::new(gpus.len() as u32, cores),
        )?),
        None => None,
    };

    let sources = source::sources(discovery, Some(Box::new(host)));
    let mut core = SamplerCore::new(config, sources, None)?;
    let ticks = core.subscribe();
    let sampler = Sampler::start(core)?;

    if !args.json {
        print_header();
    }
    let mut seen_problems = HashSet::new();
    let mut received = 0u64;
    // The newest sample's number: the samples before it that never arrived were dropped by
    // the sampler's channel while this loop lagged (a held pager, a slow disk).
    let mut last_seq = 0u64;
    // Far more than a tick can take (its probes get half an interval): a stall here is a bug
    // worth an error rather than a hang.
    let patience = interval * 4 + Duration::from_secs(10);
    let started = Instant::now();
    while ticks_wanted.is_none_or(|n| received < n) {
        let tick = match ticks.recv_timeout(patience) {
            Ok(t) => t,
            Err(RecvTimeoutError::Timeout) => anyhow::bail!(
                "no sample for {:.0} s: the sampler is stuck (after {received} samples, {:.0} s)",
                patience.as_secs_f64(),
                started.elapsed().as_secs_f64()
            ),
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("the sampler thread ended"),
        };
        received += 1;
        last_seq = last_seq.max(tick.seq);
        for p in &tick.problems {
            if seen_problems.insert(p.clone()) {
                errln!("note: {p}");
            }
        }
        for s in &tick.skipped {
            errln!(
                "note: probe `{s}` did not answer in time for sample {}",
                tick.seq
            );
        }
        if args.json {
            outln!("{}", tick_json(&tick));
        } else {
            print_tick(&tick, gpus.len());
        }
        if let Some(log) = csv.as_mut() {
            log.write_tick(&tick)?;
        }
    }
    let stats = sampler.stop();
    let dropped = last_seq.saturating_sub(received);
    if args.json {
        // Stdout stays one JSON object per line; the samples' `seq` shows where the gaps are.
        if dropped > 0 {
            errln!("note: {}", dropped_note(dropped, args.csv.is_some()));
        }
    } else {
        let skipped: u64 = stats.skipped.values().sum();
        outln!(
            "{}",
            summary_line(received, dropped, skipped, args.csv.as_deref())
        );
    }
    Ok(())
}

fn dropped_note(dropped: u64, csv: bool) -> String {
    format!(
        "{dropped} samples dropped (the output lagged behind the sampler): missing from the output{}",
        if csv { " and the CSV" } else { "" }
    )
}

/// The last line of the table: samples shown, dropped, answered late, and where they went.
fn summary_line(
    received: u64,
    dropped: u64,
    skipped: u64,
    csv: Option<&std::path::Path>,
) -> String {
    format!(
        "{received} samples{}{}{}",
        if dropped > 0 {
            format!(", {}", dropped_note(dropped, csv.is_some()))
        } else {
            String::new()
        },
        if skipped > 0 {
            format!(", {skipped} probe answers too late")
        } else {
            String::new()
        },
        match csv {
            Some(p) => format!(", written to {}", p.display()),
            None => String::new(),
        }
    )
}

fn describe(g: &GpuInfo) -> String {
    let mut parts = Vec::new();
    if let Some(id) = g.pci_bus_id {
        parts.push(format!("PCI {id}"));
    }
    if let Some(b) = g.mem_total_bytes {
        parts.push(format!("{:.0} MiB", b as f64 / (1024.0 * 1024.0)));
    }
    if parts.is_empty() {
        g.name.clone()
    } else {
        format!("{} ({})", g.name, parts.join(", "))
    }
}

fn gpu_json(i: usize, g: &GpuInfo) -> Value {
    json!({
        "device": format!("gpu{i}"),
        "vendor": g.vendor.to_string(),
        "name": g.name,
        "pci_bus_id": g.pci_bus_id.map(|p| p.to_string()),
        "uuid": g.uuid,
        "mem_total_mib": g.mem_total_bytes.map(|b| b as f64 / (1024.0 * 1024.0)),
    })
}

fn tick_json(tick: &Tick) -> Value {
    let mut devices = Map::new();
    for r in &tick.readings {
        let values: Map<String, Value> =
            r.values.iter().map(|(m, v)| (m.name(), json!(v))).collect();
        devices.insert(r.device.to_string(), Value::Object(values));
    }
    json!({
        "type": "sample",
        "seq": tick.seq,
        "timestamp_utc": tick.timestamp.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "trial": tick.trial,
        "devices": devices,
        "skipped": tick.skipped,
    })
}

fn print_header() {
    outln!(
        "{:<12} {:<5} {:>5} {:>5} {:>9} {:>6} {:>8} {:>7} {:>7}",
        "# time UTC",
        "dev",
        "util%",
        "mem%",
        "mem_MiB",
        "temp_C",
        "power_W",
        "sm_MHz",
        "mem_MHz"
    );
}

fn cell(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) => format!("{v:.decimals$}"),
        None => "-".into(),
    }
}

fn print_tick(tick: &Tick, gpus: usize) {
    let time = tick.timestamp.format("%H:%M:%S%.3f").to_string();
    for i in 0..gpus as u32 {
        let d = DeviceTag::Gpu(i);
        let g = |m| tick.get(d, m);
        outln!(
            "{:<12} {:<5} {:>5} {:>5} {:>9} {:>6} {:>8} {:>7} {:>7}",
            time,
            d.to_string(),
            cell(g(Metric::UtilPct), 0),
            cell(g(Metric::MemUtilPct), 0),
            cell(g(Metric::MemUsedMib), 0),
            cell(g(Metric::TempC), 0),
            cell(g(Metric::PowerW), 1),
            cell(g(Metric::SmClockMhz), 0),
            cell(g(Metric::MemClockMhz), 0),
        );
    }
    let h = |m| tick.get(DeviceTag::Host, m);
    outln!(
        "{:<12} {:<5} cpu {}%  process {}%  rss {} MiB{}",
        time,
        "host",
        cell(h(Metric::CpuPct), 0),
        cell(h(Metric::ProcessCpuPct), 0),
        cell(h(Metric::RssMib), 0),
        tick.trial
            .map(|t| format!("  trial {t}"))
            .unwrap_or_default()
    );
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Samples the channel dropped while the output lagged are said in the last line, not
    /// lost without a word.
    #[test]
    fn the_summary_says_how_many_samples_were_dropped() {
        let line = summary_line(10, 3, 0, Some(Path::new("gpu.csv")));
        assert_eq!(
            line,
            "10 samples, 3 samples dropped (the output lagged behind the sampler): missing from the output and the CSV, written to gpu.csv"
        );
        assert_eq!(summary_line(10, 0, 0, None), "10 samples");
    }
}
