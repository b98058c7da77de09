//! What the app remembers between launches (eframe persistence, under
//! [`SETTINGS_KEY`](super::app::SETTINGS_KEY)): the tab shown, the draft, presets, data files and
//! databases. The serde names here are the saved format: a rename needs an alias, and the test
//! below loads a file the current version saved.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::draft::Draft;
use super::presets::UserPreset;

/// The panels, in the order of the tab bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Tab {
    /// Hardware & presets.
    #[default]
    Hardware,
    /// Data, environment, PPO, study settings.
    Configure,
    /// Start/stop and the live charts.
    Run,
    /// Study databases and their trials.
    Studies,
    /// Two studies or trials side by side.
    Compare,
    /// A checkpoint on a held-out split.
    Backtest,
}

impl Tab {
    /// Every tab, in order.
    pub const ALL: [Tab; 6] = [
        Tab::Hardware,
        Tab::Configure,
        Tab::Run,
        Tab::Studies,
        Tab::Compare,
        Tab::Backtest,
    ];

    /// The tab's label (tests find tabs by it).
    pub fn label(self) -> &'static str {
        match self {
            Tab::Hardware => "Hardware & presets",
            Tab::Configure => "Configure",
            Tab::Run => "Run",
            Tab::Studies => "Studies",
            Tab::Compare => "Compare",
            Tab::Backtest => "Backtest",
        }
    }
}

/// What the app remembers between launches (eframe persistence). Every field has a default
/// so an older or partial file still loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The tab shown.
    pub tab: Tab,
    /// The configuration being edited.
    pub draft: Draft,
    /// The preset last applied.
    pub preset: Option<String>,
    /// Market files (empty: the bundled sample).
    pub data_files: Vec<PathBuf>,
    /// The study database last opened in the Studies panel.
    pub database: Option<PathBuf>,
    /// Presets the user saved.
    pub user_presets: Vec<UserPreset>,
    /// The database studies run into (None: `studies.db` in the user data directory).
    pub study_db: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tab: Tab::Hardware,
            draft: Draft::default(),
            preset: None,
            data_files: Vec::new(),
            database: None,
            user_presets: Vec::new(),
            study_db: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::ui::app::SETTINGS_KEY;
    use crate::ui::draft::SearchEntry;

    /// eframe's storage, in memory.
    #[derive(Default)]
    struct Memory(HashMap<String, String>);

    impl eframe::Storage for Memory {
        fn get_string(&self, key: &str) -> Option<String> {
            self.0.get(key).cloned()
        }
        fn set_string(&mut self, key: &str, value: String) {
            self.0.insert(key.to_owned(), value);
        }
        fn remove_string(&mut self, key: &str) {
            self.0.remove(key);
        }
        fn flush(&mut self) {}
    }

    /// Settings with every field away from its default.
    fn edited() -> Settings {
        let mut draft = Draft::default();
        draft.ppo.n_epochs = 7;
        draft.env.lookback = 12;
        draft.study.name = "mine".into();
        draft.search.push(SearchEntry {
            name: "ppo.gamma".into(),
            spec: tradetune_engine::study::file::SearchSpec::parse("{ low = 0.9, high = 0.999 }")
                .unwrap(),
        });
        Settings {
            tab: Tab::Studies,
            draft: draft.clone(),
            preset: Some("saved".into()),
            data_files: vec!["/data/btc.csv".into(), "/data/eth.csv".into()],
            database: Some("/data/studies.db".into()),
            user_presets: vec![UserPreset {
                name: "saved".into(),
                draft,
            }],
            study_db: Some("/data/runs.db".into()),
        }
    }

    #[test]
    fn settings_round_trip_through_eframe_storage() {
        let mut storage = Memory::default();
        eframe::set_value(&mut storage, SETTINGS_KEY, &edited());
        let back: Settings = eframe::get_value(&storage, SETTINGS_KEY).unwrap();
        assert_eq!(back, edited());
    }

    /// A file as this version of the app saved it (eframe writes RON): it must keep loading
    /// after the settings' types change. Renew it only together with a serde alias for what
    /// was renamed.
    #[test]
    fn settings_saved_by_this_version_still_load() {
        let mut storage = Memory::default();
        storage.0.insert(
            SETTINGS_KEY.to_owned(),
            include_str!("settings_saved.ron").to_owned(),
        );
        let s: Settings = eframe::get_value(&storage, SETTINGS_KEY).expect("the saved file loads");
        let want = edited();
        assert_eq!(s.tab, want.tab);
        assert_eq!(s.preset, want.preset);
        assert_eq!(s.data_files, want.data_files);
        assert_eq!(s.database, want.database);
        assert_eq!(s.study_db, want.study_db);
        assert_eq!(s.draft.ppo.n_epochs, 7);
        assert_eq!(s.draft.env.lookback, 12);
        assert_eq!(s.draft.study.name, "mine");
        assert_eq!(s.draft.search, want.draft.search);
        assert_eq!(s.user_presets.len(), 1);
        assert_eq!(s.user_presets[0].name, "saved");
        assert_eq!(s.user_presets[0].draft, s.draft);
    }

    /// Writes the file the test above reads: `TRADETUNE_WRITE_SETTINGS=1 cargo test -p
    /// tradetune --lib settings_saved`.
    #[test]
    fn write_the_saved_settings_file_when_asked() {
        if std::env::var_os("TRADETUNE_WRITE_SETTINGS").is_none() {
            return;
        }
        let mut storage = Memory::default();
        eframe::set_value(&mut storage, SETTINGS_KEY, &edited());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/ui/settings_saved.ron");
        std::fs::write(path, &storage.0[SETTINGS_KEY]).unwrap();
    }
}
