//! `tradetune data ...` run as the real binary.

use crate::common;

use common::{scratch, text, tradetune};

#[test]
fn inspect_bundled_sample() {
    let out = tradetune(&["data", "inspect"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}{}", stdout, text(&out.stderr));
    for needle in [
        "stocks_daily_quandl_wiki.csv.gz",
        "AAPL",
        "FB",
        "2004-08-19",
        "dataset: 4 assets (AAPL, GOOG, IBM, MSFT)",
        "1d",
        "weekends",
        "inner join",
        "rsi_14",
        "macd_12_26_9",
        "train",
    ] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing from:\n{stdout}"
        );
    }
}

#[test]
fn inspect_json() {
    let out = tradetune(&["data", "inspect", "--json", "--assets", "IBM,MSFT"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["assets"].as_array().unwrap().len(), 5);
    let d = &v["dataset"];
    assert_eq!(d["assets"], serde_json::json!(["IBM", "MSFT"]));
    assert!(d["bars"].as_u64().unwrap() > 3_000);
    assert_eq!(d["bar_seconds"], 86_400);
    let rsi = d["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "rsi_14")
        .unwrap();
    // (RSI − 50)/50 lies in [−1, 1].
    assert!(rsi["min"].as_f64().unwrap() >= -1.0 && rsi["max"].as_f64().unwrap() <= 1.0);
    assert!(v["dataset_error"].is_null());
}

#[test]
fn inspect_bad_file_names_file_line_and_field() {
    let dir = scratch("cli_data", "bad");
    let path = dir.join("broken.csv");
    std::fs::write(
        &path,
        "date,open,high,low,close,volume\n2020-01-02,1,2,1,1.5,10\n2020-01-03,1,2,1,abc,10\n",
    )
    .unwrap();
    let out = tradetune(&["data", "inspect", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("broken.csv"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("field 'close'"), "{err}");
    assert!(err.contains("'abc' is not a number"), "{err}");
}

#[test]
fn inspect_missing_file() {
    let out = tradetune(&["data", "inspect", "/nonexistent/prices.csv"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("/nonexistent/prices.csv") && err.contains("no such file"),
        "{err}"
    );
}

#[test]
fn synth_writes_a_file_inspect_reads_back() {
    let dir = scratch("cli_data", "synth");
    let path = dir.join("syn.csv.gz");
    let out = tradetune(&[
        "data",
        "synth",
        "--assets",
        "3",
        "--bars",
        "2000",
        "--seed",
        "7",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("3 assets × 2000 bars of 5m"));
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "a .gz output is gzip");

    let out = tradetune(&["data", "inspect", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files"][0]["format"], "long");
    assert_eq!(
        v["dataset"]["assets"],
        serde_json::json!(["SYN0", "SYN1", "SYN2"])
    );
    assert_eq!(v["assets"][0]["bars"], 2000);
    assert_eq!(v["assets"][0]["bar_seconds"], 300);
    assert_eq!(v["assets"][0]["gaps"]["count"], 0);
    assert_eq!(v["dataset"]["alignment"]["common_bars"], 2000);

    // Same seed, same bytes.
    let again = dir.join("again.csv.gz");
    let out = tradetune(&[
        "data",
        "synth",
        "--assets",
        "3",
        "--bars",
        "2000",
        "--seed",
        "7",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert_eq!(std::fs::read(&again).unwrap(), bytes);
}

#[test]
fn synth_rejects_bad_arguments() {
    let out = tradetune(&["data", "synth", "--assets", "0", "--out", "/tmp/never.csv"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("synth: assets must be at least 1"));
    let out = tradetune(&[
        "data",
        "synth",
        "--start",
        "yesterday",
        "--out",
        "/tmp/never.csv",
    ]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--start"));
    // More bars than a market can hold in memory, and a count past i64 (it panicked reserving
    // room), are refused naming the flag's field; so is a folder as --out, before anything is
    // made and with nothing left beside it.
    for bars in ["200000000", "18446744073709551615"] {
        let out = tradetune(&["data", "synth", "--bars", bars, "--out", "/tmp/never.csv"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("synth: bars") && err.contains("at most"),
            "{err}"
        );
    }
    let dir = scratch("cli_data", "synth_into_a_folder");
    let out = tradetune(&["data", "synth", "--out", dir.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("is a folder"), "{err}");
    let partial = format!("{}.partial", dir.display());
    assert!(
        !std::path::Path::new(&partial).exists(),
        "{partial} was left behind"
    );
}
