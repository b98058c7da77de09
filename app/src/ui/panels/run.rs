//! Run: start and stop, the progress, the bottleneck verdict, and live charts with linked time
//! axes — telemetry per device (utilisation, memory, temperature, power, clocks; CPU and the
//! process) — and the run's samples/s, phase split, episode returns and losses.

use egui_plot::{Legend, Line, Plot, PlotPoints};
use tradetune_engine::telemetry::ring::{PlotPoint, decimate_min_max};
use tradetune_engine::telemetry::{DeviceTag, Metric};

use super::widgets;
use crate::ui::command::Command;
use crate::ui::state::AppState;

/// Height of one chart.
const CHART_HEIGHT: f32 = 140.0;

/// Start (disabled, with the reason, while the draft has a problem) and Stop.
pub fn start_stop(ui: &mut egui::Ui, state: &AppState, commands: &mut Vec<Command>) {
    let data = state.data.ready();
    let problems = state.settings.draft.problems(data.map(|d| d.shape));
    let over = data.is_some_and(|d| {
        state
            .settings
            .draft
            .memory(d.shape, state.device_bytes())
            .over_budget()
    });
    let blocked = if state.run.running {
        Some("a run is going".to_owned())
    } else if data.is_none() {
        Some("the data is not loaded".to_owned())
    } else if let Some(p) = problems.first() {
        // Engine messages start with the field (`ppo.batch_size = …`); the app's own do not.
        Some(if p.message.starts_with(&p.field) {
            p.message.clone()
        } else {
            format!("{}: {}", p.field, p.message)
        })
    } else if over {
        Some("the estimate is over the memory budget".to_owned())
    } else {
        None
    };
    ui.horizontal(|ui| {
        let start = ui.add_enabled(blocked.is_none(), egui::Button::new("Start"));
        if start.clicked() {
            commands.push(Command::Start);
        }
        if ui
            .add_enabled(state.run.running, egui::Button::new("Stop"))
            .clicked()
        {
            commands.push(Command::Stop);
        }
        if let Some(why) = &blocked
            && !state.run.running
        {
            ui.colored_label(widgets::WARN, format!("cannot start: {why}"));
        }
    });
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    start_stop(ui, state, commands);
    let run = &state.run;
    let (done, total) = run.timesteps;
    if run.running || run.report.is_some() || run.error.is_some() {
        let fraction = if total > 0 {
            done as f32 / total as f32
        } else {
            0.0
        };
        let eta = run.started.and_then(|s| {
            let elapsed = s.elapsed().as_secs_f64();
            (done > 0 && done < total).then(|| elapsed * (total - done) as f64 / done as f64)
        });
        ui.add(egui::ProgressBar::new(fraction.min(1.0)).text(format!(
            "{done}/{total} samples on {}{}",
            if run.device.is_empty() {
                "…"
            } else {
                &run.device
            },
            eta.map_or(String::new(), |s| format!(" · ETA {s:.0} s"))
        )));
    }
    if let Some(e) = &run.error {
        ui.colored_label(widgets::WARN, format!("run failed: {e}"));
    }
    if let Some(r) = &run.report {
        ui.label(format!(
            "{}: {} samples, {} updates in {:.1} s — {:.0} samples/s",
            if r.stopped { "stopped" } else { "finished" },
            r.timesteps,
            r.updates,
            r.elapsed_s,
            r.samples_per_second
        ));
    }
    verdict(ui, state);

    ui.separator();
    ui.heading("Telemetry");
    telemetry_charts(ui, state);

    ui.separator();
    ui.heading("Training");
    let run = &state.run;
    let total_phase = run.phases.total();
    if total_phase > 0.0 {
        let pct = |v: f64| 100.0 * v / total_phase;
        ui.label(format!(
            "phase split: env step {:.0} % · inference {:.0} % · buffer {:.0} % · advantages {:.0} % · update {:.0} %",
            pct(run.phases.env_step),
            pct(run.phases.inference),
            pct(run.phases.buffer),
            pct(run.phases.advantages),
            pct(run.phases.update)
        ));
    }
    chart(
        ui,
        "samples/s",
        "run_time",
        &[("samples/s", &run.samples_per_second)],
    );
    chart(
        ui,
        "episode return",
        "run_steps",
        &[
            ("agent", &run.episode_return),
            ("equal weight", &run.equal_weight_return),
        ],
    );
    chart(
        ui,
        "losses",
        "run_updates",
        &[
            ("policy loss", &run.policy_loss),
            ("value loss", &run.value_loss),
            ("entropy", &run.entropy),
        ],
    );
}

/// The bottleneck verdict of the run so far, as a banner with its suggestion.
fn verdict(ui: &mut egui::Ui, state: &AppState) {
    let p = &state.run.phases;
    let total = p.total();
    if total <= 0.0 {
        return;
    }
    // The same thresholds as the engine's verdict rules (telemetry::verdict).
    use tradetune_engine::telemetry::verdict::PHASE_BOUND;
    let text = if p.env_step / total > PHASE_BOUND {
        format!(
            "environment stepping is {:.0} % of wall time: raise n_envs or use the on-device environment",
            100.0 * p.env_step / total
        )
    } else if p.update / total > PHASE_BOUND {
        format!(
            "update-bound ({:.0} % of wall time): a faster device, a larger batch_size or half precision helps",
            100.0 * p.update / total
        )
    } else {
        return;
    };
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.strong("Bottleneck");
        ui.label(text);
    });
}

fn telemetry_charts(ui: &mut egui::Ui, state: &AppState) {
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
        chart(
            ui,
            &format!("gpu{i} memory MiB"),
            "telemetry",
            &[
                ("used", &series(tag, Metric::MemUsedMib)),
                ("total", &series(tag, Metric::MemTotalMib)),
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
/// so a frame costs the same at 100,000 points as at 1,000 and no spike is lost.
pub fn chart(ui: &mut egui::Ui, title: &str, group: &str, lines: &[(&str, &Vec<PlotPoint>)]) {
    ui.label(title);
    let width = 2 * ui.available_width().max(100.0) as usize;
    Plot::new(title)
        .height(CHART_HEIGHT)
        .legend(Legend::default())
        .link_axis(egui::Id::unique(("plot group", group)), [true, false])
        .link_cursor(egui::Id::unique(("plot group", group)), [true, false])
        .show(ui, |plot| {
            for (name, points) in lines {
                let shown: Vec<[f64; 2]> = decimate_min_max(points, width)
                    .iter()
                    .map(|p| [p.t, p.v])
                    .collect();
                plot.line(Line::new(*name, PlotPoints::new(shown)));
            }
        });
}
