//! The PostgreSQL server the tests use, shared by the test binaries of `engine/storage`, `app`
//! and `tests` (each root includes it once with `#[path]`; its modules `use crate::pg`).

#![allow(dead_code)] // each including test uses its own subset

use std::sync::atomic::{AtomicUsize, Ordering};

/// A URL of a new, not yet existing database on the test server, or None (skipped).
pub fn fresh_database(test: &str) -> Option<String> {
    static N: AtomicUsize = AtomicUsize::new(0);
    match std::env::var("TRADETUNE_TEST_POSTGRES") {
        Ok(server) if !server.is_empty() => Some(format!(
            "{}/tt_{test}_{}_{}",
            server.trim_end_matches('/'),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )),
        _ => {
            let required = std::env::var("TRADETUNE_REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{test}: TRADETUNE_REQUIRE_POSTGRES=1 but TRADETUNE_TEST_POSTGRES names no server"
            );
            eprintln!(
                "\n######## SKIPPED {test}: set TRADETUNE_TEST_POSTGRES=postgresql://USER@HOST:PORT ########\n"
            );
            None
        }
    }
}

/// Whether python3 imports `modules` (e.g. `"optuna, psycopg"`); otherwise a loud SKIP, or a
/// failure under `TRADETUNE_REQUIRE_OPTUNA=1` (CI).
pub fn python_has(test: &str, modules: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let required = std::env::var("TRADETUNE_REQUIRE_OPTUNA").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{test}: python3 with {modules} is required (TRADETUNE_REQUIRE_OPTUNA=1) but not \
             available; run `python3 -m pip install optuna pandas 'psycopg[binary]' optuna-dashboard`"
        );
        eprintln!(
            "\n######## SKIPPED {test}: python3 cannot import {modules}. ########\n\
             ######## `python3 -m pip install optuna pandas 'psycopg[binary]' optuna-dashboard` ########\n"
        );
    }
    ok
}
