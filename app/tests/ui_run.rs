//! The Run and Backtest panels driven through egui_kittest, with a real training run on the CPU
//! device: a tiny study live to its end, the split and devices set in Configure reaching it, and a
//! trained checkpoint backtested.

use std::sync::Arc;

use crate::common::panels::*;
use crate::common::ui::step_until;
use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::settings::{Settings, Tab};

#[test]
fn a_tiny_study_on_the_cpu_runs_live_and_its_trials_complete_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let csv = dir.path().join("tiny.csv");
    let draft = tiny_draft("ui_tiny");
    let settings = Settings {
        tab: Tab::Run,
        draft,
        study_db: Some(db.clone()),
        ..Settings::default()
    };
    let dialogs = TestDialogs {
        database: None,
        save_as: Some(csv.clone()),
    };
    let mut h = harness(app_with(settings, dialogs));
    step_until(&mut h, "the bundled data", data_loaded);
    h.get_by_role_and_label(Role::Button, "Start").click();
    settle(&mut h);
    assert!(
        h.state().panels.run.running,
        "Start did not start the study: {:?}",
        h.state().cx.notices
    );
    step_until(&mut h, "the first trial to start", |a| {
        !a.panels.run.trials.is_empty() || !a.panels.run.running
    });
    // The Run panel says it; the status bar may say it too, at the same moment.
    assert!(
        h.query_all_by_label_contains("worker 0 on cpu").count() >= 1,
        "no label names the worker"
    );
    step_until(&mut h, "the study to finish", |a| !a.panels.run.running);
    let run = &h.state().panels.run;
    assert_eq!(run.error, None, "{:?}", h.state().cx.notices);
    let end = run.end.clone().expect("the study reported its end");
    assert_eq!(end.counts, [2, 0, 0], "{:?}", run.trials);
    for t in &run.trials {
        assert!(
            !t.curve.is_empty(),
            "trial {} reported no intermediate values",
            t.number
        );
    }
    // The Run panel's line is exactly the end's summary; the status bar says it after the study's
    // name, and may still show it (or a later notice) at this frame, so neither is matched by a
    // substring (CI caught the two at once).
    let summary = end.summary();
    assert!(
        summary.starts_with("finished: 2 complete, 0 pruned, 0 failed; best trial #"),
        "{summary}"
    );
    h.get_by_label(&summary);
    let notice = format!("study ui_tiny {summary}");
    assert!(
        h.state().cx.notices.contains(&notice),
        "no notice {notice:?} in {:?}",
        h.state().cx.notices
    );
    // Each update's losses, samples/s and phase times arrived live (256 samples at 64 per
    // update: 4 updates) and the selected trial shows them.
    for t in &run.trials {
        for metric in [
            "losses/policy_loss",
            "losses/value_loss",
            "charts/SPS",
            "time/update_s",
        ] {
            let points = t.metrics.get(metric).map_or(0, Vec::len);
            assert_eq!(
                points, 4,
                "trial {}: {metric} has {points} points",
                t.number
            );
        }
    }
    assert!(!run.samples_per_second.is_empty());
    h.get_by_label_contains("update 4 · 256 samples");
    h.get_by_label_contains("where the time goes");
    h.get_by_label_contains("advantages ");
    h.get_by_label("samples/s, all workers");

    // The Studies panel opens the database and shows the study's trials as COMPLETE.
    step_until(&mut h, "the study's trials in the Studies panel", |a| {
        a.panels.studies.table.rows.len() == 2
    });
    assert_eq!(h.state().cx.settings.tab, Tab::Run);
    h.get_by_label("Studies").click();
    settle(&mut h);
    assert_eq!(h.query_all_by_label("COMPLETE").count(), 2);
    let rows = &h.state().panels.studies.table.rows;
    assert!(rows.iter().all(|r| r.device == "cpu"), "{rows:?}");
    // Labelled by machine and process as the CLI's workers are, so that a worker of another
    // process on the same database stays apart from the app's.
    let this_process = format!("#{}/worker-", std::process::id());
    assert!(
        rows.iter().all(|r| r.worker.contains(&this_process)),
        "{rows:?}"
    );

    // A trial's details read its stored training curves (one point per update).
    h.state_mut()
        .handle(tradetune_app::ui::panels::studies::Action::ShowTrial(0));
    step_until(&mut h, "the stored training curves", |a| {
        a.panels.studies.table.curve.is_some()
    });
    let (_, curves) = h.state().panels.studies.table.curve.clone().unwrap();
    let curves = curves.expect("the curves read");
    assert_eq!(
        curves.get("losses/policy_loss").map(Vec::len),
        Some(4),
        "{curves:?}"
    );
    assert_eq!(
        curves["losses/policy_loss"].last().map(|p| p[0]),
        Some(256.0),
        "x is the env step"
    );
    settle(&mut h);
    h.get_by_label("training losses by env step");
    // Its telemetry summary, as stored with it.
    h.get_by_label("telemetry summary").click();
    settle(&mut h);
    h.get_by_label("wall_s");
    h.get_by_label("phase_update_s");

    // Export: the CSV has those rows.
    h.get_by_label("Export trials CSV…").click();
    step_until(&mut h, "the export", |a| {
        a.cx.notices
            .iter()
            .any(|n| n.starts_with("wrote ") || n.starts_with("export failed"))
    });
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows.iter().all(|r| r.ends_with(",COMPLETE")), "{text}");

    // Telemetry export: one row per sample, columns named with units.
    let before = h.state().cx.notices.len();
    h.get_by_label("Export telemetry CSV…").click();
    step_until(&mut h, "the telemetry export", |a| {
        a.cx.notices[before..]
            .iter()
            .any(|n| n.starts_with("wrote ") || n.starts_with("export failed"))
    });
    let notice = h.state().cx.notices.last().cloned().unwrap();
    assert!(notice.contains("telemetry rows"), "{notice}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let header = text.lines().next().unwrap_or_default();
    for column in ["cpu_pct", "rss_mib", "trial", "gpu0_util_pct"] {
        assert!(
            header.split(',').any(|c| c == column),
            "no {column} in {header}"
        );
    }
    // The verdict of each trial is stored with it and shown in the Run panel.
    assert!(
        h.state()
            .panels
            .studies
            .table
            .rows
            .iter()
            .all(|r| r.verdict.is_some()),
        "{:?}",
        h.state().panels.studies.table.rows
    );
    h.get_by_label("Run").click();
    settle(&mut h);
    h.get_by_label_contains("Bottleneck of trial");

    // Each COMPLETE trial's policy is saved beside the database, in its own folder, and
    // backtests from its row.
    let row = h.state().panels.studies.table.rows[0].clone();
    let applied = row
        .applied_config
        .clone()
        .expect("the applied configuration is stored");
    assert!(applied.contains("\"n_envs\": 2"), "{applied}");
    assert!(row.placement.contains("backend flex"), "{}", row.placement);
    let ckpt = row.checkpoint.clone().expect("a checkpoint attribute");
    assert!(
        ckpt.starts_with(dir.path().join("checkpoints/studies/ui_tiny")),
        "{}",
        ckpt.display()
    );
    h.state_mut()
        .handle(tradetune_app::ui::context::Command::BacktestTrial(ckpt));
    settle(&mut h);
    step_until(&mut h, "the trial's backtest", |a| {
        !a.panels.backtest.running
    });
    let b = &h.state().panels.backtest;
    assert_eq!(b.error, None);
    assert!(
        b.result
            .as_ref()
            .is_some_and(|r| r.table.contains("sharpe"))
    );
    assert_eq!(h.state().cx.settings.tab, Tab::Backtest);
}

