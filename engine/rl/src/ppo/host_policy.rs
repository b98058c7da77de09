//! The rollout's forward pass on the host, for the CPU device in f32.
//!
//! **Why.** A rollout step evaluates both networks on one observation per env (8 rows in the
//! small configurations). Through burn that is about two dozen tensor operations (casts,
//! matmuls, bias adds, activations, the Gaussian's log-probability), each with its dispatch and
//! allocation for a few hundred numbers: `tradetune bench train --configs small` spent 22 % of
//! its time in inference, nearly all of it per-operation overhead. On the CPU device the
//! tensors already live in host memory, so the step reads the observations once, evaluates the
//! same arithmetic in plain loops, and hands back four tensors.
//!
//! **Same policy.** The weights are those of the model at the start of the rollout (the model
//! does not change during it), the activations are the same functions (tanh through the same
//! rational approximation as [`crate::ppo::activation::fast_tanh`]), the noise is the same host
//! stream; only the order of the additions in each dot product may differ from burn's matrix
//! product, a difference of a few ulp (see the tests).

use burn::tensor::Tensor;

use crate::ppo::activation::ActivationKind;
use crate::ppo::error::PpoError;
use crate::ppo::model::{ActorCritic, Dense};

/// `ln √(2π)`, as in [`crate::ppo::model::gaussian_log_prob`].
const LN_SQRT_2PI: f32 = 0.918_938_5;

/// Multiply-adds of a step's policy network from which the two networks run on two threads.
const PARALLEL_MACS: usize = 1 << 20;

/// One dense layer: `y = x·W + b` with `W` as `[fan_in, fan_out]`, row-major.
#[derive(Debug, Clone)]
struct HostDense {
    weight: Vec<f32>,
    bias: Vec<f32>,
    fan_in: usize,
    fan_out: usize,
}

impl HostDense {
    fn of(layer: &Dense) -> Result<Self, PpoError> {
        let [fan_in, fan_out] = layer.weight.val().dims();
        Ok(Self {
            weight: host(layer.weight.val(), "weights")?,
            bias: host(layer.bias.val(), "biases")?,
            fan_in,
            fan_out,
        })
    }

    /// `out = x·W + b` for `n` rows of `x` (the kernels of the host update's matrix products,
    /// vectorised for the CPU they run on).
    fn forward(&self, x: &[f32], n: usize, out: &mut Vec<f32>) {
        crate::ppo::host_update::affine(
            &self.weight,
            &self.bias,
            (self.fan_in, self.fan_out),
            x,
            n,
            out,
        );
    }
}

/// The values of a tensor of the CPU device as a host vector (`what` names it in errors).
pub(crate) fn host<const D: usize>(t: Tensor<D>, what: &'static str) -> Result<Vec<f32>, PpoError> {
    t.try_into_vec_as::<f32>()
        .map_err(|e| PpoError::read(what, e))
}

/// The policy and value networks of an [`ActorCritic`], copied to host memory.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    pi: Vec<HostDense>,
    vf: Vec<HostDense>,
    mean: HostDense,
    value: HostDense,
    log_std: Vec<f32>,
    activation: ActivationKind,
    /// Scratch space for the hidden layers, one pair per network.
    scratch: [(Vec<f32>, Vec<f32>); 2],
}

/// One step's outputs for `n` envs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostStep {
    /// `[n, action_dim]` unclipped actions `mean + ε·σ`.
    pub actions: Vec<f32>,
    /// `[n]` their log-probabilities.
    pub log_probs: Vec<f32>,
    /// `[n]` the value network's estimates.
    pub values: Vec<f32>,
}

impl HostPolicy {
    /// A copy of `model`'s parameters (read from its device).
    pub fn of(model: &ActorCritic) -> Result<Self, PpoError> {
        let layers = |l: &[Dense]| l.iter().map(HostDense::of).collect::<Result<Vec<_>, _>>();
        Ok(Self {
            pi: layers(&model.pi)?,
            vf: layers(&model.vf)?,
            mean: HostDense::of(&model.mean)?,
            value: HostDense::of(&model.value)?,
            log_std: host(model.log_std(), "log_std")?,
            activation: model.activation(),
            scratch: Default::default(),
        })
    }

    /// The observation size the networks take.
    pub fn obs_dim(&self) -> usize {
        self.pi.first().unwrap_or(&self.mean).fan_in
    }

    /// The action size.
    pub fn action_dim(&self) -> usize {
        self.log_std.len()
    }

    /// The hidden `layers` then `head` on `n` rows of `obs`, into `out`.
    fn mlp(
        layers: &[HostDense],
        head: &HostDense,
        activation: ActivationKind,
        (a, b): &mut (Vec<f32>, Vec<f32>),
        obs: &[f32],
        n: usize,
        out: &mut Vec<f32>,
    ) {
        a.clear();
        a.extend_from_slice(&obs[..n * head_input(layers, head)]);
        for layer in layers {
            layer.forward(a, n, b);
            activation.apply_slice(b, a);
        }
        head.forward(a, n, out);
    }

