//! The open study's Report view (issue 16): what `tradetune study report` computes
//! (`front::report`) — the best trial and its folds, the probability of backtest overfitting
//! with its logit histogram, performance degradation and probability of loss, the best
//! trial's deflated and probabilistic Sharpe ratios, its policy against equal weight on the
//! test split — and its seed spread, with "Re-run best trial with K seeds" (`front::reseed`).
//!
//! The report is computed on a background thread ([`crate::ui::tasks::Jobs::study_report`])
//! when the view opens and again only when the reported study's trial counts change (a live
//! poll that brought new trials), never while drawing a frame.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use egui_plot::{Bar, BarChart, Plot, Span, VLine};
use tradetune_engine::front::min_median_max;
use tradetune_engine::front::report::StudyReport;
use tradetune_engine::storage::TrialState;

mod seeds;

pub use self::seeds::{box_spread, cancel_reseed, on_reseed, spread_heading, start_reseed};
use super::{Action, StudiesView, widgets};
use crate::ui::context::Context;
use crate::ui::tasks::{ReportKey, sig4};

/// S, the partitions of the PBO's CSCV (`tradetune study report`'s default).
pub const PARTITIONS: usize = 16;

/// The seeds "Re-run best trial" asks for unless told otherwise.
pub const DEFAULT_SEEDS: usize = 5;

/// The colour of the study's own numbers (bars, boxes); equal weight and λ ≤ 0 are in
/// [`widgets::WARN`].
const AGENT: egui::Color32 = egui::Color32::from_rgb(0x4a, 0x90, 0xd9);

/// A computed report, or why it could not be.
#[derive(Debug, Clone)]
pub struct ReportView {
    pub key: ReportKey,
    pub result: Result<Box<StudyReport>, String>,
}

/// A re-run of the best trial with other seeds, in flight.
#[derive(Debug, Clone)]
pub struct ReseedRun {
    /// The study.
    pub study: String,
    /// Seeds asked for.
    pub seeds: usize,
    /// The seed being trained (from 0), once the first started.
    pub at: Option<usize>,
    /// Set to stop it (at the next update of the seed being trained; nothing is stored).
    pub cancel: Arc<AtomicBool>,
}

/// The Report view's state.
#[derive(Debug, Clone)]
pub struct ReportState {
    /// Whether the Report view is shown (instead of the trials and plots).
    pub open: bool,
    /// The member of the selected group reported (None: its first).
    pub study: Option<String>,
    /// The last report computed.
    pub shown: Option<ReportView>,
    /// The report being computed.
    pub computing: Option<ReportKey>,
    /// Reports computed so far in this view (one per trial count, not per frame).
    pub computations: u64,
    /// K of "Re-run best trial with K seeds".
    pub seeds: usize,
    /// The re-run in flight.
    pub reseed: Option<ReseedRun>,
    /// Where the re-run's study file came from.
    pub reseed_source: Option<String>,
    /// Why the last re-run failed.
    pub reseed_error: Option<String>,
}

impl Default for ReportState {
    fn default() -> Self {
        ReportState {
            open: false,
            study: None,
            shown: None,
            computing: None,
            computations: 0,
            seeds: DEFAULT_SEEDS,
            reseed: None,
            reseed_source: None,
            reseed_error: None,
        }
    }
}

impl ReportState {
    /// What another database keeps: whether the view is open, K, and a re-run in flight.
    pub fn carried(&mut self) -> ReportState {
        ReportState {
            open: self.open,
            seeds: self.seeds,
            reseed: self.reseed.take(),
            reseed_source: self.reseed_source.take(),
            ..ReportState::default()
        }
    }
}

/// The study reported: the chosen member of the selected group, else its first.
pub fn reported_study(view: &StudiesView) -> Option<String> {
    let members = view.selected_members()?;
    view.report
        .study
        .as_ref()
        .filter(|s| members.contains(s))
        .or(members.first())
        .cloned()
}

/// What the report should be computed at now (None while the trials are read).
pub fn wanted(view: &StudiesView) -> Option<ReportKey> {
    if view.table.loading {
        return None;
    }
    let study = reported_study(view)?;
    let rows = view.table.rows.iter().filter(|r| r.study == study);
    Some(ReportKey {
        generation: view.generation,
        trials: rows.clone().count(),
        complete: rows.filter(|r| r.state == TrialState::Complete).count(),
        study,
    })
}

