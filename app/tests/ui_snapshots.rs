//! Pictures of each panel (egui_kittest snapshots rendered through wgpu; on machines without a
//! GPU, Mesa's lavapipe). They are committed under `app/tests/snapshots/` and shown in the
//! README; a change in how a panel draws fails here until the images are renewed with
//! `UPDATE_SNAPSHOTS=true cargo test --workspace --test app -- ui_snapshots::`.
//!
//! Everything machine-specific is fixed (the device list) so the pictures are the same on
//! every machine of this class.

use egui_kittest::kittest::Queryable;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, ui};
use egui_kittest::{Harness, SnapshotError};
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::context::DataState;
use tradetune_app::ui::draft::Draft;
use tradetune_app::ui::panels::compare::Action as CompareAction;
use tradetune_app::ui::panels::run::{LiveTrial, StudyEnd, WorkerView};
use tradetune_app::ui::panels::studies::Action as StudyAction;
use tradetune_app::ui::panels::studies::PlotTab;
use tradetune_app::ui::presets::UserPreset;
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_app::ui::tasks::BacktestResult;
use tradetune_engine::device::DeviceInfo;
use tradetune_engine::device::precision::Precision;
use tradetune_engine::eval::metrics::Curve;
use tradetune_engine::eval::{EvalReport, Metrics, Objective};
use tradetune_engine::storage::TrialState;
use tradetune_engine::telemetry::ring::PlotPoint;

/// The Vulkan adapter of an RTX 4080, as wgpu describes it.
fn rtx4080() -> tradetune_engine::device::adapters::Adapter {
    tradetune_engine::device::adapters::Adapter {
        name: "NVIDIA GeForce RTX 4080".into(),
        kind: tradetune_engine::device::adapters::AdapterKind::DiscreteGpu,
        index: 0,
        api: "Vulkan".into(),
        driver: "NVIDIA 560.35.03".into(),
        vendor: 0x10de,
        device: 0x2704,
        pci_bus_id: "0000:01:00.0".into(),
        shader_f16: true,
        memory_bytes: Some(16 << 30),
    }
}

fn devices() -> Vec<DeviceInfo> {
    vec![
        DeviceInfo {
            name: "cpu".into(),
            backend: "flex".into(),
            available: true,
            detail: "burn-flex on 16 threads (SIMD, rayon)".into(),
            memory_bytes: Some(32 << 30),
            precisions: vec![Precision::F32, Precision::Bf16, Precision::F16],
            reports_pool_usage: false,
            adapter: None,
        },
        DeviceInfo {
            name: "wgpu".into(),
            backend: "wgpu".into(),
            available: true,
            detail: "default adapter, wgpu:0: NVIDIA GeForce RTX 4080 (discrete GPU, Vulkan)"
                .into(),
            memory_bytes: Some(16 << 30),
            precisions: vec![Precision::F32, Precision::F16],
            reports_pool_usage: true,
            adapter: Some(rtx4080()),
        },
        DeviceInfo {
            name: "wgpu:0".into(),
            backend: "wgpu".into(),
            available: true,
            detail: "NVIDIA GeForce RTX 4080 (discrete GPU, Vulkan)".into(),
            memory_bytes: Some(16 << 30),
            precisions: vec![Precision::F32, Precision::F16],
            reports_pool_usage: true,
            adapter: Some(rtx4080()),
        },
    ]
}

/// The app over [`devices`], the database dialog answered with `db`.
fn app(settings: Settings, db: Option<PathBuf>) -> TradeTuneApp {
    TradeTuneApp::new(settings, Arc::new(ui::OpenThis(db)), devices())
}

fn harness(settings: Settings, db: Option<PathBuf>) -> Harness<'static, TradeTuneApp> {
    ui::harness(app(settings, db), [1280.0, 900.0])
}

/// [`ui::step_until`] and one frame more: the pictures are taken after four settling frames.
fn step_until(h: &mut Harness<'_, TradeTuneApp>, what: &str, done: impl Fn(&TradeTuneApp) -> bool) {
    ui::step_until(h, what, done);
    h.run_steps(1);
}

