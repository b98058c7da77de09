//! `tradetune study speed`: a two-worker CPU study on the bundled data, then each trial's
//! achieved samples/s against its configuration measured alone, with the causes named.

use crate::common;

use common::{scratch, text, tradetune};

const STUDY: &str = r#"[study]
name = "speedy"
n_trials = 3
workers = 2
devices = ["cpu"]

[fixed]
env.n_envs = 4
ppo.n_steps = 32
ppo.batch_size = 32
ppo.n_epochs = 1
ppo.policy.net_arch.pi = [8]
ppo.policy.net_arch.vf = [8]
train.total_timesteps = 256
train.eval_every = 1

[search]
"ppo.learning_rate" = { low = 1e-4, high = 1e-2, log = true }

[sampler]
kind = "random"
seed = 3

[pruner]
kind = "none"
"#;

#[test]
fn each_trial_is_held_against_its_configuration_alone() {
    let dir = scratch("cli_study_speed", "two_workers");
    let file = dir.join("speedy.toml");
    let db = dir.join("speedy.db");
    std::fs::write(&file, STUDY).unwrap();
    let (file, db) = (file.to_str().unwrap(), db.to_str().unwrap());
    let o = tradetune(&["study", "run", file, "--db", db]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The study file's text and full path are recorded with the study, as `study create`
    // records them (the app's Re-run best trial reads them).
    let storage = tradetune_engine::storage::Storage::open_read_only(db).unwrap();
    let attrs = storage.study("speedy").unwrap().system_attrs;
    let attr = |k: &str| {
        attrs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| serde_json::Value::from(v))
    };
    assert_eq!(attr("tradetune:study_toml"), Some(STUDY.into()));
    let canonical = std::fs::canonicalize(file).unwrap();
    assert_eq!(
        attr("tradetune:study_source"),
        Some(canonical.display().to_string().into())
    );
    drop(storage);

    let o = tradetune(&["study", "speed", file, "--db", db, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let trials = v["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 3, "{v}");
    // One configuration (only the learning rate differs): all share one prediction.
    let first = trials[0]["predicted"].as_f64().unwrap();
    for t in trials {
        let achieved = t["achieved"].as_f64().unwrap();
        let predicted = t["predicted"].as_f64().unwrap();
        assert!(achieved > 0.0 && predicted > 0.0, "{t}");
        assert_eq!(predicted, first, "{t}");
        // The prediction is the median of its timed windows, each at least `updates` long.
        let alone = |k: &str| t["alone"][k].as_f64().unwrap();
        assert!(
            alone("low") <= predicted && predicted == alone("median") && predicted <= alone("high"),
            "{t}"
        );
        assert!(
            t["alone"]["updates_per_window"].as_u64().unwrap() >= v["updates"].as_u64().unwrap(),
            "{t}"
        );
        let ratio = t["ratio"].as_f64().unwrap();
        assert!((ratio - achieved / predicted).abs() < 1e-9, "{t}");
        let at_once = t["concurrent"].as_u64().unwrap();
        assert!((1..=2).contains(&at_once), "two workers: {t}");
        assert_eq!(t["device"], "cpu", "{t}");
        assert!(t["worker"].as_str().unwrap().contains("worker-"), "{t}");
        // batch_size 32 of 4 × 32 samples: the tiny-minibatch cause, with its fix.
        let causes: Vec<&str> = t["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert!(
            causes
                .iter()
                .any(|c| c.contains("batch_size 32 makes 4 minibatches")),
            "{t}"
        );
        // Every update evaluated: the share is recorded, and named when it is large.
        let share = t["eval_share"].as_f64();
        if let Some(s) = share.filter(|s| *s >= 0.25) {
            assert!(
                causes.iter().any(|c| c.contains("evaluation took")),
                "{s}: {t}"
            );
        }
    }

    // The table, and a trial that is not there.
    let o = tradetune(&[
        "study",
        "speed",
        file,
        "--db",
        db,
        "--trials",
        "1",
        "--updates",
        "1",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("alone on this machine"), "{out}");
    assert!(out.contains("tiny minibatches"), "{out}");
    let rows = out
        .lines()
        .filter(|l| l.trim_start().starts_with("1 ") && l.contains("worker-"))
        .count();
    assert_eq!(rows, 1, "{out}");
    let o = tradetune(&["study", "speed", file, "--db", db, "--trials", "7"]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("trial #7"), "{err}");

    // A cross-validated trial records its speed over its folds, and is measured likewise.
    let cv = STUDY
        .replace("name = \"speedy\"", "name = \"speedy_cv\"")
        .replace("n_trials = 3", "n_trials = 1")
        .replace(
            "[fixed]",
            "[evaluation]\nscheme = \"walk_forward\"\nn_folds = 2\n\n[fixed]",
        );
    let cv_file = dir.join("speedy_cv.toml");
    std::fs::write(&cv_file, cv).unwrap();
    let cv_file = cv_file.to_str().unwrap();
    let o = tradetune(&["study", "run", cv_file, "--db", db]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = tradetune(&["study", "speed", cv_file, "--db", db, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(v["trials"].as_array().unwrap().len(), 1, "{v}");
    assert!(v["trials"][0]["achieved"].as_f64().unwrap() > 0.0, "{v}");
}
