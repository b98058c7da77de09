//! Small widgets shared by the panels.

use egui::{Color32, Response, Ui};

use crate::ui::draft::{MemoryCheck, Problem};

/// Colour of a warning.
pub const WARN: Color32 = Color32::from_rgb(0xd0, 0x40, 0x30);

/// A labelled numeric field; any problem with `field` is shown under it in red. The label is
/// the widget's accessible name, so tests find the field by it.
pub fn number<T: egui::emath::Numeric>(
    ui: &mut Ui,
    label: &str,
    value: &mut T,
    range: std::ops::RangeInclusive<T>,
    field: &str,
    problems: &[Problem],
) -> Response {
    let response = drag(ui, label, value, range);
    problem_line(ui, field, problems);
    response
}

/// A labelled drag value (the label is its accessible name). Floats drag by 1 % of their value
/// (a learning rate of 3e-4 and a cash of 1e6 both move sensibly); integers by one.
pub fn drag<T: egui::emath::Numeric>(
    ui: &mut Ui,
    label: &str,
    value: &mut T,
    range: std::ops::RangeInclusive<T>,
) -> Response {
    ui.horizontal(|ui| {
        let l = ui.label(label);
        let speed = if T::INTEGRAL {
            1.0
        } else {
            (value.to_f64().abs() * 0.01).max(1e-9)
        };
        let mut drag = egui::DragValue::new(value).range(range).speed(speed);
        if !T::INTEGRAL {
            drag = drag.max_decimals(8);
        }
        ui.add(drag).labelled_by(l.id)
    })
    .inner
}

/// Prints the problems of `field` (red, under the field).
pub fn problem_line(ui: &mut Ui, field: &str, problems: &[Problem]) {
    for p in problems.iter().filter(|p| p.field == field) {
        ui.colored_label(WARN, p.message.as_str());
    }
}

/// A comma-separated list of layer widths (`2048, 1024, 512`) edited through `text`; returns
/// whether `widths` changed. When the list changes elsewhere (a preset) the text follows.
pub fn widths(ui: &mut Ui, label: &str, widths: &mut Vec<usize>, text: &mut String) -> bool {
    let mut changed = false;
    ui.horizontal(|ui| {
        let l = ui.label(label);
        let edit = ui
            .add(egui::TextEdit::singleline(text).desired_width(180.0))
            .labelled_by(l.id);
        let parsed: Result<Vec<usize>, _> = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::parse::<usize>)
            .collect();
        match parsed {
            Ok(v) if !v.is_empty() && v.iter().all(|&w| w > 0) => {
                if v != *widths {
                    if edit.has_focus() || edit.changed() {
                        *widths = v;
                        changed = true;
                    } else {
                        *text = widths_text(widths);
                    }
                }
            }
            _ if !edit.has_focus() && !edit.changed() => *text = widths_text(widths),
            _ => {
                ui.colored_label(
                    WARN,
                    format!("{label}: positive integers separated by commas"),
                );
            }
        }
    });
    changed
}

/// The text a layer list is edited as.
pub fn widths_text(widths: &[usize]) -> String {
    widths
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The memory bar: the draft's estimated need against its device budget; red when a run
/// would be refused.
pub fn memory_bar(ui: &mut Ui, check: &MemoryCheck) -> Response {
    let fraction = check.fraction().unwrap_or(0.0);
    let over = check.over_budget();
    let color = if over {
        WARN
    } else if fraction > 0.8 {
        Color32::from_rgb(0xd0, 0x90, 0x20)
    } else {
        Color32::from_rgb(0x30, 0x90, 0x50)
    };
    let text = format!(
        "memory: {}{}",
        check.label(),
        if over {
            " — over budget, a run would be refused"
        } else {
            ""
        }
    );
    ui.add(
        egui::ProgressBar::new(fraction.min(1.0) as f32)
            .fill(color)
            .text(text),
    )
}
