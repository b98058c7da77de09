//! Configure: the data source (bundled sample or files picked with a native dialog, with the
//! inspect summary or the input error inline), the environment, PPO and the run's settings.
//! Invalid values are flagged where they are typed and Start stays disabled until fixed. The
//! fields are drawn from one table ([`fields`]).

mod data;
mod devices;
mod evaluation;
pub mod fields;
mod search;
pub mod search_form;
mod split;

use std::collections::HashMap;

use self::search_form::SearchForm;
use super::widgets;
use crate::ui::command::Command;
use crate::ui::presets::UserPreset;
use crate::ui::state::AppState;
use tradetune_engine::study::file::SearchSpec;

pub use data::use_files as use_data;
pub use search::{
    add as add_search, form_problems as search_form_problems, remove as remove_search,
};

/// What the Configure panel keeps between frames besides the draft.
#[derive(Debug, Clone)]
pub struct ConfigureView {
    /// Name typed into "Save as preset".
    pub new_preset_name: String,
    /// The layer lists (`net_arch.pi`, `net_arch.vf`) as typed, by path.
    pub texts: fields::Texts,
    /// The name of a new searched parameter being typed.
    pub new_search: String,
    /// The searched parameters' editor forms by name.
    pub search_forms: HashMap<String, SearchRow>,
    /// The device chosen in "add device".
    pub new_device: String,
}

impl Default for ConfigureView {
    fn default() -> Self {
        ConfigureView {
            new_preset_name: String::new(),
            texts: Default::default(),
            new_search: String::new(),
            search_forms: HashMap::new(),
            new_device: "cpu".into(),
        }
    }
}

/// One searched parameter's editor: the form as typed, the stored spec it was last read from
/// or written to (a change of the spec elsewhere, e.g. a preset, re-reads it), and why the
/// form's text does not make a spec, while it does not.
#[derive(Debug, Clone)]
pub struct SearchRow {
    pub synced: SearchSpec,
    pub form: SearchForm,
    pub error: Option<String>,
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    let problems = state.problems();
    data::section(ui, state, &problems, commands);
    ui.separator();

    let lookback_before = state.settings.draft.env.lookback;
    let draft = &mut state.settings.draft;
    let view = &mut state.configure;
    let machine = &state.devices;
    ui.columns(2, |cols| {
        let [left, right] = cols else {
            unreachable!("two columns")
        };
        fields::column(
            left,
            fields::LEFT,
            draft,
            &mut view.texts,
            &problems,
            |ui, draft| devices::editor(ui, &draft.study, machine, &mut view.new_device, commands),
        );
        fields::column(
            right,
            fields::RIGHT,
            draft,
            &mut view.texts,
            &problems,
            |_, _| {},
        );
    });

    ui.separator();
    search::section(ui, state, &problems, commands);
    ui.separator();
    if let Some(data) = state.data.ready() {
        let check = state
            .settings
            .draft
            .memory(data.shape, state.device_bytes());
        widgets::memory_bar(ui, &check);
        let draft = &state.settings.draft;
        let folds = draft.fold_count(&data.dataset.timestamps).ok().flatten();
        let samples_per_s = state.run.samples_per_second.last().map(|p| p.v);
        ui.label(evaluation::work_estimate(draft, folds, samples_per_s));
    }
    ui.horizontal(|ui| {
        let l = ui.label("preset name");
        ui.text_edit_singleline(&mut state.configure.new_preset_name)
            .labelled_by(l.id);
        if ui.button("Save as preset").clicked() {
            commands.push(Command::SavePreset(state.configure.new_preset_name.clone()));
        }
    });
    super::run::start_stop(ui, state, commands);
    if state.settings.draft.env.lookback != lookback_before {
        // The observation window changes which bars are usable: reload.
        commands.push(Command::ReloadData);
    }
}

/// [`Command::SavePreset`]: saves the draft as a user preset (replacing one of that name).
pub fn save_preset(state: &mut AppState, name: &str) {
    let name = name.trim().to_owned();
    if name.is_empty() {
        state.notice("a preset needs a name");
        return;
    }
    let draft = state.settings.draft.clone();
    let user = &mut state.settings.user_presets;
    match user.iter_mut().find(|p| p.name == name) {
        Some(p) => p.draft = draft,
        None => user.push(UserPreset {
            name: name.clone(),
            draft,
        }),
    }
    state.settings.preset = Some(name.clone());
    state.notice(format!("saved preset {name}"));
}

/// [`Command::AddDevice`]: another slot on `name` (a device listed twice takes two workers).
pub fn add_device(state: &mut AppState, name: &str) {
    let name = name.trim();
    if !name.is_empty() {
        state.settings.draft.study.devices.push(name.to_owned());
    }
}

/// [`Command::RemoveDevice`]: removes the study's device at `i`.
pub fn remove_device(state: &mut AppState, i: usize) {
    let devices = &mut state.settings.draft.study.devices;
    if i < devices.len() {
        devices.remove(i);
    }
}
