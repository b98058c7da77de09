//! What replaying saved on the device at hand: each `bench gpu` run that replays a step against
//! the run of the same configuration one replay fewer, both measured in the same `bench gpu`
//! run (the policy step against the direct run; the minibatches against the run that replays
//! only the policy step, or against the direct run where the policy step is not replayed). The
//! replays are opt-in for trials (`TRADETUNE_REPLAY_POLICY=1`,
//! `TRADETUNE_REPLAY_UPDATE=1`) until a card's figures say they pay; this says it for the card.

use serde::Serialize;
use tradetune_engine::ppo::bench::TrainBenchConfig;

/// One replayed run against its counterpart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct ReplayGain {
    pub config: &'static str,
    pub precision: String,
    pub placement: &'static str,
    /// `policy_step` or `minibatches`: what the run replays that its counterpart does not.
    pub replayed: &'static str,
    /// Whether the counterpart replays its policy step (the minibatches' counterpart, where
    /// the run replays both).
    pub counterpart_replays_policy: bool,
    /// Steady samples/s of the replayed run, and of its counterpart.
    pub samples_per_second: f64,
    pub counterpart_samples_per_second: f64,
}

impl ReplayGain {
    /// Replayed over counterpart (above 1: the replay pays on this device).
    pub fn ratio(&self) -> f64 {
        self.samples_per_second / self.counterpart_samples_per_second
    }

    /// The line printed under the table.
    pub fn line(&self) -> String {
        let what = match (self.replayed, self.counterpart_replays_policy) {
            ("policy_step", _) => "policy step replayed, against launched directly",
            (_, true) => "minibatches replayed too, against the policy step replayed alone",
            (_, false) => "minibatches replayed, against launched directly",
        };
        format!(
            "  {} {} {}: {what}: {:.0} against {:.0} samples/s (×{:.2})",
            self.config,
            self.precision,
            self.placement,
            self.samples_per_second,
            self.counterpart_samples_per_second,
            self.ratio()
        )
    }
}

/// Printed above the gains' lines.
pub(super) const GAINS_NOTE: &str = "replays on this device: steady samples/s of each replayed \
     run against the same configuration one replay fewer, both measured in this run (above ×1 the \
     replay pays here: TRADETUNE_REPLAY_POLICY=1 and TRADETUNE_REPLAY_UPDATE=1 turn them on for \
     trials; a few updates of a short run move by tens of percent between runs on a busy host)";

/// Each replayed run of `runs` (configuration, steady samples/s) against its counterpart among
/// them, where it was run.
pub(super) fn replay_gains(runs: &[(TrainBenchConfig, f64)]) -> Vec<ReplayGain> {
    let same = |a: &TrainBenchConfig, b: &TrainBenchConfig| {
        a.name == b.name && a.precision == b.precision && a.placement == b.placement
    };
    let mut gains = Vec::new();
    for (c, rate) in runs {
        let (want_policy, replayed) = match (c.replay_policy, c.replay_update) {
            (true, false) => (false, "policy_step"),
            (_, true) => (c.replay_policy, "minibatches"),
            (false, false) => continue,
        };
        let counterpart = runs
            .iter()
            .find(|(o, _)| same(c, o) && o.replay_policy == want_policy && !o.replay_update);
        if let Some((_, other)) = counterpart {
            gains.push(ReplayGain {
                config: c.name,
                precision: c.precision.to_string(),
                placement: c.placement.name(),
                replayed,
                counterpart_replays_policy: want_policy,
                samples_per_second: *rate,
                counterpart_samples_per_second: *other,
            });
        }
    }
    gains
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_engine::device::precision::Precision;

    fn run(policy: bool, update: bool, precision: Precision, rate: f64) -> (TrainBenchConfig, f64) {
        let mut c = TrainBenchConfig::small();
        c.precision = precision;
        c.replay_policy = policy;
        c.replay_update = update;
        (c, rate)
    }

    /// Each replayed run meets the run one replay fewer of its own precision, not another's;
    /// a replayed run without its counterpart is left out.
    #[test]
    fn each_replayed_run_meets_the_run_one_replay_fewer() {
        let runs = vec![
            run(false, false, Precision::F32, 1000.0),
            run(true, false, Precision::F32, 1500.0),
            run(true, true, Precision::F32, 1800.0),
            run(true, false, Precision::F16, 700.0),
            run(false, false, Precision::F16, 900.0),
            run(false, true, Precision::Bf16, 5.0),
            run(false, true, Precision::F16, 950.0),
        ];
        let gains = replay_gains(&runs);
        let got: Vec<(String, &str, f64, f64)> = gains
            .iter()
            .map(|g| {
                (
                    g.precision.clone(),
                    g.replayed,
                    g.samples_per_second,
                    g.counterpart_samples_per_second,
                )
            })
            .collect();
        let f32s = Precision::F32.to_string();
        let f16s = Precision::F16.to_string();
        assert_eq!(
            got,
            vec![
                (f32s.clone(), "policy_step", 1500.0, 1000.0),
                (f32s, "minibatches", 1800.0, 1500.0),
                (f16s.clone(), "policy_step", 700.0, 900.0),
                (f16s, "minibatches", 950.0, 900.0),
            ]
        );
        assert!((gains[0].ratio() - 1.5).abs() < 1e-12);
        assert!(gains[2].line().contains("(×0.78)"), "{}", gains[2].line());
        assert!(
            gains[1]
                .line()
                .contains("against the policy step replayed alone")
        );
        assert!(
            gains[3]
                .line()
                .contains("minibatches replayed, against launched directly"),
            "{}",
            gains[3].line()
        );
    }
}
