//! burn's and cubek's matmuls launched directly on a cubecl device for `super::matmul`: the
//! routines burn's autotune tries, the autotuned choice, the operands in the update's layouts
//! and what the device offers the routines.

use super::products::{MatmulCase, MatmulFeatures};
use crate::ppo::error::PpoError;
use burn::backend::ops::FloatTensorOps;
use burn::backend::{Backend, DispatchDevice};
use burn::tensor::Device;
use burn::tensor::{DType, TensorData};
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::matmul::{MatmulStrategy, init_matmul_output, matmul};
use burn_cubecl::tensor::CubeTensor;
use cubecl::client::Client;
use cubek::matmul::definition::{MatmulElems, MatmulGlobalElems};
use cubek::matmul::multi_level::Strategy;
use cubek::matmul::multi_level::components::tile::TileMatmulKind;
use cubek::matmul::multi_level::routines::TileSizeSelection;
use cubek::matmul::multi_level::routines::batch::double_buffering::DoubleBufferingArgs;
use cubek::matmul::multi_level::routines::batch::double_unit::DoubleUnitSelectionArgs;
use cubek::matmul::multi_level::routines::batch::ordered_double_buffering::OrderedSelectionArgs;
use cubek::matmul::multi_level::routines::batch::simple::SimpleArgs;
use cubek::matmul::multi_level::routines::batch::simple_unit::SimpleUnitSelectionArgs;
use cubek::matmul::multi_level::routines::gemm::GemmStrategy;
use cubek::matmul::routine::BlueprintStrategy;
use cubek::std::InputBinding;

pub(crate) use burn_cubecl::CubeDevice;

/// The cubecl device behind `device`, or why there is none.
pub(crate) fn cube_device(device: &Device) -> Result<CubeDevice, PpoError> {
    match device.clone().without_autodiff().as_dispatch() {
        DispatchDevice::Cube(d) => Ok(d.clone()),
        _ => Err(PpoError::Device(
            tradetune_device::DeviceError::Unavailable {
                name: if tradetune_device::is_cpu(device) {
                    "cpu".into()
                } else {
                    format!("{device:?}")
                },
                reason: "the matmul routines run on cubecl devices (wgpu); the CPU's products \
                     are measured by `bench train`'s probe"
                    .into(),
            },
        )),
    }
}

/// The routines burn 0.22.1's matmul autotune tries on a GPU (its CPU-only and TMA ones
/// left out: Vulkan has no tensor-memory accelerator), named as cubek names them.
pub(crate) fn routines() -> Vec<Strategy> {
    let mut all = vec![Strategy::Naive];
    for tile_size in [
        TileSizeSelection::MaxTileSize,
        TileSizeSelection::MinTileSize,
    ] {
        all.push(Strategy::SimpleUnit(BlueprintStrategy::Inferred(
            SimpleUnitSelectionArgs { tile_size },
        )));
        all.push(Strategy::DoubleUnit(BlueprintStrategy::Inferred(
            DoubleUnitSelectionArgs { tile_size },
        )));
    }
    all.push(Strategy::Gemm(BlueprintStrategy::Inferred(GemmStrategy {
        target_num_planes: None,
    })));
    all.push(Strategy::SimpleVecMat(BlueprintStrategy::Inferred(
        ().into(),
    )));
    all.push(Strategy::DoubleVecMat(BlueprintStrategy::Inferred(
        ().into(),
    )));
    all.push(Strategy::GemvUnitPerpendicular(
        BlueprintStrategy::Inferred(Default::default()),
    ));
    for (cmma, tile_matmul) in [(true, TileMatmulKind::Cmma), (false, TileMatmulKind::Mma)] {
        let simple = BlueprintStrategy::Inferred(SimpleArgs {
            multi_rows: false,
            tile_matmul,
        });
        let ordered = BlueprintStrategy::Inferred(OrderedSelectionArgs {
            partition_k: Some(2),
            row_count: Some(4),
            rows_per_plane: Some(2),
            tile_matmul,
        });
        let double = BlueprintStrategy::Inferred(DoubleBufferingArgs {
            specialized: false,
            tile_matmul,
        });
        if cmma {
            all.push(Strategy::SimpleCyclicCmma(simple));
            all.push(Strategy::OrderedDoubleCmma(ordered));
            all.push(Strategy::DoubleCyclicCmma(double));
            all.push(Strategy::SpecializedCyclicCmma(
                BlueprintStrategy::Inferred(().into()),
            ));
        } else {
            all.push(Strategy::SimpleCyclicMma(simple));
            all.push(Strategy::OrderedDoubleMma(ordered));
            all.push(Strategy::DoubleCyclicMma(double));
            all.push(Strategy::SpecializedCyclicMma(BlueprintStrategy::Inferred(
                ().into(),
            )));
        }
    }
    all
}

