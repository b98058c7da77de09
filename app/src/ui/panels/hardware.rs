//! Hardware & presets: what this machine can train on, its GPUs live (the device view,
//! [`super::devices_view`]), the preset cards, and the memory bar of the current configuration
//! against the chosen device's budget.

use tradetune_engine::device::memory::fmt_bytes;

use tradetune_engine::device::DeviceInfo;

use super::widgets;
use crate::ui::context::{Command, Context};
use crate::ui::presets;

/// What the Hardware & presets panel does (a button, or a test).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Ask wgpu for its adapters again and list the devices anew (a card plugged in, a driver
    /// installed).
    RefreshDevices,
    /// A preset card's "Apply" or "delete" was clicked: ask first where the click would lose
    /// something (see [`Confirm`]), else carry it out.
    Ask(Confirm),
    /// The question was answered "Cancel": nothing changes.
    CancelAsk,
    /// Apply the preset with this name to the draft (no question: the question's "Replace").
    ApplyPreset(String),
    /// Delete the user preset with this name (no question: the question's "Delete").
    DeletePreset(String),
    /// Install the desktop launcher and icon for this user (`tradetune install-desktop`).
    InstallLauncher {
        /// Also on the desktop.
        on_desktop: bool,
    },
}

/// What a preset card asks before it is carried out: one click must not lose work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// "Apply <name>" replaces the whole draft (study name, searched ranges, split, …): asked
    /// where the draft holds edits kept nowhere else (see [`draft_is_kept`]).
    Apply(String),
    /// "delete <name>" forgets a saved preset for good (the settings are written at once).
    Delete(String),
}

/// The answer "Replace" of [`Confirm::Apply`]'s question.
pub const REPLACE: &str = "Replace";
/// The answer "Delete" of [`Confirm::Delete`]'s question.
pub const DELETE: &str = "Delete";
/// The answer that keeps everything as it is.
pub const CANCEL: &str = "Cancel";

/// The Hardware & presets panel: the devices, the GPUs' live figures, the presets and the
/// memory estimate. Its own state is the question a preset card asks; it edits the draft's
/// device and presets in the context.
#[derive(Debug, Clone, Default)]
pub struct HardwareView {
    /// The question shown on a preset card, until it is answered.
    pub confirm: Option<Confirm>,
}

impl HardwareView {
    /// Draws the panel.
    pub fn ui(&mut self, ui: &mut egui::Ui, cx: &mut Context, out: &mut Vec<Command>) {
        let mut actions = Vec::new();
        show(ui, cx, self.confirm.as_ref(), &mut actions);
        for a in actions {
            self.handle(a, cx, out);
        }
    }

    /// Carries out one of the panel's actions.
    pub fn handle(&mut self, action: Action, cx: &mut Context, out: &mut Vec<Command>) {
        match action {
            Action::RefreshDevices => refresh_devices(cx),
            Action::Ask(Confirm::Apply(name)) if draft_is_kept(cx) => {
                self.confirm = None;
                out.push(Command::ApplyPreset(name));
            }
            Action::Ask(confirm) => self.confirm = Some(confirm),
            Action::CancelAsk => self.confirm = None,
            Action::ApplyPreset(name) => {
                self.confirm = None;
                out.push(Command::ApplyPreset(name));
            }
            Action::DeletePreset(name) => {
                self.confirm = None;
                delete_preset(cx, &name);
            }
            Action::InstallLauncher { on_desktop } => install_launcher(cx, on_desktop),
        }
    }
}

/// Whether the draft is kept elsewhere, so that replacing it loses nothing: it is the default
/// one, or some preset's (the one applied, unchanged since, or one saved from it).
pub fn draft_is_kept(cx: &Context) -> bool {
    let draft = &cx.settings.draft;
    *draft == crate::ui::draft::Draft::default()
        || presets::all(&cx.presets, &cx.settings.user_presets)
            .iter()
            .any(|p| p.draft == *draft)
}

