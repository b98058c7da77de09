//! TradeTune's program: the desktop app (`ui`) and the headless subcommands (`cli`), over the
//! `tradetune-engine` library. A library target so the end-to-end UI tests drive the real
//! panels through `egui_kittest`.

// First, so that its macros (`outln!`, `errln!`, …) are in scope in every module after it.
#[macro_use]
pub mod out;

pub mod cli;
pub mod headless;
pub mod install;
pub mod launch;
pub mod leave;
pub mod signals;
pub mod ui;
