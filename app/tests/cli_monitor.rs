//! `tradetune monitor` run as the real binary: for about two seconds with a CSV log, with JSON
//! output, on the amdgpu fixture tree, and with a bad interval.

use crate::common;

use common::{text, tradetune};

use std::path::PathBuf;

fn fixture(case: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../engine/tests/fixtures/amdgpu")
        .join(case)
        .display()
        .to_string()
}

/// NVML is absent on this machine and in CI; on a machine with an NVIDIA card its cards come
/// first and the fixture card is not gpu0.
fn nvidia_absent(stdout: &str) -> bool {
    stdout
        .lines()
        .any(|l| l.starts_with("NVIDIA: ") && !l.ends_with("GPU") && !l.ends_with("GPUs"))
}

#[test]
fn two_seconds_with_a_csv_log() {
    let dir = tempfile::tempdir().unwrap();
    let csv_path = dir.path().join("monitor.csv");
    let out = tradetune(&[
        "monitor",
        "--interval",
        "0.5",
        "--duration",
        "2",
        "--csv",
        csv_path.to_str().unwrap(),
        // An empty directory stands for a machine without AMD cards.
        "--drm-root",
        dir.path().to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("AMD: no amdgpu cards under "), "{stdout}");
    if nvidia_absent(&stdout) {
        assert!(stdout.contains("no GPU present"), "{stdout}");
        assert!(stdout.contains("NVIDIA: library not found"), "{stdout}");
    }
    assert!(stdout.contains("4 samples"), "{stdout}");

    let mut reader = csv::Reader::from_path(&csv_path).unwrap();
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    for col in [
        "timestamp_utc",
        "cpu_pct",
        "process_cpu_pct",
        "rss_mib",
        "cpu0_pct",
        "trial",
    ] {
        assert!(
            header.iter().any(|h| h == col),
            "no column {col} in {header:?}"
        );
    }
    let rss = header.iter().position(|h| h == "rss_mib").unwrap();
    let ts = header.iter().position(|h| h == "timestamp_utc").unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r.len(), header.len());
        let mib: f64 = r[rss].parse().unwrap();
        assert!(mib > 0.0, "the monitor itself has resident memory");
        assert!(r[ts].ends_with('Z'), "UTC timestamps: {}", &r[ts]);
    }
    assert!(
        rows.windows(2).all(|w| w[0][ts] < w[1][ts]),
        "timestamps increase"
    );
}

#[test]
fn amd_fixture_card_appears_in_table_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let csv_path = dir.path().join("amd.csv");
    let out = tradetune(&[
        "monitor",
        "--interval",
        "0.5",
        "--duration",
        "1",
        "--csv",
        csv_path.to_str().unwrap(),
        "--drm-root",
        &fixture("rx7900gre"),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("AMD: 1 GPU"), "{stdout}");
    if !nvidia_absent(&stdout) {
        return;
    }
    assert!(
        stdout.contains("gpu0: AMD Radeon RX 7900 GRE (PCI 0000:03:00.0, 16368 MiB)"),
        "{stdout}"
    );
    // The dmon-like line: util 83 %, mem 41 %, 9216 MiB, 66 °C, 212 W, 2124 / 1124 MHz.
    let line = stdout
        .lines()
        .find(|l| l.contains(" gpu0 "))
        .unwrap_or_else(|| panic!("no gpu0 line in\n{stdout}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        &cells[1..],
        ["gpu0", "83", "41", "9216", "66", "212.0", "2124", "1124"]
    );

    let mut reader = csv::Reader::from_path(&csv_path).unwrap();
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let row = reader.records().next().unwrap().unwrap();
    let col = |name: &str| row[header.iter().position(|h| h == name).unwrap()].to_string();
    assert_eq!(col("gpu0_util_pct"), "83");
    assert_eq!(col("gpu0_mem_used_mib"), "9216");
    assert_eq!(col("gpu0_temp_c"), "66");
    assert_eq!(col("gpu0_power_w"), "212");
    assert_eq!(col("gpu0_sm_clock_mhz"), "2124");
    assert_eq!(col("gpu0_throttle_mask"), "");
}

#[test]
fn json_lines_status_then_samples() {
    let dir = tempfile::tempdir().unwrap();
    let out = tradetune(&[
        "monitor",
        "--interval",
        "0.5",
        "--duration",
        "1",
        "--json",
        "--drm-root",
        dir.path().to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["type"], "status");
    assert!(lines[0]["probes"].as_array().unwrap().len() == 2);
    for (i, s) in lines[1..].iter().enumerate() {
        assert_eq!(s["type"], "sample");
        assert_eq!(s["seq"], i as u64 + 1);
        assert!(s["devices"]["host"]["rss_mib"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn interval_out_of_range_is_a_clear_error() {
    let out = tradetune(&["monitor", "--interval", "0.01", "--duration", "1"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--interval"), "{stderr}");
    assert!(stderr.contains("out of range"), "{stderr}");
}

/// A `--pid` of no process is refused at once, naming the flag, instead of a run of `-`.
#[test]
fn a_pid_of_no_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = tradetune(&[
        "monitor",
        "--pid",
        "4294967294",
        "--interval",
        "0.1",
        "--duration",
        "0.2",
        "--drm-root",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--pid 4294967294: no such process"),
        "{stderr}"
    );
}
