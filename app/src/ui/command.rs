//! Every user action as a value, handled in one place ([`super::TradeTuneApp::handle`]): a
//! button, a shortcut and a test all go through the same path.

use std::path::PathBuf;

use tradetune_engine::storage::TrialState;

use super::state::{Tab, TrialColumn};

/// A user action.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Show a panel.
    SetTab(Tab),
    /// Apply the preset with this name to the draft.
    ApplyPreset(String),
    /// Save the draft as a user preset under this name.
    SavePreset(String),
    /// Delete the user preset with this name.
    DeletePreset(String),
    /// Train on the bundled sample.
    UseBundledData,
    /// Pick market files with a native dialog.
    PickDataFiles,
    /// Train on these files.
    UseDataFiles(Vec<PathBuf>),
    /// Reload the data (after a lookback change).
    ReloadData,
    /// Start a run with the draft.
    Start,
    /// Stop the run.
    Stop,
    /// Pick a study database with a native dialog.
    PickDatabase,
    /// Open this study database.
    OpenDatabase(PathBuf),
    /// Show the trials of this study (or aggregated group).
    SelectStudy(String),
    /// Sort the trial table by this column (again: reverse).
    SortTrials(TrialColumn),
    /// Show only trials in this state (None: all).
    FilterTrials(Option<TrialState>),
    /// Save the shown study's trials as CSV (dialog first).
    ExportTrials,
    /// Copy the visible trial table as CSV to the clipboard.
    CopyTrials,
    /// Install the desktop launcher and icon for this user (`tradetune install-desktop`).
    InstallLauncher {
        /// Also on the desktop.
        on_desktop: bool,
    },
}