fn client(device: &CubeDevice) -> Client {
    device.client()
}

pub(crate) fn features(device: &CubeDevice) -> MatmulFeatures {
    use cubecl::ir::features::Plane;
    let client = client(device);
    let p = client.properties();
    let mma = |set: &std::collections::BTreeSet<cubecl::ir::features::MmaConfig>| {
        set.iter()
            .map(|c| {
                format!(
                    "{}×{}→{} {}×{}×{}",
                    c.a_type, c.b_type, c.cd_type, c.m, c.n, c.k
                )
            })
            .collect()
    };
    MatmulFeatures {
        runtime: client.name().to_string(),
        plane_size_min: p.hardware.plane_size_min,
        plane_size_max: p.hardware.plane_size_max,
        plane_ops: p.features.plane.contains(Plane::Ops),
        cmma: mma(&p.features.matmul.cmma),
        mma: mma(&p.features.matmul.mma),
        max_units_per_cube: p.hardware.max_units_per_cube,
        max_shared_memory_bytes: p.hardware.max_shared_memory_size,
    }
}

/// A `[rows, cols]` row-major tensor of `dtype` whose values are small and varied.
fn filled(rows: usize, cols: usize, salt: usize, dtype: DType, d: &CubeDevice) -> CubeTensor {
    let v: Vec<f32> = (0..rows * cols)
        .map(|i| (((i * 7 + salt) % 97) as f32 - 48.0) / 97.0)
        .collect();
    let data = TensorData::new(v, [rows, cols]).convert_dtype(dtype);
    CubeBackend::float_from_data(data, d)
}

/// The product's two sides, in the layouts the update reads them.
pub(crate) fn operands(
    case: &MatmulCase,
    dtype: DType,
    d: &CubeDevice,
) -> (CubeTensor, CubeTensor) {
    let lhs = if case.lhs_transposed {
        CubeBackend::float_transpose(filled(case.k, case.m, 1, dtype, d))
    } else {
        filled(case.m, case.k, 1, dtype, d)
    };
    let rhs = if case.rhs_transposed {
        CubeBackend::float_transpose(filled(case.n, case.k, 2, dtype, d))
    } else {
        filled(case.k, case.n, 2, dtype, d)
    };
    (lhs, rhs)
}

pub(crate) fn sync(d: &CubeDevice) -> Result<(), String> {
    CubeBackend::sync(d).map_err(|e| format!("{e:?}"))
}

pub(crate) fn read(t: CubeTensor) -> Result<Vec<f32>, String> {
    let data =
        cubecl::future::block_on(CubeBackend::float_into_data(t)).map_err(|e| format!("{e:?}"))?;
    data.convert_dtype(DType::F32)
        .try_into_vec::<f32>()
        .map_err(|e| format!("{e:?}"))
}

/// burn's autotuned product into `out`.
pub(crate) fn autotuned(
    lhs: &CubeTensor,
    rhs: &CubeTensor,
    out: &CubeTensor,
) -> Result<(), String> {
    let dtype = out.dtype;
    matmul(
        lhs.clone(),
        rhs.clone(),
        Some(out.clone()),
        MatmulStrategy::Autotune,
        dtype,
    )
    .map(|_| ())
    .map_err(|e| format!("{e:?}"))
}

/// One routine's product into `out`; an error where the routine cannot run it.
pub(crate) fn routine(
    strategy: &Strategy,
    lhs: &CubeTensor,
    rhs: &CubeTensor,
    out: &CubeTensor,
) -> Result<(), String> {
    let client = out.client.clone();
    let storage = |dtype| burn::backend::cubecl::dtype_to_storage_type(dtype);
    let mut dtypes = MatmulElems::from_globals(&MatmulGlobalElems {
        lhs: storage(lhs.dtype),
        rhs: storage(rhs.dtype),
        out: storage(out.dtype),
    });
    let strategy: cubek::matmul::strategy::Strategy = strategy.clone().into();
    // A routine that cannot serve the problem says so in its set-up; one that panics in
    // it (an unsupported feature found late) is reported the same way.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cubek::matmul::launch::launch_ref(
            &strategy,
            &client,
            InputBinding::new(lhs.clone().binding(), storage(lhs.dtype)),
            InputBinding::new(rhs.clone().binding(), storage(rhs.dtype)),
            out.clone().binding(),
            &mut dtypes,
        )
    }))
    .map_err(|panic| {
        super::panic_text(panic.as_ref()).unwrap_or_else(|| "the routine panicked".into())
    })?
    .map_err(|e| format!("{e:?}"))
}

pub(crate) fn output(lhs: &CubeTensor, rhs: &CubeTensor, dtype: DType) -> CubeTensor {
    init_matmul_output(lhs, rhs, dtype)
}
