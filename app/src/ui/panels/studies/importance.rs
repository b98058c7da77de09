//! The open study's parameter importances by PED-ANOVA (`tradetune_study::importance`, the
//! numbers of Optuna's `get_param_importances` and of `tradetune study importance`), as
//! optuna-dashboard's importance chart draws them: one horizontal bar per parameter, most
//! important on top, with the values beside it to 4 significant digits.
//!
//! They are computed when the study's trials are read and only when their count changed
//! (see [`super::StudiesView::update_importance`]), never while drawing a frame.

use egui_plot::{Bar, BarChart, Plot, PlotPoint, Text};
use tradetune_engine::study::importance::Importances;

use tradetune_engine::front::format::significant;

/// The importances of the selected study (group) and the trial counts they were computed at.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportanceView {
    /// The group they belong to.
    pub group: String,
    /// Trials read (any state), and COMPLETE ones among them, when computed.
    pub n_rows: usize,
    pub n_complete: usize,
    /// The importances, or why there are none (e.g. too few COMPLETE trials).
    pub result: Result<Importances, String>,
    /// How many times importances were computed in this view (recomputed only when the trial
    /// counts change).
    pub computations: u64,
}

impl ImportanceView {
    /// The trial counts they were computed at.
    pub fn key(&self) -> super::view::ImportanceKey {
        super::view::ImportanceKey {
            group: self.group.clone(),
            n_rows: self.n_rows,
            n_complete: self.n_complete,
        }
    }
}

/// The heading over the chart.
pub fn heading(imp: &Importances) -> String {
    format!(
        "parameter importance (PED-ANOVA): top {} of {} COMPLETE trials",
        imp.n_top, imp.n_trials
    )
}

/// Draws the chart (nothing before the first computation).
pub(super) fn importance_plot(ui: &mut egui::Ui, view: Option<&ImportanceView>) {
    let Some(view) = view else { return };
    let imp = match &view.result {
        Err(e) => {
            ui.label(format!("importance not computed: {e}"));
            return;
        }
        Ok(imp) if imp.params.is_empty() => {
            ui.label("parameter importance: the study has no parameters");
            return;
        }
        Ok(imp) => imp,
    };
    ui.label(heading(imp));
    if imp.all_equal() {
        ui.label("no parameter tells the top trials apart (they share their value): all equal");
    }
    let n = imp.params.len();
    // The most important parameter on top: bar i at height n − 1 − i.
    let bars: Vec<Bar> = imp
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Bar::new((n - 1 - i) as f64, p.importance)
                .name(&p.name)
                .width(0.7)
        })
        .collect();
    ui.columns(2, |cols| {
        Plot::new("param_importance")
            .height((24.0 * n as f32).clamp(120.0, 400.0))
            .x_axis_label("importance (sums to 1)")
            .include_x(0.0)
            .include_x(1.0)
            .include_y(-0.6)
            .include_y(n as f64 - 0.4)
            // The parameters are named beside their bars, not on a numbered axis.
            .show_axes([true, false])
            .show_grid([true, false])
            .allow_zoom(false)
            .allow_drag(false)
            .allow_scroll(false)
            .show(&mut cols[0], |plot| {
                for (i, p) in imp.params.iter().enumerate() {
                    plot.text(
                        Text::new(
                            p.name.clone(),
                            PlotPoint::new(p.importance + 0.01, (n - 1 - i) as f64),
                            format!("{}  {}", p.name, significant(p.importance, 4)),
                        )
                        .anchor(egui::Align2::LEFT_CENTER),
                    );
                }
                plot.bar_chart(
                    BarChart::new("importance", bars)
                        .horizontal()
                        .element_formatter(Box::new(|bar, _| {
                            format!("{}: {}", bar.name, significant(bar.value, 4))
                        })),
                );
            });
        egui::Grid::new("param_importance_values")
            .striped(true)
            .show(&mut cols[1], |ui| {
                ui.strong("parameter");
                ui.strong("importance");
                ui.end_row();
                for p in &imp.params {
                    ui.label(&p.name);
                    ui.label(significant(p.importance, 4));
                    ui.end_row();
                }
            });
    });
}
