//! The study runner with synthetic trial functions: device assignment, isolation of failures
//! and panics, memory refusals, stopping, pruning, heartbeats and recovery of dead trials.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use tradetune_engine::device::DeviceSpec;
use tradetune_engine::device::memory::MemoryEstimate;
use tradetune_engine::storage::{
    JsonValue, Storage, StudyDirection as Direction, TrialRecord, TrialState,
};
use tradetune_engine::study::pruner::{NopPruner, PercentilePruner};
use tradetune_engine::study::runner::{
    Assignment, DeviceSlot, Reporter, Runner, RunnerConfig, StudyEvent, TrialError, TrialFunction,
    TrialInput, TrialPlan, assign,
};
use tradetune_engine::study::sampler::{
    EnqueuedSampler, GridSampler, Proposal, RandomSampler, SampleContext, Sampler, SamplerError,
};
use tradetune_engine::study::space::{ParamValue, SearchSpace};

fn db(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("study_runner");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
    }
    p
}

fn space() -> SearchSpace {
    let mut s = SearchSpace::new();
    s.add_float("x", 0.0, 10.0, false, None).unwrap();
    s
}

fn base() -> serde_json::Value {
    serde_json::json!({"x": 0.0, "label": "synthetic"})
}

fn cpu(label_gib: u64) -> DeviceSlot {
    DeviceSlot::new(DeviceSpec::Cpu, Some(label_gib << 30))
}

fn config(name: &str, path: &PathBuf, n_trials: usize, workers: usize) -> RunnerConfig {
    let mut c = RunnerConfig::new(name, path);
    c.n_trials = n_trials;
    c.workers = workers;
    c.devices = vec![cpu(8)];
    c.heartbeat_interval = Duration::from_millis(200);
    c.stale_after = Duration::from_secs(30);
    c
}

/// A trial function from closures.
struct Synthetic<P, R> {
    plan: P,
    run: R,
}

impl<P, R> TrialFunction for Synthetic<P, R>
where
    P: Fn(&TrialInput<'_>) -> Result<TrialPlan, TrialError> + Send + Sync,
    R: Fn(&TrialInput<'_>, &mut Reporter<'_>) -> Result<f64, TrialError> + Send + Sync,
{
    type Config = serde_json::Value;
    fn config(&self, applied: &serde_json::Value) -> Result<serde_json::Value, TrialError> {
        Ok(applied.clone())
    }
    fn plan(&self, _: &serde_json::Value, input: &TrialInput<'_>) -> Result<TrialPlan, TrialError> {
        (self.plan)(input)
    }
    fn run(
        &self,
        _: &serde_json::Value,
        input: &TrialInput<'_>,
        r: &mut Reporter<'_>,
    ) -> Result<f64, TrialError> {
        (self.run)(input, r)
    }
}

/// A runner of `f` over [`space`] from [`base`], sampling at random from `seed`, pruning
/// nothing.
fn random_runner<F: TrialFunction + 'static>(cfg: RunnerConfig, seed: u64, f: F) -> Runner {
    Runner::new(
        cfg,
        space(),
        base(),
        Box::new(RandomSampler::new(seed)),
        Box::new(NopPruner),
        Arc::new(f),
    )
    .unwrap()
}

fn f32_plan(_: &TrialInput<'_>) -> Result<TrialPlan, TrialError> {
    Ok(TrialPlan {
        precision: "f32".into(),
        memory: None,
    })
}

fn x_of(input: &TrialInput<'_>) -> f64 {
    match input.params["x"] {
        ParamValue::Float(x) => x,
        ref other => panic!("x is {other}"),
    }
}

fn trials(path: &PathBuf, study: &str) -> Vec<TrialRecord> {
    let s = Storage::open_read_only(path).unwrap();
    let id = s.study_id(study).unwrap();
    s.trials(id).unwrap()
}

fn attr_str(t: &TrialRecord, key: &str) -> String {
    match t.user_attr(key).or_else(|| t.system_attr(key)) {
        Some(JsonValue::Str(s)) => s.clone(),
        other => panic!("trial #{} attribute {key}: {other:?}", t.number),
    }
}

fn drain(rx: &Receiver<StudyEvent>) -> Vec<StudyEvent> {
    rx.try_iter().collect()
}

#[test]
fn workers_stay_on_the_devices_they_were_assigned() {
    for (how, devices, workers) in [
        (Assignment::RoundRobin, vec![cpu(8), cpu(8), cpu(8)], 4usize),
        (Assignment::LeastLoaded, vec![cpu(8), cpu(16)], 3),
    ] {
        let path = db(&format!("assign_{how:?}"));
        let mut cfg = config("assign", &path, 4 * workers, workers);
        cfg.devices = devices.clone();
        cfg.assignment = how;
        // Every worker waits in its first trial until all have started one, so each of them
        // provably runs trials on its device.
        let barrier = Barrier::new(workers);
        let seen = Mutex::new(HashSet::new());
        let f = Synthetic {
            plan: f32_plan,
            run: move |input: &TrialInput<'_>, _: &mut Reporter<'_>| {
                if seen.lock().unwrap().insert(input.worker) {
                    barrier.wait();
                }
                Ok(x_of(input))
            },
        };
        let runner = random_runner(cfg, 3, f);
        let binding = assign(workers, &devices, how);
        let (tx, _rx) = mpsc::channel();
        let report = runner.run(&tx).unwrap();
        assert_eq!(report.trials.len(), 4 * workers);
        let stored = trials(&path, "assign");
        let mut workers_seen = HashSet::new();
        for t in &stored {
            assert_eq!(t.state, TrialState::Complete);
            let worker: usize = attr_str(t, "worker")
                .strip_prefix("worker-")
                .unwrap()
                .parse()
                .unwrap();
            let expected = &runner.workers()[worker].device;
            assert_eq!(
                &attr_str(t, "device"),
                expected,
                "{how:?} trial #{}",
                t.number
            );
            assert_eq!(attr_str(t, "backend"), "flex");
            assert_eq!(attr_str(t, "precision"), "f32");
            // The applied configuration holds the trial's x.
            let applied = t.system_attr("applied_config").unwrap();
            assert_eq!(
                applied.get("x").and_then(JsonValue::as_f64),
                t.param("x").map(|p| p.internal)
            );
            workers_seen.insert(worker);
        }
        assert_eq!(
            workers_seen.len(),
            workers,
            "{how:?}: every worker ran trials"
        );
        let devices_of: Vec<String> = runner.workers().into_iter().map(|w| w.device).collect();
        let expected: Vec<String> = binding
            .iter()
            .map(|d| {
                let mut slots = devices.clone();
                tradetune_engine::study::runner::label_slots(&mut slots);
                slots[*d].label.clone()
            })
            .collect();
        assert_eq!(devices_of, expected);
        match how {
            Assignment::RoundRobin => assert_eq!(devices_of, ["cpu", "cpu#1", "cpu#2", "cpu"]),
            // 16 GiB gets two workers, 8 GiB one.
            Assignment::LeastLoaded => assert_eq!(devices_of, ["cpu#1", "cpu", "cpu#1"]),
        }
    }
}

#[test]
fn errors_panics_and_nan_become_fail_and_the_study_goes_on() {
    let path = db("isolation");
    let f = Synthetic {
        plan: f32_plan,
        run: |input: &TrialInput<'_>, _: &mut Reporter<'_>| match input.number {
            0 => Ok(1.5),
            1 => Err(TrialError::Failed("the env ran out of data".into())),
            2 => panic!("index out of bounds in trial two"),
            3 => Ok(f64::NAN),
            _ => Ok(2.5),
        },
    };
    let runner = random_runner(config("isolation", &path, 5, 1), 1, f);
    let (tx, rx) = mpsc::channel();
    let report = runner.run(&tx).unwrap();
    let stored = trials(&path, "isolation");
    let states: Vec<TrialState> = stored.iter().map(|t| t.state).collect();
    use TrialState::*;
    assert_eq!(states, [Complete, Fail, Fail, Fail, Complete]);
    assert_eq!(
        attr_str(&stored[1], "fail_reason"),
        "the env ran out of data"
    );
    assert_eq!(
        attr_str(&stored[2], "fail_reason"),
        "panicked: index out of bounds in trial two"
    );
    assert_eq!(attr_str(&stored[3], "fail_reason"), "the objective is NaN");
    assert_eq!(report.best, Some((4, 2.5)));
    let events = drain(&rx);
    assert!(events.iter().any(|e| matches!(
        e,
        StudyEvent::TrialFailed { number: 2, reason, .. } if reason.contains("panicked")
    )));
    // Every event survives a JSON round trip (the desktop app and --json read them).
    for e in &events {
        let text = serde_json::to_string(e).unwrap();
        let back: StudyEvent = serde_json::from_str(&text).unwrap();
        assert_eq!(&back, e, "{text}");
    }
}

