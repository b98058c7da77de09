//! Python's text forms of floats and strings, byte for byte.
//!
//! Optuna writes `distribution_json` and attribute JSON with `json.dumps`, and pandas writes CSV
//! cells with `str()`/`repr()`. Both spell floats as CPython's `float.__repr__`
//! (`PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0)`): the shortest digit string that
//! round-trips, in positional form when the decimal exponent `decpt` satisfies `-4 < decpt <= 16`
//! and in scientific form (`1e-05`, `1.5e+16`, at least two exponent digits) otherwise
//! (CPython `Python/pystrtod.c`, `format_float_short`). Rust's `{:e}` gives the same shortest
//! digits (both choose the closest shortest string), so only the layout is ours.

/// `repr(x)` for a Python float: `0.1`, `1e-05`, `1000000000000000.0`, `1e+16`, `inf`, `nan`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let sci = format!("{:e}", x.abs());
    // `{:e}` of a finite non-zero f64 is always `d[.ddd]e[-]n`.
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = digits.len() as i32;
    // value = 0.d1d2d3... × 10^decpt
    let decpt = exponent + 1;
    let mut out = String::with_capacity(24);
    if x < 0.0 {
        out.push('-');
    }
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-decpt) as usize));
            out.push_str(&digits);
        } else if decpt >= n {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (decpt - n) as usize));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..decpt as usize]);
            out.push('.');
            out.push_str(&digits[decpt as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        out.push_str(&format!("e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs()));
    }
    out
}

/// Whether CPython's `str.isprintable()` holds for `c`, i.e. `repr` keeps it as is.
///
/// CPython treats the Unicode categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs (except the ASCII
/// space) as non-printable. Rust's standard library has no category tables, so this covers the
/// code points of those categories that occur in practice (controls, the space separators, the
/// zero-width and bidi formatting characters, the BOM); rarer unassigned or private-use code
/// points are kept as is, where Python would escape them.
fn is_printable(c: char) -> bool {
    let u = c as u32;
    !(c.is_control()
        || u == 0xA0
        || u == 0xAD
        || u == 0x1680
        || (0x2000..=0x200F).contains(&u)
        || (0x2028..=0x202F).contains(&u)
        || (0x205F..=0x206F).contains(&u)
        || u == 0x3000
        || u == 0xFEFF
        || (0xE000..=0xF8FF).contains(&u))
}

/// `repr(s)` for a Python `str`: single quotes unless the text holds a `'` and no `"`.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x7F && c >= ' ' => out.push(c),
            c if is_printable(c) && (c as u32) > 0x7F => out.push(c),
            c => {
                let u = c as u32;
                if u <= 0xFF {
                    out.push_str(&format!("\\x{u:02x}"));
                } else if u <= 0xFFFF {
                    out.push_str(&format!("\\u{u:04x}"));
                } else {
                    out.push_str(&format!("\\U{u:08x}"));
                }
            }
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected strings were printed by CPython 3.11 (`repr(float)`).
    #[test]
    fn float_repr_matches_cpython() {
        let cases: &[(f64, &str)] = &[
            (0.1, "0.1"),
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (2.5e-5, "2.5e-05"),
            (123456789.123, "123456789.123"),
            (1e22, "1e+22"),
            (5e-324, "5e-324"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.15000000000000002, "0.15000000000000002"),
            (1.2046852412030316e-05, "1.2046852412030316e-05"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (100.0, "100.0"),
            (0.001, "0.001"),
            (9999999999999998.0, "9999999999999998.0"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(*x), *want, "repr({x:e})");
        }
    }

    /// Expected strings were printed by CPython 3.11 (`repr(str)`).
    #[test]
    fn str_repr_matches_cpython() {
        assert_eq!(str_repr("relu"), "'relu'");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(str_repr("l\nm\t\\"), "'l\\nm\\t\\\\'");
        assert_eq!(str_repr("é\u{1}"), "'é\\x01'");
        assert_eq!(str_repr("\u{a0}x\u{200b}"), "'\\xa0x\\u200b'");
        assert_eq!(str_repr("🎉"), "'🎉'");
    }
}
