//! The actor-critic network: separate policy (`pi`) and value (`vf`) MLPs, as SB3's
//! `MlpPolicy` with `net_arch=dict(pi=[…], vf=[…])`, and a diagonal Gaussian policy with a
//! state-independent, learnable log-std.
//!
//! **How actions are bounded.** The policy is an unbounded Gaussian; a sampled action is
//! *clipped* to [-1, 1] when it is sent to the environment, while the buffer keeps the
//! unclipped sample and its log-probability. That is what SB3 (`PPO` on a `Box` space:
//! `np.clip(actions, low, high)` in `collect_rollouts`) and CleanRL's `ppo_continuous_action.py`
//! do, so hyperparameters tuned there transfer. Squashing with tanh (and the
//! `log(1 − tanh²)` correction, SAC-style) would make the policy's probabilities exact at the
//! bounds but shrinks the gradient of the mean near them and needs `atanh` of stored actions;
//! for PPO the clipped Gaussian is the established default. The env clips again, so the two
//! agree on what was executed.
//!
//! **Initialisation.** Orthogonal weights (Saxe et al. 2014) with SB3's gains
//! (`ActorCriticPolicy.init_weights`): √2 for hidden layers, 0.01 for the action mean, 1 for
//! the value head; biases 0. With `ortho_init` off, PyTorch's `nn.Linear` default as SB3 then
//! keeps it (weights and biases uniform in ±1/√fan_in). The matrices are built on the host from the config's
//! seed, so a run is reproducible regardless of other work on the device's global RNG.

pub use crate::ppo::activation::ActivationKind;
use crate::ppo::error::PpoError;
use burn::config::Config;
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Device, FloatDType, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

/// Hidden layer sizes of the two networks (SB3's `net_arch=dict(pi=…, vf=…)`).
#[derive(Config, Debug, PartialEq)]
pub struct NetArch {
    /// Hidden layers of the policy network.
    #[config(default = "vec![64, 64]")]
    pub pi: Vec<usize>,
    /// Hidden layers of the value network.
    #[config(default = "vec![64, 64]")]
    pub vf: Vec<usize>,
}

/// Configuration of the [`ActorCritic`] network.
#[derive(Config, Debug, PartialEq)]
pub struct ActorCriticConfig {
    /// Hidden layers of the policy and value networks.
    #[config(default = "NetArch::new()")]
    pub net_arch: NetArch,
    /// Activation of the hidden layers.
    #[config(default = "ActivationKind::Tanh")]
    pub activation: ActivationKind,
    /// Initial log standard deviation of the Gaussian policy (SB3 `log_std_init`).
    #[config(default = 0.0)]
    pub log_std_init: f32,
    /// Orthogonal initialisation (SB3 `ortho_init`: weights orthogonal with SB3's gains, biases
    /// 0); otherwise PyTorch's `nn.Linear` default, which SB3 keeps when `ortho_init=False`:
    /// weights and biases uniform in ±1/√fan_in.
    #[config(default = true)]
    pub ortho_init: bool,
}

impl ActorCriticConfig {
    /// Checks the layer sizes.
    pub fn validate(&self) -> Result<(), PpoError> {
        if self.net_arch.pi.contains(&0) || self.net_arch.vf.contains(&0) {
            return Err(PpoError::config(
                "policy.net_arch",
                format!("pi={:?} vf={:?}", self.net_arch.pi, self.net_arch.vf),
                "layer sizes must be positive",
            ));
        }
        if !self.log_std_init.is_finite() {
            return Err(PpoError::config(
                "policy.log_std_init",
                self.log_std_init,
                "must be finite",
            ));
        }
        Ok(())
    }

    /// Number of f32 parameters of the network for the given observation and action sizes.
    pub fn n_params(&self, obs_dim: usize, action_dim: usize) -> usize {
        let mlp = |hidden: &[usize], out: usize| {
            let mut n = 0;
            let mut fan_in = obs_dim;
            for &h in hidden.iter().chain(std::iter::once(&out)) {
                n += fan_in * h + h;
                fan_in = h;
            }
            n
        };
        mlp(&self.net_arch.pi, action_dim) + mlp(&self.net_arch.vf, 1) + action_dim
    }

