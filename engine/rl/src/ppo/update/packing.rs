//! The replayed minibatch's state (see [`super::replay`]) taken apart and put together in one
//! launch each, on cubecl devices.
//!
//! The captured minibatch reads its parameters, Adam's moments, the tally's state and the
//! plan's row from one buffer, and writes the next one. In burn's tensor operations that was
//! about sixteen launches a minibatch on lavapipe: a `narrow` is a copy kernel wherever a part
//! does not start and end on the device's buffer alignment (seven parts), the row's cast to an
//! index and its gathers from the plan's tables (the indices, the step inputs), `k + 1`, and
//! `cat`, a launch a part (seven). [`unpack`] reads every part and the plan's row in one launch,
//! [`pack`] writes the next state in one. Handing the state back at an update's end is an
//! [`unpack`] too, where it was a copy and nine narrows.
#![allow(clippy::too_many_arguments)]

use burn::backend::cubecl::dtype_to_elem_type;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Dispatch, ExtensionType, backend_extension};
use burn::tensor::{Int, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

/// The tally's sums in the state.
pub(super) const SUMS: usize = 8;

/// The state's tail after the moments: loss scale, clean steps, the sums, the plan's row.
pub(super) const TAIL: usize = 2 + SUMS + 1;

/// What [`unpack`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct Unpacked<B: Backend> {
    /// `[P]` each: the parameters and Adam's two moments.
    pub params: FloatTensor<B>,
    pub m1: FloatTensor<B>,
    pub m2: FloatTensor<B>,
    /// `[1]`, `[1]`, `[SUMS]`: the tally's loss scale, clean steps and sums.
    pub scale: FloatTensor<B>,
    pub clean: FloatTensor<B>,
    pub sums: FloatTensor<B>,
    /// `[1]` each: the plan row's bias factor, ε term and learning rate.
    pub factor: FloatTensor<B>,
    pub epsilon: FloatTensor<B>,
    pub lr: FloatTensor<B>,
    /// `[B]` the plan row's sample indices.
    pub idx: IntTensor<B>,
}

fn unpack_meta(
    state: &TensorSpec,
    idx: &TensorSpec,
    _factor: &TensorSpec,
    _epsilon: &TensorSpec,
    _lr: &TensorSpec,
    p: &usize,
    _row: &bool,
) -> UnpackedMetadata {
    let f = |len: usize| TensorSpec::new(vec![len].into(), state.dtype);
    UnpackedMetadata {
        params: f(*p),
        m1: f(*p),
        m2: f(*p),
        scale: f(1),
        clean: f(1),
        sums: f(SUMS),
        factor: f(1),
        epsilon: f(1),
        lr: f(1),
        idx: TensorSpec::new(vec![idx.shape[1]].into(), idx.dtype),
    }
}

/// What [`pack`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct Packed<B: Backend> {
    /// `[3P + TAIL]` the state.
    pub state: FloatTensor<B>,
}

fn pack_meta(
    params: &TensorSpec,
    _m1: &TensorSpec,
    _m2: &TensorSpec,
    _scale: &TensorSpec,
    _clean: &TensorSpec,
    _sums: &TensorSpec,
    _prev: &TensorSpec,
    _k_at: &usize,
    _k_add: &f32,
) -> PackedMetadata {
    PackedMetadata {
        state: TensorSpec::new(vec![3 * params.shape[0] + TAIL].into(), params.dtype),
    }
}

/// The state's parts in and out of one buffer, as backend operations.
#[backend_extension(Cube, Fusion)]
pub trait StateOps: Backend {
    /// `state` `[3P + TAIL]` taken apart, and where `row`, row `k` (the state's last element)
    /// of the plan's tables: `idx` `[K, B]`, `factor`, `epsilon`, `lr` `[K]` (without `row`, the
    /// row's outputs are left unwritten: `k` may be past the plan's end). (`idx` is taken by value: burn's
    /// dispatch layer has no borrowed int tensors.)
    #[fusion(meta = unpack_meta)]
    fn state_unpack(
        state: &FloatTensor<Self>,
        idx: IntTensor<Self>,
        factor: &FloatTensor<Self>,
        epsilon: &FloatTensor<Self>,
        lr: &FloatTensor<Self>,
        p: usize,
        row: bool,
    ) -> Unpacked<Self>;

    /// `[params | m1 | m2 | scale, clean, sums | k]`, `k` element `k_at` of `prev` plus
    /// `k_add`.
    #[fusion(meta = pack_meta)]
    fn state_pack(
        params: FloatTensor<Self>,
        m1: FloatTensor<Self>,
        m2: FloatTensor<Self>,
        scale: FloatTensor<Self>,
        clean: FloatTensor<Self>,
        sums: FloatTensor<Self>,
        prev: &FloatTensor<Self>,
        k_at: usize,
        k_add: f32,
    ) -> Packed<Self>;
}

