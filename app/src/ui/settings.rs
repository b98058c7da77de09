//! What the app remembers between launches (eframe persistence, under
//! [`SETTINGS_KEY`]): the tab shown, the draft, presets, data files and
//! databases. The serde names here are the saved format: a rename needs an alias, and the test
//! below loads a file the current version saved.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::draft::{Draft, StoredSearchEntry};
use super::presets::UserPreset;

/// Where eframe keeps the settings.
pub const SETTINGS_KEY: &str = "tradetune-settings";

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

/// The settings a launch starts from (see [`load`]), and what it could not read.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The settings: as saved, or as much of them as still reads.
    pub settings: Settings,
    /// `warning:` notices for the app to show: what was not read, and where the file that
    /// held it is kept.
    pub warnings: Vec<String>,
}

/// The settings saved under [`SETTINGS_KEY`] (`saved`, None when
/// eframe's storage holds none) in eframe's file `file` (`app.ron`). Where they no longer read
/// as a whole (a file cut short by a crash, or written by an older or newer build whose
/// engine sections have other fields), as much as reads is kept, field by field, and each
/// saved preset on its own: one preset that no longer reads does not take the others, the
/// draft or the remembered database with it. The file is then copied aside to `app.ron.bad`
/// before the next save overwrites it, and a `warning:` says what was dropped and where the
/// copy is.
pub fn load(saved: Option<&str>, file: Option<&Path>) -> Loaded {
    let mut warnings = Vec::new();
    let settings = match saved {
        None => {
            // eframe reads its file as a whole: one it could not read gives nothing at all.
            let unread = file.is_some_and(|f| {
                std::fs::read_to_string(f).is_ok_and(|t| t.contains(SETTINGS_KEY))
            });
            if let (true, Some(f)) = (unread, file) {
                warnings.push(format!(
                    "warning: the settings file {} could not be read (cut short?): the \
                     settings and saved presets start from their defaults; {}",
                    f.display(),
                    keep_aside(f)
                ));
            }
            Settings::default()
        }
        Some(text) => {
            let mut aside = Aside { file, note: None };
            let settings = match parse::<Settings>(text) {
                Some(s) => s,
                None => {
                    let (settings, dropped) = lenient(text);
                    warnings.push(format!(
                        "warning: some saved settings could not be read (saved by another \
                         version of TradeTune?) and were left out: {}; {}",
                        if dropped.is_empty() {
                            "the settings as a whole".to_owned()
                        } else {
                            dropped.join(", ")
                        },
                        aside.note()
                    ));
                    settings
                }
            };
            for (owner, entry, why) in unread_search(text, &settings) {
                warnings.push(format!(
                    "warning: the searched range of {name} in {owner} no longer reads and was \
                     left out ({why}): {name} is fixed at its value until it is searched again; \
                     the range was {spec}; {note}",
                    name = entry.name,
                    spec = entry.spec,
                    note = aside.note()
                ));
            }
            settings
        }
    };
    Loaded { settings, warnings }
}

/// The settings file, kept aside (see [`keep_aside`]) once at most, however many warnings
/// say so.
struct Aside<'a> {
    /// eframe's file, if the settings came from one.
    file: Option<&'a Path>,
    /// What keeping it aside said.
    note: Option<String>,
}

impl Aside<'_> {
    /// Where the file as it was is kept (kept aside on the first call), or why not.
    fn note(&mut self) -> String {
        let file = self.file;
        self.note
            .get_or_insert_with(|| {
                file.map_or_else(
                    || "the settings were not read from a file".to_owned(),
                    keep_aside,
                )
            })
            .clone()
    }
}

