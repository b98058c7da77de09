//! Every user action as a value, routed in one place ([`super::TradeTuneApp::handle`]) to the
//! panel that owns it: a button, a shortcut and a test all go through the same path. A panel
//! carries out its commands with a [`Cx`].

use std::path::PathBuf;

use tradetune_engine::storage::TrialState;

use super::panels::studies::{PlotTab, TrialColumn};
use super::state::{AppState, DataState, Tab};
use super::tasks::Tasks;

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
    /// Start the study the draft describes.
    Start,
    /// Stop the study: running trials end, no new ones start.
    Stop,
    /// Stop one running trial of the study.
    StopTrial(u64),
    /// Show this trial's curve in the Run panel.
    SelectRunTrial(u64),
    /// Open the running (or last) study in the Studies panel.
    ShowRunInStudies,
    /// Search this parameter, starting from a range around its fixed value.
    AddSearch(String),
    /// Stop searching this parameter (it keeps its fixed value).
    RemoveSearch(String),
    /// Add this device to the study's devices (a device listed twice takes two workers' slots).
    AddDevice(String),
    /// Remove the study's device at this index.
    RemoveDevice(usize),
    /// Ask wgpu for its adapters again and list the devices anew (a card plugged in, a driver
    /// installed).
    RefreshDevices,
    /// Pick a study database with a native dialog.
    PickDatabase,
    /// Open this study database.
    OpenDatabase(PathBuf),
    /// Show the trials of this study (or aggregated group).
    SelectStudy(String),
    /// Sort the trial table by this column (again: reverse).
    SortTrials(TrialColumn),
    /// Show or hide a column of the trial table.
    ToggleColumn(TrialColumn),
    /// Read what changed in the open study now (the table and plots also refresh on a timer
    /// while live).
    RefreshTrials,
    /// Read the open study again on a timer (or stop).
    SetLive(bool),
    /// Keep only trials whose parameter lies in this range on its parallel-coordinates axis
    /// (plotted units; None: clear the axis's brush).
    BrushAxis(String, Option<(f64, f64)>),
    /// Show this plot of the selected study.
    ShowPlot(PlotTab),
    /// Draw the contour plot over these two parameters (x, y).
    ContourParams(String, String),
    /// Show the selected study's Report view (true) or its trials and plots (false).
    ShowReport(bool),
    /// Report this member of the selected group.
    ReportStudy(String),
    /// Compute the report again if the study changed since (the view asks when it is stale).
    RefreshReport,
    /// Train the reported study's best trial again with this many seeds (in the background).
    Reseed(usize),
    /// The K of "Re-run best trial with K seeds".
    SetReseedSeeds(usize),
    /// Stop the re-run with other seeds.
    CancelReseed,
    /// Show the details of this row of the trial table (an index into its rows).
    ShowTrial(usize),
    /// Show only trials in this state (None: all).
    FilterTrials(Option<TrialState>),
    /// Save the shown study's trials as CSV (dialog first).
    ExportTrials,
    /// Pick a checkpoint directory with a native dialog.
    PickCheckpoint,
    /// Backtest the chosen checkpoint on the chosen split.
    Backtest,
    /// Backtest a trial's saved policy (its checkpoint directory) in the Backtest panel.
    BacktestTrial(std::path::PathBuf),
    /// Compare two studies or trials (`study`, `study#N`) of the open database.
    Compare(String, String),
    /// Save the shown study's telemetry as CSV (dialog first).
    ExportTelemetry,
    /// Copy the visible trial table as CSV to the clipboard.
    CopyTrials,
    /// Install the desktop launcher and icon for this user (`tradetune install-desktop`).
    InstallLauncher {
        /// Also on the desktop.
        on_desktop: bool,
    },
}

/// What a command (or a background job's answer) is carried out with: the app's state, its
/// background jobs and the clipboard.
pub struct Cx<'a> {
    /// What the app knows.
    pub state: &'a mut AppState,
    /// Starts background jobs.
    pub tasks: &'a mut Tasks,
    /// Text to put on the clipboard at the end of the frame.
    pub clipboard: &'a mut Option<String>,
}

impl Cx<'_> {
    /// Loads the market data from `paths` (empty: the bundled sample) with the draft's
    /// lookback; answers to older loads are dropped.
    pub fn load_data(&mut self, paths: Vec<PathBuf>) {
        let state = &mut *self.state;
        state.data_requests += 1;
        state.data = DataState::Loading(state.data_requests);
        self.tasks
            .load_data(state.data_requests, paths, &state.settings.draft);
    }

    /// Loads the data files of the settings again (the lookback changed).
    pub fn reload_data(&mut self) {
        let files = self.state.settings.data_files.clone();
        self.load_data(files);
    }
}