impl StateOps for CubeBackend {
    fn state_unpack(
        state: &FloatTensor<Self>,
        idx: IntTensor<Self>,
        factor: &FloatTensor<Self>,
        epsilon: &FloatTensor<Self>,
        lr: &FloatTensor<Self>,
        p: usize,
        row: bool,
    ) -> Unpacked<Self> {
        let (fdt, idt) = (state.dtype, idx.dtype);
        let b = idx.meta.shape()[1];
        let (client, device) = (state.client.clone(), state.device.clone());
        let empty = |len: usize, dtype| {
            empty_device_dtype(client.clone(), device.clone(), vec![len].into(), dtype)
        };
        let out: Unpacked<Self> = Unpacked {
            params: empty(p, fdt),
            m1: empty(p, fdt),
            m2: empty(p, fdt),
            scale: empty(1, fdt),
            clean: empty(1, fdt),
            sums: empty(SUMS, fdt),
            factor: empty(1, fdt),
            epsilon: empty(1, fdt),
            lr: empty(1, fdt),
            idx: empty(b, idt),
        };
        let units = p.max(b);
        let cube_dim = CubeDim::new(&client, units);
        code::unpack_kernel::launch(
            &client,
            calculate_cube_count_elemwise(&client, units, cube_dim),
            cube_dim,
            into_contiguous(state.clone()).into_tensor_arg(),
            into_contiguous(idx).into_tensor_arg(),
            into_contiguous(factor.clone()).into_tensor_arg(),
            into_contiguous(epsilon.clone()).into_tensor_arg(),
            into_contiguous(lr.clone()).into_tensor_arg(),
            out.params.clone().into_tensor_arg(),
            out.m1.clone().into_tensor_arg(),
            out.m2.clone().into_tensor_arg(),
            out.scale.clone().into_tensor_arg(),
            out.clean.clone().into_tensor_arg(),
            out.sums.clone().into_tensor_arg(),
            out.factor.clone().into_tensor_arg(),
            out.epsilon.clone().into_tensor_arg(),
            out.lr.clone().into_tensor_arg(),
            out.idx.clone().into_tensor_arg(),
            p as u32,
            u32::from(row),
            [dtype_to_elem_type(fdt), dtype_to_elem_type(idt)],
        );
        out
    }

    fn state_pack(
        params: FloatTensor<Self>,
        m1: FloatTensor<Self>,
        m2: FloatTensor<Self>,
        scale: FloatTensor<Self>,
        clean: FloatTensor<Self>,
        sums: FloatTensor<Self>,
        prev: &FloatTensor<Self>,
        k_at: usize,
        k_add: f32,
    ) -> Packed<Self> {
        let fdt = params.dtype;
        let p = params.meta.shape()[0];
        let (client, device) = (params.client.clone(), params.device.clone());
        let state = empty_device_dtype(client.clone(), device, vec![3 * p + TAIL].into(), fdt);
        let units = p.max(1);
        let cube_dim = CubeDim::new(&client, units);
        code::pack_kernel::launch(
            &client,
            calculate_cube_count_elemwise(&client, units, cube_dim),
            cube_dim,
            into_contiguous(params).into_tensor_arg(),
            into_contiguous(m1).into_tensor_arg(),
            into_contiguous(m2).into_tensor_arg(),
            into_contiguous(scale).into_tensor_arg(),
            into_contiguous(clean).into_tensor_arg(),
            into_contiguous(sums).into_tensor_arg(),
            into_contiguous(prev.clone()).into_tensor_arg(),
            state.clone().into_tensor_arg(),
            p as u32,
            k_at as u32,
            k_add,
            dtype_to_elem_type(fdt),
        );
        Packed { state }
    }
}

/// The captured state's parts and its plan row's inputs (inner tensors, see [`Unpacked`]).
pub(super) struct Parts {
    pub params: Tensor<1>,
    pub m1: Tensor<1>,
    pub m2: Tensor<1>,
    pub scale: Tensor<1>,
    pub clean: Tensor<1>,
    pub sums: Tensor<1>,
    /// `[factor, epsilon, lr]`.
    pub inputs: [Tensor<1>; 3],
    pub idx: Tensor<1, Int>,
}