/// The searched parameters in the settings `text` whose ranges no longer read (so the draft
/// or preset that held them was loaded without them, see the draft's `lenient_search`):
/// `(where, the entry, why)`, of the draft and of each saved preset `settings` kept (one
/// dropped as a whole is named on its own).
fn unread_search(text: &str, settings: &Settings) -> Vec<(String, StoredSearchEntry, String)> {
    let mut out = Vec::new();
    for item in ron_items(text, '(', ')').unwrap_or_default() {
        let Some((name, raw)) = item.split_once(':') else {
            continue;
        };
        match name.trim() {
            "draft" => unread_in_draft(raw, "the draft", &mut out),
            "user_presets" => {
                for p in ron_items(raw, '[', ']').unwrap_or_default() {
                    let Some(name) = parse::<Named>(p).map(|n| n.name) else {
                        continue;
                    };
                    if !settings.user_presets.iter().any(|u| u.name == name) {
                        continue;
                    }
                    let draft = ron_items(p, '(', ')').and_then(|fields| {
                        fields.into_iter().find_map(|f| {
                            let (field, value) = f.split_once(':')?;
                            (field.trim() == "draft").then_some(value)
                        })
                    });
                    if let Some(draft) = draft {
                        let owner = format!("the saved preset \"{name}\"");
                        unread_in_draft(draft, &owner, &mut out);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// [`unread_search`] of one draft (`raw`, a RON struct), said to be in `owner`.
fn unread_in_draft(raw: &str, owner: &str, out: &mut Vec<(String, StoredSearchEntry, String)>) {
    for item in ron_items(raw, '(', ')').unwrap_or_default() {
        let Some((name, value)) = item.split_once(':') else {
            continue;
        };
        if name.trim() != "search" {
            continue;
        }
        for entry in parse::<Vec<StoredSearchEntry>>(value).unwrap_or_default() {
            if let Err(why) = entry.read() {
                out.push((owner.to_owned(), entry, why));
            }
        }
    }
}

/// Copies `file` to `<file>.bad`, or where that is taken (the copy of an earlier bad read,
/// which may be the only one holding the presets) to `<file>.bad.1`, `.bad.2`, …: an earlier
/// copy is never overwritten. Says where, or why not.
fn keep_aside(file: &Path) -> String {
    let not_kept = |what: &Path, e: &dyn std::fmt::Display| {
        format!(
            "it could not be kept aside ({}: {e}) and is overwritten at the next save",
            what.display()
        )
    };
    let text = match std::fs::read(file) {
        Ok(t) => t,
        Err(e) => return not_kept(file, &e),
    };
    /// Copies kept aside at most (past them, something else is wrong).
    const MOST: u32 = 1000;
    for n in 0..MOST {
        let mut bad = file.as_os_str().to_owned();
        bad.push(if n == 0 {
            ".bad".to_owned()
        } else {
            format!(".bad.{n}")
        });
        let bad = PathBuf::from(bad);
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&bad);
        match created {
            Ok(mut copy) => {
                use std::io::Write;
                return match copy.write_all(&text).and_then(|()| copy.sync_all()) {
                    Ok(()) => format!("the file as it was is kept at {}", bad.display()),
                    Err(e) => {
                        // A part of it is no copy; the name is free for the next try.
                        let _ = std::fs::remove_file(&bad);
                        not_kept(&bad, &e)
                    }
                };
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return not_kept(&bad, &e),
        }
    }
    not_kept(
        file,
        &format!("{MOST} copies of it are kept aside already; move them away"),
    )
}

/// `text` read as a `T` in RON (as eframe saves it), or None.
fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Option<T> {
    /// eframe's storage over one value, for eframe's own RON reader.
    struct One<'a>(&'a str);
    impl eframe::Storage for One<'_> {
        fn get_string(&self, _: &str) -> Option<String> {
            Some(self.0.to_owned())
        }
        fn set_string(&mut self, _: &str, _: String) {}
        fn remove_string(&mut self, _: &str) {}
        fn flush(&mut self) {}
    }
    eframe::get_value(&One(text), "")
}

/// The settings in `text` field by field, the saved presets one by one; with what was dropped
/// (`user_presets: "fast"`, `draft`, or why none of it reads).
fn lenient(text: &str) -> (Settings, Vec<String>) {
    let mut s = Settings::default();
    let mut dropped = Vec::new();
    let Some(fields) = ron_items(text, '(', ')') else {
        return (
            s,
            vec!["all of them (the text is cut short or not settings)".into()],
        );
    };
    fn set<T: serde::de::DeserializeOwned>(field: &mut T, raw: &str) -> bool {
        parse(raw).map(|v| *field = v).is_some()
    }
    // Whether the draft read as a whole (true where the file has none: the default is kept).
    let mut draft_whole = true;
    for item in fields {
        let Some((name, raw)) = item.split_once(':') else {
            dropped.push(format!("`{item}`"));
            continue;
        };
        let name = name.trim();
        let ok = match name {
            "tab" => set(&mut s.tab, raw),
            "draft" => {
                let (draft, whole) = lenient_draft(raw, "draft", &mut dropped);
                s.draft = draft;
                draft_whole = whole;
                true
            }
            "preset" => set(&mut s.preset, raw),
            "data_files" => set(&mut s.data_files, raw),
            "database" => set(&mut s.database, raw),
            "study_db" => set(&mut s.study_db, raw),
            "user_presets" => match ron_items(raw, '[', ']') {
                Some(presets) => {
                    for p in presets {
                        match parse::<UserPreset>(p).or_else(|| lenient_preset(p, &mut dropped)) {
                            Some(p) => s.user_presets.push(p),
                            None => {
                                let name = parse::<Named>(p)
                                    .map_or_else(|| "one without a name".into(), |n| n.name);
                                dropped.push(format!("the saved preset \"{name}\""));
                            }
                        }
                    }
                    true
                }
                None => false,
            },
            // A field of a newer version: nothing of this one's is lost.
            _ => true,
        };
        if !ok {
            dropped.push(format!("settings field {name}"));
        }
    }
    if !draft_whole && let Some(name) = s.preset.take() {
        // The draft is no longer the preset's as it was applied.
        dropped.push(format!("the name of the preset last applied (\"{name}\")"));
    }
    (s, dropped)
}

/// A saved preset's name alone (what is said of a preset that does not read).
#[derive(Deserialize)]
struct Named {
    name: String,
}

/// The draft in `raw` (a RON struct) section by section into the defaults: a section that
/// does not read (another version's fields: the engine's sections deny fields they do not
/// know) is left at its default and named in `dropped` as `{what}.{section}`; one of a newer
/// version is skipped. Returns the draft and whether it read as a whole.
fn lenient_draft(raw: &str, what: &str, dropped: &mut Vec<String>) -> (Draft, bool) {
    if let Some(d) = parse::<Draft>(raw) {
        return (d, true);
    }
    let mut draft = Draft::default();
    let Some(sections) = ron_items(raw, '(', ')') else {
        dropped.push(what.to_owned());
        return (draft, false);
    };
    for item in sections {
        let Some((name, value)) = item.split_once(':') else {
            dropped.push(format!("{what}: `{item}`"));
            continue;
        };
        let name = name.trim();
        // A draft of this one section (the others at their defaults), read as the draft's
        // own field reads it.
        let Some(one) = parse::<Draft>(&format!("({name}:{value})")) else {
            dropped.push(format!("{what}.{name}"));
            continue;
        };
        match name {
            "env" => draft.env = one.env,
            "ppo" => draft.ppo = one.ppo,
            "train" => draft.train = one.train,
            "split" => draft.split = one.split,
            "evaluation" => draft.evaluation = one.evaluation,
            "study" => draft.study = one.study,
            "sampler" => draft.sampler = one.sampler,
            "pruner" => draft.pruner = one.pruner,
            "search" => draft.search = one.search,
            // A section of a newer version: nothing of this one's is lost.
            _ => {}
        }
    }
    (draft, false)
}

/// A saved preset that does not read as a whole: its name, and its draft section by section
/// (see [`lenient_draft`]); None where the name does not read or there is no draft.
fn lenient_preset(raw: &str, dropped: &mut Vec<String>) -> Option<UserPreset> {
    let name = parse::<Named>(raw)?.name;
    let fields = ron_items(raw, '(', ')')?;
    let draft = fields.iter().find_map(|f| {
        let (field, value) = f.split_once(':')?;
        (field.trim() == "draft").then_some(value)
    })?;
    let (draft, _) = lenient_draft(
        draft,
        &format!("the saved preset \"{name}\": draft"),
        dropped,
    );
    Some(UserPreset { name, draft })
}

/// The top-level items of a RON struct `(a: x, b: y)` (`open` '(') or list `[x, y]` (`open`
/// '['): split at the commas outside brackets and strings; None where `text` is not one whole
/// (cut short).
fn ron_items(text: &str, open: char, close: char) -> Option<Vec<&str>> {
    // A struct may carry its name (`Settings(…)`).
    let t = text
        .trim()
        .trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
    let inner = t.strip_prefix(open)?.strip_suffix(close)?;
    let (mut items, mut depth, mut start) = (Vec::new(), 0i32, 0);
    let (mut in_str, mut escaped) = (false, false);
    for (i, c) in inner.char_indices() {
        if in_str {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return None;
        }
    }
    if in_str || depth != 0 {
        return None;
    }
    items.push(&inner[start..]);
    Some(
        items
            .into_iter()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
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
