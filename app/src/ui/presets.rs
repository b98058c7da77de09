//! Presets: the bundled ones for each class of device (from `resources/presets/`, through the
//! engine) and the user's own, saved from the Configure panel.

use serde::{Deserialize, Serialize};

use tradetune_engine::telemetry::pci_names::{has_words, words};

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

/// The bundled preset chosen for this machine's GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardwareMatch {
    /// The bundled preset's name (`cpu` when no GPU is recognised).
    pub preset: &'static str,
    /// The card it was chosen for, as the probe names it.
    pub card: Option<String>,
    /// Set when no bundled preset was written for this card and the closest one was chosen:
    /// why it is the closest.
    pub closest_because: Option<&'static str>,
}

/// What one card's name says about the bundled presets: `(preset, why it is only the closest)`.
///
/// Names are compared by words, never by substring, so a list such as pci.ids' `Radeon RX 7900
/// XT/7900 XTX/7900 GRE` is not taken for a GRE. The presets were written for three cards: the
/// RX 7900 GRE, the RTX 4080 and the RTX 4080 Laptop GPU. Cards on the same chip with at least
/// their memory get the closest of them, since its batch sizes and networks fit and only leave
/// some of the card unused (the user can raise them): every other Navi 31 card (RX 7900 XTX
/// 24 GB, 7900 XT 20 GB, 7900M 16 GB, Radeon Pro W7800/W7900) gets `rx7900gre`, the RTX 4080
/// SUPER (AD103, 16 GB) and RTX 4090 (AD102, 24 GB) get `rtx4080`, and the RTX 4090 Laptop GPU
/// (AD103, 16 GB) gets `rtx4080_laptop`. Any other card, and an AMD card the probe could name
/// only by its ids, gets the CPU preset.
fn preset_for_card(name: &str) -> Option<(&'static str, Option<&'static str>)> {
    // A name that lists several cards (pci.ids' `Radeon RX 7900 XT/7900 XTX/7900 GRE`) is
    // none of them exactly.
    let list = name
        .split('/')
        .filter(|p| p.chars().any(|c| c.is_ascii_digit()))
        .count()
        > 1;
    let (preset, closest) = preset_by_words(name)?;
    const LIST: &str = "the name lists several cards of the chip this preset was written for";
    Some((preset, closest.or(list.then_some(LIST))))
}

fn preset_by_words(name: &str) -> Option<(&'static str, Option<&'static str>)> {
    let w = words(name);
    let has = |needle: &[&str]| has_words(&w, needle);
    let laptop = has(&["laptop"]) || has(&["mobile"]) || has(&["max", "q"]);
    const NAVI31: &str = "the same Navi 31 chip (RDNA3) with at least the GRE's 16 GB";
    const AD103: &str = "the same AD103 chip with the same 16 GB";
    const AD102: &str = "a larger Ada card with more than the 4080's 16 GB";
    const LAPTOP: &str = "the same laptop class of Ada card with the same 16 GB";
    if has(&["rtx", "4080"]) {
        return Some(match (laptop, has(&["4080", "super"])) {
            (true, _) => ("rtx4080_laptop", None),
            (false, false) => ("rtx4080", None),
            (false, true) => ("rtx4080", Some(AD103)),
        });
    }
    if has(&["rtx", "4090"]) {
        return Some(if laptop {
            ("rtx4080_laptop", Some(LAPTOP))
        } else {
            ("rtx4080", Some(AD102))
        });
    }
    if has(&["7900", "gre"]) {
        return Some(("rx7900gre", None));
    }
    let navi31 = has(&["7900", "xtx"])
        || has(&["7900", "xt"])
        || has(&["7900m"])
        || has(&["w7900"])
        || has(&["w7800"])
        || has(&["navi", "31"]);
    navi31.then_some(("rx7900gre", Some(NAVI31)))
}

