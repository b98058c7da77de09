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
