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

/// What Start would train, shown under the memory estimate: each fold trains the trial once
/// more, so a cross-validated trial costs `folds` times a hold-out one (memory stays one run's:
/// the folds train one after another). With a throughput measured by an earlier run
/// (`samples_per_s`, all workers together), in time too: a trial trains at its share of it
/// (the trials trained at once share it), the study at all of it.
pub fn work_estimate(draft: &Draft, folds: Option<usize>, samples_per_s: Option<f64>) -> String {
    let per_fold = draft.train.total_timesteps;
    let n = folds.unwrap_or(1).max(1);
    let trials = draft.study.n_trials.max(1);
    let per_trial = n * per_fold;
    let mut s = match folds {
        Some(n) => format!(
            "training ≈ {n} folds × {per_fold} samples = {per_trial} samples per trial, {} for \
             {trials} trials",
            per_trial * trials
        ),
        None => format!(
            "training ≈ {per_fold} samples per trial (hold-out), {} for {trials} trials",
            per_trial * trials
        ),
    };
    if let Some(sps) = samples_per_s.filter(|v| v.is_finite() && *v > 0.0) {
        let at_once = draft.trials_at_once_here().max(1);
        let fold_s = per_fold as f64 / (sps / at_once as f64);
        let all = if at_once > 1 {
            format!(" ({at_once} trials at once)")
        } else {
            String::new()
        };
        let folds_times = match folds {
            Some(n) => format!("{n} folds × {} = ", duration(fold_s)),
            None => String::new(),
        };
        s += &format!(
            "; at the last run's {sps:.0} samples/s{all} ≈ {folds_times}{} per trial, {} for \
             the study",
            duration(n as f64 * fold_s),
            duration((per_trial * trials) as f64 / sps)
        );
    }
    if folds.is_some() {
        s += "; memory as one run (the folds train one after another)";
    }
    s
}

/// Seconds as people read them: `42 s`, `3.5 min`, `2.1 h`.
fn duration(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
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

#[cfg(test)]
mod tests {
    use super::work_estimate;
    use crate::ui::draft::Draft;

    #[test]
    fn the_work_estimate_multiplies_the_training_by_the_folds() {
        let mut d = Draft::default();
        d.train.total_timesteps = 10_000;
        d.study.n_trials = 3;
        assert_eq!(
            work_estimate(&d, None, None),
            "training ≈ 10000 samples per trial (hold-out), 30000 for 3 trials"
        );
        let cv = work_estimate(&d, Some(4), Some(500.0));
        assert!(
            cv.starts_with(
                "training ≈ 4 folds × 10000 samples = 40000 samples per trial, 120000 for 3 trials"
            ),
            "{cv}"
        );
        assert!(
            cv.contains("500 samples/s ≈ 4 folds × 20 s = 80 s per trial, 4.0 min for the study"),
            "{cv}"
        );
        assert!(cv.ends_with("memory as one run (the folds train one after another)"));
        assert!(!work_estimate(&d, Some(4), Some(f64::NAN)).contains("samples/s"));
    }

    /// The last run's samples/s is all its workers' together: where they train trials at once
    /// (on the CPU, or sharing a GPU) each trial has its share of it, and the study all of it;
    /// workers taking turns on a GPU train one trial at a time, at all of it.
    #[test]
    fn a_trial_trains_at_its_share_of_the_workers_samples_per_second() {
        use tradetune_engine::study::runner::GpuSharing;
        let mut d = Draft::default();
        d.train.total_timesteps = 10_000;
        d.study.n_trials = 4;
        d.study.workers = 2;
        d.study.devices = vec!["cpu".into()];
        let cpu = work_estimate(&d, None, Some(500.0));
        assert!(
            cpu.contains("500 samples/s (2 trials at once) ≈ 40 s per trial, 80 s for the study"),
            "{cpu}"
        );
        d.study.devices = vec!["wgpu".into()];
        d.study.gpu_sharing = GpuSharing::Serial;
        let turns = work_estimate(&d, None, Some(500.0));
        assert!(
            turns.contains("500 samples/s ≈ 20 s per trial, 80 s for the study"),
            "{turns}"
        );
    }
}