#[test]
fn a_trained_checkpoint_backtests_against_equal_weight() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("run1");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args(["train", "--total-timesteps", "256", "--out"])
        .arg(&ckpt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let settings = Settings {
        tab: Tab::Backtest,
        ..Settings::default()
    };
    let app = TradeTuneApp::new(
        settings,
        Arc::new(CheckpointDialog(ckpt.clone())),
        tradetune_engine::device::describe_devices(),
    );
    let mut h = harness(app);
    settle(&mut h);
    h.get_by_label("Choose checkpoint…").click();
    step_until(&mut h, "the dialog", |a| {
        a.panels.backtest.checkpoint.is_some()
    });
    h.get_by_label("Run backtest").click();
    settle(&mut h);
    step_until(&mut h, "the backtest", |a| !a.panels.backtest.running);
    let b = &h.state().panels.backtest;
    assert_eq!(b.error, None);
    let r = b.result.clone().unwrap();
    assert!(r.about.contains("test split"), "{}", r.about);
    assert!(
        r.table.contains("sharpe") && r.table.contains("equal weight"),
        "{}",
        r.table
    );
    assert_eq!(r.agent.len(), r.equal_weight.len());
    assert!(r.agent.len() > 100, "{} bars", r.agent.len());
    h.get_by_label_contains("max drawdown");

    // A directory that is not a checkpoint: the error names the missing file.
    h.state_mut().panels.backtest.checkpoint = Some(dir.path().to_path_buf());
    h.state_mut()
        .handle(tradetune_app::ui::panels::backtest::Action::Backtest);
    step_until(&mut h, "the failed backtest", |a| {
        !a.panels.backtest.running
    });
    let e = h.state().panels.backtest.error.clone().expect("an error");
    assert!(e.contains("model.bpk"), "{e}");
}