    /// Builds the network on `device` (the training device, usually with autodiff), with
    /// weights drawn from `seed`.
    pub fn init(
        &self,
        obs_dim: usize,
        action_dim: usize,
        seed: u64,
        device: &Device,
    ) -> ActorCritic {
        let mut rng = StdRng::seed_from_u64(seed ^ 0xAC7_0C21);
        let ortho = self.ortho_init;
        let mlp = |hidden: &[usize], rng: &mut StdRng| {
            let mut layers = Vec::with_capacity(hidden.len());
            let mut fan_in = obs_dim;
            for &h in hidden {
                layers.push(Dense::new(fan_in, h, 2f32.sqrt(), ortho, rng, device));
                fan_in = h;
            }
            (layers, fan_in)
        };
        let (pi, pi_out) = mlp(&self.net_arch.pi, &mut rng);
        let (vf, vf_out) = mlp(&self.net_arch.vf, &mut rng);
        let mean = Dense::new(pi_out, action_dim, 0.01, ortho, &mut rng, device);
        let value = Dense::new(vf_out, 1, 1.0, ortho, &mut rng, device);
        let log_std = Param::from_tensor(Tensor::full([action_dim], self.log_std_init, device));
        ActorCritic {
            pi,
            vf,
            mean,
            value,
            log_std,
            activation: self.activation,
        }
    }
}

/// A fully connected layer `y = x·W + b` whose parameters are f32 and whose computation runs
/// in the dtype of the call (the cast is differentiable, so gradients reach the f32 weights).
#[derive(Module, Debug)]
pub struct Dense {
    /// `[fan_in, fan_out]`.
    pub weight: Param<Tensor<2>>,
    /// `[fan_out]`.
    pub bias: Param<Tensor<1>>,
}

impl Dense {
    fn new(
        fan_in: usize,
        fan_out: usize,
        gain: f32,
        ortho: bool,
        rng: &mut StdRng,
        device: &Device,
    ) -> Self {
        let (w, b): (Vec<f32>, Vec<f32>) = if ortho {
            (orthogonal(fan_in, fan_out, gain, rng), vec![0.0; fan_out])
        } else {
            // PyTorch's `nn.Linear` default: `kaiming_uniform_(a = √5)` for the weight, which is
            // uniform in ±1/√fan_in, and the same bound for the bias.
            let bound = (1.0 / fan_in as f32).sqrt();
            let mut uniform = || rng.random_range(-bound..=bound);
            let w = (0..fan_in * fan_out).map(|_| uniform()).collect();
            let b = (0..fan_out).map(|_| uniform()).collect();
            (w, b)
        };
        Self {
            weight: Param::from_tensor(Tensor::from_data(
                TensorData::new(w, [fan_in, fan_out]),
                device,
            )),
            bias: Param::from_tensor(Tensor::from_data(TensorData::new(b, [fan_out]), device)),
        }
    }

    fn forward(&self, x: Tensor<2>, dtype: FloatDType) -> Tensor<2> {
        let w = self.weight.val().cast(dtype);
        let b = self.bias.val().cast(dtype).unsqueeze_dim::<2>(0);
        x.matmul(w).add(b)
    }
}

