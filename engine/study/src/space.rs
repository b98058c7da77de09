//! Search spaces: named Optuna distributions, ordered by name.
//!
//! The distributions, parameter values and their internal (f64) representation are Optuna's
//! model, defined once in [`tradetune_storage::model`] and re-exported here; this module groups
//! them by parameter name and names the parameter in every error.

use std::collections::BTreeMap;

pub use tradetune_storage::model::{
    CategoricalChoice, CategoricalDistribution, DistributionError, FloatDistribution,
    IntDistribution, OptunaDistribution, ParamValue,
};

/// A problem with a named parameter of a search space.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpaceError {
    #[error("search parameter '{name}': {source}")]
    Invalid {
        name: String,
        #[source]
        source: DistributionError,
    },
    #[error("search parameter '{name}' is defined twice")]
    Duplicate { name: String },
    #[error("parameter '{name}' is not in the search space (its parameters: {known})")]
    Unknown { name: String, known: String },
    #[error("parameter '{name}' has no value")]
    Missing { name: String },
    #[error(
        "search parameter '{name}': the range [{low}, {high}] is wider than a float can hold \
         (high - low is infinite); narrow it or search it with log = true"
    )]
    RangeTooWide { name: String, low: f64, high: f64 },
}

/// Parameter values of one trial in internal representation, by name (what Optuna stores).
pub type InternalParams = BTreeMap<String, f64>;

/// Named parameters and their distributions, ordered by name (as Optuna's intersection search
/// space is, which fixes the order in which samplers draw them).
#[derive(Debug, Clone, Default)]
pub struct SearchSpace {
    params: BTreeMap<String, OptunaDistribution>,
}

