//! The notes of the selected studies and of the open trial, in the study system attributes
//! optuna-dashboard uses (`tradetune_study::notes`): a note written in either tool shows in
//! the other. Shown as text with an "Edit" button; saving writes to the database at once,
//! on a background job (a PostgreSQL server that is slow or restarting, or a SQLite file a
//! study holds locked, would freeze the window), keeps the edit until it answers, and refuses
//! an edit that started before someone else's save.

use std::sync::atomic::{AtomicU64, Ordering};

use tradetune_engine::study::notes::note_from_attrs;

use super::{Action, StudiesView};
use crate::ui::context::{Command, Context};
use crate::ui::panels::widgets;
use crate::ui::tasks::NoteSaved;

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
    /// The serial of the edit's save under way (its job has not answered yet), None when
    /// none is. Only that save's answer ends the edit: an answer to a save asked before the
    /// database was opened again is not this view's (see [`saved`]).
    pub saving: Option<u64>,
}

/// The serial of the next note save (unique in the process: a view opened again starts its
/// notes over, and must not take an earlier save's answer for its own).
static NEXT_SAVE: AtomicU64 = AtomicU64::new(1);

/// [`Action::SaveNote`]: saves the note being edited on a background job; the edit stays, and
/// cannot be saved again, until it answers (see [`saved`]).
pub(super) fn save(view: &mut StudiesView, cx: &Context) {
    let (Some(edit), Some(db)) = (&view.notes.edit, &view.db) else {
        return;
    };
    if view.notes.saving.is_some() {
        return;
    }
    let serial = NEXT_SAVE.fetch_add(1, Ordering::Relaxed);
    view.notes.saving = Some(serial);
    view.notes.error = None;
    cx.jobs.save_note(
        serial,
        db.path.clone(),
        edit.study.clone(),
        edit.trial.map(|t| t.1),
        edit.text.clone(),
        edit.version,
    );
}

/// A note's save answered. The answer to the save this view waits for (its serial, so this
/// database as opened now, and the edit it started from) replaces the listed study with the one
/// read back and ends the edit; where it failed, the edit stays with why. Any other answer is
/// to a save asked before the database was opened again (the view and its edit started over
/// since): it touches neither the list nor a newer edit, and is told as a notice, so a note
/// that was not saved is not thought saved.
pub fn saved(view: &mut StudiesView, saved: NoteSaved, out: &mut Vec<Command>) {
    let whose = match saved.trial {
        None => format!("note of {}", saved.study),
        Some(n) => format!("note of trial {n} of {}", saved.study),
    };
    let ours = view.notes.saving == Some(saved.serial);
    if ours {
        view.notes.saving = None;
    }
    let Some(db) = view.db.as_mut().filter(|db| ours && db.path == saved.db) else {
        out.push(Command::Notice(match saved.result {
            Ok(_) => format!("{whose} saved in {}", crate::launch::db_label(&saved.db)),
            Err(e) => format!("warning: {whose}: {e}"),
        }));
        return;
    };
    match saved.result {
        Ok(record) => {
            if let Some(s) = db.studies.iter_mut().find(|s| s.study.name == saved.study) {
                s.study = record;
            }
            view.notes.edit = None;
            view.notes.error = None;
        }
        Err(e) => view.notes.error = Some(e),
    }
}

/// The notes of every study of the selected group.
pub(super) fn study_notes(ui: &mut egui::Ui, view: &mut StudiesView, out: &mut Vec<Action>) {
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
                note(ui, view, study, None, out);
            }
        });
}

/// The note of the trial in row `i`.
pub(super) fn trial_note(
    ui: &mut egui::Ui,
    view: &mut StudiesView,
    i: usize,
    out: &mut Vec<Action>,
) {
    let Some(row) = view.table.rows.get(i) else {
        return;
    };
    let (study, trial) = (row.study.clone(), (row.trial_id, row.number));
    note(ui, view, &study, Some(trial), out);
}

fn note(
    ui: &mut egui::Ui,
    view: &mut StudiesView,
    study: &str,
    trial: Option<(i64, i64)>,
    out: &mut Vec<Action>,
) {
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
    let editing = view
        .notes
        .edit
        .as_mut()
        .filter(|e| e.study == study && e.trial == trial);
    let Some(edit) = editing else {
        ui.horizontal(|ui| {
            ui.strong(&title);
            // One save at a time: no other note is edited until it answers.
            let can = view.notes.saving.is_none();
            if ui
                .add_enabled(can, egui::Button::new(format!("Edit {title}")))
                .clicked()
            {
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
    let saving = view.notes.saving.is_some();
    ui.add_enabled(
        !saving,
        egui::TextEdit::multiline(&mut edit.text)
            .desired_rows(4)
            .desired_width(f32::INFINITY),
    )
    .labelled_by(l.id);
    let (mut save, mut cancel) = (false, false);
    ui.horizontal(|ui| {
        save = ui
            .add_enabled(!saving, egui::Button::new("Save note"))
            .clicked();
        cancel = ui
            .add_enabled(!saving, egui::Button::new("Cancel"))
            .clicked();
        if saving {
            ui.spinner();
            ui.label("saving the note…");
        }
    });
    if cancel {
        view.notes.edit = None;
        view.notes.error = None;
    } else if save {
        out.push(Action::SaveNote);
    }
    if let Some(e) = &view.notes.error {
        ui.colored_label(widgets::WARN, e.as_str());
    }
}
