//! The desktop program's and the CLI's integration tests as one test binary (`app`): each file
//! beside this one is a module of it, so burn, wgpu and eframe are linked once instead of once
//! per file. The CLI tests run the real `tradetune` binary; the `ui*` tests drive the app
//! through egui_kittest (`common::ui`). Run one file's tests with a filter:
//! `cargo test --workspace --test app -- ui_report::`.

mod common;
#[path = "../../tests/support/imports.rs"]
mod imports;
#[path = "../../engine/storage/tests/support/pg.rs"]
mod pg;
#[path = "../../tests/support/roots.rs"]
mod roots;

mod app_modules;
mod cli_backtest;
mod cli_bench_gpu;
mod cli_bench_sampler;
mod cli_bench_storage;
mod cli_bench_train;
mod cli_compare;
mod cli_data;
mod cli_devices;
mod cli_eval;
mod cli_monitor;
mod cli_presets_device;
mod cli_study;
mod cli_study_importance;
mod cli_study_note;
mod cli_study_report;
mod cli_study_speed;
mod cli_train;
mod cli_worker;
mod gui_smoke;
mod hardware_presets;
mod ui_close;
mod ui_configure;
mod ui_devices;
mod ui_hardware;
mod ui_importance;
mod ui_notes;
mod ui_notices;
mod ui_parallel_load;
mod ui_pruner;
mod ui_report;
mod ui_run;
mod ui_settings;
mod ui_snapshots;
mod ui_snapshots_studies;
mod ui_studies;
mod ui_studies_live;

#[test]
fn every_test_file_is_in_a_test_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    roots::assert_every_file_is_a_module(&dir, &["main.rs"]);
}
