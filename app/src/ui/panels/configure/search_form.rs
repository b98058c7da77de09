//! The searched-parameter editor's model: a distribution as the fields a person edits (kind,
//! low, high, log, step, choices), as typed, and the study file's inline table they amount to
//! (`{ low = 1e-5, high = 1e-3, log = true }`, `{ choices = [64, 128] }`).
//!
//! The draft holds the engine's typed [`SearchSpec`]; the form's text becomes one through the
//! engine's own reader ([`SearchSpec::parse`]), so a bad number comes back in the engine's words,
//! and whether the range is valid is the engine's check when the study is built.

use serde_json::Value;
use tradetune_engine::study::file::SearchSpec;

/// What kind of distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormKind {
    /// A float range (Optuna's `FloatDistribution`).
    Float,
    /// An integer range (`IntDistribution`).
    Int,
    /// A list of choices (`CategoricalDistribution`).
    Choices,
}

impl FormKind {
    pub const ALL: [FormKind; 3] = [FormKind::Float, FormKind::Int, FormKind::Choices];

    pub fn label(self) -> &'static str {
        match self {
            FormKind::Float => "float range",
            FormKind::Int => "integer range",
            FormKind::Choices => "choices",
        }
    }
}

/// A distribution as edited: numbers stay the text typed until the study file is parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchForm {
    pub kind: FormKind,
    pub low: String,
    pub high: String,
    pub log: bool,
    /// Empty: none.
    pub step: String,
    /// Comma-separated; a list value is written in brackets (`[512, 256], [1024, 512]`).
    pub choices: String,
}

impl SearchForm {
    /// The form of a `[search]` value; None when the text is not a TOML inline table (the
    /// editor then shows the text itself).
    pub fn from_spec(spec: &str) -> Option<SearchForm> {
        let doc: toml::Table = toml::from_str(&format!("v = {spec}")).ok()?;
        let toml::Value::Table(t) = doc.get("v")? else {
            return None;
        };
        let text = |k: &str| t.get(k).map(toml_text).unwrap_or_default();
        if let Some(toml::Value::Array(items)) = t.get("choices") {
            return Some(SearchForm {
                kind: FormKind::Choices,
                choices: items.iter().map(toml_text).collect::<Vec<_>>().join(", "),
                ..SearchForm::empty(FormKind::Choices)
            });
        }
        let is_int = |k: &str| {
            t.get(k)
                .is_none_or(|v| matches!(v, toml::Value::Integer(_)))
        };
        let kind = match t.get("type").and_then(toml::Value::as_str) {
            Some("int") => FormKind::Int,
            Some("float") => FormKind::Float,
            _ if is_int("low") && is_int("high") && is_int("step") => FormKind::Int,
            _ => FormKind::Float,
        };
        Some(SearchForm {
            kind,
            low: text("low"),
            high: text("high"),
            log: t.get("log").and_then(toml::Value::as_bool).unwrap_or(false),
            step: text("step"),
            choices: String::new(),
        })
    }

    /// The form of a spec (its study-file text read back into fields).
    pub fn of(spec: &SearchSpec) -> SearchForm {
        SearchForm::from_spec(&spec.to_string())
            .unwrap_or_else(|| SearchForm::empty(FormKind::Float))
    }

    fn empty(kind: FormKind) -> SearchForm {
        SearchForm {
            kind,
            low: String::new(),
            high: String::new(),
            log: false,
            step: String::new(),
            choices: String::new(),
        }
    }

    /// A first distribution around a field's fixed `value`: a decade either side of a positive
    /// float (log scale), half to double an integer, the value itself as the only choice of
    /// anything else (a list, a string, a boolean), for the user to extend.
    pub fn around(value: &Value) -> SearchForm {
        match value {
            Value::Number(n) if n.is_i64() || n.is_u64() => {
                let v = n.as_i64().unwrap_or(i64::MAX);
                SearchForm {
                    low: (v / 2).max(1).to_string(),
                    high: v.saturating_mul(2).max(2).to_string(),
                    ..SearchForm::empty(FormKind::Int)
                }
            }
            Value::Number(n) => {
                let v = n.as_f64().unwrap_or(0.0);
                if v > 0.0 {
                    // A fraction (gamma, clip range) stays at most 1; a log scale when the
                    // range spans two decades or more.
                    let high = if v < 1.0 {
                        (v * 10.0).min(1.0)
                    } else {
                        v * 10.0
                    };
                    SearchForm {
                        low: float_text(v / 10.0),
                        high: float_text(high),
                        log: high / (v / 10.0) >= 99.0,
                        ..SearchForm::empty(FormKind::Float)
                    }
                } else {
                    SearchForm {
                        low: float_text(v - 1.0),
                        high: float_text(v + 1.0),
                        ..SearchForm::empty(FormKind::Float)
                    }
                }
            }
            Value::Array(items) => SearchForm {
                choices: format!(
                    "[{}]",
                    items
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                ..SearchForm::empty(FormKind::Choices)
            },
            Value::String(s) => SearchForm {
                choices: s.clone(),
                ..SearchForm::empty(FormKind::Choices)
            },
            other => SearchForm {
                choices: other.to_string(),
                ..SearchForm::empty(FormKind::Choices)
            },
        }
    }

    /// The `[search]` value this form amounts to. Numbers are written as typed (the parser
    /// judges them); a float range whose bounds look like integers says `type = "float"`, and
    /// an integer range whose bounds do not says `type = "int"`, so each is read as the kind
    /// chosen here. A choice that is not a number, boolean or list is written as a string.
    pub fn to_spec(&self) -> String {
        let field = |s: &str| {
            let s = s.trim();
            if s.is_empty() {
                "\"\"".to_owned()
            } else {
                s.to_owned()
            }
        };
        match self.kind {
            FormKind::Choices => {
                let items: Vec<String> = split_choices(&self.choices)
                    .into_iter()
                    .map(|c| choice_literal(&c))
                    .collect();
                format!("{{ choices = [{}] }}", items.join(", "))
            }
            kind => {
                let int_text = |s: &str| s.trim().parse::<i64>().is_ok();
                let all_int = int_text(&self.low)
                    && int_text(&self.high)
                    && (self.step.trim().is_empty() || int_text(&self.step));
                let mut parts = Vec::new();
                match kind {
                    FormKind::Float if all_int => parts.push("type = \"float\"".to_owned()),
                    FormKind::Int if !all_int => parts.push("type = \"int\"".to_owned()),
                    _ => {}
                }
                parts.push(format!("low = {}", field(&self.low)));
                parts.push(format!("high = {}", field(&self.high)));
                if self.log {
                    parts.push("log = true".into());
                }
                if !self.step.trim().is_empty() {
                    parts.push(format!("step = {}", field(&self.step)));
                }
                format!("{{ {} }}", parts.join(", "))
            }
        }
    }
}

/// A TOML value as the editor shows it: strings bare, everything else as TOML writes it.
fn toml_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_text).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