/// A `rows × cols` matrix (row-major) with orthonormal rows or columns (whichever are fewer),
/// times `gain`: Gram–Schmidt on Gaussian vectors, which gives the same distribution as
/// PyTorch's QR-based `nn.init.orthogonal_`.
///
/// Blocked classical Gram–Schmidt, twice ("CGS2", Giraud et al. 2005: two passes make it as
/// orthogonal as modified Gram–Schmidt, to rounding): each block of [`ORTHO_BLOCK`] vectors is
/// projected off the vectors before it with two matrix products, then orthonormalised within
/// the block. The products run through `ndarray`'s matrixmultiply, so the 2048×1024 layer of
/// the RTX 4080 preset takes ≈ 0.1 s instead of the ≈ 1.5 s of vector-by-vector Gram–Schmidt.
pub fn orthogonal(rows: usize, cols: usize, gain: f32, rng: &mut StdRng) -> Vec<f32> {
    use ndarray::{Array2, s};
    // Orthonormalise k vectors of length n, k ≤ n (one per row of v).
    let (k, n) = (rows.min(cols), rows.max(cols));
    let mut v = Array2::<f64>::from_shape_simple_fn((k, n), || StandardNormal.sample(rng));
    for start in (0..k).step_by(ORTHO_BLOCK) {
        let end = (start + ORTHO_BLOCK).min(k);
        if start > 0 {
            for _pass in 0..2 {
                let (done, mut rest) = v.view_mut().split_at(ndarray::Axis(0), start);
                let mut block = rest.slice_mut(s![..end - start, ..]);
                // block −= (block · doneᵀ) · done
                let coef = block.dot(&done.t());
                block -= &coef.dot(&done);
            }
        }
        for i in start..end {
            let (done, mut rest) = v.view_mut().split_at(ndarray::Axis(0), i);
            let mut vi = rest.row_mut(0);
            for j in start..i {
                let vj = done.row(j);
                let dot = vi.dot(&vj);
                vi.scaled_add(-dot, &vj);
            }
            let norm = vi.dot(&vi).sqrt().max(1e-12);
            vi.mapv_inplace(|a| a / norm);
        }
    }
    let mut out = vec![0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            // Vector index and position within it.
            let x = if rows <= cols { v[[r, c]] } else { v[[c, r]] };
            out[r * cols + c] = gain * x as f32;
        }
    }
    out
}

/// Vectors orthonormalised together in [`orthogonal`].
const ORTHO_BLOCK: usize = 64;

/// Policy and value networks plus the Gaussian's log-std.
#[derive(Module, Debug)]
pub struct ActorCritic {
    /// Hidden layers of the policy.
    pub pi: Vec<Dense>,
    /// Hidden layers of the value function.
    pub vf: Vec<Dense>,
    /// Action-mean head.
    pub mean: Dense,
    /// Value head.
    pub value: Dense,
    /// `[action_dim]` log standard deviations, independent of the state.
    pub log_std: Param<Tensor<1>>,
    #[module(skip)]
    activation: ActivationKind,
}

impl ActorCritic {
    /// Action means `[B, A]` and values `[B]`, both f32, computed in `dtype`.
    pub fn forward(&self, obs: Tensor<2>, dtype: FloatDType) -> (Tensor<2>, Tensor<1>) {
        let x = obs.cast(dtype);
        let mut h = x.clone();
        for layer in &self.pi {
            h = self.activation.apply(layer.forward(h, dtype));
        }
        let mean = self.mean.forward(h, dtype).cast(FloatDType::F32);
        let mut h = x;
        for layer in &self.vf {
            h = self.activation.apply(layer.forward(h, dtype));
        }
        let value = self
            .value
            .forward(h, dtype)
            .cast(FloatDType::F32)
            .squeeze_dim::<1>(1);
        (mean, value)
    }

    /// Action means `[B, A]` only (f32, computed in `dtype`): a rollout step adds its noise to
    /// them before the value network runs, so that burn can fuse the sampling into the mean
    /// head's kernel.
    pub fn action_mean(&self, obs: Tensor<2>, dtype: FloatDType) -> Tensor<2> {
        let mut h = obs.cast(dtype);
        for layer in &self.pi {
            h = self.activation.apply(layer.forward(h, dtype));
        }
        self.mean.forward(h, dtype).cast(FloatDType::F32)
    }

    /// Values `[B]` only (for bootstrapping the last step of a rollout).
    pub fn value(&self, obs: Tensor<2>, dtype: FloatDType) -> Tensor<1> {
        let mut h = obs.cast(dtype);
        for layer in &self.vf {
            h = self.activation.apply(layer.forward(h, dtype));
        }
        self.value
            .forward(h, dtype)
            .cast(FloatDType::F32)
            .squeeze_dim::<1>(1)
    }

