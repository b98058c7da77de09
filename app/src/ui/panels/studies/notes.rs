//! The notes of the selected studies and of the open trial, in the study system attributes
//! optuna-dashboard uses (`tradetune_study::notes`): a note written in either tool shows in
//! the other. Shown as text with an "Edit" button; saving writes to the database at once
//! (a few small rows) and refuses an edit that started before someone else's save.

use tradetune_engine::storage::Storage;
use tradetune_engine::study::notes::{note_from_attrs, save_note};

use super::StudiesView;
use crate::ui::panels::widgets;

/// A note being edited: whose, the text so far and the version it started from.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteEdit {
    /// The study (a member of the selected group).
    pub study: String,
    /// The trial (storage id, number), or None for the study's note.
    pub trial: Option<(i64, i64)>,
    pub text: String,
    pub version: i64,
}

/// The notes feature's state: the note being edited and why the last save failed.
#[derive(Debug, Clone, Default)]
pub struct Notes {
    /// The note being edited, if any.
    pub edit: Option<NoteEdit>,
    /// Why the last note could not be saved.
    pub error: Option<String>,
}

/// The notes of every study of the selected group.
pub(super) fn study_notes(ui: &mut egui::Ui, view: &mut StudiesView) {
    let Some(members) = view.selected_members().map(<[String]>::to_vec) else {
        return;
    };
    // Open when there is something to read.
    let any = view.db.as_ref().is_some_and(|db| {
        db.studies
            .iter()
            .filter(|s| members.contains(&s.study.name))
            .any(|s| note_from_attrs(&s.study.system_attrs, None).is_ok_and(|n| !n.body.is_empty()))
    });
    egui::CollapsingHeader::new("Notes (shared with optuna-dashboard)")
        .default_open(any)
        .show(ui, |ui| {
            for study in &members {
                note(ui, view, study, None);
            }
        });
}

/// The note of the trial in row `i`.
pub(super) fn trial_note(ui: &mut egui::Ui, view: &mut StudiesView, i: usize) {
    let Some(row) = view.table.rows.get(i) else {
        return;
    };
    let (study, trial) = (row.study.clone(), (row.trial_id, row.number));
    note(ui, view, &study, Some(trial));
}

fn note(ui: &mut egui::Ui, view: &mut StudiesView, study: &str, trial: Option<(i64, i64)>) {
    let Some(db) = &view.db else { return };
    let Some(summary) = db.studies.iter().find(|s| s.study.name == study) else {
        return;
    };
    let title = match trial {
        None => format!("note of {study}"),
        Some((_, n)) => format!("note of trial {n}"),
    };
    let stored = match note_from_attrs(&summary.study.system_attrs, trial.map(|t| t.0)) {
        Ok(n) => n,
        Err(e) => {
            ui.colored_label(widgets::WARN, format!("{title}: {e}"));
            return;
        }
    };
    let path = db.path.clone();
    let editing = view
        .notes
        .edit
        .as_mut()
        .filter(|e| e.study == study && e.trial == trial);
    let Some(edit) = editing else {
        ui.horizontal(|ui| {
            ui.strong(&title);
            if ui.button(format!("Edit {title}")).clicked() {
                view.notes.edit = Some(NoteEdit {
                    study: study.to_owned(),
                    trial,
                    text: stored.body.clone(),
                    version: stored.version,
                });
                view.notes.error = None;
            }
        });
        if stored.body.is_empty() {
            ui.label(format!("no {title}"));
        } else {
            ui.label(&stored.body);
        }
        return;
    };
    let l = ui.strong(&title);
    ui.add(
        egui::TextEdit::multiline(&mut edit.text)
            .desired_rows(4)
            .desired_width(f32::INFINITY),
    )
    .labelled_by(l.id);
    let (mut save, mut cancel) = (false, false);
    ui.horizontal(|ui| {
        save = ui.button("Save note").clicked();
        cancel = ui.button("Cancel").clicked();
    });
    if cancel {
        view.notes.edit = None;
        view.notes.error = None;
    } else if save {
        let edit = edit.clone();
        match write(&path, &edit) {
            Ok(record) => {
                if let Some(db) = view.db.as_mut()
                    && let Some(s) = db.studies.iter_mut().find(|s| s.study.name == study)
                {
                    s.study = record;
                }
                view.notes.edit = None;
                view.notes.error = None;
            }
            Err(e) => view.notes.error = Some(e),
        }
    }
    if let Some(e) = &view.notes.error {
        ui.colored_label(widgets::WARN, e.as_str());
    }
}

/// Saves the edited note and reads the study back (its system attributes hold the notes).
fn write(
    path: &std::path::Path,
    edit: &NoteEdit,
) -> Result<tradetune_engine::storage::StudyRecord, String> {
    let mut storage = Storage::open(path).map_err(|e| e.to_string())?;
    save_note(
        &mut storage,
        &edit.study,
        edit.trial.map(|t| t.1),
        &edit.text,
        Some(edit.version),
    )
    .map_err(|e| format!("note not saved: {e}"))?;
    storage.study(&edit.study).map_err(|e| e.to_string())
}
