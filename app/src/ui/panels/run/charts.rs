//! The Run panel's charts: the selected trial's training metrics and phase split, and the live
//! telemetry per device, all with linked time axes.

use egui_plot::{Legend, Line, Plot, PlotPoints};
use tradetune_engine::telemetry::ring::{PlotPoint, decimate_min_max};
use tradetune_engine::telemetry::{DeviceTag, Metric};

use super::view::LiveTrial;
use crate::ui::context::Context;

/// Height of one chart.
const CHART_HEIGHT: f32 = 140.0;

/// Colours of the phases, in [`PhaseTimes::metrics`] order.
const PHASE_COLORS: [egui::Color32; 7] = [
    egui::Color32::from_rgb(0x4e, 0x79, 0xa7),
    egui::Color32::from_rgb(0xf2, 0x8e, 0x2b),
    egui::Color32::from_rgb(0x76, 0xb7, 0xb2),
    egui::Color32::from_rgb(0x59, 0xa1, 0x4f),
    egui::Color32::from_rgb(0xe1, 0x57, 0x59),
    egui::Color32::from_rgb(0xb0, 0x7a, 0xa1),
    // The compile phase: grey, time the card spent not training.
    egui::Color32::from_rgb(0x9d, 0x9d, 0x9d),
];

/// The selected trial's training as it goes: the latest losses and returns in one line, where
/// its time goes, and its episode returns and losses by env step (linked x axes).
pub(super) fn trial_metrics(ui: &mut egui::Ui, t: &LiveTrial) {
    if t.metrics.is_empty() {
        ui.label(format!("trial {}: no update finished yet", t.number));
        return;
    }
    let pct = |m: &str| {
        t.latest(m)
            .map_or("–".to_owned(), |v| format!("{:+.2} %", 100.0 * v))
    };
    let num = |m: &str| t.latest(m).map_or("–".to_owned(), |v| format!("{v:.4}"));
    ui.label(format!(
        "trial {}: update {} · {} samples · {:.0} samples/s · policy loss {} · value loss {} · \
         entropy {} · approx KL {} · clip fraction {} · episode return {} (equal weight {})",
        t.number,
        t.update,
        t.env_steps,
        t.latest("charts/SPS").unwrap_or(0.0),
        num("losses/policy_loss"),
        num("losses/value_loss"),
        num("losses/entropy"),
        num("losses/approx_kl"),
        num("losses/clipfrac"),
        pct("rollout/ep_return_mean"),
        pct("rollout/ep_equal_weight_return_mean"),
    ));
    phase_bar(ui, &t.phase_seconds());
    let percent = |m: &str| -> Vec<PlotPoint> {
        t.metrics.get(m).map_or_else(Vec::new, |points| {
            points
                .iter()
                .map(|p| PlotPoint {
                    t: p.t,
                    v: 100.0 * p.v,
                })
                .collect()
        })
    };
    let series = |m: &str| t.metrics.get(m).cloned().unwrap_or_default();
    let group = format!("trial {} metrics", t.number);
    if t.metrics.contains_key("rollout/ep_return_mean") {
        chart(
            ui,
            &format!("trial {}: episode return % by env step", t.number),
            &group,
            &[
                ("agent", &percent("rollout/ep_return_mean")),
                (
                    "equal weight",
                    &percent("rollout/ep_equal_weight_return_mean"),
                ),
            ],
        );
    }
    chart(
        ui,
        &format!("trial {}: losses by env step", t.number),
        &group,
        &[
            ("policy loss", &series("losses/policy_loss")),
            ("value loss", &series("losses/value_loss")),
        ],
    );
    chart(
        ui,
        &format!("trial {}: policy entropy by env step", t.number),
        &group,
        &[("entropy", &series("losses/entropy"))],
    );
}

