//! `tradetune bench train`: ours and a peer measured in the same run (`--peer`), without torch: a
//! fake peer (a shell script speaking the peer's JSON protocol) stands in for Stable-Baselines3.
//! No timing assertion: only that both figures, the ratio of the two and the run's context are
//! printed, and that without a peer no ratio is.

use crate::common;

use std::path::Path;

use common::{scratch, text, tradetune};

/// A peer that logs its arguments to `args.log` beside it and prints a fixed result after a
/// line of chatter (the result is the last line).
fn fake_peer(dir: &Path) -> std::path::PathBuf {
    common::fake_peer(
        dir,
        "{\"peer\": \"fake-sb3\", \"versions\": {\"torch\": \"0.0-fake\"}, \"threads\": 1, \"samples\": 256, \"seconds\": 0.256, \"samples_per_second\": 1000.0}",
    )
}

#[test]
fn bench_train_measures_the_peer_in_the_same_run() {
    let dir = scratch("cli_bench_train", "peer");
    let peer = fake_peer(&dir);
    let peer_s = peer.to_str().unwrap();
    let base = [
        "bench",
        "train",
        "--configs",
        "tiny",
        "--updates",
        "1",
        "--repeat",
        "2",
    ];

    // JSON: both sides' runs, min/median/max, the ratio of the medians, the context.
    let mut a: Vec<&str> = base.to_vec();
    a.extend(["--peer", peer_s, "--peer-threads", "1", "--json"]);
    let o = tradetune(&a);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["configs"][0];
    assert_eq!(c["ours"]["runs"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(c["peer"]["runs"].as_array().unwrap().len(), 2, "{v}");
    let ours = c["ours"]["samples_per_second"]["median"].as_f64().unwrap();
    assert!(ours > 0.0, "{v}");
    assert_eq!(
        c["peer"]["samples_per_second"]["median"].as_f64().unwrap(),
        1000.0
    );
    let ratio = c["ratio_median"].as_f64().unwrap();
    assert!((ratio - ours / 1000.0).abs() <= 1e-9 * ratio.abs(), "{v}");
    assert!(c["ours"]["update_gflops_per_second"].as_f64().unwrap() > 0.0);
    assert!(v["matmul_probe"]["peak_gflops"].as_f64().unwrap() > 0.0);
    assert_eq!(v["peer_threads"], 1);
    assert!(v["ours_threads"].as_u64().unwrap() >= 1);
    if Path::new("/proc/loadavg").exists() {
        assert!(v["load_average_before"].is_string(), "{v}");
        assert!(v["load_average_after"].is_string(), "{v}");
    }
    // The peer ran the built-in script (it existed) with the configuration's arguments.
    let log = std::fs::read_to_string(dir.join("args.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    for l in &lines {
        assert!(l.starts_with("script-exists "), "{l}");
        assert!(l.contains("sb3_ppo.py --n-envs 8 --n-steps 32 --batch-size 128 --n-epochs 2 --net 16 --assets 7 --features 16 --updates 1 --threads 1"), "{l}");
    }

    // Text: both figures with min/median/max, the ratio, threads and the load.
    let mut a: Vec<&str> = base.to_vec();
    a.extend(["--peer", peer_s, "--peer-threads", "1"]);
    let o = tradetune(&a);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.starts_with("tiny "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("1000/1000/1000"), "{out}");
    assert!(row.trim_end().ends_with('x'), "{out}");
    assert!(out.contains("rayon threads"), "{out}");
    assert!(
        out.contains("peer: fake-sb3 (torch 0.0-fake), 1 threads"),
        "{out}"
    );
    assert!(out.contains("load average before"), "{out}");
    assert!(out.contains("load average after"), "{out}");
    assert!(out.contains("of the measured matmul peak"), "{out}");

    // Without a peer: our figures only, no ratio.
    let o = tradetune(&base);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.starts_with("tiny "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.trim_end().ends_with('-'), "{out}");
    assert!(!out.contains("peer:"), "{out}");
    assert!(!out.contains("target"), "{out}");
}

#[test]
fn a_failing_peer_is_an_error_naming_it() {
    let dir = scratch("cli_bench_train", "failing");
    let peer = dir.join("broken-python");
    std::fs::write(
        &peer,
        "#!/bin/sh\necho 'No module named torch' >&2\nexit 3\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&peer, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let o = tradetune(&[
        "bench",
        "train",
        "--configs",
        "tiny",
        "--updates",
        "1",
        "--repeat",
        "1",
        "--peer",
        peer.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("broken-python"), "{err}");
    assert!(err.contains("No module named torch"), "{err}");
    assert!(err.contains("benches/peers/README.md"), "{err}");

    // A peer that prints no result line is refused by name, too.
    std::fs::write(&peer, "#!/bin/sh\necho 'hello'\n").unwrap();
    let o = tradetune(&[
        "bench",
        "train",
        "--configs",
        "tiny",
        "--updates",
        "1",
        "--repeat",
        "1",
        "--peer",
        peer.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("not the peer's JSON result"), "{err}");
}

/// `--compare-burn-update`: ours again with every update through burn's autodiff, in the same
/// run, and how many times faster the host step's runs were; the probe covers both kernels.
#[test]
fn bench_train_compares_the_two_update_paths_in_one_run() {
    let base = [
        "bench",
        "train",
        "--configs",
        "tiny",
        "--updates",
        "1",
        "--repeat",
        "2",
        "--compare-burn-update",
    ];
    let mut a: Vec<&str> = base.to_vec();
    a.push("--json");
    let o = tradetune(&a);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["configs"][0];
    assert_eq!(c["ours"]["runs"].as_array().unwrap().len(), 2, "{v}");
    let burn = &c["burn_update"];
    assert_eq!(burn["runs"].as_array().unwrap().len(), 2, "{v}");
    assert!(
        burn["runs"][0]["config"]["burn_update"].as_bool().unwrap(),
        "{v}"
    );
    assert!(
        !c["ours"]["runs"][0]["config"]["burn_update"]
            .as_bool()
            .unwrap(),
        "{v}"
    );
    let ours = c["ours"]["samples_per_second"]["median"].as_f64().unwrap();
    let theirs = burn["samples_per_second"]["median"].as_f64().unwrap();
    let ratio = burn["ours_over_burn_update"].as_f64().unwrap();
    assert!((ratio - ours / theirs).abs() <= 1e-9 * ratio, "{v}");
    // The CPU device's probe times the host kernels too, and the peak is the best of all.
    let probe = &v["matmul_probe"];
    let best = probe["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .chain(probe["host_sizes"].as_array().unwrap())
        .map(|s| s[1].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(probe["host_sizes"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(probe["peak_gflops"].as_f64().unwrap(), best, "{v}");

    let o = tradetune(&base);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("burn update (every update through burn's autodiff):"),
        "{out}"
    );
    assert!(out.contains("ours with the host step"), "{out}");
    assert!(
        out.contains("the host update's kernels, one product per thread"),
        "{out}"
    );
}
