//! `tradetune`: with no arguments the desktop program; with a subcommand the same engine,
//! headless.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    match args.command {
        None => {
            // The desktop program is not built yet: say what the CLI can do.
            use clap::CommandFactory;
            let mut cmd = cli::Cli::command();
            let _ = cmd.print_long_help();
            std::process::ExitCode::SUCCESS
        }
        Some(command) => match cli::run(command) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}
