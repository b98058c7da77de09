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
    h.get_by_label("Save note").click();
    h.run_steps(3);
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
    h.get_by_label("Save note").click();
    h.run_steps(3);
    let n = read_note(&storage, "noted", Some(1)).unwrap();
    assert_eq!((n.version, n.body.as_str()), (1, "the best one"));
    assert_eq!(read_note(&storage, "noted", Some(0)).unwrap().version, 0);

    // Another tool saves while the study's note is being edited: the edit is refused.
    h.get_by_label("Edit note of noted").click();
    h.run_steps(3);
    save_note(&mut storage, "noted", None, "from the dashboard", None).unwrap();
    retype(&mut h, "note of noted", "mine");
    h.get_by_label("Save note").click();
    h.run_steps(3);
    h.get_by_label_contains("note not saved: the note was changed meanwhile");
    assert_eq!(
        read_note(&storage, "noted", None).unwrap().body,
        "from the dashboard"
    );
}
