//! `tradetune bench gpu` as a smoke test (no timing assertion): the tiny configuration with the
//! environment on the host and on the device, in f32 and f16, on wgpu (Mesa's software Vulkan
//! in CI). Without a wgpu adapter it runs on the CPU device instead, unless
//! `TRADETUNE_REQUIRE_GPU=1` makes that a failure.

use crate::common;

use common::{text, tradetune, wgpu_here};

#[test]
fn bench_gpu_runs_each_placement_and_precision() {
    // Without an adapter: on the CPU device instead.
    let device = if wgpu_here("bench_gpu on wgpu") {
        "wgpu"
    } else {
        "cpu"
    };
    let o = tradetune(&[
        "bench",
        "gpu",
        "--device",
        device,
        "--configs",
        "tiny",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 4, "{v}");
    let mut seen = Vec::new();
    for r in runs {
        let res = &r["result"];
        assert!(res["samples_per_second"].as_f64().unwrap() > 0.0, "{r}");
        assert!(res["phases"]["env_step"].as_f64().unwrap() > 0.0, "{r}");
        assert!(res["phases"]["update"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["gpus"].is_array(), "{r}");
        seen.push((
            res["config"]["placement"].as_str().unwrap().to_owned(),
            res["config"]["precision"].as_str().unwrap().to_owned(),
        ));
        if device == "wgpu" {
            // wgpu reports its memory pool.
            assert!(res["pool_reserved_bytes"].as_u64().unwrap() > 0, "{r}");
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            ("device".into(), "f16".into()),
            ("device".into(), "f32".into()),
            ("host".into(), "f16".into()),
            ("host".into(), "f32".into()),
        ]
    );

    // A configuration it does not know is refused by name.
    let o = tradetune(&["bench", "gpu", "--device", device, "--configs", "huge"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("unknown configuration 'huge'"));
}
