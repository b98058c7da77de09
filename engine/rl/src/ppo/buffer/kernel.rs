//! A rollout step's rows of the buffer in one CubeCL launch (issue 33): the observations,
//! actions, values, rewards and dones of every env written into row `t` of their `[T, N, …]`
//! tensors, where `slice_assign` launched one kernel per tensor (five a step: a quarter of a
//! device-env step's launches on the bench's tiny configuration). The same launch writes the next
//! step's observations in the run's compute dtype, for that step's forward pass: in f16 their
//! cast was a launch of its own every step (in f32 it is a copy the forward pass reads instead).
//!
//! Unlike the env and update kernels, this one writes in place, as `slice_assign` does: a
//! buffer tensor held only by the rollout buffer (it takes each out of its field first) is
//! written into, and one held elsewhere too is copied first, so no other holder sees the
//! write. burn reaches it through its backend extension API (the unfused cubecl backend
//! implements the trait; `#[backend_extension]` derives the fused backend, a deferred custom
//! operation in burn-fusion's stream, and the dispatch layer's routing), as the update's
//! kernels do.
#![allow(clippy::too_many_arguments)]

use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, ExtensionType, backend_extension};
use burn::tensor::Tensor;
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use cubecl::{CubeDim, calculate_cube_count_elemwise};
use tradetune_env::tensor::writable_in_place;

use code::rollout_rows_kernel;

/// The five buffer tensors after the write, and the next observations in the compute dtype.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct RowsOutput<B: Backend> {
    pub obs: FloatTensor<B>,
    pub actions: FloatTensor<B>,
    pub values: FloatTensor<B>,
    pub rewards: FloatTensor<B>,
    pub dones: FloatTensor<B>,
    /// `[N, D]` the next observations in `dtype`.
    pub next: FloatTensor<B>,
}

fn rows_meta(
    obs: &TensorSpec,
    actions: &TensorSpec,
    values: &TensorSpec,
    rewards: &TensorSpec,
    dones: &TensorSpec,
    _obs_row: &TensorSpec,
    _actions_row: &TensorSpec,
    _values_row: &TensorSpec,
    _rewards_row: &TensorSpec,
    _dones_row: &TensorSpec,
    _next_obs: &TensorSpec,
    next: &TensorSpec,
    _t: &usize,
) -> RowsOutputMetadata {
    RowsOutputMetadata {
        obs: obs.clone(),
        actions: actions.clone(),
        values: values.clone(),
        rewards: rewards.clone(),
        dones: dones.clone(),
        next: next.clone(),
    }
}

/// The rollout buffer's step write as a backend operation.
#[backend_extension(Cube, Fusion)]
pub trait RolloutRowOps: Backend {
    /// Writes `obs_row` `[N, D]`, `actions_row` `[N, A]` and the `[N]` rows into row `t` of
    /// `obs` `[T, N, D]`, `actions` `[T, N, A]` and the `[T, N]` tensors (all one dtype), and
    /// `next_obs` `[N, D]` (the next step's observations) into `next` `[N, D]`, in its dtype,
    /// for the next step's forward pass (in f16 that cast was a launch of its own every step;
    /// where the rollout replays its policy step, `next` is the captured graph's input).
    #[fusion(meta = rows_meta)]
    fn rollout_rows(
        obs: FloatTensor<Self>,
        actions: FloatTensor<Self>,
        values: FloatTensor<Self>,
        rewards: FloatTensor<Self>,
        dones: FloatTensor<Self>,
        obs_row: &FloatTensor<Self>,
        actions_row: &FloatTensor<Self>,
        values_row: &FloatTensor<Self>,
        rewards_row: &FloatTensor<Self>,
        dones_row: &FloatTensor<Self>,
        next_obs: &FloatTensor<Self>,
        next: FloatTensor<Self>,
        t: usize,
    ) -> RowsOutput<Self>;
}

impl RolloutRowOps for CubeBackend {
    fn rollout_rows(
        obs: FloatTensor<Self>,
        actions: FloatTensor<Self>,
        values: FloatTensor<Self>,
        rewards: FloatTensor<Self>,
        dones: FloatTensor<Self>,
        obs_row: &FloatTensor<Self>,
        actions_row: &FloatTensor<Self>,
        values_row: &FloatTensor<Self>,
        rewards_row: &FloatTensor<Self>,
        dones_row: &FloatTensor<Self>,
        next_obs: &FloatTensor<Self>,
        next: FloatTensor<Self>,
        t: usize,
    ) -> RowsOutput<Self> {
        let (fdt, dtype) = (obs.dtype, next.dtype);
        let client = obs.client.clone();
        let next_shape = next_obs.meta.shape().clone();
        let out: RowsOutput<Self> = RowsOutput {
            obs: writable_in_place(obs),
            actions: writable_in_place(actions),
            values: writable_in_place(values),
            rewards: writable_in_place(rewards),
            dones: writable_in_place(dones),
            next: writable_in_place(next),
        };
        let elements = obs_row.meta.shape().num_elements()
            + actions_row.meta.shape().num_elements()
            + 3 * values_row.meta.shape().num_elements()
            + next_shape.num_elements();
        let cube_dim = CubeDim::new(&client, elements);
        let cube_count = calculate_cube_count_elemwise(&client, elements, cube_dim);
        rollout_rows_kernel::launch(
            &client,
            cube_count,
            cube_dim,
            into_contiguous(obs_row.clone()).into_tensor_arg(),
            into_contiguous(actions_row.clone()).into_tensor_arg(),
            into_contiguous(values_row.clone()).into_tensor_arg(),
            into_contiguous(rewards_row.clone()).into_tensor_arg(),
            into_contiguous(dones_row.clone()).into_tensor_arg(),
            into_contiguous(next_obs.clone()).into_tensor_arg(),
            out.obs.clone().into_tensor_arg(),
            out.actions.clone().into_tensor_arg(),
            out.values.clone().into_tensor_arg(),
            out.rewards.clone().into_tensor_arg(),
            out.dones.clone().into_tensor_arg(),
            out.next.clone().into_tensor_arg(),
            t as u32,
            [dtype_to_storage_type(fdt), dtype_to_storage_type(dtype)],
        );
        out
    }
}