/// A float as short text, at 6 significant digits (`v / 10` of `0.0003` is
/// `2.9999999999999997e-5` in binary; the range it starts should read `0.00003`).
fn float_text(v: f64) -> String {
    let rounded: f64 = format!("{v:.5e}").parse().unwrap_or(v);
    let s = format!("{rounded}");
    if s.len() > 10 {
        format!("{rounded:e}")
    } else {
        s
    }
}

/// Splits choices at commas outside brackets: `[512, 256], [64]` is two choices.
fn split_choices(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out.into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// One choice as a TOML literal: numbers, booleans and lists as typed, anything else quoted.
fn choice_literal(c: &str) -> String {
    let is_literal = c.parse::<i64>().is_ok()
        || c.parse::<f64>().is_ok()
        || c == "true"
        || c == "false"
        || (c.starts_with('[') && c.ends_with(']'));
    if is_literal {
        return c.to_owned();
    }
    let bare = c
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(c);
    toml::Value::String(bare.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The preset's own specs read into the form and write back to the same distribution.
    #[test]
    fn preset_specs_round_trip() {
        for (spec, kind) in [
            ("{ low = 1e-5, high = 1e-3, log = true }", FormKind::Float),
            ("{ low = 4, high = 16, step = 4 }", FormKind::Int),
            ("{ low = 0.95, high = 0.999 }", FormKind::Float),
            ("{ choices = [1024, 2048, 4096] }", FormKind::Choices),
            ("{ choices = [\"bf16\", \"f16\"] }", FormKind::Choices),
            ("{ choices = [[512, 256], [64]] }", FormKind::Choices),
            ("{ type = \"float\", low = 1, high = 2 }", FormKind::Float),
        ] {
            let form = SearchForm::from_spec(spec).unwrap();
            assert_eq!(form.kind, kind, "{spec}");
            let again: toml::Table = toml::from_str(&format!("v = {}", form.to_spec())).unwrap();
            let original: toml::Table = toml::from_str(&format!("v = {spec}")).unwrap();
            assert_eq!(again, original, "{spec} → {}", form.to_spec());
        }
    }

    #[test]
    fn the_kind_chosen_is_the_kind_written() {
        let mut form = SearchForm::from_spec("{ low = 4, high = 16 }").unwrap();
        form.kind = FormKind::Float;
        assert_eq!(form.to_spec(), "{ type = \"float\", low = 4, high = 16 }");
        form.kind = FormKind::Int;
        form.high = "16.5".into();
        assert_eq!(form.to_spec(), "{ type = \"int\", low = 4, high = 16.5 }");
        form.kind = FormKind::Choices;
        form.choices = "relu, tanh, \"elu\", 3, true".into();
        assert_eq!(
            form.to_spec(),
            "{ choices = [\"relu\", \"tanh\", \"elu\", 3, true] }"
        );
    }

    #[test]
    fn a_first_range_sits_around_the_fixed_value() {
        let f = SearchForm::around(&serde_json::json!(0.0003));
        assert_eq!((f.kind, f.log), (FormKind::Float, true));
        assert_eq!((f.low.as_str(), f.high.as_str()), ("0.00003", "0.003"));
        let f = SearchForm::around(&serde_json::json!(256));
        assert_eq!(
            (f.kind, f.low.as_str(), f.high.as_str()),
            (FormKind::Int, "128", "512")
        );
        let f = SearchForm::around(&serde_json::json!([64, 64]));
        assert_eq!(
            (f.kind, f.choices.as_str()),
            (FormKind::Choices, "[64, 64]")
        );
        assert_eq!(f.to_spec(), "{ choices = [[64, 64]] }");
        let f = SearchForm::around(&serde_json::json!("f32"));
        assert_eq!(f.to_spec(), "{ choices = [\"f32\"] }");
    }

    #[test]
    fn text_that_is_not_a_table_has_no_form() {
        assert_eq!(SearchForm::from_spec("{ low = "), None);
        assert_eq!(SearchForm::from_spec("3"), None);
    }
}
