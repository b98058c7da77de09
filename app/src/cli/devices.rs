//! `tradetune devices`: what this build can train on, on this machine, and why not where it
//! cannot: the CPU, `wgpu` (wgpu's default adapter) and every wgpu adapter under its own name
//! (`wgpu:0`, `wgpu:integrated:0`, `wgpu:cpu`, …) with its type, memory and driver.

use clap::Args;
use tradetune_engine::device::describe_devices;
use tradetune_engine::device::memory::fmt_bytes;

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Print JSON (an array of devices) instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DevicesArgs) -> anyhow::Result<()> {
    let devices = describe_devices();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&devices)?);
        return Ok(());
    }
    outln!(
        "{:<18} {:<7} {:<3} {:<17} {:>10} {:<14} {:<4} detail",
        "device",
        "backend",
        "ok",
        "type",
        "memory",
        "precisions",
        "pool"
    );
    for d in devices {
        let precisions: Vec<&str> = d.precisions.iter().map(|p| p.name()).collect();
        let kind = d.adapter.as_ref().map_or("-", |a| a.kind.label());
        let driver = d
            .adapter
            .as_ref()
            .filter(|a| !a.driver.is_empty())
            .map(|a| format!("; driver {}", a.driver))
            .unwrap_or_default();
        outln!(
            "{:<18} {:<7} {:<3} {:<17} {:>10} {:<14} {:<4} {}{}",
            d.name,
            d.backend,
            if d.available { "yes" } else { "no" },
            kind,
            d.memory_bytes.map(fmt_bytes).unwrap_or_else(|| "-".into()),
            precisions.join(","),
            if d.reports_pool_usage { "yes" } else { "no" },
            d.detail,
            driver
        );
    }
    Ok(())
}