/// Whether the open Report view needs a new report (and none is being computed).
pub fn stale(view: &StudiesView) -> bool {
    view.report.open
        && view.report.computing.is_none()
        && wanted(view).is_some_and(|k| view.report.shown.as_ref().map(|s| &s.key) != Some(&k))
}

/// [`Action::ShowReport`]: shows the Report view (computing its report) or the trials.
pub fn show_report(view: &mut StudiesView, cx: &Context, open: bool) {
    view.report.open = open;
    refresh(view, cx);
}

/// [`Action::ReportStudy`]: reports another member of the selected group.
pub fn report_study(view: &mut StudiesView, cx: &Context, study: String) {
    view.report.study = Some(study);
    refresh(view, cx);
}

/// [`Action::RefreshReport`]: computes the report in the background when it is stale.
pub fn refresh(view: &mut StudiesView, cx: &Context) {
    if !stale(view) {
        return;
    }
    let (Some(key), Some(path)) = (wanted(view), database(view)) else {
        return;
    };
    view.report.computing = Some(key.clone());
    cx.jobs.study_report(path, key, PARTITIONS);
}

/// Where the open database is read from.
fn database(view: &StudiesView) -> Option<std::path::PathBuf> {
    view.source
        .clone()
        .or_else(|| view.db.as_ref().map(|d| d.path.clone()))
}

/// A report was computed (kept only for the study and generation shown).
pub fn computed(view: &mut StudiesView, key: ReportKey, result: Result<Box<StudyReport>, String>) {
    let report = &mut view.report;
    if report.computing.as_ref() == Some(&key) {
        report.computing = None;
    }
    if key.generation != view.generation || reported_study(view).as_ref() != Some(&key.study) {
        return;
    }
    let report = &mut view.report;
    report.computations += 1;
    report.shown = Some(ReportView { key, result });
}

/// Draws the Report view of the selected study.
pub(super) fn report_view(ui: &mut egui::Ui, view: &StudiesView, commands: &mut Vec<Action>) {
    if stale(view) {
        commands.push(Action::RefreshReport);
    }
    let state = &view.report;
    let study = reported_study(view);
    let members = view.selected_members().unwrap_or_default();
    ui.horizontal(|ui| {
        if members.len() > 1 {
            let l = ui.label("report of");
            egui::ComboBox::from_id_salt("report_study")
                .selected_text(study.clone().unwrap_or_default())
                .show_ui(ui, |ui| {
                    for m in members {
                        if ui.selectable_label(study.as_ref() == Some(m), m).clicked() {
                            commands.push(Action::ReportStudy(m.clone()));
                        }
                    }
                })
                .response
                .labelled_by(l.id);
        }
        if state.computing.is_some() {
            ui.spinner();
            ui.label("computing the report…");
        }
    });
    let shown = state
        .shown
        .as_ref()
        .filter(|s| Some(&s.key.study) == study.as_ref());
    let Some(shown) = shown else {
        return;
    };
    let report = match &shown.result {
        Ok(r) => r,
        Err(e) => {
            ui.colored_label(widgets::WARN, format!("report not computed: {e}"));
            return;
        }
    };
    egui::ScrollArea::vertical()
        .id_salt("study_report")
        .show(ui, |ui| {
            ui.label(format!(
                "study {} ({}): {} trials, {} COMPLETE, {} with stored fold returns ({} bars all \
                 of them tested{}){}",
                report.study,
                report.direction,
                report.trials,
                report.complete,
                report.with_returns,
                report.bars,
                report.bars_note(),
                if report.pruned_with_returns > 0 {
                    format!(
                        "; {} PRUNED trials' folds count in the deflated Sharpe's N and V",
                        report.pruned_with_returns
                    )
                } else {
                    String::new()
                }
            ));
            ui.separator();
            best_trial(ui, report);
            ui.separator();
            pbo(ui, report);
            ui.separator();
            deflated(ui, report);
            ui.separator();
            test_split(ui, report);
            ui.separator();
            seeds::seeds(ui, state, report, commands);
        });
}

