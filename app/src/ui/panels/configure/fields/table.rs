//! The table itself: every field of the draft the Configure panel knows, in the order the
//! panel's two columns show them (fields set only by a search or a preset sit in their section
//! without a widget). Each field is named once: `number!` and `field!` make both its dotted
//! name and its place in the draft from that one name.

use tradetune_engine::device::precision::Precision;
use tradetune_engine::eval::Objective;
use tradetune_engine::ppo::{ActivationKind, LrSchedule};
use tradetune_engine::study::Direction;
use tradetune_engine::study::file::{DIRECTIONS, PrunerKind, SamplerKind, direction_name};

use super::{Choice, Field, Kind, Line, Number};
use crate::ui::draft::Draft;

fn debug<T: std::fmt::Debug>(v: &T) -> String {
    format!("{v:?}")
}

fn display<T: std::fmt::Display>(v: &T) -> String {
    v.to_string()
}

fn direction(d: &Direction) -> String {
    direction_name(*d).to_owned()
}

/// The left column: the environment, then the study (its budget, devices, sampler, pruner).
pub static LEFT: &[Line] = &[
    Line::Heading("Environment"),
    number!(
        "n_envs",
        env.n_envs,
        1..=65_536,
        "environments stepped together (N)"
    ),
    number!(
        "initial_cash",
        env.initial_cash,
        1.0..=1e12,
        "cash each episode starts with"
    ),
    number!(
        "buy_fee",
        env.buy_fee,
        0.0..=0.5,
        "fee on the value bought (0.0025 = 0.25 %)"
    ),
    number!(
        "sell_fee",
        env.sell_fee,
        0.0..=0.5,
        "fee on the value sold (0.0025 = 0.25 %)"
    ),
    number!(
        "min_order_value",
        env.min_order_value,
        0.0..=1e9,
        "smallest order, in cash, that is executed"
    ),
    field!(
        "min_order_values",
        env.min_order_values,
        Kind::SearchOnly,
        "per-asset minimum order values (empty: min_order_value for all)"
    ),
    field!(
        "max_buy_fraction",
        env.max_buy_fraction,
        Kind::SearchOnly,
        "largest fraction of the cash one step's buys may spend, fees included"
    ),
    field!(
        "action_scale",
        env.action_scale,
        Kind::SearchOnly,
        "cash value of an action of 1.0"
    ),
    number!(
        "trailing_stop_pct",
        env.trailing_stop_pct,
        0.0..=1.0,
        "sell a position this fraction below its highest price since opened (0: off)"
    ),
    number!(
        "cooldown_bars",
        env.cooldown_bars,
        0..=10_000,
        "a position held this many bars without a trade is partly sold (0: off)"
    ),
    field!(
        "cooldown_sell_fraction",
        env.cooldown_sell_fraction,
        Kind::SearchOnly,
        "fraction of the position sold when the cooldown fires"
    ),
    number!(
        "lookback",
        env.lookback,
        1..=512,
        "bars of features in an observation"
    ),
    field!(
        "reward",
        env.reward,
        Kind::SearchOnly,
        "what the reward measures"
    ),
    field!(
        "reward_scale",
        env.reward_scale,
        Kind::SearchOnly,
        "multiplier of the reward (100: a 1 % excess return is a reward of 1)"
    ),
    number!(
        "episode_bars",
        env.episode_bars,
        0..=1_000_000,
        "steps per episode (0: half the split)"
    ),
    field!("start", env.start, Kind::SearchOnly, "where episodes start"),
    number!(
        "env seed",
        env.seed,
        0..=u64::MAX,
        "seed of the episodes' start offsets"
    ),
    field!(
        "compat_finrl_crypto",
        env.compat_finrl_crypto,
        Kind::SearchOnly,
        "reproduce FinRL_Crypto's environment quirks"
    ),
    field!(
        "placement",
        env.placement,
        Kind::SearchOnly,
        "where the environment steps: auto, device or host"
    ),
    Line::Problems("env"),
    Line::Heading("Study"),
    number!(
        "total_timesteps",
        train.total_timesteps,
        1..=10_000_000_000,
        "samples each trial trains on"
    ),
    number!(
        "eval_every",
        train.eval_every,
        0..=100_000,
        "updates between evaluations on the validation split (0: only at the end)"
    ),
    Line::Problems("train"),
    field!(
        "study name",
        study.name,
        Kind::Text,
        "the study's name in the database"
    ),
    number!(
        "n_trials",
        study.n_trials,
        1..=100_000,
        "trials this run adds"
    ),
    number!(
        "workers",
        study.workers,
        1..=64,
        "trials run at the same time"
    ),
    Line::Field(Field {
        label: "devices",
        path: path!(study.devices),
        kind: Kind::Devices,
        help: "the devices trials run on; each worker is bound to one",
    }),
    number!(
        "memory_fraction",
        study.memory_fraction,
        0.01..=1.0,
        "share of a device's memory the study's workers may use"
    ),
    field!(
        "objective",
        study.objective,
        Kind::Choice(&Objective::ALL, display),
        "what a trial's value measures on the validation split"
    ),
    field!(
        "direction",
        study.direction,
        Kind::Choice(&DIRECTIONS, direction),
        "whether larger or smaller values are better"
    ),
    field!(
        "sampler",
        sampler.kind,
        Kind::Choice(SamplerKind::ALL, display),
        "how each trial's parameters are chosen"
    ),
    number!(
        "sampler seed",
        sampler.seed,
        0..=u64::MAX,
        "seed of the sampler"
    ),
    Line::Problems("sampler"),
    field!(
        "pruner",
        pruner.kind,
        Kind::Choice(PrunerKind::ALL, display),
        "when a trial that is doing badly is stopped early"
    ),
    Line::Problems("pruner"),
    Line::Problems("study"),
];