fn data_loaded(app: &TradeTuneApp) -> bool {
    matches!(app.cx.data, DataState::Ready(_) | DataState::Failed(_))
}

/// Takes the snapshot; where no wgpu adapter exists (no GPU and no Mesa lavapipe) says so and
/// skips, unless `TRADETUNE_REQUIRE_GUI=1` (CI installs mesa-vulkan-drivers and sets it).
fn snapshot(h: &mut Harness<'_, TradeTuneApp>, name: &str) {
    match h.try_snapshot(name) {
        Ok(()) => {}
        Err(SnapshotError::RenderError { err }) => {
            let required = std::env::var("TRADETUNE_REQUIRE_GUI").is_ok_and(|v| v == "1");
            assert!(!required, "no renderer for the {name} snapshot: {err}");
            eprintln!(
                "skipped the {name} snapshot: no wgpu adapter ({err}); apt install mesa-vulkan-drivers"
            );
        }
        Err(e) => panic!("{e}"),
    }
}

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

/// A harness on `tab` with a copy (in `dir`) of the Optuna reference database open.
fn opened_reference_db(dir: &Path, tab: Tab) -> Harness<'static, TradeTuneApp> {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/testdata/optuna-reference.db");
    let db = dir.join("optuna-reference.db");
    std::fs::copy(&src, &db).unwrap();
    let settings = Settings {
        tab,
        ..Settings::default()
    };
    let mut h = harness(settings, Some(db.clone()));
    h.state_mut().handle(StudyAction::OpenDatabase(db));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h
}

#[test]
fn studies_of_the_optuna_reference_database() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = opened_reference_db(dir.path(), Tab::Studies);
    let group = h
        .state()
        .panels
        .studies
        .groups
        .iter()
        .find(|g| g.members.len() > 1)
        .map(|g| g.name.clone())
        .expect("an aggregated group");
    h.state_mut().handle(StudyAction::SelectStudy(group));
    step_until(&mut h, "the trials", |a| {
        !a.panels.studies.table.rows.is_empty()
    });
    // The path is a temp dir: hide it from the picture.
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("optuna-reference.db");
    }
    h.state_mut().cx.notices.clear();
    h.run_steps(4);
    snapshot(&mut h, "studies");
}

/// The parallel coordinates of the reference database's aggregated study (log, categorical
/// and mixed-choice axes), one axis brushed; its contour over a log and a linear parameter;
/// and the intermediate values of its other study.
#[test]
fn studies_parallel_coordinates_contour_and_intermediate_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = opened_reference_db(dir.path(), Tab::Studies);
    h.state_mut().panels.studies.live.on = false;
    h.state_mut()
        .handle(StudyAction::SelectStudy("x_aggressive".into()));
    step_until(&mut h, "the trials", |a| {
        !a.panels.studies.table.rows.is_empty()
    });
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("optuna-reference.db");
    }
    h.state_mut().cx.notices.clear();
    h.state_mut()
        .handle(StudyAction::ShowPlot(PlotTab::ParallelCoordinates));
    h.state_mut().handle(StudyAction::BrushAxis(
        "activation".into(),
        Some((0.5, 1.5)),
    ));
    h.run_steps(4);
    snapshot(&mut h, "studies_parallel");
    h.state_mut()
        .handle(StudyAction::ShowPlot(PlotTab::Contour));
    h.state_mut()
        .handle(StudyAction::ContourParams("lr".into(), "gamma".into()));
    h.run_steps(4);
    snapshot(&mut h, "studies_contour");
    h.state_mut()
        .handle(StudyAction::SelectStudy("ref_single_max".into()));
    step_until(&mut h, "the trials", |a| {
        a.panels
            .studies
            .table
            .rows
            .iter()
            .any(|r| r.study == "ref_single_max")
    });
    h.state_mut()
        .handle(StudyAction::ShowPlot(PlotTab::Intermediate));
    h.run_steps(4);
    snapshot(&mut h, "studies_intermediate");

    // Workers across machines: labels as `tradetune worker` stores them (the reference study
    // was written by Optuna, which records none), then the hosts table and the timeline.
    for (i, r) in h
        .state_mut()
        .panels
        .studies
        .table
        .rows
        .iter_mut()
        .enumerate()
    {
        let (worker, device) = match i % 3 {
            0 => ("gpu-box#4711/worker-0", "wgpu:0"),
            1 => ("gpu-box#4711/worker-1", "wgpu:0"),
            _ => ("laptop#815/worker-0", "cpu"),
        };
        r.worker = worker.into();
        r.device = device.into();
    }
    h.state_mut()
        .handle(StudyAction::ShowPlot(PlotTab::Workers));
    h.run_steps(4);
    h.get_by_label("gpu-box");
    h.get_by_label("laptop");
    assert!(h.get_all_by_label("wgpu:0").next().is_some());
    snapshot(&mut h, "studies_workers");
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
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("optuna-reference.db");
    }
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

