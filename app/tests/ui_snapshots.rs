//! Pictures of each panel (egui_kittest snapshots rendered through wgpu; on machines without a
//! GPU, Mesa's lavapipe). They are committed under `app/tests/snapshots/` and shown in the
//! README; a change in how a panel draws fails here until the images are renewed with
//! `UPDATE_SNAPSHOTS=true cargo test --workspace --test app -- ui_snapshots`
//! (this file and `ui_snapshots_studies`, whose helpers are in `common/snapshots.rs`).
//!
//! Everything machine-specific is fixed (the device list) so the pictures are the same on
//! every machine of this class.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::snapshots::*;
use crate::common::ui;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::draft::Draft;
use tradetune_app::ui::panels::compare::Action as CompareAction;
use tradetune_app::ui::panels::run::{LiveTrial, StudyEnd, WorkerView};
use tradetune_app::ui::presets::UserPreset;
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_app::ui::tasks::BacktestResult;
use tradetune_engine::eval::metrics::Curve;
use tradetune_engine::eval::{EvalReport, Metrics, Objective};
use tradetune_engine::storage::TrialState;
use tradetune_engine::telemetry::ring::PlotPoint;

#[test]
fn hardware_and_presets() {
    let mut wide = Draft::default();
    wide.ppo.policy.net_arch.pi = vec![1024, 512];
    wide.ppo.policy.net_arch.vf = vec![1024, 512];
    let settings = Settings {
        user_presets: vec![UserPreset {
            name: "my wide nets".into(),
            draft: wide,
        }],
        ..Settings::default()
    };
    let mut h = harness(settings, None);
    step_until(&mut h, "the bundled data", data_loaded);
    snapshot(&mut h, "hardware");
}

#[test]
fn configure_with_a_flagged_field() {
    let mut draft = Draft::default();
    draft.ppo.batch_size = 100_000;
    for (name, spec) in [
        (
            "ppo.learning_rate",
            "{ low = 1e-5, high = 1e-3, log = true }",
        ),
        ("ppo.n_epochs", "{ low = 4, high = 16, step = 4 }"),
        ("ppo.precision", "{ choices = [\"bf16\", \"f16\"] }"),
    ] {
        draft.search.push(tradetune_app::ui::draft::SearchEntry {
            name: name.into(),
            spec: tradetune_engine::study::file::SearchSpec::parse(spec).unwrap(),
        });
    }
    let settings = Settings {
        tab: Tab::Configure,
        draft,
        ..Settings::default()
    };
    let mut h = harness(settings, None);
    step_until(&mut h, "the bundled data", data_loaded);
    snapshot(&mut h, "configure");
}

#[test]
fn run_with_live_charts() {
    let settings = Settings {
        tab: Tab::Run,
        ..Settings::default()
    };
    let mut h = harness(settings, None);
    step_until(&mut h, "the bundled data", data_loaded);
    // A study's figures, fixed so the picture is the same everywhere (the live path is
    // tested in ui.rs with a real study).
    let run = &mut h.state_mut().panels.run;
    run.study = "cpu".into();
    run.db = Some(PathBuf::from("studies.db"));
    run.n_trials = 6;
    run.started = None;
    run.workers = (0..2)
        .map(|w| WorkerView {
            worker: w,
            device: if w == 0 { "cpu".into() } else { "cpu#1".into() },
            backend: "flex".into(),
            finished: 3,
            done: true,
            ..WorkerView::default()
        })
        .collect();
    let states = [
        TrialState::Complete,
        TrialState::Complete,
        TrialState::Pruned,
        TrialState::Complete,
        TrialState::Fail,
        TrialState::Complete,
    ];
    run.trials = (0..6u64)
        .map(|n| LiveTrial {
            number: n,
            worker: (n % 2) as usize,
            device: if n % 2 == 0 {
                "cpu".into()
            } else {
                "cpu#1".into()
            },
            state: states[n as usize],
            value: (states[n as usize] != TrialState::Fail).then_some(0.1 * n as f64 - 0.2),
            span: (40.0 * (n / 2) as f64, Some(40.0 * (n / 2) as f64 + 35.0)),
            reason: (states[n as usize] == TrialState::Fail)
                .then(|| "ppo.batch_size = 4096: must be in 1..=n_steps × n_envs = 2048".into()),
            params: format!("ppo.learning_rate={:.6}", 1e-4 * (n + 1) as f64),
            curve: (1..=8)
                .map(|u| PlotPoint {
                    t: u as f64,
                    v: 0.05 * n as f64 * (1.0 - (-(u as f64) / 3.0).exp()),
                })
                .collect(),
            metrics: snapshot_metrics(n),
            update: 8,
            env_steps: 8 * 2048,
        })
        .collect();
    run.selected = Some(5);
    run.end = Some(StudyEnd {
        counts: [4, 1, 1],
        stopped: false,
        best: Some((5, 0.3)),
    });
    h.run_steps(4);
    snapshot(&mut h, "run");
}

