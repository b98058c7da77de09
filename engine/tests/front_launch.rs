//! `front::launch` as both front ends use it: a launched study records its study file with the
//! study (read back to the same study, the overrides applied), a Stop asked before its data has
//! loaded stops it before any trial starts, and a study that was only run (not created for
//! workers) cannot be joined.

use std::path::Path;

use tradetune_engine::front::FrontError;
use tradetune_engine::front::launch::{
    LaunchEvent, Liveness, RecordedStudy, StudyLaunch, StudyPlace,
};
use tradetune_engine::storage::Storage;
use tradetune_engine::study::runner::{StudyEvent, StudyReport};

const TINY: &str = r#"[study]
name = "launched"
n_trials = 1

[fixed]
env.n_envs = 2
ppo.n_steps = 32
ppo.batch_size = 32
ppo.n_epochs = 1
ppo.policy.net_arch.pi = [8]
ppo.policy.net_arch.vf = [8]
train.total_timesteps = 64
train.eval_every = 0

[search]
"ppo.learning_rate" = { low = 1e-4, high = 1e-2, log = true }

[sampler]
kind = "random"

[pruner]
kind = "none"
"#;

/// Collects a launch's events to its end: whether `Ready` came first, the study events, and
/// the result.
fn follow(
    events: std::sync::mpsc::Receiver<LaunchEvent>,
) -> (bool, Vec<StudyEvent>, Result<StudyReport, FrontError>) {
    let mut ready_first = None;
    let mut study = Vec::new();
    for e in events.iter() {
        match e {
            LaunchEvent::Ready { .. } => {
                ready_first.get_or_insert(study.is_empty());
            }
            LaunchEvent::Notice(_) | LaunchEvent::Compiling(_) => {}
            LaunchEvent::Study(e) => study.push(e),
            LaunchEvent::Finished(r) => return (ready_first == Some(true), study, r),
        }
    }
    panic!("no Finished event");
}

fn launch(dir: &Path) -> StudyLaunch {
    let file = dir.join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    let place = StudyPlace::new(dir.join("db").join("studies.db"), None).unwrap();
    let mut l = StudyLaunch::from_path(&file, place).unwrap();
    l.set(&["train.total_timesteps=96".into()]).unwrap();
    l.liveness(Liveness {
        telemetry: None,
        ..Liveness::default()
    });
    l
}

#[test]
fn a_launched_study_is_recorded_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = launch(dir.path());
    // Zero trials would run nothing: refused (every front end, the workers' too).
    let e = l.trials(0).unwrap_err();
    assert!(e.to_string().contains("at least one trial"), "{e}");
    let want = l.file().clone();
    let db = l.place().db.clone();
    // The database's own folder (its file stem) under `checkpoints` beside it.
    assert_eq!(
        l.place().checkpoints,
        dir.path().join("db").join("checkpoints").join("studies")
    );
    let (_handle, events, _thread) = l.launch();
    let (ready_first, study, result) = follow(events);
    let report = result.unwrap();
    assert!(ready_first, "Ready comes before the runner's events");
    assert_eq!(report.trials.len(), 1);
    assert!(matches!(
        study.last(),
        Some(StudyEvent::StudyFinished { .. })
    ));

    let storage = Storage::open_read_only(&db).unwrap();
    let record = RecordedStudy::of(&storage.study("launched").unwrap()).expect("recorded");
    assert_eq!(record.text, TINY);
    assert_eq!(record.overrides, ["train.total_timesteps=96"]);
    assert!(record.source.ends_with("tiny.toml"), "{}", record.source);
    assert_eq!(record.source_dir().as_deref(), Some(dir.path()));
    let back = record.study_file("launched", dir.path()).unwrap();
    assert_eq!(back.base_config, want.base_config);
    assert_eq!(back.base_config["train"]["total_timesteps"], 96);

    // Run, not created for workers: no budget to join by; the data's fingerprint is kept.
    assert!(record.fingerprint.is_some());
    let place = StudyPlace::new(db.clone(), None).unwrap();
    let e = StudyLaunch::join(&storage, "launched", dir.path(), place).unwrap_err();
    assert!(matches!(e, FrontError::NotRecorded { .. }), "{e}");

    // Run again on other market data (two of the bundled assets): refused before any trial,
    // as its trials would be compared with the first's on other bars.
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        format!("{TINY}\n[data]\nassets = [\"AAPL\", \"IBM\"]\n"),
    )
    .unwrap();
    let mut again =
        StudyLaunch::from_path(&other, StudyPlace::new(db.clone(), None).unwrap()).unwrap();
    again.liveness(Liveness {
        telemetry: None,
        ..Liveness::default()
    });
    let (_handle, events, _thread) = again.launch();
    let (_, _, result) = follow(events);
    let e = result.unwrap_err();
    assert!(matches!(e, FrontError::DataMismatch { .. }), "{e}");
    assert!(e.to_string().contains("market data differs"), "{e}");
    let id = storage.study_id("launched").unwrap();
    assert_eq!(storage.trials(id).unwrap().len(), 1);
}

