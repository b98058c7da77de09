//! The tensor environment agrees with the CPU environment on the same seeds and actions, on the
//! flex CPU device (and on the default wgpu device when built with `--features wgpu`).

use crate::common;

use burn::tensor::Device;
use proptest::prelude::*;
use tradetune_engine::env::{CpuVecEnv, EnvConfig, RewardKind, StartMode, TensorVecEnv, VecEnv};

/// |a − b| ≤ 1e-5·max(|a|, |b|) + abs.
fn agree(a: f32, b: f32, abs: f32) -> bool {
    (a - b).abs() <= 1e-5 * a.abs().max(b.abs()) + abs
}

fn compare(
    device: &Device,
    cfg: EnvConfig,
    m: usize,
    f: usize,
    seed: u64,
    steps: usize,
    actions: &[f32],
) -> Result<(), TestCaseError> {
    let data = common::random_walk_dataset(90, m, f, seed);
    let n = cfg.n_envs;
    let mut cpu = CpuVecEnv::new(cfg.clone(), data.clone(), 4..90).unwrap();
    let mut ten = TensorVecEnv::new(cfg.clone(), &data, 4..90, device).unwrap();
    // On wgpu a step is the CubeCL kernel; on flex, the tensor program.
    prop_assert_eq!(ten.steps_as_kernel(), *device != Device::flex());
    let od = cpu.obs_dim();
    prop_assert_eq!(od, ten.obs_dim());
    let (mut o1, mut o2) = (vec![0.0; n * od], vec![0.0; n * od]);
    let (mut r1, mut r2) = (vec![0.0; n], vec![0.0; n]);
    let (mut d1, mut d2) = (vec![0.0; n], vec![0.0; n]);
    cpu.reset(&mut o1);
    ten.reset(&mut o2);
    prop_assert_eq!(&o1, &o2);
    let init = cfg.initial_cash;
    for s in 0..steps {
        let a: Vec<f32> = (0..n * m)
            .map(|k| actions[(s * n * m + k) % actions.len()])
            .collect();
        cpu.step(&a, &mut o1, &mut r1, &mut d1);
        ten.step(&a, &mut o2, &mut r2, &mut d2);
        prop_assert_eq!(&d1, &d2, "done flags differ at step {}", s);
        for i in 0..n {
            // Rewards are differences of values ~initial_cash: compare at the value's precision.
            prop_assert!(
                agree(r1[i], r2[i], 1e-5 * cfg.reward_scale.abs() * 10.0),
                "step {s} env {i}: reward cpu {} tensor {}",
                r1[i],
                r2[i]
            );
        }
        for (k, (x, y)) in o1.iter().zip(&o2).enumerate() {
            prop_assert!(agree(*x, *y, 1e-5), "step {s} obs[{k}]: cpu {x} tensor {y}");
        }
        let cash: Vec<f32> = ten.cash().try_into_vec_as::<f32>().unwrap();
        let hold: Vec<f32> = ten.holdings().try_into_vec_as::<f32>().unwrap();
        for i in 0..n {
            prop_assert!(
                agree(cpu.cash(i), cash[i], 1e-5 * init),
                "cash {} vs {}",
                cpu.cash(i),
                cash[i]
            );
            for (a, h) in cpu.holdings(i).iter().enumerate() {
                // Holdings are f32 state reached by a different operation order (per-asset loop
                // vs whole-tensor ops). Cash near $1M has an f32 resolution of ~6 cents, so a small
                // position bought from a residual cash amount differs by that much in value: compare
                // holdings in money, to 1e-6 of the account ($1 on $1M) plus 1e-5 relative.
                let price = data.prices[[cpu.bar(i), a]];
                let (h2, diff_value) = (hold[i * m + a], (h - hold[i * m + a]).abs() * price);
                prop_assert!(
                    diff_value <= 1e-6 * init + 1e-5 * h.abs() * price,
                    "env {i} asset {a}: holdings cpu {h} tensor {h2} (price {price})"
                );
            }
            if d1[i] == 1.0 {
                let (c, t) = (cpu.episode_stats(i).unwrap(), ten.episode_stats(i).unwrap());
                prop_assert!(agree(c.total_return, t.total_return, 1e-5));
                prop_assert!(agree(c.fees, t.fees, 1e-5 * init));
            }
        }
    }
    Ok(())
}

