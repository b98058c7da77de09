//! `tradetune eval pbo` and `tradetune eval dsr` run as the real binary, on returns matrices
//! written by the test; their figures are checked against the engine's on the same matrix.

use crate::common;

use std::path::{Path, PathBuf};

use common::{scratch, text, tradetune};
use tradetune_engine::eval::{dsr, pbo};

/// A deterministic T×N matrix of returns around 0 (splitmix64 → uniform in ±0.02), with a small
/// drift in column `edge` so the figures are not all alike.
fn matrix(periods: usize, strategies: usize, seed: u64, edge: usize) -> Vec<Vec<f64>> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..strategies)
        .map(|j| {
            (0..periods)
                .map(|_| 0.04 * (next() - 0.5) + if j == edge { 0.001 } else { 0.0 })
                .collect()
        })
        .collect()
}

/// Writes `columns` as CSV with names s0, s1, …; `{}` prints each f64 so it parses back exactly.
fn write_csv(dir: &Path, name: &str, columns: &[Vec<f64>]) -> PathBuf {
    let mut s = (0..columns.len())
        .map(|j| format!("s{j}"))
        .collect::<Vec<_>>()
        .join(",");
    s.push('\n');
    for t in 0..columns[0].len() {
        let row: Vec<String> = columns.iter().map(|c| format!("{}", c[t])).collect();
        s.push_str(&row.join(","));
        s.push('\n');
    }
    let path = dir.join(name);
    std::fs::write(&path, s).unwrap();
    path
}

fn run_ok(args: &[&str]) -> String {
    let out = tradetune(args);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "tradetune {args:?} failed:\n{stdout}{}",
        text(&out.stderr)
    );
    stdout
}

/// Runs a command that must fail and returns its error output.
fn run_err(args: &[&str]) -> String {
    let out = tradetune(args);
    assert!(
        !out.status.success(),
        "tradetune {args:?} succeeded:\n{}",
        text(&out.stdout)
    );
    text(&out.stderr)
}