/// The question `confirm` asks on its preset's card, with its two answers.
fn ask(ui: &mut egui::Ui, cx: &Context, confirm: &Confirm, commands: &mut Vec<Action>) {
    egui::Frame::group(ui.style()).show(ui, |ui| {
        let yes = match confirm {
            Confirm::Apply(name) => {
                let draft = &cx.settings.draft;
                let searched = draft.search.len();
                ui.colored_label(
                    widgets::WARN,
                    format!(
                        "Replace the draft with preset {name}? The draft (study \"{}\", \
                         {searched} searched parameter{}) is saved in no preset, so its edits \
                         would be lost; to keep them, use \"Save as preset\" in Configure \
                         first.",
                        draft.study.name,
                        if searched == 1 { "" } else { "s" }
                    ),
                );
                (REPLACE, Action::ApplyPreset(name.clone()))
            }
            Confirm::Delete(name) => {
                ui.colored_label(
                    widgets::WARN,
                    format!("Delete the saved preset {name}? It cannot be brought back."),
                );
                (DELETE, Action::DeletePreset(name.clone()))
            }
        };
        ui.horizontal(|ui| {
            if ui.button(yes.0).clicked() {
                commands.push(yes.1);
            }
            if ui.button(CANCEL).clicked() {
                commands.push(Action::CancelAsk);
            }
        });
    });
}

