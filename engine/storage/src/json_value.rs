//! JSON as Python's `json` module reads and writes it.
//!
//! Optuna stores every attribute as `json.dumps(value)` and reads it with `json.loads`, which
//! accept the non-standard tokens `NaN`, `Infinity` and `-Infinity` (a float attribute may well
//! be NaN, e.g. a diverged loss). `serde_json` refuses them, so attributes go through this type:
//! it parses what `json.loads` parses, keeps integers apart from floats and object keys in
//! order, and [`JsonValue::dumps`] writes exactly what `json.dumps` writes with its defaults
//! (separators `", "` and `": "`, `ensure_ascii=True`, floats as `repr`).

use super::python_repr::{float_repr, str_repr};

/// A JSON value with Python's number model: ints and floats are different things.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonValue {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer beyond i64, kept as its decimal text (Python ints are unbounded).
    BigInt(String),
    Float(f64),
    Str(String),
    Array(Vec<JsonValue>),
    /// Keys in insertion order, as a Python dict keeps them.
    Object(Vec<(String, JsonValue)>),
}

/// A JSON text that `json.loads` would reject, with the byte offset of the problem.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid JSON at byte {offset}: {message}")]
pub struct JsonError {
    pub offset: usize,
    pub message: String,
}

impl JsonValue {
    /// Parses a JSON text the way Python's `json.loads` does (NaN and ±Infinity allowed).
    pub fn parse(text: &str) -> Result<JsonValue, JsonError> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
            text,
        };
        p.ws();
        let v = p.value(0)?;
        p.ws();
        if p.i != p.s.len() {
            return Err(p.err("extra data after the JSON value"));
        }
        Ok(v)
    }

    /// The text `json.dumps(value)` produces for this value.
    pub fn dumps(&self) -> String {
        let mut out = String::new();
        self.dump_into(&mut out);
        out
    }

    fn dump_into(&self, out: &mut String) {
        match self {
            JsonValue::Null => out.push_str("null"),
            JsonValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            JsonValue::Int(i) => out.push_str(&i.to_string()),
            JsonValue::BigInt(s) => out.push_str(s),
            JsonValue::Float(f) => out.push_str(&json_float(*f)),
            JsonValue::Str(s) => dump_str(s, out),
            JsonValue::Array(items) => {
                out.push('[');
                for (k, item) in items.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    item.dump_into(out);
                }
                out.push(']');
            }
            JsonValue::Object(fields) => {
                out.push('{');
                for (k, (key, item)) in fields.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    dump_str(key, out);
                    out.push_str(": ");
                    item.dump_into(out);
                }
                out.push('}');
            }
        }
    }

    /// Python's `str(value)` of the object `json.loads` returns — how pandas writes an
    /// object-typed CSV cell (`None` is written by the caller as an empty cell).
    pub fn python_str(&self) -> String {
        match self {
            JsonValue::Str(s) => s.clone(),
            other => other.python_repr(),
        }
    }

    /// Python's `repr()` of the object `json.loads` returns (`{'a': [1, 0.5, None]}`).
    pub fn python_repr(&self) -> String {
        match self {
            JsonValue::Null => "None".to_owned(),
            JsonValue::Bool(b) => if *b { "True" } else { "False" }.to_owned(),
            JsonValue::Int(i) => i.to_string(),
            JsonValue::BigInt(s) => s.clone(),
            JsonValue::Float(f) => float_repr(*f),
            JsonValue::Str(s) => str_repr(s),
            JsonValue::Array(items) => {
                let parts: Vec<String> = items.iter().map(JsonValue::python_repr).collect();
                format!("[{}]", parts.join(", "))
            }
            JsonValue::Object(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{}: {}", str_repr(k), v.python_repr()))
                    .collect();
                format!("{{{}}}", parts.join(", "))
            }
        }
    }

    /// The value under `key` if this is an object.
    pub fn get(&self, key: &str) -> Option<&JsonValue> {
        match self {
            JsonValue::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A number as f64 (ints converted), as Python's `float(x)` would for a JSON number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            JsonValue::Int(i) => Some(*i as f64),
            JsonValue::BigInt(s) => s.parse().ok(),
            JsonValue::Float(f) => Some(*f),
            _ => None,
        }
    }
}