/// The buffer's five tensors (`[T, N, D]`, `[T, N, A]`, then the `[T, N]` ones).
pub(super) struct Buffers {
    pub obs: Tensor<3>,
    pub actions: Tensor<3>,
    pub values: Tensor<2>,
    pub rewards: Tensor<2>,
    pub dones: Tensor<2>,
}

/// One step's rows (f32, as the buffer).
pub(super) struct Rows {
    pub obs: Tensor<2>,
    pub actions: Tensor<2>,
    pub values: Tensor<1>,
    pub rewards: Tensor<1>,
    pub dones: Tensor<1>,
}

/// The buffer after writing one step's `rows` into row `t`, and `next_obs` (the next step's
/// observations) written into `into` `[N, D]` in its dtype (see the module docs): in place
/// where only the caller held `into`.
pub(super) fn write_rows(
    bufs: Buffers,
    rows: Rows,
    t: usize,
    next_obs: &Tensor<2>,
    into: Tensor<2>,
) -> (Buffers, Tensor<2>) {
    let out = <Dispatch as RolloutRowOps>::rollout_rows(
        bufs.obs.into_dispatch(),
        bufs.actions.into_dispatch(),
        bufs.values.into_dispatch(),
        bufs.rewards.into_dispatch(),
        bufs.dones.into_dispatch(),
        &rows.obs.into_dispatch(),
        &rows.actions.into_dispatch(),
        &rows.values.into_dispatch(),
        &rows.rewards.into_dispatch(),
        &rows.dones.into_dispatch(),
        &next_obs.clone().into_dispatch(),
        into.into_dispatch(),
        t,
    );
    let bufs = Buffers {
        obs: Tensor::from_dispatch(out.obs),
        actions: Tensor::from_dispatch(out.actions),
        values: Tensor::from_dispatch(out.values),
        rewards: Tensor::from_dispatch(out.rewards),
        dones: Tensor::from_dispatch(out.dones),
    };
    (bufs, Tensor::from_dispatch(out.next))
}

mod code {
    use cubecl::prelude::*;

    /// Element `k` of the step's rows (the observations', then the actions', then the
    /// values', rewards' and dones') into row `t` of its buffer tensor.
    #[cube]
    fn write_row<F: Float>(
        k: usize,
        t: usize,
        obs_row: &Tensor<F>,
        actions_row: &Tensor<F>,
        values_row: &Tensor<F>,
        rewards_row: &Tensor<F>,
        dones_row: &Tensor<F>,
        obs: &mut Tensor<F>,
        actions: &mut Tensor<F>,
        values: &mut Tensor<F>,
        rewards: &mut Tensor<F>,
        dones: &mut Tensor<F>,
    ) {
        let (no, na, n) = (obs_row.len(), actions_row.len(), values_row.len());
        let mut k = k;
        if k < no {
            obs[t * no + k] = obs_row[k];
        } else {
            k -= no;
            if k < na {
                actions[t * na + k] = actions_row[k];
            } else {
                k -= na;
                if k < n {
                    values[t * n + k] = values_row[k];
                } else if k < 2 * n {
                    rewards[t * n + k - n] = rewards_row[k - n];
                } else if k < 3 * n {
                    dones[t * n + k - 2 * n] = dones_row[k - 2 * n];
                }
            }
        }
    }

    /// One element of one row per unit, then one of the next observations' cast.
    #[cube(launch)]
    pub(super) fn rollout_rows_kernel<F: Float, C: Float>(
        obs_row: &Tensor<F>,
        actions_row: &Tensor<F>,
        values_row: &Tensor<F>,
        rewards_row: &Tensor<F>,
        dones_row: &Tensor<F>,
        next_obs: &Tensor<F>,
        obs: &mut Tensor<F>,
        actions: &mut Tensor<F>,
        values: &mut Tensor<F>,
        rewards: &mut Tensor<F>,
        dones: &mut Tensor<F>,
        next: &mut Tensor<C>,
        t: u32,
        #[define(F, C)] _dtypes: [ElemType; 2],
    ) {
        let rows = obs_row.len() + actions_row.len() + 3 * values_row.len();
        let k = ABSOLUTE_POS;
        if k < rows {
            write_row::<F>(
                k,
                t as usize,
                obs_row,
                actions_row,
                values_row,
                rewards_row,
                dones_row,
                obs,
                actions,
                values,
                rewards,
                dones,
            );
        } else if k - rows < next.len() {
            next[k - rows] = C::cast_from(next_obs[k - rows]);
        }
    }
}
