//! Memory budget: estimate what a training run needs before it starts, refuse it when the
//! estimate exceeds its share of the device, and check the device's pool usage while it runs.
//!
//! burn/CubeCL has no hard per-process cap, so the budget is ours (DESIGN.md §4): a device's
//! `memory_fraction` (default 0.8, the user's RTX 4080 setup) is shared by the trials placed on
//! it. The run-time check reads `Device::memory_pool_usage`, which the CubeCL backends (wgpu,
//! CUDA, ROCm) implement and **burn-flex 0.22.1 does not** (it returns `None`: flex allocates
//! from the global allocator); on the CPU the estimate is the only guard. The estimator is
//! (`PpoConfig::memory_estimate`, written beside the learner in `tradetune_rl::ppo::memory_estimate`: the
//! device layer knows nothing of PPO) is unit-tested for its parameter and optimizer counts and the refusal, and compared with the
//! peak heap a real run allocates on the CPU device (`engine/tests/memory_measured.rs`, within
//! 25 %). It is not yet compared with a GPU pool's usage (no GPU here).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Default fraction of a device's memory that training may use.
pub const DEFAULT_MEMORY_FRACTION: f64 = 0.8;

/// Errors of the memory budget.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The estimate does not fit.
    #[error(
        "the run needs an estimated {} but its budget is {} ({budget_detail}):\n{estimate}\nlower batch_size, n_steps, n_envs or the network size, use bf16/f16, or raise memory_fraction",
        fmt_bytes(estimate.total()),
        fmt_bytes(*budget)
    )]
    TooLarge {
        estimate: MemoryEstimate,
        budget: u64,
        budget_detail: String,
    },
    /// The device's pool grew past the budget during the run.
    #[error(
        "memory budget exceeded: {} of {} on {device} ({what} after update {update})",
        fmt_bytes(*in_use),
        fmt_bytes(*budget)
    )]
    Overrun {
        update: usize,
        in_use: u64,
        budget: u64,
        device: String,
        /// What was measured: the device's memory pool, NVML's per-process memory.
        what: String,
    },
    /// A budget parameter is out of range.
    #[error("memory_fraction = {0}: must be in (0, 1]")]
    Fraction(f64),
}

/// Human-readable bytes (binary units).
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Estimated bytes of a training run, by what holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryEstimate {
    /// f32 parameters.
    pub params: u64,
    /// Adam's two f32 moments per parameter.
    pub optimizer_state: u64,
    /// f32 gradients, plus the half-precision weight casts kept for the backward pass.
    pub gradients: u64,
    /// Activations of one minibatch kept for the backward pass, and their gradients, at the
    /// compute precision.
    pub activations: u64,
    /// The rollout buffer, advantages/returns and the gathered minibatch.
    pub rollout_buffer: u64,
    /// Market data held by the environment on this device.
    pub dataset: u64,
}

impl MemoryEstimate {
    /// Sum of the parts.
    pub fn total(&self) -> u64 {
        // Saturating: a part that saturated (too large to hold) keeps the total too large.
        [
            self.optimizer_state,
            self.gradients,
            self.activations,
            self.rollout_buffer,
            self.dataset,
        ]
        .into_iter()
        .fold(self.params, u64::saturating_add)
    }
}

impl fmt::Display for MemoryEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = [
            ("parameters", self.params),
            ("optimizer state", self.optimizer_state),
            ("gradients", self.gradients),
            ("activations (1 minibatch)", self.activations),
            ("rollout buffer", self.rollout_buffer),
            ("dataset", self.dataset),
        ];
        for (name, v) in rows {
            writeln!(f, "  {name:<26} {:>12}", fmt_bytes(v))?;
        }
        write!(f, "  {:<26} {:>12}", "total", fmt_bytes(self.total()))
    }
}

