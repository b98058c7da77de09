//! `tradetune study` run as the real binary: a tiny study on the CPU, list, export, bad study
//! files, and a study that survives `kill -9` of its process and resumes its numbering.

use crate::common;
use crate::pg;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{json_events, scratch, text, tradetune};
use tradetune_engine::storage::{JsonValue, Storage, TrialState};
use tradetune_engine::study::catalogue;

/// A study of tiny PPO trials (4 envs × 32 steps, 16-wide nets, an evaluation after every
/// update) on the bundled data.
fn tiny_study(dir: &Path, name: &str, total_timesteps: usize) -> PathBuf {
    let p = dir.join(format!("{name}_{total_timesteps}.toml"));
    std::fs::write(
        &p,
        format!(
            r#"[study]
name = "{name}"
n_trials = 2
workers = 2
devices = ["cpu", "cpu"]

[fixed]
env.n_envs = 4
ppo.n_steps = 32
ppo.batch_size = 64
ppo.n_epochs = 2
ppo.policy.net_arch.pi = [16, 16]
ppo.policy.net_arch.vf = [16, 16]
train.total_timesteps = {total_timesteps}
train.eval_every = 1

[search]
"ppo.learning_rate" = {{ low = 1e-4, high = 1e-3, log = true }}
"ppo.gamma" = {{ low = 0.9, high = 0.99 }}

[sampler]
kind = "random"
seed = 1

[pruner]
kind = "none"
"#
        ),
    )
    .unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_tiny_study_runs_then_lists_and_exports() {
    let dir = scratch("cli_study", "tiny");
    let db = dir.join("studies.db");
    // One update per trial (a few hundredths of a second) and a telemetry interval of a
    // minute: no periodic tick can land inside a trial, so every tagged row below comes from
    // the samples each trial takes as it starts and ends, however fast the machine is.
    let file = tiny_study(&dir, "tiny", 128);
    let o = tradetune(&[
        "study",
        "run",
        s(&file),
        "--db",
        s(&db),
        "--telemetry-interval",
        "60",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.matches(" COMPLETE ").count(), 2, "{out}");
    assert!(out.contains("worker 0 on cpu (flex)"), "{out}");
    assert!(out.contains("worker 1 on cpu#1 (flex)"), "{out}");
    assert!(out.contains("AAPL, GOOG, IBM, MSFT"), "{out}");

    let o = tradetune(&["study", "list", "--db", s(&db)]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let line = out.lines().find(|l| l.starts_with("tiny ")).expect(&out);
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[1..6], ["2", "2", "0", "0", "0"], "{line}");

    let o = tradetune(&["study", "show", "tiny", "--db", s(&db)]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(out.matches("COMPLETE").count(), 2, "{out}");
    assert!(out.contains("ppo.learning_rate="), "{out}");
    assert!(out.contains("best: #"), "{out}");

    let trials_csv = dir.join("trials.csv");
    let telemetry_csv = dir.join("telemetry.csv");
    let o = tradetune(&[
        "study",
        "export",
        "tiny",
        "--db",
        s(&db),
        "--trials",
        s(&trials_csv),
        "--telemetry",
        s(&telemetry_csv),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // An export named where the database is (a slip of tab completion) is refused, the
    // database left whole; so are both exports named one file.
    let before = std::fs::read(&db).unwrap();
    let o = tradetune(&[
        "study",
        "export",
        "tiny",
        "--db",
        s(&db),
        "--trials",
        s(&db),
    ]);
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("is a SQLite database"), "{err}");
    assert!(err.contains("choose another file name"), "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), before);
    let o = tradetune(&[
        "study",
        "export",
        "tiny",
        "--db",
        s(&db),
        "--trials",
        s(&trials_csv),
        "--telemetry",
        s(&trials_csv),
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--trials and --telemetry both name"));
    let mut r = csv::Reader::from_path(&trials_csv).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    for col in [
        "number",
        "value",
        "params_ppo.learning_rate",
        "params_ppo.gamma",
        "user_attrs_device",
        "user_attrs_precision",
        "user_attrs_wall_s",
        "user_attrs_val_sharpe",
        "state",
    ] {
        assert!(
            header.iter().any(|h| h == col),
            "{col} missing in {header:?}"
        );
    }
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    let state = header.iter().position(|h| h == "state").unwrap();
    assert!(rows.iter().all(|row| &row[state] == "COMPLETE"));

    let mut r = csv::Reader::from_path(&telemetry_csv).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    for col in [
        "timestamp_utc",
        "gpu0_util_pct",
        "gpu0_mem_used_mib",
        "gpu0_temp_c",
        "gpu0_power_w",
        "gpu0_sm_clock_mhz",
        "cpu_pct",
        "rss_mib",
        "trial",
    ] {
        assert!(
            header.iter().any(|h| h == col),
            "{col} missing in {header:?}"
        );
    }
    let rss = header.iter().position(|h| h == "rss_mib").unwrap();
    let trial = header.iter().position(|h| h == "trial").unwrap();
    let timestamp = header.iter().position(|h| h == "timestamp_utc").unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    for row in &rows {
        assert!(row[rss].parse::<f64>().unwrap() > 0.0);
        assert!(["0", "1"].contains(&&row[trial]), "{row:?}");
    }
    // Each trial has its start and its end sample (two distinct times at least).
    for number in ["0", "1"] {
        let mut times: Vec<&str> = rows
            .iter()
            .filter(|row| &row[trial] == number)
            .map(|row| &row[timestamp])
            .collect();
        times.dedup();
        assert!(
            times.len() >= 2,
            "trial {number} has telemetry at {times:?} only; rows: {rows:?}"
        );
    }
}

/// `tradetune study run FILE --db DB --telemetry-interval 0`.
fn run_without_telemetry(file: &Path, db: &Path) -> std::process::Output {
    tradetune(&[
        "study",
        "run",
        s(file),
        "--db",
        s(db),
        "--telemetry-interval",
        "0",
    ])
}

/// A study run whose every trial FAILED ends with an error naming the first failure (exit
/// status 1), so a script does not go on as if it had results; its trials are stored.
#[test]
fn a_run_whose_every_trial_failed_exits_with_an_error() {
    let dir = scratch("cli_study", "all_failed");
    let db = dir.join("studies.db");
    let file = dir.join("all_failed.toml");
    // A validation split too short for the lookback: refused by every trial as it starts
    // (the study's settings are sound; the data's split is what leaves no steps to score).
    // The launch would refuse the study for it, but 13 searched ranges make more
    // combinations of their ends than it judges (8,192 of 4,096), so the trials meet it.
    let wide = "\"ppo.gae_lambda\" = { low = 0.9, high = 0.99 }\n\
                \"ppo.clip_range\" = { low = 0.1, high = 0.3 }\n\
                \"ppo.ent_coef\" = { low = 0.0, high = 0.01 }\n\
                \"ppo.vf_coef\" = { low = 0.4, high = 0.6 }\n\
                \"ppo.max_grad_norm\" = { low = 0.4, high = 0.6 }\n\
                \"ppo.adam_eps\" = { low = 1e-8, high = 1e-5, log = true }\n\
                \"ppo.clip_obs\" = { low = 5.0, high = 10.0 }\n\
                \"ppo.policy.log_std_init\" = { low = -1.0, high = 0.0 }\n\
                \"env.reward_scale\" = { low = 0.5, high = 1.5 }\n\
                \"env.max_buy_fraction\" = { low = 0.5, high = 1.0 }\n\
                \"env.buy_fee\" = { low = 0.0, high = 0.001 }\n";
    let text_of = std::fs::read_to_string(tiny_study(&dir, "allfail", 2048))
        .unwrap()
        .replace("env.n_envs = 4", "env.n_envs = 4\nenv.lookback = 100")
        .replace("[search]\n", &format!("[search]\n{wide}"))
        .replace(
            "[sampler]",
            "[split]\nby = \"fractions\"\ntrain = 0.95\nvalidation = 0.01\n\n[sampler]",
        );
    std::fs::write(&file, text_of).unwrap();
    let o = run_without_telemetry(&file, &db);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("0 complete, 0 pruned, 2 failed"),
        "{stdout}"
    );
    assert!(
        stderr.contains("all 2 trials of this run failed") && stderr.contains("lookback 100"),
        "{stderr}"
    );
    let storage = Storage::open_read_only(&db).unwrap();
    let trials = storage
        .trials(storage.study_id("allfail").unwrap())
        .unwrap();
    assert_eq!(trials.len(), 2);
    assert!(trials.iter().all(|t| t.state == TrialState::Fail));
}

/// A trial's last value (the periodic evaluation at its last update, or the evaluation after
/// it) is reported, not judged: a pruner as strict as can be (percentile 0: anything below
/// the best complete trial at that step) prunes no trial that trained in full, where Optuna's
/// loop asking `should_prune` after its final report would call it pruned having saved
/// nothing.
#[test]
fn a_trial_that_trained_in_full_is_not_pruned_at_its_last_value() {
    let dir = scratch("cli_study", "last_value");
    let db = dir.join("studies.db");
    for eval_every in [1, 0] {
        let name = format!("last_{eval_every}");
        // One update a trial, one trial at a time; the learning rate from 1e-5 to 0.1 and the
        // episodes' starts searched, so that trials differ.
        let file = tiny_study(&dir, &name, 128);
        let tiny = std::fs::read_to_string(&file).unwrap();
        let strict = tiny
            .replace("n_trials = 2\nworkers = 2", "n_trials = 4\nworkers = 1")
            .replace("devices = [\"cpu\", \"cpu\"]", "devices = [\"cpu\"]")
            .replace(
                "train.eval_every = 1",
                &format!("train.eval_every = {eval_every}"),
            )
            .replace("low = 1e-4, high = 1e-3", "low = 1e-5, high = 1e-1")
            .replace(
                "\"ppo.gamma\" = { low = 0.9, high = 0.99 }",
                "\"env.seed\" = { low = 0, high = 1000 }",
            )
            .replace("seed = 1\n", "seed = 3\n")
            .replace(
                "kind = \"none\"",
                "kind = \"percentile\"\npercentile = 0.0\nn_startup_trials = 1\nn_warmup_steps = 0",
            );
        assert_eq!(strict.matches("percentile = 0.0").count(), 1, "{strict}");
        assert!(
            strict.contains("env.seed")
                && strict.contains("n_trials = 4")
                && strict.contains("high = 1e-1"),
            "{strict}"
        );
        std::fs::write(&file, strict).unwrap();
        let o = run_without_telemetry(&file, &db);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
        let storage = Storage::open_read_only(&db).unwrap();
        let trials = storage.trials(storage.study_id(&name).unwrap()).unwrap();
        let states: Vec<TrialState> = trials.iter().map(|t| t.state).collect();
        assert_eq!(states, [TrialState::Complete; 4], "{out}");
        // The pruner had something to prune: a trial whose value is below an earlier
        // complete one's (maximized), which the old rule stored PRUNED.
        let values: Vec<f64> = trials.iter().map(|t| t.value().unwrap()).collect();
        let below = (1..4).any(|i| values[..i].iter().any(|&v| values[i] < v));
        assert!(below, "every trial beat the ones before it: {values:?}");
        let last = trials[3].intermediate_values.last().copied();
        assert_eq!(last.map(|(_, v)| v), Some(values[3]), "{:?}", trials[3]);
    }
}

/// Settings no trial could run with (a fixed batch larger than any rollout the search allows)
/// refuse the study before its first trial, naming the file's line and the setting, and store
/// nothing; a searched range that rescues some trials lets it run.
#[test]
fn a_study_no_trial_of_which_can_run_is_refused_before_its_first_trial() {
    let dir = scratch("cli_study", "unrunnable");
    let db = dir.join("studies.db");
    let file = dir.join("unrunnable.toml");
    let text_of = std::fs::read_to_string(tiny_study(&dir, "unrunnable", 2048))
        .unwrap()
        .replace("ppo.batch_size = 64", "ppo.batch_size = 1024");
    let line = text_of
        .lines()
        .position(|l| l.starts_with("ppo.batch_size"))
        .unwrap()
        + 1;
    std::fs::write(&file, &text_of).unwrap();
    let run = || run_without_telemetry(&file, &db);
    let o = run();
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(!o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("{}:{line}", file.display()))
            && stderr.contains("fixed.ppo.batch_size")
            && stderr.contains("no trial of this study can run")
            && stderr
                .contains("range): ppo.batch_size = 1024: must be in 1..=n_steps × n_envs = 128"),
        "{stderr}"
    );
    assert!(!stdout.contains("trial 0"), "{stdout}");
    assert!(!db.exists(), "nothing is stored");
    // Longer rollouts searched: the top of the range runs, so the study does.
    std::fs::write(
        &file,
        text_of
            .replace("ppo.n_steps = 32\n", "")
            .replace(
                "[search]\n",
                "[search]\n\"ppo.n_steps\" = { low = 32, high = 512, step = 32 }\n",
            )
            .replace("n_trials = 2", "n_trials = 1"),
    )
    .unwrap();
    let o = run();
    let stderr = text(&o.stderr);
    assert!(
        !stderr.contains("no trial of this study can run"),
        "{stderr}"
    );
    let storage = Storage::open_read_only(&db).unwrap();
    let trials = storage
        .trials(storage.study_id("unrunnable").unwrap())
        .unwrap();
    assert_eq!(trials.len(), 1, "{stderr}");
}

#[test]
fn json_events_are_one_object_per_line() {
    let dir = scratch("cli_study", "json");
    let db = dir.join("studies.db");
    let file = tiny_study(&dir, "json", 128);
    let o = tradetune(&[
        "study",
        "run",
        s(&file),
        "--db",
        s(&db),
        "--trials",
        "1",
        "--workers",
        "1",
        "--telemetry-interval",
        "0",
        "--json",
    ]);
    let events = json_events(&o);
    assert_eq!(events[0]["event"], "study_started");
    assert!(events.iter().any(|e| e["event"] == "intermediate"));
    assert!(events.iter().any(|e| e["event"] == "trial_completed"));
    assert_eq!(events.last().unwrap()["event"], "study_finished");
    // One `metrics` event per update (128 samples at 4 envs × 32 steps: 1 update), and the
    // same numbers kept as the trial's learning curve in the database.
    let metrics: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["event"] == "metrics").collect();
    assert_eq!(metrics.len(), 1, "{metrics:?}");
    let m = metrics[0];
    assert_eq!(m["update"], 1);
    assert_eq!(m["env_steps"], 128);
    let loss = m["values"]["losses/value_loss"].as_f64().unwrap();
    let st = Storage::open_read_only(&db).unwrap();
    let id = st.study_id("json").unwrap();
    let trial = &st.trials(id).unwrap()[0];
    let curve = st.learning_curve(trial.trial_id).unwrap();
    let stored = curve
        .iter()
        .find(|p| p.metric == "losses/value_loss")
        .expect("the value loss is stored");
    assert_eq!((stored.update_index, stored.env_steps), (1, 128));
    assert_eq!(stored.value, loss);
    for metric in [
        "losses/policy_loss",
        "losses/entropy",
        "charts/SPS",
        "time/update_s",
    ] {
        assert!(
            curve.iter().any(|p| p.metric == metric),
            "no {metric}: {curve:?}"
        );
    }
}

#[test]
fn bad_study_files_name_the_file_line_and_key() {
    let dir = scratch("cli_study", "bad");
    let good = std::fs::read_to_string(tiny_study(&dir, "bad", 128)).unwrap();
    let cases = [
        (
            good.replace("\"ppo.learning_rate\" =", "\"ppo.learning_rat\" ="),
            ":18: search.\"ppo.learning_rat\"",
            "did you mean 'ppo.learning_rate'",
        ),
        (
            good.replace("env.n_envs = 4", "env.n_env = 4"),
            ":8: fixed.env.n_env",
            "valid names",
        ),
        (
            good.replace("workers = 2", "workers = \"two\""),
            ":4: ",
            "invalid type",
        ),
        (
            good.replace("kind = \"none\"", "kind = \"never\""),
            ":26: pruner.kind",
            "unknown pruner 'never'",
        ),
        (good.replace("[fixed]", "[fixed"), ":7: ", ""),
    ];
    for (i, (body, at, says)) in cases.iter().enumerate() {
        let path = dir.join(format!("bad{i}.toml"));
        std::fs::write(&path, body).unwrap();
        let o = tradetune(&["study", "run", s(&path), "--db", s(&dir.join("x.db"))]);
        let err = text(&o.stderr);
        assert!(!o.status.success());
        let expected = format!("{}{at}", path.display());
        assert!(
            err.contains(&expected),
            "case {i}: want {expected:?} in:\n{err}"
        );
        assert!(err.contains(says), "case {i}: want {says:?} in:\n{err}");
    }
    let o = tradetune(&["study", "run", "--preset", "rtx9090"]);
    assert!(text(&o.stderr).contains("presets: rtx4080, rtx4080_laptop, rx7900gre, cpu"));
    // `--trials 0` would run nothing: refused, naming the flag, and no database is made.
    let db = dir.join("zero.db");
    let good = tiny_study(&dir, "zero", 128);
    let o = tradetune(&["study", "run", s(&good), "--db", s(&db), "--trials", "0"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("--trials: run at least one trial"),
        "{}",
        text(&o.stderr)
    );
    assert!(!db.exists());
    // A name no new study may have is refused at its line, and no database is made either.
    let named = dir.join("named.toml");
    let body = std::fs::read_to_string(&good).unwrap();
    std::fs::write(&named, body.replace("name = \"zero\"", "name = \"a/../b\"")).unwrap();
    let o = tradetune(&["study", "run", s(&named), "--db", s(&db)]);
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("study.name"), "{err}");
    assert!(!db.exists(), "{err}");
}

/// A `[sampler]` or `[pruner]` setting the chosen kind does not use is named with its line as
/// a note, and the study is created as written.
#[test]
fn settings_the_chosen_kinds_do_not_use_are_noted_by_line() {
    let dir = scratch("cli_study", "unused");
    let good = std::fs::read_to_string(tiny_study(&dir, "unused", 128)).unwrap();
    let path = dir.join("unused.toml");
    let body = good
        .replace("seed = 1\n", "seed = 1\nn_startup_trials = 20\n")
        .replace("kind = \"none\"\n", "kind = \"none\"\nn_warmup_steps = 3\n");
    std::fs::write(&path, body).unwrap();
    let db = dir.join("unused.db");
    let o = tradetune(&["study", "create", s(&path), "--storage", s(&db)]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let at = path.display();
    for want in [
        format!("note: {at}:24: sampler.n_startup_trials: not used by kind = \"random\""),
        format!("note: {at}:28: pruner.n_warmup_steps: not used by kind = \"none\""),
    ] {
        assert!(err.contains(&want), "want {want:?} in:\n{err}");
    }
    // Without them, no note.
    let o = tradetune(&[
        "study",
        "create",
        s(&tiny_study(&dir, "plain", 128)),
        "--storage",
        s(&db),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("note: "), "{}", text(&o.stderr));
}

#[test]
fn a_study_survives_kill_9_and_resumes_its_numbering() {
    let dir = scratch("cli_study", "kill");
    let db = dir.join("studies.db");
    // The trials' length is searched (one choice), not fixed: the resume below searches a
    // shorter one, as a study may (a fixed length changed would be refused, its trials' values
    // measuring another thing).
    let searched = |n: usize| {
        let path = tiny_study(&dir, "resume", n);
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace(&format!("train.total_timesteps = {n}\n"), "")
            .replace(
                "[search]\n",
                &format!("[search]\n\"train.total_timesteps\" = {{ low = {n}, high = {n} }}\n"),
            );
        std::fs::write(&path, text).unwrap();
        path
    };
    // Trials long enough to be killed mid-way.
    let long = searched(50_000_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args([
            "study",
            "run",
            s(&long),
            "--db",
            s(&db),
            "--workers",
            "1",
            "--heartbeat",
            "0.2",
            "--stale-after",
            "1",
        ])
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the first trial is running and has reported a value.
    let started = Instant::now();
    loop {
        let running = Storage::open_read_only(&db).ok().and_then(|st| {
            let id = st.study_id("resume").ok()?;
            let trials = st.trials(id).ok()?;
            Some(
                trials
                    .iter()
                    .any(|t| t.state == TrialState::Running && !t.intermediate_values.is_empty()),
            )
        });
        if running == Some(true) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no trial started within 5 minutes"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    child.kill().unwrap(); // SIGKILL: no cleanup, the trial stays RUNNING in the file
    child.wait().unwrap();
    let stored = {
        let st = Storage::open_read_only(&db).unwrap();
        st.trials(st.study_id("resume").unwrap()).unwrap()
    };
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].state, TrialState::Running);
    // Its heartbeat (SQLite's clock, whole seconds) goes stale after 1 s.
    std::thread::sleep(Duration::from_millis(2500));

    // A categorical keeps its choices within a study (Optuna's rule): refused at launch,
    // naming the line, where the trial failed on it.
    let choices = searched(128);
    let body = std::fs::read_to_string(&choices)
        .unwrap()
        .replace("{ low = 128, high = 128 }", "{ choices = [128] }");
    std::fs::write(&choices, body).unwrap();
    let o = tradetune(&["study", "run", s(&choices), "--db", s(&db), "--trials", "1"]);
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(
            "search.\"train.total_timesteps\": study 'resume' holds trials that searched it as"
        ),
        "{err}"
    );
    let short = searched(128);
    let o = tradetune(&[
        "study",
        "run",
        s(&short),
        "--db",
        s(&db),
        "--trials",
        "1",
        "--workers",
        "1",
        "--heartbeat",
        "0.2",
        "--stale-after",
        "1",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    assert!(out.contains("recovered 1 trial(s)"), "{out}");
    assert!(out.contains("1 trial(s) already in the study"), "{out}");
    let st = Storage::open_read_only(&db).unwrap();
    let stored = st.trials(st.study_id("resume").unwrap()).unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].state, TrialState::Fail);
    match stored[0].system_attr("fail_reason") {
        Some(JsonValue::Str(r)) => assert!(r.starts_with("worker lost"), "{r}"),
        other => panic!("fail_reason: {other:?}"),
    }
    assert_eq!(stored[1].number, 1);
    assert_eq!(stored[1].state, TrialState::Complete);
}

/// The issue's command line: a bundled preset, trial count, workers, devices and `--storage`,
/// made short with `--set`; then `list`, `show` and `export --csv` of it, all with `--json`.
#[test]
fn a_preset_runs_on_the_given_devices_and_storage_and_reads_back_as_json() {
    let dir = scratch("cli_study", "preset");
    let db = dir.join("presets.db");
    let o = tradetune(&[
        "study",
        "run",
        "--preset",
        "cpu",
        "--trials",
        "2",
        "--workers",
        "2",
        "--devices",
        "cpu,cpu",
        "--storage",
        s(&db),
        "--name",
        "cpu_short",
        "--set",
        "train.total_timesteps=512",
        "--set",
        "ppo.n_steps=64",
        "--set",
        "ppo.precision=\"f32\"",
        "--telemetry-interval",
        "0",
        "--json",
    ]);
    let events = json_events(&o);
    let done: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "trial_completed")
        .collect();
    assert_eq!(done.len(), 2, "{events:?}");

    // The trials ran on the two CPU slots, with the overridden values applied.
    let st = Storage::open_read_only(&db).unwrap();
    let trials = st.trials(st.study_id("cpu_short").unwrap()).unwrap();
    let attr = |attrs: &[(String, JsonValue)], key: &str| -> String {
        attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.dumps())
            .unwrap_or_else(|| panic!("no attribute {key}: {attrs:?}"))
    };
    let mut devices: Vec<String> = trials
        .iter()
        .map(|t| attr(&t.user_attrs, "device"))
        .collect();
    devices.sort();
    assert_eq!(devices, ["\"cpu\"", "\"cpu#1\""]);
    for t in &trials {
        assert_eq!(t.state, TrialState::Complete);
        let applied = attr(&t.system_attrs, "applied_config");
        assert!(applied.contains("\"n_steps\": 64"), "{applied}");
        assert!(applied.contains("\"total_timesteps\": 512"), "{applied}");
    }

    let o = tradetune(&["study", "list", "--storage", s(&db), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list[0]["name"], "cpu_short");
    assert_eq!(list[0]["complete"], 2);
    assert!(list[0]["best"]["value"].is_number(), "{list}");

    let o = tradetune(&["study", "show", "cpu_short", "--db", s(&db), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let show: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(show["trials"].as_array().map(Vec::len), Some(2), "{show}");
    assert_eq!(show["directions"][0], "MAXIMIZE");

    let csv_path = dir.join("cpu_short.csv");
    let o = tradetune(&[
        "study",
        "export",
        "cpu_short",
        "--db",
        s(&db),
        "--csv",
        s(&csv_path),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows = csv::Reader::from_path(&csv_path).unwrap().records().count();
    assert_eq!(rows, 2);
}

#[test]
fn bad_set_values_are_refused_by_name_before_anything_runs() {
    let dir = scratch("cli_study", "bad_set");
    let db = dir.join("never.db");
    // (The preset searches ppo.gamma; clip_range it leaves fixed.)
    let clip = catalogue::get("ppo.clip_range")
        .and_then(|s| s.range)
        .unwrap();
    let clip_range = format!("'ppo.clip_range' = 20.0 is out of its range {clip}");
    for (set, want) in [
        (
            "train.total_timestep=512",
            "unknown parameter 'train.total_timestep'",
        ),
        ("ppo.learning_rate=1e-3", "is searched by this study"),
        ("ppo.n_steps=\"many\"", "ppo.n_steps"),
        ("ppo.n_steps", "write NAME=VALUE"),
        // Out of the range the engine's catalogue gives the setting: refused with that range.
        ("ppo.clip_range=20", clip_range.as_str()),
        (
            "env.n_envs=0",
            "'env.n_envs' = 0 is out of its range [1, 65536]",
        ),
        ("ppo.precision=f64", "is not one of f32, bf16, f16"),
    ] {
        let o = tradetune(&[
            "study",
            "run",
            "--preset",
            "cpu",
            "--db",
            s(&db),
            "--set",
            set,
        ]);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "--set {set} was accepted");
        assert!(err.contains(want), "--set {set}: {err}");
    }
    assert!(!db.exists(), "a refused run created the database");
}

/// A one-trial study of `name` in `dir` on `--device wgpu`, shapes as small as a trial's GPU
/// work gets (nets [16], 4 envs × 32 steps, 256 timesteps: two updates, the second one
/// steady): its file.
fn tiny_gpu_study(dir: &Path, name: &str) -> PathBuf {
    let study = dir.join("study.toml");
    std::fs::write(
        &study,
        format!(
            r#"[study]
name = "{name}"
n_trials = 1
workers = 1
devices = ["wgpu"]

[fixed]
env.n_envs = 4
env.placement = "host"
ppo.n_steps = 32
ppo.batch_size = 64
ppo.n_epochs = 1
ppo.policy.net_arch.pi = [16]
ppo.policy.net_arch.vf = [16]
train.total_timesteps = 256
train.eval_every = 0

[search]
"ppo.learning_rate" = {{ low = 1e-4, high = 1e-3, log = true }}
"#
        ),
    )
    .unwrap();
    study
}

/// Issue 32: a study whose GPU finds its cache's store broken says so once, as a notice of the
/// study's launch (on stderr here; the app shows it among its notices), and its trial runs on a
/// store started anew, the broken file kept beside it.
#[test]
fn a_study_on_a_broken_gpu_cache_says_so_while_it_runs() {
    let test = "a_study_on_a_broken_gpu_cache_says_so_while_it_runs";
    if !common::wgpu_here(test) {
        return;
    }
    // The store of the adapter `--device wgpu` opens (wgpu's default).
    let environment = tradetune_engine::device::kernels::environment_of(
        &tradetune_engine::device::adapters::default_adapter().expect("a wgpu adapter"),
    );
    let dir = scratch("cli_study", "broken_cache");
    let cache = dir.join("gpu-cache");
    std::fs::create_dir_all(&cache).unwrap();
    // A store cut short, as a full disk or a copy stopped halfway leaves it.
    std::fs::write(cache.join(format!("{environment}.db")), [0u8; 3000]).unwrap();
    let study = tiny_gpu_study(&dir, "broken_cache");
    let db = dir.join("s.db");
    let o = common::tradetune_with(
        &[
            "study",
            "run",
            s(&study),
            "--db",
            s(&db),
            "--telemetry-interval",
            "0",
        ],
        &[("TRADETUNE_GPU_CACHE", s(&cache))],
    );
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    let warning = err
        .lines()
        .find(|l| l.starts_with("warning: TradeTune's GPU cache"))
        .unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(warning.contains("could not be read"), "{warning}");
    assert_eq!(
        err.matches("warning: TradeTune's GPU cache").count(),
        1,
        "{err}"
    );
    assert!(out.contains("1 complete"), "{out}");
    let moved = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().contains(".db.unreadable-"))
        })
        .count();
    assert_eq!(moved, 1);
}

/// Issue 32: a study whose GPU cache's reads and writes fail says so as its trial meets them,
/// before its end, with cubecl's words, and counts any later ones on; nothing again after it.
#[test]
fn a_study_whose_gpu_cache_fails_says_so_while_it_runs() {
    let test = "a_study_whose_gpu_cache_fails_says_so_while_it_runs";
    if !common::wgpu_here(test) {
        return;
    }
    let dir = scratch("cli_study", "failing_cache");
    // A cache directory that cannot be made: the check reports it, and each of cubecl's own
    // opens of the store fails afterwards, as a full disk's writes do later in a run.
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let cache = blocker.join("gpu-cache");
    let study = tiny_gpu_study(&dir, "failing_cache");
    // stdout and stderr in one file, in the order they were written.
    let log = dir.join("output.txt");
    let file = std::fs::File::create(&log).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args(["study", "run", s(&study), "--db"])
        .arg(dir.join("s.db"))
        .args(["--telemetry-interval", "0"])
        .env("TRADETUNE_GPU_CACHE", &cache)
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::from(file.try_clone().unwrap()))
        .stderr(Stdio::from(file))
        .status()
        .unwrap();
    let out = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let at = |what: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no line starting {what:?}:\n{out}"))
    };
    let failed: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("of TradeTune's GPU cache failed"))
        .collect();
    // The first failures are said as the study meets them, with cubecl's words; any later
    // ones in the launch too, counted on; none again after the command.
    let first = *failed.first().unwrap_or_else(|| panic!("{out}"));
    let done = at("done: 1 complete");
    assert!(first < done, "{out}");
    assert!(
        lines[first].contains("failed in this process (the first: Unable to open Turso cache"),
        "{out}"
    );
    let count = |l: &str, after: &str| -> u64 {
        let rest = &l[l.find(after).unwrap() + after.len()..];
        rest.split(' ').next().unwrap().parse().unwrap()
    };
    let mut total = count(lines[first], "warning: ");
    for &i in &failed[1..] {
        let more = count(lines[i], "warning: ");
        assert!(lines[i].contains(" more read"), "{out}");
        total += more;
        assert!(
            lines[i].contains(&format!("failed ({total} in this process)")),
            "{out}"
        );
    }
    let best = at("best trial of 'failing_cache'");
    assert!(failed.iter().all(|&i| i < best), "{out}");
    assert!(total > 0);
    // The trial, all compiling, is compile-bound, and its verdict does not promise a later
    // process autotunes nothing.
    let st = Storage::open_read_only(dir.join("s.db")).unwrap();
    let trials = st.trials(st.study_id("failing_cache").unwrap()).unwrap();
    let verdict = trials[0]
        .user_attrs
        .iter()
        .find(|(k, _)| k == "verdict")
        .map(|(_, v)| v.dumps())
        .unwrap_or_else(|| panic!("no verdict: {:?}", trials[0].user_attrs));
    assert!(
        verdict.contains("a later process autotunes them again"),
        "{verdict}"
    );
}

/// On a fresh machine (no default database yet) `study list` says there are no studies, as
/// a success; a database given by name must exist.
#[test]
fn study_list_on_a_fresh_machine_has_no_studies() {
    let dir = scratch("cli_study", "fresh_list");
    let home = dir.join("data");
    let vars = [("XDG_DATA_HOME", home.to_str().unwrap())];
    let o = common::tradetune_with(&["study", "list"], &vars);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("no studies yet"),
        "{}",
        text(&o.stdout)
    );
    let o = common::tradetune_with(&["study", "list", "--json"], &vars);
    assert_eq!(text(&o.stdout).trim(), "[]");
    let o = tradetune(&["study", "list", "--db", s(&dir.join("typo.db"))]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("typo.db"), "{}", text(&o.stderr));
}