/// `state` `[3P + TAIL]` taken apart and, where `row`, the plan's row `k` read (otherwise
/// [`Parts::inputs`] and [`Parts::idx`] are garbage), in one launch.
pub(super) fn unpack(
    state: &Tensor<1>,
    idx: &Tensor<2, Int>,
    inputs: &[Tensor<1>; 3],
    p: usize,
    row: bool,
) -> Parts {
    let [factor, epsilon, lr] = inputs.clone().map(|t| t.into_dispatch());
    let out = <Dispatch as StateOps>::state_unpack(
        &state.clone().into_dispatch(),
        idx.clone().into_dispatch(),
        &factor,
        &epsilon,
        &lr,
        p,
        row,
    );
    Parts {
        params: Tensor::from_dispatch(out.params),
        m1: Tensor::from_dispatch(out.m1),
        m2: Tensor::from_dispatch(out.m2),
        scale: Tensor::from_dispatch(out.scale),
        clean: Tensor::from_dispatch(out.clean),
        sums: Tensor::from_dispatch(out.sums),
        inputs: [
            Tensor::from_dispatch(out.factor),
            Tensor::from_dispatch(out.epsilon),
            Tensor::from_dispatch(out.lr),
        ],
        idx: Tensor::from_dispatch(out.idx),
    }
}

/// `[params | m1 | m2 | scale, clean, sums | k]` in one launch, `k` element `k_at` of `prev`
/// plus `k_add`.
pub(super) fn pack(
    params: Tensor<1>,
    m1: Tensor<1>,
    m2: Tensor<1>,
    scale: Tensor<1>,
    clean: Tensor<1>,
    sums: Tensor<1>,
    prev: &Tensor<1>,
    k_at: usize,
    k_add: f32,
) -> Tensor<1> {
    let out = <Dispatch as StateOps>::state_pack(
        params.into_dispatch(),
        m1.into_dispatch(),
        m2.into_dispatch(),
        scale.into_dispatch(),
        clean.into_dispatch(),
        sums.into_dispatch(),
        &prev.clone().into_dispatch(),
        k_at,
        k_add,
    );
    Tensor::from_dispatch(out.state)
}

mod code {
    use cubecl::prelude::*;

    use super::SUMS;

    /// One unit per parameter (and per sample index): its parameter and moments; unit 0 also
    /// the tail and the plan row's step inputs.
    #[cube(launch)]
    pub(super) fn unpack_kernel<F: Float, I: Numeric>(
        state: &Tensor<F>,
        idx: &Tensor<I>,
        factor: &Tensor<F>,
        epsilon: &Tensor<F>,
        lr: &Tensor<F>,
        params: &mut Tensor<F>,
        m1: &mut Tensor<F>,
        m2: &mut Tensor<F>,
        scale: &mut Tensor<F>,
        clean: &mut Tensor<F>,
        sums: &mut Tensor<F>,
        row_factor: &mut Tensor<F>,
        row_epsilon: &mut Tensor<F>,
        row_lr: &mut Tensor<F>,
        row_idx: &mut Tensor<I>,
        p: u32,
        with_row: u32,
        #[define(F, I)] _dtypes: [ElemType; 2],
    ) {
        let i = ABSOLUTE_POS;
        let p = p as usize;
        let tail = 3 * p;
        let b = row_idx.len();
        let row = usize::cast_from(state[tail + 2 + SUMS]);
        if i < p {
            params[i] = state[i];
            m1[i] = state[p + i];
            m2[i] = state[2 * p + i];
        }
        if with_row == 1u32 && i < b {
            row_idx[i] = idx[row * b + i];
        }
        if i == 0 {
            scale[0] = state[tail];
            clean[0] = state[tail + 1];
            for k in 0..SUMS {
                sums[k] = state[tail + 2 + k];
            }
            if with_row == 1u32 {
                row_factor[0] = factor[row];
                row_epsilon[0] = epsilon[row];
                row_lr[0] = lr[row];
            }
        }
    }

    /// One unit per parameter: its parameter and moments; unit 0 also the tail.
    #[cube(launch)]
    pub(super) fn pack_kernel<F: Float>(
        params: &Tensor<F>,
        m1: &Tensor<F>,
        m2: &Tensor<F>,
        scale: &Tensor<F>,
        clean: &Tensor<F>,
        sums: &Tensor<F>,
        prev: &Tensor<F>,
        state: &mut Tensor<F>,
        p: u32,
        k_at: u32,
        k_add: f32,
        #[define(F)] _dtype: ElemType,
    ) {
        let i = ABSOLUTE_POS;
        let p = p as usize;
        let tail = 3 * p;
        if i < p {
            state[i] = params[i];
            state[p + i] = m1[i];
            state[2 * p + i] = m2[i];
        }
        if i == 0 {
            state[tail] = scale[0];
            state[tail + 1] = clean[0];
            for k in 0..SUMS {
                state[tail + 2 + k] = sums[k];
            }
            state[tail + 2 + SUMS] = prev[k_at as usize] + F::cast_from(k_add);
        }
    }
}
