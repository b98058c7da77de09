//! Workers in separate processes on one PostgreSQL study: `tradetune study create` records it,
//! three `tradetune worker` processes and one Optuna process draw its trials, one worker is
//! killed with `kill -9` mid-trial; every trial is accounted for, no number is used twice, the
//! killed trial is FAIL with a reason, and Optuna (`optuna.load_study`) and optuna-dashboard's
//! `/api/studies` read the result. Also: a worker whose market data differs is refused.
//!
//! Needs `TRADETUNE_TEST_POSTGRES` (see `engine/storage/tests/support/pg.rs`) and python3 with
//! optuna, psycopg and optuna-dashboard; skipped loudly without them unless required
//! (`TRADETUNE_REQUIRE_POSTGRES=1`, `TRADETUNE_REQUIRE_OPTUNA=1`, as `.ci/run` sets).

use crate::common;
use crate::pg;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{hung, scratch, text, tradetune};
use pg::python_has;
use tradetune_engine::storage::{JsonValue, Storage, TrialState};

/// Tiny PPO trials (4 envs × 32 steps, 16-wide nets) of `steps` timesteps on the bundled data.
fn study_file(dir: &Path, steps: usize) -> PathBuf {
    let p = dir.join(format!("shared_{steps}.toml"));
    std::fs::write(
        &p,
        format!(
            r#"[study]
name = "shared"
n_trials = 6
workers = 1
devices = ["cpu"]

[fixed]
env.n_envs = 4
ppo.n_steps = 32
ppo.batch_size = 64
ppo.n_epochs = 2
ppo.policy.net_arch.pi = [16, 16]
ppo.policy.net_arch.vf = [16, 16]
train.total_timesteps = {steps}
train.eval_every = 1

[search]
"ppo.learning_rate" = {{ low = 1e-4, high = 1e-3, log = true }}
"ppo.gamma" = {{ low = 0.9, high = 0.99 }}

[sampler]
kind = "tpe"
seed = 3

[pruner]
kind = "none"
"#
        ),
    )
    .unwrap();
    p
}

fn worker(url: &str, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args([
            "worker",
            "--storage",
            url,
            "--study",
            "shared",
            "--heartbeat",
            "0.2",
            "--stale-after",
            "2",
            "--telemetry-interval",
            "0.5",
        ])
        .args(extra)
        // A PostgreSQL study's checkpoints go under the user's data folder: a test's under
        // cargo's temp dir, not the real one's (163 folders had gathered there, 38 MB).
        .env(
            "XDG_DATA_HOME",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_worker_data"),
        )
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a worker")
}

fn trials(url: &str) -> Vec<tradetune_engine::storage::TrialRecord> {
    let s = Storage::open_read_only(url).unwrap();
    s.trials(s.study_id("shared").unwrap()).unwrap()
}

