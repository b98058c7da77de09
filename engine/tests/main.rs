//! The engine's integration tests as one test binary (`engine`): each file beside this one is a
//! module of it, so burn and wgpu are linked once instead of once per file. The tests that
//! measure the whole process (a counting allocator, the read counter, the wgpu pool) are in the
//! `process_wide` binary instead (`process_wide.rs`). Run one file's tests with a filter:
//! `cargo test --workspace --test engine -- study_runner::`.

mod common;
#[path = "../../tests/support/imports.rs"]
mod imports;
#[path = "../../tests/support/roots.rs"]
mod roots;

mod env_peer_port;
mod env_properties;
mod env_rules;
mod env_tensor;
mod eval;
mod eval_learning;
mod eval_pbo;
mod eval_periodic;
mod front_launch;
mod market_bad_input;
mod module_layers;
mod ppo_hyperparameters;
mod ppo_learning;
mod ppo_resume;
mod ppo_trading;
mod storage_api;
mod storage_reference;
mod study_presets;
mod study_pruning;
mod study_runner;
mod study_samplers;
mod telemetry_amdgpu;
mod telemetry_sampler;
mod telemetry_storage;
mod telemetry_verdict;

#[test]
fn every_test_file_is_in_a_test_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    roots::assert_every_file_is_a_module(&dir, &["main.rs", "process_wide.rs"]);
}
