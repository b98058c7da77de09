//! The rollout buffer: `n_steps × n_envs × …` tensors on the rollout device, allocated once
//! per run and overwritten in place each rollout (`slice_assign` on a uniquely held tensor
//! writes into its storage), so a run's memory does not grow or fragment with its length.
//! On a cubecl device a step's rows go in with one launch (`kernel.rs`), in place likewise.

use burn::tensor::{Device, FloatDType, Tensor};

#[cfg(feature = "wgpu")]
mod kernel;

/// One rollout's samples, time outermost.
#[derive(Debug)]
pub struct RolloutBuffer {
    n_steps: usize,
    n_envs: usize,
    obs_dim: usize,
    action_dim: usize,
    device: Device,
    /// `[T, N, obs_dim]` observations the actions were chosen on (normalised if enabled).
    obs: Tensor<3>,
    /// `[T, N, action_dim]` unclipped Gaussian samples.
    actions: Tensor<3>,
    /// `[T, N]` log-probabilities of `actions` under the rollout policy.
    log_probs: Tensor<2>,
    /// `[T, N]` value estimates of `obs`.
    values: Tensor<2>,
    /// `[T, N]` rewards (normalised if enabled).
    rewards: Tensor<2>,
    /// `[T, N]` 1.0 where the episode ended with that step.
    dones: Tensor<2>,
    pos: usize,
    /// Whether a step's rows go in with the buffer's kernel (a cubecl device).
    kernel: bool,
}

/// One step of all envs, as a rollout writes it into the buffer.
#[derive(Debug)]
pub struct StepRows {
    /// `[N, obs_dim]` the observations the actions were chosen on.
    pub obs: Tensor<2>,
    /// `[N, action_dim]` unclipped samples.
    pub actions: Tensor<2>,
    /// `[N]`, or `None` where [`RolloutBuffer::set_log_probs`] set the rollout's at once.
    pub log_probs: Option<Tensor<1>>,
    /// `[N]` value estimates of `obs`.
    pub values: Tensor<1>,
    /// `[N]` rewards.
    pub rewards: Tensor<1>,
    /// `[N]` 1.0 where the episode ended with that step.
    pub dones: Tensor<1>,
}

/// The flattened `[T·N, …]` view of a full buffer, for minibatch sampling.
#[derive(Debug, Clone)]
pub struct Flat {
    /// `[T·N, obs_dim]`.
    pub obs: Tensor<2>,
    /// `[T·N, action_dim]`.
    pub actions: Tensor<2>,
    /// `[T·N]`.
    pub log_probs: Tensor<1>,
    /// `[T·N]`.
    pub values: Tensor<1>,
}

/// Takes a tensor out of a field, leaving an empty one, so the taken tensor is uniquely
/// held and `slice_assign` can write into it instead of copying it.
fn take<const D: usize>(t: &mut Tensor<D>, device: &Device) -> Tensor<D> {
    std::mem::replace(t, Tensor::empty([0; D], device))
}

impl RolloutBuffer {
    /// Allocates the buffer on `device`.
    pub fn new(
        n_steps: usize,
        n_envs: usize,
        obs_dim: usize,
        action_dim: usize,
        device: &Device,
    ) -> Self {
        let obs = Tensor::zeros([n_steps, n_envs, obs_dim], device);
        Self {
            kernel: cfg!(feature = "wgpu") && tradetune_device::runs_cubecl_kernels(&obs),
            n_steps,
            n_envs,
            obs_dim,
            action_dim,
            device: device.clone(),
            obs,
            actions: Tensor::zeros([n_steps, n_envs, action_dim], device),
            log_probs: Tensor::zeros([n_steps, n_envs], device),
            values: Tensor::zeros([n_steps, n_envs], device),
            rewards: Tensor::zeros([n_steps, n_envs], device),
            dones: Tensor::zeros([n_steps, n_envs], device),
            pos: 0,
        }
    }

