//! Numbers as people read them: significant digits (the tables' 4), shared by the desktop
//! program's tables and plots and the CLI's text reports (JSON and CSV keep every digit).

/// `x` to `digits` significant digits (at least one), trailing zeros kept so that a column
/// of them lines up (`0.6382`, `1.000`): in plain decimal from 0.001 up to 100000, in
/// scientific notation outside (`1.235e-4`, `1.235e5`). The one formatter of significant
/// digits; [`sig4`] is its form for tables.
pub fn significant(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".into();
    }
    let digits = digits.max(1);
    let exp = x.abs().log10().floor() as i32;
    if !(-3..5).contains(&exp) {
        return format!("{x:.prec$e}", prec = digits - 1);
    }
    let decimals = (digits as i32 - 1 - exp).max(0) as usize;
    let text = format!("{x:.decimals$}");
    // Rounding up to the next power of ten (0.99996 → 1.0000) gains a digit: drop it.
    let rounded: f64 = text.parse().unwrap_or(x);
    if decimals > 0 && rounded.abs().log10().floor() as i32 > exp {
        format!("{x:.prec$}", prec = decimals - 1)
    } else {
        text
    }
}

/// A number to 4 significant digits, as tables and text reports show them: [`significant`]
/// without trailing zeros (`0.0002210` → `2.21e-4`, `123456` → `1.235e5`, `0.5` → `0.5`).
pub fn sig4(x: f64) -> String {
    let s = significant(x, 4);
    let (mantissa, exp) = match s.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (s.as_str(), None),
    };
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    match exp {
        Some(e) => format!("{mantissa}e{e}"),
        None => mantissa.to_owned(),
    }
}

/// A parameter's value as text reports show it: a fractional number to 4 significant digits
/// ([`sig4`]); an integer, a choice or anything else as it is.
pub fn param_text(value: &str) -> String {
    match value.parse::<f64>() {
        Ok(x) if x.is_finite() && x.fract() != 0.0 => sig4(x),
        _ => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{param_text, sig4, significant};

    #[test]
    fn significant_digits_keep_their_zeros() {
        assert_eq!(significant(0.638_205_927, 4), "0.6382");
        assert_eq!(significant(0.023_460_081_6, 4), "0.02346");
        assert_eq!(significant(0.001_234_56, 4), "0.001235");
        assert_eq!(significant(0.000_123_456, 4), "1.235e-4");
        assert_eq!(significant(0.999_96, 4), "1.000");
        assert_eq!(significant(1.0, 4), "1.000");
        assert_eq!(significant(0.25, 4), "0.2500");
        assert_eq!(significant(0.0, 4), "0");
        assert_eq!(significant(12345.0, 4), "12345");
        assert_eq!(significant(0.000_022_1, 4), "2.210e-5");
        assert_eq!(significant(0.123, 2), "0.12");
        assert_eq!(significant(f64::NAN, 4), "NaN");
    }

    #[test]
    fn four_significant_digits() {
        assert_eq!(sig4(0.000_022_102_065_224_375_06), "2.21e-5");
        assert_eq!(sig4(0.000_123_456_789), "1.235e-4");
        assert_eq!(sig4(0.001_234_56), "0.001235");
        assert_eq!(sig4(0.5), "0.5");
        assert_eq!(sig4(0.987_654), "0.9877");
        assert_eq!(sig4(256.0), "256");
        assert_eq!(sig4(12_345.6), "12346");
        assert_eq!(sig4(123_456.0), "1.235e5");
        assert_eq!(sig4(-3.333_33), "-3.333");
        assert_eq!(sig4(0.0), "0");
        assert_eq!(sig4(0.999_96), "1");
        assert_eq!(sig4(-0.000_123_4), "-1.234e-4");
    }

    #[test]
    fn parameters_in_text_keep_integers_and_choices() {
        assert_eq!(param_text("0.0006000000000000001"), "6e-4");
        assert_eq!(param_text("131072"), "131072");
        assert_eq!(param_text("relu"), "relu");
        assert_eq!(param_text("true"), "true");
        assert_eq!(param_text("0.99"), "0.99");
    }
}