/// Runs `text` (written as `file` in `dir`) as a study in `db` with `overrides`, to its end.
fn run_file(
    dir: &Path,
    db: &Path,
    file: &str,
    text: &str,
    overrides: &[&str],
) -> Result<StudyReport, FrontError> {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    let mut l = StudyLaunch::from_path(&path, StudyPlace::new(db.to_owned(), None).unwrap())?;
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    l.set(&overrides)?;
    l.liveness(Liveness {
        telemetry: None,
        ..Liveness::default()
    });
    let (_handle, events, _thread) = l.launch();
    follow(events).2
}

/// A study run again from a file that changes what its trials' values mean (the objective,
/// the evaluation, a fixed setting, an override) is refused before any trial, naming what
/// changed; one that searches further, or elsewhere, adds its trials. A study another program
/// made is recorded with this run's file and data, and is held to them from then on.
#[test]
fn a_study_run_again_with_settings_that_change_its_values_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    run_file(dir.path(), &db, "a.toml", TINY, &[]).unwrap();
    let storage = Storage::open_read_only(&db).unwrap();
    let id = storage.study_id("launched").unwrap();
    let trials = |n: usize| assert_eq!(storage.trials(id).unwrap().len(), n);
    trials(1);

    let objective = TINY.replace("n_trials = 1", "n_trials = 1\nobjective = \"total_return\"");
    let e = run_file(dir.path(), &db, "b.toml", &objective, &[]).unwrap_err();
    assert!(matches!(e, FrontError::StudyChanged { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("study.objective: \"sharpe_excess\" recorded, \"total_return\" here"),
        "{text}"
    );
    assert!(text.contains("b.toml: study 'launched'"), "{text}");
    assert!(text.contains("another study name"), "{text}");
    trials(1);

    let cpcv = format!("{TINY}\n[evaluation]\nscheme = \"cpcv\"\nn_groups = 4\nk_test = 1\n");
    let text = run_file(dir.path(), &db, "c.toml", &cpcv, &[])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("evaluation.scheme: \"holdout\" recorded, \"cpcv\" here"),
        "{text}"
    );
    assert!(
        text.contains("evaluation.n_groups: unset recorded, 4 here"),
        "{text}"
    );
    // A fixed setting changed by an override, and another by the file.
    let fees = TINY.replace("env.n_envs = 2", "env.n_envs = 2\nenv.buy_fee = 0.01");
    let text = run_file(
        dir.path(),
        &db,
        "d.toml",
        &fees,
        &["train.total_timesteps=96"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        text.contains("train.total_timesteps: 64 recorded, 96 here"),
        "{text}"
    );
    assert!(
        text.contains("env.buy_fee: 0.0025 recorded, 0.01 here"),
        "{text}"
    );
    trials(1);

    // Searching further (another range, a setting fixed before now searched), more trials, a
    // new seed: the values mean the same, the trials are added.
    let further = TINY
        .replace("n_trials = 1", "n_trials = 2")
        .replace("low = 1e-4, high = 1e-2", "low = 1e-5, high = 1e-1")
        .replace("ppo.n_epochs = 1\n", "ppo.seed = 7\n")
        .replace(
            "[sampler]",
            "\"ppo.n_epochs\" = { low = 1, high = 2 }\n\n[sampler]",
        );
    run_file(dir.path(), &db, "e.toml", &further, &[]).unwrap();
    trials(3);

    // A file of no trial at all is refused, naming its line, before anything is recorded.
    let none = TINY
        .replace("name = \"launched\"", "name = \"empty\"")
        .replace("n_trials = 1", "n_trials = 0");
    let e = run_file(dir.path(), &db, "g.toml", &none, &[]).unwrap_err();
    assert!(
        e.to_string().ends_with("g.toml:3: study.n_trials: need at least one trial (0 would record the study and run nothing)"),
        "{e}"
    );
    assert!(
        Storage::open_read_only(&db)
            .unwrap()
            .study("empty")
            .is_err()
    );

    // A study Optuna made: recorded with this run's file and data's fingerprint.
    let mut storage = Storage::open(&db).unwrap();
    storage
        .create_study(
            "made_elsewhere",
            &[tradetune_engine::storage::StudyDirection::Maximize],
        )
        .unwrap();
    drop(storage);
    let elsewhere = TINY.replace("name = \"launched\"", "name = \"made_elsewhere\"");
    run_file(dir.path(), &db, "f.toml", &elsewhere, &[]).unwrap();
    let storage = Storage::open_read_only(&db).unwrap();
    let record = RecordedStudy::of(&storage.study("made_elsewhere").unwrap()).expect("recorded");
    assert!(record.fingerprint.is_some());
    assert_eq!(record.text, elsewhere);
}

#[test]
fn a_stop_before_the_data_loads_starts_no_trial() {
    let dir = tempfile::tempdir().unwrap();
    let l = launch(dir.path());
    let (tx, events) = std::sync::mpsc::channel();
    let (handle, job) = l.into_job(move |e| {
        let _ = tx.send(e);
    });
    // Asked before the job has even started: nothing is loaded yet.
    handle.stop_study();
    assert!(handle.stopped());
    let worker = std::thread::spawn(move || job.run());
    let (_, study, result) = follow(events);
    worker.join().unwrap();
    let report = result.unwrap();
    assert!(report.stopped);
    assert!(report.trials.is_empty(), "{:?}", report.trials);
    assert!(
        !study
            .iter()
            .any(|e| matches!(e, StudyEvent::TrialStarted { .. })),
        "{study:?}"
    );
}

/// A trial's checkpoint records the study's split and assets, so its backtest runs on that
/// split's test bars of those assets, with the scaler fitted on the study's train bars (not on
/// the default 70 / 15 / 15 split of every asset).
#[test]
fn a_trials_checkpoint_backtests_on_the_studys_split_and_assets() {
    use tradetune_engine::front::backtest::{SplitPart, backtest};
    use tradetune_engine::market::load::DatasetConfig;
    use tradetune_engine::market::split::SplitSpec;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("subset.toml");
    let text = format!(
        "{}\n[data]\nassets = [\"IBM\", \"AAPL\"]\n\n[split]\nby = \"fractions\"\n\
         train = 0.8\nvalidation = 0.1\n",
        TINY.replace("n_trials = 1", "n_trials = 1\nobjective = \"sortino\"")
    );
    std::fs::write(&file, &text).unwrap();
    let place = StudyPlace::new(dir.path().join("studies.db"), None).unwrap();
    let mut l = StudyLaunch::from_path(&file, place).unwrap();
    l.liveness(Liveness {
        telemetry: None,
        ..Liveness::default()
    });
    let db = l.place().db.clone();
    let (_handle, events, _thread) = l.launch();
    let (_, _, result) = follow(events);
    result.unwrap();
    let storage = Storage::open_read_only(&db).unwrap();
    let id = storage.study_id("launched").unwrap();
    let trial = &storage.trials(id).unwrap()[0];
    let ckpt = trial
        .user_attrs
        .iter()
        .find(|(k, _)| k == "checkpoint")
        .and_then(|(_, v)| match v {
            tradetune_engine::storage::JsonValue::Str(s) => Some(s.clone()),
            _ => None,
        })
        .expect("a checkpoint attribute");

    let split = SplitSpec::Fractions {
        train: 0.8,
        validation: 0.1,
    };
    let want = DatasetConfig {
        assets: vec!["IBM".into(), "AAPL".into()],
        split,
        ..DatasetConfig::default()
    }
    .load()
    .unwrap();
    let test = want.split.test.clone();
    let done = backtest(
        Path::new(&ckpt),
        SplitPart::Test,
        &[],
        Default::default(),
        tradetune_engine::device::DeviceSpec::Cpu,
    )
    .unwrap();
    // The objective the trial was scored by, for the app's Backtest tab.
    assert_eq!(
        tradetune_engine::front::backtest::recorded_objective(Path::new(&ckpt)),
        Some(tradetune_engine::eval::Objective::Sortino)
    );
    // The study's assets, in its order, and its train bars (where the scaler was fitted).
    assert!(done.about.contains(": IBM, AAPL ("), "{}", done.about);
    let train = &want.split.train;
    assert!(
        done.about
            .contains(&format!("train bars {}..{}", train.start, train.end)),
        "{}",
        done.about
    );
    // The test split's bars: the last 10 %, not the default's last 15 %.
    let ts = &want.dataset.timestamps;
    let r = &done.report;
    assert_eq!(r.timestamps.last(), ts.last(), "ends at the last bar");
    assert!(r.bars <= test.len(), "{} bars of {}", r.bars, test.len());
    let first = r.timestamps[0];
    assert!(
        first >= ts[test.start],
        "starts before the study's test split"
    );

    // The checkpoint names its assets in column order; data whose assets differ from them (here
    // the record says the other order) is refused, naming both, instead of weighting the
    // wrong assets.
    let data_json = Path::new(&ckpt).join("data.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&data_json).unwrap()).unwrap();
    assert_eq!(record["names"], serde_json::json!(["IBM", "AAPL"]));
    record["names"] = serde_json::json!(["AAPL", "IBM"]);
    std::fs::write(&data_json, record.to_string()).unwrap();
    let e = backtest(
        Path::new(&ckpt),
        SplitPart::Test,
        &[],
        Default::default(),
        tradetune_engine::device::DeviceSpec::Cpu,
    )
    .err()
    .expect("assets in another order are refused");
    let e = e.to_string();
    assert!(
        e.contains("IBM, AAPL") && e.contains("AAPL, IBM") && e.contains("data.json"),
        "{e}"
    );
}

/// A study name is a folder under the checkpoints: one that is empty, holds a path separator
/// or `..` is refused, by `--name` and in a study file (naming `study.name`), before anything
/// runs.
#[test]
fn a_study_name_that_is_not_a_plain_folder_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = launch(dir.path());
    for bad in ["../x", "/tmp/x", "", "a\\b", ".."] {
        let e = l.name(bad).unwrap_err();
        assert!(e.to_string().contains("--name"), "{bad}: {e}");
    }
    l.name("fine-name").unwrap();
    assert_eq!(l.file().study.name, "fine-name");
    // A study file naming a new study so is read (a stored study of such a name still
    // runs) but refused where the study would be created.
    for bad in ["../x", "/abs", ""] {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, TINY.replace("\"launched\"", &format!("{bad:?}"))).unwrap();
        let place = StudyPlace::new(dir.path().join("studies.db"), None).unwrap();
        let e = StudyLaunch::from_path(&file, place)
            .unwrap()
            .create(1)
            .unwrap_err();
        assert!(e.to_string().contains("study.name"), "{bad}: {e}");
    }
    assert!(
        Storage::open(dir.path().join("studies.db"))
            .unwrap()
            .studies()
            .unwrap()
            .is_empty()
    );
    // Nothing was written outside the folder.
    assert!(!dir.path().join("x").exists());
}

