//! The market data's job: load it off the UI thread, for the Configure panel and a run.

use std::path::PathBuf;
use std::sync::Arc;

use tradetune_engine::market::Dataset;
use tradetune_engine::market::load::DatasetConfig;

use super::{Jobs, TaskEvent};
use crate::ui::draft::{DataShape, Draft};

/// A loaded dataset, as the Configure panel shows it and a run uses it.
#[derive(Clone)]
pub struct DataInfo {
    /// The files (empty: the bundled sample).
    pub paths: Vec<PathBuf>,
    /// Where it came from, for people.
    pub source: String,
    /// Asset names in column order.
    pub assets: Vec<String>,
    /// Sizes the estimate needs.
    pub shape: DataShape,
    /// First and last timestamp (Unix seconds) of the aligned data.
    pub range: (i64, i64),
    /// The aligned data (its timestamps are what the draft's split is resolved over).
    pub dataset: Arc<Dataset>,
}

/// Wrapper so [`TaskEvent`] stays `Debug` without printing a whole dataset.
pub struct DataInfoMsg(pub DataInfo);

impl std::fmt::Debug for DataInfoMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataInfo({})", self.0.source)
    }
}

impl Jobs {
    /// Loads market data (empty `paths`: the bundled sample) with the draft's lookback. The
    /// split stays the default one: the bars do not depend on it, and the panels resolve the
    /// draft's own split over them as it is typed, so a bad split is flagged on the split
    /// rather than failing the load.
    pub fn load_data(&self, request: u64, paths: Vec<PathBuf>, draft: &Draft) {
        let config = DatasetConfig {
            paths: paths.clone(),
            lookback: draft.env.lookback,
            episode_bars: draft.env.episode_bars,
            ..DatasetConfig::default()
        };
        let lost = move |why| TaskEvent::Data {
            request,
            result: Err(why),
        };
        self.spawn("data", lost, move |reply| {
            let result = config.load().map_err(|e| e.to_string()).map(|loaded| {
                let d = &loaded.dataset;
                let ts = &d.timestamps;
                Box::new(DataInfoMsg(DataInfo {
                    paths,
                    source: loaded.source_name.clone(),
                    assets: d.names.clone(),
                    shape: DataShape::of(d),
                    range: (
                        ts.first().copied().unwrap_or(0),
                        ts.last().copied().unwrap_or(0),
                    ),
                    dataset: Arc::new(loaded.dataset),
                }))
            });
            reply.send(TaskEvent::Data { request, result });
        });
    }
}
