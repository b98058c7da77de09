//! Optuna's model, defined once for the whole engine: distributions and their checks
//! ([`OptunaDistribution`]), parameter values ([`ParamValue`], [`CategoricalChoice`]), the
//! internal (f64) ↔ external value conversions, trial states ([`TrialState`]) and study
//! directions ([`StudyDirection`]).
//!
//! Storage encodes these types to and from Optuna's JSON and SQL forms
//! (`storage::distribution_json`, the state names); studies sample them (`study::space` groups
//! named distributions in a search space). Nothing here reads or writes a database.

pub(crate) mod decimal;
mod distribution;
mod repr;
mod state;
mod value;

pub use distribution::{
    CategoricalDistribution, DistributionError, FloatDistribution, IntDistribution,
    OptunaDistribution,
};
pub use state::{StudyDirection, TrialState};
pub use value::{CategoricalChoice, ParamValue};
