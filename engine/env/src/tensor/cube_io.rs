//! Reads and writes of one element as f32, whatever the tensor's float dtype: the small
//! `#[cube]` helpers TradeTune's CubeCL kernels share (the env step's here, PPO's in
//! `tradetune_rl`), which compute in f32 and store in the run's dtype.

use cubecl::prelude::*;

/// Element `k` of `t`, as f32.
#[cube]
pub fn get<F: Float>(t: &Tensor<F>, k: usize) -> f32 {
    f32::cast_from(t[k])
}

/// Element `k` of a tensor being written, as f32.
#[cube]
pub fn cur<F: Float>(t: &mut Tensor<F>, k: usize) -> f32 {
    f32::cast_from(t[k])
}

/// Writes `v` into element `k` of `t`, in `t`'s dtype.
#[cube]
pub fn put<F: Float>(t: &mut Tensor<F>, k: usize, v: f32) {
    t[k] = F::cast_from(v);
}
