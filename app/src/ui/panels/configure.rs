//! Configure: the data source (bundled sample or files picked with a native dialog, with the
//! inspect summary or the input error inline), the environment, PPO and the run's settings.
//! Invalid values are flagged where they are typed and Start stays disabled until fixed.

mod devices;
mod split;

use tradetune_engine::device::precision::Precision;
use tradetune_engine::eval::Objective;
use tradetune_engine::ppo::{ActivationKind, LrSchedule};

use std::collections::HashMap;
use std::path::PathBuf;

use super::widgets::{self, number};
use crate::ui::command::{Command, Cx};
use crate::ui::draft::{Problem, SearchEntry};
use crate::ui::presets::UserPreset;
use crate::ui::search_form::{FormKind, SearchForm};
use crate::ui::state::{AppState, DataState};

/// What the Configure panel keeps between frames besides the draft.
#[derive(Debug, Clone)]
pub struct ConfigureView {
    /// Name typed into "Save as preset".
    pub new_preset_name: String,
    /// The `net_arch.pi` and `net_arch.vf` lists as typed.
    pub net_text: [String; 2],
    /// The name of a new searched parameter being typed.
    pub new_search: String,
    /// The searched parameters' editor forms by name, with the stored text each was read from
    /// (a change of that text elsewhere, e.g. a preset, re-reads it).
    pub search_forms: HashMap<String, (String, Option<SearchForm>)>,
    /// The device chosen in "add device".
    pub new_device: String,
}

impl Default for ConfigureView {
    fn default() -> Self {
        ConfigureView {
            new_preset_name: String::new(),
            net_text: Default::default(),
            new_search: String::new(),
            search_forms: HashMap::new(),
            new_device: "cpu".into(),
        }
    }
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    let problems = state.problems();
    data_section(ui, state, &problems, commands);
    ui.separator();

    let lookback_before = state.settings.draft.env.lookback;
    let draft = &mut state.settings.draft;