    /// Bytes the buffer holds (f32 everywhere).
    pub fn bytes(n_steps: usize, n_envs: usize, obs_dim: usize, action_dim: usize) -> usize {
        // Saturating: a size past `usize` is one no memory holds, not a small wrapped one.
        4usize
            .saturating_mul(n_steps)
            .saturating_mul(n_envs)
            .saturating_mul(obs_dim.saturating_add(action_dim).saturating_add(4))
    }

    /// Whether all `n_steps` rows are written.
    pub fn is_full(&self) -> bool {
        self.pos == self.n_steps
    }

    /// Whether [`Self::push`] writes the next observations in the compute dtype itself (with
    /// the rows, in one launch: a cubecl device), into the tensor it is given if any.
    pub fn writes_next(&self) -> bool {
        self.kernel
    }

    /// Starts a new rollout (rows are overwritten).
    pub fn clear(&mut self) {
        self.pos = 0;
    }

    /// The whole rollout's `[T, N]` log-probabilities at once (a device rollout has them from
    /// its noise before its first step): one tensor instead of a write per step. Its steps then
    /// push no log-probabilities.
    pub fn set_log_probs(&mut self, log_probs: Tensor<2>) {
        debug_assert_eq!(log_probs.dims(), [self.n_steps, self.n_envs]);
        self.log_probs = log_probs;
    }

    /// Writes one step of all envs (`log_probs` `None`: set for the whole rollout by
    /// [`Self::set_log_probs`]). With `next` (the next step's observations and the compute
    /// dtype), returns them in that dtype where the buffer's kernel wrote them in the same
    /// launch (a cubecl device), `None` where the caller casts them itself. With `into` too
    /// (`[N, D]` in that dtype), the kernel writes them there, in place where only the caller
    /// held it: a rollout that replays its policy step passes the captured graph's input.
    pub fn push(
        &mut self,
        step: StepRows,
        next: Option<(&Tensor<2>, FloatDType)>,
        into: Option<Tensor<2>>,
    ) -> Option<Tensor<2>> {
        assert!(self.pos < self.n_steps, "rollout buffer is full");
        let (t, n, d, a) = (self.pos, self.n_envs, self.obs_dim, self.action_dim);
        let dev = self.device.clone();
        let StepRows {
            obs,
            actions,
            log_probs,
            values,
            rewards,
            dones,
        } = step;
        if let Some(log_probs) = log_probs {
            self.log_probs = take(&mut self.log_probs, &dev)
                .slice_assign([t..t + 1, 0..n], log_probs.unsqueeze_dim::<2>(0));
        }
        #[cfg(feature = "wgpu")]
        if self.kernel {
            // One launch for the five rows (the buffer is f32 throughout) and the next step's
            // observations in the compute dtype.
            let f32s = |x: Tensor<1>| x.cast(FloatDType::F32);
            let bufs = kernel::Buffers {
                obs: take(&mut self.obs, &dev),
                actions: take(&mut self.actions, &dev),
                values: take(&mut self.values, &dev),
                rewards: take(&mut self.rewards, &dev),
                dones: take(&mut self.dones, &dev),
            };
            let rows = kernel::Rows {
                obs: obs.cast(FloatDType::F32),
                actions: actions.cast(FloatDType::F32),
                values: f32s(values),
                rewards: f32s(rewards),
                dones: f32s(dones),
            };
            // Without a next step to cast for, the kernel copies this step's observations
            // (in f32), and the copy is dropped.
            let (next_obs, dtype) = match next {
                Some((x, dtype)) => (x.clone(), dtype),
                None => (rows.obs.clone(), FloatDType::F32),
            };
            let into = match into {
                Some(into) if next.is_some() => into,
                _ => Tensor::empty([n, d], (&dev, dtype.into())),
            };
            let (bufs, cast) = kernel::write_rows(bufs, rows, t, &next_obs, into);
            (self.obs, self.actions) = (bufs.obs, bufs.actions);
            (self.values, self.rewards, self.dones) = (bufs.values, bufs.rewards, bufs.dones);
            self.pos += 1;
            return next.map(|_| cast);
        }
        let _ = (next, into);
        let row3 = |x: Tensor<2>| x.unsqueeze_dim::<3>(0);
        let row2 = |x: Tensor<1>| x.unsqueeze_dim::<2>(0);
        self.obs = take(&mut self.obs, &dev).slice_assign([t..t + 1, 0..n, 0..d], row3(obs));
        self.actions =
            take(&mut self.actions, &dev).slice_assign([t..t + 1, 0..n, 0..a], row3(actions));
        self.values = take(&mut self.values, &dev).slice_assign([t..t + 1, 0..n], row2(values));
        self.rewards = take(&mut self.rewards, &dev).slice_assign([t..t + 1, 0..n], row2(rewards));
        self.dones = take(&mut self.dones, &dev).slice_assign([t..t + 1, 0..n], row2(dones));
        self.pos += 1;
        None
    }

