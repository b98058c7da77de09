//! Criterion benchmark of one frame of the desktop program at the load: 8 live series
//! of 100,000 points each and a 10,000-trial table visible, side by side; and the Studies
//! panel's parallel coordinates over 10,000 trials × 8 parameters with the table. Measured through the
//! egui_kittest harness: input, layout and tessellation on the CPU — everything the UI thread
//! does per frame — without the GPU's rasterisation (no GPU here; Mesa's software rasteriser
//! would measure the CPU emulating one). The harness does not tessellate by itself, so each
//! iteration tessellates the frame's shapes as eframe does (from a copy of them: the copy is
//! counted too).

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use egui_kittest::Harness;
use tradetune_app::ui::panels;
use tradetune_app::ui::panels::studies::PlotTab;
use tradetune_app::ui::tasks::{ReadRows, TrialColumn};
use tradetune_engine::telemetry::ring::PlotPoint;

mod support;

const SERIES: usize = 8;
const POINTS: usize = 100_000;
const TRIALS: usize = 10_000;
/// Parameters of the parallel-coordinates load (issue 17: 10,000 trials × 8 parameters).
const PC_PARAMS: usize = 8;

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
    // The allocator as the desktop program sets it (see `tradetune_app::ui::allocator`).
    tradetune_app::ui::allocator::tune();
    let lines = series();
    let state = support::studies_state(TRIALS, 2, PlotTab::History);
    let mut harness = Harness::builder()
        .with_size([1920.0, 1080.0])
        .build_ui_state(
            move |ui, state: &mut support::Studies| {
                ui.columns(2, |cols| {
                    for (i, s) in lines.iter().enumerate() {
                        panels::run::chart(
                            &mut cols[0],
                            &format!("series {i}"),
                            "bench",
                            &[("v", s)],
                        );
                    }
                    state.ui(&mut cols[1]);
                });
            },
            state,
        );
    harness.run_steps(3);
    let mut group = c.benchmark_group("ui_frame");
    group.throughput(Throughput::Elements(1));
    group.bench_function(
        format!("{SERIES} series x {POINTS} points + {TRIALS}-trial table, 1920x1080"),
        |b| b.iter(|| support::frame(&mut harness)),
    );
    // The Studies panel alone, showing parallel coordinates (an axis per parameter and the
    // objective, a line per trial coloured by objective) over the whole study.
    let state = support::studies_state(TRIALS, PC_PARAMS, PlotTab::ParallelCoordinates);
    let mut harness = Harness::builder()
        .with_size([1920.0, 1080.0])
        .build_ui_state(|ui, state: &mut support::Studies| state.ui(ui), state);
    harness.run_steps(3);
    group.bench_function(
        format!(
            "parallel coordinates: {TRIALS} trials x {PC_PARAMS} parameters + table, 1920x1080"
        ),
        |b| b.iter(|| support::frame(&mut harness)),
    );
    // The frame after the rows change (a live study's poll merged trials, or a brush moved):
    // the rows are sorted and filtered again and the plot's lines rebuilt. Each iteration
    // moves a brush on the first axis, so every frame is such a frame.
    let mut flip = false;
    group.bench_function(
        format!(
            "parallel coordinates, rows changed every frame: {TRIALS} trials x {PC_PARAMS} \
             parameters + table, 1920x1080"
        ),
        |b| {
            b.iter(|| {
                flip = !flip;
                let range = if flip { (-4.5, -3.0) } else { (-4.0, -2.5) };
                harness
                    .state_mut()
                    .view
                    .set_brush("ppo.learning_rate", Some(range));
                support::frame(&mut harness)
            })
        },
    );
    // The frame after a live study's poll found one more finished trial: the rows are merged,
    // their columns, order, filters and importances brought up to date, and the plot redrawn.
    let mut next = TRIALS;
    group.bench_function(
        format!(
            "parallel coordinates, a trial merged every frame: {TRIALS}+ trials x {PC_PARAMS} \
             parameters + table, 1920x1080"
        ),
        |b| {
            b.iter(|| {
                harness
                    .state_mut()
                    .view
                    .merge(vec![support::row(next, PC_PARAMS)]);
                next += 1;
                support::frame(&mut harness)
            })
        },
    );
    // The frame a full read of the study lands in (the study opened, or selected again): the
    // 10,000 rows arrive made ready by the reading job (columns and axis positions derived, sorted by
    // value: on a thread of their own outside the timed part, as the app's reading job does it,
    // so they come from another malloc arena as they do there), the rows held before are let
    // go of, and the table and the plot's lines are built from nothing.
    let rows: Vec<_> = (0..TRIALS).map(|i| support::row(i, PC_PARAMS)).collect();
    group.bench_function(
        format!(
            "parallel coordinates, the frame a {TRIALS}-trial read lands: {PC_PARAMS} parameters \
             + table, 1920x1080"
        ),
        |b| {
            b.iter_batched(
                || {
                    std::thread::scope(|s| {
                        s.spawn(|| ReadRows::new(rows.clone(), &(TrialColumn::Value, false)))
                            .join()
                            .expect("the reading thread")
                    })
                },
                |rows| {
                    let view = &mut harness.state_mut().view;
                    let generation = view.generation;
                    view.trials_read(generation, vec!["bench".into()], Ok(rows));
                    support::frame(&mut harness)
                },
                BatchSize::LargeInput,
            )
        },
    );
    group.finish();
}

criterion_group!(benches, frame);
criterion_main!(benches);
