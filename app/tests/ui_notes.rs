//! The Studies panel's notes (issue 17 item 5), driven through egui_kittest: a study note
//! written elsewhere (as optuna-dashboard stores it) shows, the study's and a trial's notes are
//! edited and saved to the database, and an edit overtaken by another tool's save is refused.

use crate::common::ui::{self, step_until};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::panels::studies::Action as StudyAction;
use tradetune_engine::storage::{NewTrial, Storage, StudyDirection, TrialState};
use tradetune_engine::study::notes::{read_note, save_note};

/// Replaces the text of the text field named `label`: click, select all, type.
fn retype(h: &mut Harness<'_, TradeTuneApp>, label: &str, text: &str) {
    h.get_by_role_and_label(Role::MultilineTextInput, label)
        .click();
    h.run_steps(2);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.run_steps(1);
    h.get_by_role_and_label(Role::MultilineTextInput, label)
        .type_text(text);
    h.run_steps(3);
}

/// Clicks "Save note" and steps frames until its job has answered (the note saved, or why
/// not).
fn save(h: &mut Harness<'_, TradeTuneApp>) {
    h.get_by_label("Save note").click();
    step_until(h, "the note's save", |a| {
        let notes = &a.panels.studies.notes;
        notes.saving.is_none() && (notes.edit.is_none() || notes.error.is_some())
    });
}

#[test]
fn study_and_trial_notes_show_edit_and_save() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut storage = Storage::open(&db).unwrap();
    let study = storage
        .create_study("noted", &[StudyDirection::Minimize])
        .unwrap();
    for v in [2.0, 1.0] {
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![v]);
        storage.add_trial(study, &t).unwrap();
    }
    save_note(&mut storage, "noted", None, "written elsewhere", None).unwrap();

    let mut h = ui::studies(&db, [1400.0, 1100.0]);
    h.run_steps(4);
    h.get_by_label("Open database…").click();
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h.get_by_label("noted").click();
    step_until(&mut h, "the trials", |a| {
        a.panels.studies.table.rows.len() == 2
    });
    h.get_by_label("written elsewhere");

    // The study's note, edited and saved.
    h.get_by_label("Edit note of noted").click();
    h.run_steps(3);
    retype(&mut h, "note of noted", "baseline run: lr too high");
    save(&mut h);
    let n = read_note(&storage, "noted", None).unwrap();
    assert_eq!(
        (n.version, n.body.as_str()),
        (2, "baseline run: lr too high")
    );
    h.get_by_label("baseline run: lr too high");

    // Trial 1's note, from its details.
    let i = h
        .state()
        .panels
        .studies
        .table
        .rows
        .iter()
        .position(|r| r.number == 1)
        .unwrap();
    h.state_mut().handle(StudyAction::ShowTrial(i));
    h.run_steps(3);
    h.get_by_label("no note of trial 1");
    h.get_by_label("Edit note of trial 1").click();
    h.run_steps(3);
    retype(&mut h, "note of trial 1", "the best one");
    save(&mut h);
    let n = read_note(&storage, "noted", Some(1)).unwrap();
    assert_eq!((n.version, n.body.as_str()), (1, "the best one"));
    assert_eq!(read_note(&storage, "noted", Some(0)).unwrap().version, 0);

    // Another tool saves while the study's note is being edited: the edit is refused.
    h.get_by_label("Edit note of noted").click();
    h.run_steps(3);
    save_note(&mut storage, "noted", None, "from the dashboard", None).unwrap();
    retype(&mut h, "note of noted", "mine");
    save(&mut h);
    h.get_by_label_contains("note not saved: the note was changed meanwhile");
    assert_eq!(
        read_note(&storage, "noted", None).unwrap().body,
        "from the dashboard"
    );
}

/// The notes' database with a study "noted" of two trials, and the app showing it in Studies
/// with its note being edited to `text` (not saved yet).
fn editing(db: &std::path::Path, text: &str) -> Harness<'static, TradeTuneApp> {
    let mut storage = Storage::open(db).unwrap();
    let study = storage
        .create_study("noted", &[StudyDirection::Minimize])
        .unwrap();
    for v in [2.0, 1.0] {
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![v]);
        storage.add_trial(study, &t).unwrap();
    }
    drop(storage);
    let mut h = ui::studies(db, [1400.0, 1100.0]);
    h.run_steps(4);
    h.get_by_label("Open database…").click();
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h.get_by_label("noted").click();
    step_until(&mut h, "the trials", |a| {
        a.panels.studies.table.rows.len() == 2
    });
    // No note yet: the notes are folded.
    h.get_by_label("Notes (shared with optuna-dashboard)")
        .click();
    h.run_steps(3);
    h.get_by_label("Edit note of noted").click();
    h.run_steps(3);
    retype(&mut h, "note of noted", text);
    h
}

/// "Save note" writes on a background job, not on the UI thread (a slow or restarting
/// PostgreSQL server would freeze the window): until the job answers nothing is written, the
/// edit stays on screen and cannot be saved twice; then the note is stored and shown.
#[test]
fn a_note_is_saved_off_the_ui_thread_and_the_edit_stays_until_then() {
    use egui_kittest::kittest::NodeT;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut h = editing(&db, "saved by a job");
    h.state_mut().hold_jobs();
    h.get_by_label("Save note").click();
    h.run_steps(4);
    let storage = Storage::open_read_only(&db).unwrap();
    assert_eq!(
        read_note(&storage, "noted", None).unwrap().version,
        0,
        "the note was written on the UI thread"
    );
    assert!(h.state().panels.studies.notes.edit.is_some());
    assert!(
        h.get_by_label("Save note").accesskit_node().is_disabled(),
        "a second save could start while the first is under way"
    );
    h.get_by_label_contains("saving the note");
    assert!(h.state_mut().release_jobs() >= 1);
    step_until(&mut h, "the note's save", |a| {
        a.panels.studies.notes.edit.is_none() || a.panels.studies.notes.error.is_some()
    });
    assert_eq!(h.state().panels.studies.notes.error, None);
    let n = read_note(&storage, "noted", None).unwrap();
    assert_eq!((n.version, n.body.as_str()), (1, "saved by a job"));
    h.get_by_label("saved by a job");
}