fn best_trial(ui: &mut egui::Ui, report: &StudyReport) {
    ui.strong("Best trial");
    let Some(b) = &report.best else {
        ui.label("no COMPLETE trial yet");
        return;
    };
    match b.fold_std {
        Some(sd) => ui.label(format!(
            "trial #{}: value {} (mean of {} folds, spread ± {} std)",
            b.number,
            sig4(b.value),
            b.folds.len(),
            sig4(sd)
        )),
        None => ui.label(format!(
            "trial #{}: value {} (hold-out: no folds; choose walk-forward or CPCV as the \
             evaluation in Configure to cross-validate)",
            b.number,
            sig4(b.value)
        )),
    };
    ui.horizontal_top(|ui| {
        if b.fold_std.is_some() {
            egui::Grid::new("report_folds")
                .striped(true)
                .show(ui, |ui| {
                    ui.strong("fold");
                    ui.strong("objective");
                    ui.end_row();
                    for (fold, v) in &b.folds {
                        ui.label(fold.to_string());
                        ui.label(sig4(*v));
                        ui.end_row();
                    }
                    let values: Vec<f64> = b.folds.iter().map(|(_, v)| *v).collect();
                    if let Some((lo, _, hi)) = min_median_max(&values) {
                        ui.label("min … max");
                        ui.label(format!("{} … {}", sig4(lo), sig4(hi)));
                        ui.end_row();
                    }
                });
            ui.add_space(24.0);
        }
        egui::Grid::new("report_params")
            .striped(true)
            .show(ui, |ui| {
                ui.strong("parameter");
                ui.strong("value");
                ui.end_row();
                for (name, value) in &b.params {
                    ui.label(name);
                    // Numbers to 4 significant digits (0.0006, not 0.0006000000000000001).
                    ui.label(value.parse::<f64>().map_or_else(|_| value.clone(), sig4));
                    ui.end_row();
                }
            });
    });
}

/// The heading over the logit histogram.
pub fn histogram_heading(combinations: usize, bins: usize) -> String {
    format!(
        "logits of the in-sample best trial's out-of-sample rank: {combinations} combinations \
         in {bins} bins (λ ≤ 0, shaded: it ranked at or below the out-of-sample median)"
    )
}

fn pbo(ui: &mut egui::Ui, report: &StudyReport) {
    ui.strong("Probability of backtest overfitting (CSCV)");
    let p = match (&report.pbo.result, &report.pbo.unavailable) {
        (Some(p), _) => p,
        (None, why) => {
            ui.colored_label(
                widgets::WARN,
                format!("PBO not available: {}", why.as_deref().unwrap_or("")),
            );
            return;
        }
    };
    ui.label(format!(
        "PBO {:.3} over {} trials ({} partitions, {} combinations, {} bars used)",
        p.pbo, p.strategies, p.partitions, p.combinations, p.periods_used
    ));
    ui.label(format!(
        "probability of loss {:.3}: the in-sample best had a negative out-of-sample Sharpe ratio \
         (mean return below 0) in {:.1} % of the combinations",
        p.probability_of_loss,
        100.0 * p.probability_of_loss
    ));
    let d = &p.degradation;
    ui.label(match (d.slope, d.intercept) {
        (Some(slope), Some(intercept)) => format!(
            "performance degradation: out-of-sample Sharpe = {} + {} × in-sample Sharpe (R² {}); \
             mean Sharpe per bar {} in sample, {} out of sample",
            sig4(intercept),
            sig4(slope),
            d.r_squared.map_or("–".into(), sig4),
            sig4(d.mean_in_sample),
            sig4(d.mean_out_of_sample)
        ),
        _ => format!(
            "performance degradation: no line (the in-sample Sharpe ratios do not vary); mean \
             Sharpe per bar {} in sample, {} out of sample",
            sig4(d.mean_in_sample),
            sig4(d.mean_out_of_sample)
        ),
    });
    let hist = &report.pbo.histogram;
    ui.label(histogram_heading(p.combinations, hist.len()));
    let bars: Vec<Bar> = hist
        .iter()
        .filter(|b| b.lower.is_finite() && b.upper.is_finite())
        .map(|b| {
            Bar::new((b.lower + b.upper) / 2.0, b.count as f64)
                .width((b.upper - b.lower) * 0.95)
                .name(format!("({:.2}, {:.2}]", b.lower, b.upper))
        })
        .collect();
    let lowest = hist
        .iter()
        .map(|b| b.lower)
        .filter(|x| x.is_finite())
        .fold(-0.5, f64::min);
    Plot::new("pbo_logits")
        .height(180.0)
        .x_axis_label("logit λ")
        .y_axis_label("combinations")
        .include_x(lowest)
        .include_x(0.5)
        .include_y(0.0)
        .allow_zoom(false)
        .allow_drag(false)
        .allow_scroll(false)
        .show(ui, |plot| {
            plot.span(
                Span::new("λ ≤ 0: overfit", lowest..=0.0).fill(widgets::WARN.gamma_multiply(0.12)),
            );
            plot.vline(VLine::new("λ = 0", 0.0).stroke(egui::Stroke::new(1.0, widgets::WARN)));
            plot.bar_chart(
                BarChart::new("combinations", bars)
                    .color(AGENT)
                    .element_formatter(Box::new(|bar, _| {
                        format!("λ in {}: {} combinations", bar.name, bar.value)
                    })),
            );
        });
}