/// `json.dumps` spelling of a float: `repr`, except NaN and the infinities.
fn json_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f == f64::INFINITY {
        "Infinity".to_owned()
    } else if f == f64::NEG_INFINITY {
        "-Infinity".to_owned()
    } else {
        float_repr(f)
    }
}

/// `json.dumps` of a string with `ensure_ascii=True` (CPython `Lib/json/encoder.py`,
/// `py_encode_basestring_ascii`: everything outside `' '..='~'` is escaped, lowercase hex).
fn dump_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

impl From<&serde_json::Value> for JsonValue {
    fn from(v: &serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => JsonValue::Null,
            serde_json::Value::Bool(b) => JsonValue::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    JsonValue::Int(i)
                } else if let Some(u) = n.as_u64() {
                    JsonValue::BigInt(u.to_string())
                } else {
                    JsonValue::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(s) => JsonValue::Str(s.clone()),
            serde_json::Value::Array(a) => {
                JsonValue::Array(a.iter().map(JsonValue::from).collect())
            }
            serde_json::Value::Object(o) => JsonValue::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), JsonValue::from(v)))
                    .collect(),
            ),
        }
    }
}

impl From<&JsonValue> for serde_json::Value {
    /// As serde_json holds it: NaN and ±inf, which serde_json cannot hold, become null, and so
    /// does an integer beyond f64's range.
    fn from(v: &JsonValue) -> Self {
        use serde_json::Value;
        match v {
            JsonValue::Null => Value::Null,
            JsonValue::Bool(b) => Value::Bool(*b),
            JsonValue::Int(i) => Value::from(*i),
            JsonValue::BigInt(s) => s.parse::<f64>().map_or(Value::Null, Value::from),
            JsonValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            JsonValue::Str(s) => Value::String(s.clone()),
            JsonValue::Array(a) => Value::Array(a.iter().map(Value::from).collect()),
            JsonValue::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), Value::from(v))).collect())
            }
        }
    }
}

impl From<serde_json::Value> for JsonValue {
    fn from(v: serde_json::Value) -> Self {
        JsonValue::from(&v)
    }
}

impl From<&str> for JsonValue {
    fn from(s: &str) -> Self {
        JsonValue::Str(s.to_owned())
    }
}

impl From<String> for JsonValue {
    fn from(s: String) -> Self {
        JsonValue::Str(s)
    }
}

impl From<f64> for JsonValue {
    fn from(f: f64) -> Self {
        JsonValue::Float(f)
    }
}

impl From<i64> for JsonValue {
    fn from(i: i64) -> Self {
        JsonValue::Int(i)
    }
}

impl From<bool> for JsonValue {
    fn from(b: bool) -> Self {
        JsonValue::Bool(b)
    }
}