prop_compose! {
    fn arb_config()(
        n_envs in 1usize..6,
        fees in 0.0f32..0.01,
        min_order in 0.0f32..20_000.0,
        max_buy_fraction in 0.05f32..1.0,
        action_scale in 1_000.0f32..400_000.0,
        trailing in prop_oneof![Just(0.0f32), 0.01f32..0.2],
        cooldown in 0usize..5,
        lookback in 1usize..3,
        reward in prop_oneof![Just(RewardKind::ExcessVsEqualWeight), Just(RewardKind::PortfolioChange), Just(RewardKind::LogReturn)],
        episode_bars in prop_oneof![Just(0usize), 3usize..20],
        start in prop_oneof![Just(StartMode::Random), Just(StartMode::Strided)],
        seed in 0u64..1000,
        compat in proptest::bool::weighted(0.2),
    ) -> EnvConfig {
        EnvConfig::new()
            .with_n_envs(n_envs)
            .with_buy_fee(fees)
            .with_sell_fee(fees * 0.7)
            .with_min_order_value(min_order)
            .with_max_buy_fraction(max_buy_fraction)
            .with_action_scale(action_scale)
            .with_trailing_stop_pct(trailing)
            .with_cooldown_bars(cooldown)
            .with_cooldown_sell_fraction(0.3)
            .with_lookback(lookback)
            .with_reward(reward)
            .with_episode_bars(episode_bars)
            .with_start(start)
            .with_seed(seed)
            .with_compat_finrl_crypto(compat)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn tensor_env_on_flex_matches_the_cpu_env(
        cfg in arb_config(),
        m in 1usize..5,
        f in 1usize..3,
        seed in 0u64..50,
        actions in prop::collection::vec(prop_oneof![9 => -1.3f32..1.3, 1 => Just(f32::NAN)], 1..200),
    ) {
        compare(&Device::flex(), cfg, m, f, seed, 40, &actions)?;
    }
}

/// Mesa's software Vulkan (`mesa-vulkan-drivers`) or a real GPU: the same semantics on wgpu.
#[cfg(feature = "wgpu")]
#[test]
fn tensor_env_on_wgpu_matches_the_cpu_env() {
    let Some(device) = common::wgpu_device("tensor_env_on_wgpu_matches_the_cpu_env") else {
        return;
    };
    let cfg = EnvConfig::new()
        .with_n_envs(4)
        .with_episode_bars(10)
        .with_trailing_stop_pct(0.05)
        .with_cooldown_bars(3);
    let actions: Vec<f32> = (0..997)
        .map(|i| ((i * 37 % 200) as f32 / 100.0) - 1.0)
        .collect();
    compare(&device, cfg, 3, 2, 1, 30, &actions).unwrap();
}

/// The kernel against the CPU env over the whole space of rules (compat mode, every reward,
/// minimum orders, budgets), as the flex test checks the tensor program.
#[cfg(feature = "wgpu")]
#[test]
fn the_step_kernel_matches_the_cpu_env_over_random_configs() {
    let Some(device) =
        common::wgpu_device("the_step_kernel_matches_the_cpu_env_over_random_configs")
    else {
        return;
    };
    let config = ProptestConfig {
        cases: 16,
        ..ProptestConfig::default()
    };
    let actions =
        prop::collection::vec(prop_oneof![9 => -1.3f32..1.3, 1 => Just(f32::NAN)], 1..200);
    proptest::test_runner::TestRunner::new(config)
        .run(
            &(arb_config(), 1usize..5, 1usize..3, 0u64..50, actions),
            |(cfg, m, f, seed, actions)| compare(&device, cfg, m, f, seed, 40, &actions),
        )
        .unwrap();
}

/// The finished episodes the device env logs on the device (the kernel writes each step's row
/// into the log in place on wgpu; the tensor program's row is copied in on flex), read in two
/// takes of a rollout each, past the log's first 64 rows: the CPU env's episodes, in step order.
#[test]
fn the_device_episode_log_holds_the_cpu_envs_episodes() {
    let mut devices = vec![Device::flex()];
    devices.extend(common::wgpu_device(
        "the_device_episode_log_holds_the_cpu_envs_episodes",
    ));
    let cfg = EnvConfig::new()
        .with_n_envs(3)
        .with_episode_bars(9)
        .with_trailing_stop_pct(0.05);
    let (m, n) = (2, cfg.n_envs);
    let data = common::random_walk_dataset(90, m, 1, 7);
    for device in devices {
        let mut cpu = CpuVecEnv::new(cfg.clone(), data.clone(), 4..90).unwrap();
        let mut ten = TensorVecEnv::new(cfg.clone(), &data, 4..90, &device).unwrap();
        let (mut o, mut r, mut d) = (vec![0.0; n * cpu.obs_dim()], vec![0.0; n], vec![0.0; n]);
        cpu.reset(&mut o);
        ten.reset_tensors();
        for take in [70, 80] {
            let mut expected = Vec::new();
            for s in 0..take {
                let a: Vec<f32> = (0..n * m)
                    .map(|k| (((s * 7 + k * 3) % 11) as f32 / 5.0) - 1.0)
                    .collect();
                cpu.step(&a, &mut o, &mut r, &mut d);
                expected.extend(
                    (0..n)
                        .filter(|&i| d[i] == 1.0)
                        .map(|i| cpu.episode_stats(i)),
                );
                let actions = burn::tensor::Tensor::<2>::from_data(
                    burn::tensor::TensorData::new(a, [n, m]),
                    &device,
                );
                ten.step_tensors(actions);
                ten.log_episodes();
            }
            let log = ten.take_episode_log();
            let host: Vec<f32> = log.values.clone().try_into_vec_as().unwrap();
            let got = log.decode(&host).unwrap();
            assert!(expected.len() > 10, "{} episodes", expected.len());
            assert_eq!(
                got.len(),
                expected.len(),
                "{device:?}, take of {take} steps"
            );
            for (g, e) in got.iter().zip(&expected) {
                let e = e.expect("a finished episode has statistics");
                assert_eq!(g.length, e.length, "{device:?}");
                assert!(agree(g.total_return, e.total_return, 1e-5), "{g:?} {e:?}");
                assert!(
                    agree(g.fees, e.fees, 1e-5 * cfg.initial_cash),
                    "{g:?} {e:?}"
                );
                assert!(agree(g.reward_sum, e.reward_sum, 1e-4), "{g:?} {e:?}");
            }
        }
    }
}

/// Observations asked for in f16 (`set_obs_dtype`, an f16 policy's evaluation) where a step is
/// the tensor program (flex): reset's and each step's are f16, the f32 ones rounded, and the
/// states stay those of an env left in f32. (On wgpu the kernel writes them: `eval_device.rs`.)
#[test]
fn observations_asked_in_f16_are_the_f32_ones_rounded_on_flex() {
    use burn::tensor::{FloatDType, Tensor, TensorData};
    let device = Device::flex();
    let cfg = EnvConfig::new().with_n_envs(2).with_episode_bars(6);
    let (m, n) = (2, cfg.n_envs);
    let data = common::random_walk_dataset(40, m, 1, 3);
    let mut in_f32 = TensorVecEnv::new(cfg.clone(), &data, 4..40, &device).unwrap();
    let mut in_f16 = TensorVecEnv::new(cfg, &data, 4..40, &device).unwrap();
    in_f16.set_obs_dtype(FloatDType::F16);
    let rounded = |t: Tensor<2>| -> Vec<f32> {
        t.cast(FloatDType::F16)
            .cast(FloatDType::F32)
            .into_data()
            .try_to_vec::<f32>()
            .unwrap()
    };
    let read = |t: Tensor<2>| -> Vec<f32> {
        assert_eq!(t.dtype(), FloatDType::F16.into());
        t.cast(FloatDType::F32)
            .into_data()
            .try_to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(
        read(in_f16.reset_tensors()),
        rounded(in_f32.reset_tensors())
    );
    for s in 0..10 {
        let a: Vec<f32> = (0..n * m)
            .map(|k| ((s + k) % 5) as f32 / 2.0 - 1.0)
            .collect();
        let actions = || Tensor::<2>::from_data(TensorData::new(a.clone(), [n, m]), &device);
        let (o16, o32) = (
            in_f16.step_tensors(actions()),
            in_f32.step_tensors(actions()),
        );
        assert_eq!(read(o16.obs), rounded(o32.obs), "step {s}");
        let host = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(host(o16.reward), host(o32.reward), "step {s}");
    }
}

/// The tensor program's equal-weight units are the CPU env's bit for bit, at the reset and at
/// every episode's restart: `initial_cash / M` divided by each price, as the CPU env and the
/// step kernel compute them (the cash times the price's reciprocal is one ulp off for many
/// prices, which moved the equal-weight return and the `ExcessVsEqualWeight` reward).
#[test]
fn the_equal_weight_units_are_the_cpu_envs_bit_for_bit() {
    use burn::tensor::Tensor;
    let (t, m) = (40, 24);
    // Prices spread over six decades, irregular in their last bits.
    let prices = ndarray::Array2::from_shape_fn((t, m), |(bar, k)| {
        10f32.powf(k as f32 / 4.0 - 2.0) * (1.0 + 0.137 * ((bar * 7 + k * 3) % 11) as f32)
    });
    let data = common::dataset_from_prices(prices, 1, 5);
    let cfg = EnvConfig::new()
        .with_n_envs(3)
        .with_episode_bars(4)
        .with_start(StartMode::Strided)
        .with_initial_cash(1_234_567.0);
    let n = cfg.n_envs;
    let device = Device::flex();
    let mut cpu = CpuVecEnv::new(cfg.clone(), data.clone(), 0..t).unwrap();
    let mut ten = TensorVecEnv::new(cfg, &data, 0..t, &device).unwrap();
    assert!(!ten.steps_as_kernel(), "flex steps the tensor program");
    let mut obs = vec![0.0; n * cpu.obs_dim()];
    let (mut r, mut d) = (vec![0.0; n], vec![0.0; n]);
    cpu.reset(&mut obs);
    ten.reset_tensors();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    for s in 0..10 {
        let units: Vec<f32> = ten.equal_weight_units().try_into_vec_as::<f32>().unwrap();
        for i in 0..n {
            assert_eq!(
                bits(&units[i * m..(i + 1) * m]),
                bits(&cpu.equal_weight_units(i)),
                "step {s} env {i}: tensor {:?} cpu {:?}",
                &units[i * m..(i + 1) * m],
                cpu.equal_weight_units(i)
            );
        }
        let a = vec![0.0f32; n * m];
        cpu.step(&a, &mut obs, &mut r, &mut d);
        ten.step_tensors(Tensor::zeros([n, m], &device));
    }
}

/// A reset leaves no fees of the step before it: `last_step_fees` and the state log's first
/// row read 0, as the CPU env's `last_step_fees` after its reset.
#[test]
fn a_reset_forgets_the_last_steps_fees() {
    use burn::tensor::Tensor;
    let device = Device::flex();
    let cfg = EnvConfig::new().with_n_envs(2).with_episode_bars(6);
    let (m, n) = (3, cfg.n_envs);
    let data = common::random_walk_dataset(40, m, 1, 9);
    let mut cpu = CpuVecEnv::new(cfg.clone(), data.clone(), 4..40).unwrap();
    let mut ten = TensorVecEnv::new(cfg, &data, 4..40, &device).unwrap();
    let mut obs = vec![0.0; n * cpu.obs_dim()];
    let (mut r, mut d) = (vec![0.0; n], vec![0.0; n]);
    let buy = vec![0.5f32; n * m];
    cpu.step(&buy, &mut obs, &mut r, &mut d);
    ten.step_tensors(Tensor::full([n, m], 0.5, &device));
    let fees = |ten: &TensorVecEnv| ten.last_step_fees().try_into_vec_as::<f32>().unwrap();
    assert!(fees(&ten).iter().all(|&f| f > 0.0), "{:?}", fees(&ten));
    assert!(cpu.last_step_fees(0) > 0.0);
    cpu.reset(&mut obs);
    ten.reset_tensors();
    let cpu_fees: Vec<f32> = (0..n).map(|i| cpu.last_step_fees(i)).collect();
    assert_eq!(cpu_fees, vec![0.0; n]);
    assert_eq!(fees(&ten), cpu_fees);
    let log = ten.state_log(2);
    let host = log.values().try_into_vec_as::<f32>().unwrap();
    let states = log.decode(&host).unwrap();
    assert_eq!(states[0].fees, 0.0, "{:?}", states[0]);
}
