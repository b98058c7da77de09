//! `tradetune`: with no arguments the desktop program; with a subcommand the same engine,
//! headless.

use clap::Parser;
use tradetune_app::{cli, ui};

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    match args.command {
        None => match ui::run_native(ui::LaunchOptions {
            exit_after_frames: args.exit_after_frames,
        }) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => fail(&e),
        },
        Some(command) => {
            // Before any wgpu instance: see `headless` for what is quieted and why.
            tradetune_app::headless::quiet_wayland_log();
            let code = match cli::run(command) {
                Ok(()) => 0,
                Err(e) => {
                    fail(&e);
                    1
                }
            };
            // After the GPU's work, without the libraries' exit handlers: see `headless`.
            tradetune_app::headless::exit(code)
        }
    }
}

fn fail(e: &anyhow::Error) -> std::process::ExitCode {
    eprintln!("error: {e:#}");
    std::process::ExitCode::FAILURE
}
