//! The Report view's seed spread: "Re-run best trial with K seeds" (`front::reseed` on a
//! background thread, with its progress and a Cancel), and the spread stored with the study as
//! a table and box plots of held-out Sharpe and total return, equal weight beside them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use egui_plot::{BoxElem, BoxPlot, BoxSpread, HLine, Legend, Plot};
use tradetune_engine::front::min_median_max;
use tradetune_engine::front::report::StudyReport;
use tradetune_engine::front::reseed::SeedSpread;

use super::{AGENT, ReportState, ReportView, ReseedRun, database, reported_study};
use crate::ui::context::{Command, Context};
use crate::ui::panels::studies::{Action, StudiesView};
use crate::ui::panels::widgets;
use crate::ui::tasks::ReseedMsg;

/// [`Action::Reseed`]: trains the reported study's best trial again with `seeds` seeds in the
/// background. The study file comes from the database (recorded with the study when it ran,
/// from the app or the CLI, or by `tradetune study create`)
/// or from the Configure panel when it describes the study.
pub fn start_reseed(view: &mut StudiesView, cx: &Context, seeds: usize) {
    if view.report.reseed.is_some() {
        return;
    }
    let (Some(study), Some(path)) = (reported_study(view), database(view)) else {
        return;
    };
    let draft = &cx.settings.draft;
    let from_draft = (draft.study.name == study)
        .then(|| draft.study_file(&cx.settings.data_files).ok())
        .flatten();
    let cancel = Arc::new(AtomicBool::new(false));
    view.report.seeds = seeds;
    view.report.reseed_error = None;
    view.report.reseed_source = None;
    view.report.reseed = Some(ReseedRun {
        study: study.clone(),
        seeds,
        at: None,
        cancel: cancel.clone(),
    });
    cx.jobs.reseed(path, study, from_draft, seeds, cancel);
}

/// [`Action::CancelReseed`]: stops the re-run at the next update of the seed being trained.
pub fn cancel_reseed(view: &StudiesView) {
    if let Some(run) = &view.report.reseed {
        run.cancel.store(true, Ordering::Relaxed);
    }
}

/// A re-run's message arrived.
pub fn on_reseed(view: &mut StudiesView, msg: ReseedMsg, out: &mut Vec<Command>) {
    let report = &mut view.report;
    match msg {
        ReseedMsg::Source(s) => report.reseed_source = Some(s),
        ReseedMsg::Progress(k, _) => {
            if let Some(run) = &mut report.reseed {
                run.at = Some(k);
            }
        }
        ReseedMsg::Done(study, result) => {
            report.reseed = None;
            match result {
                Ok(spread) => {
                    if let Some(ReportView {
                        key,
                        result: Ok(shown),
                    }) = &mut report.shown
                        && key.study == study
                    {
                        shown.seeds = Some(spread);
                    }
                    out.push(Command::Notice(format!(
                        "seed spread of study {study} stored with the study"
                    )));
                }
                Err(e) => report.reseed_error = Some(e),
            }
        }
    }
}

pub(super) fn seeds(
    ui: &mut egui::Ui,
    state: &ReportState,
    report: &StudyReport,
    commands: &mut Vec<Action>,
) {
    ui.strong("Seed spread");
    ui.horizontal(|ui| {
        let mut k = state.seeds;
        let idle = state.reseed.is_none();
        if ui
            .add_enabled(idle, egui::Button::new("Re-run best trial"))
            .on_hover_text(
                "train the best trial again on the train split with other seeds, backtest each \
                 on the test split and store the spread with the study",
            )
            .clicked()
        {
            commands.push(Action::Reseed(k));
        }
        let l = ui.label("with seeds");
        ui.add_enabled(idle, egui::DragValue::new(&mut k).range(1..=50))
            .labelled_by(l.id);
        if k != state.seeds {
            commands.push(Action::SetReseedSeeds(k));
        }
    });
    if let Some(run) = &state.reseed {
        ui.horizontal(|ui| {
            let done = run.at.unwrap_or(0);
            ui.add(
                egui::ProgressBar::new(done as f32 / run.seeds.max(1) as f32)
                    .desired_width(240.0)
                    .text(match run.at {
                        Some(k) => format!("seed {} of {}", k + 1, run.seeds),
                        None => "loading the data…".into(),
                    }),
            );
            if run.cancel.load(Ordering::Relaxed) {
                ui.label("cancelling…");
            } else if ui.button("Cancel").clicked() {
                commands.push(Action::CancelReseed);
            }
        });
    }
    if let Some(s) = &state.reseed_source {
        ui.label(format!("study file: {s}"));
    }
    if let Some(e) = &state.reseed_error {
        ui.colored_label(widgets::WARN, e.as_str());
    }
    match &report.seeds {
        None => {
            ui.label(
                "no seed spread yet: re-run the best trial to see how much of its result its \
                 seed explains",
            );
        }
        Some(sp) => seed_spread(ui, sp),
    }
}

