use super::*;

/// [`CompileWatch::begin`] as a unit test needs it: with no wait for compilation lines,
/// which another test opening a GPU in this process would otherwise make real.
fn begin(w: &mut CompileWatch) {
    w.begin_after(|| 0.0);
}

fn progress(update: usize, phases: PhaseTimes) -> TrainEvent {
    TrainEvent::Progress {
        update,
        timesteps: update * 10,
        total_timesteps: 100,
        samples_per_second: 1.0,
        phases,
    }
}

fn phases_of(events: &[TrainEvent]) -> Vec<PhaseTimes> {
    events
        .iter()
        .filter_map(|e| match e {
            TrainEvent::Progress { phases, .. } => Some(*phases),
            _ => None,
        })
        .collect()
}

/// An update that compiled is held until one that compiled nothing gives its overhead.
#[test]
fn the_first_update_is_held_until_a_steady_one_gives_its_overhead() {
    let mut w = CompileWatch::default();
    let mut out = Vec::new();
    let cold = PhaseTimes {
        env_step: 2.0,
        inference: 3.0,
        update: 5.0,
        evaluation: 0.5,
        ..PhaseTimes::default()
    };
    begin(&mut w);
    let compiled = Some(KernelCounts {
        compiled: 181,
        autotune_runs: 51,
        dispatches: 900,
        layout_copies: 0,
        replayed: 0,
    });
    w.end(vec![progress(1, cold)], 10.0, &cold, compiled, &mut |e| {
        out.push(e)
    });
    assert!(out.is_empty(), "held until the overhead is known");
    let steady = PhaseTimes {
        env_step: 1.0,
        inference: 0.5,
        update: 0.5,
        ..PhaseTimes::default()
    };
    begin(&mut w);
    w.end(vec![progress(2, steady)], 2.0, &steady, None, &mut |e| {
        out.push(e)
    });
    let p = phases_of(&out);
    assert_eq!(p.len(), 2, "both delivered, in order");
    assert!((p[0].compile - 8.0).abs() < 1e-9, "10 s against 2 s: {p:?}");
    // The rest of the first update is split as the steady one was, its evaluation kept.
    assert!((p[0].env_step - 1.0).abs() < 1e-9);
    assert!((p[0].update - 0.5).abs() < 1e-9);
    assert!((p[0].evaluation - 0.5).abs() < 1e-9);
    assert_eq!(p[1], steady);
    assert_eq!((w.compiled.compiled, w.compiled.autotune_runs), (181, 51));
}

/// The wait for a held update's late compilation lines, taken before the next update's
/// clock starts, is the held update's compile time: the steady update is not slowed by it,
/// and the phases still hold all the time spent, whether a steady update came or not.
#[test]
fn the_wait_for_late_compilation_lines_is_the_held_updates_compile_time() {
    let cold = PhaseTimes {
        update: 10.0,
        ..PhaseTimes::default()
    };
    let steady = PhaseTimes {
        update: 2.0,
        ..PhaseTimes::default()
    };
    let some = Some(KernelCounts {
        compiled: 3,
        ..KernelCounts::default()
    });
    for steady_comes in [true, false] {
        let mut w = CompileWatch::default();
        let mut out = Vec::new();
        begin(&mut w);
        w.end(vec![progress(1, cold)], 10.0, &cold, some, &mut |e| {
            out.push(e)
        });
        // 30 ms waiting for the first update's late compilation lines.
        w.begin_after(|| 0.03);
        if steady_comes {
            w.end(vec![progress(2, steady)], 2.0, &steady, None, &mut |e| {
                out.push(e)
            });
        } else {
            w.flush(&mut |e| out.push(e));
        }
        // Without a steady update, the run says its compiling was not measured apart.
        w.flush(&mut |e| out.push(e));
        assert_eq!(w.not_apart, !steady_comes);
        let p = phases_of(&out);
        let first = p[0];
        if steady_comes {
            assert!((first.compile - 8.03).abs() < 1e-9, "{p:?}");
            assert!((first.update - 2.0).abs() < 1e-9, "{p:?}");
            assert_eq!(p[1], steady);
        } else {
            assert!((first.compile - 0.03).abs() < 1e-9, "{p:?}");
            assert!((first.update - 10.0).abs() < 1e-9, "{p:?}");
        }
    }
}

