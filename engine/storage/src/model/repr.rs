//! A parameter's two forms under its distribution, external ([`ParamValue`]) and internal
//! (the f64 samplers and Optuna's `trial_params.param_value` hold: Optuna's
//! `to_internal_repr` / `to_external_repr`), and which distributions one parameter name may
//! have within a study (Optuna's `check_distribution_compatibility`).

use super::distribution::{DistributionError, OptunaDistribution, list};
use super::value::ParamValue;

impl OptunaDistribution {
    /// External value → internal representation (Optuna's `to_internal_repr`). Checks the
    /// type (and, for categoricals, membership) but not the range; see [`Self::contains`].
    pub fn to_internal(&self, value: &ParamValue) -> Result<f64, DistributionError> {
        let wrong = |expected: &str| DistributionError::WrongValue {
            value: value.to_string(),
            expected: expected.to_owned(),
        };
        match self {
            OptunaDistribution::Float(d) => match value.as_number() {
                Some(v) if v.is_nan() => Err(wrong("float (NaN is not a parameter value)")),
                Some(v) if d.log && v <= 0.0 => Err(wrong("value of a log-scale float")),
                Some(v) => Ok(v),
                None => Err(wrong("float")),
            },
            OptunaDistribution::Int(d) => match value.as_number() {
                // NaN's and ±inf's `fract()` is NaN.
                Some(v) if v.fract() != 0.0 => Err(wrong("integer")),
                Some(v) if d.log && v < 1.0 => Err(wrong("value of a log-scale integer")),
                Some(v) => Ok(v),
                None => Err(wrong("integer")),
            },
            OptunaDistribution::Categorical(d) => d
                .index_of(value)
                .map(|i| i as f64)
                .ok_or_else(|| wrong(&format!("choice (choices: {})", list(&d.choices)))),
        }
    }

    /// Internal representation → external value (Optuna's `to_external_repr`). An int or a
    /// choice index that is not an integer in range is refused, not rounded.
    pub fn to_external(&self, internal: f64) -> Result<ParamValue, DistributionError> {
        let wrong = |expected: String| DistributionError::WrongValue {
            value: internal.to_string(),
            expected,
        };
        match self {
            OptunaDistribution::Float(_) => Ok(ParamValue::Float(internal)),
            OptunaDistribution::Int(_) if internal.fract() == 0.0 && internal.abs() < 9.2e18 => {
                Ok(ParamValue::Int(internal as i64))
            }
            OptunaDistribution::Int(_) => Err(wrong("integer".to_owned())),
            OptunaDistribution::Categorical(d) => d
                .choices
                .get(internal as usize)
                .filter(|_| d.contains(internal))
                .map(|c| ParamValue::Choice(c.clone()))
                .ok_or_else(|| {
                    wrong(format!(
                        "choice index (0 to {})",
                        d.choices.len().saturating_sub(1)
                    ))
                }),
        }
    }

