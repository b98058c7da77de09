//! Presets: the bundled ones for each class of device (from `resources/presets/`, through the
//! engine) and the user's own, saved from the Configure panel.

use serde::{Deserialize, Serialize};

use super::draft::Draft;

/// A preset the user saved ("Save as preset"), remembered with the settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserPreset {
    /// Its name on the card.
    pub name: String,
    /// The configuration it applies.
    pub draft: Draft,
}

/// A preset card.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    /// Name on the card (tests click it).
    pub name: String,
    /// What it is for ("NVIDIA RTX 4080, 16 GB").
    pub about: String,
    /// Memory of the device class it was sized for, bytes.
    pub memory_bytes: Option<u64>,
    /// The configuration it applies.
    pub draft: Draft,
    /// Whether the user saved it (bundled ones cannot be deleted).
    pub user: bool,
}

/// The bundled presets as cards (parsed once at start; a preset that does not parse is a bug
/// the engine's tests catch, reported here rather than hidden).
pub fn bundled() -> Result<Vec<Preset>, String> {
    let presets = tradetune_engine::study::preset::bundled().map_err(|e| e.to_string())?;
    presets
        .iter()
        .map(|p| {
            Ok(Preset {
                name: p.name.to_owned(),
                about: p
                    .study
                    .study
                    .description
                    .clone()
                    .unwrap_or_else(|| p.device_class.clone()),
                memory_bytes: Some(p.memory_bytes),
                draft: Draft::from_preset(p).map_err(|e| format!("preset {}: {e}", p.name))?,
                user: false,
            })
        })
        .collect()
}

/// Every preset: the bundled ones, then the user's.
pub fn all(bundled: &[Preset], user: &[UserPreset]) -> Vec<Preset> {
    bundled
        .iter()
        .cloned()
        .chain(user.iter().map(|p| Preset {
            name: p.name.clone(),
            about: "saved by you".into(),
            memory_bytes: None,
            draft: p.draft.clone(),
            user: true,
        }))
        .collect()
}

/// The bundled preset for the first GPU whose name TradeTune recognises (NVML's
/// "NVIDIA GeForce RTX 4080 Laptop GPU", amdgpu's "… Radeon RX 7900 GRE"), else the CPU one.
pub fn for_hardware<S: AsRef<str>>(gpu_names: &[S]) -> &'static str {
    for name in gpu_names {
        let n = name.as_ref().to_ascii_lowercase();
        if n.contains("4080") && n.contains("laptop") {
            return "rtx4080_laptop";
        }
        if n.contains("4080") {
            return "rtx4080";
        }
        if n.contains("7900 gre") {
            return "rx7900gre";
        }
    }
    "cpu"
}

#[cfg(test)]
mod tests {
    use super::for_hardware;

    #[test]
    fn the_detected_gpu_picks_its_preset() {
        assert_eq!(for_hardware(&["NVIDIA GeForce RTX 4080"]), "rtx4080");
        assert_eq!(
            for_hardware(&["NVIDIA GeForce RTX 4080 Laptop GPU"]),
            "rtx4080_laptop"
        );
        assert_eq!(for_hardware(&["Navi 31 [Radeon RX 7900 GRE]"]), "rx7900gre");
        assert_eq!(for_hardware(&["NVIDIA GeForce GTX 1060"]), "cpu");
        assert_eq!(for_hardware::<&str>(&[]), "cpu");
        // The first recognised card wins on a two-GPU box.
        assert_eq!(
            for_hardware(&["Intel UHD 770", "AMD Radeon RX 7900 GRE"]),
            "rx7900gre"
        );
    }
}