/// A periodic evaluation's compile time (its slow start, put in the update's
/// `compile` by the trainer) stays the update's when the update is held, and is not taken
/// for a steady update's overhead.
#[test]
fn an_evaluations_compile_time_is_kept_beside_the_updates() {
    let mut w = CompileWatch::default();
    let mut out = Vec::new();
    // The first update compiled, and so did its evaluation (a slow start of 0.25 s).
    let cold = PhaseTimes {
        update: 9.0,
        evaluation: 0.5,
        compile: 0.25,
        ..PhaseTimes::default()
    };
    begin(&mut w);
    let some = Some(KernelCounts {
        compiled: 10,
        ..KernelCounts::default()
    });
    w.end(vec![progress(1, cold)], 9.0, &cold, some, &mut |e| {
        out.push(e)
    });
    assert!(out.is_empty());
    // The second compiled nothing, but its evaluation did (a first evaluation after two
    // updates): it is delivered at once, its own compile time kept.
    let steady = PhaseTimes {
        update: 1.0,
        evaluation: 0.5,
        compile: 0.125,
        ..PhaseTimes::default()
    };
    begin(&mut w);
    w.end(vec![progress(2, steady)], 1.0, &steady, None, &mut |e| {
        out.push(e)
    });
    let p = phases_of(&out);
    assert_eq!(p.len(), 2);
    assert!((p[0].compile - 8.25).abs() < 1e-9, "{p:?}");
    assert!((p[0].update - 1.0).abs() < 1e-9, "{p:?}");
    assert!((p[0].evaluation - 0.5).abs() < 1e-9, "{p:?}");
    assert_eq!(p[1], steady);
    // A later update that compiled is split as the steady one was, without its
    // evaluation's compile time.
    begin(&mut w);
    let late = PhaseTimes {
        update: 3.0,
        ..PhaseTimes::default()
    };
    w.end(vec![progress(3, late)], 3.0, &late, some, &mut |e| {
        out.push(e)
    });
    let p = phases_of(&out);
    assert_eq!(p.len(), 3);
    assert!((p[2].compile - 2.0).abs() < 1e-9, "{p:?}");
    assert!((p[2].update - 1.0).abs() < 1e-9, "{p:?}");
    assert_eq!(w.compiled.compiled, 20);
}

/// Without compile counters (another logger came first), the run's first evaluation on a
/// device that compiles is the one that compiled; on the CPU none did.
#[test]
fn the_first_evaluation_compiled_where_nothing_counts() {
    let mut w = CompileWatch::default();
    let none = KernelCounts::default();
    assert!(w.evaluated_counting(none, true, false));
    assert!(!w.evaluated_counting(none, true, false));
    let mut cpu = CompileWatch::default();
    assert!(!cpu.evaluated_counting(none, false, false));
    // Where the counters count, by what they counted.
    let mut gpu = CompileWatch::default();
    assert!(!gpu.evaluated_counting(none, true, true));
    let compiled = KernelCounts {
        compiled: 3,
        ..none
    };
    assert!(gpu.evaluated_counting(compiled, true, true));
    assert_eq!(gpu.compiled.compiled, 3);
}

#[test]
fn a_device_that_compiles_nothing_is_never_held() {
    let mut w = CompileWatch::default();
    let mut out = Vec::new();
    let p = PhaseTimes {
        update: 1.0,
        ..PhaseTimes::default()
    };
    begin(&mut w);
    let compiled = w.compiled_now(false);
    assert_eq!(compiled, None, "the CPU compiles nothing");
    w.end(vec![progress(1, p)], 1.0, &p, compiled, &mut |e| {
        out.push(e)
    });
    assert_eq!(phases_of(&out), vec![p]);
}

#[test]
fn a_run_that_ends_before_a_steady_update_delivers_as_measured() {
    let mut w = CompileWatch::default();
    let mut out = Vec::new();
    let p = PhaseTimes {
        update: 7.0,
        ..PhaseTimes::default()
    };
    begin(&mut w);
    let some = Some(KernelCounts::default());
    w.end(vec![progress(1, p)], 7.0, &p, some, &mut |e| out.push(e));
    assert!(out.is_empty());
    w.flush(&mut |e| out.push(e));
    assert_eq!(phases_of(&out), vec![p]);
}

#[test]
fn a_tally_charges_launches_to_parts_per_step_and_minibatch() {
    let mut t = Tally {
        last: KernelCounts::default(),
        counts: [40, 80, 8, 30, 120],
        copies: [8, 0, 0, 0, 36],
        ..Tally::default()
    };
    let p = t.profile(8, 12);
    assert_eq!(
        (p.copies_per_policy_step, p.copies_per_minibatch),
        (1.0, 3.0)
    );
    assert_eq!(p.per_policy_step, 5.0);
    assert_eq!(p.per_env_step, 10.0);
    assert_eq!(p.per_buffer_step, 1.0);
    assert_eq!(p.advantages, 30);
    assert_eq!((p.update, p.minibatches, p.per_minibatch), (120, 12, 10.0));
    assert!(p.kernel_time.is_none(), "no kernel timer ran");
}
