//! The data split in Configure: by fractions or by dates, with the bars each part gets on the
//! loaded data and the engine's own check of it.

use tradetune_engine::market::split::SplitSpec;
use tradetune_engine::market::time::format_timestamp;

use crate::ui::draft::{Draft, Problem};
use crate::ui::panels::widgets::{self, number};

/// The split of the bars into train, validation and test: by fractions or by dates, with the
/// bars each part gets on the loaded data, updated as it is typed.
pub fn editor(ui: &mut egui::Ui, draft: &mut Draft, timestamps: &[i64], problems: &[Problem]) {
    let by_dates = matches!(draft.split, SplitSpec::Dates { .. });
    ui.horizontal(|ui| {
        let l = ui.label("split by");
        egui::ComboBox::from_id_salt("split_by")
            .selected_text(if by_dates { "dates" } else { "fractions" })
            .show_ui(ui, |ui| {
                if ui.selectable_label(!by_dates, "fractions").clicked() && by_dates {
                    draft.split = split_as(draft, false, timestamps);
                }
                if ui.selectable_label(by_dates, "dates").clicked() && !by_dates {
                    draft.split = split_as(draft, true, timestamps);
                }
            })
            .response
            .labelled_by(l.id);
    });
    match &mut draft.split {
        SplitSpec::Fractions { train, validation } => {
            number(
                ui,
                "train fraction",
                train,
                0.0..=1.0,
                "split.train",
                problems,
            );
            number(
                ui,
                "validation fraction",
                validation,
                0.0..=1.0,
                "split.validation",
                problems,
            );
        }
        SplitSpec::Dates {
            validation_start,
            test_start,
        } => {
            for (label, value) in [
                ("validation_start", validation_start),
                ("test_start", test_start),
            ] {
                ui.horizontal(|ui| {
                    let l = ui.label(label);
                    ui.add(
                        egui::TextEdit::singleline(value)
                            .hint_text("2011-01-01")
                            .desired_width(160.0),
                    )
                    .labelled_by(l.id);
                });
            }
        }
    }
    if !timestamps.is_empty()
        && let Ok(h) = draft.split_ranges(timestamps)
    {
        let day = |i: usize| {
            timestamps
                .get(i)
                .map_or_else(String::new, |t| format_timestamp(*t))
        };
        ui.label(format!(
            "split: train {} · validation {} · test {} bars",
            h.train.len(),
            h.validation.len(),
            h.test.len()
        ));
        ui.label(format!(
            "validation from {} · test from {}",
            day(h.validation.start),
            day(h.test.start)
        ));
    }
    widgets::problem_line(ui, "split", problems);
}

/// The draft's split in the other form, cutting where the current one cuts when it resolves
/// over the loaded bars (else the default fractions, or empty dates).
fn split_as(draft: &Draft, dates: bool, timestamps: &[i64]) -> SplitSpec {
    let current = draft.split_ranges(timestamps).ok();
    let n = timestamps.len() as f64;
    match (dates, current) {
        (true, Some(h)) => SplitSpec::Dates {
            validation_start: format_timestamp(timestamps[h.validation.start]),
            test_start: format_timestamp(timestamps[h.test.start]),
        },
        (true, None) => SplitSpec::Dates {
            validation_start: String::new(),
            test_start: String::new(),
        },
        // Rounded to 0.1 %: the fractions are for people; a bar more or less is no matter.
        (false, Some(h)) => SplitSpec::Fractions {
            train: (h.train.len() as f64 / n * 1000.0).round() / 1000.0,
            validation: (h.validation.len() as f64 / n * 1000.0).round() / 1000.0,
        },
        (false, None) => SplitSpec::default(),
    }
}