/// A study resumed with the other direction, or one Optuna made with two objectives, is
/// refused before any trial, naming `study.direction`: its sampler would chase one direction
/// while its best trial is judged in the other, and a two-objective study refuses each
/// trial's one value. The stored study is left as it was.
#[test]
fn a_study_resumed_in_another_direction_is_refused() {
    let path = db("direction");
    let ok = || Synthetic {
        plan: f32_plan,
        run: |_: &TrialInput<'_>, _: &mut Reporter<'_>| Ok(1.0),
    };
    let runner = random_runner(config("direction", &path, 1, 1), 1, ok());
    let (tx, _rx) = mpsc::channel();
    runner.run(&tx).unwrap();
    let mut cfg = config("direction", &path, 2, 1);
    cfg.direction = Direction::Minimize;
    let err = random_runner(cfg, 1, ok())
        .run(&tx)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("study setting 'study.direction': the stored study 'direction' was made to maximize its objective and this run says minimize"),
        "{err}"
    );
    assert_eq!(trials(&path, "direction").len(), 1);
    // The same direction goes on.
    random_runner(config("direction", &path, 1, 1), 1, ok())
        .run(&tx)
        .unwrap();
    assert_eq!(trials(&path, "direction").len(), 2);
    // Two objectives (as Optuna's multi-objective studies are stored).
    let mut storage = Storage::open(&path).unwrap();
    storage
        .create_study("two", &[Direction::Maximize, Direction::Minimize])
        .unwrap();
    drop(storage);
    let err = random_runner(config("two", &path, 1, 1), 1, ok())
        .run(&tx)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the stored study 'two' has 2 objectives (maximize, minimize)"),
        "{err}"
    );
    assert!(trials(&path, "two").is_empty());
}

#[test]
fn an_over_budget_trial_fails_before_it_starts() {
    let path = db("budget");
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let f = Synthetic {
        // x > 5 needs 10 GiB: more than 80 % of the 8 GiB device.
        plan: |input: &TrialInput<'_>| {
            let gib: u64 = if x_of(input) > 5.0 { 10 } else { 1 };
            Ok(TrialPlan {
                precision: "bf16".into(),
                memory: Some(MemoryEstimate {
                    params: gib << 30,
                    ..MemoryEstimate::default()
                }),
            })
        },
        run: move |input: &TrialInput<'_>, _: &mut Reporter<'_>| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(x_of(input))
        },
    };
    let runner = random_runner(config("budget", &path, 8, 1), 11, f);
    let (tx, _rx) = mpsc::channel();
    runner.run(&tx).unwrap();
    let stored = trials(&path, "budget");
    let mut refused = 0;
    for t in &stored {
        let x = t.param("x").unwrap().internal;
        if x > 5.0 {
            refused += 1;
            assert_eq!(t.state, TrialState::Fail);
            let reason = attr_str(t, "fail_reason");
            assert!(reason.contains("over the memory budget"), "{reason}");
            assert!(reason.contains("80 % of 8.0 GiB"), "{reason}");
        } else {
            assert_eq!(t.state, TrialState::Complete);
        }
    }
    assert!(
        refused > 0 && refused < 8,
        "seed 11 draws x on both sides of 5"
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        8 - refused,
        "refused trials never ran"
    );
}

