//! The trial table — a column per parameter (and chosen user attribute) — of which only the
//! visible rows are laid out (10,000 trials scroll smoothly), and the same rows as CSV for the
//! clipboard.

use egui_extras::{Column, TableBuilder};

use super::view::{StudiesView, TrialColumn, TrialRow, sig4};
use crate::ui::command::Command;

const ROW_HEIGHT: f32 = 18.0;

/// The table; returns the index (into `rows`) of a clicked row.
pub fn trial_table(
    ui: &mut egui::Ui,
    view: &StudiesView,
    commands: &mut Vec<Command>,
) -> Option<usize> {
    let best = view.best_row();
    let mut clicked = None;
    // Rows have a fixed height (that is what lets only the visible ones be laid out): cells
    // truncate instead of wrapping; columns are resizable.
    ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
    let mut table = TableBuilder::new(ui)
        .id_salt("trials")
        .striped(true)
        .resizable(true);
    let shown = view.shown_columns();
    for c in &shown {
        let width = match c {
            TrialColumn::Study => 150.0,
            TrialColumn::Number => 80.0,
            TrialColumn::State => 90.0,
            TrialColumn::Value => 100.0,
            TrialColumn::Duration => 95.0,
            TrialColumn::Device => 80.0,
            TrialColumn::Param(name) | TrialColumn::Attr(name) => {
                (name.len() as f32 * 7.0 + 50.0).clamp(90.0, 180.0)
            }
        };
        table = table.column(Column::initial(width).at_least(40.0).clip(true));
    }
    table
        .column(Column::remainder())
        .header(ROW_HEIGHT + 4.0, |mut header| {
            for c in &shown {
                header.col(|ui| {
                    let arrow = match &view.sort {
                        (s, true) if s == c => " (asc)",
                        (s, false) if s == c => " (desc)",
                        _ => "",
                    };
                    if ui.button(format!("{}{arrow}", c.label())).clicked() {
                        commands.push(Command::SortTrials(c.clone()));
                    }
                });
            }
            header.col(|_| {});
        })
        .body(|body| {
            body.rows(ROW_HEIGHT, view.visible.len(), |mut row| {
                let i = view.visible[row.index()];
                let r = &view.rows[i];
                row.set_selected(Some(i) == best || view.detail == Some(i));
                for c in &shown {
                    row.col(|ui| {
                        if *c == TrialColumn::Number {
                            if ui.link(r.number.to_string()).clicked() {
                                clicked = Some(i);
                            }
                        } else {
                            ui.label(cell(r, c));
                        }
                    });
                }
                row.col(|_| {});
            });
        });
    clicked
}

/// The text of one cell (numbers to 4 significant digits, choices by their label).
fn cell(r: &TrialRow, c: &TrialColumn) -> String {
    match c {
        TrialColumn::Study => r.study.clone(),
        TrialColumn::Number => r.number.to_string(),
        TrialColumn::State => r.state.to_string(),
        TrialColumn::Value => r.value.map_or(String::new(), sig4),
        TrialColumn::Duration => r.duration_s.map_or(String::new(), |v| format!("{v:.1}")),
        TrialColumn::Device => r.device.clone(),
        TrialColumn::Param(name) => r.param_cell(name).map_or(String::new(), |p| p.text.clone()),
        TrialColumn::Attr(key) => r.attr(key).map_or(String::new(), |(t, _)| t.to_owned()),
    }
}

/// The visible rows as CSV (what "Copy table as CSV" puts on the clipboard): the fixed
/// columns, then one per parameter, every digit.
pub fn visible_csv(view: &StudiesView) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    };
    let mut out = String::from("study,number,state,value,duration_s,device");
    for a in &view.param_axes {
        out.push(',');
        out.push_str(&quote(&a.name));
    }
    out.push('\n');
    for &i in &view.visible {
        let r = &view.rows[i];
        out.push_str(&format!(
            "{},{},{},{},{},{}",
            quote(&r.study),
            r.number,
            r.state,
            r.value.map_or(String::new(), |v| v.to_string()),
            r.duration_s.map_or(String::new(), |v| v.to_string()),
            quote(&r.device),
        ));
        for a in &view.param_axes {
            out.push(',');
            if let Some(p) = r.param_cell(&a.name) {
                out.push_str(&quote(&p.full));
            }
        }
        out.push('\n');
    }
    out
}
