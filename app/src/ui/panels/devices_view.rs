//! The device view, after nvitop: a card per GPU with its utilisation, memory against the
//! study's memory budget, temperature, power against its limit, clocks against their maxima and
//! throttle reasons; the processes using it with their memory; and its history in charts whose
//! clock-time x axes are linked (zoom, pan or hover one and the others follow).
//!
//! Everything comes from the telemetry sampler ([`SamplerHandle`]), which reads the probes on
//! its own threads: drawing only copies the latest values out of its rings.

use egui::{Color32, RichText};
use tradetune_engine::device::memory::fmt_bytes;
use tradetune_engine::telemetry::metric::MIB;
use tradetune_engine::telemetry::ring::PlotPoint;
use tradetune_engine::telemetry::{
    DeviceProcesses, DeviceTag, GpuInfo, Metric, SamplerHandle, ThrottleReasons,
};

use super::run::{chart, clock_time};
use super::widgets;
use crate::ui::context::Context;

/// Amber: near a limit.
const NEAR: Color32 = Color32::from_rgb(0xd0, 0x90, 0x20);
/// Green: well within.
const FINE: Color32 = Color32::from_rgb(0x30, 0x90, 0x50);

/// What one card shows, read from the sampler's latest values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CardFigures {
    /// Unix seconds of the newest reading.
    pub at: Option<f64>,
    pub util_pct: Option<f64>,
    pub mem_used_mib: Option<f64>,
    pub mem_total_mib: Option<f64>,
    pub temp_c: Option<f64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub sm_clock_max_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub mem_clock_max_mhz: Option<f64>,
    pub fan_pct: Option<f64>,
    pub throttle: Option<ThrottleReasons>,
}

impl CardFigures {
    /// The newest values of card `index`.
    pub fn read(handle: &SamplerHandle, index: u32) -> CardFigures {
        let tag = DeviceTag::Gpu(index);
        let latest = |m: Metric| handle.latest(tag, m);
        let value = |m: Metric| latest(m).map(|p| p.v);
        CardFigures {
            at: latest(Metric::UtilPct)
                .or_else(|| latest(Metric::MemUsedMib))
                .map(|p| p.t),
            util_pct: value(Metric::UtilPct),
            mem_used_mib: value(Metric::MemUsedMib),
            mem_total_mib: value(Metric::MemTotalMib),
            temp_c: value(Metric::TempC),
            power_w: value(Metric::PowerW),
            power_limit_w: value(Metric::PowerLimitW),
            sm_clock_mhz: value(Metric::SmClockMhz),
            sm_clock_max_mhz: value(Metric::SmClockMaxMhz),
            mem_clock_mhz: value(Metric::MemClockMhz),
            mem_clock_max_mhz: value(Metric::MemClockMaxMhz),
            fan_pct: value(Metric::FanPct),
            // The mask is stored as a number; it is a u32 bit set.
            throttle: value(Metric::ThrottleMask).map(|m| ThrottleReasons(m as u32)),
        }
    }
}

/// Draws the device view: the no-GPU sentence, or a card and history per GPU.
pub fn show(ui: &mut egui::Ui, state: &Context) {
    ui.heading("GPUs");
    if state.gpus.is_empty() {
        let why = state
            .no_gpu_reason
            .as_deref()
            .unwrap_or("the telemetry probes found none");
        ui.label(format!(
            "No GPU to show: {why}. Training runs on the CPU; the CPU and process figures are \
             in the Run panel."
        ));
        return;
    }
    let fraction = state.settings.draft.study.memory_fraction;
    let own = std::process::id();
    for (i, info) in state.gpus.iter().enumerate() {
        let index = i as u32;
        egui::Frame::group(ui.style()).show(ui, |ui| {
            ui.set_width(ui.available_width());
            header(ui, index, info);
            let Some(handle) = &state.telemetry else {
                ui.label("telemetry is off (see the status bar): no readings");
                return;
            };
            let figures = CardFigures::read(handle, index);
            if figures.at.is_none() {
                ui.label("no reading yet");
                return;
            }
            card(ui, &figures, fraction);
            processes(ui, handle.processes(DeviceTag::Gpu(index)), own);
            egui::CollapsingHeader::new(format!("gpu{index} history"))
                .id_salt(("gpu history", index))
                .default_open(true)
                .show(ui, |ui| history(ui, handle, index, fraction));
        });
    }
}