    /// Optuna's `check_distribution_compatibility(old, new)`: the same class, the same `log`,
    /// and for categoricals the same choices. Returns the reason when they are not compatible.
    pub fn compatibility_with(&self, new: &OptunaDistribution) -> Result<(), String> {
        use OptunaDistribution as D;
        match (self, new) {
            (D::Float(a), D::Float(b)) if a.log != b.log => {
                Err("cannot set a different log configuration for the same parameter name".into())
            }
            (D::Int(a), D::Int(b)) if a.log != b.log => {
                Err("cannot set a different log configuration for the same parameter name".into())
            }
            (D::Float(_), D::Float(_)) | (D::Int(_), D::Int(_)) => Ok(()),
            (D::Categorical(a), D::Categorical(b)) => {
                if a == b {
                    Ok(())
                } else {
                    Err("CategoricalDistribution does not support dynamic value space".into())
                }
            }
            _ => Err("cannot set a different distribution kind for the same parameter name".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CategoricalChoice as C;

    #[test]
    fn internal_representation_is_optunas() {
        let cat = OptunaDistribution::categorical(vec![
            C::Str("f32".into()),
            C::Bool(true),
            C::Int(3),
            C::Float(f64::NAN),
            C::None,
        ])
        .unwrap();
        assert_eq!(cat.to_internal(&ParamValue::str("f32")), Ok(0.0));
        assert_eq!(cat.to_internal(&ParamValue::bool(true)), Ok(1.0));
        assert_eq!(cat.to_internal(&ParamValue::Float(3.0)), Ok(2.0));
        assert_eq!(cat.to_internal(&ParamValue::Int(3)), Ok(2.0));
        assert_eq!(cat.to_internal(&ParamValue::Float(f64::NAN)), Ok(3.0));
        assert_eq!(cat.to_internal(&ParamValue::Choice(C::None)), Ok(4.0));
        // Python's `[…, True, …].index(1)` finds True; TradeTune does not (model docs).
        assert!(
            cat.to_internal(&ParamValue::Int(1)).is_err(),
            "true is not 1"
        );
        assert_eq!(cat.to_external(2.0), Ok(ParamValue::Choice(C::Int(3))));
        assert!(cat.to_external(5.0).is_err() && cat.to_external(1.5).is_err());
        assert!(cat.contains(4.0) && !cat.contains(-1.0) && !cat.contains(0.5));

        let int = OptunaDistribution::int(1, 64, true, 1).unwrap();
        assert_eq!(int.to_internal(&ParamValue::Int(32)), Ok(32.0));
        assert_eq!(int.to_external(32.0), Ok(ParamValue::Int(32)));
        assert!(int.to_external(f64::NAN).is_err() && int.to_external(2.5).is_err());
        assert!(int.to_internal(&ParamValue::Float(1.5)).is_err());
        assert!(
            int.to_internal(&ParamValue::Int(0)).is_err(),
            "log needs >= 1"
        );
        assert!(int.to_internal(&ParamValue::str("2")).is_err());
        let stepped = OptunaDistribution::int(32, 256, false, 32).unwrap();
        assert!(stepped.contains(64.0) && !stepped.contains(65.0) && !stepped.contains(288.0));

        let float = OptunaDistribution::float(1e-5, 1e-2, true, None).unwrap();
        assert_eq!(float.to_internal(&ParamValue::Float(3e-4)), Ok(3e-4));
        assert!(float.to_internal(&ParamValue::Float(-1.0)).is_err());
        assert!(float.to_internal(&ParamValue::Float(f64::NAN)).is_err());
        assert!(float.to_internal(&ParamValue::bool(true)).is_err());
        assert!(!float.contains(0.5));
        let f = OptunaDistribution::float(0.1, 0.3, false, Some(0.05)).unwrap();
        assert!(f.contains(0.25) && f.contains(0.1) && !f.contains(0.26) && !f.contains(0.35));
        assert!(
            !f.single()
                && OptunaDistribution::float(0.1, 0.1, false, Some(0.05))
                    .unwrap()
                    .single()
        );
        assert_eq!(float.to_string(), "float [0.00001, 0.01] log");
    }

    #[test]
    fn compatibility_follows_optuna() {
        let a = OptunaDistribution::float(0.0, 1.0, false, None).unwrap();
        let b = OptunaDistribution::float(-5.0, 5.0, false, Some(0.5)).unwrap();
        let lg = OptunaDistribution::float(0.1, 1.0, true, None).unwrap();
        let i = OptunaDistribution::int(0, 3, false, 1).unwrap();
        let c1 = OptunaDistribution::categorical(vec![
            C::Str("tanh".into()),
            C::Str("relu".into()),
            C::Str("elu".into()),
        ])
        .unwrap();
        let c2 = OptunaDistribution::categorical(vec![C::Str("tanh".into())]).unwrap();
        assert!(a.compatibility_with(&b).is_ok());
        assert!(a.compatibility_with(&lg).is_err());
        assert!(a.compatibility_with(&i).is_err());
        assert!(c1.compatibility_with(&c1.clone()).is_ok());
        assert!(c1.compatibility_with(&c2).is_err());
        // 1 == 1.0 as in Python; a bool is not a number.
        let ints = OptunaDistribution::categorical(vec![C::Int(1), C::Int(2)]).unwrap();
        let floats = OptunaDistribution::categorical(vec![C::Float(1.0), C::Float(2.0)]).unwrap();
        let bools = OptunaDistribution::categorical(vec![C::Bool(true), C::Int(2)]).unwrap();
        assert!(ints.compatibility_with(&floats).is_ok());
        assert!(ints.compatibility_with(&bools).is_err());
    }
}
