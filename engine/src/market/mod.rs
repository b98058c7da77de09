//! Market data: readers for the CSV shapes users have, alignment of several assets onto common
//! timestamps, technical features, train/validation/test splits and a synthetic generator.
//!
//! The end product is a [`Dataset`]: contiguous `f32` arrays the environments index directly.

pub mod align;
pub mod bars;
pub mod dataset;
pub mod error;
pub mod features;
pub mod inspect;
pub mod read;
pub mod scaling;
pub mod split;
pub mod synth;

pub use bars::AssetBars;
pub use dataset::Dataset;
pub use error::DataError;