/// Nesting deeper than this is refused rather than risking the stack on hostile input. It is
/// CPython's default recursion limit, which `json.dumps` and `json.loads` run into first
/// (about 990 levels below a script's own frames), so whatever Optuna's client wrote reads
/// here; a value this deep is parsed, written back, printed and dropped within a 2 MiB thread
/// stack (std's default for spawned threads; tested below on such a thread).
const MAX_DEPTH: usize = 1000;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn err(&self, message: &str) -> JsonError {
        JsonError {
            offset: self.i,
            message: message.to_owned(),
        }
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<JsonValue, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        let Some(&c) = self.s.get(self.i) else {
            return Err(self.err("expected a value, found the end of the text"));
        };
        match c {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => Ok(JsonValue::Str(self.string()?)),
            b'n' if self.eat("null") => Ok(JsonValue::Null),
            b't' if self.eat("true") => Ok(JsonValue::Bool(true)),
            b'f' if self.eat("false") => Ok(JsonValue::Bool(false)),
            b'N' if self.eat("NaN") => Ok(JsonValue::Float(f64::NAN)),
            b'I' if self.eat("Infinity") => Ok(JsonValue::Float(f64::INFINITY)),
            b'-' if self.eat("-Infinity") => Ok(JsonValue::Float(f64::NEG_INFINITY)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.err("expected a value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<JsonValue, JsonError> {
        self.i += 1;
        let mut fields: Vec<(String, JsonValue)> = Vec::new();
        self.ws();
        if self.eat("}") {
            return Ok(JsonValue::Object(fields));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err("expected a string key"));
            }
            let key = self.string()?;
            self.ws();
            if !self.eat(":") {
                return Err(self.err("expected ':'"));
            }
            self.ws();
            let v = self.value(depth + 1)?;
            // A repeated key keeps its first position and its last value, like a Python dict.
            match fields.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = v,
                None => fields.push((key, v)),
            }
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(JsonValue::Object(fields));
            }
            return Err(self.err("expected ',' or '}'"));
        }
    }

    fn array(&mut self, depth: usize) -> Result<JsonValue, JsonError> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(JsonValue::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("]") {
                return Ok(JsonValue::Array(items));
            }
            return Err(self.err("expected ',' or ']'"));
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let hex = self
            .text
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("truncated \\u escape"))?;
        let v = u32::from_str_radix(hex, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.i < self.s.len() && !matches!(self.s[self.i], b'"' | b'\\') {
                if self.s[self.i] < 0x20 {
                    return Err(self.err("control character in a string"));
                }
                self.i += 1;
            }
            out.push_str(&self.text[start..self.i]);
            match self.s.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                _ => {}
            }
            self.i += 1;
            let Some(&esc) = self.s.get(self.i) else {
                return Err(self.err("unterminated escape"));
            };
            self.i += 1;
            match esc {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let hi = self.hex4()?;
                    if (0xD800..0xDC00).contains(&hi) {
                        let after_hi = self.i;
                        if self.eat("\\u") {
                            let lo = self.hex4()?;
                            if (0xDC00..0xE000).contains(&lo) {
                                let code = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                out.push(
                                    char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER),
                                );
                                continue;
                            }
                            // Not a low surrogate: read again as an escape of its own.
                            self.i = after_hi;
                        }
                    }
                    // A lone surrogate, which Python's json writes and reads (a file name
                    // decoded with `surrogateescape`, say) but no Rust string holds: read as
                    // U+FFFD, as a lossy decoding does, so the value (and its study) can be read.
                    out.push(char::from_u32(hi).unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                _ => return Err(self.err("unknown escape")),
            }
        }
    }

    fn number(&mut self) -> Result<JsonValue, JsonError> {
        let start = self.i;
        let mut is_float = false;
        if self.s[self.i] == b'-' {
            self.i += 1;
        }
        let digits_start = self.i;
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'0'..=b'9' => {}
                b'.' | b'e' | b'E' | b'+' => is_float = true,
                b'-' if is_float => {}
                _ => break,
            }
            self.i += 1;
        }
        if self.i == digits_start {
            return Err(self.err("expected digits"));
        }
        let lit = &self.text[start..self.i];
        if is_float {
            lit.parse::<f64>()
                .map(JsonValue::Float)
                .map_err(|_| JsonError {
                    offset: start,
                    message: format!("bad number `{lit}`"),
                })
        } else {
            match lit.parse::<i64>() {
                Ok(i) => Ok(JsonValue::Int(i)),
                Err(_) => Ok(JsonValue::BigInt(lit.to_owned())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_to_serde_json_with_null_for_what_it_cannot_hold() {
        let v = JsonValue::parse(r#"{"a": [1, 2.5, NaN, "x"], "b": -Infinity}"#).unwrap();
        assert_eq!(
            serde_json::Value::from(&v),
            serde_json::json!({"a": [1, 2.5, null, "x"], "b": null})
        );
    }

    #[test]
    fn round_trips_python_dumps_text() {
        // Each string is what CPython 3.11's json.dumps printed for the corresponding object.
        for text in [
            r#"{"id": "CartPole-v1", "max_steps": 500}"#,
            r#"["ref", "demo"]"#,
            r#"{"lr": 0.0003, "batch_size": 64, "activation": "relu"}"#,
            r#"[NaN, Infinity, -Infinity, 1e-05, 1.0, -0.0, null, true, false]"#,
            r#""caf\u00e9 \ud83c\udf89 \"q\" \\ \n""#,
            r#"123456789012345678901234567890"#,
            r#"{}"#,
            r#"[]"#,
        ] {
            let v = JsonValue::parse(text).unwrap();
            assert_eq!(v.dumps(), text);
        }
    }

    /// Lone surrogates, which Python's json writes (`json.dumps(os.fsdecode(b"data_\xff"))`)
    /// and reads, are read as U+FFFD rather than refusing the value; pairs stay characters.
    #[test]
    fn lone_surrogates_read_as_the_replacement_character() {
        for (text, want) in [
            (r#""data_\udcff.csv""#, "data_\u{fffd}.csv"),
            (r#""\ud800A""#, "\u{fffd}A"),
            (r#""\ud800\u0041""#, "\u{fffd}A"),
            (r#""\ud800\ud83c\udf89""#, "\u{fffd}\u{1f389}"),
            (r#""\ud83c\udf89""#, "\u{1f389}"),
        ] {
            assert_eq!(
                JsonValue::parse(text),
                Ok(JsonValue::Str(want.to_owned())),
                "{text}"
            );
        }
        assert!(JsonValue::parse(r#""\ud800\uZZZZ""#).is_err());
    }

    #[test]
    fn parses_compact_json_and_keeps_int_float_apart() {
        let v = JsonValue::parse(r#"{"a":1,"b":1.0,"c":[2e3,-4]}"#).unwrap();
        assert_eq!(v.get("a"), Some(&JsonValue::Int(1)));
        assert_eq!(v.get("b"), Some(&JsonValue::Float(1.0)));
        assert_eq!(v.dumps(), r#"{"a": 1, "b": 1.0, "c": [2000.0, -4]}"#);
    }

    #[test]
    fn rejects_what_python_rejects() {
        for bad in [
            "", "{", "[1,]", "{'a': 1}", "nul", "1 2", "\"\\x\"", "\"a\nb\"",
        ] {
            let e = JsonValue::parse(bad);
            assert!(e.is_err(), "{bad:?} should not parse");
        }
        let e = JsonValue::parse("[1, ?]").unwrap_err();
        assert_eq!(e.offset, 4);
    }

    /// `json.dumps` of a list nested 1000 deep (CPython's recursion limit lets it write about
    /// 990; Optuna stores such a user attribute) reads, and everything done with an attribute
    /// works on a thread with std's default 2 MiB stack, as worker threads have; deeper is
    /// refused with the offset of the first bracket too many.
    #[test]
    fn nesting_as_deep_as_python_writes_reads_on_a_worker_stack() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let text = nested(1000);
        let worker = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let v = JsonValue::parse(&text).map_err(|e| e.to_string())?;
                let copy = v.clone();
                let same = copy == v;
                let dumped = v.dumps() == text;
                let repr = v.python_str().len() == text.len();
                let serde = serde_json::to_string(&serde_json::Value::from(&v))
                    .map_err(|e| e.to_string())?
                    == text;
                let back = JsonValue::from(&serde_json::Value::from(&v)) == v;
                drop(copy);
                Ok::<_, String>([same, dumped, repr, serde, back])
            })
            .unwrap();
        assert_eq!(worker.join().unwrap(), Ok([true; 5]));
        let e = JsonValue::parse(&nested(1100)).unwrap_err();
        assert_eq!((e.offset, e.message.as_str()), (1001, "nesting too deep"));
    }

    #[test]
    fn python_repr_like_cpython() {
        let v = JsonValue::parse(r#"{"k": "it's", "l": [1.0, null, NaN, true], "n": 3}"#).unwrap();
        // CPython: str({'k': "it's", 'l': [1.0, None, nan, True], 'n': 3})
        assert_eq!(
            v.python_str(),
            r#"{'k': "it's", 'l': [1.0, None, nan, True], 'n': 3}"#
        );
        assert_eq!(JsonValue::Str("plain".into()).python_str(), "plain");
    }
}
