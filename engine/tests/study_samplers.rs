//! Samplers over whole sequential studies: reproducibility per seed, TPE's quality against
//! random search, the constant liar, and the proposals' validity in every kind of range.

use tradetune_engine::study::bench::{BenchFunction, SamplerKind, median, run_study};
use tradetune_engine::study::sampler::{TpeConfig, TpeSampler};
use tradetune_engine::study::{Direction, SampleContext, Sampler, Trial, TrialState};

#[test]
fn same_seed_same_study_for_every_sampler() {
    for kind in [
        SamplerKind::Tpe,
        SamplerKind::TpeUnivariate,
        SamplerKind::Random,
    ] {
        for function in [BenchFunction::Mixed, BenchFunction::Branin] {
            let a = run_study(kind.build(42).unwrap().as_ref(), function, 40).unwrap();
            let b = run_study(kind.build(42).unwrap().as_ref(), function, 40).unwrap();
            let c = run_study(kind.build(43).unwrap().as_ref(), function, 40).unwrap();
            assert_eq!(a.history, b.history, "{kind:?} on {function:?}");
            assert_ne!(
                a.history, c.history,
                "{kind:?} on {function:?}: seeds 42 and 43 agree"
            );
            // Every proposal lies in its distribution (grid of the int step, log range, index).
            let space = function.space();
            for t in &a.history {
                for (name, dist) in space.iter() {
                    assert!(
                        dist.contains(t.params[name]),
                        "{kind:?}: {name} = {}",
                        t.params[name]
                    );
                }
            }
        }
    }
}

fn median_best(kind: SamplerKind, function: BenchFunction) -> f64 {
    let best: Vec<f64> = (0..10u64)
        .map(|s| {
            run_study(kind.build(s).unwrap().as_ref(), function, 100)
                .unwrap()
                .best()
        })
        .collect();
    median(&best)
}

#[test]
fn tpe_beats_random_on_branin_in_median() {
    let (tpe, random) = (
        median_best(SamplerKind::Tpe, BenchFunction::Branin),
        median_best(SamplerKind::Random, BenchFunction::Branin),
    );
    assert!(tpe < random, "TPE median {tpe} vs random {random}");
}

/// Issue 4's quality bar: the median over seeds 0–9 of the best value after 100 trials must be
/// no worse than Optuna 5.0's default TPE (0.416, −3.207, 130; 0.0735 measured for the mixed
/// space) on every benchmark function.
#[test]
fn tpe_meets_optunas_figures_on_every_function() {
    for function in BenchFunction::ALL {
        let tpe = median_best(SamplerKind::Tpe, function);
        let bar = function.optuna_reference();
        assert!(
            tpe <= bar,
            "{function:?}: TPE median {tpe} vs Optuna's {bar}"
        );
    }
}

#[test]
fn tpe_finds_the_mixed_optimum_region() {
    // Categorical and stepped-int handling: over seeds 0–9, the late trials must pick the right
    // activation (index 2 of 4, chance 1/4) more than half of the time on average, and every
    // study must get near the optimum. (Optuna's magic clip fails the first: its l(x) collapses
    // onto one activation, often a wrong one, in most seeds.)
    let mut right = 0;
    let mut total = 0;
    for seed in 0..10 {
        let run = run_study(
            SamplerKind::Tpe.build(seed).unwrap().as_ref(),
            BenchFunction::Mixed,
            100,
        )
        .unwrap();
        let late = &run.history[60..];
        right += late.iter().filter(|t| t.params["act"] == 2.0).count();
        total += late.len();
        assert!(run.best() < 0.3, "seed {seed}: best {}", run.best());
    }
    assert!(
        2 * right > total,
        "{right} of {total} late trials chose 'elu'"
    );
}

#[test]
fn constant_liar_steers_away_from_running_trials() {
    // The same proposal held by a RUNNING trial (as a parallel worker would) should not be
    // proposed again: the liar counts it among the bad trials. The liar lowers l/g there but
    // cannot forbid it, so this is checked over ten studies; without the liar the RUNNING trial
    // is invisible and the proposal never changes.
    let function = BenchFunction::Branin;
    let space = function.space();
    let mut changed = 0;
    for seed in 0..10 {
        let base = run_study(SamplerKind::Tpe.build(seed).unwrap().as_ref(), function, 30)
            .unwrap()
            .history;
        let ask = |liar: bool, history: &[Trial]| {
            TpeSampler::new(TpeConfig {
                seed,
                constant_liar: liar,
                ..TpeConfig::default()
            })
            .unwrap()
            .sample(&SampleContext::new(
                &space,
                history,
                Direction::Minimize,
                31,
            ))
            .unwrap()
            .params
        };
        let alone = ask(true, &base);
        let mut with_running = base.clone();
        with_running.push(Trial::new(30, TrialState::Running, alone.clone()));
        if ask(true, &with_running) != alone {
            changed += 1;
        }
        assert_eq!(ask(false, &with_running), alone, "seed {seed}");
    }
    assert!(
        changed >= 7,
        "the liar changed only {changed} of 10 proposals"
    );
}

#[test]
fn maximization_mirrors_minimization() {
    // Maximizing −f must make the same proposals as minimizing f.
    let function = BenchFunction::Hartmann6;
    let space = function.space();
    let history = run_study(SamplerKind::Tpe.build(8).unwrap().as_ref(), function, 25)
        .unwrap()
        .history;
    let negated: Vec<Trial> = history
        .iter()
        .map(|t| Trial {
            value: t.value.map(|v| -v),
            ..t.clone()
        })
        .collect();
    let sampler = SamplerKind::Tpe.build(8).unwrap();
    let min = sampler.sample(&SampleContext::new(
        &space,
        &history,
        Direction::Minimize,
        25,
    ));
    let max = sampler.sample(&SampleContext::new(
        &space,
        &negated,
        Direction::Maximize,
        25,
    ));
    assert_eq!(min.unwrap(), max.unwrap());
}
