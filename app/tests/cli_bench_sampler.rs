//! `tradetune bench sampler` run as the real binary, with small studies so it stays quick.

use crate::common;

use common::{text, tradetune};

#[test]
fn json_has_every_function_and_the_optuna_reference() {
    let out = tradetune(&[
        "bench",
        "sampler",
        "--json",
        "--trials",
        "15",
        "--seeds",
        "2",
        "--overhead-trials",
        "30",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["config"]["trials"], 15);
    assert_eq!(v["config"]["seeds"].as_array().unwrap().len(), 2);
    assert_eq!(v["comparable_to_optuna"], false);
    let quality = v["quality"].as_array().unwrap();
    // Four functions × the default samplers (tpe, random).
    assert_eq!(quality.len(), 8);
    for (function, reference) in [
        ("branin", 0.416),
        ("hartmann6", -3.207),
        ("rosenbrock5", 130.0),
        ("mixed", 0.0735),
    ] {
        let row = quality
            .iter()
            .find(|r| r["function"] == function && r["sampler"] == "tpe")
            .unwrap_or_else(|| panic!("no tpe row for {function}"));
        assert_eq!(row["optuna_reference"].as_f64(), Some(reference));
        assert_eq!(row["best"].as_array().unwrap().len(), 2);
        let median = row["median_best"].as_f64().unwrap();
        // The best value cannot beat the function's global minimum.
        assert!(
            median >= row["optimum"].as_f64().unwrap() - 1e-9,
            "{function}"
        );
        assert!(row["mean_suggest_ms"].as_f64().unwrap() >= 0.0);
    }
    // Not comparable with Optuna's 10 × 100 figures: no verdict.
    assert!(
        v["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["no_worse_than_optuna"].is_null())
    );
    let overhead = v["overhead"].as_array().unwrap();
    assert_eq!(overhead.len(), 8);
    assert!(
        overhead
            .iter()
            .all(|r| r["trials"] == 30 && r["last_100_mean_ms"].as_f64().unwrap() >= 0.0)
    );
    assert_eq!(v["overhead_target_ms"].as_f64(), Some(1.0));
    assert!(v["overhead_within_target"].is_boolean());
}

#[test]
fn unknown_sampler_is_an_error_listing_the_valid_ones() {
    let out = tradetune(&[
        "bench",
        "sampler",
        "--samplers",
        "tpe,cmaes",
        "--trials",
        "5",
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("cmaes") && err.contains("tpe-optuna-clip") && err.contains("random"),
        "{err}"
    );
}
