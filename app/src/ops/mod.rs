//! What both front ends do: the CLI's subcommands (`crate::cli`) and the app's background
//! tasks (`crate::ui`) call these, and neither imports the other.

pub mod backtest;
pub mod compare;
pub mod data_source;
pub mod export;
pub mod number;
