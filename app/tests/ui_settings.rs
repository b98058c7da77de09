//! What the desktop program remembers between launches, driven through egui_kittest: it restarts
//! with its saved settings, and settings an older version saved still load.

use crate::common::panels::*;
use crate::common::ui::step_until;
use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::app::SETTINGS_KEY;
use tradetune_app::ui::draft::Draft;
use tradetune_app::ui::settings::{Settings, Tab};

#[test]
fn the_app_restarts_with_its_saved_settings() {
    let mut h = harness(app_with(Settings::default(), no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    h.get_by_label("Configure").click();
    settle(&mut h);
    h.get_by_role_and_label(Role::SpinButton, "n_epochs")
        .set_value_accesskit(7.0);
    h.get_by_role_and_label(Role::TextInput, "preset name")
        .click();
    h.run_steps(1);
    h.get_by_role_and_label(Role::TextInput, "preset name")
        .type_text("mine");
    settle(&mut h);
    h.get_by_label("Save as preset").click();
    settle(&mut h);

    let mut storage = MemoryStorage::default();
    eframe::App::save(h.state_mut(), &mut storage);
    let restored: Settings = eframe::get_value(&storage, SETTINGS_KEY).expect("settings saved");
    assert_eq!(restored, h.state().cx.settings);
    assert_eq!(restored.tab, Tab::Configure);
    assert_eq!(restored.draft.ppo.n_epochs, 7);
    assert_eq!(restored.user_presets.len(), 1);
    assert_eq!(restored.user_presets[0].name, "mine");

    // A new app from those settings shows them.
    let mut again = harness(app_with(restored, no_dialogs()));
    step_until(&mut again, "the bundled data", data_loaded);
    let epochs = again.get_by_role_and_label(Role::SpinButton, "n_epochs");
    assert_eq!(epochs.value().as_deref(), Some("7"));
    again.get_by_label("Hardware & presets").click();
    settle(&mut again);
    again.get_by_label("mine");
}

#[test]
fn settings_from_an_older_version_still_load() {
    // Every field has a default: a file with only some of them loads, the rest default.
    let mut storage = MemoryStorage::default();
    storage
        .0
        .insert(SETTINGS_KEY.into(), "(tab: Studies)".into());
    let s: Settings = eframe::get_value(&storage, SETTINGS_KEY).expect("partial settings load");
    assert_eq!(s.tab, Tab::Studies);
    assert_eq!(s.draft, Draft::default());
}

/// A preset saved under a bundled preset's name could never be applied (the bundled one is
/// found first): the name is refused, saying why, and nothing is saved.
#[test]
fn a_bundled_presets_name_is_refused_for_a_saved_preset() {
    let mut h = harness(app_with(Settings::default(), no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    let bundled = h.state().cx.presets[0].name.clone();
    h.get_by_label("Configure").click();
    settle(&mut h);
    h.get_by_role_and_label(Role::TextInput, "preset name")
        .click();
    h.run_steps(1);
    h.get_by_role_and_label(Role::TextInput, "preset name")
        .type_text(&bundled);
    settle(&mut h);
    h.get_by_label("Save as preset").click();
    settle(&mut h);
    let cx = &h.state().cx;
    assert!(cx.settings.user_presets.is_empty());
    assert!(
        cx.notices
            .last()
            .is_some_and(|n| n.contains(&bundled) && n.contains("bundled preset")),
        "{:?}",
        cx.notices
    );
}

/// Settings an older or newer build saved, or a file cut short, no longer read as a whole:
/// what still reads is kept (the tab, the remembered database, every preset that reads on its
/// own), the file is copied aside to `app.ron.bad` before the next save overwrites it, and a
/// `warning:` says what was left out and where the copy is.
#[test]
fn settings_that_no_longer_read_keep_what_does_and_the_file_is_kept_aside() {
    use tradetune_app::ui::presets::UserPreset;
    use tradetune_app::ui::settings;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.ron");
    let mut fast = Draft::default();
    fast.ppo.n_epochs = 3;
    let mut slow = Draft::default();
    slow.ppo.n_epochs = 9;
    slow.env.lookback = 40;
    let mut draft = Draft::default();
    draft.ppo.n_epochs = 5;
    draft.study.name = "mine".into();
    let saved = Settings {
        tab: Tab::Studies,
        draft: draft.clone(),
        preset: Some("fast".into()),
        database: Some("/data/studies.db".into()),
        user_presets: vec![
            UserPreset {
                name: "fast".into(),
                draft: fast.clone(),
            },
            UserPreset {
                name: "slow".into(),
                draft: slow.clone(),
            },
        ],
        ..Settings::default()
    };
    let mut storage = MemoryStorage::default();
    eframe::set_value(&mut storage, SETTINGS_KEY, &saved);
    let text = storage.0[SETTINGS_KEY].clone();
    // A field of a newer build in the draft's and in "slow"'s study sections (which deny
    // fields they do not know); "fast" is as this build writes it.
    let marker = "device_class:None";
    let at: Vec<usize> = text.match_indices(marker).map(|(i, _)| i).collect();
    assert_eq!(at.len(), 3, "{text}");
    let mut text = text;
    for &i in [at[2], at[0]].iter() {
        text.insert_str(i + marker.len(), ",gpu_hours:3");
    }
    assert!(eframe::get_value::<Settings>(&OneValue(&text), SETTINGS_KEY).is_none());
    std::fs::write(&file, &text).unwrap();

    // What reads is kept section by section: the draft and "slow" lose only their study
    // sections (to the defaults); "fast" reads whole. The draft is no longer the preset last
    // applied: its name goes.
    let loaded = settings::load(Some(&text), Some(&file));
    let s = &loaded.settings;
    assert_eq!(s.tab, Tab::Studies);
    assert_eq!(s.preset, None);
    assert_eq!(s.database, saved.database);
    let mut want = draft.clone();
    want.study = Draft::default().study;
    assert_eq!(s.draft, want);
    let names: Vec<&str> = s.user_presets.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["fast", "slow"]);
    assert_eq!(s.user_presets[0].draft, fast);
    assert_eq!(s.user_presets[1].draft, slow);
    let bad = dir.path().join("app.ron.bad");
    assert_eq!(std::fs::read_to_string(&bad).unwrap(), text);
    let [w] = &loaded.warnings[..] else {
        panic!("{:?}", loaded.warnings)
    };
    assert!(w.starts_with("warning:"), "{w}");
    assert!(w.contains("\"slow\": draft.study"), "{w}");
    assert!(!w.contains("\"fast\":"), "{w}");
    assert!(w.contains("left out: draft.study, "), "{w}");
    assert!(!w.contains("settings field draft"), "{w}");
    assert!(w.contains("preset last applied (\"fast\")"), "{w}");
    assert!(w.contains(&bad.display().to_string()), "{w}");

    // A file eframe could not read at all (cut short by a crash while it was written): it is
    // kept aside under another name, and the first copy (the only one holding the presets)
    // stays as it was; a third bad read takes the next name.
    std::fs::write(&file, "{\"tradetune-settings\":\"(tab:Stud").unwrap();
    let loaded = settings::load(None, Some(&file));
    assert_eq!(loaded.settings, Settings::default());
    let [w] = &loaded.warnings[..] else {
        panic!("{:?}", loaded.warnings)
    };
    let bad1 = dir.path().join("app.ron.bad.1");
    assert!(
        w.starts_with("warning:") && w.contains(&bad1.display().to_string()),
        "{w}"
    );
    assert_eq!(std::fs::read_to_string(&bad).unwrap(), text);
    assert!(
        std::fs::read_to_string(&bad1)
            .unwrap()
            .ends_with("(tab:Stud")
    );
    std::fs::write(&file, "{\"tradetune-settings\":\"(tab:Ru").unwrap();
    let loaded = settings::load(None, Some(&file));
    let bad2 = dir.path().join("app.ron.bad.2");
    assert!(
        loaded.warnings[0].contains(&bad2.display().to_string()),
        "{:?}",
        loaded.warnings
    );
    assert!(std::fs::read_to_string(&bad2).unwrap().ends_with("(tab:Ru"));
    assert_eq!(std::fs::read_to_string(&bad).unwrap(), text);

    // A first launch (no file) and settings that read are not warned about.
    assert!(
        settings::load(None, Some(&dir.path().join("none.ron")))
            .warnings
            .is_empty()
    );
    let fine = storage.0[SETTINGS_KEY].clone();
    let loaded = settings::load(Some(&fine), Some(&file));
    assert_eq!((loaded.settings, loaded.warnings.len()), (saved, 0));
}

/// eframe's storage over one value (as eframe's file holds it under the settings' key).
struct OneValue<'a>(&'a str);

impl eframe::Storage for OneValue<'_> {
    fn get_string(&self, _: &str) -> Option<String> {
        Some(self.0.to_owned())
    }
    fn set_string(&mut self, _: &str, _: String) {}
    fn remove_string(&mut self, _: &str) {}
    fn flush(&mut self) {}
}

/// A preset saved or deleted is saved at once (at the end of the frame), not at eframe's
/// next autosave up to 30 s later: a crash meanwhile does not lose it.
#[test]
fn a_preset_saved_or_deleted_is_saved_at_once() {
    let mut h = harness(app_with(Settings::default(), no_dialogs()));
    step_until(&mut h, "the bundled data", data_loaded);
    assert!(!h.state().cx.save_now);
    h.get_by_label("Configure").click();
    settle(&mut h);
    h.get_by_role_and_label(Role::TextInput, "preset name")
        .click();
    h.run_steps(1);
    h.get_by_role_and_label(Role::TextInput, "preset name")
        .type_text("mine");
    settle(&mut h);
    h.get_by_label("Save as preset").click();
    h.run_steps(1);
    assert!(
        h.state().cx.save_now,
        "saving a preset waits for the autosave"
    );
    // The end of the frame (eframe::App::ui after the frame): written and flushed at once,
    // and only once.
    let mut storage = Flushed::default();
    h.state_mut().save_if_asked(Some(&mut storage));
    assert_eq!(storage.flushes, 1);
    let saved: Settings = eframe::get_value(&storage, SETTINGS_KEY).expect("settings written");
    let names: Vec<&str> = saved.user_presets.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["mine"]);
    assert!(!h.state().cx.save_now);
    let mut again = Flushed::default();
    h.state_mut().save_if_asked(Some(&mut again));
    assert_eq!((again.flushes, again.values.len()), (0, 0));

    h.get_by_label("Hardware & presets").click();
    settle(&mut h);
    h.get_by_label("delete mine").click();
    h.run_steps(1);
    assert!(!h.state().cx.save_now, "asked first, nothing deleted yet");
    h.run_steps(1);
    h.get_by_label(tradetune_app::ui::panels::hardware::DELETE)
        .click();
    h.run_steps(1);
    let cx = &h.state().cx;
    assert!(cx.settings.user_presets.is_empty());
    assert!(cx.save_now, "deleting a preset waits for the autosave");
    h.state_mut().save_if_asked(Some(&mut storage));
    assert_eq!(storage.flushes, 2);
    let saved: Settings = eframe::get_value(&storage, SETTINGS_KEY).expect("settings written");
    assert!(saved.user_presets.is_empty());
}

