//! A rollout step's rows of the buffer in one CubeCL launch (issue 33): the observations,
//! actions, values, rewards and dones of every env written into row `t` of their `[T, N, …]`
//! tensors, where `slice_assign` launched one kernel per tensor (five a step: a quarter of a
//! device-env step's launches on the bench's tiny configuration).
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

/// The five buffer tensors after the write.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct RowsOutput<B: Backend> {
    pub obs: FloatTensor<B>,
    pub actions: FloatTensor<B>,
    pub values: FloatTensor<B>,
    pub rewards: FloatTensor<B>,
    pub dones: FloatTensor<B>,
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
    _t: &usize,
) -> RowsOutputMetadata {
    RowsOutputMetadata {
        obs: obs.clone(),
        actions: actions.clone(),
        values: values.clone(),
        rewards: rewards.clone(),
        dones: dones.clone(),
    }
}

/// The rollout buffer's step write as a backend operation.
#[backend_extension(Cube, Fusion)]
pub trait RolloutRowOps: Backend {
    /// Writes `obs_row` `[N, D]`, `actions_row` `[N, A]` and the `[N]` rows into row `t` of
    /// `obs` `[T, N, D]`, `actions` `[T, N, A]` and the `[T, N]` tensors (all one dtype).
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
        t: usize,
    ) -> RowsOutput<Self> {
        let dtype = obs.dtype;
        let client = obs.client.clone();
        let out: RowsOutput<Self> = RowsOutput {
            obs: writable_in_place(obs),
            actions: writable_in_place(actions),
            values: writable_in_place(values),
            rewards: writable_in_place(rewards),
            dones: writable_in_place(dones),
        };
        let elements = obs_row.meta.shape().num_elements()
            + actions_row.meta.shape().num_elements()
            + 3 * values_row.meta.shape().num_elements();
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
            out.obs.clone().into_tensor_arg(),
            out.actions.clone().into_tensor_arg(),
            out.values.clone().into_tensor_arg(),
            out.rewards.clone().into_tensor_arg(),
            out.dones.clone().into_tensor_arg(),
            t as u32,
            dtype_to_storage_type(dtype),
        );
        out
    }
}

/// The buffer's tensors after writing one step's rows into row `t` (see the module docs).
pub(super) fn write_rows(
    bufs: [Tensor<3>; 2],
    scalars: [Tensor<2>; 3],
    rows: [Tensor<2>; 2],
    scalar_rows: [Tensor<1>; 3],
    t: usize,
) -> ([Tensor<3>; 2], [Tensor<2>; 3]) {
    let [obs, actions] = bufs;
    let [values, rewards, dones] = scalars;
    let [obs_row, actions_row] = rows;
    let [values_row, rewards_row, dones_row] = scalar_rows;
    let out = <Dispatch as RolloutRowOps>::rollout_rows(
        obs.into_dispatch(),
        actions.into_dispatch(),
        values.into_dispatch(),
        rewards.into_dispatch(),
        dones.into_dispatch(),
        &obs_row.into_dispatch(),
        &actions_row.into_dispatch(),
        &values_row.into_dispatch(),
        &rewards_row.into_dispatch(),
        &dones_row.into_dispatch(),
        t,
    );
    (
        [
            Tensor::from_dispatch(out.obs),
            Tensor::from_dispatch(out.actions),
        ],
        [
            Tensor::from_dispatch(out.values),
            Tensor::from_dispatch(out.rewards),
            Tensor::from_dispatch(out.dones),
        ],
    )
}

mod code {
    use cubecl::prelude::*;

    /// One element of one row per unit: the observations', then the actions', then the values',
    /// rewards' and dones'.
    #[cube(launch)]
    pub(super) fn rollout_rows_kernel<F: Float>(
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
        t: u32,
        #[define(F)] _dtype: ElemType,
    ) {
        let t = t as usize;
        let (no, na, n) = (obs_row.len(), actions_row.len(), values_row.len());
        let mut k = ABSOLUTE_POS;
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
}
