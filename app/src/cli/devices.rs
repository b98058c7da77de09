//! `tradetune devices`: what this build can train on, on this machine, and why not where it
//! cannot.

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
        println!("{}", serde_json::to_string_pretty(&devices)?);
        return Ok(());
    }
    println!(
        "{:<8} {:<6} {:<5} {:>10} {:<14} {:<5} detail",
        "device", "backend", "ok", "memory", "precisions", "pool"
    );
    for d in devices {
        let precisions: Vec<&str> = d.precisions.iter().map(|p| p.name()).collect();
        println!(
            "{:<8} {:<6} {:<5} {:>10} {:<14} {:<5} {}",
            d.name,
            d.backend,
            if d.available { "yes" } else { "no" },
            d.memory_bytes.map(fmt_bytes).unwrap_or_else(|| "-".into()),
            precisions.join(","),
            if d.reports_pool_usage { "yes" } else { "no" },
            d.detail
        );
    }
    Ok(())
}
