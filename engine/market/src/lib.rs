//! Market data: readers for the CSV shapes users have, alignment of several assets onto common
//! timestamps, technical features, train/validation/test splits and a synthetic generator.
//!
//! The end product is a [`Dataset`]: contiguous `f32` arrays the environments index directly.
//! [`DatasetConfig::load`] goes from files (or the bundled sample) to a [`LoadedDataset`].

pub mod align;
pub mod bars;
pub mod dataset;
pub mod error;
pub mod features;
pub mod gaps;
pub mod inspect;
pub mod load;
pub mod read;
pub mod scaling;
pub mod source;
pub mod split;
pub mod synth;
pub mod time;

pub use bars::AssetBars;
pub use dataset::Dataset;
pub use error::DataError;
pub use load::{DatasetConfig, LoadedDataset};
