//! The replayed policy step's noise read inside its graph (issue 33), on cubecl devices.
//!
//! A rollout's noise is drawn once (`[T, N, A]`, scaled by σ); a step adds its row to the action
//! means. Where the rollout replays its policy step ([`super::policy_graph`]), that add ran
//! outside the graph, a launch the host prepared every step, because the row changes every
//! step and a graph replays fixed launches. Here the graph reads the row itself: a step counter
//! `[1]` on the device names it ([`row`]), and the graph's last launch advances the counter in
//! place ([`advance`]), so every replay reads the next row with nothing written by the host.

use burn::backend::cubecl::dtype_to_elem_type;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, ExtensionType, backend_extension};
use burn::tensor::Tensor;
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;
use tradetune_env::tensor::writable_in_place;

/// What [`row`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct NoiseRow<B: Backend> {
    /// `[N, A]` row `counter` of the table.
    pub row: FloatTensor<B>,
}

fn row_meta(table: &TensorSpec, _counter: &TensorSpec) -> NoiseRowMetadata {
    NoiseRowMetadata {
        row: TensorSpec::new(vec![table.shape[1], table.shape[2]].into(), table.dtype),
    }
}

/// What [`advance`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct Counter<B: Backend> {
    /// `[1]` the counter, advanced (in the buffer it was given, where nothing else held it).
    pub counter: FloatTensor<B>,
}

fn advance_meta(counter: &TensorSpec, _rows: &usize) -> CounterMetadata {
    CounterMetadata {
        counter: counter.clone(),
    }
}

/// The step counter's two operations.
#[backend_extension(Cube, Fusion)]
pub trait NoiseRowOps: Backend {
    /// Row `counter[0]` of `table` `[T, N, A]`.
    #[fusion(meta = row_meta)]
    fn noise_row(table: &FloatTensor<Self>, counter: &FloatTensor<Self>) -> NoiseRow<Self>;

    /// `counter` `[1]` plus one, modulo `rows`, written in place.
    #[fusion(meta = advance_meta)]
    fn advance_counter(counter: FloatTensor<Self>, rows: usize) -> Counter<Self>;
}

impl NoiseRowOps for CubeBackend {
    fn noise_row(table: &FloatTensor<Self>, counter: &FloatTensor<Self>) -> NoiseRow<Self> {
        let dtype = table.dtype;
        let shape = table.meta.shape();
        let (n, a) = (shape[1], shape[2]);
        let client = table.client.clone();
        let row = empty_device_dtype(
            client.clone(),
            table.device.clone(),
            vec![n, a].into(),
            dtype,
        );
        let units = (n * a).max(1);
        let cube_dim = CubeDim::new(&client, units);
        code::noise_row_kernel::launch(
            &client,
            calculate_cube_count_elemwise(&client, units, cube_dim),
            cube_dim,
            into_contiguous(table.clone()).into_tensor_arg(),
            into_contiguous(counter.clone()).into_tensor_arg(),
            row.clone().into_tensor_arg(),
            [dtype_to_elem_type(dtype), dtype_to_elem_type(counter.dtype)],
        );
        NoiseRow { row }
    }

    fn advance_counter(counter: FloatTensor<Self>, rows: usize) -> Counter<Self> {
        let dtype = counter.dtype;
        let client = counter.client.clone();
        let counter = writable_in_place(counter);
        code::advance_kernel::launch(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(1),
            counter.clone().into_tensor_arg(),
            rows as u32,
            dtype_to_elem_type(dtype),
        );
        Counter { counter }
    }
}

/// `[N, A]` row `counter` of `table` `[T, N, A]`, in one launch.
pub(super) fn row(table: &Tensor<3>, counter: &Tensor<1>) -> Tensor<2> {
    let out = <Dispatch as NoiseRowOps>::noise_row(
        &table.clone().into_dispatch(),
        &counter.clone().into_dispatch(),
    );
    Tensor::from_dispatch(out.row)
}

/// `counter` plus one, modulo `rows`, in one launch: in place where the caller held the
/// counter alone (the tensor returned then shares its buffer).
pub(super) fn advance(counter: Tensor<1>, rows: usize) -> Tensor<1> {
    let out = <Dispatch as NoiseRowOps>::advance_counter(counter.into_dispatch(), rows);
    Tensor::from_dispatch(out.counter)
}

mod code {
    use cubecl::prelude::*;

    /// One unit an element of the row.
    #[cube(launch)]
    pub(super) fn noise_row_kernel<F: Float, C: Float>(
        table: &Tensor<F>,
        counter: &Tensor<C>,
        row: &mut Tensor<F>,
        #[define(F, C)] _dtypes: [ElemType; 2],
    ) {
        let i = ABSOLUTE_POS;
        let len = row.len();
        if i < len {
            let t = usize::cast_from(counter[0]);
            row[i] = table[t * len + i];
        }
    }

    /// One unit.
    #[cube(launch)]
    pub(super) fn advance_kernel<C: Float>(
        counter: &mut Tensor<C>,
        rows: u32,
        #[define(C)] _dtype: ElemType,
    ) {
        if ABSOLUTE_POS == 0 {
            let next = u32::cast_from(counter[0]) + 1;
            let mut wrapped = next;
            if next >= rows {
                wrapped = 0;
            }
            counter[0] = C::cast_from(wrapped);
        }
    }
}