/// The right column: PPO and its network.
pub static RIGHT: &[Line] = &[
    Line::Heading("PPO"),
    number!(
        "learning_rate",
        ppo.learning_rate,
        1e-7..=1.0,
        "Adam learning rate (at the start, for a linear schedule)"
    ),
    field!(
        "lr_schedule",
        ppo.lr_schedule,
        Kind::Choice(&[LrSchedule::Constant, LrSchedule::Linear], debug),
        "how the learning rate changes with progress"
    ),
    number!(
        "n_steps",
        ppo.n_steps,
        1..=1_000_000,
        "steps per environment per rollout"
    ),
    number!(
        "batch_size",
        ppo.batch_size,
        1..=10_000_000,
        "minibatch size of the update"
    ),
    number!(
        "n_epochs",
        ppo.n_epochs,
        1..=1_000,
        "passes over the rollout per update"
    ),
    number!("gamma", ppo.gamma, 0.0..=1.0, "discount factor"),
    number!("gae_lambda", ppo.gae_lambda, 0.0..=1.0, "GAE λ"),
    number!(
        "clip_range",
        ppo.clip_range,
        0.0..=10.0,
        "clipping ε of the surrogate objective"
    ),
    field!(
        "clip_range_vf",
        ppo.clip_range_vf,
        Kind::SearchOnly,
        "clipping of the value prediction (none: no clipping)"
    ),
    number!(
        "ent_coef",
        ppo.ent_coef,
        0.0..=10.0,
        "entropy bonus coefficient"
    ),
    number!("vf_coef", ppo.vf_coef, 0.0..=10.0, "value loss coefficient"),
    number!(
        "max_grad_norm",
        ppo.max_grad_norm,
        0.0..=1e6,
        "global L2 norm the gradient is clipped to"
    ),
    field!(
        "target_kl",
        ppo.target_kl,
        Kind::SearchOnly,
        "stop an update early when the approximate KL exceeds 1.5 × target_kl"
    ),
    field!("adam_eps", ppo.adam_eps, Kind::SearchOnly, "Adam ε"),
    number!(
        "ppo seed",
        ppo.seed,
        0..=u64::MAX,
        "seed of initialisation, action sampling and shuffling"
    ),
    field!(
        "normalize_advantage",
        ppo.normalize_advantage,
        Kind::Toggle,
        "normalise advantages per minibatch"
    ),
    field!(
        "normalize_obs",
        ppo.normalize_obs,
        Kind::Toggle,
        "running normalisation of observations"
    ),
    field!(
        "normalize_reward",
        ppo.normalize_reward,
        Kind::Toggle,
        "running normalisation of rewards"
    ),
    field!(
        "clip_obs",
        ppo.clip_obs,
        Kind::SearchOnly,
        "normalised observations are clipped to ± this"
    ),
    field!(
        "clip_reward",
        ppo.clip_reward,
        Kind::SearchOnly,
        "normalised rewards are clipped to ± this"
    ),
    field!(
        "precision",
        ppo.precision,
        Kind::Choice(&[Precision::F32, Precision::Bf16, Precision::F16], display),
        "compute precision of the passes (parameters stay f32)"
    ),
    field!(
        "initial_loss_scale",
        ppo.initial_loss_scale,
        Kind::SearchOnly,
        "initial loss scale for f16"
    ),
    field!(
        "loss_scale_growth_interval",
        ppo.loss_scale_growth_interval,
        Kind::SearchOnly,
        "clean f16 steps after which the loss scale doubles"
    ),
    field!(
        "activation",
        ppo.policy.activation,
        Kind::Choice(
            &[
                ActivationKind::Tanh,
                ActivationKind::Relu,
                ActivationKind::Elu,
                ActivationKind::Silu,
            ],
            debug
        ),
        "activation of the hidden layers"
    ),
    field!(
        "log_std_init",
        ppo.policy.log_std_init,
        Kind::SearchOnly,
        "initial log standard deviation of the policy"
    ),
    field!(
        "ortho_init",
        ppo.policy.ortho_init,
        Kind::SearchOnly,
        "orthogonal initialisation of the weights"
    ),
    field!(
        "net_arch.pi",
        ppo.policy.net_arch.pi,
        Kind::Widths,
        "hidden layers of the policy network"
    ),
    field!(
        "net_arch.vf",
        ppo.policy.net_arch.vf,
        Kind::Widths,
        "hidden layers of the value network"
    ),
    Line::Problems("ppo"),
];
