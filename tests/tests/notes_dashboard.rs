//! Notes shared with optuna-dashboard (issue 17 item 5): a study note and a trial note written
//! by TradeTune (`tradetune_study::notes`) read back through optuna-dashboard's own
//! `get_note`, and notes saved with its `save_note` read by TradeTune — long ones in several
//! pieces, multi-byte characters, a shorter note over a longer one, versions counting up
//! across both tools.
//!
//! Needs `python3` with `optuna` and `optuna-dashboard`; skips loudly without them unless
//! `TRADETUNE_REQUIRE_OPTUNA=1` (`.ci/run` installs both).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tradetune_engine::storage::{NewTrial, Storage, StudyDirection, TrialState};
use tradetune_engine::study::notes::{NoteError, read_note, save_note};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/dashboard_notes.py")
}

fn dashboard_available(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import optuna, optuna_dashboard"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        return true;
    }
    let required = std::env::var("TRADETUNE_REQUIRE_OPTUNA").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: python3 with optuna and optuna-dashboard is required \
         (TRADETUNE_REQUIRE_OPTUNA=1) but not available; run `python3 -m pip install optuna \
         optuna-dashboard`"
    );
    eprintln!(
        "\n######## SKIPPED {test}: python3 cannot import optuna and optuna_dashboard. ########\n\
         ######## Install them (`python3 -m pip install optuna optuna-dashboard`). ########\n"
    );
    false
}

fn python(args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "dashboard_notes.py {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn notes_written_in_either_tool_show_in_the_other() {
    if !dashboard_available("notes_written_in_either_tool_show_in_the_other") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    let db_s = db.to_str().unwrap();
    let mut storage = Storage::open(&db).unwrap();
    let study = storage
        .create_study("noted", &[StudyDirection::Minimize])
        .unwrap();
    for v in [3.0, 1.0] {
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![v]);
        storage.add_trial(study, &t).unwrap();
    }

    // TradeTune writes; optuna-dashboard reads.
    let study_note = "# Baseline\n\nWritten by **TradeTune** — ✓ ünïcode";
    let long: String = (0..4500).map(|i| ['a', 'é', '€', '\n'][i % 4]).collect();
    save_note(&mut storage, "noted", None, study_note, None).unwrap();
    save_note(&mut storage, "noted", Some(1), &long, None).unwrap();
    let seen: Value = serde_json::from_str(&python(&["read", db_s, "noted", "1"])).unwrap();
    assert_eq!(seen["study"]["body"], study_note);
    assert_eq!(seen["study"]["version"], 1);
    assert_eq!(seen["trial"]["body"].as_str(), Some(long.as_str()));
    assert_eq!(seen["trial"]["version"], 1);

    // optuna-dashboard writes (a shorter trial note over the long one); TradeTune reads.
    let (sf, tf) = (dir.path().join("study.md"), dir.path().join("trial.md"));
    std::fs::write(&sf, "from the dashboard").unwrap();
    std::fs::write(&tf, "short — dashboard").unwrap();
    python(&[
        "write",
        db_s,
        "noted",
        "1",
        sf.to_str().unwrap(),
        tf.to_str().unwrap(),
    ]);
    let s = read_note(&storage, "noted", None).unwrap();
    assert_eq!((s.version, s.body.as_str()), (2, "from the dashboard"));
    let t = read_note(&storage, "noted", Some(1)).unwrap();
    assert_eq!((t.version, t.body.as_str()), (2, "short — dashboard"));
    assert_eq!(read_note(&storage, "noted", Some(0)).unwrap().version, 0);

    // An edit started before the dashboard's save is refused; one from the new version saves.
    assert!(matches!(
        save_note(&mut storage, "noted", Some(1), "stale", Some(1)),
        Err(NoteError::Conflict { stored: 2, .. })
    ));
    save_note(&mut storage, "noted", Some(1), "after both", Some(2)).unwrap();
    let seen: Value = serde_json::from_str(&python(&["read", db_s, "noted", "1"])).unwrap();
    assert_eq!(seen["trial"]["body"], "after both");
    assert_eq!(seen["trial"]["version"], 3);
}