    ui.columns(2, |cols| {
        let ui = &mut cols[0];
        ui.heading("Environment");
        let env = &mut draft.env;
        number(
            ui,
            "n_envs",
            &mut env.n_envs,
            1..=65_536,
            "env.n_envs",
            &problems,
        );
        number(
            ui,
            "initial_cash",
            &mut env.initial_cash,
            1.0..=1e12,
            "env.initial_cash",
            &problems,
        );
        number(
            ui,
            "buy_fee",
            &mut env.buy_fee,
            0.0..=0.5,
            "env.buy_fee",
            &problems,
        );
        number(
            ui,
            "sell_fee",
            &mut env.sell_fee,
            0.0..=0.5,
            "env.sell_fee",
            &problems,
        );
        number(
            ui,
            "min_order_value",
            &mut env.min_order_value,
            0.0..=1e9,
            "env.min_order_value",
            &problems,
        );
        number(
            ui,
            "trailing_stop_pct",
            &mut env.trailing_stop_pct,
            0.0..=1.0,
            "env.trailing_stop_pct",
            &problems,
        );
        number(
            ui,
            "cooldown_bars",
            &mut env.cooldown_bars,
            0..=10_000,
            "env.cooldown_bars",
            &problems,
        );
        number(
            ui,
            "lookback",
            &mut env.lookback,
            1..=512,
            "env.lookback",
            &problems,
        );
        number(
            ui,
            "episode_bars",
            &mut env.episode_bars,
            0..=1_000_000,
            "env.episode_bars",
            &problems,
        );
        number(
            ui,
            "env seed",
            &mut env.seed,
            0..=u64::MAX,
            "env.seed",
            &problems,
        );

        ui.heading("Study");
        let train = &mut draft.train;
        number(
            ui,
            "total_timesteps",
            &mut train.total_timesteps,
            1..=10_000_000_000,
            "train.total_timesteps",
            &problems,
        );
        number(
            ui,
            "eval_every",
            &mut train.eval_every,
            0..=100_000,
            "train.eval_every",
            &problems,
        );
        let study = &mut draft.study;
        ui.horizontal(|ui| {
            let l = ui.label("study name");
            ui.text_edit_singleline(&mut study.name).labelled_by(l.id);
        });
        widgets::problem_line(ui, "study.name", &problems);
        number(
            ui,
            "n_trials",
            &mut study.n_trials,
            1..=100_000,
            "study.n_trials",
            &problems,
        );
        number(
            ui,
            "workers",
            &mut study.workers,
            1..=64,
            "study.workers",
            &problems,
        );
        devices::editor(
            ui,
            study,
            &state.devices,
            &mut state.configure.new_device,
            &problems,
            commands,
        );
        number(
            ui,
            "memory_fraction",
            &mut study.memory_fraction,
            0.01..=1.0,
            "study.memory_fraction",
            &problems,
        );
        choice(
            ui,
            "objective",
            &mut study.objective,
            &Objective::ALL.map(Objective::name),
        );
        widgets::problem_line(ui, "study.objective", &problems);
        choice(
            ui,
            "direction",
            &mut study.direction,
            &["maximize", "minimize"],
        );
        choice(
            ui,
            "sampler",
            &mut draft.sampler.kind,
            &["tpe", "random", "grid"],
        );
        number(
            ui,
            "sampler seed",
            &mut draft.sampler.seed,
            0..=u64::MAX,
            "sampler.seed",
            &problems,
        );
        widgets::problem_line(ui, "sampler", &problems);
        choice(
            ui,
            "pruner",
            &mut draft.pruner.kind,
            &[
                "none",
                "median",
                "percentile",
                "successive_halving",
                "hyperband",
            ],
        );
        widgets::problem_line(ui, "pruner", &problems);
        widgets::problem_line(ui, "study", &problems);

        let ui = &mut cols[1];
        ui.heading("PPO");
        let ppo = &mut draft.ppo;
        number(
            ui,
            "learning_rate",
            &mut ppo.learning_rate,
            1e-7..=1.0,
            "ppo.learning_rate",
            &problems,
        );
        ui.horizontal(|ui| {
            let l = ui.label("lr_schedule");
            egui::ComboBox::from_id_salt("lr_schedule")
                .selected_text(format!("{:?}", ppo.lr_schedule))
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut ppo.lr_schedule, LrSchedule::Constant, "Constant");
                    ui.selectable_value(&mut ppo.lr_schedule, LrSchedule::Linear, "Linear");
                })
                .response
                .labelled_by(l.id);
        });
        number(
            ui,
            "n_steps",
            &mut ppo.n_steps,
            1..=1_000_000,
            "ppo.n_steps",
            &problems,
        );
        number(
            ui,
            "batch_size",
            &mut ppo.batch_size,
            1..=10_000_000,
            "ppo.batch_size",
            &problems,
        );
        number(
            ui,
            "n_epochs",
            &mut ppo.n_epochs,
            1..=1_000,
            "ppo.n_epochs",
            &problems,
        );
        number(
            ui,
            "gamma",
            &mut ppo.gamma,
            0.0..=1.0,
            "ppo.gamma",
            &problems,
        );
        number(
            ui,
            "gae_lambda",
            &mut ppo.gae_lambda,
            0.0..=1.0,
            "ppo.gae_lambda",
            &problems,
        );
        number(
            ui,
            "clip_range",
            &mut ppo.clip_range,
            0.0..=10.0,
            "ppo.clip_range",
            &problems,
        );
        number(
            ui,
            "ent_coef",
            &mut ppo.ent_coef,
            0.0..=10.0,
            "ppo.ent_coef",
            &problems,
        );
        number(
            ui,
            "vf_coef",
            &mut ppo.vf_coef,
            0.0..=10.0,
            "ppo.vf_coef",
            &problems,
        );
        number(
            ui,
            "max_grad_norm",
            &mut ppo.max_grad_norm,
            0.0..=1e6,
            "ppo.max_grad_norm",
            &problems,
        );
        number(
            ui,
            "ppo seed",
            &mut ppo.seed,
            0..=u64::MAX,
            "ppo.seed",
            &problems,
        );
        ui.checkbox(&mut ppo.normalize_advantage, "normalize_advantage");
        ui.checkbox(&mut ppo.normalize_obs, "normalize_obs");
        ui.checkbox(&mut ppo.normalize_reward, "normalize_reward");
        ui.horizontal(|ui| {
            let l = ui.label("precision");
            egui::ComboBox::from_id_salt("precision")
                .selected_text(ppo.precision.to_string())
                .show_ui(ui, |ui| {
                    for p in [Precision::F32, Precision::Bf16, Precision::F16] {
                        ui.selectable_value(&mut ppo.precision, p, p.to_string());
                    }
                })
                .response
                .labelled_by(l.id);
        });
        let policy = &mut ppo.policy;
        ui.horizontal(|ui| {
            let l = ui.label("activation");
            egui::ComboBox::from_id_salt("activation")
                .selected_text(format!("{:?}", policy.activation))
                .show_ui(ui, |ui| {
                    for a in [
                        ActivationKind::Tanh,
                        ActivationKind::Relu,
                        ActivationKind::Elu,
                        ActivationKind::Silu,
                    ] {
                        ui.selectable_value(&mut policy.activation, a, format!("{a:?}"));
                    }
                })
                .response
                .labelled_by(l.id);
        });
        let [pi_text, vf_text] = &mut state.configure.net_text;
        widgets::widths(ui, "net_arch.pi", &mut policy.net_arch.pi, pi_text);
        widgets::widths(ui, "net_arch.vf", &mut policy.net_arch.vf, vf_text);
        widgets::problem_line(ui, "ppo", &problems);
    });

    ui.separator();
    search_section(ui, state, &problems, commands);
    ui.separator();
    if let Some(data) = state.data.ready() {
        let check = state
            .settings
            .draft
            .memory(data.shape, state.device_bytes());
        widgets::memory_bar(ui, &check);
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

/// A labelled choice among fixed names.
fn choice(ui: &mut egui::Ui, label: &str, value: &mut String, names: &[&str]) {
    ui.horizontal(|ui| {
        let l = ui.label(label);
        egui::ComboBox::from_id_salt(label)
            .selected_text(value.clone())
            .show_ui(ui, |ui| {
                for n in names {
                    ui.selectable_value(value, (*n).to_owned(), *n);
                }
            })
            .response
            .labelled_by(l.id);
    });
}

/// Searched parameters: each a dotted name and its distribution, edited as fields (kind, low,
/// high, log, step or the choices) and kept as the TOML value of a study file's `[search]`
/// table; a searched value replaces the fixed one above in each trial.
fn search_section(
    ui: &mut egui::Ui,
    state: &mut AppState,
    problems: &[crate::ui::draft::Problem],
    commands: &mut Vec<Command>,
) {
    ui.heading("Searched parameters");
    ui.label(
        "Each trial samples these; the fixed value above is used for every other field. \
         Choices are separated by commas; a list value is written in brackets: [512, 256].",
    );
    let draft = &mut state.settings.draft;
    let forms = &mut state.configure.search_forms;
    forms.retain(|name, _| draft.search.iter().any(|e| &e.name == name));
    egui::Grid::new("search").striped(true).show(ui, |ui| {
        for e in &mut draft.search {
            ui.monospace(&e.name);
            // The form follows the stored text when it changed elsewhere (a preset, a load).
            let (synced, form) = forms
                .entry(e.name.clone())
                .or_insert_with(|| (e.spec.clone(), SearchForm::from_spec(&e.spec)));
            if *synced != e.spec {
                *synced = e.spec.clone();
                *form = SearchForm::from_spec(&e.spec);
            }
            let changed = match form {
                Some(form) => search_form(ui, &e.name, form),
                // Not a table (typed by hand into a settings file): edit the text itself.
                None => {
                    ui.add(egui::TextEdit::singleline(&mut e.spec).desired_width(420.0))
                        .on_hover_text(format!("distribution of {}", e.name));
                    false
                }
            };
            if changed && let Some(form) = form {
                e.spec = form.to_spec();
                *synced = e.spec.clone();
            }
            if ui.small_button(format!("fix {}", e.name)).clicked() {
                commands.push(Command::RemoveSearch(e.name.clone()));
            }
            ui.end_row();
            let field = format!("search.{}", e.name);
            if problems.iter().any(|p| p.field == field) {
                ui.label("");
                ui.vertical(|ui| widgets::problem_line(ui, &field, problems));
                ui.end_row();
            }
        }
    });
    let names: Vec<String> = draft
        .searchable_names()
        .into_iter()
        .filter(|n| !draft.search.iter().any(|e| &e.name == n))
        .collect();
    ui.horizontal(|ui| {
        let name = &mut state.configure.new_search;
        let l = ui.label("search parameter");
        ui.add(
            egui::TextEdit::singleline(name)
                .hint_text("ppo.gamma")
                .desired_width(200.0),
        )
        .labelled_by(l.id);
        egui::ComboBox::from_id_salt("search_names")
            .selected_text("fields…")
            .height(300.0)
            .show_ui(ui, |ui| {
                let typed = name.trim().to_owned();
                for n in names.iter().filter(|n| n.contains(&typed)) {
                    if ui.selectable_label(false, n).clicked() {
                        *name = n.clone();
                    }
                }
            })
            .response
            .on_hover_text("the fields a search can set");
        if ui
            .add_enabled(!name.trim().is_empty(), egui::Button::new("Add"))
            .clicked()
        {
            commands.push(Command::AddSearch(name.trim().to_owned()));
        }
    });
}

/// One distribution's fields; returns whether any changed. Each field is named after the
/// parameter (`ppo.gamma low`), so tests and screen readers find it.
fn search_form(ui: &mut egui::Ui, name: &str, form: &mut SearchForm) -> bool {
    let mut changed = false;
    ui.horizontal(|ui| {
        egui::ComboBox::from_id_salt(("search kind", name))
            .selected_text(form.kind.label())
            .show_ui(ui, |ui| {
                for k in FormKind::ALL {
                    changed |= ui.selectable_value(&mut form.kind, k, k.label()).changed();
                }
            })
            .response
            .on_hover_text(format!("{name} kind"));
        let text = |ui: &mut egui::Ui, value: &mut String, what: &str, width: f32| {
            ui.label(what);
            ui.add(egui::TextEdit::singleline(value).desired_width(width))
                .on_hover_text(format!("{name} {what}"))
                .changed()
        };
        match form.kind {
            FormKind::Choices => {
                changed |= text(ui, &mut form.choices, "choices", 300.0);
            }
            FormKind::Float | FormKind::Int => {
                changed |= text(ui, &mut form.low, "low", 80.0);
                changed |= text(ui, &mut form.high, "high", 80.0);
                changed |= ui
                    .checkbox(&mut form.log, "log")
                    .on_hover_text(format!("{name} log"))
                    .changed();
                changed |= text(ui, &mut form.step, "step", 60.0);
            }
        }
    });
    changed
}

fn data_section(
    ui: &mut egui::Ui,
    state: &mut AppState,
    problems: &[Problem],
    commands: &mut Vec<Command>,
) {
    ui.heading("Data");
    ui.horizontal(|ui| {
        if ui
            .selectable_label(state.settings.data_files.is_empty(), "Bundled sample")
            .clicked()
        {
            commands.push(Command::UseBundledData);
        }
        if ui.button("Choose files…").clicked() {
            commands.push(Command::PickDataFiles);
        }
    });
    match &state.data {
        DataState::None => {}
        DataState::Loading(_) => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("loading market data…");
            });
        }
        DataState::Failed(e) => {
            ui.colored_label(widgets::WARN, e.as_str());
        }
        DataState::Ready(d) => {
            let day = |t: i64| {
                chrono::DateTime::from_timestamp(t, 0)
                    .map_or_else(|| t.to_string(), |d| d.format("%Y-%m-%d").to_string())
            };
            ui.label(format!("source: {}", d.source));
            ui.label(format!(
                "{} assets ({}), {} features each, {} … {}",
                d.assets.len(),
                d.assets.join(", "),
                d.shape.n_features,
                day(d.range.0),
                day(d.range.1)
            ));
        }
    }
    let timestamps = state
        .data
        .ready()
        .map_or(&[][..], |d| &d.dataset.timestamps[..]);
    split::editor(ui, &mut state.settings.draft, timestamps, problems);
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

/// [`Command::UseBundledData`] (no `paths`), [`Command::UseDataFiles`]: trains on `paths`
/// from now on and loads them.
pub fn use_data(cx: &mut Cx, paths: Vec<PathBuf>) {
    cx.state.settings.data_files = paths.clone();
    cx.load_data(paths);
}

/// [`Command::AddSearch`]: searches `name`, starting from a range around its fixed value.
pub fn add_search(state: &mut AppState, name: &str) {
    let name = name.trim().to_owned();
    let draft = &mut state.settings.draft;
    if !draft.search.iter().any(|e| e.name == name) {
        // An unknown name still gets a row: the study-file check then names it and lists the
        // valid ones.
        let spec = draft.fixed_value(&name).map_or_else(
            || "{ low = 0.0, high = 1.0 }".to_owned(),
            |v| SearchForm::around(&v).to_spec(),
        );
        draft.search.push(SearchEntry { name, spec });
    }
    state.configure.new_search.clear();
}

/// [`Command::RemoveSearch`]: `name` keeps its fixed value.
pub fn remove_search(state: &mut AppState, name: &str) {
    state.settings.draft.search.retain(|e| e.name != name);
}
