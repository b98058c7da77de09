//! Errors of market-data loading. Every error names the file, and where it applies the line
//! (1-based, as an editor shows it) and the field, so the user can fix the input.

use std::path::PathBuf;

/// What went wrong while reading or preparing market data.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// Arrays handed to [`crate::Dataset::from_arrays`] do not fit together.
    #[error("inconsistent dataset: {what}")]
    Shape { what: String },

    /// A problem at a specific place of a specific file.
    #[error("{}: {message}", location(path, *line, field.as_deref()))]
    Input {
        path: PathBuf,
        /// 1-based line, when the problem is on one line.
        line: Option<u64>,
        /// Column name, when the problem is in one field.
        field: Option<String>,
        message: String,
    },

    /// The file could not be opened or read at all.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A problem with the data as a whole (no overlap between assets, too few bars, ...).
    #[error("{0}")]
    Data(String),

    /// A split that cannot be made.
    #[error(transparent)]
    Split(#[from] crate::split::SplitError),
}

fn location(path: &std::path::Path, line: Option<u64>, field: Option<&str>) -> String {
    let mut s = path.display().to_string();
    if let Some(l) = line {
        s.push_str(&format!(", line {l}"));
    }
    if let Some(f) = field {
        s.push_str(&format!(", field '{f}'"));
    }
    s
}

impl DataError {
    /// An error at `path`, optionally on a line and in a field.
    pub fn input(
        path: impl Into<PathBuf>,
        line: Option<u64>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Self::Input {
            path: path.into(),
            line,
            field: field.map(str::to_owned),
            message: message.into(),
        }
    }
}