fn deflated(ui: &mut egui::Ui, report: &StudyReport) {
    ui.strong("Deflated Sharpe ratio of the best trial");
    let d = match (&report.dsr.result, &report.dsr.unavailable) {
        (Some(d), _) => d,
        (None, why) => {
            ui.colored_label(
                widgets::WARN,
                format!(
                    "deflated Sharpe not available: {}",
                    why.as_deref().unwrap_or("")
                ),
            );
            return;
        }
    };
    egui::Grid::new("report_dsr").striped(true).show(ui, |ui| {
        let mut row = |name: &str, value: String| {
            ui.label(name);
            ui.label(value);
            ui.end_row();
        };
        let sharpe = match report.dsr.returns {
            "own" => "Sharpe ratio per bar (out of sample)".to_owned(),
            over => format!("Sharpe ratio per bar of its returns {over} (out of sample)"),
        };
        row(
            &sharpe,
            format!(
                "{} over {} bars",
                sig4(d.estimate.sharpe),
                d.estimate.periods
            ),
        );
        row(
            "skewness, kurtosis",
            format!(
                "{}, {}",
                sig4(d.estimate.skewness),
                sig4(d.estimate.kurtosis)
            ),
        );
        row("probabilistic Sharpe ratio (vs 0)", format!("{:.3}", d.psr));
        row(
            "trials, variance of their Sharpe ratios",
            format!("{}, {}", d.trials, sig4(d.sharpe_variance)),
        );
        row(
            "expected best Sharpe of as many noise trials",
            sig4(d.expected_max_sharpe),
        );
        row("deflated Sharpe ratio", format!("{:.3}", d.dsr));
    });
    if let Some(spread) = report.dsr.paths_text() {
        ui.label(format!("deflated Sharpe ratio: {spread}"));
    }
    ui.label(match report.dsr.returns {
        "own" => "the deflated Sharpe ratio is the probability that the best trial's Sharpe ratio \
                  beats the best of as many trials of pure noise; below 0.95 it may be luck"
            .to_owned(),
        over => format!(
            "the deflated Sharpe ratio is the probability that the best trial's Sharpe ratio of \
             its returns {over} beats the best of as many trials of pure noise: that it beats \
             holding the assets, not luck; below 0.95 it may be luck"
        ),
    });
    if let Some(note) = &report.dsr.note {
        ui.colored_label(widgets::WARN, note);
    }
}

fn test_split(ui: &mut egui::Ui, report: &StudyReport) {
    ui.strong("Best trial's policy on the test split, against equal weight");
    let t = match (&report.test.result, &report.test.unavailable) {
        (Some(t), _) => t,
        (None, why) => {
            ui.label(format!("not available: {}", why.as_deref().unwrap_or("")));
            return;
        }
    };
    let s = &t.summary;
    ui.label(format!(
        "trial #{}'s checkpoint {} ({} samples) on {} test bars",
        t.trial, t.checkpoint, t.timesteps, s.bars
    ));
    let pct = |v: f64| format!("{:.2} %", 100.0 * v);
    let num = |v: f64| format!("{v:.3}");
    let (a, e) = (&s.agent, &s.equal_weight);
    egui::Grid::new("report_test").striped(true).show(ui, |ui| {
        for (name, x, y) in [
            ("", "agent".to_owned(), "equal weight".to_owned()),
            ("total return", pct(a.total_return), pct(e.total_return)),
            ("sharpe", num(a.sharpe), num(e.sharpe)),
            ("sortino", num(a.sortino), num(e.sortino)),
            ("max drawdown", pct(a.max_drawdown), pct(e.max_drawdown)),
        ] {
            ui.label(name);
            ui.label(x);
            ui.label(y);
            ui.end_row();
        }
    });
    ui.label(format!(
        "objective {} = {}",
        s.objective_name,
        sig4(s.objective)
    ));
}
