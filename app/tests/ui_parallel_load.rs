//! Parallel coordinates at the load: 10,000 trials × 8 parameters, with the trial
//! table, in a 1920×1080 window. The plot draws an axis per parameter and a brush on one of
//! them filters the table; the time per frame (UI pass and tessellation) is printed (the frame benchmark,
//! `benches/frame.rs`, measures the same load in a release build), not asserted.

use std::time::{Duration, Instant};

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::panels::studies::{PcAxes, PlotTab, pc_axes_id};

#[path = "../benches/support/mod.rs"]
mod support;

const TRIALS: usize = 10_000;
const PARAMS: usize = 8;

#[test]
fn parallel_coordinates_over_10000_trials_by_8_parameters() {
    // The allocator as the desktop program sets it.
    tradetune_app::ui::allocator::tune();
    let state = support::studies_state(TRIALS, PARAMS, PlotTab::ParallelCoordinates);
    let mut h = Harness::builder()
        .with_size([1920.0, 1080.0])
        .build_ui_state(
            // The panel carries out its own actions (a brush) as in the app.
            |ui, state: &mut support::Studies| state.ui(ui),
            state,
        );
    h.run_steps(3);
    let axes: PcAxes = h
        .ctx
        .data(|d| d.get_temp(pc_axes_id()))
        .expect("the plot stored its axes");
    assert_eq!(axes.0.len(), PARAMS, "an axis per parameter: {:?}", axes.0);

    let frames = 5;
    let start = Instant::now();
    let mut vertices = 0;
    for _ in 0..frames {
        vertices = support::frame(&mut h);
    }
    let ms = start.elapsed().as_secs_f64() * 1000.0 / f64::from(frames);
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "parallel coordinates: {TRIALS} trials x {PARAMS} parameters + table, 1920x1080, \
         {build} build: {ms:.1} ms per frame, tessellated ({vertices} vertices; mean of {frames})"
    );

    // A brush on the integer env count keeps the trials with 8 or 16 envs: half of them.
    h.state_mut()
        .view
        .set_brush("env.n_envs", Some((7.0, 17.0)));
    h.run_steps(2);
    assert_eq!(h.state().view.table.visible.len(), TRIALS / 2);
    // The plot's lines are kept across frames and rebuilt when the brush changes them.
    h.get_by_label_contains(&format!(
        "parallel coordinates: {} of {TRIALS} complete trials",
        TRIALS / 2
    ));

    // A live poll merges two more trials (8 and 16 envs: the brush keeps both); the table and
    // the plot take them in.
    h.state_mut().view.merge(vec![
        support::row(TRIALS, PARAMS),
        support::row(TRIALS + 1, PARAMS),
    ]);
    h.run_steps(1);
    assert_eq!(h.state().view.table.visible.len(), TRIALS / 2 + 2);
    h.get_by_label_contains(&format!(
        "parallel coordinates: {} of {} complete trials",
        TRIALS / 2 + 2,
        TRIALS + 2
    ));
    // At 10,000 trials the importances are computed on a background thread (the merge above
    // started it): frames go on meanwhile, and the result reaches the view.
    assert!(
        h.state().view.importance.job.is_some(),
        "PED-ANOVA over {TRIALS} trials runs in the background"
    );
    let waited = Instant::now();
    while h.state().view.importance.shown.is_none() && waited.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
    let importance = h
        .state()
        .view
        .importance
        .shown
        .as_ref()
        .expect("the background importances arrived");
    assert_eq!(importance.n_complete, TRIALS + 2);
    assert_eq!(
        importance.result.as_ref().map(|i| i.params.len()),
        Ok(PARAMS),
        "an importance per parameter"
    );
    assert!(h.state().view.importance.job.is_none());

    // A trial with a ninth parameter adds its axis; a brush on it keeps that trial alone.
    h.state_mut()
        .view
        .merge(vec![support::row(TRIALS + 4, PARAMS + 1)]);
    h.run_steps(1);
    let axes: PcAxes = h
        .ctx
        .data(|d| d.get_temp(pc_axes_id()))
        .expect("the plot stored its axes");
    assert_eq!(axes.0.len(), PARAMS + 1, "the new parameter's axis");
    h.state_mut().view.set_brush("p8.float", Some((-1.0, 2.0)));
    h.run_steps(1);
    let v = &h.state().view.table;
    assert_eq!(v.visible.len(), 1);
    assert_eq!(v.rows[v.visible[0]].number, (TRIALS + 4) as i64);
}

/// The columns a read derives off the UI thread (`ReadRows`): every parameter of every row, in
/// name order, whatever order or subset each row lists; each row's positions on those axes;
/// the union of the user attributes; the rows sorted as asked.
#[test]
fn a_read_derives_every_column_and_position_whatever_the_rows_list() {
    use tradetune_app::ui::tasks::{ReadRows, TrialColumn};
    let mut rows: Vec<_> = (0..6).map(|i| support::row(i, 3)).collect();
    // Row 1 lists its parameters in reverse order, row 3 lacks the third one, row 4 brings a
    // fourth; rows 2 and 5 carry user attributes in different orders.
    rows[1].param_cells.reverse();
    let mut reversed = rows[1].stored_params.to_vec();
    reversed.reverse();
    rows[1].stored_params = reversed.into();
    rows[3] = support::row(3, 2);
    rows[4] = support::row(4, 4);
    rows[2].attrs = vec![("zeta".into(), "1".into(), Some(1.0))];
    rows[5].attrs = vec![
        ("zeta".into(), "2".into(), Some(2.0)),
        ("alpha".into(), "x".into(), None),
    ];
    let expected: Vec<Vec<(String, f64)>> = rows
        .iter()
        .map(|r| {
            r.param_cells
                .iter()
                .map(|c| (c.name.clone(), c.key))
                .collect()
        })
        .collect();
    let read = ReadRows::new(rows, &(TrialColumn::Value, true));
    let names: Vec<&str> = read
        .columns
        .param_axes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    let mut want: Vec<&str> = expected[4].iter().map(|(n, _)| n.as_str()).collect();
    want.sort_unstable();
    assert_eq!(names, want, "every parameter, by name");
    assert_eq!(read.columns.attr_keys, ["alpha", "zeta"]);
    let values: Vec<f64> = read.rows.iter().filter_map(|r| r.value).collect();
    assert!(
        values.windows(2).all(|w| w[0] <= w[1]),
        "sorted by value: {values:?}"
    );
    for r in &read.rows {
        let cells = &expected[r.number as usize];
        for (i, a) in read.columns.param_axes.iter().enumerate() {
            let want = cells
                .iter()
                .find(|(n, _)| *n == a.name)
                .map(|(_, k)| a.to_plot(*k));
            // The filled keys themselves (`axis_x` would fall back to a search by name).
            assert_eq!(
                r.axis_positions.0.get(i).copied(),
                Some(want),
                "trial {} on {}",
                r.number,
                a.name
            );
        }
    }
}