/// The bundled preset for this machine's GPUs (`gpu_names` as the probes report them: NVML's
/// "NVIDIA GeForce RTX 4080 Laptop GPU", amdgpu's "AMD Radeon RX 7900 GRE"): the first card
/// with a preset of its own, else the first with a closest one (see [`preset_for_card`]),
/// else the CPU preset.
pub fn match_hardware<S: AsRef<str>>(gpu_names: &[S]) -> HardwareMatch {
    let found: Vec<(&str, &'static str, Option<&'static str>)> = gpu_names
        .iter()
        .filter_map(|n| {
            let (preset, closest) = preset_for_card(n.as_ref())?;
            Some((n.as_ref(), preset, closest))
        })
        .collect();
    let pick = found
        .iter()
        .find(|(_, _, closest)| closest.is_none())
        .or_else(|| found.first());
    match pick {
        Some(&(card, preset, closest)) => HardwareMatch {
            preset,
            card: Some(card.to_owned()),
            closest_because: closest,
        },
        None => HardwareMatch {
            preset: "cpu",
            card: None,
            closest_because: None,
        },
    }
}

/// The name of [`match_hardware`]'s preset.
pub fn for_hardware<S: AsRef<str>>(gpu_names: &[S]) -> &'static str {
    match_hardware(gpu_names).preset
}

#[cfg(test)]
mod tests {
    use super::{for_hardware, match_hardware};

    #[test]
    fn the_detected_gpu_picks_its_preset() {
        assert_eq!(for_hardware(&["NVIDIA GeForce RTX 4080"]), "rtx4080");
        assert_eq!(
            for_hardware(&["NVIDIA GeForce RTX 4080 Laptop GPU"]),
            "rtx4080_laptop"
        );
        assert_eq!(for_hardware(&["Navi 31 [Radeon RX 7900 GRE]"]), "rx7900gre");
        assert_eq!(for_hardware(&["AMD Radeon RX 7900 GRE"]), "rx7900gre");
        assert_eq!(for_hardware(&["NVIDIA GeForce GTX 1060"]), "cpu");
        assert_eq!(for_hardware::<&str>(&[]), "cpu");
        // The first recognised card wins on a two-GPU box.
        assert_eq!(
            for_hardware(&["Intel UHD 770", "AMD Radeon RX 7900 GRE"]),
            "rx7900gre"
        );
    }

    #[test]
    fn cards_without_a_preset_get_the_closest_or_the_cpu() {
        let xtx = match_hardware(&["AMD Radeon RX 7900 XTX"]);
        assert_eq!(xtx.preset, "rx7900gre");
        assert_eq!(xtx.card.as_deref(), Some("AMD Radeon RX 7900 XTX"));
        assert!(xtx.closest_because.unwrap().contains("Navi 31"));
        for closest in [
            "AMD Radeon RX 7900 XT",
            "AMD Radeon RX 7900M",
            "AMD Navi 31 (1002:744c rev c9)",
        ] {
            let m = match_hardware(&[closest]);
            assert_eq!(
                (m.preset, m.closest_because.is_some()),
                ("rx7900gre", true),
                "{closest}"
            );
        }
        let gre = match_hardware(&["AMD Radeon RX 7900 GRE"]);
        assert_eq!(gre.closest_because, None);
        // Neither a list of cards nor a neighbour's name is taken for a GRE.
        let list = match_hardware(&["Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]"]);
        assert_eq!(list.preset, "rx7900gre");
        assert!(list.closest_because.is_some());
        assert_eq!(for_hardware(&["AMD Radeon RX 7650 GRE"]), "cpu");
        assert_eq!(for_hardware(&["AMD Radeon RX 9070 GRE"]), "cpu");
        assert_eq!(for_hardware(&["AMD GPU 1002:744c (card1)"]), "cpu");
        // NVIDIA neighbours.
        assert_eq!(for_hardware(&["NVIDIA GeForce RTX 4080 SUPER"]), "rtx4080");
        assert_eq!(for_hardware(&["NVIDIA GeForce RTX 4090"]), "rtx4080");
        assert_eq!(
            for_hardware(&["NVIDIA GeForce RTX 4090 Laptop GPU"]),
            "rtx4080_laptop"
        );
        assert_eq!(
            for_hardware(&["NVIDIA GeForce RTX 4080 Max-Q / Mobile"]),
            "rtx4080_laptop"
        );
        assert_eq!(for_hardware(&["NVIDIA GeForce RTX 4070"]), "cpu");
        // A card with a preset of its own wins over an earlier one with only a closest one.
        let two = match_hardware(&["AMD Radeon RX 7900 XTX", "NVIDIA GeForce RTX 4080"]);
        assert_eq!((two.preset, two.closest_because), ("rtx4080", None));
    }
}
