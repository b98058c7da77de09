//! `tradetune study note` run as the real binary (issue 17 item 5): set and read a study's
//! and a trial's note, JSON with the version, and clear errors. (Sharing with optuna-dashboard
//! itself: tests/tests/notes_dashboard.rs.)

use crate::common;

use common::{scratch, text, tradetune};
use tradetune_engine::storage::{NewTrial, Storage, StudyDirection, TrialState};
use tradetune_engine::study::notes::read_note;

#[test]
fn notes_are_set_and_read_from_the_command_line() {
    let dir = scratch("cli_study_note", "notes");
    let db = dir.join("studies.db");
    {
        let mut s = Storage::open(&db).unwrap();
        let study = s
            .create_study("noted", &[StudyDirection::Minimize])
            .unwrap();
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![1.0]);
        s.add_trial(study, &t).unwrap();
    }
    let db_s = db.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["study", "note", "noted", "--db", db_s];
        all.extend_from_slice(args);
        tradetune(&all)
    };
    let o = run(&[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("no note on study 'noted'"));

    let o = run(&["--set", "# Study\nfirst"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("saved the note of study 'noted' (version 1)"));
    let file = dir.join("trial.md");
    std::fs::write(&file, "trial *zero*").unwrap();
    let o = run(&["--trial", "0", "--file", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("saved the note of trial 0 of 'noted' (version 1)"));

    let o = run(&[]);
    assert_eq!(text(&o.stdout), "# Study\nfirst\n");
    let o = run(&["--trial", "0", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["version"].as_i64(), v["body"].as_str()),
        (Some(1), Some("trial *zero*"))
    );
    let s = Storage::open_read_only(&db).unwrap();
    assert_eq!(read_note(&s, "noted", None).unwrap().body, "# Study\nfirst");

    let o = run(&["--trial", "5"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("study `noted` has no trial number 5"),
        "{}",
        text(&o.stderr)
    );
    let o = tradetune(&["study", "note", "nope", "--db", db_s]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("no study named `nope`"));
}
