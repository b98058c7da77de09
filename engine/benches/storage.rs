//! Storage benchmark: write a 5,000-trial study into a fresh SQLite file in Optuna's schema,
//! then load all of it (params, values, intermediate values, attributes) back.
//!
//! Config: 8 parameters per trial (float log/linear/step, int step/log, three categoricals),
//! 10 intermediate values, 2 user attributes, one objective. Writes go one transaction per call,
//! as workers do (create, set 8 params, 10 reports, 1 attr batch, complete), plus the one-
//! transaction `add_trial` path. Issue 4's bar: loading 5,000 trials in <= 0.1 s (Optuna: 4.6 s).
//!
//! Run: `cargo bench -p tradetune-engine --bench storage` (set TRADETUNE_BENCH_TRIALS to change N).

use std::hint::black_box;
use std::time::Instant;

use tradetune_engine::storage::{
    CategoricalChoice, JsonValue, NewTrial, OptunaDistribution, Storage, StudyDirection, TrialState,
};

fn space() -> Vec<(String, OptunaDistribution)> {
    use CategoricalChoice as C;
    let d = |r: Result<OptunaDistribution, _>| r.expect("valid distribution");
    vec![
        (
            "ppo.learning_rate".into(),
            d(OptunaDistribution::float(1e-5, 1e-2, true, None)),
        ),
        (
            "ppo.gamma".into(),
            d(OptunaDistribution::float(0.9, 0.9999, false, None)),
        ),
        (
            "ppo.clip_range".into(),
            d(OptunaDistribution::float(0.1, 0.3, false, Some(0.05))),
        ),
        (
            "ppo.batch_size".into(),
            d(OptunaDistribution::int(256, 16384, false, 256)),
        ),
        (
            "ppo.net_width".into(),
            d(OptunaDistribution::int(64, 2048, true, 1)),
        ),
        (
            "ppo.n_steps".into(),
            d(OptunaDistribution::categorical(vec![
                C::Int(1024),
                C::Int(2048),
                C::Int(4096),
            ])),
        ),
        (
            "ppo.precision".into(),
            d(OptunaDistribution::categorical(vec![
                C::Str("f32".into()),
                C::Str("bf16".into()),
            ])),
        ),
        (
            "env.reward".into(),
            d(OptunaDistribution::categorical(vec![
                C::None,
                C::Bool(true),
                C::Str("sharpe".into()),
            ])),
        ),
    ]
}

fn internal(k: usize, j: usize, d: &OptunaDistribution) -> f64 {
    let u = ((k * 7919 + j * 104_729) % 1000) as f64 / 1000.0;
    match d {
        OptunaDistribution::Float(f) => match f.step {
            Some(step) => f.low + ((u * (f.high - f.low) / step).floor() * step),
            None => f.low + u * (f.high - f.low),
        },
        OptunaDistribution::Int(i) => {
            (i.low + ((u * ((i.high - i.low) / i.step) as f64) as i64) * i.step) as f64
        }
        OptunaDistribution::Categorical(c) => (u * c.choices.len() as f64).floor(),
    }
}

fn main() {
    let n: usize = std::env::var("TRADETUNE_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let space = space();
    println!(
        "storage bench: {n} trials x 8 params, 10 intermediate values, 2 user attrs, 1 objective (SQLite WAL)"
    );

    // Worker-style writes: one short transaction per call.
    let path = dir.path().join("calls.db");
    let mut s = Storage::open(&path).expect("open");
    let study = s
        .create_study("bench_calls", &[StudyDirection::Maximize])
        .expect("study");
    let t0 = Instant::now();
    for k in 0..n {
        let t = s.create_trial(study).expect("trial");
        let params: Vec<(String, f64, OptunaDistribution)> = space
            .iter()
            .enumerate()
            .map(|(j, (name, d))| (name.clone(), internal(k, j, d), d.clone()))
            .collect();
        s.set_params(t.trial_id, &params).expect("params");
        for step in 0..10 {
            s.report(t.trial_id, step, (k + step as usize) as f64 * 1e-3)
                .expect("report");
        }
        s.set_trial_user_attr(t.trial_id, "device", &JsonValue::from("wgpu:0"))
            .expect("attr");
        s.set_trial_user_attr(t.trial_id, "seed", &JsonValue::Int(k as i64))
            .expect("attr");
        s.complete_trial(t.trial_id, &[k as f64 * 1e-4])
            .expect("complete");
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "write, one transaction per call (15 per trial): {n} trials in {dt:.3} s = {:.0} trials/s",
        n as f64 / dt
    );

    // Whole trials in one transaction (Optuna's add_trial).
    let path2 = dir.path().join("add.db");
    let mut s2 = Storage::open(&path2).expect("open");
    let study2 = s2
        .create_study("bench_add", &[StudyDirection::Maximize])
        .expect("study");
    let t0 = Instant::now();
    for k in 0..n {
        let mut nt = NewTrial::new(TrialState::Complete);
        nt.values = Some(vec![k as f64 * 1e-4]);
        nt.params = space
            .iter()
            .enumerate()
            .map(|(j, (name, d))| (name.clone(), internal(k, j, d), d.clone()))
            .collect();
        nt.intermediate_values = (0..10)
            .map(|step| (step, (k + step as usize) as f64 * 1e-3))
            .collect();
        nt.user_attrs = vec![
            ("device".into(), JsonValue::from("wgpu:0")),
            ("seed".into(), JsonValue::Int(k as i64)),
        ];
        s2.add_trial(study2, &nt).expect("add");
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "write, one transaction per trial (add_trial): {n} trials in {dt:.3} s = {:.0} trials/s",
        n as f64 / dt
    );

    // Load: best of 5, on a fresh read-only connection like `study show`.
    let reader = Storage::open_read_only(&path).expect("open read-only");
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = Instant::now();
        let trials = reader.trials(study).expect("load");
        assert_eq!(trials.len(), n);
        black_box(&trials);
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!(
        "load all trials: {n} trials in {:.1} ms = {:.0} trials/s (bar: 5,000 in <= 100 ms)",
        best * 1e3,
        n as f64 / best
    );
    let t0 = Instant::now();
    let summaries = reader.study_summaries().expect("summaries");
    black_box(summaries);
    println!(
        "study summaries: {:.2} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    let t0 = Instant::now();
    let mut csv = Vec::new();
    reader.export_csv("bench_calls", &mut csv).expect("csv");
    println!(
        "CSV export: {n} trials, {} bytes in {:.1} ms",
        csv.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
}
