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

/// Every preset: bundled first, then the user's.
pub fn all(user: &[UserPreset]) -> Vec<Preset> {
    user.iter()
        .map(|p| Preset {
            name: p.name.clone(),
            about: "saved by you".into(),
            memory_bytes: None,
            draft: p.draft.clone(),
            user: true,
        })
        .collect()
}
