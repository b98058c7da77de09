//! The searched parameters in Configure: each a dotted name and its distribution, edited as
//! fields; "search parameter" adds one among the names the field table lists.

use super::fields;
use super::search_form::{FormKind, SearchForm};
use super::{Action, ConfigureView, SearchRow};
use crate::ui::draft::{Draft, Problem, SearchEntry};
use crate::ui::panels::widgets;
use tradetune_engine::study::file::SearchSpec;

/// Searched parameters: each a dotted name and its distribution, edited as fields (kind, low,
/// high, log, step or the choices) and kept as the draft's typed [`SearchSpec`]; a form whose
/// text does not make one shows why under it (and blocks Start). A searched value replaces the
/// fixed one above in each trial.
pub(super) fn section(
    ui: &mut egui::Ui,
    draft: &mut Draft,
    view: &mut ConfigureView,
    problems: &[Problem],
    commands: &mut Vec<Action>,
) {
    ui.heading("Searched parameters");
    ui.label(
        "Each trial samples these; the fixed value above is used for every other field. \
         Choices are separated by commas; a list value is written in brackets: [512, 256].",
    );
    let forms = &mut view.search_forms;
    forms.retain(|name, _| draft.search.iter().any(|e| &e.name == name));
    egui::Grid::new("search").striped(true).show(ui, |ui| {
        for e in &mut draft.search {
            ui.monospace(&e.name);
            // The form follows the stored spec when it changed elsewhere (a preset, a load).
            let row = forms.entry(e.name.clone()).or_insert_with(|| SearchRow {
                synced: e.spec.clone(),
                form: SearchForm::of(&e.spec),
                error: None,
            });
            if row.synced != e.spec {
                *row = SearchRow {
                    synced: e.spec.clone(),
                    form: SearchForm::of(&e.spec),
                    error: None,
                };
            }
            if distribution(ui, &e.name, &mut row.form) {
                match SearchSpec::parse(&row.form.to_spec()) {
                    Ok(spec) => {
                        e.spec = spec.clone();
                        row.synced = spec;
                        row.error = None;
                    }
                    Err(why) => row.error = Some(why),
                }
            }
            if ui.small_button(format!("fix {}", e.name)).clicked() {
                commands.push(Action::RemoveSearch(e.name.clone()));
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
    let names: Vec<&str> = fields::searchable_names()
        .into_iter()
        .filter(|n| !draft.search.iter().any(|e| e.name == *n))
        .collect();
    ui.horizontal(|ui| {
        let name = &mut view.new_search;
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
                    let item = ui.selectable_label(false, *n);
                    let item = match fields::help(n) {
                        Some(help) => item.on_hover_text(help),
                        None => item,
                    };
                    if item.clicked() {
                        *name = (*n).to_owned();
                    }
                }
            })
            .response
            .on_hover_text("the fields a search can set");
        if ui
            .add_enabled(!name.trim().is_empty(), egui::Button::new("Add"))
            .clicked()
        {
            commands.push(Action::AddSearch(name.trim().to_owned()));
        }
    });
}

/// One distribution's fields; returns whether any changed. Each field is named after the
/// parameter (`ppo.gamma low`), so tests and screen readers find it.
fn distribution(ui: &mut egui::Ui, name: &str, form: &mut SearchForm) -> bool {
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

/// [`Action::AddSearch`]: searches `name`, starting from a range around its fixed value.
pub fn add(draft: &mut Draft, view: &mut ConfigureView, name: &str) {
    let name = name.trim().to_owned();
    if !draft.search.iter().any(|e| e.name == name) {
        // An unknown name still gets a row: the study-file check then names it and lists the
        // valid ones.
        let unit = SearchSpec::Float {
            low: 0.0,
            high: 1.0,
            log: false,
            step: None,
        };
        let spec = draft
            .fixed_value(&name)
            .and_then(|v| SearchSpec::parse(&SearchForm::around(&v).to_spec()).ok())
            .unwrap_or(unit);
        draft.search.push(SearchEntry { name, spec });
    }
    view.new_search.clear();
}

/// The searched parameters whose form text does not make a range, as problems on their field.
pub fn form_problems(forms: &std::collections::HashMap<String, SearchRow>) -> Vec<Problem> {
    let mut out: Vec<Problem> = forms
        .iter()
        .filter_map(|(name, row)| {
            row.error.as_ref().map(|why| Problem {
                field: format!("search.{name}"),
                message: format!("search.{name}: {why}"),
            })
        })
        .collect();
    out.sort_by(|a, b| a.field.cmp(&b.field));
    out
}

/// [`Action::RemoveSearch`]: `name` keeps its fixed value.
pub fn remove(draft: &mut Draft, name: &str) {
    draft.search.retain(|e| e.name != name);
}