/// A study whose searched episodes or evaluations no split of its data holds (an
/// `env.episode_bars` longer than the train split at both ends of its range, though not than
/// the data; an `env.lookback` that leaves the validation split no steps) is refused before
/// its first trial, naming the setting and the split, and stores nothing; a searched range
/// one end of which fits runs. (Fixed ones were refused as the data loaded, and still are.)
#[test]
fn a_study_whose_episodes_the_data_cannot_hold_is_refused_before_its_first_trial() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let run_with = |fixed: &str, search: &str| {
        let file = dir.path().join("long.toml");
        let text = (TINY.replace("[search]\n", &format!("[search]\n{search}\n")))
            .replace("[fixed]\n", &format!("[fixed]\n{fixed}\n"));
        std::fs::write(&file, text).unwrap();
        let mut l =
            StudyLaunch::from_path(&file, StudyPlace::new(db.clone(), None).unwrap()).unwrap();
        l.liveness(Liveness {
            telemetry: None,
            ..Liveness::default()
        });
        let (tx, events) = std::sync::mpsc::channel();
        let (_handle, job) = l.into_job(move |e| {
            let _ = tx.send(e);
        });
        let worker = std::thread::spawn(move || job.run());
        let (_, study, result) = follow(events);
        worker.join().unwrap();
        let started = study
            .iter()
            .filter(|e| matches!(e, StudyEvent::TrialStarted { .. }))
            .count();
        (started, result)
    };
    let run = |search: &str| run_with("", search);
    let (started, result) = run("\"env.episode_bars\" = { low = 1600, high = 2000 }");
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("long.toml:17: search.\"env.episode_bars\"")
            && e.contains("no trial of this study can run (at either end of every searched")
            && e.contains("the train split: too few bars: 1469 in the split")
            && e.contains("episode_bars 1600"),
        "{e}"
    );
    assert_eq!(started, 0);
    assert!(!db.exists(), "nothing is stored");
    let (started, result) = run("\"env.lookback\" = { low = 400, high = 512 }");
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("search.\"env.lookback\"")
            && e.contains("validation")
            && e.contains("lookback 400"),
        "{e}"
    );
    assert_eq!(started, 0);
    assert!(!db.exists(), "nothing is stored");

    // Episodes that fit with the shortest lookback searched but not with the longest: the
    // searched lookback is named, not the fixed episodes' length.
    let (_, result) = run_with(
        "env.episode_bars = 1000",
        "\"env.lookback\" = { low = 480, high = 512 }",
    );
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("search.\"env.lookback\"")
            && e.contains("lookback 480 + episode_bars 1000 need 1480 bars"),
        "{e}"
    );
    assert!(!db.exists(), "nothing is stored");

    // A fixed lookback the validation split leaves no steps is named, whatever is searched.
    let (_, result) = run_with(
        "env.lookback = 400",
        "\"env.episode_bars\" = { low = 64, high = 2000 }",
    );
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("fixed.env.lookback") && e.contains("validation") && e.contains("lookback 400"),
        "{e}"
    );
    assert!(!db.exists(), "nothing is stored");

    // One end fits: the study runs its trial (which trains or fails by the value drawn).
    let (_, result) = run("\"env.episode_bars\" = { low = 64, high = 2000 }");
    assert!(
        !format!("{result:?}").contains("no trial of this study can run"),
        "{result:?}"
    );
    let storage = Storage::open_read_only(&db).unwrap();
    let id = storage.study_id("launched").unwrap();
    assert_eq!(storage.trials(id).unwrap().len(), 1);
}

/// A study created for workers (`study create`, its whole budget recorded) and then run from
/// its file (`study run`, the app's Start) keeps its budget: the run's trials are counted with
/// the workers', and a run once it is spent starts none.
#[test]
fn a_study_created_for_workers_keeps_its_budget_when_run() {
    let dir = tempfile::tempdir().unwrap();
    let l = launch(dir.path());
    let db = l.place().db.clone();
    l.create(2).unwrap();
    let run = |trials: usize| {
        let mut l = launch(dir.path());
        l.trials(trials).unwrap();
        let (_handle, events, _thread) = l.launch();
        let (_, study, result) = follow(events);
        let said_budget = study.iter().any(|e| {
            matches!(
                e,
                StudyEvent::StudyStarted {
                    budget_left: Some(_),
                    ..
                }
            )
        });
        (result.unwrap().trials.len(), said_budget)
    };
    assert_eq!(run(5), (2, true), "five asked, two left in the budget");
    assert_eq!(run(1), (0, true), "the budget is spent");
    let storage = Storage::open_read_only(&db).unwrap();
    let id = storage.study_id("launched").unwrap();
    assert_eq!(storage.trials(id).unwrap().len(), 2);
}