#[test]
fn stopping_a_trial_or_the_study_is_recorded_as_documented() {
    let path = db("stop");
    // Even trials report a value every iteration, odd ones never; both run until stopped.
    let f = Synthetic {
        plan: f32_plan,
        run: |input: &TrialInput<'_>, r: &mut Reporter<'_>| {
            let mut step = 0;
            while !r.stop_requested() {
                if input.number.is_multiple_of(2) {
                    r.report(step, 0.1 * step as f64)?;
                    step += 1;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TrialError::Stopped)
        },
    };
    let runner = random_runner(config("stop", &path, 5, 1), 2, f);
    let stop = runner.stop_handle();
    let (tx, rx) = mpsc::channel();
    let report = std::thread::scope(|s| {
        let run = s.spawn(|| runner.run(&tx));
        for e in rx.iter() {
            match e {
                StudyEvent::Intermediate { number: 0, .. } => {
                    stop.stop_trial(0);
                }
                StudyEvent::TrialStarted { number: 1, .. } => assert!(stop.stop_trial(1)),
                StudyEvent::Intermediate { number: 2, .. } => stop.stop_study(),
                StudyEvent::StudyFinished { .. } => break,
                _ => {}
            }
        }
        run.join().unwrap().unwrap()
    });
    let stored = trials(&path, "stop");
    assert_eq!(
        stored.len(),
        3,
        "no trial starts after the study is stopped"
    );
    assert_eq!(stored[0].state, TrialState::Pruned);
    assert!(
        stored[0].value().is_some(),
        "a stopped trial keeps its last value"
    );
    assert_eq!(attr_str(&stored[0], "prune_reason"), "stopped by user");
    assert_eq!(stored[1].state, TrialState::Fail);
    assert_eq!(attr_str(&stored[1], "fail_reason"), "stopped by user");
    assert_eq!(stored[2].state, TrialState::Pruned);
    assert!(report.stopped);
}

/// "Finish running trials" (closing the window): no new trial starts, and the trials running
/// then go on to complete with their own values.
#[test]
fn finishing_running_trials_completes_them_and_starts_no_more() {
    // Each trial reports until the test has asked to finish, then completes: none can end (and
    // free its worker for another) before the request, however slow the machine.
    static ASKED: AtomicBool = AtomicBool::new(false);
    let path = db("finish");
    let f = Synthetic {
        plan: f32_plan,
        run: |_: &TrialInput<'_>, r: &mut Reporter<'_>| {
            let mut step = 0;
            while !ASKED.load(Ordering::SeqCst) {
                if r.stop_requested() {
                    return Err(TrialError::Stopped);
                }
                r.report(step, 0.1 * step as f64)?;
                step += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(1.0)
        },
    };
    let runner = random_runner(config("finish", &path, 10, 2), 2, f);
    let stop = runner.stop_handle();
    let (tx, rx) = mpsc::channel();
    let report = std::thread::scope(|s| {
        let run = s.spawn(|| runner.run(&tx));
        for e in rx.iter() {
            match e {
                StudyEvent::Intermediate { number: 0, .. } if !ASKED.load(Ordering::SeqCst) => {
                    stop.finish_running();
                    ASKED.store(true, Ordering::SeqCst);
                }
                StudyEvent::StudyFinished { .. } => break,
                _ => {}
            }
        }
        run.join().unwrap().unwrap()
    });
    assert!(!stop.starts_trials());
    let stored = trials(&path, "finish");
    assert!(
        (1..=2).contains(&stored.len()),
        "only the trials running when asked ran (one per worker at most): {}",
        stored.len()
    );
    for t in &stored {
        assert_eq!(t.state, TrialState::Complete, "trial {} finished", t.number);
        assert_eq!(t.value(), Some(1.0));
    }
    assert!(report.stopped);
}

#[test]
fn the_pruner_prunes_a_hopeless_trial_through_the_runner() {
    let path = db("prune");
    let entries: Vec<BTreeMap<String, ParamValue>> = [4.0, 6.0, 5.0, 1.0]
        .into_iter()
        .map(|x| BTreeMap::from([("x".to_owned(), ParamValue::Float(x))]))
        .collect();
    let sampler = EnqueuedSampler::new(entries, &space(), Box::new(RandomSampler::new(0))).unwrap();
    let f = Synthetic {
        plan: f32_plan,
        run: |input: &TrialInput<'_>, r: &mut Reporter<'_>| {
            let x = x_of(input);
            for step in 0..5 {
                r.report_and_check(step, x)?;
            }
            Ok(x)
        },
    };
    let mut cfg = config("prune", &path, 4, 1);
    cfg.direction = tradetune_engine::study::Direction::Maximize;
    let runner = Runner::new(
        cfg,
        space(),
        base(),
        Box::new(sampler),
        Box::new(PercentilePruner::median(2, 0, 1).unwrap()),
        Arc::new(f),
    )
    .unwrap();
    let (tx, _rx) = mpsc::channel();
    runner.run(&tx).unwrap();
    let stored = trials(&path, "prune");
    let states: Vec<TrialState> = stored.iter().map(|t| t.state).collect();
    use TrialState::*;
    // Two start-up trials, then 5 ≥ median(4, 6) goes on, 1 < 5 is pruned at its first report.
    assert_eq!(states, [Complete, Complete, Complete, Pruned]);
    assert_eq!(stored[3].intermediate_values, vec![(0, 1.0)]);
    assert_eq!(stored[3].value(), Some(1.0));
}

#[test]
fn heartbeats_while_running_and_stale_trials_of_the_study_fail_on_start() {
    let path = db("heartbeat");
    // A trial left RUNNING by a "dead" worker: its heartbeat is never renewed. And a running
    // trial of another study in the same file, whose workers beat less often than this
    // runner's `stale_after`: not this runner's to judge.
    let (dead, other) = {
        let mut s = Storage::open(&path).unwrap();
        let maximize = [tradetune_engine::storage::StudyDirection::Maximize];
        let id = s.create_study("hb", &maximize).unwrap();
        let other = s.create_study("other", &maximize).unwrap();
        (
            s.create_trial(id).unwrap().trial_id,
            s.create_trial(other).unwrap().trial_id,
        )
    };
    let open = |db: &PathBuf| {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.busy_timeout(Duration::from_secs(60)).unwrap();
        conn
    };
    let beat_db = path.clone();
    let read_beat = move |trial_id: i64| -> String {
        open(&beat_db)
            .query_row(
                "SELECT heartbeat FROM trial_heartbeats WHERE trial_id = ?1",
                [trial_id],
                |r| r.get(0),
            )
            .unwrap()
    };
    let write_beat = {
        let db = path.clone();
        move |trial_id: i64, beat: &str| {
            let n = open(&db)
                .execute(
                    "UPDATE trial_heartbeats SET heartbeat = ?2 WHERE trial_id = ?1",
                    rusqlite::params![trial_id, beat],
                )
                .unwrap();
            assert_eq!(n, 1, "trial {trial_id} has no heartbeat row");
        }
    };
    // The dead worker's last beat is long past (rather than waiting for SQLite's whole-second
    // clock to make it older than `stale_after`).
    write_beat(dead, "2000-01-01 00:00:00");
    write_beat(other, "2000-01-01 00:00:00");
    // A beat no renewal writes: the running trial overwrites its own beat with it and waits
    // until the runner's heartbeat thread replaces it (every 200 ms), whatever the wall clock
    // reads. It lies in the future, so no stale check could take it for a dead worker's.
    const MARK: &str = "2999-01-01 00:00:00";
    let f = Synthetic {
        plan: f32_plan,
        run: move |input: &TrialInput<'_>, _: &mut Reporter<'_>| {
            // The runner's heartbeat thread renews this trial's beat while it runs.
            write_beat(input.trial_id, MARK);
            let waiting = std::time::Instant::now();
            while read_beat(input.trial_id) == MARK {
                // Only turns a hang into a failure: a renewal takes one heartbeat interval.
                if waiting.elapsed() > Duration::from_secs(300) {
                    return Err(TrialError::Failed(
                        "the heartbeat never moved in 5 minutes".into(),
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(1.0)
        },
    };
    let mut cfg = config("hb", &path, 1, 1);
    cfg.stale_after = Duration::from_secs(1);
    let runner = random_runner(cfg, 0, f);
    let (tx, _rx) = mpsc::channel();
    let report = runner.run(&tx).unwrap();
    assert_eq!(report.recovered, vec![0]);
    assert_eq!(
        trials(&path, "other")[0].state,
        TrialState::Running,
        "another study's trial was judged by this runner's stale_after"
    );
    let stored = trials(&path, "hb");
    assert_eq!(stored[0].state, TrialState::Fail);
    assert!(attr_str(&stored[0], "fail_reason").starts_with("worker lost"));
    assert_eq!(
        stored[1].number, 1,
        "numbering goes on after the dead trial"
    );
    assert_eq!(
        stored[1].state,
        TrialState::Complete,
        "{:?}",
        stored[1].system_attrs
    );
}

/// A worker whose study's budget is full only because another process's trial holds part of
/// it waits for that trial: here its worker died (its heartbeat stops), the trial goes stale,
/// and the waiting worker runs the trial it freed, where it ended "budget spent" with the study
/// one trial short and no worker left to run it.
#[test]
fn a_budget_held_by_a_dead_workers_trial_is_waited_for_and_run() {
    let path = db("held_budget");
    // Another process's trial, RUNNING with a fresh heartbeat that will never be renewed.
    let dead = {
        let mut s = Storage::open(&path).unwrap();
        let maximize = [tradetune_engine::storage::StudyDirection::Maximize];
        let id = s.create_study("held", &maximize).unwrap();
        s.create_trial(id).unwrap().trial_id
    };
    let f = Synthetic {
        plan: f32_plan,
        run: |input: &TrialInput<'_>, _: &mut Reporter<'_>| Ok(x_of(input)),
    };
    // A budget of 2 for the whole study: the dead trial and one more, until the dead one is
    // judged stale (after 3 s: long past this worker's first trial).
    let mut cfg = config("held", &path, 2, 1);
    cfg.study_budget = Some(2);
    cfg.stale_after = Duration::from_secs(3);
    let runner = random_runner(cfg, 0, f);
    let (tx, rx) = mpsc::channel();
    let report = runner.run(&tx).unwrap();
    let stored = trials(&path, "held");
    let states: Vec<TrialState> = stored.iter().map(|t| t.state).collect();
    use TrialState::*;
    assert_eq!(states, [Fail, Complete, Complete], "{report:?}");
    assert_eq!(stored[0].trial_id, dead);
    assert!(attr_str(&stored[0], "fail_reason").starts_with("worker lost"));
    let events = drain(&rx);
    let waited = events.iter().any(|e| {
        matches!(e, StudyEvent::WorkerWaiting { reason, .. }
            if reason.contains("1 trials of other workers still hold part of it"))
    });
    assert!(waited, "the wait was not said");
    // Found while the study ran, not as it opened: said as it happened.
    assert!(report.recovered.is_empty(), "{report:?}");
    let recovered = events
        .iter()
        .any(|e| matches!(e, StudyEvent::TrialsRecovered { numbers, .. } if numbers == &[0]));
    assert!(
        recovered,
        "the dead worker's trial was failed without a word"
    );
}

/// A GPU that always reads 73 % busy, 2048 MiB used and 150 W, on a host at 40 % CPU.
struct FakeGpu;

impl tradetune_engine::telemetry::Source for FakeGpu {
    fn name(&self) -> String {
        "fake".into()
    }
    fn read(&mut self) -> tradetune_engine::telemetry::SourceReading {
        use tradetune_engine::telemetry::{DeviceReading, DeviceTag, Metric};
        tradetune_engine::telemetry::SourceReading {
            readings: vec![
                DeviceReading {
                    device: DeviceTag::Gpu(0),
                    values: vec![
                        (Metric::UtilPct, 73.0),
                        (Metric::MemUsedMib, 2048.0),
                        (Metric::PowerW, 150.0),
                    ],
                },
                DeviceReading {
                    device: DeviceTag::Host,
                    values: vec![(Metric::CpuPct, 40.0)],
                },
            ],
            problems: Vec::new(),
            processes: Vec::new(),
        }
    }
}

/// One trial on `slot` with the fake GPU sampled; its stored record and telemetry rows.
fn telemetry_trial(
    name: &str,
    slot: DeviceSlot,
) -> (TrialRecord, Vec<tradetune_engine::storage::TelemetrySample>) {
    telemetry_trial_of(name, slot, 1)
}

/// As [`telemetry_trial`], with `workers` workers bound to the slot (one trial still).
fn telemetry_trial_of(
    name: &str,
    slot: DeviceSlot,
    workers: usize,
) -> (TrialRecord, Vec<tradetune_engine::storage::TelemetrySample>) {
    use tradetune_engine::telemetry::{Sampler, SamplerConfig, SamplerCore, StorageSink};
    let path = db(name);
    // The study must exist before the sink's rows reference its trials.
    let sink = StorageSink::new(Storage::open(&path).unwrap());
    // Periodic ticks a minute apart: the trial's samples are the one the runner takes as it
    // starts, the one the trial asks for and the one taken as it ends, whatever the speed.
    let core = SamplerCore::new(
        SamplerConfig::with_interval(Duration::from_secs(60)).unwrap(),
        vec![Box::new(FakeGpu)],
        Some(Box::new(sink)),
    )
    .unwrap();
    let sampler = Sampler::start(core).unwrap();
    let handle = sampler.handle();
    let watch = sampler.handle();
    let f = Synthetic {
        plan: f32_plan,
        run: move |_: &TrialInput<'_>, r: &mut Reporter<'_>| {
            // The sleeps are lower bounds only: the three samples get distinct millisecond
            // timestamps, so the energy integrates over a positive time.
            std::thread::sleep(Duration::from_millis(5));
            assert!(watch.sample_now(), "the sampler thread runs");
            std::thread::sleep(Duration::from_millis(5));
            r.set_work(12_000, None);
            Ok(1.0)
        },
    };
    let mut cfg = config(name, &path, 1, workers);
    cfg.devices = vec![slot];
    let runner = random_runner(cfg, 0, f).with_telemetry(handle);
    let (tx, _rx) = mpsc::channel();
    runner.run(&tx).unwrap();
    let stats = sampler.stop();
    assert_eq!(stats.rows_dropped, 0, "{:?}", stats.last_sink_error);
    let t = trials(&path, name).remove(0);
    assert_eq!(t.state, TrialState::Complete, "{:?}", t.system_attrs);
    let st = Storage::open_read_only(&path).unwrap();
    let rows = st.telemetry(Some(t.trial_id)).unwrap();
    (t, rows)
}

#[test]
fn a_trial_ends_with_its_telemetry_summary_and_tagged_rows() {
    // A CUDA slot stands for a card the probes cannot tell apart (no adapter to match by PCI
    // bus id in this test): every device's rows and series belong to its trial.
    let (t, rows) = telemetry_trial("telemetry", DeviceSlot::new(DeviceSpec::Cuda(0), None));
    let num = |k: &str| t.user_attr(k).and_then(JsonValue::as_f64);
    assert_eq!(num("gpu0_mean_util_pct"), Some(73.0));
    assert_eq!(num("gpu0_peak_mem_used_mib"), Some(2048.0));
    assert!(num("gpu0_energy_j").is_some_and(|j| j > 0.0));
    assert!(num("wall_s").is_some_and(|w| w > 0.0));
    assert!(num("samples_per_s").is_some_and(|s| s > 0.0));
    // The bottleneck verdict is stored with the summary, in words.
    match t.user_attr("verdict") {
        Some(JsonValue::Str(v)) => assert!(!v.is_empty()),
        other => panic!("no verdict attribute: {other:?}"),
    }
    // The sampler's rows of this trial are in the database, tagged with its id, from its
    // three samples at least: the GPU's and the host's.
    assert!(rows.len() >= 3 * 4, "{} rows", rows.len());
    assert!(rows.iter().any(|r| r.source == "gpu0"), "{rows:?}");
    assert!(rows.iter().any(|r| r.source == "host"), "{rows:?}");
}

/// A trial whose process used its whole memory budget on the card (2,048 MiB of a 2,560 MiB
/// card's 0.8) is told so against that budget, not against the card: the verdict had no card
/// total to compare with here, and on a real card compared the use with all of it.
#[test]
fn the_memory_verdict_is_measured_against_the_trials_budget() {
    let card = DeviceSlot::new(DeviceSpec::Cuda(0), Some(2560 << 20));
    let (t, _) = telemetry_trial("telemetry_budget", card);
    let all = match t.user_attr("verdicts") {
        Some(v) => v.dumps(),
        None => match t.user_attr("verdict") {
            Some(v) => v.dumps(),
            None => panic!("no verdict: {:?}", t.user_attrs),
        },
    };
    assert!(
        all.contains("memory budget reached on gpu0 (2048 of 2048 MiB; the card's use"),
        "{all}"
    );
    // With room to spare, nothing is said of memory.
    let roomy = DeviceSlot::new(DeviceSpec::Cuda(0), Some(8 << 30));
    let (t, _) = telemetry_trial("telemetry_budget_roomy", roomy);
    let all = t
        .user_attr("verdicts")
        .or(t.user_attr("verdict"))
        .map(JsonValue::dumps);
    assert!(!all.unwrap_or_default().contains("memory budget"));
}

/// Issue 18: CPU workers of one process share the cores; the verdict says so with its fix, and
/// says nothing of it for a lone CPU worker.
#[test]
fn cpu_workers_are_told_they_share_the_cores() {
    let (t, _) = telemetry_trial_of("telemetry_shared", cpu(8), 2);
    match t.user_attr("verdict") {
        Some(JsonValue::Str(v)) => {
            assert!(v.starts_with("2 CPU workers share this machine's"), "{v}");
            assert!(v.contains("fewer CPU workers"), "{v}");
        }
        other => panic!("no verdict attribute: {other:?}"),
    }
    let (t, _) = telemetry_trial("telemetry_alone", cpu(8));
    if let Some(JsonValue::Str(v)) = t.user_attr("verdict") {
        assert!(!v.contains("CPU workers share"), "{v}");
    }
}

/// Issue 20: a CPU trial on a machine with a busy or idle GPU is summarised on the host only:
/// no GPU figures, no GPU verdict, its rows the host's.
#[test]
fn a_cpu_trial_gets_the_hosts_telemetry_not_the_gpus() {
    let (t, rows) = telemetry_trial("telemetry_cpu", cpu(8));
    let num = |k: &str| t.user_attr(k).and_then(JsonValue::as_f64);
    assert_eq!(num("host_mean_cpu_pct"), Some(40.0));
    assert_eq!(num("gpu0_mean_util_pct"), None);
    assert_eq!(
        t.user_attr("telemetry_device"),
        Some(&JsonValue::from("host"))
    );
    if let Some(JsonValue::Str(v)) = t.user_attr("verdict") {
        assert!(!v.contains("gpu0"), "{v}");
    }
    assert!(rows.len() >= 3, "{} rows", rows.len());
    assert!(rows.iter().all(|r| r.source == "host"), "{rows:?}");
}

/// A trial whose every update compiled (`GpuWork::compile_not_apart`) stores no steady
/// samples/s (its compile phase holds none of the updates' compiling, only an evaluation's),
/// and its verdict says where the compiling is.
#[test]
fn a_trial_whose_every_update_compiled_claims_no_steady_rate() {
    use tradetune_engine::telemetry::{GpuWork, PhaseSplit};
    let name = "not_apart";
    let path = db(name);
    let f = Synthetic {
        plan: f32_plan,
        run: |_: &TrialInput<'_>, r: &mut Reporter<'_>| {
            std::thread::sleep(Duration::from_millis(50));
            r.set_work(
                12_000,
                Some(PhaseSplit {
                    env_s: 0.004,
                    inference_s: 0.003,
                    update_s: 0.03,
                    eval_s: 0.002,
                    compile_s: 0.001,
                }),
            );
            r.set_gpu_work(GpuWork {
                kernels_compiled: 85,
                compile_not_apart: true,
                ..GpuWork::default()
            });
            Ok(1.0)
        },
    };
    let mut cfg = config(name, &path, 1, 1);
    cfg.devices = vec![DeviceSlot::new(DeviceSpec::Cuda(0), None)];
    let runner = random_runner(cfg, 0, f);
    let (tx, rx) = mpsc::channel();
    runner.run(&tx).unwrap();
    // The trial's line claims no compile time its phase does not hold.
    let said: Vec<Option<f64>> = drain(&rx)
        .into_iter()
        .filter_map(|e| match e {
            StudyEvent::TrialCompleted { compile_s, .. } => Some(compile_s),
            _ => None,
        })
        .collect();
    assert_eq!(said, vec![None]);
    let t = trials(&path, name).remove(0);
    assert_eq!(t.state, TrialState::Complete, "{:?}", t.system_attrs);
    assert!(t.user_attr("samples_per_s").is_some());
    assert_eq!(t.user_attr("steady_samples_per_s"), None);
    assert_eq!(
        t.user_attr("compile_not_apart"),
        Some(&JsonValue::from(true))
    );
    let verdict = t.user_attr("verdict").map(|v| v.dumps());
    assert!(
        verdict
            .as_deref()
            .is_some_and(|v| v.starts_with("\"every update compiled kernels, so no update")),
        "{verdict:?}"
    );
}

/// Issue 32: a study run without telemetry (`--telemetry-interval 0`) still stores the trial's
/// own accounting (wall time, samples/s end to end and steady, the phase split with its compile
/// phase) and the verdict the phases give, and no device figure it did not sample.
#[test]
fn a_trial_without_telemetry_keeps_its_phases_and_compile_time() {
    use tradetune_engine::telemetry::{GpuWork, PhaseSplit};
    let name = "no_telemetry";
    let path = db(name);
    let f = Synthetic {
        plan: f32_plan,
        run: |_: &TrialInput<'_>, r: &mut Reporter<'_>| {
            std::thread::sleep(Duration::from_millis(50));
            r.set_work(
                12_000,
                Some(PhaseSplit {
                    env_s: 0.004,
                    inference_s: 0.003,
                    update_s: 0.003,
                    eval_s: 0.0,
                    compile_s: 0.03,
                }),
            );
            r.set_gpu_work(GpuWork {
                kernels_compiled: 90,
                autotune_runs: 4,
                ..GpuWork::default()
            });
            Ok(1.0)
        },
    };
    let mut cfg = config(name, &path, 1, 1);
    cfg.devices = vec![DeviceSlot::new(DeviceSpec::Cuda(0), None)];
    let runner = random_runner(cfg, 0, f);
    let (tx, _rx) = mpsc::channel();
    runner.run(&tx).unwrap();
    let t = trials(&path, name).remove(0);
    assert_eq!(t.state, TrialState::Complete, "{:?}", t.system_attrs);
    let num = |k: &str| t.user_attr(k).and_then(JsonValue::as_f64);
    let wall = num("wall_s").expect("wall_s stored without telemetry");
    assert!(wall >= 0.05, "{wall}");
    assert_eq!(num("phase_compile_s"), Some(0.03));
    assert_eq!(num("phase_env_s"), Some(0.004));
    let end_to_end = num("samples_per_s").expect("samples_per_s");
    let steady = num("steady_samples_per_s").expect("steady_samples_per_s");
    assert!(steady > end_to_end, "{steady} against {end_to_end}");
    assert_eq!(num("kernels_compiled"), Some(90.0));
    // Nothing sampled, so nothing of a device or of the host's load is claimed.
    assert_eq!(t.user_attr("telemetry_device"), None);
    assert!(
        !t.user_attrs
            .iter()
            .any(|(k, _)| k.starts_with("gpu0_") || k.starts_with("host_")),
        "{:?}",
        t.user_attrs
    );
    // Compiling was 75 % of the phases: the verdict says so from the phases alone.
    match t.user_attr("verdict") {
        Some(JsonValue::Str(v)) => assert!(v.starts_with("compiling kernels"), "{v}"),
        other => panic!("no verdict attribute: {other:?}"),
    }
}

/// Issue 32: workers bound to one GPU take turns on it by default (trials sharing a card wait
/// for each other's kernels at every synchronisation), saying why; `gpu_sharing = "shared"`
/// runs them at once. No GPU is opened: the runner decides by the slot's device.
///
/// The turns go round in the order the workers asked for them: with an unfair lock the worker
/// that had the card took it straight back, ran every trial, and the others waited the whole
/// study. The first trial runs until both other workers have queued for the card, so the
/// order is settled before any turn is handed on, and each worker runs two of the six.
#[test]
fn workers_on_one_gpu_take_turns_unless_asked_to_share() {
    use tradetune_engine::study::runner::GpuSharing;
    for sharing in [GpuSharing::Serial, GpuSharing::Shared] {
        let path = db(&format!("gpu_turns_{sharing:?}"));
        let mut cfg = config("turns", &path, 6, 3);
        cfg.devices = vec![DeviceSlot::new(DeviceSpec::Cuda(0), None)];
        cfg.gpu_sharing = sharing;
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        // Shared: the first three trials wait for each other, so they provably overlap.
        let barrier = Arc::new(Barrier::new(3));
        let first = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        // The events the first trial read while it waited for the others to queue.
        let rx = Arc::new(Mutex::new(rx));
        let seen: Arc<Mutex<Vec<StudyEvent>>> = Arc::default();
        let (r, m) = (running.clone(), most.clone());
        let (events, early) = (rx.clone(), seen.clone());
        let f = Synthetic {
            plan: f32_plan,
            run: move |input: &TrialInput<'_>, _: &mut Reporter<'_>| {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                let nth = first.fetch_add(1, Ordering::SeqCst);
                if sharing == GpuSharing::Shared && nth < 3 {
                    barrier.wait();
                }
                if sharing == GpuSharing::Serial && nth == 0 {
                    let events = events.lock().unwrap();
                    let mut early = early.lock().unwrap();
                    let waiting = |e: &[StudyEvent]| {
                        e.iter()
                            .filter(|e| matches!(e, StudyEvent::WorkerWaiting { .. }))
                            .count()
                    };
                    while waiting(&early) < 2 {
                        // Only turns a hang into a failure.
                        match events.recv_timeout(Duration::from_secs(300)) {
                            Ok(e) => early.push(e),
                            Err(e) => {
                                r.fetch_sub(1, Ordering::SeqCst);
                                return Err(TrialError::Failed(format!(
                                    "the other workers never queued: {e}"
                                )));
                            }
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(30));
                r.fetch_sub(1, Ordering::SeqCst);
                Ok(x_of(input))
            },
        };
        let runner = random_runner(cfg, 3, f);
        let report = runner.run(&tx).unwrap();
        assert_eq!(report.trials.len(), 6);
        assert!(
            report
                .trials
                .iter()
                .all(|t| t.state == TrialState::Complete),
            "{:?}",
            report.trials
        );
        let mut all = std::mem::take(&mut *seen.lock().unwrap());
        all.extend(drain(&rx.lock().unwrap()));
        let waits: Vec<String> = all
            .into_iter()
            .filter_map(|e| match e {
                StudyEvent::WorkerWaiting { device, reason, .. } => {
                    Some(format!("{device}: {reason}"))
                }
                _ => None,
            })
            .collect();
        let mut per_worker = [0; 3];
        for t in &report.trials {
            per_worker[t.worker] += 1;
        }
        match sharing {
            GpuSharing::Serial => {
                assert_eq!(most.load(Ordering::SeqCst), 1, "one trial at a time");
                assert!(!waits.is_empty(), "the waiting workers say so");
                assert!(
                    waits[0].starts_with("cuda:0: one trial per GPU at a time"),
                    "{waits:?}"
                );
                assert_eq!(per_worker, [2, 2, 2], "the turns go round");
            }
            GpuSharing::Shared => {
                assert_eq!(most.load(Ordering::SeqCst), 3, "all three at once");
                assert!(waits.is_empty(), "{waits:?}");
            }
        }
    }
}

/// Workers taking turns on a card run one trial on it at a time, so each trial gets the whole
/// fraction of its memory; sharing it, the trials split it. The RTX 4080 preset's three
/// workers were each given a third of the card (4.3 GiB) while it ran nothing else, and a
/// sampled configuration needing 6 GiB was refused.
#[test]
fn a_trial_on_a_gpu_taken_in_turns_gets_the_whole_budget() {
    use tradetune_engine::study::runner::GpuSharing;
    const CARD: u64 = 16 << 30;
    for (sharing, runs) in [(GpuSharing::Serial, 1), (GpuSharing::Shared, 3)] {
        let path = db(&format!("gpu_budget_{sharing:?}"));
        let mut cfg = config("gpu_budget", &path, 3, 3);
        cfg.devices = vec![DeviceSlot::new(DeviceSpec::Cuda(0), Some(CARD))];
        cfg.gpu_sharing = sharing;
        cfg.memory_fraction = 0.8;
        let budgets = Arc::new(Mutex::new(Vec::new()));
        let seen = budgets.clone();
        let f = Synthetic {
            plan: move |input: &TrialInput<'_>| {
                seen.lock().unwrap().push(input.budget.clone());
                Ok(TrialPlan {
                    precision: "f32".into(),
                    memory: Some(MemoryEstimate {
                        params: 6 << 30,
                        ..MemoryEstimate::default()
                    }),
                })
            },
            run: |input: &TrialInput<'_>, _: &mut Reporter<'_>| Ok(x_of(input)),
        };
        let runner = random_runner(cfg, 5, f);
        let (tx, _rx) = mpsc::channel();
        let report = runner.run(&tx).unwrap();
        let budgets = budgets.lock().unwrap();
        assert_eq!(budgets.len(), 3);
        for b in budgets.iter() {
            let b = b.as_ref().expect("a card of known memory has a budget");
            assert_eq!(b.shared_by, runs, "{sharing:?}");
            assert_eq!(
                b.bytes,
                (CARD as f64 * 0.8 / runs as f64) as u64,
                "{sharing:?}"
            );
        }
        for t in &report.trials {
            match sharing {
                GpuSharing::Serial => assert_eq!(t.state, TrialState::Complete, "{t:?}"),
                GpuSharing::Shared => {
                    assert_eq!(t.state, TrialState::Fail, "{t:?}");
                    let reason = t.reason.as_deref().unwrap_or_default();
                    assert!(reason.contains("over the memory budget"), "{reason}");
                }
            }
        }
    }
}

/// A sampler that panics on its first proposal, then samples at random.
struct PanicsFirst {
    inner: RandomSampler,
    calls: AtomicUsize,
}

impl Sampler for PanicsFirst {
    fn name(&self) -> String {
        "panics-first".into()
    }
    fn sample(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("the test's sampler panics");
        }
        self.inner.sample(ctx)
    }
}

/// A sampler that panics while its worker holds the card's turn fails the trial it was asked
/// for (FAIL with the panic's message, not left RUNNING until its heartbeat goes stale, with
/// the worker gone), and the study starts no more, as Optuna stops on a sampler's error; the
/// other worker, waiting for the card, is handed the turn and stops rather than hang.
#[test]
fn a_sampler_that_panics_fails_its_trial_and_the_turn_is_handed_on() {
    let path = db("turn_panic");
    let mut cfg = config("turn_panic", &path, 4, 2);
    cfg.devices = vec![DeviceSlot::new(DeviceSpec::Cuda(0), None)];
    cfg.gpu_sharing = tradetune_engine::study::runner::GpuSharing::Serial;
    let f = Synthetic {
        plan: f32_plan,
        run: |input: &TrialInput<'_>, _: &mut Reporter<'_>| Ok(x_of(input)),
    };
    let runner = Runner::new(
        cfg,
        space(),
        base(),
        Box::new(PanicsFirst {
            inner: RandomSampler::new(2),
            calls: AtomicUsize::new(0),
        }),
        Box::new(NopPruner),
        Arc::new(f),
    )
    .unwrap();
    let (tx, rx) = mpsc::channel();
    // In a thread of its own, so that a worker waiting for a turn nobody holds fails the test
    // rather than hanging it.
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || done.send(runner.run(&tx)));
    let report = match result.recv_timeout(Duration::from_secs(300)) {
        Ok(Ok(report)) => report,
        Ok(Err(e)) => panic!("the study ends without an error: {e}"),
        Err(e) => panic!(
            "the study never finished in 5 minutes ({e}): {:?}",
            drain(&rx)
        ),
    };
    let stored = trials(&path, "turn_panic");
    let states: Vec<TrialState> = stored.iter().map(|t| t.state).collect();
    assert_eq!(states, [TrialState::Fail]);
    assert_eq!(
        attr_str(&stored[0], "fail_reason"),
        "sampler panics-first panicked: the test's sampler panics"
    );
    assert_eq!(report.trials.len(), 1);
    let events = drain(&rx);
    let waits = events
        .iter()
        .filter(|e| matches!(e, StudyEvent::WorkerWaiting { .. }))
        .count();
    // At most the one wait for the turn the sampling worker held.
    assert!(waits <= 1, "{events:?}");
    let finished: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            StudyEvent::WorkerFinished { trials, .. } => Some(*trials),
            _ => None,
        })
        .collect();
    assert_eq!(finished.iter().sum::<usize>(), 1, "{events:?}");
    assert_eq!(finished.len(), 2, "{events:?}");
}

/// A storage error once the trial exists (sampling's parameters, the run's metadata, the
/// heartbeat thread's first beat) stops the worker, but the trial is failed with the error
/// rather than left RUNNING, holding a place in the study's budget until a later run finds
/// its heartbeat stale. The error is provoked by a trigger refusing the write (the beat
/// updates the row the trial's creation inserted).
#[test]
fn a_storage_error_in_a_trial_fails_it_rather_than_leaving_it_running() {
    for (table, write) in [
        ("trial_params", "INSERT"),
        ("tradetune_runs", "INSERT"),
        ("trial_heartbeats", "UPDATE"),
    ] {
        let name = format!("refused_{table}");
        let path = db(&name);
        drop(Storage::open(&path).unwrap());
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(&format!(
                "CREATE TRIGGER refuse BEFORE {write} ON {table} \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
            ))
            .unwrap();
        let f = Synthetic {
            plan: f32_plan,
            run: |input: &TrialInput<'_>, _: &mut Reporter<'_>| Ok(x_of(input)),
        };
        let runner = random_runner(config(&name, &path, 2, 1), 0, f);
        let (tx, _rx) = mpsc::channel();
        let err = runner.run(&tx).expect_err(table).to_string();
        let stored = trials(&path, &name);
        assert_eq!(
            stored.len(),
            1,
            "{table}: the worker stopped after its first trial"
        );
        assert_eq!(stored[0].state, TrialState::Fail, "{table}: {err}");
        let reason = attr_str(&stored[0], "fail_reason");
        assert_eq!(reason, format!("the worker stopped: {err}"), "{table}");
    }
}

/// The CPU is never taken in turns: its workers share a thread pool, as before.
#[test]
fn cpu_workers_never_take_turns() {
    use tradetune_engine::study::runner::GpuSharing;
    assert!(!GpuSharing::Serial.serialises(DeviceSpec::Cpu));
    assert!(GpuSharing::Serial.serialises(DeviceSpec::Wgpu(None)));
    assert!(!GpuSharing::Shared.serialises(DeviceSpec::Wgpu(Some(0))));
}

/// Trials another program enqueued (Optuna's `study.enqueue_trial`: WAITING, their values in
/// the `fixed_params` system attribute; `RetryFailedTrialCallback`: WAITING with parameters
/// stored) are run before new ones, oldest first, with their values: a partial set is
/// completed by the sampler; values the search space cannot take fail their trial, naming the
/// parameter, and the study goes on; a study budget counts a trial taken.
#[test]
fn trials_another_program_enqueued_are_run_first_with_their_values() {
    use TrialState::*;
    let path = db("enqueued_by_optuna");
    let mut space = space();
    let labels = ["synthetic", "other"].map(|l| ParamValue::str(l).into_choice());
    space.add_categorical("label", labels.to_vec()).unwrap();
    fn labelled_x(input: &TrialInput<'_>, _: &mut Reporter<'_>) -> Result<f64, TrialError> {
        let bonus = match &input.params["label"] {
            v if *v == ParamValue::str("other") => 100.0,
            _ => 0.0,
        };
        Ok(x_of(input) + bonus)
    }
    let enqueue = |study: &str, sets: &[&[(&str, JsonValue)]]| {
        let mut s = Storage::open(&path).unwrap();
        let id = match s.study_id(study) {
            Ok(id) => id,
            Err(_) => s.create_study(study, &[Direction::Maximize]).unwrap(),
        };
        for set in sets {
            let fixed: Vec<(String, JsonValue)> = set
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            let by = [("by".to_owned(), JsonValue::from("optuna"))];
            s.enqueue_trial(id, &fixed, &by).unwrap();
        }
    };
    enqueue(
        "queued",
        &[
            &[
                ("x", JsonValue::Float(7.5)),
                ("label", JsonValue::from("other")),
            ],
            // An int for a float, as Python users write it; the label is sampled.
            &[("x", JsonValue::Int(2))],
            &[("x", JsonValue::Float(99.0))],
            &[("y", JsonValue::Float(1.0))],
        ],
    );
    // As `RetryFailedTrialCallback` re-enqueues a failed trial: its parameters stored.
    {
        let mut s = Storage::open(&path).unwrap();
        let id = s.study_id("queued").unwrap();
        let mut retry = tradetune_engine::storage::NewTrial::new(Waiting);
        retry.params = vec![("x".into(), 4.25, space.get("x").unwrap().clone())];
        retry.system_attrs = vec![("failed_trial".into(), JsonValue::Int(0))];
        s.add_trial(id, &retry).unwrap();
    }
    let runner = |cfg: RunnerConfig| {
        Runner::new(
            cfg,
            space.clone(),
            base(),
            Box::new(RandomSampler::new(3)),
            Box::new(NopPruner),
            Arc::new(Synthetic {
                plan: f32_plan,
                run: labelled_x,
            }),
        )
        .unwrap()
    };
    let states =
        |study: &str| -> Vec<TrialState> { trials(&path, study).iter().map(|t| t.state).collect() };
    let (tx, _rx) = mpsc::channel();
    // Two trials: the two oldest enqueued, not new ones.
    runner(config("queued", &path, 2, 1)).run(&tx).unwrap();
    assert_eq!(
        states("queued"),
        [Complete, Complete, Waiting, Waiting, Waiting]
    );
    runner(config("queued", &path, 4, 1)).run(&tx).unwrap();
    assert_eq!(
        states("queued"),
        [Complete, Complete, Fail, Fail, Complete, Complete]
    );
    let stored = trials(&path, "queued");
    let external = |t: &TrialRecord, name: &str| t.param(name).unwrap().external().unwrap();
    assert_eq!(stored[0].value(), Some(107.5));
    assert_eq!(external(&stored[0], "x"), ParamValue::Float(7.5));
    assert_eq!(external(&stored[1], "x"), ParamValue::Float(2.0));
    assert!(
        stored[1].param("label").is_some(),
        "the sampler completes a partial set"
    );
    for t in &stored[..4] {
        assert!(t.system_attr("fixed_params").is_some(), "#{}", t.number);
        assert_eq!(attr_str(t, "by"), "optuna", "#{}", t.number);
    }
    let reason = attr_str(&stored[2], "fail_reason");
    assert!(
        reason.starts_with("enqueued parameters {\"x\": 99.0}: search parameter 'x'"),
        "{reason}"
    );
    let reason = attr_str(&stored[3], "fail_reason");
    assert!(
        reason.contains("parameter 'y' is not in the search space (its parameters: label, x)"),
        "{reason}"
    );
    assert_eq!(
        external(&stored[4], "x"),
        ParamValue::Float(4.25),
        "its stored value"
    );
    assert!(stored[4].param("label").is_some(), "and a sampled label");
    assert!(
        stored[5].system_attr("fixed_params").is_none(),
        "a new trial"
    );

    // A study budget of 1: one enqueued trial is taken, the other waits.
    enqueue(
        "budget",
        &[
            &[("x", JsonValue::Float(1.0))],
            &[("x", JsonValue::Float(2.0))],
        ],
    );
    let mut cfg = config("budget", &path, 3, 1);
    cfg.study_budget = Some(1);
    runner(cfg).run(&tx).unwrap();
    assert_eq!(states("budget"), [Complete, Waiting]);
}

/// A trial another program enqueued that an interrupt cuts short waits again, as a grid point
/// or an entry of the study file's own queue is run again: a WAITING copy with its values and
/// attributes, marked as Optuna's `RetryFailedTrialCallback` marks its copies, stored with the
/// trial's FAIL in one transaction. A trial the sampler made is not copied (the sampler makes
/// another), and the next run takes the copy first.
#[test]
fn an_enqueued_trial_an_interrupt_cut_short_waits_again() {
    use TrialState::*;
    let path = db("enqueued_interrupted");
    {
        let mut s = Storage::open(&path).unwrap();
        let id = s.create_study("again", &[Direction::Maximize]).unwrap();
        let fixed = [("x".to_owned(), JsonValue::Float(7.5))];
        let by = [("by".to_owned(), JsonValue::from("optuna"))];
        s.enqueue_trial(id, &fixed, &by).unwrap();
    }
    // Both workers' trials run until the study is interrupted, once both have started.
    let until_stopped = Synthetic {
        plan: f32_plan,
        run: |_: &TrialInput<'_>, r: &mut Reporter<'_>| {
            while !r.stop_requested() {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TrialError::Stopped)
        },
    };
    let runner = random_runner(config("again", &path, 4, 2), 5, until_stopped);
    let stop = runner.stop_handle();
    let (tx, rx) = mpsc::channel();
    let mut failed = BTreeMap::new();
    std::thread::scope(|s| {
        let run = s.spawn(|| runner.run(&tx));
        let mut started = 0;
        for e in rx.iter() {
            match e {
                StudyEvent::TrialStarted { .. } => {
                    started += 1;
                    if started == 2 {
                        stop.interrupt();
                    }
                }
                StudyEvent::TrialFailed { number, reason, .. } => {
                    failed.insert(number, reason);
                }
                StudyEvent::StudyFinished { .. } => break,
                _ => {}
            }
        }
        run.join().unwrap().unwrap();
    });
    let stored = trials(&path, "again");
    let states: Vec<TrialState> = stored.iter().map(|t| t.state).collect();
    assert_eq!(states, [Fail, Fail, Waiting], "{failed:?}");
    for t in &stored[..2] {
        assert_eq!(attr_str(t, "fail_reason"), "interrupted", "#{}", t.number);
    }
    assert_eq!(
        failed[&0],
        "interrupted; its enqueued parameters wait again as trial 2"
    );
    assert_eq!(failed[&1], "interrupted", "a trial the sampler made");
    let copy = &stored[2];
    assert_eq!(
        copy.system_attr("fixed_params"),
        Some(&JsonValue::Object(vec![(
            "x".into(),
            JsonValue::Float(7.5)
        )]))
    );
    assert_eq!(attr_str(copy, "by"), "optuna");
    assert_eq!(copy.system_attr("failed_trial"), Some(&JsonValue::Int(0)));
    assert_eq!(
        copy.system_attr("retry_history"),
        Some(&JsonValue::Array(vec![JsonValue::Int(0)]))
    );
    assert_eq!(
        copy.user_attrs,
        [("by".to_owned(), JsonValue::from("optuna"))],
        "the attributes it was enqueued with, not its run's"
    );
    assert!(
        stored[0].user_attrs.len() > 1,
        "the run's summary: {:?}",
        stored[0].user_attrs
    );
    assert!(copy.params.is_empty());

    // The next run takes the copy first, with its values; cut short again, its copy keeps
    // the line's first trial and adds to the history; a third time, it is not enqueued again.
    let cut_short = |seed: u64| -> (Vec<f64>, BTreeMap<u64, String>) {
        let xs = Arc::new(Mutex::new(Vec::new()));
        let seen = xs.clone();
        let until_stopped = Synthetic {
            plan: f32_plan,
            run: move |input: &TrialInput<'_>, r: &mut Reporter<'_>| {
                seen.lock().unwrap().push(x_of(input));
                while !r.stop_requested() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(TrialError::Stopped)
            },
        };
        let runner = random_runner(config("again", &path, 1, 1), seed, until_stopped);
        let stop = runner.stop_handle();
        let (tx, rx) = mpsc::channel();
        let mut failed = BTreeMap::new();
        std::thread::scope(|s| {
            let run = s.spawn(|| runner.run(&tx));
            for e in rx.iter() {
                match e {
                    StudyEvent::TrialStarted { .. } => stop.interrupt(),
                    StudyEvent::TrialFailed { number, reason, .. } => {
                        failed.insert(number, reason);
                    }
                    StudyEvent::StudyFinished { .. } => break,
                    _ => {}
                }
            }
            run.join().unwrap().unwrap();
        });
        let xs = xs.lock().unwrap().clone();
        (xs, failed)
    };
    let (xs, failed) = cut_short(6);
    assert_eq!(xs, [7.5], "the copy ran first, with its values");
    assert_eq!(
        failed[&2],
        "interrupted; its enqueued parameters wait again as trial 3"
    );
    let copy = &trials(&path, "again")[3];
    assert_eq!(copy.system_attr("failed_trial"), Some(&JsonValue::Int(0)));
    assert_eq!(
        copy.system_attr("retry_history"),
        Some(&JsonValue::Array(vec![
            JsonValue::Int(0),
            JsonValue::Int(2)
        ]))
    );
    let (xs, failed) = cut_short(7);
    assert_eq!(xs, [7.5]);
    assert_eq!(
        failed[&3],
        "interrupted; cut short 3 times, its enqueued parameters are not enqueued again"
    );
    let states: Vec<TrialState> = trials(&path, "again").iter().map(|t| t.state).collect();
    assert_eq!(states, [Fail, Fail, Fail, Fail]);
}

/// A grid of three points in a study of ten trials: three run, and the study ends there with
/// no trial failed "not run" (one a worker, each of two, made and failed once the grid was
/// used up). Run again, it makes none.
#[test]
fn a_used_up_grid_ends_the_study_without_a_trial_to_fail() {
    let path = db("grid_used_up");
    let grid = BTreeMap::from([(
        "x".to_owned(),
        vec![
            ParamValue::Float(1.0),
            ParamValue::Float(2.0),
            ParamValue::Float(3.0),
        ],
    )]);
    let run = |workers: usize| {
        let f = Synthetic {
            plan: f32_plan,
            run: |input: &TrialInput<'_>, _: &mut Reporter<'_>| Ok(x_of(input)),
        };
        let runner = Runner::new(
            config("grid_used_up", &path, 10, workers),
            space(),
            base(),
            Box::new(GridSampler::new(grid.clone(), &space(), 7).unwrap()),
            Box::new(NopPruner),
            Arc::new(f),
        )
        .unwrap();
        let (tx, rx) = mpsc::channel();
        let report = runner.run(&tx).unwrap();
        // The end says why it came before the budget.
        let ran_out = drain(&rx).iter().find_map(|e| match e {
            StudyEvent::StudyFinished { ran_out, .. } => Some(*ran_out),
            _ => None,
        });
        assert_eq!(ran_out, Some(true));
        report
    };
    let report = run(2);
    let stored = trials(&path, "grid_used_up");
    assert_eq!(report.trials.len(), stored.len());
    // Every trial ran a point; a worker finding only points still RUNNING may run one of them
    // again, as Optuna's `GridSampler` does (the trial running it may yet fail).
    let states: Vec<TrialState> = stored.iter().map(|t| t.state).collect();
    assert!(
        states.iter().all(|s| *s == TrialState::Complete),
        "{states:?}: {:?}",
        stored
            .iter()
            .map(|t| t.system_attr("fail_reason"))
            .collect::<Vec<_>>()
    );
    let mut xs: Vec<f64> = stored.iter().map(|t| t.value().unwrap()).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    assert_eq!(xs, [1.0, 2.0, 3.0]);

    let again = run(1);
    assert!(again.trials.is_empty(), "{:?}", again.trials);
    assert_eq!(trials(&path, "grid_used_up").len(), stored.len());
}

/// Records how many trials each sampling saw, sampling at random.
struct Recording {
    inner: RandomSampler,
    seen: Arc<Mutex<Vec<(u64, usize)>>>,
}

impl Sampler for Recording {
    fn name(&self) -> String {
        "recording".into()
    }
    fn sample(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        self.seen
            .lock()
            .unwrap()
            .push((ctx.trial_number, ctx.history.len()));
        self.inner.sample(ctx)
    }
}

/// Under Hyperband the sampler learns from every trial of the study, as Optuna 5.0's TPE does
/// (its `_BracketStudy` filters only what the pruner reads): once the brackets are known
/// (after the first trial's first report), trial n still sees the n trials before it, not
/// only its bracket's, so start-up and the model count the whole study.
#[test]
fn under_hyperband_the_sampler_sees_every_trial_of_the_study() {
    use tradetune_engine::study::pruner::HyperbandPruner;
    let path = db("hyperband_history");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let f = Synthetic {
        plan: f32_plan,
        run: |input: &TrialInput<'_>, r: &mut Reporter<'_>| {
            let x = x_of(input);
            for step in 1..=3 {
                r.report_and_check(step, x)?;
            }
            Ok(x)
        },
    };
    let runner = Runner::new(
        config("hb", &path, 12, 1),
        space(),
        base(),
        Box::new(Recording {
            inner: RandomSampler::new(2),
            seen: seen.clone(),
        }),
        Box::new(HyperbandPruner::new(1, Some(9), 3, 0).unwrap()),
        Arc::new(f),
    )
    .unwrap();
    let (tx, _rx) = mpsc::channel();
    runner.run(&tx).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 12, "{seen:?}");
    for (number, history) in seen {
        assert_eq!(history, number as usize, "trial #{number}");
    }
    // The brackets do split these trials (3 of them for 1..9 at η 3): a bracket's view would
    // have been smaller.
    use tradetune_engine::study::{
        Direction as StudyDirection, PruneContext, Pruner, Trial, TrialState as State,
    };
    let hb = HyperbandPruner::new(1, Some(9), 3, 0).unwrap();
    let asking = Trial::new(
        0,
        State::Running,
        tradetune_engine::study::InternalParams::new(),
    )
    .with_intermediate([(1, 0.0)]);
    let _ = hb.prune(&PruneContext {
        study_name: "hb",
        direction: StudyDirection::Minimize,
        trials: &[],
        trial: &asking,
    });
    let brackets: HashSet<usize> = (0..12).filter_map(|n| hb.bracket_of("hb", n)).collect();
    assert!(brackets.len() > 1, "{brackets:?}");
    assert_eq!(trials(&path, "hb").len(), 12);
}

/// A trial's last value is reported without following the pruner's verdict, but the pruner is
/// still asked, so what it keeps is stored: successive halving's rung value at a trial's last
/// step, which later trials (and Optuna's workers) compete against.
#[test]
fn a_last_value_still_records_the_rung_it_reached() {
    use tradetune_engine::study::pruner::SuccessiveHalvingPruner;
    let path = db("last_rung");
    let f = Synthetic {
        plan: f32_plan,
        run: |input: &TrialInput<'_>, r: &mut Reporter<'_>| {
            let x = x_of(input);
            r.report_last(1, x)?;
            Ok(x)
        },
    };
    let runner = Runner::new(
        config("last_rung", &path, 3, 1),
        space(),
        base(),
        Box::new(RandomSampler::new(4)),
        Box::new(SuccessiveHalvingPruner::new(Some(1), 3, 0, 0).unwrap()),
        Arc::new(f),
    )
    .unwrap();
    let (tx, _rx) = mpsc::channel();
    runner.run(&tx).unwrap();
    let stored = trials(&path, "last_rung");
    assert_eq!(stored.len(), 3);
    for t in &stored {
        assert_eq!(t.state, TrialState::Complete, "#{}", t.number);
        let rung = t.system_attr("completed_rung_0");
        assert_eq!(
            rung,
            Some(&JsonValue::from(t.value().unwrap())),
            "#{}: {:?}",
            t.number,
            t.system_attrs
        );
    }
}
