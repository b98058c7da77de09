//! TradeTune's engine: everything that is not UI.
//!
//! - [`market`]: market data — CSV readers, alignment of assets, features, splits, synthetic data.
//! - [`env`]: the vectorized multi-asset trading environment (CPU and on-device tensor versions).
//!
//! The engine never imports a UI crate; long-running work reports through engine-defined events.

pub mod device;
pub mod env;
pub mod market;
pub mod ppo;