/// The Report view of a cross-validated study built without training (six trials with stored
/// fold returns, common/cv_study.rs), with a stored seed spread: the best trial and its
/// folds, PBO with its logit histogram, the deflated Sharpe, the seed spread's box plots.
#[test]
fn studies_report() {
    use tradetune_engine::front::reseed::{RESEED_KEY, SeedResult, SeedSpread};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cv.db");
    let mut storage = common::cv_study::database(&db, 6);
    let spread = SeedSpread {
        trial: 5,
        bars: 480,
        seeds: [
            (0.41, 0.112),
            (0.18, 0.061),
            (0.77, 0.183),
            (-0.05, 0.004),
            (0.52, 0.139),
        ]
        .iter()
        .enumerate()
        .map(|(k, &(sharpe, total_return))| SeedResult {
            seed: 43 + k as u64,
            sharpe,
            total_return,
            objective: total_return,
        })
        .collect(),
        equal_weight_sharpe: 1.14,
        equal_weight_total_return: 0.249,
    };
    let cv = storage.study("cv").unwrap().study_id;
    storage
        .set_study_system_attr(
            cv,
            RESEED_KEY,
            &tradetune_engine::storage::JsonValue::from(serde_json::to_value(&spread).unwrap()),
        )
        .unwrap();
    drop(storage);
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    let mut h = ui::harness(app(settings, None), [1280.0, 1500.0]);
    h.state_mut().handle(StudyAction::OpenDatabase(db));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h.state_mut().handle(StudyAction::SelectStudy("cv".into()));
    step_until(&mut h, "the trials", |a| {
        a.panels.studies.table.rows.len() == 6 && !a.panels.studies.table.loading
    });
    h.state_mut().handle(StudyAction::ShowReport(true));
    step_until(&mut h, "the report", |a| {
        a.panels.studies.report.shown.is_some() && a.panels.studies.report.computing.is_none()
    });
    // The path is a temp dir: hide it from the picture.
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("cv.db");
    }
    h.state_mut().cx.notices.clear();
    h.run_steps(4);
    snapshot(&mut h, "studies_report");
}

/// The slice plots (objective against each parameter) and the empirical distribution function
/// of the reference database's aggregated study.
#[test]
fn studies_slice_and_edf() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = opened_reference_db(dir.path(), Tab::Studies);
    h.state_mut().panels.studies.live.on = false;
    h.state_mut()
        .handle(StudyAction::SelectStudy("x_aggressive".into()));
    step_until(&mut h, "the trials", |a| {
        !a.panels.studies.table.rows.is_empty()
    });
    if let Some(d) = h.state_mut().panels.studies.db.as_mut() {
        d.path = PathBuf::from("optuna-reference.db");
    }
    h.state_mut().cx.notices.clear();
    h.state_mut().handle(StudyAction::ShowPlot(PlotTab::Slice));
    h.run_steps(4);
    snapshot(&mut h, "studies_slice");
    h.state_mut().handle(StudyAction::ShowPlot(PlotTab::Edf));
    h.run_steps(4);
    snapshot(&mut h, "studies_edf");
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
