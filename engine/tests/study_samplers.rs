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

#[test]
fn tpe_beats_random_on_branin_in_median() {
    let seeds = 0..10u64;
    let best = |kind: SamplerKind| -> Vec<f64> {
        seeds
            .clone()
            .map(|s| {
                run_study(kind.build(s).unwrap().as_ref(), BenchFunction::Branin, 100)
                    .unwrap()
                    .best()
            })
            .collect()
    };
    let (tpe, random) = (
        median(&best(SamplerKind::Tpe)),
        median(&best(SamplerKind::Random)),
    );
    assert!(tpe < random, "TPE median {tpe} vs random {random}");
    // Optuna 5.0's TPE reaches a median of 0.416 on this benchmark (issue 4); the optimum is
    // 0.397887. Ours must be at least as good.
    assert!(tpe <= 0.416, "TPE median {tpe}");
}

#[test]
fn tpe_finds_the_mixed_optimum_region() {
    // Categorical and stepped-int handling: the best trials must pick the right activation
    // (index 2) and an n near 24 far more often than chance.
    let run = run_study(
        SamplerKind::Tpe.build(5).unwrap().as_ref(),
        BenchFunction::Mixed,
        100,
    )
    .unwrap();
    let late = &run.history[60..];
    let right_act = late.iter().filter(|t| t.params["act"] == 2.0).count();
    assert!(
        right_act > late.len() / 2,
        "{right_act} of {} late trials chose 'elu'",
        late.len()
    );
    assert!(run.best() < 0.3, "best {}", run.best());
}

#[test]
fn constant_liar_steers_away_from_running_trials() {
    let function = BenchFunction::Branin;
    let space = function.space();
    let base = run_study(SamplerKind::Tpe.build(3).unwrap().as_ref(), function, 30)
        .unwrap()
        .history;
    let sampler = TpeSampler::new(TpeConfig {
        seed: 3,
        ..TpeConfig::default()
    })
    .unwrap();
    let ask = |history: &[Trial], number| {
        sampler
            .sample(&SampleContext {
                space: &space,
                history,
                direction: Direction::Minimize,
                trial_number: number,
            })
            .unwrap()
            .params
    };
    let alone = ask(&base, 31);
    // The same proposal held by a RUNNING trial (as a parallel worker would) must not be proposed
    // again: the liar counts it among the bad trials.
    let mut with_running = base.clone();
    with_running.push(Trial::new(30, TrialState::Running, alone.clone()));
    let next = ask(&with_running, 31);
    assert_ne!(next, alone);
    // Without the liar the RUNNING trial is invisible and the proposal is unchanged.
    let no_liar = TpeSampler::new(TpeConfig {
        seed: 3,
        constant_liar: false,
        ..TpeConfig::default()
    })
    .unwrap();
    let ctx = SampleContext {
        space: &space,
        history: &with_running,
        direction: Direction::Minimize,
        trial_number: 31,
    };
    assert_eq!(no_liar.sample(&ctx).unwrap().params, alone);
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
    let min = sampler.sample(&SampleContext {
        space: &space,
        history: &history,
        direction: Direction::Minimize,
        trial_number: 25,
    });
    let max = sampler.sample(&SampleContext {
        space: &space,
        history: &negated,
        direction: Direction::Maximize,
        trial_number: 25,
    });
    assert_eq!(min.unwrap(), max.unwrap());
}
