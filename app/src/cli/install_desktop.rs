//! `tradetune install-desktop`: the launcher and icon for the current user, optionally on the
//! desktop too.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::install;

#[derive(Debug, Args)]
pub struct InstallDesktopArgs {
    /// Also put a launcher on the desktop (executable, marked trusted where `gio` exists).
    #[arg(long)]
    pub desktop: bool,
    /// Install under this data directory instead of `$XDG_DATA_HOME` (`~/.local/share`).
    #[arg(long, value_name = "DIR")]
    pub data_home: Option<PathBuf>,
    /// The desktop folder to use with `--desktop` instead of `XDG_DESKTOP_DIR`.
    #[arg(long, value_name = "DIR", requires = "desktop")]
    pub desktop_dir: Option<PathBuf>,
}

pub fn run(args: InstallDesktopArgs) -> anyhow::Result<()> {
    let plan = install::InstallPlan {
        exe: std::env::current_exe().context("finding this program's path")?,
        data_home: match args.data_home {
            Some(d) => d,
            None => dirs::data_dir().context("no user data directory (is $HOME set?)")?,
        },
        desktop: match (args.desktop, args.desktop_dir) {
            (false, _) => None,
            (true, Some(d)) => Some(d),
            (true, None) => {
                Some(dirs::desktop_dir().context("no desktop directory (XDG_DESKTOP_DIR)")?)
            }
        },
    };
    let done = install::install(&plan)?;
    for f in &done.files {
        outln!("wrote {}", f.display());
    }
    for n in &done.notes {
        outln!("{n}");
    }
    Ok(())
}
