//! The study's devices in Configure: the list (repeats allowed), the workers the engine binds
//! to each, and "add device" among those this build can use here.

use tradetune_engine::device::{DeviceInfo, DeviceSpec};
use tradetune_engine::study::file::StudySection;
use tradetune_engine::study::runner::{DeviceSlot, assign, label_slots};

use super::Action;

/// The study's devices, one line each with the workers bound to it (the engine's own
/// assignment), and "add device" among those this build can use here; a device may be listed
/// more than once (`cpu`, `cpu` gives two CPU slots, `cpu` and `cpu#1`). Its problems are
/// shown under it by the field table.
pub fn editor(
    ui: &mut egui::Ui,
    study: &StudySection,
    devices: &[DeviceInfo],
    new_device: &mut String,
    commands: &mut Vec<Action>,
) {
    // Which worker runs where, as the runner will bind them (None when a name does not parse;
    // the engine's check flags it below).
    let slots: Option<Vec<DeviceSlot>> = study
        .devices
        .iter()
        .map(|name| {
            let spec = name.parse::<DeviceSpec>().ok()?;
            let memory = devices
                .iter()
                .find(|d| d.name.parse::<DeviceSpec>().is_ok_and(|s| s == spec))
                .and_then(|d| d.memory_bytes);
            Some(DeviceSlot::new(spec, memory))
        })
        .collect();
    let binding = slots.map(|mut slots| {
        label_slots(&mut slots);
        let workers = assign(study.workers, &slots, study.assignment);
        slots
            .into_iter()
            .enumerate()
            .map(|(i, slot)| {
                let on: Vec<String> = workers
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| **d == i)
                    .map(|(w, _)| w.to_string())
                    .collect();
                (slot.label, on)
            })
            .collect::<Vec<_>>()
    });
    ui.label("devices (each worker is bound to one)");
    egui::Grid::new("study_devices").show(ui, |ui| {
        for (i, name) in study.devices.iter().enumerate() {
            let (label, workers) = binding
                .as_ref()
                .and_then(|b| b.get(i).cloned())
                .unwrap_or_else(|| (name.clone(), Vec::new()));
            ui.monospace(label);
            ui.label(match workers.len() {
                0 => "no worker".to_owned(),
                1 => format!("worker {}", workers[0]),
                _ => format!("workers {}", workers.join(", ")),
            });
            if ui
                .small_button(format!("remove device {}", i + 1))
                .clicked()
            {
                commands.push(Action::RemoveDevice(i));
            }
            ui.end_row();
        }
    });
    ui.horizontal(|ui| {
        let l = ui.label("add device");
        egui::ComboBox::from_id_salt("add_device")
            .selected_text(new_device.clone())
            .show_ui(ui, |ui| {
                for d in devices.iter().filter(|d| d.available) {
                    ui.selectable_value(new_device, d.name.clone(), &d.name);
                }
            })
            .response
            .labelled_by(l.id);
        if ui.button("Add device").clicked() {
            commands.push(Action::AddDevice(new_device.clone()));
        }
    });
}
