//! Criterion benchmark of one frame of the desktop program at the load: 8 live series
//! of 100,000 points each and a 10,000-trial table visible, side by side. Measured through the
//! egui_kittest harness: input, layout and tessellation on the CPU — everything the UI thread
//! does per frame — without the GPU's rasterisation (no GPU here; Mesa's software rasteriser
//! would measure the CPU emulating one).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use egui_kittest::Harness;
use std::sync::Arc;
use tradetune_app::ui::panels;

use tradetune_app::ui::panels::studies::{ParamCell, sig4};
use tradetune_app::ui::state::{AppState, Settings, StudyGroup, Tab, TrialColumn, TrialRow};
use tradetune_app::ui::tasks::DbContents;
use tradetune_engine::storage::{OptunaDistribution, TrialParam, TrialState};
use tradetune_engine::telemetry::ring::PlotPoint;

const SERIES: usize = 8;
const POINTS: usize = 100_000;
const TRIALS: usize = 10_000;

fn loaded_state() -> AppState {
    let mut state = AppState::new(
        Settings {
            tab: Tab::Studies,
            ..Settings::default()
        },
        Vec::new(),
    );
    let v = &mut state.studies;
    v.db = Some(DbContents {
        path: "bench.db".into(),
        studies: Vec::new(),
    });
    v.groups = vec![StudyGroup {
        name: "bench".into(),
        members: vec!["bench".into()],
        n_by_state: [0, TRIALS, 0, 0, 0],
        best: Some(0.0),
        minimize: true,
    }];
    v.selected = Some("bench".into());
    let lr = Arc::new(OptunaDistribution::float(1e-5, 1e-2, true, None).unwrap());
    let envs = Arc::new(OptunaDistribution::int(8, 64, false, 1).unwrap());
    v.rows = (0..TRIALS)
        .map(|i| TrialRow {
            param_cells: [
                ("ppo.learning_rate", 1e-4 * (1 + i % 10) as f64),
                ("env.n_envs", (8 << (i % 4)) as f64),
            ]
            .into_iter()
            .map(|(name, x)| ParamCell {
                name: name.into(),
                text: sig4(x),
                full: x.to_string(),
                key: x,
            })
            .collect(),
            attrs: Vec::new(),
            started_s: Some(i as f64),
            ended_s: Some(i as f64 + 0.5),
            worker: format!("host#1/worker-{}", i % 4),
            trial_id: i as i64 + 1,
            telemetry: Vec::new(),
            study: "bench".into(),
            number: i as i64,
            state: TrialState::Complete,
            value: Some(((i * 7919) % 1000) as f64 / 1000.0),
            duration_s: Some(60.0 + (i % 97) as f64),
            device: format!("cpu:{}", i % 2),
            params: format!(
                "ppo.learning_rate={:.6}, env.n_envs={}",
                1e-4 * (1 + i % 10) as f64,
                8 << (i % 4)
            ),
            fail_reason: None,
            numeric_params: vec![
                ("ppo.learning_rate".into(), 1e-4 * (1 + i % 10) as f64),
                ("env.n_envs".into(), (8 << (i % 4)) as f64),
            ],
            intermediate: Vec::new(),
            stored_params: vec![
                TrialParam {
                    name: "ppo.learning_rate".into(),
                    internal: 1e-4 * (1 + i % 10) as f64,
                    distribution: lr.clone(),
                },
                TrialParam {
                    name: "env.n_envs".into(),
                    internal: (8 << (i % 4)) as f64,
                    distribution: envs.clone(),
                },
            ],
            verdict: None,
            samples_per_s: Some(1000.0),
            checkpoint: None,
            placement: String::new(),
            applied_config: None,
        })
        .collect();
    v.sort = (TrialColumn::Value, false);
    v.update_columns();
    v.refresh();
    state
}

fn series() -> Vec<Vec<PlotPoint>> {
    (0..SERIES)
        .map(|s| {
            (0..POINTS)
                .map(|i| PlotPoint {
                    t: i as f64,
                    v: ((i as f64) * 0.001 * (s + 1) as f64).sin() * 50.0 + 50.0,
                })
                .collect()
        })
        .collect()
}

fn frame(c: &mut Criterion) {
    let lines = series();
    let state = loaded_state();
    let mut harness = Harness::builder()
        .with_size([1920.0, 1080.0])
        .build_ui_state(
            move |ui, state: &mut AppState| {
                let mut commands = Vec::new();
                ui.columns(2, |cols| {
                    for (i, s) in lines.iter().enumerate() {
                        panels::run::chart(
                            &mut cols[0],
                            &format!("series {i}"),
                            "bench",
                            &[("v", s)],
                        );
                    }
                    panels::studies::show(&mut cols[1], state, &mut commands);
                });
            },
            state,
        );
    harness.run_steps(3);
    let mut group = c.benchmark_group("ui_frame");
    group.throughput(Throughput::Elements(1));
    group.bench_function(
        format!("{SERIES} series x {POINTS} points + {TRIALS}-trial table, 1920x1080"),
        |b| b.iter(|| harness.step()),
    );
    group.finish();
}

criterion_group!(benches, frame);
criterion_main!(benches);