#[test]
fn pbo_prints_the_engines_figures_as_text_and_json() {
    let dir = scratch("cli_eval", "pbo");
    let m = matrix(203, 6, 1, 2);
    let path = write_csv(&dir, "returns.csv", &m);
    let p = path.to_str().unwrap();
    let want = pbo::cscv(&m, 8).unwrap();

    let v: serde_json::Value = serde_json::from_str(&run_ok(&[
        "eval",
        "pbo",
        "--returns",
        p,
        "--partitions",
        "8",
        "--json",
    ]))
    .expect("valid JSON");
    assert_eq!(v["pbo"].as_f64().unwrap(), want.pbo);
    assert_eq!(
        v["probability_of_loss"].as_f64().unwrap(),
        want.probability_of_loss
    );
    assert_eq!(v["combinations"], 70);
    assert_eq!(v["periods"], 203);
    assert_eq!(v["periods_dropped"], 3);
    assert_eq!(v["strategies"], 6);
    let logits: Vec<f64> = serde_json::from_value(v["logits"].clone()).unwrap();
    assert_eq!(logits, want.logits);
    let selected: Vec<String> = serde_json::from_value(v["selected"].clone()).unwrap();
    let want_selected: Vec<String> = want.selected.iter().map(|s| format!("s{s}")).collect();
    assert_eq!(selected, want_selected);
    assert_eq!(
        v["degradation"]["slope"].as_f64(),
        want.degradation.slope,
        "{}",
        v["degradation"]
    );
    let histogram_total: u64 = v["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(histogram_total, 70);

    let out = run_ok(&["eval", "pbo", "--returns", p, "--partitions", "8"]);
    for needle in [
        "203 periods × 6 strategies; S = 8 partitions of 25 periods; 70 combinations".to_owned(),
        "the first 3 period(s) left out".to_owned(),
        format!("Probability of backtest overfitting: {:.4}", want.pbo),
        "Logits λ".to_owned(),
        "Performance degradation".to_owned(),
        format!(
            "Probability of loss (out-of-sample Sharpe ratio < 0): {:.4}",
            want.probability_of_loss
        ),
        "In-sample best most often: s".to_owned(),
    ] {
        assert!(out.contains(&needle), "{needle:?} missing from:\n{out}");
    }
    // The histogram lines hold every combination.
    let counted: usize = out
        .lines()
        .filter(|l| l.trim_start().starts_with('(') && l.contains(']'))
        .map(|l| {
            l.split(']')
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(counted, 70, "{out}");
    // A histogram of more bins than anyone reads (it asked for terabytes and aborted).
    for bins in ["0", "100000000000"] {
        let err = run_err(&["eval", "pbo", "--returns", p, "--bins", bins]);
        assert!(err.contains("--bins: 1 to 1000"), "{err}");
    }
}

#[test]
fn dsr_deflates_the_best_column_by_all_of_them() {
    let dir = scratch("cli_eval", "dsr");
    let m = matrix(500, 8, 7, 5);
    let path = write_csv(&dir, "trials.csv", &m);
    let p = path.to_str().unwrap();
    let want = dsr::deflate_best(&m, None).unwrap();

    let v: serde_json::Value =
        serde_json::from_str(&run_ok(&["eval", "dsr", "--returns", p, "--json"])).unwrap();
    assert_eq!(v["column"], format!("s{}", want.selected));
    assert_eq!(v["chosen"], "best");
    assert_eq!(v["trials"], 8);
    assert_eq!(
        v["sharpe_variance"].as_f64().unwrap(),
        want.deflated.sharpe_variance
    );
    assert_eq!(v["dsr"].as_f64().unwrap(), want.deflated.dsr);
    assert_eq!(v["psr"].as_f64().unwrap(), want.deflated.psr);
    assert_eq!(
        v["expected_max_sharpe"].as_f64().unwrap(),
        want.deflated.expected_max_sharpe
    );

    // N and V given: the named column deflated by them.
    let v: serde_json::Value = serde_json::from_str(&run_ok(&[
        "eval",
        "dsr",
        "--returns",
        p,
        "--column",
        "s3",
        "--trials",
        "100",
        "--sr-variance",
        "0.002",
        "--json",
    ]))
    .unwrap();
    let est = dsr::SharpeEstimate::from_returns(&m[3]).unwrap();
    let d = est.deflate(100, 0.002).unwrap();
    assert_eq!(v["column"], "s3");
    assert_eq!(v["dsr"].as_f64().unwrap(), d.dsr);
    assert_eq!(v["trials_from"], "given");

    let out = run_ok(&["eval", "dsr", "--returns", p, "--periods-per-year", "252"]);
    for needle in [
        format!("column \"s{}\"", want.selected),
        "Trials N = 8".to_owned(),
        "annualised".to_owned(),
        format!(
            "Deflated Sharpe ratio DSR:         {:.4}",
            want.deflated.dsr
        ),
    ] {
        assert!(out.contains(&needle), "{needle:?} missing from:\n{out}");
    }

    // One column: N and V must be given.
    let one = write_csv(&dir, "one.csv", &m[..1]);
    let err = run_err(&["eval", "dsr", "--returns", one.to_str().unwrap()]);
    assert!(
        err.contains("one column") && err.contains("--trials"),
        "{err}"
    );
    let err = run_err(&["eval", "dsr", "--returns", p, "--column", "nope"]);
    assert!(err.contains("no column named \"nope\""), "{err}");
    // N below the file's 8 trials deflates their best as if fewer were tried: right for an
    // effective N of clustered trials, said in a note.
    let o = tradetune(&["eval", "dsr", "--returns", p, "--trials", "5"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("note: --trials 5 is below the 8 trials' returns"),
        "{err}"
    );
}

#[test]
fn bad_returns_files_are_named_with_line_and_column() {
    let dir = scratch("cli_eval", "bad");
    let write = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        path.to_str().unwrap().to_owned()
    };

    let missing = dir.join("absent.csv");
    let err = run_err(&["eval", "pbo", "--returns", missing.to_str().unwrap()]);
    assert!(
        err.contains("cannot read returns file") && err.contains("absent.csv"),
        "{err}"
    );

    let ragged = write("ragged.csv", "a,b,c\n0.1,0.2,0.3\n0.1,0.2,0.3\n0.1,0.2\n");
    let err = run_err(&["eval", "pbo", "--returns", &ragged]);
    assert!(
        err.contains("ragged.csv line 4: 2 field(s), but the header names 3 column(s)"),
        "{err}"
    );

    let word = write("word.csv", "a,b,c\n0.1,0.2,0.3\n0.1,abc,0.3\n");
    let err = run_err(&["eval", "pbo", "--returns", &word]);
    assert!(
        err.contains("word.csv line 3 column 2 (\"b\"): \"abc\" is not a number"),
        "{err}"
    );

    let nan = write("nan.csv", "a,b\n0.1,0.2\n0.1,0.2\n0.3,NaN\n");
    let err = run_err(&["eval", "dsr", "--returns", &nan]);
    assert!(
        err.contains("nan.csv line 4 column 2 (\"b\"): NaN is not a finite return"),
        "{err}"
    );

    let blank = write("blank.csv", "a,b\n0.1,\n");
    let err = run_err(&["eval", "pbo", "--returns", &blank]);
    assert!(
        err.contains("blank.csv line 2 column 2 (\"b\"): empty cell"),
        "{err}"
    );

    let single = write("single.csv", "only\n0.1\n0.2\n0.3\n");
    let err = run_err(&["eval", "pbo", "--returns", &single]);
    assert!(
        err.contains("single.csv: 1 column (\"only\")") && err.contains("at least 2 columns"),
        "{err}"
    );

    let empty = write("empty.csv", "");
    let err = run_err(&["eval", "pbo", "--returns", &empty]);
    assert!(err.contains("empty.csv: empty"), "{err}");

    let header_only = write("header.csv", "a,b\n");
    let err = run_err(&["eval", "pbo", "--returns", &header_only]);
    assert!(
        err.contains("header.csv: a header row but no returns"),
        "{err}"
    );

    let twice = write("twice.csv", "a,b,a\n0.1,0.2,0.3\n");
    let err = run_err(&["eval", "pbo", "--returns", &twice]);
    assert!(
        err.contains("twice.csv line 1: column 3 repeats the name \"a\""),
        "{err}"
    );

    // The engine's own refusals come back naming the file.
    let good = write_csv(&dir, "good.csv", &matrix(40, 3, 3, 0));
    let good = good.to_str().unwrap();
    let err = run_err(&["eval", "pbo", "--returns", good, "--partitions", "5"]);
    assert!(
        err.contains("good.csv: 5 partitions") && err.contains("even"),
        "{err}"
    );
    let err = run_err(&["eval", "pbo", "--returns", good, "--partitions", "42"]);
    assert!(err.contains("good.csv: 42 partitions"), "{err}");

    let flat = write(
        "flat.csv",
        "x,y\n0.1,0.01\n-0.1,0.01\n0.2,0.01\n-0.2,0.01\n0.05,0.01\n0.0,0.01\n",
    );
    let err = run_err(&["eval", "pbo", "--returns", &flat, "--partitions", "2"]);
    assert!(
        err.contains("flat.csv: column 2 (\"y\") returns the same"),
        "{err}"
    );
}
