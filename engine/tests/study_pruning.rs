//! Pruners inside a study: trials report learning curves step by step (as the trainer's
//! periodic evaluations will), and hopeless ones are stopped early.

use tradetune_engine::study::bench::SamplerKind;
use tradetune_engine::study::pruner::{HyperbandPruner, PercentilePruner, SuccessiveHalvingPruner};
use tradetune_engine::study::{
    Direction, PruneContext, Pruner, SampleContext, SearchSpace, Trial, TrialState,
};

/// A learning curve: the loss after `step` evaluations of a trial whose final loss is `quality`.
fn curve(quality: f64, step: u64) -> f64 {
    quality + 2.0 / (1.0 + step as f64)
}

/// Runs `n` trials of 20 steps each, asking `pruner` after every report; returns the history.
fn study(pruner: &dyn Pruner, n: u64) -> Vec<Trial> {
    let mut space = SearchSpace::new();
    space.add_float("q", 0.0, 10.0, false, None).unwrap();
    let sampler = SamplerKind::Random.build(11).unwrap();
    let mut history: Vec<Trial> = Vec::new();
    for number in 0..n {
        let ctx = SampleContext::new(&space, &history, Direction::Minimize, number);
        let p = sampler.sample(&ctx).unwrap();
        let quality = p.params["q"];
        let mut t = Trial::new(number, TrialState::Running, p.params);
        for step in 0..20 {
            t.intermediate_values.insert(step, curve(quality, step));
            let d = pruner.prune(&PruneContext {
                study_name: "curves",
                direction: Direction::Minimize,
                trials: &history,
                trial: &t,
            });
            t.system_attrs.extend(d.system_attrs);
            if d.prune {
                t.state = TrialState::Pruned;
                break;
            }
        }
        if t.state == TrialState::Running {
            t.state = TrialState::Complete;
            t.value = t.intermediate_values.values().next_back().copied();
        }
        history.push(t);
    }
    history
}

fn count(h: &[Trial], s: TrialState) -> usize {
    h.iter().filter(|t| t.state == s).count()
}

#[test]
fn median_pruner_stops_bad_trials_and_keeps_good_ones() {
    let pruner = PercentilePruner::median(5, 2, 1).unwrap();
    let h = study(&pruner, 40);
    let pruned = count(&h, TrialState::Pruned);
    assert!(pruned >= 10, "only {pruned} of 40 pruned");
    // No pruning during the 5 start-up trials or before step 2.
    assert!(h[..5].iter().all(|t| t.state == TrialState::Complete));
    assert!(
        h.iter()
            .filter(|t| t.state == TrialState::Pruned)
            .all(|t| t.last_step() >= Some(2))
    );
    // The best trial overall was never pruned: its quality is the lowest of all.
    let best = h
        .iter()
        .min_by(|a, b| a.params["q"].total_cmp(&b.params["q"]))
        .unwrap();
    assert_eq!(best.state, TrialState::Complete);
    // Every pruned trial was worse than the median of the complete ones at its last step.
    for t in h.iter().filter(|t| t.state == TrialState::Pruned) {
        let step = t.last_step().unwrap();
        let mut at: Vec<f64> = h[..t.number as usize]
            .iter()
            .filter(|c| c.state == TrialState::Complete)
            .map(|c| c.intermediate_values[&step])
            .collect();
        at.sort_by(f64::total_cmp);
        assert!(
            t.intermediate_values[&step]
                > at[at.len() / 2 - usize::from(at.len().is_multiple_of(2))]
        );
    }
}

#[test]
fn successive_halving_and_hyperband_prune_too() {
    let sh = SuccessiveHalvingPruner::new(Some(1), 3, 0, 0).unwrap();
    let h = study(&sh, 40);
    assert!(
        count(&h, TrialState::Pruned) >= 20,
        "SH pruned {}",
        count(&h, TrialState::Pruned)
    );
    // Trials that survived every rung (steps 1, 3, 9) recorded all three.
    assert!(h.iter().any(
        |t| t.state == TrialState::Complete && t.system_attrs.contains_key("completed_rung_2")
    ));

    let hb = HyperbandPruner::new(1, Some(20), 3, 0).unwrap();
    let h = study(&hb, 60);
    assert!(
        count(&h, TrialState::Pruned) >= 20,
        "Hyperband pruned {}",
        count(&h, TrialState::Pruned)
    );
    // ⌊log_3 20⌋ + 1 = 3 brackets, and trials of the study landed in more than one.
    assert_eq!(hb.n_brackets(), Some(3));
    let brackets: std::collections::BTreeSet<usize> =
        (0..60).filter_map(|n| hb.bracket_of("curves", n)).collect();
    assert!(brackets.len() > 1);
}
