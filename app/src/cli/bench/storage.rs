//! `tradetune bench storage`: the study storage under the load workers put on it.
//!
//! Two measurements on each database given (SQLite files and PostgreSQL URLs, side by side):
//! - **claims**: `--workers` threads, each with its own connection opened before the clock
//!   starts, claim and finish `--trials-per-worker` trials each with an instant objective
//!   (`x²`), the way `tradetune worker` claims them: the trial created inside the transaction
//!   that counts the study's budget (study row locked), one parameter, the value. Trials per
//!   second from the first start to the last finish.
//! - **load**: open the database and read every trial of a study of `--load-trials` trials
//!   (each with 4 parameters, 10 intermediate values and 2 user attributes), as the Studies
//!   panel and `study show` do.
//!
//! With `--peer PYTHON`, Optuna's own client (the built-in benches/peers/optuna_storage.py:
//! processes instead of threads, `ask`/`tell` with a RandomSampler) does the same on the same
//! database in the same run, interleaved with ours, the order alternating per repetition. Every
//! study the bench creates is deleted at the end, also when it fails.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use tradetune_engine::storage::{
    CategoricalChoice, JsonValue, NewTrial, OptunaDistribution, Storage, StudyDirection, TrialState,
};

use super::{cpu_model, load_average};
use crate::launch::db_label;

/// Optuna's side, built into the binary so `--peer` needs no checkout.
const PEER_SCRIPT: &str = include_str!("../../../../benches/peers/optuna_storage.py");

#[derive(Debug, Args)]
pub struct StorageArgs {
    /// A database to measure: a SQLite file (created if missing) or
    /// postgresql://user@host[:port]/dbname (password from ~/.pgpass or PGPASSWORD). Repeat the
    /// flag to measure several side by side. Default: a new SQLite file in a temporary folder.
    #[arg(long = "storage", alias = "db", value_name = "URL")]
    pub storages: Vec<PathBuf>,
    /// Concurrent workers claiming trials.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Trials each worker claims and finishes per repetition.
    #[arg(long, default_value_t = 50)]
    pub trials_per_worker: usize,
    /// Trials of the study whose load time is measured.
    #[arg(long, default_value_t = 5000)]
    pub load_trials: usize,
    /// Repetitions of each measurement (each side), reported as min/median/max.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Optuna's client to measure in the same run: a Python interpreter with optuna (and
    /// psycopg for PostgreSQL), e.g. python3 where CI installed them.
    #[arg(long, value_name = "PYTHON")]
    pub peer: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One claims run: trials finished by all workers over the wall time.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ClaimRun {
    trials: usize,
    failed: usize,
    #[serde(default)]
    errors: Vec<String>,
    seconds: f64,
    trials_per_second: f64,
}

/// One load run: the trials read and the time to open and read them.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct LoadRun {
    trials: usize,
    params: usize,
    intermediate_values: usize,
    seconds: f64,
}

/// min/median/max of a figure over the runs.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Spread {
    min: f64,
    median: f64,
    max: f64,
}

impl Spread {
    fn of(v: impl Iterator<Item = f64>) -> Self {
        let (min, median, max) = tradetune_engine::front::min_median_max(&v.collect::<Vec<_>>())
            .unwrap_or((f64::NAN, f64::NAN, f64::NAN));
        Spread { min, median, max }
    }

    fn cell(&self, digits: usize) -> String {
        format!(
            "{:.d$}/{:.d$}/{:.d$}",
            self.min,
            self.median,
            self.max,
            d = digits
        )
    }
}

/// Everything measured on one database.
#[derive(Debug, serde::Serialize)]
struct DatabaseRuns {
    /// The database, its password hidden.
    storage: String,
    backend: &'static str,
    /// Seconds to write the load study (ours, one transaction per trial).
    write_seconds: f64,
    claims_ours: Vec<ClaimRun>,
    claims_optuna: Vec<ClaimRun>,
    load_ours: Vec<LoadRun>,
    load_optuna: Vec<LoadRun>,
    claims_per_second_ours: Spread,
    claims_per_second_optuna: Option<Spread>,
    load_seconds_ours: Spread,
    load_seconds_optuna: Option<Spread>,
}