/// Where the time goes: one bar split by phase, with each phase's share written beside it.
fn phase_bar(ui: &mut egui::Ui, phases: &[(&'static str, f64)]) {
    let total: f64 = phases.iter().map(|(_, s)| s).sum();
    if total <= 0.0 {
        return;
    }
    ui.horizontal_wrapped(|ui| {
        ui.label(format!("where the time goes ({total:.1} s):"));
        for ((name, seconds), color) in phases.iter().zip(PHASE_COLORS) {
            if *seconds > 0.0 {
                ui.colored_label(
                    color,
                    format!("{} {:.0} %", phase_name(name), 100.0 * seconds / total),
                );
            }
        }
    });
    let (rect, _) =
        ui.allocate_exact_size(egui::vec2(ui.available_width(), 14.0), egui::Sense::hover());
    let mut x = rect.left();
    for ((_, seconds), color) in phases.iter().zip(PHASE_COLORS) {
        let w = rect.width() * (*seconds / total) as f32;
        let segment =
            egui::Rect::from_min_max(egui::pos2(x, rect.top()), egui::pos2(x + w, rect.bottom()));
        ui.painter().rect_filled(segment, 0.0, color);
        x += w;
    }
}

/// `time/env_step_s` → `env step`.
fn phase_name(metric: &str) -> String {
    metric
        .trim_start_matches("time/")
        .trim_end_matches("_s")
        .replace('_', " ")
}

pub(super) fn telemetry_charts(ui: &mut egui::Ui, state: &Context) {
    let Some(handle) = &state.telemetry else {
        ui.label("telemetry is off (see the status bar)");
        return;
    };
    let width = ui.available_width().max(100.0) as usize;
    let keys = handle.series_keys();
    let gpus: Vec<u32> = {
        let mut v: Vec<u32> = keys
            .iter()
            .filter_map(|(d, _)| match d {
                DeviceTag::Gpu(i) => Some(*i),
                DeviceTag::Host => None,
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let series =
        |tag: DeviceTag, metric: Metric| -> Vec<PlotPoint> { handle.series(tag, metric, width) };
    if gpus.is_empty() {
        ui.label("no GPU answered the probes: CPU and process only");
    }
    for i in gpus {
        let tag = DeviceTag::Gpu(i);
        chart(
            ui,
            &format!("gpu{i} utilisation %"),
            "telemetry",
            &[("util %", &series(tag, Metric::UtilPct))],
        );
        let total = series(tag, Metric::MemTotalMib);
        // The study's budget on this device: what a run's estimate is checked against.
        let fraction = state.settings.draft.study.memory_fraction;
        let budget: Vec<PlotPoint> = total
            .iter()
            .map(|p| PlotPoint {
                t: p.t,
                v: p.v * fraction,
            })
            .collect();
        chart(
            ui,
            &format!("gpu{i} memory MiB"),
            "telemetry",
            &[
                ("used", &series(tag, Metric::MemUsedMib)),
                (&format!("budget ({:.0} %)", 100.0 * fraction), &budget),
                ("total", &total),
            ],
        );
        chart(
            ui,
            &format!("gpu{i} temperature °C"),
            "telemetry",
            &[("temp", &series(tag, Metric::TempC))],
        );
        chart(
            ui,
            &format!("gpu{i} power W"),
            "telemetry",
            &[("power", &series(tag, Metric::PowerW))],
        );
        chart(
            ui,
            &format!("gpu{i} SM clock MHz"),
            "telemetry",
            &[("clock", &series(tag, Metric::SmClockMhz))],
        );
    }
    chart(
        ui,
        "CPU %",
        "telemetry",
        &[
            ("machine", &series(DeviceTag::Host, Metric::CpuPct)),
            (
                "this process",
                &series(DeviceTag::Host, Metric::ProcessCpuPct),
            ),
        ],
    );
    chart(
        ui,
        "process memory MiB",
        "telemetry",
        &[("RSS", &series(DeviceTag::Host, Metric::RssMib))],
    );
}

/// One chart; charts of the same `group` share their x axis (zoom/pan one, all follow).
/// Series longer than the chart is wide are min/max-decimated to two points per pixel column,
/// so a frame costs the same at 100,000 points as at 1,000 and no spike is lost. The axes are
/// labelled from the title: the telemetry group's x axis is clock time (its points are Unix
/// seconds), a title "… by env step" or "… by update" names its x axis, and the y axis carries
/// the title's unit.
pub fn chart(ui: &mut egui::Ui, title: &str, group: &str, lines: &[(&str, &Vec<PlotPoint>)]) {
    ui.label(title);
    let width = 2 * ui.available_width().max(100.0) as usize;
    let clock = group == "telemetry";
    let x_label = if clock {
        "local time"
    } else if title.contains("by env step") {
        "env steps"
    } else if title.contains("by update") {
        "update"
    } else {
        ""
    };
    let mut plot = Plot::new(title)
        .height(CHART_HEIGHT)
        .legend(Legend::default())
        .link_axis(egui::Id::unique(("plot group", group)), [true, false])
        .link_cursor(egui::Id::unique(("plot group", group)), [true, false])
        .y_axis_label(y_unit(title));
    if !x_label.is_empty() {
        plot = plot.x_axis_label(x_label);
    }
    if clock {
        plot = plot
            .x_axis_formatter(|m, _| clock_time(m.value))
            .label_formatter(|hover| {
                let (name, p) = match hover {
                    egui_plot::HoverPosition::NearDataPoint {
                        plot_name,
                        position,
                        ..
                    } => (*plot_name, position),
                    egui_plot::HoverPosition::Elsewhere { position } => ("", position),
                };
                Some(format!("{name}\n{} · {:.4}", clock_time(p.x), p.y))
            });
    }
    plot.show(ui, |plot| {
        for (name, points) in lines {
            let shown: Vec<[f64; 2]> = decimate_min_max(points, width)
                .iter()
                .map(|p| [p.t, p.v])
                .collect();
            plot.line(Line::new(*name, PlotPoints::new(shown)));
        }
    });
}

/// Unix seconds as the local clock time (`14:03:27`).
pub fn clock_time(unix_s: f64) -> String {
    chrono::DateTime::from_timestamp(unix_s.floor() as i64, 0)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_default()
}

/// The unit a chart's title names, for its y axis (`gpu0 memory MiB` → `MiB`).
pub fn y_unit(title: &str) -> &'static str {
    let units = [
        ("samples/s", "samples/s"),
        ("return %", "return %"),
        ("%", "%"),
        ("MiB", "MiB"),
        ("°C", "°C"),
        ("MHz", "MHz"),
        (" W", "W"),
        ("losses", "loss"),
        ("entropy", "entropy (nats)"),
        ("objective", "objective"),
    ];
    units
        .iter()
        .find(|(k, _)| title.contains(k))
        .map_or("", |(_, u)| u)
}
