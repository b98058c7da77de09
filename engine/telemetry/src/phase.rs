//! Where a trial's wall time goes: environment stepping, policy inference, the PPO update and
//! evaluation. NVML's "utilisation" only says *a* kernel ran; this split is what tells a user
//! whether more GPU would help (the seeds' "rollout 70 % of the time at 0 % GPU").

use std::time::{Duration, Instant};

/// A part of the training loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Phase {
    /// `env.step` (CPU or on-device environment).
    Env,
    /// The policy's forward pass during rollouts (no gradient).
    Inference,
    /// Advantages and the PPO epochs (forward, backward, optimizer).
    Update,
    /// Evaluation on the validation split.
    Eval,
    /// Compiling and autotuning kernels for new shapes (a GPU's first update, mostly).
    Compile,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Env,
        Phase::Inference,
        Phase::Update,
        Phase::Eval,
        Phase::Compile,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Phase::Env => "env",
            Phase::Inference => "inference",
            Phase::Update => "update",
            Phase::Eval => "eval",
            Phase::Compile => "compile",
        }
    }
}

/// Wall time per phase.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct PhaseSplit {
    pub env_s: f64,
    pub inference_s: f64,
    pub update_s: f64,
    pub eval_s: f64,
    /// Compiling and autotuning (zero on the CPU; absent from splits stored before it).
    #[serde(default)]
    pub compile_s: f64,
}

impl PhaseSplit {
    pub fn get(&self, phase: Phase) -> f64 {
        match phase {
            Phase::Env => self.env_s,
            Phase::Inference => self.inference_s,
            Phase::Update => self.update_s,
            Phase::Eval => self.eval_s,
            Phase::Compile => self.compile_s,
        }
    }

    fn get_mut(&mut self, phase: Phase) -> &mut f64 {
        match phase {
            Phase::Env => &mut self.env_s,
            Phase::Inference => &mut self.inference_s,
            Phase::Update => &mut self.update_s,
            Phase::Eval => &mut self.eval_s,
            Phase::Compile => &mut self.compile_s,
        }
    }

    /// Seconds in all the phases.
    pub fn total_s(&self) -> f64 {
        self.env_s + self.inference_s + self.update_s + self.eval_s + self.compile_s
    }

    /// Seconds without the compile phase: what the trial trains at once compiled.
    pub fn steady_s(&self) -> f64 {
        self.total_s() - self.compile_s
    }

    /// The phase's share of the timed total, 0–1 (0 when nothing was timed).
    pub fn fraction(&self, phase: Phase) -> f64 {
        let total = self.total_s();
        if total > 0.0 {
            self.get(phase) / total
        } else {
            0.0
        }
    }

    /// The phase with the largest share, `None` when nothing was timed.
    pub fn dominant(&self) -> Option<Phase> {
        if self.total_s() <= 0.0 {
            return None;
        }
        Phase::ALL
            .into_iter()
            .max_by(|a, b| self.get(*a).total_cmp(&self.get(*b)))
    }

    /// Adds another split (e.g. one worker's to a trial's).
    pub fn add(&mut self, other: &PhaseSplit) {
        for p in Phase::ALL {
            *self.get_mut(p) += other.get(p);
        }
    }
}

/// Accumulates wall time per phase; the trainer fills one per trial.
#[derive(Debug, Clone, Default)]
pub struct PhaseTimer {
    split: PhaseSplit,
}

impl PhaseTimer {
    pub fn new() -> PhaseTimer {
        PhaseTimer::default()
    }

    /// Adds `elapsed` to `phase`.
    pub fn add(&mut self, phase: Phase, elapsed: Duration) {
        *self.split.get_mut(phase) += elapsed.as_secs_f64();
    }

    /// Runs `f`, charging its wall time to `phase`.
    pub fn time<T>(&mut self, phase: Phase, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.add(phase, start.elapsed());
        out
    }

    pub fn split(&self) -> PhaseSplit {
        self.split
    }

    pub fn reset(&mut self) {
        self.split = PhaseSplit::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_and_dominant_phase() {
        let mut t = PhaseTimer::new();
        t.add(Phase::Env, Duration::from_millis(700));
        t.add(Phase::Update, Duration::from_millis(200));
        t.add(Phase::Inference, Duration::from_millis(100));
        let s = t.split();
        assert!((s.fraction(Phase::Env) - 0.7).abs() < 1e-12);
        assert_eq!(s.dominant(), Some(Phase::Env));
        assert_eq!(PhaseSplit::default().dominant(), None);
        assert_eq!(PhaseSplit::default().fraction(Phase::Env), 0.0);
    }

    #[test]
    fn time_charges_the_closure_and_returns_its_value() {
        let mut t = PhaseTimer::new();
        let v = t.time(Phase::Eval, || 41 + 1);
        assert_eq!(v, 42);
        assert!(t.split().eval_s >= 0.0);
        assert_eq!(t.split().env_s, 0.0);
        let mut total = t.split();
        total.add(&PhaseSplit {
            env_s: 2.0,
            ..Default::default()
        });
        assert_eq!(total.env_s, 2.0);
        t.reset();
        assert_eq!(t.split(), PhaseSplit::default());
    }
}