pub fn bench_storage(args: StorageArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.workers >= 1, "--workers must be at least 1");
    anyhow::ensure!(
        args.trials_per_worker >= 1,
        "--trials-per-worker must be at least 1"
    );
    anyhow::ensure!(args.load_trials >= 1, "--load-trials must be at least 1");
    anyhow::ensure!(args.repeat >= 1, "--repeat must be at least 1");
    let temp = tempfile::tempdir().context("creating a temporary folder")?;
    crate::leave::remove_on_leave(temp.path());
    let storages = if args.storages.is_empty() {
        vec![temp.path().join("bench-storage.db")]
    } else {
        args.storages.clone()
    };
    let script = match &args.peer {
        Some(_) => {
            let path = temp.path().join("optuna_storage.py");
            std::fs::write(&path, PEER_SCRIPT)
                .with_context(|| format!("writing {}", path.display()))?;
            Some(path)
        }
        None => None,
    };
    let load_before = load_average();
    let mut results = Vec::new();
    for url in &storages {
        let peer = args.peer.as_deref().zip(script.as_deref());
        results.push(bench_database(url, &args, peer)?);
    }
    let load_after = load_average();

    if args.json {
        let out = serde_json::json!({
            "cpu": cpu_model(),
            "load_average_before": load_before,
            "load_average_after": load_after,
            "workers": args.workers,
            "trials_per_worker": args.trials_per_worker,
            "load_trials": args.load_trials,
            "repeat": args.repeat,
            "databases": results,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    outln!(
        "claims: {} workers × {} trials, instant objective; load: {} trials × (4 params, 10 \
         intermediate values, 2 user attributes); {} runs each, min/median/max",
        args.workers,
        args.trials_per_worker,
        args.load_trials,
        args.repeat
    );
    outln!(
        "{:<11} {:<26} {:>26} {:>26} {:>14}",
        "database",
        "figure",
        "TradeTune",
        "Optuna",
        "TradeTune is"
    );
    for r in &results {
        let claim_ratio = r
            .claims_per_second_optuna
            .map(|o| format!("{:.1}× faster", r.claims_per_second_ours.median / o.median));
        let load_ratio = r
            .load_seconds_optuna
            .map(|o| format!("{:.1}× faster", o.median / r.load_seconds_ours.median));
        let dash = || "-".to_string();
        outln!(
            "{:<11} {:<26} {:>26} {:>26} {:>14}",
            r.backend,
            "trials claimed+finished/s",
            r.claims_per_second_ours.cell(1),
            r.claims_per_second_optuna
                .map(|s| s.cell(1))
                .unwrap_or_else(dash),
            claim_ratio.unwrap_or_else(dash)
        );
        outln!(
            "{:<11} {:<26} {:>26} {:>26} {:>14}",
            r.backend,
            format!("open + read {} trials, s", args.load_trials),
            r.load_seconds_ours.cell(3),
            r.load_seconds_optuna
                .map(|s| s.cell(3))
                .unwrap_or_else(dash),
            load_ratio.unwrap_or_else(dash)
        );
        for (who, runs) in [("TradeTune", &r.claims_ours), ("Optuna", &r.claims_optuna)] {
            let failed: usize = runs.iter().map(|c| c.failed).sum();
            if failed > 0 {
                let first = runs.iter().flat_map(|c| c.errors.first()).next();
                outln!(
                    "  {who} on {}: {failed} claims failed (first: {})",
                    r.backend,
                    first.map(String::as_str).unwrap_or("no message")
                );
            }
        }
        outln!(
            "  {}: {}; the load study written in {:.2} s ({:.0} trials/s, one transaction each)",
            r.backend,
            r.storage,
            r.write_seconds,
            args.load_trials as f64 / r.write_seconds
        );
    }
    if let Some(cpu) = cpu_model() {
        outln!("cpu: {cpu}, {} cores", num_cpus());
    }
    if let (Some(b), Some(a)) = (load_before, load_after) {
        outln!("load average before: {b}; load average after: {a}");
    }
    if args.peer.is_none() {
        outln!("(no --peer: Optuna's client not measured, no ratio)");
    }
    Ok(())
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Every measurement on one database; the studies it created are deleted whatever happens.
fn bench_database(
    url: &Path,
    args: &StorageArgs,
    peer: Option<(&Path, &Path)>,
) -> anyhow::Result<DatabaseRuns> {
    let label = db_label(url);
    let mut storage = Storage::open(url).with_context(|| format!("opening {label}"))?;
    let backend = if storage.is_postgres() {
        "postgresql"
    } else {
        "sqlite"
    };
    let prefix = format!("tradetune-bench-storage-{}", std::process::id());
    let mut created = Vec::new();
    let result = measure(url, &label, args, peer, &prefix, &mut created);
    // Clean up: our studies and Optuna's, by name (a failed run may have left any of them).
    let mut cleanup_error = None;
    for name in &created {
        if let Ok(id) = storage.study_id(name)
            && let Err(e) = storage.delete_study(id)
        {
            cleanup_error.get_or_insert(e);
        }
    }
    let (write_seconds, claims_ours, claims_optuna, load_ours, load_optuna) = result?;
    if let Some(e) = cleanup_error {
        return Err(e).with_context(|| format!("{label}: deleting the bench's studies"));
    }
    Ok(DatabaseRuns {
        storage: label,
        backend,
        write_seconds,
        claims_per_second_ours: Spread::of(claims_ours.iter().map(|r| r.trials_per_second)),
        claims_per_second_optuna: (!claims_optuna.is_empty())
            .then(|| Spread::of(claims_optuna.iter().map(|r| r.trials_per_second))),
        load_seconds_ours: Spread::of(load_ours.iter().map(|r| r.seconds)),
        load_seconds_optuna: (!load_optuna.is_empty())
            .then(|| Spread::of(load_optuna.iter().map(|r| r.seconds))),
        claims_ours,
        claims_optuna,
        load_ours,
        load_optuna,
    })
}

type Measured = (
    f64,
    Vec<ClaimRun>,
    Vec<ClaimRun>,
    Vec<LoadRun>,
    Vec<LoadRun>,
);

fn measure(
    url: &Path,
    label: &str,
    args: &StorageArgs,
    peer: Option<(&Path, &Path)>,
    prefix: &str,
    created: &mut Vec<String>,
) -> anyhow::Result<Measured> {
    let load_name = format!("{prefix}-load");
    created.push(load_name.clone());
    errln!("{label}: writing a study of {} trials…", args.load_trials);
    let write_seconds = write_load_study(url, &load_name, args.load_trials)
        .with_context(|| format!("{label}: writing the load study"))?;
    let (mut claims_ours, mut claims_optuna) = (Vec::new(), Vec::new());
    let (mut load_ours, mut load_optuna) = (Vec::new(), Vec::new());
    for rep in 0..args.repeat {
        errln!("{label}: run {}/{}…", rep + 1, args.repeat);
        // Alternate who goes first, so a machine warming up or slowing down favours neither.
        let peer_first = rep % 2 == 1;
        for side in [peer_first, !peer_first] {
            if side {
                let Some((python, script)) = peer else {
                    continue;
                };
                let name = format!("{prefix}-claims-optuna-{rep}");
                created.push(name.clone());
                let run: ClaimRun = run_peer(
                    python,
                    script,
                    url,
                    &[
                        "claim",
                        "--study",
                        &name,
                        "--workers",
                        &args.workers.to_string(),
                        "--trials-per-worker",
                        &args.trials_per_worker.to_string(),
                        "--seed",
                        &(rep * args.workers).to_string(),
                    ],
                )?;
                claims_optuna.push(run);
                let run: LoadRun = run_peer(python, script, url, &["load", "--study", &load_name])?;
                check_same_read(&run, args.load_trials, "Optuna")?;
                load_optuna.push(run);
            } else {
                let name = format!("{prefix}-claims-ours-{rep}");
                created.push(name.clone());
                claims_ours.push(
                    claim_ours(url, &name, args.workers, args.trials_per_worker)
                        .with_context(|| format!("{label}: claiming trials"))?,
                );
                let run = load_ours_once(url, &load_name)
                    .with_context(|| format!("{label}: reading the load study"))?;
                check_same_read(&run, args.load_trials, "TradeTune")?;
                load_ours.push(run);
            }
        }
    }
    Ok((
        write_seconds,
        claims_ours,
        claims_optuna,
        load_ours,
        load_optuna,
    ))
}

/// Both sides must have read the whole study the bench wrote.
fn check_same_read(run: &LoadRun, trials: usize, who: &str) -> anyhow::Result<()> {
    let want = (trials, trials * 4, trials * 10);
    let got = (run.trials, run.params, run.intermediate_values);
    anyhow::ensure!(
        got == want,
        "{who} read {} trials, {} parameters and {} intermediate values of the load study; \
         {} trials, {} and {} were written",
        got.0,
        got.1,
        got.2,
        want.0,
        want.1,
        want.2
    );
    Ok(())
}

/// A point in [0, 1) for trial `i`: the golden-ratio sequence, so values spread evenly.
fn spread_point(i: usize) -> f64 {
    (i as f64 * 0.618_033_988_749_895).fract()
}

/// Writes the load study: COMPLETE trials with four parameters of every kind, ten
/// intermediate values and two user attributes each. Returns the seconds it took.
fn write_load_study(url: &Path, name: &str, trials: usize) -> anyhow::Result<f64> {
    let mut s = Storage::open(url)?;
    let study = s.create_study(name, &[StudyDirection::Minimize])?;
    let lr = OptunaDistribution::float(1e-5, 1e-2, true, None)?;
    let gamma = OptunaDistribution::float(0.9, 0.9999, false, None)?;
    let layers = OptunaDistribution::int(1, 4, false, 1)?;
    let batch = OptunaDistribution::categorical(
        [64, 128, 256, 512]
            .into_iter()
            .map(CategoricalChoice::Int)
            .collect(),
    )?;
    let start = Instant::now();
    let mut shown = 0;
    for i in 0..trials {
        let u = spread_point(i);
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![u * u]);
        t.params = vec![
            (
                "ppo.learning_rate".into(),
                1e-5 * 1e3f64.powf(u),
                lr.clone(),
            ),
            ("ppo.gamma".into(), 0.9 + 0.0999 * u, gamma.clone()),
            ("net.layers".into(), (1 + i % 4) as f64, layers.clone()),
            ("ppo.batch_size".into(), (i % 4) as f64, batch.clone()),
        ];
        t.intermediate_values = (0..10).map(|k| (k, u + 1.0 / (k + 1) as f64)).collect();
        t.user_attrs = vec![
            ("sharpe".into(), JsonValue::from(1.0 - u)),
            ("device".into(), JsonValue::from("cpu")),
        ];
        s.add_trial(study, &t)?;
        if (i + 1) * 10 / trials > shown {
            shown = (i + 1) * 10 / trials;
            err!("\r  {}/{trials}", i + 1);
        }
    }
    errln!();
    Ok(start.elapsed().as_secs_f64())
}

/// Our side of the load figure: open, find the study, read every trial.
fn load_ours_once(url: &Path, name: &str) -> anyhow::Result<LoadRun> {
    let start = Instant::now();
    let s = Storage::open_read_only(url)?;
    let study = s.study_id(name)?;
    let trials = s.trials(study)?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(LoadRun {
        trials: trials.len(),
        params: trials.iter().map(|t| t.params.len()).sum(),
        intermediate_values: trials.iter().map(|t| t.intermediate_values.len()).sum(),
        seconds,
    })
}

/// Our side of the claims figure: `workers` threads with a connection each (opened before the
/// clock starts), claiming trials within the study's budget as `tradetune worker` does.
fn claim_ours(
    url: &Path,
    name: &str,
    workers: usize,
    per_worker: usize,
) -> anyhow::Result<ClaimRun> {
    let budget = workers * per_worker;
    let study = Storage::open(url)?.create_study(name, &[StudyDirection::Minimize])?;
    let x = OptunaDistribution::float(-10.0, 10.0, false, None)?;
    let connections = (0..workers)
        .map(|_| Storage::open(url))
        .collect::<Result<Vec<_>, _>>()?;
    let barrier = Arc::new(Barrier::new(workers));
    let runs: Vec<(Instant, Instant, usize, Vec<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = connections
            .into_iter()
            .enumerate()
            .map(|(w, mut s)| {
                let barrier = Arc::clone(&barrier);
                let x = x.clone();
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let (mut failed, mut errors) = (0, Vec::new());
                    for i in 0..per_worker {
                        let v = -10.0 + 20.0 * spread_point(w * per_worker + i);
                        let claimed = s.create_trial_within(study, Some(budget)).and_then(|t| {
                            let Some(t) = t else { return Ok(()) };
                            s.set_param(t.trial_id, "x", v, &x)?;
                            s.complete_trial(t.trial_id, &[v * v])
                        });
                        if let Err(e) = claimed {
                            failed += 1;
                            if errors.len() < 3 {
                                errors.push(e.to_string());
                            }
                        }
                    }
                    (start, Instant::now(), failed, errors)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a bench worker thread panicked"))
            .collect()
    });
    let start = runs.iter().map(|r| r.0).min().unwrap_or_else(Instant::now);
    let end = runs.iter().map(|r| r.1).max().unwrap_or(start);
    let seconds = end.duration_since(start).as_secs_f64();
    let s = Storage::open_read_only(url)?;
    let trials = s
        .trials(study)?
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .count();
    Ok(ClaimRun {
        trials,
        failed: runs.iter().map(|r| r.2).sum(),
        errors: runs.into_iter().flat_map(|r| r.3).take(3).collect(),
        seconds,
        trials_per_second: if seconds > 0.0 {
            trials as f64 / seconds
        } else {
            0.0
        },
    })
}

/// Runs Optuna's side once and reads the JSON line it prints last. The URL goes through the
/// environment, not the command line, so a password in it never shows in `ps`.
fn run_peer<T: serde::de::DeserializeOwned>(
    python: &Path,
    script: &Path,
    url: &Path,
    args: &[&str],
) -> anyhow::Result<T> {
    let out = std::process::Command::new(python)
        .arg(script)
        .args(args)
        .env("TRADETUNE_BENCH_STORAGE", url)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("--peer: cannot run {}", python.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "--peer: {} (Optuna's client, {}) failed ({}):\n{}\n(it needs optuna, and psycopg \
             for PostgreSQL: python3 -m pip install optuna 'psycopg[binary]')",
            python.display(),
            args[0],
            out.status,
            super::stderr_tail(&out, 12)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = super::last_line(&stdout)
        .ok_or_else(|| anyhow::anyhow!("--peer: Optuna's client printed nothing ({})", args[0]))?;
    serde_json::from_str(line)
        .with_context(|| format!("--peer: Optuna's client printed no result: {line}"))
}