/// A reader gone before the command writes (`tradetune study list | head -0`, a closed pipe):
/// no panic and its backtrace, but the status a shell gives a command SIGPIPE ended (141).
#[test]
fn a_closed_output_ends_a_command_quietly_with_status_141() {
    let dir = scratch("cli_study", "closed_output");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args(["study", "list"])
        .env("XDG_DATA_HOME", dir.join("data"))
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(141), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// An empty database (a file `touch` made; a PostgreSQL `createdb`'s) lists no studies, and
/// other reads say it is empty.
#[test]
fn an_empty_database_lists_no_studies() {
    let dir = scratch("cli_study", "empty_db");
    let db = dir.join("empty.db");
    std::fs::write(&db, b"").unwrap();
    let o = tradetune(&["study", "list", "--db", s(&db)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("no studies"),
        "{}",
        text(&o.stdout)
    );
    let o = tradetune(&["study", "show", "x", "--db", s(&db)]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("an empty database, with no studies yet"),
        "{}",
        text(&o.stderr)
    );
    // Optuna's URL of the same file names it; a scheme TradeTune does not open is refused.
    let url = format!("sqlite:///{}", db.display());
    let o = tradetune(&["study", "list", "--db", &url]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = tradetune(&["study", "list", "--db", "mysql://u@h/d"]);
    assert!(
        text(&o.stderr).contains("mysql:// is not a storage TradeTune opens"),
        "{}",
        text(&o.stderr)
    );
}

/// A trial enqueued and not started (Optuna's `enqueue_trial`) is counted as waiting by
/// `study list` and shown with the parameters it will run with by `study show`.
#[test]
fn list_and_show_say_what_is_enqueued() {
    let dir = scratch("cli_study", "enqueued");
    let db = dir.join("q.db");
    {
        let mut s = Storage::open(&db).unwrap();
        let id = s
            .create_study("q", &[tradetune_engine::storage::StudyDirection::Maximize])
            .unwrap();
        s.enqueue_trial(id, &[("ppo.gamma".into(), JsonValue::from(0.95))], &[])
            .unwrap();
    }
    let o = tradetune(&["study", "list", "--db", s(&db)]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    let waiting = header
        .iter()
        .position(|h| *h == "waiting")
        .expect("a waiting column");
    assert_eq!(row[waiting], "1", "{out}");
    let o = tradetune(&["study", "show", "q", "--db", s(&db)]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        out.contains("WAITING") && out.contains("enqueued: {\"ppo.gamma\": 0.95}"),
        "{out}"
    );
}

/// A parameter Optuna's `add_trial` stored with `FloatDistribution(0.0, float('inf'))` (as its
/// client writes it: `json.dumps` text with `Infinity`) does not make the study unreadable:
/// `study show` shows the trial with its value and the parameter marked `*`, and says on stderr
/// what was set aside, naming the trial, table, row and column; `--json` and the CSV export
/// show the value as Optuna does, and `report` and `importance` read the study too.
#[test]
fn show_export_report_and_importance_read_a_study_with_an_infinite_range() {
    let dir = scratch("cli_study", "infinite_range");
    let db = dir.join("edge.db");
    let odd = {
        let mut s = Storage::open(&db).unwrap();
        let id = s
            .create_study(
                "edge",
                &[tradetune_engine::storage::StudyDirection::Maximize],
            )
            .unwrap();
        let x =
            tradetune_engine::storage::OptunaDistribution::float(0.0, 1.0, false, None).unwrap();
        for (k, v) in [0.25, 0.5, 0.75].into_iter().enumerate() {
            let t = s.create_trial(id).unwrap();
            s.set_param(t.trial_id, "x", v, &x).unwrap();
            s.complete_trial(t.trial_id, &[k as f64]).unwrap();
        }
        let t = s.create_trial(id).unwrap();
        s.set_param(t.trial_id, "x", 1.0, &x).unwrap();
        s.complete_trial(t.trial_id, &[0.5]).unwrap();
        t.trial_id
    };
    optuna_float_row(&db, odd, "y", 5.0, "0.0", false);
    let note = "trial 3: parameter 'y' set aside (table trial_params, row 5, column \
                distribution_json: low and high must be finite numbers (got low = 0, high = \
                inf)); its value 5.0 is shown and exported, but it is not used to fit the \
                sampler or for importance";

    let o = tradetune(&["study", "show", "edge", "--db", s(&db)]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(err.contains(note), "{err}");
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("3 "))
        .expect(&out);
    assert!(
        row.contains("0.50000") && row.ends_with("x=1.000000 y=5.000000*"),
        "{out}"
    );
    assert!(out.contains("best: #2 value 2.000000"), "{out}");

    let o = tradetune(&["study", "show", "edge", "--db", s(&db), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["trials"][3]["params"]["y"],
        serde_json::json!({"type": "float", "value": 5.0})
    );
    assert_eq!(v["trials"][3]["set_aside"], serde_json::json!([note]));

    let csv = dir.join("edge.csv");
    let o = tradetune(&[
        "study",
        "export",
        "edge",
        "--db",
        s(&db),
        "--trials",
        s(&csv),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains(note), "{}", text(&o.stderr));
    let csv = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let y = header.iter().position(|h| *h == "params_y").expect(&csv);
    let last: Vec<&str> = csv.lines().nth(4).unwrap().split(',').collect();
    assert_eq!(last[y], "5.0", "{csv}");

    let o = tradetune(&["study", "importance", "edge", "--db", s(&db)]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains(&format!("note: {note}")), "{out}");
    let o = tradetune(&["study", "report", "edge", "--db", s(&db)]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains(&format!("note: {note}")), "{out}");
}

/// Writes parameter `name` = `value` of trial `trial_id` as Optuna's client writes a float range
/// from `low` to infinity (`json.dumps` text, `Infinity`), which TradeTune's model refuses.
fn optuna_float_row(db: &Path, trial_id: i64, name: &str, value: f64, low: &str, log: bool) {
    let distribution = format!(
        "{{\"name\": \"FloatDistribution\", \"attributes\": {{\"step\": null, \"low\": {low}, \
         \"high\": Infinity, \"log\": {log}}}}}"
    );
    rusqlite::Connection::open(db)
        .unwrap()
        .execute(
            "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) \
             VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![trial_id, name, value, distribution],
        )
        .unwrap();
}

/// A study whose stored trials searched a parameter as a float range the model refuses
/// (Optuna's `FloatDistribution(0.5, inf, log=True)`, set aside on reading) still keeps
/// Optuna's rule for it: a study file searching it on another scale is refused before any
/// trial, naming the line and the stored range, as writing the first trial's parameter would
/// have failed every worker's first trial.
#[test]
fn a_set_aside_range_keeps_a_study_file_to_optunas_rule() {
    let dir = scratch("cli_study", "set_aside_guard");
    let db = dir.join("guard.db");
    let first = {
        let mut s = Storage::open(&db).unwrap();
        let id = s
            .create_study(
                "guard",
                &[tradetune_engine::storage::StudyDirection::Maximize],
            )
            .unwrap();
        let t = s.create_trial(id).unwrap();
        s.complete_trial(t.trial_id, &[0.5]).unwrap();
        t.trial_id
    };
    optuna_float_row(&db, first, "ppo.gamma", 0.9, "0.5", true);
    let file = tiny_study(&dir, "guard", 128);
    let o = run_without_telemetry(&file, &db);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(!o.status.success(), "{out}\n{err}");
    assert!(
        err.contains("search.\"ppo.gamma\": study 'guard' holds trials that searched it as")
            && err.contains("\"high\": Infinity, \"log\": true")
            && err.contains("cannot set a different log configuration"),
        "{err}"
    );
    let storage = Storage::open_read_only(&db).unwrap();
    let trials = storage.trials(storage.study_id("guard").unwrap()).unwrap();
    assert_eq!(trials.len(), 1, "{out}");
}

/// A grid study TradeTune began (two of its six points) is finished by Optuna's own
/// `GridSampler`, given the same grid and seed: Optuna reads each TradeTune trial's `grid_id`
/// as the point it ran (its shuffle is numpy's, as TradeTune's is), so it runs the four
/// others and stops, with no point run twice or left out.
#[test]
fn optunas_grid_sampler_finishes_a_grid_study_tradetune_began() {
    let test = "optunas_grid_sampler_finishes_a_grid_study_tradetune_began";
    if !pg::python_has(test, "optuna") {
        return;
    }
    let dir = scratch("cli_study", "grid_shared");
    let db = dir.join("grid.db");
    let file = dir.join("grid.toml");
    std::fs::write(
        &file,
        r#"[study]
name = "grid"
n_trials = 2
workers = 1
devices = ["cpu"]

[fixed]
env.n_envs = 4
ppo.n_steps = 32
ppo.batch_size = 64
ppo.policy.net_arch.pi = [16, 16]
ppo.policy.net_arch.vf = [16, 16]
train.total_timesteps = 128

[search]
"ppo.n_epochs" = { low = 1, high = 2 }
"ppo.gamma" = { low = 0.9, high = 0.99 }

[sampler]
kind = "grid"
seed = 3

[sampler.grid]
"ppo.n_epochs" = [1, 2]
"ppo.gamma" = [0.9, 0.95, 0.99]

[pruner]
kind = "none"
"#,
    )
    .unwrap();
    let o = run_without_telemetry(&file, &db);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let script = "import json, sys, optuna\n\
        optuna.logging.set_verbosity(optuna.logging.WARNING)\n\
        grid = {'ppo.n_epochs': [1, 2], 'ppo.gamma': [0.9, 0.95, 0.99]}\n\
        sampler = optuna.samplers.GridSampler(grid, seed=3)\n\
        s = optuna.load_study(study_name='grid', storage=sys.argv[1], sampler=sampler)\n\
        s.optimize(lambda t: t.suggest_int('ppo.n_epochs', 1, 2) \
        + t.suggest_float('ppo.gamma', 0.9, 0.99), n_trials=10)\n\
        names = sorted(grid)\n\
        print(json.dumps([[t.system_attrs['grid_id'], [t.params[n] for n in names], \
        list(sampler._all_grids[t.system_attrs['grid_id']])] for t in s.trials]))\n";
    let o = Command::new("python3")
        .args(["-c", script, &format!("sqlite:///{}", s(&db))])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let said: Vec<(u64, Vec<f64>, Vec<f64>)> = serde_json::from_str(text(&o.stdout).trim())
        .unwrap_or_else(|e| {
            panic!("{e}: {}", text(&o.stdout));
        });
    // Two trials of TradeTune's, four of Optuna's: then Optuna's sampler stopped the study.
    assert_eq!(said.len(), 6, "{said:?}");
    for (id, params, optunas_point) in &said {
        assert_eq!(params, optunas_point, "grid id {id} names another point");
    }
    let mut points: Vec<String> = said.iter().map(|(_, p, _)| format!("{p:?}")).collect();
    points.sort();
    points.dedup();
    assert_eq!(points.len(), 6, "a point ran twice: {said:?}");
}