/// Lower whisker (min), quartiles by linear interpolation, upper whisker (max).
pub fn box_spread(values: &[f64]) -> Option<BoxSpread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let at = p * (v.len() - 1) as f64;
        let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
    };
    Some(BoxSpread::new(
        v[0],
        q(0.25),
        q(0.5),
        q(0.75),
        v[v.len() - 1],
    ))
}

/// The heading over the seed spread.
pub fn spread_heading(sp: &SeedSpread) -> String {
    format!(
        "trial #{} trained again with {} other seeds, each backtested on the test split ({} \
         bars)",
        sp.trial,
        sp.seeds.len(),
        sp.bars
    )
}

fn seed_spread(ui: &mut egui::Ui, sp: &SeedSpread) {
    ui.label(spread_heading(sp));
    let sharpes: Vec<f64> = sp.seeds.iter().map(|r| r.sharpe).collect();
    let returns: Vec<f64> = sp.seeds.iter().map(|r| 100.0 * r.total_return).collect();
    ui.columns(3, |cols| {
        egui::Grid::new("seed_spread")
            .striped(true)
            .show(&mut cols[0], |ui| {
                ui.strong("seed");
                ui.strong("held-out Sharpe");
                ui.strong("total return");
                ui.end_row();
                for r in &sp.seeds {
                    ui.label(r.seed.to_string());
                    ui.label(format!("{:.3}", r.sharpe));
                    ui.label(format!("{:.2} %", 100.0 * r.total_return));
                    ui.end_row();
                }
                if let (Some(a), Some(b)) = (min_median_max(&sharpes), min_median_max(&returns)) {
                    ui.label("median");
                    ui.label(format!("{:.3}", a.1));
                    ui.label(format!("{:.2} %", b.1));
                    ui.end_row();
                }
                ui.label("equal weight");
                ui.label(format!("{:.3}", sp.equal_weight_sharpe));
                ui.label(format!("{:.2} %", 100.0 * sp.equal_weight_total_return));
                ui.end_row();
            });
        spread_plot(
            &mut cols[1],
            "seed_sharpe",
            "held-out Sharpe",
            &sharpes,
            sp.equal_weight_sharpe,
        );
        spread_plot(
            &mut cols[2],
            "seed_return",
            "total return (%)",
            &returns,
            100.0 * sp.equal_weight_total_return,
        );
    });
}

/// One box over the seeds' values, with equal weight's as a line across.
fn spread_plot(ui: &mut egui::Ui, id: &str, axis: &str, values: &[f64], equal_weight: f64) {
    let Some(spread) = box_spread(values) else {
        ui.label(format!("{axis}: no finite values"));
        return;
    };
    let boxes = vec![
        BoxElem::new(0.0, spread)
            .name(format!("agent, {} seeds", values.len()))
            .box_width(0.5)
            .fill(AGENT.gamma_multiply(0.3))
            .stroke(egui::Stroke::new(1.5, AGENT)),
    ];
    Plot::new(id)
        .height(200.0)
        .y_axis_label(axis)
        .show_axes([false, true])
        .legend(Legend::default().position(egui_plot::Corner::LeftBottom))
        .include_x(-0.6)
        .include_x(0.6)
        .include_y(equal_weight)
        .allow_zoom(false)
        .allow_drag(false)
        .allow_scroll(false)
        .show(ui, |plot| {
            plot.box_plot(
                BoxPlot::new(format!("agent, {} seeds", values.len()), boxes).color(AGENT),
            );
            if equal_weight.is_finite() {
                plot.hline(
                    HLine::new("equal weight", equal_weight)
                        .stroke(egui::Stroke::new(1.5, widgets::WARN)),
                );
            }
        });
}

#[cfg(test)]
mod tests {
    use super::box_spread;

    #[test]
    fn the_box_holds_min_quartiles_and_max() {
        let s = box_spread(&[4.0, 1.0, f64::NAN, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!(
            (
                s.lower_whisker,
                s.quartile1,
                s.median,
                s.quartile3,
                s.upper_whisker
            ),
            (1.0, 2.0, 3.0, 4.0, 5.0)
        );
        let s = box_spread(&[1.0, 2.0]).unwrap();
        assert_eq!((s.quartile1, s.median, s.quartile3), (1.25, 1.5, 1.75));
        assert!(box_spread(&[f64::NAN]).is_none());
    }
}