#[test]
fn three_workers_and_optuna_share_a_postgres_study_and_survive_kill_9() {
    let test = "three_workers_and_optuna_share_a_postgres_study_and_survive_kill_9";
    let Some(url) = pg::fresh_database("workers") else {
        return;
    };
    if !python_has(test, "optuna, psycopg, optuna_dashboard") {
        return;
    }
    let dir = scratch("cli_worker", "shared");
    let long = study_file(&dir, 4096);
    let o = tradetune(&["study", "create", long.to_str().unwrap(), "--storage", &url]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(out.contains("6 trials"), "{out}");
    assert!(!out.contains("password"), "{out}");

    // Worker A takes the first trial and is killed in the middle of it.
    let mut a = worker(&url, &[]);
    let started = Instant::now();
    while !trials(&url).iter().any(|t| t.state == TrialState::Running) {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "worker A started no trial within 5 minutes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    a.kill().unwrap(); // SIGKILL: its trial stays RUNNING, its heartbeat stops
    a.wait().unwrap();
    // Past the grace period, the next worker to start a trial fails it.
    std::thread::sleep(Duration::from_millis(2_500));

    let (b, c) = (worker(&url, &[]), worker(&url, &[]));
    // An Optuna process adds trials to the same study at the same time, same parameters.
    let optuna = Command::new("python3")
        .args([
            "-c",
            "import sys, optuna\n\
             optuna.logging.set_verbosity(optuna.logging.WARNING)\n\
             s = optuna.load_study(study_name='shared', storage=sys.argv[1])\n\
             def f(t):\n\
             \x20   return t.suggest_float('ppo.learning_rate', 1e-4, 1e-3, log=True) \
             + t.suggest_float('ppo.gamma', 0.9, 0.99)\n\
             s.optimize(f, n_trials=2)\n",
            &url,
        ])
        .output()
        .unwrap();
    assert!(
        optuna.status.success(),
        "the Optuna process failed: {}",
        text(&optuna.stderr)
    );
    for w in [b, c] {
        let o = w.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "a worker failed:\n{}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }

    let stored = trials(&url);
    let mut numbers: Vec<i64> = stored.iter().map(|t| t.number).collect();
    numbers.sort();
    assert_eq!(
        numbers,
        (0..stored.len() as i64).collect::<Vec<_>>(),
        "every number used once"
    );
    assert!(stored.iter().all(|t| t.state != TrialState::Running));
    let failed: Vec<_> = stored
        .iter()
        .filter(|t| t.state == TrialState::Fail)
        .collect();
    assert_eq!(failed.len(), 1, "the killed worker's trial, and only it");
    match failed[0].system_attr("fail_reason") {
        Some(JsonValue::Str(r)) => assert!(r.starts_with("worker lost"), "{r}"),
        other => panic!("fail_reason: {other:?}"),
    }
    // The budget (6) is spent by the workers' and Optuna's trials together; workers stop there.
    let counted = stored
        .iter()
        .filter(|t| matches!(t.state, TrialState::Complete | TrialState::Pruned))
        .count();
    assert!((6..=8).contains(&counted), "{counted} trials counted");
    // Trials of our workers name their host and process; two processes shared the work.
    let labels: std::collections::BTreeSet<String> = stored
        .iter()
        .filter_map(|t| match t.user_attr("worker") {
            Some(JsonValue::Str(w)) => Some(w.split('/').next().unwrap_or_default().to_owned()),
            _ => None,
        })
        .collect();
    assert!(labels.len() >= 2, "{labels:?}");
    // Telemetry from the workers went to the same database.
    let s = Storage::open_read_only(&url).unwrap();
    let with_telemetry = stored
        .iter()
        .filter(|t| !s.telemetry(Some(t.trial_id)).unwrap().is_empty())
        .count();
    assert!(with_telemetry > 0);

    // Optuna and optuna-dashboard read the result.
    let check = Command::new("python3")
        .args([
            "-c",
            "import io, json, sys, optuna\n\
             from optuna_dashboard import wsgi\n\
             s = optuna.load_study(study_name='shared', storage=sys.argv[1])\n\
             print('trials', len(s.trials), sorted(t.number for t in s.trials) == list(range(len(s.trials))))\n\
             app = wsgi(sys.argv[1])\n\
             env = {'REQUEST_METHOD': 'GET', 'PATH_INFO': '/api/studies', 'QUERY_STRING': '',\n\
             \x20      'SERVER_NAME': 'x', 'SERVER_PORT': '80', 'wsgi.url_scheme': 'http',\n\
             \x20      'wsgi.input': io.BytesIO(), 'wsgi.errors': io.StringIO()}\n\
             status = []\n\
             body = b''.join(app(env, lambda st, h, *a: status.append(st)))\n\
             names = [x['study_name'] for x in json.loads(body)['study_summaries']]\n\
             print(status[0], names)\n",
            &url,
        ])
        .output()
        .unwrap();
    let said = text(&check.stdout);
    assert!(check.status.success(), "{said}{}", text(&check.stderr));
    assert!(
        said.contains(&format!("trials {} True", stored.len())),
        "{said}"
    );
    assert!(said.contains("200 OK ['shared']"), "{said}");
}

#[test]
fn a_worker_with_other_market_data_is_refused() {
    let Some(url) = pg::fresh_database("fingerprint") else {
        return;
    };
    let dir = scratch("cli_worker", "fingerprint");
    let file = study_file(&dir, 128);
    let o = tradetune(&["study", "create", file.to_str().unwrap(), "--storage", &url]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Tamper with the recorded fingerprint, as if the study had been created on other data.
    let mut s = Storage::open(&url).unwrap();
    let id = s.study_id("shared").unwrap();
    s.set_study_system_attr(
        id,
        "tradetune:data_fingerprint",
        &JsonValue::from("1x1x1:0"),
    )
    .unwrap();
    let o = tradetune(&["worker", "--storage", &url, "--study", "shared"]);
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("market data differs"), "{err}");
    assert!(err.contains("1x1x1:0"), "{err}");
    assert!(trials(&url).is_empty(), "no trial was started");
    // A study that was not created for workers says how to create it.
    s.create_study(
        "plain",
        &[tradetune_engine::storage::StudyDirection::Maximize],
    )
    .unwrap();
    let o = tradetune(&["worker", "--storage", &url, "--study", "plain"]);
    let err = text(&o.stderr);
    assert!(err.contains("tradetune study create"), "{err}");
}

/// SIGTERM (as Ctrl-C) during `tradetune study run`: the running trial ends as FAIL
/// "interrupted" and the process exits by itself, with status 143; nothing is left RUNNING.
#[test]
fn a_signal_interrupts_a_study_and_leaves_nothing_running() {
    let dir = scratch("cli_worker", "signal");
    let db = dir.join("studies.db");
    let long = study_file(&dir, 50_000_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args([
            "study",
            "run",
            long.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--telemetry-interval",
            "0.5",
        ])
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let running = Storage::open_read_only(&db).ok().and_then(|s| {
            let trials = s.trials(s.study_id("shared").ok()?).ok()?;
            Some(trials.iter().any(|t| t.state == TrialState::Running))
        });
        if running == Some(true) {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            hung(&mut child, "no trial started within 5 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: sends a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let waited = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if waited.elapsed() > Duration::from_secs(120) {
            hung(
                &mut child,
                "the study did not stop within 2 minutes of SIGTERM",
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("interrupted"), "{status:?}: {err}");
    // The shell's status for a run stopped by SIGTERM (128 + 15): a script's `&&` stops.
    assert_eq!(status.code(), Some(143), "{err}");
    let s = Storage::open_read_only(&db).unwrap();
    let stored = s.trials(s.study_id("shared").unwrap()).unwrap();
    assert_eq!(stored.len(), 1, "no trial started after the signal");
    assert_eq!(stored[0].state, TrialState::Fail);
    assert_eq!(
        stored[0].system_attr("fail_reason"),
        Some(&JsonValue::from("interrupted"))
    );
}

/// Trials enqueued with Optuna's `study.enqueue_trial` on a study TradeTune created are run by
/// the next worker before any other, oldest first, with the enqueued values (a partial set
/// completed by the study's sampler), and Optuna reads them back; one the budget leaves no
/// room for waits.
#[test]
fn trials_optuna_enqueued_are_run_by_a_worker_with_their_values() {
    let test = "trials_optuna_enqueued_are_run_by_a_worker_with_their_values";
    if !python_has(test, "optuna") {
        return;
    }
    let dir = scratch("cli_worker", "enqueued");
    let db = dir.join("studies.db");
    let file = study_file(&dir, 128);
    let db_arg = db.to_str().unwrap();
    let o = tradetune(&[
        "study",
        "create",
        file.to_str().unwrap(),
        "--storage",
        db_arg,
        "--trials",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let python = |script: &str| {
        let o = Command::new("python3")
            .args(["-c", script, &format!("sqlite:///{db_arg}")])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    python(
        "import sys, optuna\n\
         s = optuna.load_study(study_name='shared', storage=sys.argv[1])\n\
         s.enqueue_trial({'ppo.learning_rate': 5e-4, 'ppo.gamma': 0.95}, user_attrs={'by': 'me'})\n\
         s.enqueue_trial({'ppo.gamma': 0.91})\n\
         s.enqueue_trial({'ppo.gamma': 0.92})\n",
    );
    let o = tradetune(&["worker", "--storage", db_arg, "--study", "shared"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        out.contains(
            "3 trial(s) already in the study, 3 of them enqueued (WAITING): they run first"
        ),
        "{out}"
    );
    let said = python(
        "import sys, optuna\n\
         s = optuna.load_study(study_name='shared', storage=sys.argv[1])\n\
         t = s.trials\n\
         print(t[0].params == {'ppo.learning_rate': 5e-4, 'ppo.gamma': 0.95}, t[0].user_attrs['by'])\n\
         print(t[1].params['ppo.gamma'] == 0.91, 1e-4 <= t[1].params['ppo.learning_rate'] <= 1e-3)\n\
         print([x.state.name for x in t])\n",
    );
    assert_eq!(
        said, "True me\nTrue True\n['COMPLETE', 'COMPLETE', 'WAITING']\n",
        "as Optuna reads it: the budget of 2 ran the two oldest"
    );
}

/// The PostgreSQL server ends every session of the study's database while a worker trains (as
/// a restart does, or an administrator's `pg_terminate_backend`): the worker connects again
/// and goes on, says so, and no trial fails for it.
#[test]
fn a_worker_outlives_the_server_closing_its_connections() {
    let test = "a_worker_outlives_the_server_closing_its_connections";
    let Some(url) = pg::fresh_database("reconnect") else {
        return;
    };
    if !python_has(test, "psycopg") {
        return;
    }
    let dir = scratch("cli_worker", "reconnect");
    let file = study_file(&dir, 4096);
    let o = tradetune(&[
        "study",
        "create",
        file.to_str().unwrap(),
        "--storage",
        &url,
        "--trials",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let end_sessions = || {
        let o = Command::new("python3")
            .args([
                "-c",
                "import sys, psycopg\n\
                 with psycopg.connect(sys.argv[1], autocommit=True) as c:\n\
                 \x20   print(c.execute('SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()').fetchone()[0])\n",
                url.as_str(),
            ])
            .output()
            .expect("run python3");
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout).trim().parse::<usize>().unwrap()
    };
    let mut w = worker(&url, &[]);
    let started = Instant::now();
    let mut ended = 0;
    // Twice while a trial runs (the worker's connection and its heartbeat's each time).
    while w.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(600) {
            hung(&mut w, "the worker did not end within 10 minutes");
        }
        if ended < 2 && trials(&url).iter().any(|t| t.state == TrialState::Running) {
            ended += usize::from(end_sessions() > 0);
            std::thread::sleep(Duration::from_millis(300));
        } else {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert!(ended > 0, "no trial ran long enough to end its sessions");
    let o = w.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{}{err}", text(&o.stdout));
    let said = err
        .matches("the server closed the connection; connected again")
        .count();
    assert!(said >= 1, "{err}");
    // One line for all of the worker's connections (its storage's, its heartbeat's, its
    // telemetry's), not one each, for both endings (they came within a minute of each other).
    if started.elapsed() < Duration::from_secs(60) {
        assert_eq!(said, 1, "{err}");
    }
    let states: Vec<TrialState> = trials(&url).iter().map(|t| t.state).collect();
    assert_eq!(
        states,
        [TrialState::Complete, TrialState::Complete],
        "{}{err}",
        text(&o.stdout)
    );
}
