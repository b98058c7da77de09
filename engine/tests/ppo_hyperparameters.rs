//! No dead hyperparameters: changing any field of `PpoConfig` changes what the learner does
//! (the parameters after one update differ), and every field is covered by this test.

use std::collections::BTreeSet;

use burn::tensor::Device;
use tradetune_engine::device::precision::Precision;
use tradetune_engine::ppo::sanity_env::TargetEnv;
use tradetune_engine::ppo::{
    ActivationKind, ActorCriticConfig, HostEnv, LrSchedule, NetArch, PpoConfig, Trainer,
};

const N_ENVS: usize = 4;

/// A base where every switchable feature is on, so each field has something to act on.
fn base() -> PpoConfig {
    PpoConfig::new()
        .with_learning_rate(1e-2)
        .with_n_steps(16)
        .with_batch_size(16)
        .with_n_epochs(3)
        .with_clip_range_vf(Some(0.2))
        .with_normalize_obs(true)
        .with_normalize_reward(true)
        .with_seed(3)
        .with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(vec![8]).with_vf(vec![8])),
        )
}

/// Parameters after training `cfg` for one rollout's worth of samples (of the base config,
/// so a different `n_steps` still means one update).
fn params_after(cfg: PpoConfig) -> Vec<f32> {
    let device = Device::flex();
    let env = HostEnv::new(TargetEnv::new(N_ENVS, 4, 1), &device);
    let budget = base().n_steps * N_ENVS;
    let mut trainer = Trainer::new(cfg, env, &device).unwrap();
    trainer.learn(budget, &mut |_| {}).unwrap();
    trainer.model().flat_params().unwrap()
}

#[test]
fn every_ppo_field_changes_the_learner() {
    let b = base;
    let policy = |f: fn(ActorCriticConfig) -> ActorCriticConfig| {
        let cfg = base();
        let p = f(cfg.policy.clone());
        cfg.with_policy(p)
    };
    let f16 = || base().with_precision(Precision::F16);
    // (field, reference config, changed config)
    let cases: Vec<(&str, PpoConfig, PpoConfig)> = vec![
        ("learning_rate", b(), b().with_learning_rate(1e-3)),
        ("lr_schedule", b(), b().with_lr_schedule(LrSchedule::Linear)),
        ("n_steps", b(), b().with_n_steps(8)),
        ("batch_size", b(), b().with_batch_size(32)),
        ("n_epochs", b(), b().with_n_epochs(1)),
        ("gamma", b(), b().with_gamma(0.5)),
        ("gae_lambda", b(), b().with_gae_lambda(0.5)),
        ("clip_range", b(), b().with_clip_range(0.01)),
        ("clip_range_vf", b(), b().with_clip_range_vf(None)),
        (
            "normalize_advantage",
            b(),
            b().with_normalize_advantage(false),
        ),
        ("ent_coef", b(), b().with_ent_coef(0.1)),
        ("vf_coef", b(), b().with_vf_coef(2.0)),
        ("max_grad_norm", b(), b().with_max_grad_norm(0.01)),
        ("target_kl", b(), b().with_target_kl(Some(1e-7))),
        ("adam_eps", b(), b().with_adam_eps(1.0)),
        ("seed", b(), b().with_seed(4)),
        ("normalize_obs", b(), b().with_normalize_obs(false)),
        ("normalize_reward", b(), b().with_normalize_reward(false)),
        ("clip_obs", b(), b().with_clip_obs(0.1)),
        ("clip_reward", b(), b().with_clip_reward(0.01)),
        ("precision", b(), b().with_precision(Precision::Bf16)),
        (
            "initial_loss_scale",
            f16(),
            f16().with_initial_loss_scale(1e30),
        ),
        (
            "loss_scale_growth_interval",
            f16(),
            f16().with_loss_scale_growth_interval(1),
        ),
        (
            "policy.net_arch",
            b(),
            policy(|p| p.with_net_arch(NetArch::new().with_pi(vec![8, 8]).with_vf(vec![8]))),
        ),
        (
            "policy.activation",
            b(),
            policy(|p| p.with_activation(ActivationKind::Relu)),
        ),
        (
            "policy.log_std_init",
            b(),
            policy(|p| p.with_log_std_init(-1.0)),
        ),
        (
            "policy.ortho_init",
            b(),
            policy(|p| p.with_ortho_init(false)),
        ),
    ];

    // Every field of the config (and of its policy) has a case.
    let json = serde_json::to_value(PpoConfig::new()).unwrap();
    let mut fields: BTreeSet<String> = BTreeSet::new();
    for (k, v) in json.as_object().unwrap() {
        if k == "policy" {
            for pk in v.as_object().unwrap().keys() {
                fields.insert(format!("policy.{pk}"));
            }
        } else {
            fields.insert(k.clone());
        }
    }
    let covered: BTreeSet<String> = cases.iter().map(|(n, _, _)| n.to_string()).collect();
    assert_eq!(fields, covered, "a PpoConfig field has no effect test");

    let mut dead = Vec::new();
    for (name, reference, changed) in cases {
        assert_ne!(reference, changed, "{name}: the variant must differ");
        let a = params_after(reference);
        let c = params_after(changed);
        if a == c {
            dead.push(name);
        }
    }
    assert!(
        dead.is_empty(),
        "fields that did not change the learner: {dead:?}"
    );
}