    /// One rollout step for `n` envs: the mean action and value of each observation (`obs`:
    /// `[n, obs_dim]`), the action `mean + noise·σ` (`noise`: `[n, action_dim]`) and its
    /// log-probability, as the burn path computes them.
    pub fn step(&mut self, obs: &[f32], noise: &[f32], n: usize, out: &mut HostStep) {
        let a = self.action_dim();
        let mut mean = std::mem::take(&mut out.actions);
        let [pi_scratch, vf_scratch] = &mut self.scratch;
        let act = self.activation;
        let mut pi = || Self::mlp(&self.pi, &self.mean, act, pi_scratch, obs, n, &mut mean);
        let mut vf = || {
            Self::mlp(
                &self.vf,
                &self.value,
                act,
                vf_scratch,
                obs,
                n,
                &mut out.values,
            )
        };
        // The two networks share no weight: large ones each on a thread of the pool (a step
        // then reads tens of MB of weights); small ones on this thread, where handing one to
        // another thread would cost more than it computes.
        let weights: usize = self.pi.iter().map(|l| l.weight.len()).sum();
        if n * weights >= PARALLEL_MACS {
            rayon::join(pi, vf);
        } else {
            pi();
            vf();
        }
        out.log_probs.clear();
        // log N(x; μ, σ) = Σ_d (−½ z² − log σ_d) − a·ln √(2π), with z = (x − μ)/σ = ε exactly
        // up to rounding: computed from x as the burn path does, not from ε.
        for (row, eps) in mean.chunks_exact_mut(a).zip(noise.chunks_exact(a)).take(n) {
            let mut logp = 0.0f32;
            for ((m, &e), &ls) in row.iter_mut().zip(eps).zip(&self.log_std) {
                let std = ls.exp();
                let x = *m + e * std;
                let z = (x - *m) / std;
                logp += z * z * -0.5 - ls;
                *m = x;
            }
            out.log_probs.push(logp - a as f32 * LN_SQRT_2PI);
        }
        out.actions = mean;
    }
}

/// The input size of the first layer of `layers`, or of `head` without hidden layers.
fn head_input(layers: &[HostDense], head: &HostDense) -> usize {
    layers.first().unwrap_or(head).fan_in
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ppo::model::{ActorCriticConfig, NetArch, gaussian_log_prob};
    use burn::tensor::{Device, FloatDType, TensorData};

    /// The host step against the burn path on the same weights, observations and noise, for
    /// every activation and a network without hidden layers.
    #[test]
    fn matches_the_burn_forward_pass_for_every_activation() {
        let device = Device::flex();
        let (n, d, a) = (8, 13, 2);
        let obs: Vec<f32> = (0..n * d)
            .map(|i| ((i * 37 % 101) as f32 / 25.0) - 2.0)
            .collect();
        let noise: Vec<f32> = (0..n * a)
            .map(|i| ((i * 53 % 29) as f32 / 7.0) - 2.0)
            .collect();
        for (activation, pi) in [
            (ActivationKind::Tanh, vec![64, 64]),
            (ActivationKind::Relu, vec![32]),
            (ActivationKind::Elu, vec![16, 8]),
            (ActivationKind::Silu, vec![64, 64]),
            (ActivationKind::Tanh, vec![]),
            // Large enough for the two networks to run on two threads.
            (ActivationKind::Tanh, vec![1024, 1024]),
        ] {
            let cfg = ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(pi.clone()).with_vf(vec![48, 24]))
                .with_activation(activation)
                .with_log_std_init(-0.3);
            let model = cfg.init(d, a, 7, &device);
            let mut host = HostPolicy::of(&model).expect("the weights");
            assert_eq!((host.obs_dim(), host.action_dim()), (d, a));
            let mut out = HostStep::default();
            host.step(&obs, &noise, n, &mut out);

            let x = Tensor::<2>::from_data(TensorData::new(obs.clone(), [n, d]), &device);
            let eps = Tensor::<2>::from_data(TensorData::new(noise.clone(), [n, a]), &device);
            let (mean, value) = model.forward(x, FloatDType::F32);
            let std = model.log_std().exp().unsqueeze_dim::<2>(0);
            let actions = mean.clone().add(eps.mul(std));
            let logp = gaussian_log_prob(mean, model.log_std(), actions.clone());
            let close = |got: &[f32], want: Vec<f32>, what: &str| {
                assert_eq!(got.len(), want.len(), "{activation:?} {pi:?} {what}");
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "{activation:?} {pi:?} {what}: {g} vs burn's {w}"
                    );
                }
            };
            close(&out.actions, actions.try_into_vec_as().unwrap(), "actions");
            close(&out.values, value.try_into_vec_as().unwrap(), "values");
            close(
                &out.log_probs,
                logp.try_into_vec_as().unwrap(),
                "log-probabilities",
            );
        }
    }
}
