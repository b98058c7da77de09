//! How a trial is scored, in Configure: hold-out validation, walk-forward or combinatorial
//! purged cross-validation (the study file's `[evaluation]`), with the number of folds it cuts
//! from the loaded bars.

use tradetune_engine::study::file::EvaluationSection;

use crate::ui::draft::{Draft, Problem};
use crate::ui::panels::widgets::{self, number};

const SCHEMES: [(&str, &str); 3] = [
    ("holdout", "hold-out (train, then validation)"),
    ("walk_forward", "walk-forward folds"),
    ("cpcv", "combinatorial purged CV"),
];

/// The scheme and its settings; each fold trains the trial once more.
pub fn editor(ui: &mut egui::Ui, draft: &mut Draft, timestamps: &[i64], problems: &[Problem]) {
    let current = draft.evaluation.name();
    ui.horizontal(|ui| {
        let l = ui.label("evaluation");
        egui::ComboBox::from_id_salt("evaluation_scheme")
            .selected_text(
                SCHEMES
                    .iter()
                    .find(|(n, _)| *n == current)
                    .map_or(current, |(_, label)| label),
            )
            .show_ui(ui, |ui| {
                for (name, label) in SCHEMES {
                    if ui.selectable_label(name == current, label).clicked() && name != current {
                        draft.evaluation = scheme(name);
                    }
                }
            })
            .response
            .labelled_by(l.id);
    });
    match &mut draft.evaluation {
        EvaluationSection::Holdout => {}
        EvaluationSection::WalkForward {
            n_folds,
            test_bars,
            train_bars,
            purge_bars,
        } => {
            number(ui, "folds", n_folds, 1..=50, "evaluation", problems);
            number(
                ui,
                "test bars (0 = equal share)",
                test_bars,
                0..=1_000_000,
                "",
                problems,
            );
            number(
                ui,
                "train bars (0 = expanding)",
                train_bars,
                0..=1_000_000,
                "",
                problems,
            );
            number(ui, "purge bars", purge_bars, 0..=100_000, "", problems);
        }
        EvaluationSection::Cpcv {
            n_groups,
            k_test,
            purge_bars,
            embargo_bars,
        } => {
            number(ui, "groups (N)", n_groups, 2..=32, "evaluation", problems);
            number(ui, "test groups (k)", k_test, 1..=31, "", problems);
            number(ui, "purge bars", purge_bars, 0..=100_000, "", problems);
            number(ui, "embargo bars", embargo_bars, 0..=100_000, "", problems);
        }
    }
    if let Ok(Some(n)) = draft.fold_count(timestamps) {
        ui.label(format!(
            "{n} folds over the train and validation bars: each trial trains {n} times"
        ));
    }
    widgets::problem_line(ui, "evaluation", problems);
}

/// A scheme's first settings.
fn scheme(name: &str) -> EvaluationSection {
    match name {
        "walk_forward" => EvaluationSection::WalkForward {
            n_folds: 4,
            test_bars: 0,
            train_bars: 0,
            purge_bars: 0,
        },
        "cpcv" => EvaluationSection::Cpcv {
            n_groups: 6,
            k_test: 2,
            purge_bars: 0,
            embargo_bars: 0,
        },
        _ => EvaluationSection::Holdout,
    }
}