#[test]
fn start_runs_the_split_and_the_devices_set_in_configure() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        tab: Tab::Configure,
        draft: tiny_draft("ui_split_devices"),
        study_db: Some(dir.path().join("studies.db")),
        ..Settings::default()
    };
    let app = TradeTuneApp::new(settings, Arc::new(no_dialogs()), cpu_only(32 << 30));
    let mut h = harness(app);
    step_until(&mut h, "the bundled data", data_loaded);
    let n = h.state().cx.data.ready().unwrap().dataset.timestamps.len();
    // Half the bars to train on; the CPU twice, a worker on each.
    h.get_by_role_and_label(Role::SpinButton, "train fraction")
        .set_value_accesskit(0.5);
    h.get_by_role_and_label(Role::SpinButton, "workers")
        .set_value_accesskit(2.0);
    settle(&mut h);
    h.get_by_role_and_label(Role::Button, "Add device").click();
    settle(&mut h);
    h.get_by_role_and_label(Role::Button, "Start").click();
    settle(&mut h);
    assert!(
        h.state().panels.run.running,
        "Start did not start the study: {:?}",
        h.state().cx.notices
    );
    step_until(&mut h, "the study to finish", |a| !a.panels.run.running);
    let app = h.state();
    assert_eq!(app.panels.run.error, None, "{:?}", app.cx.notices);
    assert_eq!(
        app.panels.run.end.as_ref().map(|e| e.counts),
        Some([2, 0, 0]),
        "{:?}",
        app.cx.notices
    );
    // The runner bound one worker to each CPU slot...
    let devices: Vec<&str> = app
        .panels
        .run
        .workers
        .iter()
        .map(|w| w.device.as_str())
        .collect();
    assert_eq!(devices, ["cpu", "cpu#1"]);
    // ...and trained on the split typed in Configure (the run reports its data as loaded).
    let (train, validation) = (n / 2, (n as f64 * 0.15).floor() as usize);
    let expected = format!(
        "(train bars 0..{train}, validation {train}..{})",
        train + validation
    );
    assert!(
        app.cx
            .notices
            .iter()
            .any(|m| m.starts_with("data: ") && m.ends_with(&expected)),
        "no {expected} in {:?}",
        app.cx.notices
    );
}

/// Issue 32, "compile once, and say so": while the GPU compiles a new configuration's kernels
/// (tens of seconds in which no trial moves), the Run panel says so with a spinner, and once it
/// has stopped, what it compiled.
#[test]
fn the_run_panel_shows_the_gpus_compiling_and_then_what_it_compiled() {
    use tradetune_app::ui::tasks::StudyMsg;
    use tradetune_engine::device::compiling::CompileStatus;
    let settings = Settings {
        tab: Tab::Run,
        ..Settings::default()
    };
    let app = TradeTuneApp::new(settings, Arc::new(no_dialogs()), cpu_only(32 << 30));
    let mut h = harness(app);
    settle(&mut h);
    let mut status = CompileStatus {
        active: true,
        kernels_compiled: 45,
        autotune_runs: 12,
        seconds: 18.2,
        idle_s: 0.0,
    };
    {
        let run = &mut h.state_mut().panels.run;
        run.running = true;
        run.study = "gpu".into();
        run.started = Some(std::time::Instant::now());
        run.on_study(StudyMsg::Compiling(status), false, &mut Vec::new());
    }
    settle(&mut h);
    h.get_by_label("compiling GPU kernels for 18 s: 45 compiled, 12 operations autotuned");
    status.active = false;
    status.kernels_compiled = 94;
    status.autotune_runs = 22;
    status.seconds = 43.46;
    h.state_mut()
        .panels
        .run
        .on_study(StudyMsg::Compiling(status), false, &mut Vec::new());
    settle(&mut h);
    assert!(
        h.query_by_label_contains("compiling GPU kernels").is_none(),
        "the live line stays after the compiling stopped"
    );
    h.get_by_label("compiled 94 GPU kernels and autotuned 22 operations in 43.5 s");
    // An evaluation's first kernel: said while it compiles, and the first update's totals
    // stay once it is done.
    let blip = CompileStatus {
        active: true,
        kernels_compiled: 1,
        autotune_runs: 0,
        seconds: 0.0,
        idle_s: 0.0,
    };
    for status in [
        blip,
        CompileStatus {
            active: false,
            ..blip
        },
    ] {
        h.state_mut()
            .panels
            .run
            .on_study(StudyMsg::Compiling(status), false, &mut Vec::new());
        settle(&mut h);
        if status.active {
            h.get_by_label("compiling GPU kernels for 0 s: 1 compiled, 0 operations autotuned");
        }
    }
    assert!(h.query_by_label_contains("compiling GPU kernels").is_none());
    h.get_by_label("compiled 94 GPU kernels and autotuned 22 operations in 43.5 s");
}