/// Draws the panel.
fn show(
    ui: &mut egui::Ui,
    state: &mut Context,
    confirm: Option<&Confirm>,
    commands: &mut Vec<Action>,
) {
    ui.horizontal(|ui| {
        ui.heading("Devices");
        let refreshing = state.refreshing_devices;
        if ui
            .add_enabled(!refreshing, egui::Button::new("Refresh devices"))
            .on_hover_text("ask the graphics drivers again for their adapters")
            .clicked()
        {
            commands.push(Action::RefreshDevices);
        }
        if refreshing {
            ui.spinner();
            ui.label("asking the drivers…");
        }
    });
    egui::Grid::new("devices").striped(true).show(ui, |ui| {
        for h in [
            "device",
            "backend",
            "usable here",
            "type",
            "memory",
            "precisions",
            "driver",
            "details",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        for d in &state.devices {
            ui.label(&d.name);
            ui.label(&d.backend);
            if d.available {
                ui.label("yes");
            } else {
                ui.colored_label(widgets::WARN, "no");
            }
            ui.label(match &d.adapter {
                Some(a) => a.kind.label(),
                None if d.name == "cpu" => "CPU",
                None => "",
            });
            ui.label(d.memory_bytes.map_or("unknown".into(), fmt_bytes));
            let precisions: Vec<String> = d.precisions.iter().map(|p| p.to_string()).collect();
            ui.label(precisions.join(", "));
            ui.label(d.adapter.as_ref().map_or("", |a| a.driver.as_str()));
            ui.label(&d.detail);
            ui.end_row();
        }
    });
    ui.horizontal(|ui| {
        let l = ui.label("Train on");
        let devices = &mut state.settings.draft.study.devices;
        if devices.is_empty() {
            devices.push("cpu".into());
        }
        let current = &mut devices[0];
        egui::ComboBox::from_id_salt("device")
            .selected_text(current.clone())
            .show_ui(ui, |ui| {
                for d in state.devices.iter().filter(|d| d.available) {
                    ui.selectable_value(current, d.name.clone(), &d.name);
                }
            })
            .response
            .labelled_by(l.id);
    });

    ui.separator();
    super::devices_view::show(ui, state);

    ui.separator();
    ui.heading("Presets");
    let all = presets::all(&state.presets, &state.settings.user_presets);
    if all.is_empty() {
        ui.label("No presets yet: save one from Configure.");
    }
    ui.horizontal_wrapped(|ui| {
        for p in &all {
            let selected = state.settings.preset.as_deref() == Some(p.name.as_str());
            egui::Frame::group(ui.style()).show(ui, |ui| {
                ui.set_width(230.0);
                ui.vertical(|ui| {
                    ui.horizontal(|ui| {
                        ui.strong(&p.name);
                        if selected {
                            ui.label("(applied)");
                        }
                    });
                    if ui.button(format!("Apply {}", p.name)).clicked() {
                        commands.push(Action::Ask(Confirm::Apply(p.name.clone())));
                    }
                    if let Some(c @ Confirm::Apply(name)) = confirm
                        && *name == p.name
                    {
                        ask(ui, state, c, commands);
                    }
                    ui.small(&p.about);
                    if let Some(m) = p.memory_bytes {
                        ui.small(format!("sized for {}", fmt_bytes(m)));
                    }
                    let arch = &p.draft.ppo.policy.net_arch;
                    ui.small(format!(
                        "{} envs · n_steps {} · batch {} · pi {:?} · {}",
                        p.draft.env.n_envs,
                        p.draft.ppo.n_steps,
                        p.draft.ppo.batch_size,
                        arch.pi,
                        p.draft.ppo.precision
                    ));
                    ui.small(format!(
                        "{} trials × {} workers on {} · {} searched",
                        p.draft.study.n_trials,
                        p.draft.study.workers,
                        p.draft.study.devices.join(", "),
                        p.draft.search.len()
                    ));
                    if p.user && ui.small_button(format!("delete {}", p.name)).clicked() {
                        commands.push(Action::Ask(Confirm::Delete(p.name.clone())));
                    }
                    if let Some(c @ Confirm::Delete(name)) = confirm
                        && *name == p.name
                        && p.user
                    {
                        ask(ui, state, c, commands);
                    }
                });
            });
        }
    });

    ui.horizontal(|ui| {
        if ui.button("Install launcher").clicked() {
            commands.push(Action::InstallLauncher { on_desktop: false });
        }
        if ui.button("Install launcher on the desktop").clicked() {
            commands.push(Action::InstallLauncher { on_desktop: true });
        }
    });

    ui.separator();
    ui.heading("Memory");
    match state.data.ready() {
        Some(data) => {
            let check = state
                .settings
                .draft
                .memory(data.shape, state.device_bytes());
            widgets::memory_bar(ui, &check);
            ui.collapsing("estimate by part", |ui| {
                ui.monospace(check.estimate.to_string());
            });
        }
        None => {
            ui.label("loading the data to size the estimate…");
        }
    }
}

/// [`Action::RefreshDevices`]: lists the devices anew (once at a time).
fn refresh_devices(cx: &mut Context) {
    if !cx.refreshing_devices {
        cx.refreshing_devices = true;
        cx.jobs.refresh_devices();
    }
}

/// The devices were listed anew; where the probe failed (a driver panicked), the list from
/// before stays and a notice says why.
pub fn devices_listed(state: &mut Context, devices: Result<Vec<DeviceInfo>, String>) {
    state.refreshing_devices = false;
    let devices = match devices {
        Ok(devices) => devices,
        Err(e) => {
            state.notice(format!(
                "could not list the devices again ({e}); the list is the one from before"
            ));
            return;
        }
    };
    let usable = devices.iter().filter(|d| d.available).count();
    state.notice(format!(
        "devices refreshed: {} listed, {usable} usable here",
        devices.len()
    ));
    state.devices = devices;
}

/// [`Command::ApplyPreset`]: the preset's draft replaces the draft (the data reloads when its
/// lookback or episode length differs).
pub fn apply_preset(cx: &mut Context, name: &str) {
    let state = &mut *cx;
    let all = presets::all(&state.presets, &state.settings.user_presets);
    let Some(p) = all.into_iter().find(|p| p.name == name) else {
        state.notice(format!("no preset named {name}"));
        return;
    };
    let reload = super::configure::data_window(&p.draft)
        != super::configure::data_window(&state.settings.draft);
    state.settings.draft = p.draft;
    state.settings.preset = Some(name.to_owned());
    state.notice(format!("preset {name} applied"));
    if reload {
        cx.reload_data();
    }
}

/// [`Action::DeletePreset`]: forgets a preset the user saved.
fn delete_preset(state: &mut Context, name: &str) {
    let before = state.settings.user_presets.len();
    state.settings.user_presets.retain(|p| p.name != name);
    if state.settings.user_presets.len() == before {
        state.notice(format!("no saved preset named {name}"));
        return;
    }
    state.save_now = true;
    state.notice(format!("preset {name} deleted"));
}

/// [`Action::InstallLauncher`]: installs the desktop launcher and icon (two small files:
/// quick enough for the UI thread).
fn install_launcher(state: &mut Context, on_desktop: bool) {
    match crate::install::default_plan(on_desktop).and_then(|p| crate::install::install(&p)) {
        Ok(done) => {
            let files: Vec<String> = done.files.iter().map(|f| f.display().to_string()).collect();
            state.notice(format!("installed {}", files.join(", ")));
            for n in done.notes {
                state.notice(n);
            }
        }
        Err(e) => state.notice(format!("install failed: {}", crate::out::error_text(&e))),
    }
}
