//! Native file dialogs behind an interface: the app asks for a path, a real dialog (rfd over the
//! XDG desktop portal) or a test answers. Dialogs run on a background thread so the window keeps
//! drawing while one is open.

use std::path::PathBuf;

/// What a dialog is for; the answer comes back tagged with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// Market data files to train on.
    DataFiles,
    /// A study database to open (TradeTune's or Optuna's SQLite).
    Database,
    /// A checkpoint directory (`tradetune train --out DIR`).
    Checkpoint,
    /// Where to save the trials of a study as CSV.
    TrialsCsv(ExportOf),
    /// Where to save the telemetry of a study as CSV.
    TelemetryCsv(ExportOf),
}

/// What an export dialog is asked for: the suggested file name, and the database and studies
/// it exports, fixed when the dialog opens (the window stays live while it is open: another
/// study selected or another database opened meanwhile is not what was asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportOf {
    /// The suggested file name (`x_trials.csv`).
    pub file_name: String,
    /// The database the studies are read from.
    pub db: PathBuf,
    /// The studies (one, or the members of an aggregated group).
    pub studies: Vec<String>,
}

/// Answers a [`Pick`] with zero (cancelled), one or several paths. Called on a background
/// thread.
pub trait FileDialogs: Send + Sync {
    /// Shows the dialog for `pick` and waits for the answer.
    fn pick(&self, pick: &Pick) -> Vec<PathBuf>;
}

/// The desktop's own dialogs through rfd (the XDG portal on Linux).
pub struct NativeDialogs;

impl FileDialogs for NativeDialogs {
    fn pick(&self, pick: &Pick) -> Vec<PathBuf> {
        let dialog = rfd::FileDialog::new();
        match pick {
            Pick::DataFiles => dialog
                .set_title("Market data (CSV, gzip, Binance klines)")
                .add_filter("market data", &["csv", "gz", "txt"])
                .pick_files()
                .unwrap_or_default(),
            Pick::Database => dialog
                .set_title("Open a study database")
                .add_filter("SQLite", &["db", "sqlite", "sqlite3"])
                .pick_file()
                .into_iter()
                .collect(),
            Pick::Checkpoint => dialog
                .set_title("A checkpoint directory (tradetune train --out DIR)")
                .pick_folder()
                .into_iter()
                .collect(),
            Pick::TrialsCsv(of) | Pick::TelemetryCsv(of) => dialog
                .set_title("Save as CSV")
                .set_file_name(&of.file_name)
                .add_filter("CSV", &["csv"])
                .save_file()
                .into_iter()
                .collect(),
        }
    }
}
