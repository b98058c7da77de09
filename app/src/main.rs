//! `tradetune`: with no arguments the desktop program; with a subcommand the same engine,
//! headless.

use clap::Parser;
use tradetune_app::{cli, ui};

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    let result = match args.command {
        None => ui::run_native(ui::LaunchOptions {
            exit_after_frames: args.exit_after_frames,
        }),
        Some(command) => {
            // Before any wgpu instance: see `headless` for what is quieted and why.
            tradetune_app::headless::quiet_wayland_log();
            cli::run(command)
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
