//! Presets: study files for the user's classes of device, compiled into the binary (so
//! `tradetune study run --preset rtx4080` works from any directory) and listed by the desktop
//! app. Their values come from the user's write-ups (`../shared/seeds/`); a test checks with the
//! memory estimator that every configuration a preset can sample fits its device class.

use crate::file::{StudyFile, StudyFileError};
use crate::ppo_trial::parse_study_file;

/// The bundled preset files: (name, TOML text).
pub const FILES: [(&str, &str); 4] = [
    (
        "rtx4080",
        include_str!("../../../resources/presets/rtx4080.toml"),
    ),
    (
        "rtx4080_laptop",
        include_str!("../../../resources/presets/rtx4080_laptop.toml"),
    ),
    (
        "rx7900gre",
        include_str!("../../../resources/presets/rx7900gre.toml"),
    ),
    ("cpu", include_str!("../../../resources/presets/cpu.toml")),
];

/// One preset, parsed.
#[derive(Debug, Clone)]
pub struct Preset {
    pub name: &'static str,
    /// The device class it is for (`NVIDIA GeForce RTX 4080 16 GB`).
    pub device_class: String,
    /// The class's memory, bytes (the budget's base).
    pub memory_bytes: u64,
    /// The TOML text, to show or save as the start of a user's own study file.
    pub text: &'static str,
    pub study: StudyFile,
}

fn parse(name: &'static str, text: &'static str) -> Result<Preset, StudyFileError> {
    let study = parse_study_file(text, &format!("preset:{name}"))?;
    let missing = |key: &str| StudyFileError {
        path: format!("preset:{name}"),
        line: None,
        key: Some(format!("study.{key}")),
        message: "every preset names its device class and its memory".into(),
    };
    let device_class = study
        .study
        .device_class
        .clone()
        .ok_or_else(|| missing("device_class"))?;
    let gib = study
        .study
        .device_memory_gib
        .ok_or_else(|| missing("device_memory_gib"))?;
    Ok(Preset {
        name,
        device_class,
        memory_bytes: (gib * (1u64 << 30) as f64) as u64,
        text,
        study,
    })
}

/// Every bundled preset.
pub fn bundled() -> Result<Vec<Preset>, StudyFileError> {
    FILES.iter().map(|(n, t)| parse(n, t)).collect()
}

/// The preset called `name`, or an error listing the names.
pub fn find(name: &str) -> Result<Preset, StudyFileError> {
    match FILES.iter().find(|(n, _)| *n == name) {
        Some((n, t)) => parse(n, t),
        None => Err(StudyFileError {
            path: format!("preset:{name}"),
            line: None,
            key: None,
            message: format!(
                "no such preset; presets: {}",
                FILES.map(|(n, _)| n).join(", ")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ppo_trial::PpoTrialConfig;

    #[test]
    fn every_preset_reads_back_from_its_generated_text() {
        let defaults = PpoTrialConfig::defaults_json();
        for p in bundled().unwrap() {
            let text = p.study.to_toml(&defaults).unwrap();
            let back = parse_study_file(&text, &p.study.path).unwrap();
            let f = &p.study;
            assert_eq!(back.study, f.study, "{}", p.name);
            assert_eq!(back.data, f.data, "{}", p.name);
            assert_eq!(back.split, f.split, "{}", p.name);
            assert_eq!(back.evaluation, f.evaluation, "{}", p.name);
            assert_eq!(back.base_config, f.base_config, "{}", p.name);
            assert_eq!(back.search_specs(), f.search_specs(), "{}", p.name);
            assert_eq!(back.sampler, f.sampler, "{}", p.name);
            assert_eq!(back.pruner, f.pruner, "{}", p.name);
            let unused = |f: &StudyFile| {
                f.unused_settings()
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
            };
            assert_eq!(unused(f), Vec::<String>::new(), "{}", p.name);
            assert_eq!(unused(&back), Vec::<String>::new(), "{}", p.name);
        }
    }
}