/// Made-up training metrics of trial `n` over 8 updates of 2,048 samples, in the shapes a
/// run has (losses falling, returns rising, the update phase dominating).
fn snapshot_metrics(n: u64) -> BTreeMap<String, Vec<PlotPoint>> {
    let curve = |f: &dyn Fn(f64) -> f64| -> Vec<PlotPoint> {
        (1..=8)
            .map(|u| PlotPoint {
                t: (u * 2048) as f64,
                v: f(u as f64),
            })
            .collect()
    };
    let k = n as f64;
    let mut m = BTreeMap::new();
    let mut put = |name: &str, f: &dyn Fn(f64) -> f64| {
        m.insert(name.to_owned(), curve(f));
    };
    put("charts/SPS", &|_| 2400.0);
    put("losses/policy_loss", &|u| -0.01 - 0.002 * u);
    put("losses/value_loss", &|u| 0.8 * (-u / 4.0).exp());
    put("losses/entropy", &|u| 9.9 - 0.05 * u);
    put("losses/approx_kl", &|_| 0.008);
    put("losses/clipfrac", &|_| 0.06);
    put("rollout/ep_return_mean", &|u| 0.004 * u * (1.0 + k / 5.0));
    put("rollout/ep_equal_weight_return_mean", &|_| 0.012);
    put("time/env_step_s", &|_| 0.10);
    put("time/inference_s", &|_| 0.08);
    put("time/buffer_s", &|_| 0.01);
    put("time/advantages_s", &|_| 0.01);
    put("time/update_s", &|_| 0.62);
    put("time/evaluation_s", &|_| 0.05);
    m
}

#[test]
fn compare_two_parallel_studies() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = opened_reference_db(dir.path(), Tab::Compare);
    h.state_mut().panels.compare.a = "x_aggressive_1".into();
    h.state_mut().panels.compare.b = "x_aggressive_2".into();
    h.state_mut().handle(CompareAction::Compare(
        "x_aggressive_1".into(),
        "x_aggressive_2".into(),
    ));
    h.run_steps(2);
    step_until(&mut h, "the comparison", |a| !a.panels.compare.loading);
    // The same name on every machine, for the database and the comparison made of it.
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("optuna-reference.db");
    }
    h.state_mut().panels.compare.of = Some(PathBuf::from("optuna-reference.db"));
    h.state_mut().cx.notices.clear();
    h.run_steps(4);
    snapshot(&mut h, "compare");
}

#[test]
fn backtest_of_a_checkpoint() {
    let settings = Settings {
        tab: Tab::Backtest,
        ..Settings::default()
    };
    let mut h = harness(settings, None);
    step_until(&mut h, "the bundled data", data_loaded);
    // A report of made-up curves over a year of daily bars, so the picture is the same
    // everywhere (the real backtest of a trained checkpoint is tested in ui.rs); the table and
    // the curves go through the panel's own conversion.
    let bars = 252;
    let start = 1_330_560_000; // 2012-03-01
    let timestamps: Vec<i64> = (0..bars).map(|i| start + i * 86_400).collect();
    // Daily returns of `drift` plus noise of size `vol` from a fixed integer generator (an LCG,
    // Knuth's MMIX constants), summed to an equity curve: the same numbers on every machine.
    let equity = |seed: u64, drift: f64, vol: f64| -> Vec<f64> {
        let mut state = seed;
        let mut uniform = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut value = 1e6;
        (0..bars)
            .map(|i| {
                if i > 0 {
                    // Four uniforms: roughly normal, mean 0, standard deviation 1.
                    let z = ((0..4).map(|_| uniform()).sum::<f64>() - 2.0) * 3f64.sqrt();
                    value *= 1.0 + drift + vol * z;
                }
                value
            })
            .collect()
    };
    let agent = equity(7, 0.0008, 0.011);
    let equal_weight = equity(11, 0.0004, 0.013);
    let metrics = |e: &[f64]| {
        Metrics::from_curve(Curve {
            equity: e,
            traded: &[],
            fees: &[],
            periods_per_year: 252.0,
        })
        .unwrap()
    };
    let (a, e) = (metrics(&agent), metrics(&equal_weight));
    let report = EvalReport {
        split: "test".into(),
        bars: bars as usize,
        periods_per_year: 252.0,
        objective_name: Objective::SharpeExcess,
        objective: a.sharpe - e.sharpe,
        agent: a,
        equal_weight: e,
        agent_equity: agent,
        equal_weight_equity: equal_weight,
        timestamps,
    };
    let checkpoint = PathBuf::from("checkpoints/cpu/trial-3");
    let view = &mut h.state_mut().panels.backtest;
    view.checkpoint = Some(checkpoint.clone());
    view.result = Some(BacktestResult::of(
        format!(
            "{} (51200 samples) on bundled sample: test split, {bars} bars",
            checkpoint.display()
        ),
        &report,
    ));
    h.state_mut().cx.notices.clear();
    h.run_steps(4);
    snapshot(&mut h, "backtest");
}

