//! Run: start and stop, the progress, the bottleneck verdict, and live charts with linked time
//! axes — telemetry per device (utilisation, memory, temperature, power, clocks; CPU and the
//! process) — and the run's samples/s, phase split, episode returns and losses.

use egui_plot::{Legend, Line, Plot, PlotPoints};
use tradetune_engine::telemetry::ring::{PlotPoint, decimate_min_max};
use tradetune_engine::telemetry::{DeviceTag, Metric};

use super::widgets;
use crate::ui::command::Command;
use crate::ui::state::{AppState, LiveTrial, RunView};
use tradetune_engine::storage::TrialState;

/// Height of one chart.
const CHART_HEIGHT: f32 = 140.0;

/// Start (disabled, with the reason, while the draft has a problem) and Stop.
pub fn start_stop(ui: &mut egui::Ui, state: &AppState, commands: &mut Vec<Command>) {
    let data = state.data.ready();
    let problems = state.problems();
    let over = data.is_some_and(|d| {
        state
            .settings
            .draft
            .memory(d.shape, state.device_bytes())
            .over_budget()
    });
    let blocked = if state.run.running {
        Some("a study is running".to_owned())
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
    if run.started.is_some() {
        ui.horizontal(|ui| {
            ui.strong(format!("study {}", run.study));
            if let Some(db) = &run.db {
                ui.label(format!("in {}", db.display()));
            }
            if ui.button("Show in Studies").clicked() {
                commands.push(Command::ShowRunInStudies);
            }
        });
        let done = run.finished();
        let total = run.n_trials.max(1);
        ui.add(
            egui::ProgressBar::new(done as f32 / total as f32).text(format!(
                "{done} of {} trials finished{}",
                run.n_trials,
                if run.existing_trials > 0 {
                    format!(" ({} were already in the study)", run.existing_trials)
                } else {
                    String::new()
                }
            )),
        );
    }
    if !run.recovered.is_empty() {
        ui.label(format!(
            "recovered trials {:?}: left RUNNING by a process that died, now FAIL",
            run.recovered
        ));
    }
    if let Some(e) = &run.error {
        ui.colored_label(widgets::WARN, format!("the study failed: {e}"));
    }
    if let Some(end) = &run.end {
        ui.label(format!(
            "{}: {} complete, {} pruned, {} failed{}",
            if end.stopped { "stopped" } else { "finished" },
            end.counts[0],
            end.counts[1],
            end.counts[2],
            end.best.map_or(String::new(), |(n, v)| format!(
                "; best trial #{n} = {v:.6}"
            ))
        ));
    }
    // The verdict of the study's latest finished trial (stored with its telemetry summary).
    if let Some(r) = state
        .studies
        .rows
        .iter()
        .filter(|r| r.study == run.study && r.verdict.is_some())
        .max_by_key(|r| r.number)
    {
        egui::Frame::group(ui.style()).show(ui, |ui| {
            ui.strong(format!("Bottleneck of trial {}", r.number));
            ui.label(r.verdict.as_deref().unwrap_or_default());
        });
    }
    workers(ui, run, commands);
    if !run.trials.is_empty() {
        ui.separator();
        ui.heading("Trials");
        timeline(ui, run);
        trial_grid(ui, run, commands);
        if let Some(t) = run
            .selected
            .and_then(|n| run.trials.iter().find(|t| t.number == n))
        {
            trial_metrics(ui, t);
            chart(
                ui,
                &format!(
                    "trial {}: objective on the validation split by update",
                    t.number
                ),
                "run_curve",
                &[("objective", &t.curve)],
            );
        }
    }

    ui.separator();
    ui.heading("Telemetry");
    if !run.samples_per_second.is_empty() {
        chart(
            ui,
            "samples/s, all workers",
            "telemetry",
            &[("samples/s", &run.samples_per_second)],
        );
    }
    telemetry_charts(ui, state);
}

/// Colours of the phases, in [`PhaseTimes::metrics`] order.
const PHASE_COLORS: [egui::Color32; 6] = [
    egui::Color32::from_rgb(0x4e, 0x79, 0xa7),
    egui::Color32::from_rgb(0xf2, 0x8e, 0x2b),
    egui::Color32::from_rgb(0x76, 0xb7, 0xb2),
    egui::Color32::from_rgb(0x59, 0xa1, 0x4f),
    egui::Color32::from_rgb(0xe1, 0x57, 0x59),
    egui::Color32::from_rgb(0xb0, 0x7a, 0xa1),
];

/// The selected trial's training as it goes: the latest losses and returns in one line, where
/// its time goes, and its episode returns and losses by env step (linked x axes).
fn trial_metrics(ui: &mut egui::Ui, t: &LiveTrial) {
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

/// A progress bar per worker with its trial, device and ETA, and a button to stop that trial.
fn workers(ui: &mut egui::Ui, run: &RunView, commands: &mut Vec<Command>) {
    for w in &run.workers {
        ui.horizontal(|ui| {
            let what = match w.trial {
                Some(n) => {
                    let eta = w.trial_started.and_then(|s| {
                        let t = s.elapsed().as_secs_f64();
                        (w.fraction > 0.02 && w.fraction < 1.0)
                            .then(|| t * (1.0 - w.fraction) / w.fraction)
                    });
                    format!(
                        "worker {} on {} ({}): trial {n} {:.0} %{} {}",
                        w.worker,
                        w.device,
                        w.backend,
                        100.0 * w.fraction,
                        eta.map_or(String::new(), |s| format!(" · ETA {s:.0} s")),
                        w.message
                    )
                }
                None if w.done => format!(
                    "worker {} on {}: done ({} trials)",
                    w.worker, w.device, w.finished
                ),
                None => format!("worker {} on {}: waiting", w.worker, w.device),
            };
            ui.add(
                egui::ProgressBar::new(if w.trial.is_some() {
                    w.fraction as f32
                } else {
                    0.0
                })
                .desired_width(ui.available_width() - 140.0)
                .text(what),
            );
            if let Some(n) = w.trial
                && run.running
                && ui.button(format!("Stop trial {n}")).clicked()
            {
                commands.push(Command::StopTrial(n));
            }
        });
    }
}

fn state_color(state: TrialState) -> egui::Color32 {
    match state {
        TrialState::Complete => egui::Color32::from_rgb(0x40, 0xa0, 0x60),
        TrialState::Pruned => egui::Color32::from_rgb(0xc0, 0x90, 0x30),
        TrialState::Fail => widgets::WARN,
        TrialState::Running | TrialState::Waiting => egui::Color32::from_rgb(0x50, 0x80, 0xd0),
    }
}

/// One lane per worker, one bar per trial from its start to its end (or now): an idle device
/// or a "parallel" study that runs one trial at a time shows at a glance.
fn timeline(ui: &mut egui::Ui, run: &RunView) {
    let now = run.now_s();
    ui.label("timeline: trials per worker (seconds since the study started)");
    let lanes = run.workers.len().max(1) as f64;
    Plot::new("timeline")
        .height(40.0 + 24.0 * lanes as f32)
        .show_y(false)
        .y_axis_formatter(|mark, _| format!("worker {}", mark.value))
        .include_y(-0.5)
        .include_y(lanes - 0.5)
        .show(ui, |plot| {
            for t in &run.trials {
                let end = t.span.1.unwrap_or(if run.running { now } else { t.span.0 });
                let y = t.worker as f64;
                plot.line(
                    Line::new(
                        format!("trial {}", t.number),
                        PlotPoints::new(vec![[t.span.0, y], [end.max(t.span.0 + 0.05), y]]),
                    )
                    .width(10.0)
                    .color(state_color(t.state)),
                );
            }
        });
}

fn trial_grid(ui: &mut egui::Ui, run: &RunView, commands: &mut Vec<Command>) {
    egui::Grid::new("live_trials").striped(true).show(ui, |ui| {
        for h in [
            "trial",
            "worker",
            "device",
            "state",
            "value",
            "seconds",
            "parameters / reason",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        let now = run.now_s();
        for t in run.trials.iter().rev() {
            if ui
                .selectable_label(run.selected == Some(t.number), format!("#{}", t.number))
                .clicked()
            {
                commands.push(Command::SelectRunTrial(t.number));
            }
            ui.label(t.worker.to_string());
            ui.label(&t.device);
            ui.colored_label(state_color(t.state), t.state.to_string());
            ui.label(t.value.map_or(String::new(), |v| format!("{v:.6}")));
            ui.label(format!("{:.1}", t.span.1.unwrap_or(now) - t.span.0));
            match &t.reason {
                Some(r) => ui.colored_label(widgets::WARN, r.as_str()),
                None => ui.label(&t.params),
            };
            ui.end_row();
        }
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
