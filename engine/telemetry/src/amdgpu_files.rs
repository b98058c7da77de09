//! Parsers for the text files of the amdgpu driver's sysfs interface.
//!
//! Formats follow the kernel's amdgpu documentation ("GPU Power/Thermal Controls and
//! Monitoring", Documentation/gpu/amdgpu/thermal.rst) and the hwmon sysfs interface
//! (Documentation/hwmon/sysfs-interface.rst): temperatures in millidegrees Celsius, power in
//! microwatts, frequencies in Hz, `pwm1` from 0 to 255, VRAM sizes in bytes.

/// One line of a `pp_dpm_*` clock table.
#[derive(Debug, Clone, PartialEq)]
pub struct DpmLevel {
    /// `0`, `1`, … (or `S` for the sleep level some APUs list).
    pub label: String,
    pub mhz: f64,
    pub current: bool,
}

/// A `pp_dpm_sclk`/`pp_dpm_mclk` table.
///
/// Older GPUs list every DPM level and star the current one. RDNA2/RDNA3 cards with
/// fine-grained clocks (SMU v11/v13) list the minimum, the current clock as a middle line
/// `1: 1520Mhz *` and the maximum; when the clock sits at the minimum or maximum only those two
/// lines appear and the star marks one of them (smu_v13_0_0_print_clk_levels in the kernel). In
/// both forms the first line is the minimum, the last the maximum and the star the current clock.
#[derive(Debug, Clone, PartialEq)]
pub struct DpmTable {
    pub levels: Vec<DpmLevel>,
}

impl DpmTable {
    pub fn min_mhz(&self) -> f64 {
        self.levels.first().map_or(f64::NAN, |l| l.mhz)
    }
    pub fn max_mhz(&self) -> f64 {
        self.levels.last().map_or(f64::NAN, |l| l.mhz)
    }
    pub fn current_mhz(&self) -> Option<f64> {
        self.levels.iter().find(|l| l.current).map(|l| l.mhz)
    }
}

/// Parses a `pp_dpm_*` table; the error names the first line that is not a level.
pub fn parse_dpm_table(text: &str) -> Result<DpmTable, String> {
    let mut levels = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = || format!("line {}: not a clock level: {line:?}", n + 1);
        let (label, rest) = line.split_once(':').ok_or_else(bad)?;
        let rest = rest.trim();
        let current = rest.ends_with('*');
        let value = rest.trim_end_matches('*').trim();
        let lower = value.to_ascii_lowercase();
        let number = lower.strip_suffix("mhz").ok_or_else(bad)?.trim();
        let mhz: f64 = number.parse().map_err(|_| bad())?;
        if !mhz.is_finite() || mhz < 0.0 {
            return Err(bad());
        }
        levels.push(DpmLevel {
            label: label.trim().to_string(),
            mhz,
            current,
        });
    }
    if levels.is_empty() {
        return Err("no clock levels".into());
    }
    Ok(DpmTable { levels })
}

/// The active profile of `pp_power_profile_mode`: the row whose name carries a `*`
/// (`  5 COMPUTE*:` on RDNA3, `  1 3D_FULL_SCREEN *:` on older cards). `None` if no row is
/// marked.
pub fn parse_power_profile(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim();
        let (index, rest) = line.split_once(char::is_whitespace)?;
        index.parse::<u32>().ok()?;
        let name = rest.split(':').next()?;
        if !name.contains('*') {
            return None;
        }
        let name = name.replace('*', "");
        let name = name.trim();
        (!name.is_empty()).then(|| name.to_string())
    })
}

/// Parses an integer sysfs value (`"85000\n"`).
pub fn parse_int(text: &str) -> Result<u64, String> {
    let t = text.trim();
    t.parse::<u64>()
        .map_err(|_| format!("not a whole number: {t:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdna3_three_line_form() {
        let t = parse_dpm_table("0: 500Mhz\n1: 1520Mhz *\n2: 2803Mhz\n").unwrap();
        assert_eq!(t.min_mhz(), 500.0);
        assert_eq!(t.current_mhz(), Some(1520.0));
        assert_eq!(t.max_mhz(), 2803.0);
    }

    #[test]
    fn rdna3_two_line_form_at_minimum() {
        let t = parse_dpm_table("0: 500Mhz *\n1: 2803Mhz\n").unwrap();
        assert_eq!(t.current_mhz(), Some(500.0));
        assert_eq!(t.max_mhz(), 2803.0);
    }

    #[test]
    fn classic_levels_and_sleep_label() {
        let t = parse_dpm_table("S: 19Mhz\n0: 300Mhz\n1: 1000MHz *\n2: 1340Mhz\n").unwrap();
        assert_eq!(t.levels.len(), 4);
        assert_eq!(t.levels[0].label, "S");
        assert_eq!(t.current_mhz(), Some(1000.0));
        assert_eq!(t.max_mhz(), 1340.0);
    }

    #[test]
    fn malformed_tables_name_the_line() {
        assert_eq!(parse_dpm_table("").unwrap_err(), "no clock levels");
        let e = parse_dpm_table("0: 500Mhz\nbogus\n").unwrap_err();
        assert!(e.starts_with("line 2"), "{e}");
        assert!(parse_dpm_table("0: fastMhz").is_err());
        assert!(parse_dpm_table("0: 500 GHz").is_err());
    }

    #[test]
    fn power_profile_marked_row() {
        let rdna3 = "PROFILE_INDEX(NAME) CLOCK_TYPE(NAME) FPS MinActiveFreqType MinActiveFreq\n \
                     0 BOOTUP_DEFAULT :\n                    0(       GFXCLK)       0       5\n \
                     1 3D_FULL_SCREEN :\n                    0(       GFXCLK)       1       5\n \
                     5 COMPUTE*:\n                    0(       GFXCLK)       0       5\n";
        assert_eq!(parse_power_profile(rdna3).as_deref(), Some("COMPUTE"));
        let vega = "NUM        MODE_NAME     SCLK_UP_HYST   SCLK_DOWN_HYST\n  \
                    0   BOOTUP_DEFAULT:        -        -\n  \
                    1 3D_FULL_SCREEN *:        0      100\n";
        assert_eq!(parse_power_profile(vega).as_deref(), Some("3D_FULL_SCREEN"));
        assert_eq!(parse_power_profile("  0 BOOTUP_DEFAULT:\n"), None);
    }

    #[test]
    fn ints() {
        assert_eq!(parse_int("17163091968\n"), Ok(17_163_091_968));
        assert!(parse_int("-3").is_err());
        assert!(parse_int("").is_err());
    }
}