/// A made-up RTX 4080 over a minute of training: utilisation swinging, memory growing, the
/// card warming up and held down by its power cap in the last quarter; three processes.
struct TrainingCard {
    tick: u32,
}

impl tradetune_engine::telemetry::Source for TrainingCard {
    fn name(&self) -> String {
        "nvidia gpu0".into()
    }
    fn read(&mut self) -> tradetune_engine::telemetry::SourceReading {
        use tradetune_engine::telemetry::{
            DeviceReading, DeviceTag, GpuProcess, GpuProcessKind, Metric, ThrottleReasons,
        };
        let i = f64::from(self.tick);
        self.tick += 1;
        let util = 72.0 + 22.0 * (i / 4.0).sin();
        let capped = i >= 45.0;
        let throttle = if capped {
            ThrottleReasons::SW_POWER_CAP
        } else {
            0
        };
        let process = |pid, name: &str, mib: u64, kind| GpuProcess {
            pid,
            name: Some(name.into()),
            used_bytes: Some(mib << 20),
            kind,
        };
        tradetune_engine::telemetry::SourceReading {
            readings: vec![DeviceReading {
                device: DeviceTag::Gpu(0),
                values: vec![
                    (Metric::UtilPct, util),
                    (Metric::MemUtilPct, 0.45 * util),
                    (Metric::MemUsedMib, 4200.0 + 90.0 * i),
                    (Metric::MemTotalMib, 16_376.0),
                    (Metric::TempC, 48.0 + 30.0 * (1.0 - (-i / 20.0).exp())),
                    (
                        Metric::PowerW,
                        if capped { 318.0 } else { 120.0 + 2.0 * util },
                    ),
                    (Metric::PowerLimitW, 320.0),
                    (Metric::SmClockMhz, if capped { 2490.0 } else { 2745.0 }),
                    (Metric::SmClockMaxMhz, 3105.0),
                    (Metric::MemClockMhz, 11_201.0),
                    (Metric::MemClockMaxMhz, 11_201.0),
                    (Metric::FanPct, 40.0 + 0.5 * i),
                    (Metric::ThrottleMask, f64::from(throttle)),
                ],
            }],
            processes: vec![(
                DeviceTag::Gpu(0),
                vec![
                    process(4711, "tradetune", 3 << 10, GpuProcessKind::Graphics),
                    process(4712, "python3", 1 << 10, GpuProcessKind::Compute),
                    process(1503, "Xorg", 212, GpuProcessKind::Graphics),
                ],
            )],
            ..Default::default()
        }
    }
}

/// The device view: a card sampled a minute long through the app's sampler at fixed times.
#[test]
fn hardware_device_view_with_fake_samples() {
    use tradetune_engine::telemetry::{GpuInfo, GpuVendor, SamplerConfig, SamplerCore, Source};

    let source: Box<dyn Source> = Box::new(TrainingCard { tick: 0 });
    let mut core = SamplerCore::new(SamplerConfig::default(), vec![source], None).unwrap();
    for i in 0..60 {
        let at = chrono::DateTime::from_timestamp(1_795_591_870 + i, 0).unwrap();
        core.tick(at, Instant::now() + Duration::from_secs(5));
    }
    let settings = Settings {
        tab: Tab::Hardware,
        ..Settings::default()
    };
    let mut hardware = app(settings, None);
    hardware.cx.gpus = vec![GpuInfo {
        vendor: GpuVendor::Nvidia,
        name: "NVIDIA GeForce RTX 4080".into(),
        pci_bus_id: "0000:01:00.0".parse().ok(),
        uuid: None,
        mem_total_bytes: Some(16_376 << 20),
        driver: Some("NVIDIA 560.35.03".into()),
    }];
    hardware.cx.telemetry = Some(core.handle());
    let mut h = ui::harness(hardware, [1280.0, 1500.0]);
    step_until(&mut h, "the bundled data", data_loaded);
    h.state_mut().cx.notices.clear();
    h.run_steps(4);
    h.get_by_label("held down by power cap");
    h.get_by_label("Xorg");
    h.get_by_label("3 other processes hold 4.2 GiB of this card's memory");
    snapshot(&mut h, "hardware_devices");
}