/// The card's name, memory, driver and PCI bus, each its own label (what a bug report needs).
fn header(ui: &mut egui::Ui, index: u32, info: &GpuInfo) {
    ui.horizontal_wrapped(|ui| {
        ui.strong(format!("gpu{index}"));
        ui.strong(&info.name);
        ui.separator();
        ui.label(
            info.mem_total_bytes
                .map_or("memory unknown".into(), fmt_bytes),
        );
        ui.separator();
        ui.label(info.driver.as_deref().unwrap_or("driver unknown"));
        ui.separator();
        ui.label(
            info.pci_bus_id
                .map_or("PCI bus unknown".into(), |b| b.to_string()),
        );
    });
}

/// A bar filled to `fraction` labelled `text`; for a `limit` (memory, power) amber above 90 %,
/// otherwise (utilisation, clocks: the higher the better) always green.
fn bar(ui: &mut egui::Ui, fraction: Option<f64>, text: String, limit: bool) -> egui::Response {
    let f = fraction.unwrap_or(0.0).clamp(0.0, 1.0);
    let color = if limit && f > 0.9 { NEAR } else { FINE };
    ui.add(
        egui::ProgressBar::new(f as f32)
            .desired_width(ui.available_width().min(520.0))
            .fill(color)
            .text(text),
    )
}

fn ratio(value: Option<f64>, max: Option<f64>) -> Option<f64> {
    match (value, max) {
        (Some(v), Some(m)) if m > 0.0 => Some(v / m),
        _ => None,
    }
}

/// `245 W of 320 W limit`; `245 W, limit not reported` when the card does not say its `max`.
fn of(value: Option<f64>, max: Option<f64>, unit: &str, max_name: &str) -> String {
    match (value, max) {
        (Some(v), Some(m)) => format!("{v:.0} {unit} of {m:.0} {unit} {max_name}"),
        (Some(v), None) => format!("{v:.0} {unit}, {max_name} not reported"),
        (None, _) => "not reported".into(),
    }
}

/// The figures of one card as bars, and the throttle reasons.
fn card(ui: &mut egui::Ui, f: &CardFigures, fraction: f64) {
    let bytes = |mib: f64| fmt_bytes((mib * MIB) as u64);
    egui::Grid::new(ui.next_auto_id())
        .num_columns(2)
        .show(ui, |ui| {
            ui.label("utilisation");
            bar(
                ui,
                f.util_pct.map(|u| u / 100.0),
                f.util_pct
                    .map_or("not reported".into(), |u| format!("{u:.0} %")),
                false,
            );
            ui.end_row();

            ui.label("memory");
            let budget = f.mem_total_mib.map(|t| t * fraction);
            let text = match (f.mem_used_mib, f.mem_total_mib) {
                (Some(u), Some(t)) => format!(
                    "{} of {} (budget {}, {:.0} %)",
                    bytes(u),
                    bytes(t),
                    bytes(t * fraction),
                    100.0 * fraction
                ),
                (Some(u), None) => bytes(u),
                _ => "not reported".into(),
            };
            let over = matches!((f.mem_used_mib, budget), (Some(u), Some(b)) if u > b);
            let r = bar(ui, ratio(f.mem_used_mib, f.mem_total_mib), text, true);
            // The budget line: where the app stops sizing runs on this card.
            if budget.is_some() {
                let x = r.rect.left() + r.rect.width() * fraction.clamp(0.0, 1.0) as f32;
                let color = if over {
                    widgets::WARN
                } else {
                    ui.visuals().text_color()
                };
                ui.painter()
                    .vline(x, r.rect.y_range(), egui::Stroke::new(2.0, color));
            }
            r.on_hover_text(
                "the line marks the study's memory budget (Configure: memory_fraction)",
            );
            ui.end_row();

            ui.label("temperature");
            ui.label(
                f.temp_c
                    .map_or("not reported".into(), |t| format!("{t:.0} °C")),
            );
            ui.end_row();

            ui.label("power");
            bar(
                ui,
                ratio(f.power_w, f.power_limit_w),
                of(f.power_w, f.power_limit_w, "W", "limit"),
                true,
            );
            ui.end_row();

            ui.label("SM clock");
            bar(
                ui,
                ratio(f.sm_clock_mhz, f.sm_clock_max_mhz),
                of(f.sm_clock_mhz, f.sm_clock_max_mhz, "MHz", "max"),
                false,
            );
            ui.end_row();

            ui.label("memory clock");
            bar(
                ui,
                ratio(f.mem_clock_mhz, f.mem_clock_max_mhz),
                of(f.mem_clock_mhz, f.mem_clock_max_mhz, "MHz", "max"),
                false,
            );
            ui.end_row();

            if let Some(fan) = f.fan_pct {
                ui.label("fan");
                ui.label(format!("{fan:.0} %"));
                ui.end_row();
            }

            ui.label("throttle");
            throttle(ui, f.throttle);
            ui.end_row();
        });
}