    /// This model with every parameter stored in `dtype` (the model itself in f32): a
    /// rollout's snapshot, whose forward passes then cast no weight (in f16 each step would
    /// otherwise cast every parameter again, one kernel each). Only for inference: the casts
    /// are not the trained parameters, and [`Self::log_std`] is in `dtype` too.
    pub fn in_dtype(self, dtype: FloatDType) -> Self {
        if dtype == FloatDType::F32 {
            return self;
        }
        struct CastTo(FloatDType);
        impl ModuleMapper for CastTo {
            fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
                param.map(|t| t.cast(self.0))
            }
        }
        self.map(&mut CastTo(dtype))
    }

    /// This model with each weight `[in, out]` laid out K-major (its columns contiguous: the
    /// transposed matrix's rows), a view of the same shape: one copy a weight. A product
    /// `x · W` whose routine wants its right side K-contiguous (cubek-matmul's `gemm` and
    /// `naive`; the tiled routines take either layout) then copies nothing first, where a
    /// row-major weight is copied at every product: for a rollout's snapshot, a copy a weight
    /// once a rollout instead of once a step (on lavapipe the action head's, every policy
    /// step). Weights with a dimension of 1 stay as they are. Only for inference: the trained
    /// parameters stay as they are.
    pub fn k_major(self) -> Self {
        struct KMajor;
        impl ModuleMapper for KMajor {
            fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
                // A vector's two layouts are one (and a `[K, 1]` view with K-major strides is
                // taken for a transposed matrix and copied by the routines that want it
                // row-major, as the value head's was on lavapipe): only matrices.
                if D != 2 || param.val().dims().contains(&1) {
                    return param;
                }
                param.map(|t| {
                    let mut transposed = t.dims();
                    transposed.swap(0, 1);
                    let n = transposed.iter().product::<usize>();
                    // A reshape of the transposed view copies it into the transposed matrix's
                    // row-major order.
                    t.transpose().reshape([n]).reshape(transposed).transpose()
                })
            }
        }
        self.map(&mut KMajor)
    }

    /// The `[A]` log standard deviations (f32).
    pub fn log_std(&self) -> Tensor<1> {
        self.log_std.val()
    }

    /// The activation of the hidden layers.
    pub fn activation(&self) -> ActivationKind {
        self.activation
    }
}

/// Collects every float parameter's values, in visiting order.
struct Flatten(Vec<Tensor<1>>);

impl burn::module::ModuleVisitor for Flatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let v = param.val();
        let n = v.shape().num_elements();
        self.0.push(v.reshape([n]));
    }
}

impl ActorCritic {
    /// All parameters as one host vector (tests, divergence checks, fingerprints).
    pub fn flat_params(&self) -> Result<Vec<f32>, PpoError> {
        Ok(self.param_tensors()?.concat())
    }

    /// Each parameter tensor as a host vector, in the order [`Self::flat_params`] joins them.
    pub fn param_tensors(&self) -> Result<Vec<Vec<f32>>, PpoError> {
        let mut f = Flatten(Vec::new());
        self.visit(&mut f);
        f.0.into_iter()
            .map(|t| {
                t.try_into_vec_as()
                    .map_err(|e| PpoError::read("parameters", e))
            })
            .collect()
    }
}

/// ln √(2π).
const LN_SQRT_2PI: f32 = 0.918_938_5;

/// Log-density `[B]` of `actions` `[B, A]` under the diagonal Gaussian N(mean, exp(log_std)²),
/// summed over action dimensions.
pub fn gaussian_log_prob(mean: Tensor<2>, log_std: Tensor<1>, actions: Tensor<2>) -> Tensor<1> {
    let [_, a] = mean.dims();
    let log_std = log_std.unsqueeze_dim::<2>(0);
    let z = actions.sub(mean).div(log_std.clone().exp());
    let per_dim = z.square().mul_scalar(-0.5).sub(log_std);
    per_dim
        .sum_dim(1)
        .squeeze_dim::<1>(1)
        .sub_scalar(a as f32 * LN_SQRT_2PI)
}

