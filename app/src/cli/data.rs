//! `tradetune data inspect|synth`.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum DataCommand {}

pub fn run(command: DataCommand) -> anyhow::Result<()> {
    match command {}
}