    /// `[T, N]` rewards, values and dones, for GAE.
    pub fn rewards_values_dones(&self) -> (Tensor<2>, Tensor<2>, Tensor<2>) {
        (
            self.rewards.clone(),
            self.values.clone(),
            self.dones.clone(),
        )
    }

    /// The samples as `[T·N, …]` tensors.
    pub fn flat(&self) -> Flat {
        let len = self.n_steps * self.n_envs;
        Flat {
            obs: self.obs.clone().reshape([len, self.obs_dim]),
            actions: self.actions.clone().reshape([len, self.action_dim]),
            log_probs: self.log_probs.clone().reshape([len]),
            values: self.values.clone().reshape([len]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    #[test]
    fn push_fills_rows_in_time_order() {
        let d = Device::flex();
        let mut buf = RolloutBuffer::new(2, 3, 1, 1, &d);
        for t in 0..2 {
            let v = |k: f32| {
                Tensor::<1>::from_data(
                    TensorData::new(
                        (0..3)
                            .map(|i| k + t as f32 * 10.0 + i as f32)
                            .collect::<Vec<f32>>(),
                        [3],
                    ),
                    &d,
                )
            };
            buf.push(
                StepRows {
                    obs: v(0.0).unsqueeze_dim(1),
                    actions: v(100.0).unsqueeze_dim(1),
                    log_probs: Some(v(200.0)),
                    values: v(300.0),
                    rewards: v(400.0),
                    dones: v(500.0),
                },
                None,
                None,
            );
        }
        assert!(buf.is_full());
        let f = buf.flat();
        let obs: Vec<f32> = f.obs.try_into_vec_as().unwrap();
        assert_eq!(obs, vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
        let (r, _, dn) = buf.rewards_values_dones();
        let r: Vec<f32> = r.try_into_vec_as().unwrap();
        assert_eq!(r[4], 411.0, "[T, N] row-major: step 1, env 1");
        let dn: Vec<f32> = dn.try_into_vec_as().unwrap();
        assert_eq!(dn[0], 500.0);
    }

    /// Fills a 3-step buffer of 4 envs with distinct values, keeping a copy of the buffer's
    /// tensors from before the second step: what it holds, and what the copy still holds.
    /// With `dtype`, each step also hands the next observations over to be cast to it: the
    /// third result holds them, cast (by the kernel where it did, else by burn), back in f32.
    fn fill(d: &Device, dtype: Option<FloatDType>) -> (Vec<Vec<f32>>, Vec<Vec<f32>>, Vec<f32>) {
        let (steps, n, od, ad) = (3, 4, 5, 2);
        let mut buf = RolloutBuffer::new(steps, n, od, ad, d);
        let mut before = None;
        let mut casts = Vec::new();
        for t in 0..steps {
            let vals = |k: f32, len: usize| -> Vec<f32> {
                (0..len).map(|i| k + 1000.0 * t as f32 + i as f32).collect()
            };
            let m = |k: f32, cols: usize| {
                Tensor::<2>::from_data(TensorData::new(vals(k, n * cols), [n, cols]), d)
            };
            let v = |k: f32| Tensor::<1>::from_data(TensorData::new(vals(k, n), [n]), d);
            if t == 1 {
                // Held elsewhere: the write must not reach this copy.
                before = Some(buf.flat());
            }
            let rows = StepRows {
                obs: m(0.0, od),
                actions: m(100.0, ad),
                log_probs: None,
                values: v(200.0),
                rewards: v(300.0),
                dones: v(400.0),
            };
            // Values f16 rounds: the cast is seen to happen.
            let next = m(0.1, od);
            let cast = buf.push(rows, dtype.map(|dt| (&next, dt)), None);
            if let Some(dt) = dtype {
                let x = cast.unwrap_or_else(|| next.cast(dt));
                assert_eq!(x.dtype(), dt.into());
                casts.extend(
                    x.cast(FloatDType::F32)
                        .try_into_vec_as::<f32>()
                        .expect("a read"),
                );
            }
        }
        let read2 = |t: Tensor<2>| -> Vec<f32> { t.try_into_vec_as().expect("a read") };
        let read1 = |t: Tensor<1>| -> Vec<f32> { t.try_into_vec_as().expect("a read") };
        let f = buf.flat();
        let (r, v, dn) = buf.rewards_values_dones();
        let after = vec![
            read2(f.obs),
            read2(f.actions),
            read2(v),
            read2(r),
            read2(dn),
        ];
        let b = before.expect("taken at step 1");
        (
            after,
            vec![read2(b.obs), read2(b.actions), read1(b.values)],
            casts,
        )
    }

    /// On a cubecl device the five rows go in with one kernel, in place: the buffer holds what
    /// the flex device's `slice_assign`s write, and a copy of it taken before a step does not
    /// see that step.
    #[test]
    fn the_row_kernel_writes_what_slice_assign_writes() {
        let test = "the_row_kernel_writes_what_slice_assign_writes";
        let Some(device) = tradetune_device::wgpu_for_test(test) else {
            return;
        };
        assert!(
            !cfg!(feature = "wgpu")
                || tradetune_device::runs_cubecl_kernels(&Tensor::<1>::zeros([1], &device)),
            "wgpu takes the kernel path"
        );
        let (flex, flex_before, _) = fill(&Device::flex(), None);
        let (gpu, gpu_before, _) = fill(&device, None);
        assert_eq!(gpu, flex);
        assert_eq!(gpu_before, flex_before);
        // The same in f16 with the next observations cast in the same launch.
        let spec = tradetune_device::DeviceSpec::Wgpu(None);
        if tradetune_device::supported_precisions(spec)
            .is_ok_and(|p| p.contains(&tradetune_device::precision::Precision::F16))
        {
            let f16 = Some(FloatDType::F16);
            let (flex16, _, flex_casts) = fill(&Device::flex(), f16);
            let (gpu16, _, gpu_casts) = fill(&device, f16);
            assert_eq!(gpu16, flex);
            assert_eq!(flex16, flex);
            assert_eq!(gpu_casts, flex_casts);
            assert_eq!(flex_casts.len(), 3 * 4 * 5);
            // f16 holds 1000.1 as 1000: a cast, not a copy.
            let raw: Vec<f32> = (0..3)
                .flat_map(|t| (0..20).map(move |i| 0.1 + 1000.0 * t as f32 + i as f32))
                .collect();
            assert_ne!(flex_casts, raw);
            assert_eq!(flex_casts[20], 1000.0);
        }
        assert_eq!(flex[0][4 * 5], 1000.0, "step 1, env 0, feature 0");
        assert!(
            flex_before[0][4 * 5..].iter().all(|&x| x == 0.0),
            "the copy from before step 1 holds step 0 only"
        );
        assert_eq!(flex_before[0][..3], [0.0, 1.0, 2.0]);
    }
}