/// The throttle reasons in words; red when heat or power holds the clocks down.
fn throttle(ui: &mut egui::Ui, t: Option<ThrottleReasons>) {
    match t {
        None => {
            ui.label("not reported by this card");
        }
        Some(t) if t.names().is_empty() => {
            ui.label("none: clocks are not held down");
        }
        Some(t) => {
            let text = format!("held down by {}", t.names().join(", "));
            if t.is_thermal() || t.is_power() {
                ui.colored_label(widgets::WARN, text);
            } else {
                ui.label(text);
            }
        }
    }
}

/// The processes using the card, most memory first; this app's own marked.
fn processes(ui: &mut egui::Ui, listed: Option<DeviceProcesses>, own: u32) {
    let Some(listed) = listed else {
        ui.label("processes: not reported by this card's driver");
        return;
    };
    let n = listed.list.len();
    ui.label(format!(
        "{n} process{} using this card (listed {})",
        if n == 1 { "" } else { "es" },
        clock_time(listed.at.timestamp_millis() as f64 / 1000.0)
    ));
    if n == 0 {
        return;
    }
    // What the study's trials cannot have: the memory other processes hold on the card.
    let others: Vec<_> = listed.list.iter().filter(|p| p.pid != own).collect();
    let held: u64 = others.iter().filter_map(|p| p.used_bytes).sum();
    if held > 0 {
        ui.label(format!(
            "{} other process{} hold{} {} of this card's memory",
            others.len(),
            if others.len() == 1 { "" } else { "es" },
            if others.len() == 1 { "s" } else { "" },
            fmt_bytes(held)
        ));
    }
    egui::Grid::new(ui.next_auto_id())
        .striped(true)
        .show(ui, |ui| {
            for h in ["PID", "process", "kind", "GPU memory"] {
                ui.strong(h);
            }
            ui.end_row();
            for p in &listed.list {
                ui.label(p.pid.to_string());
                let name = p.name.as_deref().unwrap_or("(name not readable)");
                if p.pid == own {
                    ui.label(RichText::new(format!("{name} (this app)")).strong());
                } else {
                    ui.label(name);
                }
                ui.label(p.kind.to_string());
                ui.label(p.used_bytes.map_or("unknown".into(), fmt_bytes));
                ui.end_row();
            }
        });
}

/// The card's history: one chart per figure, all on the telemetry group's linked clock axis.
fn history(ui: &mut egui::Ui, handle: &SamplerHandle, index: u32, fraction: f64) {
    let tag = DeviceTag::Gpu(index);
    let width = ui.available_width().max(100.0) as usize;
    let series = |m: Metric| handle.series(tag, m, width);
    let scaled = |points: &[PlotPoint], k: f64| -> Vec<PlotPoint> {
        points
            .iter()
            .map(|p| PlotPoint { t: p.t, v: p.v * k })
            .collect()
    };
    let total = series(Metric::MemTotalMib);
    let budget = scaled(&total, fraction);
    chart(
        ui,
        &format!("gpu{index} utilisation %"),
        "telemetry",
        &[
            ("GPU", &series(Metric::UtilPct)),
            ("memory bus", &series(Metric::MemUtilPct)),
        ],
    );
    chart(
        ui,
        &format!("gpu{index} memory MiB"),
        "telemetry",
        &[
            ("used", &series(Metric::MemUsedMib)),
            (&format!("budget ({:.0} %)", 100.0 * fraction), &budget),
            ("total", &total),
        ],
    );
    chart(
        ui,
        &format!("gpu{index} power W"),
        "telemetry",
        &[
            ("power", &series(Metric::PowerW)),
            ("limit", &series(Metric::PowerLimitW)),
        ],
    );
    chart(
        ui,
        &format!("gpu{index} temperature °C"),
        "telemetry",
        &[("temperature", &series(Metric::TempC))],
    );
    chart(
        ui,
        &format!("gpu{index} clocks MHz"),
        "telemetry",
        &[
            ("SM", &series(Metric::SmClockMhz)),
            ("SM max", &series(Metric::SmClockMaxMhz)),
            ("memory", &series(Metric::MemClockMhz)),
        ],
    );
}
