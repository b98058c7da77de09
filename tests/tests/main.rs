//! TradeTune's end-to-end tests as one test binary (`end_to_end`): each file beside this one is
//! a module of it. Run one file's tests with a filter:
//! `cargo test --workspace --test end_to_end -- optuna_client::`.

#[path = "../../engine/storage/tests/support/pg.rs"]
mod pg;
#[path = "../support/roots.rs"]
mod roots;

mod importance_optuna;
mod market_pipeline;
mod notes_dashboard;
mod optuna_client;

#[test]
fn every_test_file_is_in_a_test_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    roots::assert_every_file_is_a_module(&dir, &["main.rs"]);
}
