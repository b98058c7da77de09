//! `tradetune train` run as the real binary on the bundled market data.

use crate::common;

use common::{json_events, scratch, text, tradetune, tradetune_with, wgpu_here};

use std::io::{BufRead, BufReader, Lines};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A small PPO config so the test trains a few updates in seconds.
fn small_ppo(dir: &std::path::Path) -> PathBuf {
    let p = dir.join("ppo.json");
    std::fs::write(
        &p,
        r#"{"n_steps": 64, "batch_size": 128, "n_epochs": 2, "seed": 7}"#,
    )
    .unwrap();
    p
}

#[test]
fn trains_on_the_bundled_sample_and_writes_a_checkpoint() {
    let dir = scratch("cli_train", "bundled");
    let ppo = small_ppo(&dir);
    let out = dir.join("run");
    let o = tradetune(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
        "--total-timesteps",
        "1024",
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The bundled sample's four stocks, trained on their train split only.
    assert!(stdout.contains("AAPL, GOOG, IBM, MSFT"), "{stdout}");
    assert!(stdout.contains("train bars"), "{stdout}");
    // 1024 samples = 2 updates of 64 steps x 8 envs, each with its diagnostics line.
    assert_eq!(stdout.matches("approx_kl").count(), 2, "{stdout}");
    // Where the time went; the CPU compiles nothing.
    assert!(stdout.contains("time by phase: env_step"), "{stdout}");
    assert!(!stdout.contains("compiling:"), "{stdout}");
    for f in ["model.bpk", "ppo.json", "state.json", "env.json"] {
        assert!(out.join(f).is_file(), "{f} missing in {}", out.display());
    }
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ppo.json")).unwrap()).unwrap();
    assert_eq!(saved["n_steps"], 64);

    // The same --out again: the checkpoint there is said to be replaced before the run, and
    // is (a new run's 512 samples); resuming from it says nothing of the kind.
    let again = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "--out",
            out.to_str().unwrap(),
            "--total-timesteps",
            "512",
        ];
        args.extend_from_slice(extra);
        let o = tradetune(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let stdout = again(&["--ppo", ppo.to_str().unwrap()]);
    assert!(
        stdout.contains("holds a checkpoint of 1024 trained samples; this run replaces it"),
        "{stdout}"
    );
    let trained = || {
        let state = std::fs::read_to_string(out.join("state.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&state).unwrap()["timesteps"].clone()
    };
    assert_eq!(trained(), 512);
    let stdout = again(&["--resume", out.to_str().unwrap()]);
    assert!(!stdout.contains("this run replaces it"), "{stdout}");
    assert_eq!(trained(), 1024);
}

#[test]
fn a_missing_data_file_is_named_in_the_error() {
    let dir = scratch("cli_train", "missing");
    let out = dir.join("run");
    let o = tradetune(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--data",
        "/nonexistent/prices.csv",
    ]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("/nonexistent/prices.csv"), "{stderr}");
    assert!(
        !out.exists(),
        "nothing is written when the data cannot be read"
    );
}

#[test]
fn a_bad_ppo_field_is_refused_before_training() {
    let dir = scratch("cli_train", "bad_ppo");
    let ppo = dir.join("ppo.json");
    std::fs::write(&ppo, r#"{"n_steps": 0}"#).unwrap();
    let out = dir.join("run");
    let o = tradetune(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("n_steps"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn an_unknown_ppo_field_is_named_with_the_valid_ones() {
    let dir = scratch("cli_train", "unknown_field");
    let ppo = dir.join("ppo.json");
    std::fs::write(&ppo, r#"{"n_stepz": 64}"#).unwrap();
    let o = tradetune(&[
        "train",
        "--out",
        dir.join("run").to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("n_stepz"), "{stderr}");
    assert!(stderr.contains("n_steps"), "valid fields listed: {stderr}");
}

#[test]
fn a_toml_config_sets_run_options_ppo_and_env_fields() {
    let dir = scratch("cli_train", "toml");
    let out = dir.join("run");
    let cfg = dir.join("run.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
total_timesteps = 256
out = "{}"
eval_every = 1
objective = "total_return"

[ppo]
n_steps = 16
batch_size = 64
n_epochs = 1
seed = 9

[ppo.policy.net_arch]
pi = [16]
vf = [16]

[env]
n_envs = 4
"#,
            out.display()
        ),
    )
    .unwrap();
    let o = tradetune(&["train", "--config", cfg.to_str().unwrap(), "--json"]);
    let stdout = text(&o.stdout);
    // 256 samples = 4 updates of 16 steps x 4 envs, each followed by an evaluation.
    let events = json_events(&o);
    let evals: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "evaluation")
        .collect();
    assert_eq!(evals.len(), 4, "{stdout}");
    // The CPU compiles nothing: no live compile line.
    assert!(
        !events.iter().any(|e| e["event"] == "compiling"),
        "{stdout}"
    );
    assert_eq!(evals[0]["summary"]["split"], "validation");
    assert_eq!(evals[0]["summary"]["objective_name"], "total_return");
    let report = events.last().unwrap();
    assert_eq!(report["timesteps"], 256);
    assert!(report["phases"]["evaluation"].as_f64().unwrap() > 0.0);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ppo.json")).unwrap()).unwrap();
    assert_eq!(saved["n_steps"], 16);
    assert_eq!(saved["policy"]["net_arch"]["pi"], serde_json::json!([16]));
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("env.json")).unwrap()).unwrap();
    assert_eq!(env["n_envs"], 4);
}

#[test]
fn toml_errors_name_the_file_and_the_field() {
    // (A field of [ppo] or [env] refused is named at its line, as a study file's are.)
    let dir = scratch("cli_train", "toml_errors");
    let out = dir.join("run");
    let cases = [
        (
            "[ppo]\nn_stepz = 16\n",
            "run.toml:2: [ppo] unknown field 'n_stepz' (did you mean 'n_steps'?)",
        ),
        ("[ppo]\nlearning_rate = \"fast\"\n", "learning_rate"),
        ("[env]\nn_envs = 0\n", "n_envs"),
        ("total_timestep = 5\n", "total_timestep"),
        ("objective = \"profit\"\n", "sharpe_excess"),
        ("[ppo\n", "run.toml"),
        // Top-level options are the engine's types, read by name with their own messages.
        ("precision = \"f64\"\n", "unknown precision 'f64'"),
        ("device = \"gpu7\"\n", "unknown device 'gpu7'"),
        ("objective = 3\n", "objective"),
        // Values out of the range the engine's catalogue gives, with that range.
        (
            "[ppo]\ngamma = 1.5\n",
            "'ppo.gamma' = 1.5 is out of its range [0, 1]",
        ),
        (
            "total_timesteps = 0\n",
            "'train.total_timesteps' = 0 is out of its range [1, ",
        ),
        // A count given a negative or fractional number, named (not "expected usize").
        (
            "[ppo]\nn_steps = -3\n",
            "run.toml:2: [ppo] field 'n_steps' must be a whole number from 0 on",
        ),
        (
            "[env]\nn_envs = 1.5\n",
            "run.toml:2: [env] field 'n_envs' must be a whole number from 0 on",
        ),
        // Before the data loads, naming where it came from.
        ("memory_fraction = 7.0\n", "memory_fraction in"),
        // Optional fields (no default to compare with) given a value of another type, named.
        (
            "total_timesteps = \"many\"\n",
            "field 'total_timesteps': invalid type: string \"many\", expected a whole number",
        ),
        (
            "[ppo]\ntarget_kl = \"low\"\n",
            "run.toml:2: [ppo] field 'target_kl': invalid type: string \"low\", expected a number",
        ),
    ];
    for (i, (body, field)) in cases.into_iter().enumerate() {
        let cfg = dir.join("run.toml");
        std::fs::write(&cfg, body).unwrap();
        let o = tradetune(&[
            "train",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(!o.status.success(), "case {i} ({body}) was accepted");
        let stderr = text(&o.stderr);
        assert!(stderr.contains(field), "case {i}: {field} not in {stderr}");
        // Parse and field errors (not value checks done later) name the file.
        if i != 2 && i != 4 {
            assert!(stderr.contains("run.toml"), "case {i}: {stderr}");
        }
        assert!(!out.exists(), "case {i} wrote a checkpoint");
    }
}

/// An `--out` that cannot take a checkpoint (a file, a path below a file) is refused before
/// the run trains, naming it; the file is left as it was.
#[test]
fn an_out_that_cannot_take_a_checkpoint_is_refused_before_training() {
    let dir = scratch("cli_train", "bad_out");
    let ppo = small_ppo(&dir);
    let file = dir.join("afile");
    std::fs::write(&file, "keep me").unwrap();
    for (out, why) in [
        (file.clone(), "is a file"),
        (file.join("below"), "cannot create it"),
        // The folder of the run's own ppo.json: the checkpoint's ppo.json would replace it.
        (dir.clone(), "holds ppo.json but no checkpoint"),
    ] {
        let o = tradetune(&[
            "train",
            "--out",
            out.to_str().unwrap(),
            "--ppo",
            ppo.to_str().unwrap(),
            "--total-timesteps",
            "1024",
        ]);
        let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
        assert!(!stdout.contains("approx_kl"), "it trained first: {stdout}");
        assert!(
            stderr.contains("--out") && stderr.contains(why) && stderr.contains("bad_out"),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    assert!(std::fs::read_to_string(&ppo).unwrap().contains("n_steps"));
}

/// A `tradetune train --json` of a budget it never reaches, its stdout piped: the child, its
/// JSON lines and the run's folder.
fn long_run(dir: &std::path::Path) -> (Child, Lines<BufReader<ChildStdout>>, PathBuf) {
    let ppo = small_ppo(dir);
    let out = dir.join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args([
            "train",
            "--out",
            out.to_str().unwrap(),
            "--ppo",
            ppo.to_str().unwrap(),
            "--total-timesteps",
            "100000000",
            "--json",
        ])
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines, out)
}

/// The samples of a JSON progress event, if `line` is one.
fn progress(line: &str) -> Option<u64> {
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .filter(|e| e["event"] == "progress")
        .and_then(|e| e["timesteps"].as_u64())
}

/// Reads `lines` up to the run's first progress event (after its first update, well before
/// the end of its budget); returns its samples.
fn first_progress(lines: &mut Lines<BufReader<ChildStdout>>) -> u64 {
    lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| progress(&l))
        .expect("a progress event before the end")
}

/// Sends `signal` to `child`, `times` times, 20 ms apart (so that each is delivered, not
/// merged with the one before while it is pending).
fn signal(child: &Child, signal: libc::c_int, times: usize) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    for i in 0..times {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: sends a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }
}

/// Waits for `child` (5 minutes at most) and returns its status and stderr.
fn ended(mut child: Child) -> (std::process::ExitStatus, String) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(300) {
            common::hung(&mut child, "the run did not end within 5 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status, err)
}

/// Ctrl-C during `tradetune train` ends the run at the next step and saves what it trained
/// (resumable), and the exit status says it was interrupted (130), so a script's `&&` stops.
#[test]
fn ctrl_c_saves_the_run_so_far_and_exits_130() {
    let dir = scratch("cli_train", "interrupt");
    let (child, mut lines, out) = long_run(&dir);
    // After its first update, well before the end of its budget.
    let first = first_progress(&mut lines);
    signal(&child, libc::SIGINT, 1);
    let last = lines
        .map_while(Result::ok)
        .filter_map(|l| progress(&l))
        .last()
        .unwrap_or(first);
    let (status, err) = ended(child);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted by SIGINT") && err.contains("--resume"),
        "{err}"
    );
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("state.json")).unwrap()).unwrap();
    assert_eq!(
        state["timesteps"], last,
        "the checkpoint holds every update it reported"
    );
    assert!(last < 100_000_000);
}

/// One process's signal delivered twice within a second is one request, not a Ctrl-C pressed
/// twice: `timeout -s INT` signals the command and then its whole process group. The second
/// used to exit at once, and the run was lost. (A terminal's second Ctrl-C, from the kernel,
/// still exits at once: `signals::tests`.)
#[test]
fn two_signals_at_once_are_one_ctrl_c_and_the_run_is_saved() {
    let dir = scratch("cli_train", "two_signals");
    let (child, mut lines, out) = long_run(&dir);
    first_progress(&mut lines);
    signal(&child, libc::SIGINT, 2);
    lines.map_while(Result::ok).for_each(drop);
    let (status, err) = ended(child);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(!err.contains("second signal"), "{err}");
    assert!(out.join("state.json").is_file(), "nothing saved: {err}");
}

/// A reader that goes away (`tradetune train … | head -2`, or Ctrl-C ending `tee`): the run
/// ends as at a Ctrl-C, saving what it trained, with the status a shell gives a command a
/// closed pipe ended (141). It used to panic on its next line and save nothing.
#[test]
fn a_closed_output_ends_the_run_and_saves_it_with_status_141() {
    let dir = scratch("cli_train", "closed_output");
    let (child, mut lines, out) = long_run(&dir);
    first_progress(&mut lines);
    drop(lines);
    let (status, err) = ended(child);
    assert_eq!(status.code(), Some(141), "{err}");
    assert!(
        err.contains("standard output closed") && err.contains("--resume"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("state.json")).unwrap()).unwrap();
    assert!(
        state["timesteps"].as_u64().is_some_and(|t| t > 0),
        "{state}"
    );
}

/// A validation split the lookback leaves no steps in is refused before the first update,
/// where it used to train until its first evaluation (and say why twice).
#[test]
fn an_evaluation_split_too_short_for_the_lookback_is_refused_before_training() {
    let dir = scratch("cli_train", "eval_lookback");
    let ppo = small_ppo(&dir);
    let env = dir.join("env.json");
    std::fs::write(&env, r#"{"n_envs": 2, "lookback": 400}"#).unwrap();
    let out = dir.join("run");
    let o = tradetune(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
        "--env",
        env.to_str().unwrap(),
        "--total-timesteps",
        "100000",
        "--eval-every",
        "50",
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(!stdout.contains("approx_kl"), "it trained first: {stdout}");
    assert_eq!(
        stderr.matches("lookback 400 leave 0 steps").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("validation split"), "{stderr}");
    assert!(!out.join("state.json").exists());
}

#[test]
fn resuming_a_checkpoint_continues_its_sample_count() {
    let dir = scratch("cli_train", "resume");
    let ppo = small_ppo(&dir);
    let first = dir.join("first");
    let o = tradetune(&[
        "train",
        "--out",
        first.to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
        "--total-timesteps",
        "1024",
        "--objective",
        "sortino",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let second = dir.join("second");
    let o = tradetune(&[
        "train",
        "--resume",
        first.to_str().unwrap(),
        "--out",
        second.to_str().unwrap(),
        "--total-timesteps",
        "512",
        "--json",
    ]);
    let events = json_events(&o);
    let progress: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "progress")
        .map(|e| e["timesteps"].as_u64().unwrap())
        .collect();
    // 64 steps x 8 envs per update, counting on from 1024.
    assert_eq!(progress, vec![1536]);
    // The budget is counted as the samples are (the checkpoint's included): 100 % at the end.
    for e in events
        .iter()
        .filter(|e| e["event"] == "progress" || e["event"] == "started")
    {
        assert_eq!(e["total_timesteps"], 1536, "{e}");
    }
    let state = |d: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("state.json")).unwrap()).unwrap()
    };
    // The summary line says this run's updates beside this run's samples, not the
    // checkpoint's too.
    let third = dir.join("third");
    let o = tradetune(&[
        "train",
        "--resume",
        first.to_str().unwrap(),
        "--out",
        third.to_str().unwrap(),
        "--total-timesteps",
        "512",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("trained 512 samples (1536 in total) in 1 update,"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(state(&first)["timesteps"], 1024);
    assert_eq!(state(&second)["timesteps"], 1536);
    // The resumed run kept the checkpoint's config and data record (its objective, sortino,
    // included).
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(second.join("ppo.json")).unwrap()).unwrap();
    assert_eq!(saved["n_steps"], 64);
    assert_eq!(
        std::fs::read_to_string(first.join("data.json")).unwrap(),
        std::fs::read_to_string(second.join("data.json")).unwrap()
    );
    // A --config whose synthetic_bars the resume would drop is refused, naming it.
    let toml = dir.join("synthetic.toml");
    std::fs::write(&toml, "synthetic_bars = 500\n").unwrap();
    let o = tradetune(&[
        "train",
        "--resume",
        first.to_str().unwrap(),
        "--out",
        dir.join("fourth").to_str().unwrap(),
        "--config",
        toml.to_str().unwrap(),
        "--total-timesteps",
        "512",
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("synthetic.toml") && err.contains("synthetic_bars"),
        "{err}"
    );
    assert!(!dir.join("fourth").exists());
    // Resuming from a directory that is not a checkpoint names the missing file (one that is
    // not there at all is named as such: `resuming_a_missing_checkpoint_names_it`).
    std::fs::create_dir_all(dir.join("nothing")).unwrap();
    let o = tradetune(&[
        "train",
        "--resume",
        dir.join("nothing").to_str().unwrap(),
        "--total-timesteps",
        "512",
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("ppo.json"), "{}", text(&o.stderr));
}

/// `tradetune train --json` on wgpu's default adapter, `total` samples of a tiny run (4 envs
/// × 32 steps on the host, 16-wide nets, one epoch) into `dir/name`, with `vars` set.
fn tiny_gpu_train(
    dir: &std::path::Path,
    name: &str,
    total: usize,
    vars: &[(&str, &str)],
) -> std::process::Output {
    let ppo = dir.join("ppo.json");
    std::fs::write(
        &ppo,
        r#"{"n_steps": 32, "batch_size": 64, "n_epochs": 1, "seed": 3,
            "policy": {"net_arch": {"pi": [16], "vf": [16]}}}"#,
    )
    .unwrap();
    let env = dir.join("env.json");
    std::fs::write(&env, r#"{"n_envs": 4, "placement": "host"}"#).unwrap();
    let out = dir.join(name);
    let total = total.to_string();
    tradetune_with(
        &[
            "train",
            "--device",
            "wgpu",
            "--ppo",
            ppo.to_str().unwrap(),
            "--env",
            env.to_str().unwrap(),
            "--total-timesteps",
            &total,
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
        vars,
    )
}

/// Issue 32, "compile once, and say so": while a GPU run's first update compiles its kernels
/// (tens of seconds on a card, no sample trained yet), `train --json` says so as it happens, a
/// `compiling` event about once a second before the first progress, and the totals when it
/// stops, which are the kernels the run reports as compiled in its summary.
#[test]
fn a_gpu_run_says_it_is_compiling_before_its_first_update_ends() {
    if !wgpu_here("a_gpu_run_says_it_is_compiling_before_its_first_update_ends") {
        return;
    }
    let dir = scratch("cli_train", "compiling");
    let o = tiny_gpu_train(&dir, "run", 256, &[]);
    let stdout = text(&o.stdout);
    let events = json_events(&o);
    let first_progress = events
        .iter()
        .position(|e| e["event"] == "progress")
        .expect("progress events");
    let compiling: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "compiling")
        .collect();
    // Said while the first update was still going: before any progress.
    let first = events
        .iter()
        .position(|e| e["event"] == "compiling")
        .expect("a compiling event");
    assert!(first < first_progress, "{stdout}");
    assert_eq!(compiling[0]["active"], true, "{stdout}");
    assert!(compiling[0]["kernels_compiled"].as_u64().unwrap() > 0);
    // Each compiling ends with its totals (the last one at the latest when the run ends),
    // and together they hold the kernels the run's updates counted as theirs.
    let totals: Vec<&&serde_json::Value> =
        compiling.iter().filter(|e| e["active"] == false).collect();
    assert!(!totals.is_empty(), "{stdout}");
    assert_eq!(compiling.last().unwrap()["active"], false, "{stdout}");
    let compiled: u64 = totals
        .iter()
        .map(|e| e["kernels_compiled"].as_u64().unwrap())
        .sum();
    let report = events.last().unwrap();
    let counted = report["kernels"]["compiled"].as_u64().unwrap();
    assert!(
        counted > 0 && compiled >= counted,
        "{compiled} < {counted}: {stdout}"
    );
    for e in &totals {
        assert!(e["seconds"].as_f64().unwrap() >= 0.0);
    }
}

/// A GPU run of one update compiles in every update it has: no update ran steady, so its JSON
/// report claims no steady samples/s (a study's trial claims none either), and says why.
#[test]
fn a_gpu_run_whose_every_update_compiled_claims_no_steady_rate() {
    if !wgpu_here("a_gpu_run_whose_every_update_compiled_claims_no_steady_rate") {
        return;
    }
    let dir = scratch("cli_train", "one_update");
    let o = tiny_gpu_train(&dir, "run", 128, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let events = json_events(&o);
    let report = events.last().unwrap();
    assert_eq!(report["updates"], 1, "{report}");
    assert_eq!(report["compile_not_apart"], true, "{report}");
    assert!(
        report.get("steady_samples_per_second").is_none(),
        "{report}"
    );
    assert!(
        report["samples_per_second"]
            .as_f64()
            .is_some_and(|s| s > 0.0)
    );
}

/// Issue 32, "keep what can be kept": a GPU cache whose store cannot be read (bytes that are
/// not a database, as a full disk or a copy stopped halfway leaves) made every later run
/// autotune again while the summary said a next run would autotune nothing. Now the broken
/// file is moved aside (kept, named in a warning), a new store is started, and the next run
/// finds its answers there.
#[test]
fn a_broken_gpu_cache_is_moved_aside_and_the_next_run_autotunes_nothing() {
    let test = "a_broken_gpu_cache_is_moved_aside_and_the_next_run_autotunes_nothing";
    if !wgpu_here(test) {
        return;
    }
    // The store of the adapter `--device wgpu` opens (wgpu's default).
    let environment = tradetune_engine::device::kernels::environment_of(
        &tradetune_engine::device::adapters::default_adapter().expect("a wgpu adapter"),
    );
    let dir = scratch("cli_train", "broken_cache");
    let cache = dir.join("gpu-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let store = cache.join(format!("{environment}.db"));
    let garbage: Vec<u8> = (0..50_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&store, &garbage).unwrap();
    let run = |name: &str| {
        tiny_gpu_train(
            &dir,
            name,
            128,
            &[("TRADETUNE_GPU_CACHE", cache.to_str().unwrap())],
        )
    };
    let autotuned = |o: &std::process::Output| {
        let events = json_events(o);
        events.last().unwrap()["kernels"]["autotune_runs"]
            .as_u64()
            .unwrap()
    };
    let first = run("first");
    let said = text(&first.stderr);
    assert!(
        said.contains("warning: TradeTune's GPU cache")
            && said.contains("could not be read (file is not a database)"),
        "{said}"
    );
    assert!(autotuned(&first) > 0, "{said}");
    // The broken file is kept beside the new store, under the name the warning gives.
    let moved: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".db.unreadable-"))
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(std::fs::read(&moved[0]).unwrap(), garbage);
    assert!(said.contains(&moved[0].display().to_string()), "{said}");
    assert_ne!(std::fs::read(&store).unwrap(), garbage);
    // The new store kept the answers: the next run of the same shapes autotunes nothing, and
    // finds nothing to warn of.
    let second = run("second");
    assert_eq!(autotuned(&second), 0, "{}", text(&second.stderr));
    assert!(
        !text(&second.stderr).contains("TradeTune's GPU cache"),
        "{}",
        text(&second.stderr)
    );
}

/// `--resume` of a folder that is not there is named as the checkpoint it should be, not as a
/// missing `ppo.json` inside it.
#[test]
fn resuming_a_missing_checkpoint_names_it() {
    let dir = scratch("cli_train", "resume_missing");
    let gone = dir.join("nosuch");
    let o = tradetune(&["train", "--resume", gone.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--resume") && err.contains("nosuch: no such checkpoint directory"),
        "{err}"
    );
}