/// eframe's storage in memory, counting its flushes (writes to the file).
#[derive(Default)]
struct Flushed {
    values: std::collections::HashMap<String, String>,
    flushes: usize,
}

impl eframe::Storage for Flushed {
    fn get_string(&self, key: &str) -> Option<String> {
        self.values.get(key).cloned()
    }
    fn set_string(&mut self, key: &str, value: String) {
        self.values.insert(key.to_owned(), value);
    }
    fn remove_string(&mut self, key: &str) {
        self.values.remove(key);
    }
    fn flush(&mut self) {
        self.flushes += 1;
    }
}

/// A searched range in saved settings that no longer reads (typed into the file by hand) is
/// left out of the draft or preset that held it, and the app says so in a warning for each
/// one: the parameter, where it was, why, and the range as it was; the file is kept aside
/// (once) before the next save drops it.
#[test]
fn a_saved_search_range_that_no_longer_reads_is_named_in_a_warning() {
    use tradetune_app::ui::TradeTuneApp;
    use tradetune_app::ui::draft::SearchEntry;
    use tradetune_app::ui::presets::UserPreset;
    use tradetune_app::ui::settings;
    use tradetune_engine::study::file::SearchSpec;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.ron");
    let entry = |name: &str, spec: &str| SearchEntry {
        name: name.into(),
        spec: SearchSpec::parse(spec).unwrap(),
    };
    let draft = Draft {
        search: vec![
            entry("ppo.gamma", "{ low = 0.9, high = 0.999 }"),
            entry("ppo.learning_rate", "{ low = 0.0001, high = 0.001 }"),
        ],
        ..Draft::default()
    };
    let saved = Settings {
        draft: draft.clone(),
        user_presets: vec![
            UserPreset {
                name: "fast".into(),
                draft: draft.clone(),
            },
            UserPreset {
                name: "plain".into(),
                draft: Draft::default(),
            },
        ],
        ..Settings::default()
    };
    let mut storage = MemoryStorage::default();
    eframe::set_value(&mut storage, SETTINGS_KEY, &saved);
    let good = "{ low = 0.0001, high = 0.001 }";
    let typed = "{ low = 0.0001, hgh = 0.001 }";
    let text = storage.0[SETTINGS_KEY].clone();
    assert_eq!(text.matches(good).count(), 2, "{text}");
    let text = text.replace(good, typed);
    std::fs::write(&file, &text).unwrap();

    let loaded = settings::load(Some(&text), Some(&file));
    let s = &loaded.settings;
    let kept = vec![entry("ppo.gamma", "{ low = 0.9, high = 0.999 }")];
    assert_eq!(s.draft.search, kept);
    assert_eq!(s.user_presets[0].draft.search, kept);
    assert_eq!(s.user_presets[1].draft, Draft::default());
    let bad = dir.path().join("app.ron.bad");
    assert_eq!(std::fs::read_to_string(&bad).unwrap(), text);
    assert!(
        !dir.path().join("app.ron.bad.1").exists(),
        "kept aside once"
    );
    let [in_draft, in_preset] = &loaded.warnings[..] else {
        panic!("{:?}", loaded.warnings)
    };
    for (w, owner) in [
        (in_draft, "the draft"),
        (in_preset, "the saved preset \"fast\""),
    ] {
        assert!(
            w.starts_with(&format!(
                "warning: the searched range of ppo.learning_rate in {owner} no longer reads"
            )),
            "{w}"
        );
        assert!(w.contains("unknown key 'hgh'"), "{w}");
        assert!(w.contains(&format!("the range was {typed}")), "{w}");
        assert!(w.contains(&bad.display().to_string()), "{w}");
    }

    // The app started on them shows both warnings.
    let app = TradeTuneApp::from_loaded(
        loaded.clone(),
        std::sync::Arc::new(no_dialogs()),
        tradetune_engine::device::describe_devices(),
    );
    let mut h = harness(app);
    settle(&mut h);
    h.get_by_label("2 warnings").click();
    settle(&mut h);
    h.get_by_label(in_draft.as_str());
    // (The last notice is in the status bar too.)
    assert!(h.get_all_by_label(in_preset.as_str()).next().is_some());

    // Settings whose ranges all read are not warned about.
    let fine = storage.0[SETTINGS_KEY].clone();
    assert!(settings::load(Some(&fine), Some(&file)).warnings.is_empty());
}
