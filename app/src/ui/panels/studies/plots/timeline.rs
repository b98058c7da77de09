//! The study's workers across machines: a table of hosts (their workers, devices and trials)
//! and the timeline of trials per worker, so a second machine idling is as visible as a
//! second GPU idling. Workers are the label each trial stores (`host#pid/worker-N` for
//! `tradetune worker` and `study run`; `worker-N` from the app).

use std::collections::BTreeMap;

use egui::Color32;
use egui_plot::{Line, Plot, PlotPoints};
use tradetune_engine::storage::TrialState;

use super::index_label;
use crate::ui::panels::studies::StudiesView;
use crate::ui::tasks::TrialRow;

/// The host part of a worker label: before the `/` (and without the process id), or "this
/// machine" for labels without one.
pub fn host_of(worker: &str) -> &str {
    match worker.split_once('/') {
        Some((host, _)) => host.split_once('#').map_or(host, |(h, _)| h),
        None => "this machine",
    }
}

/// One host's row: its workers, devices, and trials by state.
#[derive(Debug, Default, PartialEq)]
pub struct HostRow {
    pub workers: Vec<String>,
    pub devices: Vec<String>,
    pub trials: usize,
    pub running: usize,
    pub complete: usize,
    pub failed: usize,
    /// Seconds since the Unix epoch of its last start or finish.
    pub last_s: Option<f64>,
}

/// The hosts of `rows`, by name.
pub fn hosts(rows: &[TrialRow]) -> BTreeMap<String, HostRow> {
    let mut out: BTreeMap<String, HostRow> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.worker.is_empty()) {
        let h = out.entry(host_of(&r.worker).to_owned()).or_default();
        if !h.workers.contains(&r.worker) {
            h.workers.push(r.worker.clone());
        }
        if !r.device.is_empty() && !h.devices.contains(&r.device) {
            h.devices.push(r.device.clone());
        }
        h.trials += 1;
        match r.state {
            TrialState::Running => h.running += 1,
            TrialState::Complete => h.complete += 1,
            TrialState::Fail => h.failed += 1,
            _ => {}
        }
        let last = r.ended_s.or(r.started_s);
        h.last_s = match (h.last_s, last) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    out
}

fn colour(s: TrialState) -> Color32 {
    match s {
        TrialState::Complete => Color32::from_rgb(70, 120, 210),
        TrialState::Running => Color32::from_rgb(70, 170, 90),
        TrialState::Pruned => Color32::from_rgb(220, 150, 60),
        TrialState::Fail => Color32::from_rgb(220, 80, 60),
        _ => Color32::GRAY,
    }
}

/// The hosts table and the timeline of trials per worker.
pub(super) fn timeline(ui: &mut egui::Ui, view: &StudiesView) {
    let rows = &view.table.rows;
    let hosts = hosts(rows);
    if hosts.is_empty() {
        ui.label("no trial records its worker yet");
        return;
    }
    egui::Grid::new("study_hosts").striped(true).show(ui, |ui| {
        for h in [
            "host", "workers", "devices", "trials", "running", "complete", "failed",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        for (name, h) in &hosts {
            ui.label(name);
            ui.label(h.workers.len().to_string());
            ui.label(h.devices.join(", "));
            ui.label(h.trials.to_string());
            ui.label(h.running.to_string());
            ui.label(h.complete.to_string());
            ui.label(h.failed.to_string());
            ui.end_row();
        }
    });
    // One lane per worker, hosts together; x = seconds since the first trial started.
    let mut lanes: Vec<&str> = rows
        .iter()
        .filter(|r| !r.worker.is_empty())
        .map(|r| r.worker.as_str())
        .collect();
    lanes.sort_by(|a, b| (host_of(a), *a).cmp(&(host_of(b), *b)));
    lanes.dedup();
    let Some(t0) = rows
        .iter()
        .filter_map(|r| r.started_s)
        .min_by(f64::total_cmp)
    else {
        return;
    };
    let now = rows
        .iter()
        .filter_map(|r| r.ended_s.or(r.started_s))
        .fold(t0, f64::max);
    let names: Vec<String> = lanes.iter().map(|s| (*s).to_owned()).collect();
    Plot::new("study_timeline")
        .height(40.0 + 22.0 * lanes.len() as f32)
        .x_axis_label("seconds since the first trial started")
        .y_axis_formatter(move |m, _| index_label(&names, m.value))
        .show(ui, |plot| {
            for r in rows {
                let (Some(lane), Some(start)) =
                    (lanes.iter().position(|l| *l == r.worker), r.started_s)
                else {
                    continue;
                };
                let end = r.ended_s.unwrap_or(now).max(start);
                let y = lane as f64;
                plot.line(
                    Line::new(
                        format!("#{}", r.number),
                        PlotPoints::from(vec![[start - t0, y], [end - t0, y]]),
                    )
                    .color(colour(r.state))
                    .width(8.0),
                );
            }
        });
    ui.label("blue complete · green running · orange pruned · red failed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_come_from_worker_labels() {
        assert_eq!(host_of("gpu-box#4711/worker-0"), "gpu-box");
        assert_eq!(host_of("laptop/worker-2"), "laptop");
        assert_eq!(host_of("worker-1"), "this machine");
    }
}