/// A SQLite file moved away after it was opened: the save is refused naming the file, as
/// `tradetune study note` refuses it, and no empty database is made at the old path.
#[test]
fn a_note_is_not_saved_into_a_database_file_since_moved() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut h = editing(&db, "lost?");
    std::fs::rename(&db, dir.path().join("moved.db")).unwrap();
    h.get_by_label("Save note").click();
    step_until(&mut h, "the note's save", |a| {
        a.panels.studies.notes.error.is_some() || a.panels.studies.notes.edit.is_none()
    });
    let error = h
        .state()
        .panels
        .studies
        .notes
        .error
        .clone()
        .unwrap_or_default();
    assert!(
        error.contains("no such study database") && error.contains("studies.db"),
        "{error}"
    );
    assert!(
        !db.exists(),
        "an empty database was made at {}",
        db.display()
    );
    // The edit is still there to save elsewhere or copy.
    assert!(h.state().panels.studies.notes.edit.is_some());
    h.get_by_label_contains("no such study database");
}

/// Whether a notice containing `text` was posted.
fn noticed(a: &TradeTuneApp, text: &str) -> bool {
    a.cx.notices.iter().any(|n| n.contains(text))
}

/// A save answers only for the view it was asked in: the same database opened again while the
/// save is under way ("Open database…" once more, "Show in Studies"), and the note edited anew,
/// the first save's answer neither ends nor throws away the new edit; it is told as a notice.
/// The new edit, started from the note as read before the first save, is then refused with
/// why, not lost.
#[test]
fn a_save_answered_after_the_database_opened_again_leaves_the_new_edit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut h = editing(&db, "first");
    h.state_mut().hold_jobs();
    h.get_by_label("Save note").click();
    h.run_steps(3);
    assert!(h.state().panels.studies.notes.saving.is_some());

    // Opened again while the note's job is held; the study selected and its note edited.
    h.state_mut().handle(StudyAction::OpenDatabase(db.clone()));
    assert_eq!(h.state_mut().release_jobs_except("note"), 1);
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h.get_by_label("noted").click();
    h.run_steps(2);
    assert_eq!(h.state_mut().release_jobs_except("note"), 1);
    step_until(&mut h, "the trials", |a| {
        a.panels.studies.table.rows.len() == 2
    });
    if h.query_by_label("Edit note of noted").is_none() {
        h.get_by_label("Notes (shared with optuna-dashboard)")
            .click();
        h.run_steps(3);
    }
    h.get_by_label("Edit note of noted").click();
    h.run_steps(3);
    retype(&mut h, "note of noted", "second");

    // The first save answers now.
    assert_eq!(h.state_mut().release_jobs(), 1);
    step_until(&mut h, "the first save's answer", |a| {
        a.panels.studies.notes.edit.is_none() || noticed(a, "note of noted saved")
    });
    let notes = &h.state().panels.studies.notes;
    assert_eq!(
        notes.edit.as_ref().map(|e| e.text.as_str()),
        Some("second"),
        "the new edit was ended by the first save's answer"
    );
    assert_eq!((notes.saving, notes.error.as_deref()), (None, None));
    let storage = Storage::open_read_only(&db).unwrap();
    assert_eq!(read_note(&storage, "noted", None).unwrap().body, "first");

    // The new edit started from version 0, read before the first save: refused, with why,
    // and kept.
    save(&mut h);
    h.get_by_label_contains("note not saved: the note was changed meanwhile");
    let notes = &h.state().panels.studies.notes;
    assert_eq!(notes.edit.as_ref().map(|e| e.text.as_str()), Some("second"));
    assert_eq!(read_note(&storage, "noted", None).unwrap().body, "first");
}

/// Another database opened while a save is under way drops the edit from the view; where that
/// save then fails, a warning says so (the user would otherwise think the note saved).
#[test]
fn a_note_not_saved_after_another_database_opened_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let mut h = editing(&db, "lost?");
    let moved = dir.path().join("moved.db");
    std::fs::rename(&db, &moved).unwrap();
    h.state_mut().hold_jobs();
    h.get_by_label("Save note").click();
    h.run_steps(3);
    h.state_mut()
        .handle(StudyAction::OpenDatabase(moved.clone()));
    assert_eq!(h.state_mut().release_jobs_except("note"), 1);
    step_until(&mut h, "the other database", |a| {
        a.panels.studies.db.is_some()
    });
    assert_eq!(h.state_mut().release_jobs(), 1);
    step_until(&mut h, "the warning", |a| noticed(a, "note of noted"));
    let notice = h
        .state()
        .cx
        .notices
        .iter()
        .find(|n| n.contains("note of noted"))
        .cloned()
        .unwrap_or_default();
    assert!(
        notice.starts_with("warning:") && notice.contains("no such study database"),
        "{notice}"
    );
    assert!(
        !db.exists(),
        "an empty database was made at {}",
        db.display()
    );
}
