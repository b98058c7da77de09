//! The storage crate's integration tests as one test binary (`storage`): each file beside this
//! one is a module of it. Run one file's tests with a filter:
//! `cargo test --workspace --test storage -- postgres::`.

#[path = "support/pg.rs"]
mod pg;
#[path = "../../../tests/support/roots.rs"]
mod roots;

mod delete_study;
mod fold_benchmark;
mod incremental;
mod postgres;
mod set_aside;

#[test]
fn every_test_file_is_in_a_test_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    roots::assert_every_file_is_a_module(&dir, &["main.rs"]);
}
