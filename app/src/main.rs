//! `tradetune`: with no arguments the desktop program; with a subcommand the same engine,
//! headless.

use std::io::Write as _;

use clap::Parser;
use tradetune_app::{cli, ui};

fn main() -> ! {
    let args = cli::Cli::parse();
    let result = match args.command {
        None => {
            let result = ui::run_native(ui::LaunchOptions {
                exit_after_frames: args.exit_after_frames,
            });
            tradetune_app::leave::finish_gpu_work();
            result
        }
        Some(command) => {
            // Before any wgpu instance: see `headless` for what is quieted and why.
            tradetune_app::headless::quiet_wayland_log();
            // It returns once its GPU work is finished (and has said what that met).
            cli::run(command)
        }
    };
    let code = match result {
        // Its output was closed before it had written all of it (`… | head`).
        Ok(()) if tradetune_app::out::closed() => tradetune_app::signals::CLOSED_STATUS,
        Ok(()) => 0,
        Err(e) => {
            // Not `eprintln!`, which panics where stderr is closed too.
            let _ = writeln!(
                std::io::stderr(),
                "error: {}",
                tradetune_app::out::error_text(&e)
            );
            tradetune_app::leave::exit_code(&e)
        }
    };
    // After the GPU's work, without the libraries' exit handlers: see `leave`.
    tradetune_app::leave::leave(code)
}
