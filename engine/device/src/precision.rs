//! Mixed precision by hand (burn has no AMP yet, burn issue #5696; DESIGN.md §4).
//!
//! Parameters and Adam state stay f32. The forward and backward passes run on differentiable
//! casts of the parameters and inputs to the compute dtype ([`Precision::compute_dtype`]); the
//! gradients flow back through the casts into the f32 parameters. bf16 has f32's exponent
//! range, so it needs no loss scaling; f16 tops out at 65,504 and flushes small gradients to
//! zero, so f16 multiplies the loss by a dynamic scale ([`LossScaler`]) in the manner of
//! PyTorch's `torch.cuda.amp.GradScaler` (Micikevicius et al. 2018, arXiv:1710.03740 §3.2).

use std::fmt;
use std::str::FromStr;

use burn::tensor::FloatDType;
use serde::{Deserialize, Serialize};

/// Compute precision of a training run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// Forward/backward in bfloat16.
    Bf16,
    /// Forward/backward in IEEE half, with dynamic loss scaling.
    F16,
}

impl Precision {
    /// The dtype the forward and backward passes compute in.
    pub fn compute_dtype(self) -> FloatDType {
        match self {
            Precision::F32 => FloatDType::F32,
            Precision::Bf16 => FloatDType::BF16,
            Precision::F16 => FloatDType::F16,
        }
    }

    /// Bytes per element in the compute dtype.
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::Bf16 | Precision::F16 => 2,
        }
    }

    /// Whether this precision uses dynamic loss scaling.
    pub fn scales_loss(self) -> bool {
        self == Precision::F16
    }

    /// The name users type (`f32`, `bf16`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => Ok(Precision::F32),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            "f16" | "fp16" | "float16" | "half" => Ok(Precision::F16),
            other => Err(format!(
                "unknown precision '{other}': expected f32, bf16 or f16"
            )),
        }
    }
}

/// What [`LossScaler::update`] decided for one optimiser step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleStep {
    /// Gradients were finite: apply the step.
    Apply,
    /// Gradients overflowed: skip the step (the scale was lowered).
    Skip,
}

/// Dynamic loss scaling: multiply the loss by `scale` before the backward pass, divide the
/// gradients by it after; on a non-finite gradient skip the step and halve the scale; after
/// `growth_interval` clean steps in a row double it (PyTorch `GradScaler` defaults: 2^16,
/// ×0.5, ×2, 2000).
#[derive(Debug, Clone, PartialEq)]
pub struct LossScaler {
    scale: f32,
    enabled: bool,
    growth_interval: usize,
    clean_steps: usize,
    skipped: usize,
}

/// The scale never drops below this: below it every f16 step is overflowing for a reason
/// scaling cannot fix.
pub const MIN_LOSS_SCALE: f32 = 1.0 / 65536.0;
/// Nor grows above this (f32 overflow of the scaled loss comes next).
pub const MAX_LOSS_SCALE: f32 = 1.0e30;

impl LossScaler {
    /// A scaler for `precision`; a no-op (scale 1) unless the precision is f16.
    pub fn new(precision: Precision, initial_scale: f32, growth_interval: usize) -> Self {
        let enabled = precision.scales_loss();
        Self {
            scale: if enabled { initial_scale } else { 1.0 },
            enabled,
            growth_interval: growth_interval.max(1),
            clean_steps: 0,
            skipped: 0,
        }
    }

    /// The current scale (1 when disabled).
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// Restores a scale saved with a checkpoint (ignored when disabled; kept within the
    /// scaler's bounds).
    pub fn restore_scale(&mut self, scale: f32) {
        if self.enabled && scale.is_finite() {
            self.scale = scale.clamp(MIN_LOSS_SCALE, MAX_LOSS_SCALE);
            self.clean_steps = 0;
        }
    }

    /// Clean steps in a row since the scale last changed.
    pub fn clean_steps(&self) -> usize {
        self.clean_steps
    }

    /// Takes the state a run of steps reached on the device (see the learner): the scale, the
    /// clean steps in a row, and how many of those steps were skipped.
    pub fn set_from_device(&mut self, scale: f32, clean_steps: usize, skipped: usize) {
        if self.enabled && scale.is_finite() {
            self.scale = scale.clamp(MIN_LOSS_SCALE, MAX_LOSS_SCALE);
            self.clean_steps = clean_steps.min(self.growth_interval);
        }
        self.skipped += skipped;
    }

    /// Clean steps in a row after which the scale doubles.
    pub fn growth_interval(&self) -> usize {
        self.growth_interval
    }

    /// Steps skipped so far because of non-finite gradients.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// Whether the scale has fallen to its floor.
    pub fn underflowed(&self) -> bool {
        self.enabled && self.scale <= MIN_LOSS_SCALE
    }

    /// Records whether the step's (unscaled) gradients were all finite and adjusts the scale.
    /// When disabled a non-finite gradient still says [`ScaleStep::Skip`]: the caller treats
    /// it as divergence.
    pub fn update(&mut self, grads_finite: bool) -> ScaleStep {
        if !grads_finite {
            self.skipped += 1;
            self.clean_steps = 0;
            if self.enabled {
                self.scale = (self.scale * 0.5).max(MIN_LOSS_SCALE);
            }
            return ScaleStep::Skip;
        }
        if self.enabled {
            self.clean_steps += 1;
            if self.clean_steps >= self.growth_interval {
                self.scale = (self.scale * 2.0).min(MAX_LOSS_SCALE);
                self.clean_steps = 0;
            }
        }
        ScaleStep::Apply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_backs_off_and_grows() {
        let mut s = LossScaler::new(Precision::F16, 1024.0, 3);
        assert_eq!(s.update(false), ScaleStep::Skip);
        assert_eq!(s.scale(), 512.0);
        assert_eq!(s.update(true), ScaleStep::Apply);
        assert_eq!(s.update(true), ScaleStep::Apply);
        assert_eq!(s.scale(), 512.0);
        s.update(true);
        assert_eq!(s.scale(), 1024.0, "doubles after 3 clean steps");
        s.update(true);
        s.update(false);
        assert_eq!(s.scale(), 512.0, "an overflow resets the clean run");
        assert_eq!(s.skipped(), 2);
    }

    #[test]
    fn f32_and_bf16_do_not_scale() {
        for p in [Precision::F32, Precision::Bf16] {
            let mut s = LossScaler::new(p, 1024.0, 1);
            assert_eq!(s.scale(), 1.0);
            assert_eq!(s.update(true), ScaleStep::Apply);
            assert_eq!(s.update(false), ScaleStep::Skip);
            assert_eq!(s.scale(), 1.0);
        }
    }

    #[test]
    fn scale_has_a_floor() {
        let mut s = LossScaler::new(Precision::F16, 1.0, 10);
        for _ in 0..40 {
            s.update(false);
        }
        assert!(s.underflowed());
        assert_eq!(s.scale(), MIN_LOSS_SCALE);
    }

    #[test]
    fn parses_names() {
        assert_eq!("BF16".parse::<Precision>().unwrap(), Precision::Bf16);
        assert!("f8".parse::<Precision>().unwrap_err().contains("f8"));
    }
}
