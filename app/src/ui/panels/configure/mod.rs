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
use crate::ui::context::{Command, Context};
use crate::ui::draft::Problem;
use crate::ui::presets::UserPreset;
use tradetune_engine::study::file::SearchSpec;

/// What the Configure panel does (a button, or a test).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Save the draft as a user preset under this name.
    SavePreset(String),
    /// Search this parameter, starting from a range around its fixed value.
    AddSearch(String),
    /// Stop searching this parameter (it keeps its fixed value).
    RemoveSearch(String),
    /// Add this device to the study's devices (a device listed twice takes two workers' slots).
    AddDevice(String),
    /// Remove the study's device at this index.
    RemoveDevice(usize),
    /// An effect beyond the panel (the data, a dialog, Start and Stop).
    App(Command),
}

impl From<Command> for Action {
    fn from(c: Command) -> Self {
        Action::App(c)
    }
}

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

impl ConfigureView {
    /// Draws the panel; it edits the context's draft in place.
    pub fn ui(&mut self, ui: &mut egui::Ui, cx: &mut Context, out: &mut Vec<Command>) {
        cx.form_problems = self.form_problems();
        let mut actions = Vec::new();
        show(ui, self, cx, &mut actions);
        for a in actions {
            self.handle(a, cx, out);
        }
    }

    /// Carries out one of the panel's actions.
    pub fn handle(&mut self, action: Action, cx: &mut Context, out: &mut Vec<Command>) {
        match action {
            Action::SavePreset(name) => save_preset(cx, &name),
            Action::AddSearch(name) => search::add(&mut cx.settings.draft, self, &name),
            Action::RemoveSearch(name) => search::remove(&mut cx.settings.draft, &name),
            Action::AddDevice(name) => add_device(cx, &name),
            Action::RemoveDevice(i) => remove_device(cx, i),
            Action::App(c) => out.push(c),
        }
    }

    /// The searched parameters whose form text does not make a range, as problems on their
    /// field (the app keeps them in the context: they block Start).
    pub fn form_problems(&self) -> Vec<Problem> {
        search::form_problems(&self.search_forms)
    }
}

fn show(
    ui: &mut egui::Ui,
    view: &mut ConfigureView,
    state: &mut Context,
    commands: &mut Vec<Action>,
) {
    let problems = state.problems();
    data::section(ui, state, &problems, commands);
    ui.separator();

    let window_before = data_window(&state.settings.draft);
    let draft = &mut state.settings.draft;
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
    search::section(ui, &mut state.settings.draft, view, &problems, commands);
    ui.separator();
    if let Some(data) = state.data.ready() {
        let check = state
            .settings
            .draft
            .memory(data.shape, state.device_bytes());
        widgets::memory_bar(ui, &check);
        let draft = &state.settings.draft;
        let folds = draft.fold_count(&data.dataset.timestamps).ok().flatten();
        let samples_per_s = state.run.samples_per_s;
        ui.label(evaluation::work_estimate(draft, folds, samples_per_s));
    }
    ui.horizontal(|ui| {
        let l = ui.label("preset name");
        ui.text_edit_singleline(&mut view.new_preset_name)
            .labelled_by(l.id);
        if ui.button("Save as preset").clicked() {
            commands.push(Action::SavePreset(view.new_preset_name.clone()));
        }
    });
    super::run::start_stop(ui, state, commands);
    if data_window(&state.settings.draft) != window_before {
        // The observation window and the episode length change which bars are usable (the
        // loader checks both): reload, so an error they caused goes once they are fixed.
        commands.push(Command::ReloadData.into());
    }
}

/// What of the draft the data is loaded with (see [`Context::load_data`]): the lookback and
/// the episode length.
pub fn data_window(draft: &crate::ui::draft::Draft) -> (usize, usize) {
    (draft.env.lookback, draft.env.episode_bars)
}

/// [`Action::SavePreset`]: saves the draft as a user preset (replacing one of that name; a
/// bundled preset's name is refused).
fn save_preset(state: &mut Context, name: &str) {
    let name = name.trim().to_owned();
    if name.is_empty() {
        state.notice("a preset needs a name");
        return;
    }
    if state.presets.iter().any(|p| p.name == name) {
        // The bundled one is found first by name: a user preset of its name could never be
        // applied.
        state.notice(format!(
            "{name} is a bundled preset: save yours under another name"
        ));
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
    state.save_now = true;
    state.notice(format!("saved preset {name}"));
}

/// [`Action::AddDevice`]: another slot on `name` (a device listed twice takes two workers).
fn add_device(state: &mut Context, name: &str) {
    let name = name.trim();
    if !name.is_empty() {
        state.settings.draft.study.devices.push(name.to_owned());
    }
}

/// [`Action::RemoveDevice`]: removes the study's device at `i`.
fn remove_device(state: &mut Context, i: usize) {
    let devices = &mut state.settings.draft.study.devices;
    if i < devices.len() {
        devices.remove(i);
    }
}
