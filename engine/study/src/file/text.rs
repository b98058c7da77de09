//! A study as a study file's text: what is recorded with a study that was built from typed
//! parts (the app's Configure panel), so that it reads back exactly as a study run from a file
//! does.

use serde_json::Value;

use super::sections::{PRUNER_SETTINGS, SAMPLER_SETTINGS, keep_used};
use super::{StudyFile, StudyFileError};

impl StudyFile {
    /// The text this study was read from; empty for one built from typed parts
    /// ([`StudyFile::from_parts`]). Overrides applied since ([`StudyFile::override_fixed`]) are
    /// not in it.
    pub fn source_text(&self) -> &str {
        &self.text
    }

    /// This study as a study file's text, which [`StudyFile::parse`] with the same `defaults`
    /// (the trial configuration's default JSON) reads back to the same study: its tables, the
    /// fixed values that differ from `defaults` under `[fixed]`, its searched ranges, sampler
    /// and pruner, these two with the settings their kinds use alone (a setting of another
    /// kind, which the app's draft keeps, reads back as its default; it does nothing either
    /// way). A fixed value that TOML cannot write (none where the default has one) is
    /// refused, naming the key.
    pub fn to_toml(&self, defaults: &Value) -> Result<String, StudyFileError> {
        let fail = |key: &str, message: String| StudyFileError {
            path: self.path.clone(),
            line: None,
            key: Some(key.to_owned()),
            message,
        };
        let table = |key: &str, v: Result<toml::Value, toml::ser::Error>| match v {
            Ok(v) => Ok(v),
            Err(e) => Err(fail(key, format!("cannot be written as TOML: {e}"))),
        };
        let mut doc = toml::Table::new();
        doc.insert(
            "study".into(),
            table("study", toml::Value::try_from(&self.study))?,
        );
        doc.insert(
            "data".into(),
            table("data", toml::Value::try_from(&self.data))?,
        );
        doc.insert(
            "split".into(),
            table("split", toml::Value::try_from(&self.split))?,
        );
        doc.insert(
            "evaluation".into(),
            table("evaluation", toml::Value::try_from(&self.evaluation))?,
        );
        let mut fixed = toml::Table::new();
        fixed_diff(defaults, &self.base_config, "", &mut fixed)
            .map_err(|(key, message)| fail(&format!("fixed.{key}"), message))?;
        doc.insert("fixed".into(), toml::Value::Table(fixed));
        let mut search = toml::Table::new();
        for (name, spec) in self.search_specs() {
            let key = format!("search.\"{name}\"");
            let value = toml::from_str::<toml::Table>(&format!("v = {spec}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .ok_or_else(|| fail(&key, format!("'{spec}' does not read back")))?;
            search.insert(name, value);
        }
        doc.insert("search".into(), toml::Value::Table(search));
        // Only the settings the chosen kinds use: the app's draft keeps TPE's while another
        // sampler is chosen, and a pruner's defaults are there whatever its kind.
        let mut sampler = table("sampler", toml::Value::try_from(&self.sampler))?;
        if let toml::Value::Table(t) = &mut sampler {
            keep_used(t, SAMPLER_SETTINGS, &self.sampler.kind);
        }
        doc.insert("sampler".into(), sampler);
        let mut pruner = table("pruner", toml::Value::try_from(&self.pruner))?;
        if let toml::Value::Table(t) = &mut pruner {
            keep_used(t, PRUNER_SETTINGS, &self.pruner.kind);
        }
        doc.insert("pruner".into(), pruner);
        toml::to_string(&doc).map_err(|e| fail("study", format!("cannot be written as TOML: {e}")))
    }
}

/// Adds to `out` (nested by the dotted name's parts) every leaf of `config` that differs from
/// `defaults`; a leaf TOML cannot write fails with its dotted name and why.
fn fixed_diff(
    defaults: &Value,
    config: &Value,
    prefix: &str,
    out: &mut toml::Table,
) -> Result<(), (String, String)> {
    let Value::Object(fields) = config else {
        return Ok(());
    };
    for (key, value) in fields {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let default = defaults.get(key).unwrap_or(&Value::Null);
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                let mut sub = toml::Table::new();
                fixed_diff(default, value, &name, &mut sub)?;
                if !sub.is_empty() {
                    out.insert(key.clone(), toml::Value::Table(sub));
                }
            }
            _ if value == default => {}
            _ => {
                let leaf = to_toml_value(value).ok_or_else(|| {
                    (
                        name.clone(),
                        format!(
                            "{value} cannot be written in a study file (its default is {default})"
                        ),
                    )
                })?;
                out.insert(key.clone(), leaf);
            }
        }
    }
    Ok(())
}

