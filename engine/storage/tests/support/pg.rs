//! The PostgreSQL server the tests use, shared by `engine/storage/tests/postgres.rs` and
//! `tests/tests/optuna_client.rs` (included with `#[path]`).

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