/// The bytes one run may use on its device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryBudget {
    /// The run's share, bytes.
    pub bytes: u64,
    /// The device's memory, bytes.
    pub device_bytes: u64,
    /// Fraction of the device for all runs on it.
    pub fraction: f64,
    /// Runs sharing that fraction.
    pub shared_by: usize,
    /// The device, for messages (`wgpu:0`, `cpu#1`; empty when not named).
    pub device: String,
}

impl MemoryBudget {
    /// `fraction × device_bytes / shared_by`.
    pub fn new(device_bytes: u64, fraction: f64, shared_by: usize) -> Result<Self, MemoryError> {
        if !(fraction.is_finite() && fraction > 0.0 && fraction <= 1.0) {
            return Err(MemoryError::Fraction(fraction));
        }
        let shared_by = shared_by.max(1);
        Ok(Self {
            bytes: (device_bytes as f64 * fraction / shared_by as f64) as u64,
            device_bytes,
            fraction,
            shared_by,
            device: String::new(),
        })
    }

    /// The same budget, naming its device in messages.
    pub fn on(mut self, device: &str) -> Self {
        self.device = device.to_owned();
        self
    }

    /// The budget of every run on the device together (`fraction × device_bytes`): what the
    /// device's pool, shared by those runs, is checked against.
    pub fn device_budget(&self) -> u64 {
        (self.device_bytes as f64 * self.fraction) as u64
    }

    /// What a whole-process figure (the device's memory pool, NVML's per-process memory) is
    /// checked against while the run trains: the run's share when it is alone on the device,
    /// else the device's whole budget, since such a figure covers every run of the process.
    pub fn process_limit(&self) -> u64 {
        if self.shared_by <= 1 {
            self.bytes
        } else {
            self.device_budget()
        }
    }

    /// Refuses `in_use` bytes (measured `what`) after update `update` when over
    /// [`Self::process_limit`].
    pub fn check_in_use(&self, in_use: u64, update: usize, what: &str) -> Result<(), MemoryError> {
        let limit = self.process_limit();
        if in_use > limit {
            return Err(MemoryError::Overrun {
                update,
                in_use,
                budget: limit,
                device: if self.device.is_empty() {
                    "this device".into()
                } else {
                    self.device.clone()
                },
                what: what.to_owned(),
            });
        }
        Ok(())
    }

    /// Refuses `estimate` when it exceeds the budget, with the breakdown in the error.
    pub fn check(&self, estimate: &MemoryEstimate) -> Result<(), MemoryError> {
        if estimate.total() > self.bytes {
            return Err(MemoryError::TooLarge {
                estimate: *estimate,
                budget: self.bytes,
                budget_detail: format!(
                    "{:.0} % of {} shared by {} run(s)",
                    self.fraction * 100.0,
                    fmt_bytes(self.device_bytes),
                    self.shared_by
                ),
            });
        }
        Ok(())
    }
}

/// Total host RAM from `/proc/meminfo` (Linux), the CPU device's memory.
pub fn host_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole-process figure (pool, NVML per-process) is checked against the run's share when
    /// it is alone on the device, else against the device's whole budget, and the error names
    /// the device and what was measured.
    #[test]
    fn process_figures_are_checked_against_the_right_limit() {
        let alone = MemoryBudget::new(16 << 30, 0.8, 1).unwrap().on("wgpu:0");
        assert_eq!(alone.process_limit(), alone.bytes);
        assert!(
            alone
                .check_in_use(alone.bytes, 3, "NVML per-process memory")
                .is_ok()
        );
        let e = alone
            .check_in_use(alone.bytes + 1, 3, "NVML per-process memory")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("memory budget exceeded: "), "{e}");
        assert!(
            e.contains(" on wgpu:0 (NVML per-process memory after update 3)"),
            "{e}"
        );
        let shared = MemoryBudget::new(16 << 30, 0.8, 3).unwrap();
        assert_eq!(shared.process_limit(), shared.device_budget());
        assert!(shared.check_in_use(2 * shared.bytes, 1, "pool").is_ok());
        assert!(
            shared
                .check_in_use(shared.device_budget() + 1, 1, "pool")
                .is_err()
        );
    }
}