/// A JSON leaf as TOML; None for a null (TOML has none) or a list holding one.
fn to_toml_value(v: &Value) -> Option<toml::Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => {
            toml::Value::Array(items.iter().map(to_toml_value).collect::<Option<_>>()?)
        }
        Value::Object(map) => toml::Value::Table(
            map.iter()
                .map(|(k, v)| to_toml_value(v).map(|v| (k.clone(), v)))
                .collect::<Option<_>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::super::{SearchSpec, StudyParts};
    use super::*;
    use serde_json::json;

    fn defaults() -> Value {
        json!({
            "env": {"n_envs": 8, "placement": null},
            "ppo": {"learning_rate": 3e-4, "batch_size": 64, "target_kl": null,
                    "policy": {"net_arch": {"pi": [64, 64], "vf": [64, 64]}}},
            "train": {"total_timesteps": 100000}
        })
    }

    fn assert_same(a: &StudyFile, b: &StudyFile) {
        assert_eq!(a.study, b.study);
        assert_eq!(a.data, b.data);
        assert_eq!(a.split, b.split);
        assert_eq!(a.evaluation, b.evaluation);
        assert_eq!(a.base_config, b.base_config);
        assert_eq!(a.search_specs(), b.search_specs());
        assert_eq!(a.sampler, b.sampler);
        assert_eq!(a.pruner, b.pruner);
        assert_eq!(a.enqueued, b.enqueued);
        assert_eq!(a.grid, b.grid);
    }

    #[test]
    fn a_study_from_typed_parts_reads_back_from_its_text() {
        let mut base = defaults();
        base["env"]["n_envs"] = json!(2);
        base["ppo"]["target_kl"] = json!(0.015);
        base["ppo"]["policy"]["net_arch"]["pi"] = json!([16]);
        let text = r#"
[study]
name = "from parts"
direction = "minimize"
n_trials = 3
device_memory_gib = 12.5
[data]
paths = ["/data/a.csv", "/data/b.csv"]
[split]
by = "fractions"
train = 0.6
validation = 0.2
[evaluation]
scheme = "cpcv"
n_groups = 6
k_test = 2
[search]
"ppo.learning_rate" = { low = 1e-5, high = 1e-3, log = true }
[sampler]
kind = "tpe"
seed = 7
multivariate = true
enqueue = [{ "ppo.learning_rate" = 3e-4 }]
[pruner]
kind = "hyperband"
min_resource = 2
"#;
        let read = StudyFile::parse(text, "t.toml", &defaults()).unwrap();
        let parts = StudyParts {
            study: read.study.clone(),
            data: read.data.clone(),
            split: read.split.clone(),
            evaluation: read.evaluation.clone(),
            base_config: base,
            search: vec![
                (
                    "ppo.learning_rate".into(),
                    SearchSpec::parse("{ low = 1e-5, high = 1e-3, log = true }").unwrap(),
                ),
                (
                    "ppo.policy.net_arch.vf".into(),
                    SearchSpec::parse("{ choices = [[8], [16, 16]] }").unwrap(),
                ),
            ],
            sampler: read.sampler.clone(),
            pruner: read.pruner.clone(),
        };
        let built = StudyFile::from_parts(parts, "the form").unwrap();
        assert_eq!(built.source_text(), "");
        let text = built.to_toml(&defaults()).unwrap();
        let back = StudyFile::parse(&text, "the form", &defaults()).unwrap();
        assert_same(&built, &back);
        // Only what differs from the defaults is fixed.
        assert!(text.contains("n_envs = 2"), "{text}");
        assert!(!text.contains("total_timesteps"), "{text}");
        // Only the settings of the chosen kinds (hyperband uses no percentile).
        assert!(
            !text.contains("percentile") && !text.contains("n_warmup_steps"),
            "{text}"
        );
        assert!(text.contains("multivariate = true") && text.contains("min_resource = 2"));
        assert!(
            back.unused_settings().is_empty(),
            "{:?}",
            back.unused_settings()
        );
    }

    /// A draft that keeps another kind's settings (the app's, when its sampler or pruner kind
    /// changes) is written with the chosen kind's alone: its text names nothing unused.
    #[test]
    fn the_text_holds_only_the_chosen_kinds_settings() {
        let mut read = StudyFile::parse("[study]\nname = \"k\"\n", "k.toml", &defaults()).unwrap();
        read.sampler.kind = super::super::SamplerKind::Random;
        read.sampler.n_startup_trials = Some(30);
        read.sampler.constant_liar = Some(true);
        read.pruner.kind = super::super::PrunerKind::Median;
        read.pruner.percentile = 70.0;
        read.pruner.reduction_factor = Some(3);
        read.pruner.n_warmup_steps = 4;
        let text = read.to_toml(&defaults()).unwrap();
        for gone in [
            "n_startup_trials = 30",
            "constant_liar",
            "percentile",
            "reduction_factor",
        ] {
            assert!(!text.contains(gone), "{gone} in {text}");
        }
        assert!(text.contains("n_warmup_steps = 4"), "{text}");
        let back = StudyFile::parse(&text, "k.toml", &defaults()).unwrap();
        assert!(
            back.unused_settings().is_empty(),
            "{:?}",
            back.unused_settings()
        );
        assert_eq!(
            (back.sampler.kind, back.pruner.n_warmup_steps),
            (read.sampler.kind, 4)
        );
    }

    #[test]
    fn a_fixed_value_toml_cannot_write_is_refused_by_name() {
        let mut parts_base = defaults();
        parts_base["ppo"]["batch_size"] = Value::Null;
        let read = StudyFile::parse("[study]\nname = \"n\"\n", "n.toml", &defaults()).unwrap();
        let mut file = read.clone();
        file.base_config = parts_base;
        let e = file.to_toml(&defaults()).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("fixed.ppo.batch_size"), "{e}");
        // A study read from a file keeps its text.
        assert!(read.source_text().contains("name = \"n\""));
    }
}
