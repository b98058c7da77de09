//! The bundled presets: each parses, and every configuration it can sample fits its device
//! class according to the memory estimator (and is a valid PPO configuration).

use tradetune_engine::device::memory::{MemoryBudget, MemoryEstimate, fmt_bytes};
use tradetune_engine::study::config_path::apply_value;
use tradetune_engine::study::file::StudyFile;
use tradetune_engine::study::ppo_trial::{PpoTrial, PpoTrialConfig, parse_study_file};
use tradetune_engine::study::preset;

/// Every combination of the searched parameters' extreme values (range ends, every choice).
fn corner_configs(f: &StudyFile) -> Vec<serde_json::Value> {
    let mut configs = vec![f.base_config.clone()];
    for (name, values) in f.extreme_values() {
        configs = configs
            .into_iter()
            .flat_map(|c| {
                let name = &name;
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    apply_value(&mut c, name, v).unwrap();
                    c
                })
            })
            .collect();
    }
    configs
}

/// The largest estimate over the preset's corners, and its budget: (estimate, budget, corners).
fn worst_case(f: &StudyFile, memory_bytes: u64) -> (MemoryEstimate, MemoryBudget, usize) {
    let base = PpoTrialConfig::from_json(&f.base_config).unwrap();
    let objective = f.study.objective;
    let trial = PpoTrial::load(&f.data, &f.split, &base, objective).unwrap();
    let (obs, act) = trial.sizes(&base.env).unwrap();
    // The runner's own divisor: the trials on one device at once (one where its workers take
    // turns), the most of any device.
    let rc = f.runner_config("unused.db").unwrap();
    let sharing = rc.budget_shared_by().into_iter().max().unwrap();
    let budget = MemoryBudget::new(memory_bytes, rc.memory_fraction, sharing).unwrap();
    let corners = corner_configs(f);
    let mut worst = MemoryEstimate::default();
    for c in &corners {
        let cfg = PpoTrialConfig::from_json(c).unwrap();
        cfg.ppo
            .validate(cfg.env.n_envs)
            .unwrap_or_else(|e| panic!("{}: a sampled config is invalid: {e}", f.path));
        let e = cfg.ppo.memory_estimate(cfg.env.n_envs, obs, act, 0);
        if e.total() > worst.total() {
            worst = e;
        }
    }
    (worst, budget, corners.len())
}

#[test]
fn every_preset_fits_its_device_class() {
    let presets = preset::bundled().unwrap();
    let names: Vec<&str> = presets.iter().map(|p| p.name).collect();
    assert_eq!(names, ["rtx4080", "rtx4080_laptop", "rx7900gre", "cpu"]);
    for p in &presets {
        let (worst, budget, corners) = worst_case(&p.study, p.memory_bytes);
        println!(
            "{:<15} {:<42} worst of {corners:>4} corners: {:>10} of a {:>10} budget",
            p.name,
            p.device_class,
            fmt_bytes(worst.total()),
            fmt_bytes(budget.bytes)
        );
        budget
            .check(&worst)
            .unwrap_or_else(|e| panic!("preset {} does not fit {}: {e}", p.name, p.device_class));
    }
    // The 4080 keeps the user's measured setup.
    let rtx = &presets[0].study;
    assert_eq!(rtx.base_config["env"]["n_envs"], 32);
    assert_eq!(rtx.base_config["ppo"]["n_steps"], 4096);
    assert_eq!(
        rtx.base_config["ppo"]["policy"]["net_arch"]["pi"],
        serde_json::json!([2048, 1024, 512])
    );
    assert_eq!(rtx.study.memory_fraction, 0.8);
    assert!(
        preset::find("rtx9090")
            .unwrap_err()
            .to_string()
            .contains("rx7900gre")
    );
}

#[test]
fn a_preset_that_cannot_fit_fails_the_check() {
    // The laptop preset with networks 16 times wider: its optimiser state alone outgrows 12 GB.
    let text = preset::FILES[1]
        .1
        .replace("[2048, 1024, 512]", "[32768, 16384, 8192]");
    let f = parse_study_file(&text, "wide.toml").unwrap();
    let (worst, budget, _) = worst_case(&f, 12 << 30);
    assert!(
        budget.check(&worst).is_err(),
        "{}",
        fmt_bytes(worst.total())
    );
}