impl SearchSpace {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a parameter; a name may be defined once, and the distribution is checked (its
    /// fields are public, so it may have been built by hand).
    pub fn insert(&mut self, name: &str, dist: OptunaDistribution) -> Result<(), SpaceError> {
        if self.params.contains_key(name) {
            return Err(SpaceError::Duplicate {
                name: name.to_owned(),
            });
        }
        let dist = dist.validated().map_err(|e| invalid(name, e))?;
        // Samplers draw low + u·(high − low): an infinite width gives inf or NaN values.
        if let OptunaDistribution::Float(d) = &dist
            && !d.log
            && !(d.high - d.low).is_finite()
        {
            return Err(SpaceError::RangeTooWide {
                name: name.to_owned(),
                low: d.low,
                high: d.high,
            });
        }
        self.params.insert(name.to_owned(), dist);
        Ok(())
    }

    /// Adds a float parameter (see [`FloatDistribution::new`]).
    pub fn add_float(
        &mut self,
        name: &str,
        low: f64,
        high: f64,
        log: bool,
        step: Option<f64>,
    ) -> Result<(), SpaceError> {
        let d = FloatDistribution::new(low, high, log, step).map_err(|e| invalid(name, e))?;
        self.insert(name, OptunaDistribution::Float(d))
    }

    /// Adds an integer parameter (see [`IntDistribution::new`]).
    pub fn add_int(
        &mut self,
        name: &str,
        low: i64,
        high: i64,
        log: bool,
        step: i64,
    ) -> Result<(), SpaceError> {
        let d = IntDistribution::new(low, high, log, step).map_err(|e| invalid(name, e))?;
        self.insert(name, OptunaDistribution::Int(d))
    }

    /// Adds a categorical parameter.
    pub fn add_categorical(
        &mut self,
        name: &str,
        choices: Vec<CategoricalChoice>,
    ) -> Result<(), SpaceError> {
        let d = CategoricalDistribution::new(choices).map_err(|e| invalid(name, e))?;
        self.insert(name, OptunaDistribution::Categorical(d))
    }

    pub fn get(&self, name: &str) -> Option<&OptunaDistribution> {
        self.params.get(name)
    }

    /// Parameters in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &OptunaDistribution)> {
        self.params.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.params.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// Every value each parameter can take at its ends, in name order: the bounds of ranges
    /// and every choice of categoricals, for worst-case checks (the memory of presets, whether
    /// any trial of a study can run).
    pub fn extreme_values(&self) -> Vec<(String, Vec<ParamValue>)> {
        self.iter()
            .map(|(name, d)| {
                let values = match d {
                    OptunaDistribution::Float(f) => {
                        vec![ParamValue::Float(f.low), ParamValue::Float(f.high)]
                    }
                    // The constructors refuse a `high` off the step grid.
                    OptunaDistribution::Int(i) => {
                        vec![ParamValue::Int(i.low), ParamValue::Int(i.high)]
                    }
                    OptunaDistribution::Categorical(c) => {
                        c.choices.iter().cloned().map(ParamValue::Choice).collect()
                    }
                };
                (name.to_owned(), values)
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    fn lookup(&self, name: &str) -> Result<&OptunaDistribution, SpaceError> {
        self.params.get(name).ok_or_else(|| SpaceError::Unknown {
            name: name.to_owned(),
            known: self.names().collect::<Vec<_>>().join(", "),
        })
    }

    /// External values → internal representation; every name must be in the space and every
    /// value in its distribution's range.
    pub fn to_internal(
        &self,
        values: &BTreeMap<String, ParamValue>,
    ) -> Result<InternalParams, SpaceError> {
        let mut out = InternalParams::new();
        for (name, value) in values {
            let dist = self.lookup(name)?;
            let v = dist.to_internal(value).map_err(|e| invalid(name, e))?;
            if !dist.contains(v) {
                return Err(invalid(
                    name,
                    DistributionError::WrongValue {
                        value: value.to_string(),
                        expected: format!("value of {dist}"),
                    },
                ));
            }
            out.insert(name.clone(), v);
        }
        Ok(out)
    }

    /// Internal representation → external values, for every parameter of the space.
    pub fn to_external(
        &self,
        params: &InternalParams,
    ) -> Result<BTreeMap<String, ParamValue>, SpaceError> {
        self.iter()
            .map(|(name, dist)| {
                let v = params.get(name).ok_or_else(|| SpaceError::Missing {
                    name: name.to_owned(),
                })?;
                let value = dist.to_external(*v).map_err(|e| invalid(name, e))?;
                Ok((name.to_owned(), value))
            })
            .collect()
    }
}

fn invalid(name: &str, source: DistributionError) -> SpaceError {
    SpaceError::Invalid {
        name: name.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_float_range_wider_than_a_float_is_refused_naming_it() {
        let mut s = SearchSpace::new();
        let e = s.add_float("x", -1e308, 1e308, false, None).unwrap_err();
        assert!(
            e.to_string().starts_with("search parameter 'x': the range"),
            "{e}"
        );
        assert!(s.is_empty());
        s.add_float("x", -1e307, 1e307, false, None).unwrap();
        s.add_float("y", 1e-300, 1e300, true, None).unwrap();
    }

    #[test]
    fn search_space_names_errors() {
        let mut s = SearchSpace::new();
        s.add_float("ppo.learning_rate", 1e-5, 1e-2, true, None)
            .unwrap();
        s.add_int("env.n_envs", 8, 64, false, 8).unwrap();
        assert_eq!(
            s.add_int("env.n_envs", 1, 2, false, 1),
            Err(SpaceError::Duplicate {
                name: "env.n_envs".into()
            })
        );
        let e = s.add_float("ppo.gamma", 1.0, 0.9, false, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "search parameter 'ppo.gamma': low (1) must not exceed high (0.9)"
        );
        let mut ext = BTreeMap::new();
        ext.insert("ppo.lr".to_owned(), ParamValue::Float(0.1));
        let e = s.to_internal(&ext).unwrap_err();
        assert!(
            e.to_string().contains("env.n_envs, ppo.learning_rate"),
            "{e}"
        );
        ext.clear();
        ext.insert("env.n_envs".to_owned(), ParamValue::Int(12));
        assert!(s.to_internal(&ext).is_err(), "12 is off the step grid");
        ext.insert("env.n_envs".to_owned(), ParamValue::Int(16));
        assert_eq!(s.to_internal(&ext).unwrap()["env.n_envs"], 16.0);

        // A distribution built by hand is checked too; a stored value that is not one of the
        // distribution's names its parameter.
        let broken = OptunaDistribution::Float(FloatDistribution {
            step: None,
            low: 2.0,
            high: 1.0,
            log: false,
        });
        let e = s.insert("ppo.ent_coef", broken).unwrap_err();
        assert!(
            e.to_string().starts_with("search parameter 'ppo.ent_coef'"),
            "{e}"
        );
        let mut cat = SearchSpace::new();
        cat.add_categorical("act", vec![CategoricalChoice::Str("tanh".into())])
            .unwrap();
        let e = cat
            .to_external(&InternalParams::from([("act".to_owned(), 3.0)]))
            .unwrap_err();
        assert!(e.to_string().starts_with("search parameter 'act'"), "{e}");
    }
}
