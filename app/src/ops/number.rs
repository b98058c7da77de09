//! Numbers as people read them.

/// `v` to `digits` significant digits, in plain decimal notation (`0.0001235`, `0.6382`).
pub fn significant(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0);
    let text = format!("{v:.*}", decimals as usize);
    // Rounding up to the next power of ten (0.99996 → 1.0000) gains a digit: drop it.
    let rounded: f64 = text.parse().unwrap_or(v);
    if decimals > 0 && rounded.abs().log10().floor() as i32 > magnitude {
        format!("{v:.*}", decimals as usize - 1)
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::significant;

    #[test]
    fn four_significant_digits() {
        assert_eq!(significant(0.638_205_927, 4), "0.6382");
        assert_eq!(significant(0.023_460_081_6, 4), "0.02346");
        assert_eq!(significant(0.000_123_456, 4), "0.0001235");
        assert_eq!(significant(0.999_96, 4), "1.000");
        assert_eq!(significant(1.0, 4), "1.000");
        assert_eq!(significant(0.0, 4), "0");
        assert_eq!(significant(12345.0, 4), "12345");
    }
}
