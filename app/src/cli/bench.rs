//! `tradetune bench env|...`.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {}
}