/// Log-densities `[T, N]` of the samples `μ + σ·ε` for the noise `noise` `[T, N, A]` (ε, standard
/// normal) under N(μ, σ²) with σ = exp(`log_std`): [`gaussian_log_prob`]'s sum with z = ε, which
/// does not depend on μ, so a rollout computes all its steps' at once.
pub fn gaussian_log_prob_of_noise(noise: Tensor<3>, log_std: Tensor<1>) -> Tensor<2> {
    let [t, n, a] = noise.dims();
    let log_std = log_std.reshape([1, 1, a]);
    noise
        .square()
        .mul_scalar(-0.5)
        .sub(log_std)
        .sum_dim(2)
        .reshape([t, n])
        .sub_scalar(a as f32 * LN_SQRT_2PI)
}

/// Entropy of the diagonal Gaussian (a scalar `[1]`; it does not depend on the state).
pub fn gaussian_entropy(log_std: Tensor<1>) -> Tensor<1> {
    let a = log_std.dims()[0] as f32;
    log_std.sum().add_scalar(a * (0.5 + LN_SQRT_2PI))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orthogonal_has_orthonormal_columns_times_gain() {
        let mut rng = StdRng::seed_from_u64(1);
        let (r, c) = (7, 3);
        let m = orthogonal(r, c, 2.0, &mut rng);
        for i in 0..c {
            for j in 0..c {
                let dot: f32 = (0..r).map(|k| m[k * c + i] * m[k * c + j]).sum();
                let want = if i == j { 4.0 } else { 0.0 };
                assert!((dot - want).abs() < 1e-4, "{i},{j}: {dot}");
            }
        }
        // Several blocks: every pair of the 150 columns, across and within blocks.
        let (r, c) = (300, 150);
        let m = orthogonal(r, c, 1.0, &mut rng);
        for i in 0..c {
            for j in 0..=i {
                let dot: f32 = (0..r).map(|k| m[k * c + i] * m[k * c + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((dot - want).abs() < 1e-5, "{i},{j}: {dot}");
            }
        }
        // The same seed gives the same matrix.
        let again = orthogonal(r, c, 1.0, &mut StdRng::seed_from_u64(1));
        let first = orthogonal(r, c, 1.0, &mut StdRng::seed_from_u64(1));
        assert_eq!(again, first);
        // Wide: orthonormal rows.
        let m = orthogonal(2, 5, 1.0, &mut rng);
        let dot: f32 = (0..5).map(|k| m[k] * m[5 + k]).sum();
        assert!(dot.abs() < 1e-5);
    }

    #[test]
    fn log_prob_and_entropy_match_the_formula() {
        let d = Device::flex();
        let mean = Tensor::<2>::from_data(TensorData::new(vec![0.0f32, 1.0], [1, 2]), &d);
        let log_std = Tensor::<1>::from_data(TensorData::new(vec![0.0f32, 0.5f32.ln()], [2]), &d);
        let act = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 1.5], [1, 2]), &d);
        let lp: Vec<f32> = gaussian_log_prob(mean, log_std.clone(), act)
            .try_into_vec_as()
            .unwrap();
        // N(1; 0, 1) · N(1.5; 1, 0.5²): −0.5 − ln√2π  +  (−0.5 − ln 0.5 − ln√2π)
        let want = -0.5 - LN_SQRT_2PI + (-0.5 - 0.5f32.ln() - LN_SQRT_2PI);
        assert!((lp[0] - want).abs() < 1e-5, "{} vs {want}", lp[0]);
        // From the noise: the same, for the sample μ + σ·ε of each ε (steps × envs = 2 × 1).
        let noise =
            Tensor::<3>::from_data(TensorData::new(vec![1.0f32, 1.0, 0.5, -2.0], [2, 1, 2]), &d);
        let from_noise: Vec<f32> = gaussian_log_prob_of_noise(noise.clone(), log_std.clone())
            .try_into_vec_as()
            .unwrap();
        assert!(
            (from_noise[0] - want).abs() < 1e-5,
            "{from_noise:?} vs {want}"
        );
        let mean = Tensor::<2>::from_data(TensorData::new(vec![0.3f32, -0.7], [1, 2]), &d);
        let std = log_std.clone().exp().unsqueeze_dim::<2>(0);
        let act = mean
            .clone()
            .add(noise.narrow(0, 1, 1).reshape([1, 2]).mul(std));
        let lp: Vec<f32> = gaussian_log_prob(mean, log_std.clone(), act)
            .try_into_vec_as()
            .unwrap();
        assert!(
            (from_noise[1] - lp[0]).abs() < 1e-5,
            "{from_noise:?} vs {lp:?}"
        );
        let h: Vec<f32> = gaussian_entropy(log_std).try_into_vec_as().unwrap();
        let want = 2.0 * (0.5 + LN_SQRT_2PI) + 0.5f32.ln();
        assert!((h[0] - want).abs() < 1e-5);
    }

    /// The K-major snapshot holds the same weights in the same logical order (only their
    /// layout changes) and computes what the model computes.
    #[test]
    fn the_k_major_snapshot_is_the_same_model() {
        let device = Device::flex();
        let cfg = ActorCriticConfig::new().with_net_arch(NetArch {
            pi: vec![8, 4],
            vf: vec![6],
        });
        let model = cfg.init(5, 3, 7, &device);
        let snapshot = model.clone().k_major();
        assert_eq!(
            snapshot.flat_params().unwrap(),
            model.flat_params().unwrap()
        );
        let obs = Tensor::<2>::from_data(
            TensorData::new((0..20).map(|i| (i as f32 * 0.37).sin()).collect(), [4, 5]),
            &device,
        );
        let (m1, v1) = model.forward(obs.clone(), FloatDType::F32);
        let (m2, v2) = snapshot.forward(obs, FloatDType::F32);
        let close = |a: Tensor<1>, b: Tensor<1>| {
            let (a, b) = (
                a.to_data().try_to_vec::<f32>().unwrap(),
                b.to_data().try_to_vec::<f32>().unwrap(),
            );
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-6 * x.abs().max(1.0), "{a:?} vs {b:?}");
            }
        };
        close(m1.reshape([12]), m2.reshape([12]));
        close(v1, v2);
    }

    /// Without `ortho_init`, a layer starts as PyTorch's `nn.Linear` (what SB3 keeps then):
    /// weights and biases uniform in ±1/√fan_in, so the weights' variance is 1/(3·fan_in);
    /// with it, biases start at 0.
    #[test]
    fn without_ortho_init_layers_start_as_torchs_linear() {
        let device = Device::flex();
        let values = |t: Tensor<1>| t.to_data().try_to_vec::<f32>().unwrap();
        let arch = NetArch {
            pi: vec![256],
            vf: vec![4],
        };
        let plain = ActorCriticConfig::new()
            .with_net_arch(arch.clone())
            .with_ortho_init(false)
            .init(400, 2, 3, &device);
        let layer = &plain.pi[0];
        let bound = 1.0 / 400f32.sqrt();
        let w = values(layer.weight.val().reshape([400 * 256]));
        let b = values(layer.bias.val());
        for x in w.iter().chain(&b) {
            assert!(x.abs() <= bound, "{x} outside ±{bound}");
        }
        let var = w.iter().map(|x| (x * x) as f64).sum::<f64>() / w.len() as f64;
        let expected = 1.0 / (3.0 * 400.0);
        assert!(
            (var / expected - 1.0).abs() < 0.03,
            "variance {var}, PyTorch's {expected}"
        );
        assert!(
            b.iter().filter(|x| x.abs() > bound / 10.0).count() > 200,
            "{b:?}"
        );
        let ortho = ActorCriticConfig::new()
            .with_net_arch(arch)
            .init(400, 2, 3, &device);
        assert!(values(ortho.pi[0].bias.val()).iter().all(|&x| x == 0.0));
        assert!(values(ortho.mean.bias.val()).iter().all(|&x| x == 0.0));
    }

    #[test]
    fn counts_parameters() {
        let cfg = ActorCriticConfig::new();
        let model = cfg.init(5, 2, 0, &Device::flex());
        assert_eq!(model.num_params(), cfg.n_params(5, 2));
        let (mean, value) = model.forward(Tensor::zeros([3, 5], &Device::flex()), FloatDType::F32);
        assert_eq!(mean.dims(), [3, 2]);
        assert_eq!(value.dims(), [3]);
    }
}
