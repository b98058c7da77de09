//! Numbers as people read them: the tables' 4 significant digits, shared by the desktop
//! program's tables and plots and the CLI's text reports (JSON and CSV keep every digit).

/// A number to 4 significant digits, as tables and text reports show them (`0.0002210` → `2.21e-4`,
/// `123456` → `1.235e5`, `0.5` → `0.5`).
pub fn sig4(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".into();
    }
    let exp = x.abs().log10().floor() as i32;
    if !(-3..5).contains(&exp) {
        let s = format!("{x:.3e}");
        return match s.split_once('e') {
            Some((m, e)) if m.contains('.') => {
                format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
            }
            _ => s,
        };
    }
    let decimals = (3 - exp).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
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
    use super::{param_text, sig4};

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
