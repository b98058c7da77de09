//! The table of settings (data): every leaf of the trial configuration (`env`, `ppo`, `train`,
//! in the order the Configure panel lists them) and the study settings the panel edits.

use super::{Range, Setting, Type};

const fn range(low: f64, high: f64) -> Option<Range> {
    Some(Range { low, high })
}

/// A setting that must be given (not `none`).
const fn set(
    name: &'static str,
    label: &'static str,
    ty: Type,
    range: Option<Range>,
    doc: &'static str,
) -> Setting {
    Setting {
        name,
        label,
        ty,
        optional: false,
        range,
        doc,
    }
}

/// A setting that may be `none` (absent).
const fn opt(
    name: &'static str,
    label: &'static str,
    ty: Type,
    range: Option<Range>,
    doc: &'static str,
) -> Setting {
    Setting {
        name,
        label,
        ty,
        optional: true,
        range,
        doc,
    }
}

use Type::{Bool, Choice, Devices, Float, FloatList, Int, Text, Widths};

#[rustfmt::skip]
pub(super) static SETTINGS: &[Setting] = &[
    // The environment.
    set("env.n_envs", "n_envs", Int, range(1.0, 65_536.0), "environments stepped together (N)"),
    set("env.initial_cash", "initial_cash", Float, range(1.0, 1e9), "cash each episode starts with"),
    set("env.buy_fee", "buy_fee", Float, range(0.0, 0.5), "fee on the value bought (0.0025 = 0.25 %)"),
    set("env.sell_fee", "sell_fee", Float, range(0.0, 0.5), "fee on the value sold (0.0025 = 0.25 %)"),
    set("env.min_order_value", "min_order_value", Float, range(0.0, 1e9), "smallest order, in cash, that is executed"),
    set("env.min_order_values", "min_order_values", FloatList, range(0.0, 1e9), "per-asset minimum order values (empty: min_order_value for all)"),
    set("env.max_buy_fraction", "max_buy_fraction", Float, range(0.0, 1.0), "largest fraction of the cash one step's buys may spend, fees included"),
    set("env.action_scale", "action_scale", Float, range(0.0, 1e12), "cash value of an action of 1.0"),
    set("env.trailing_stop_pct", "trailing_stop_pct", Float, range(0.0, 1.0), "sell a position this fraction below its highest price since opened (0: off)"),
    set("env.cooldown_bars", "cooldown_bars", Int, range(0.0, 10_000.0), "a position held this many bars without a trade is partly sold (0: off)"),
    set("env.cooldown_sell_fraction", "cooldown_sell_fraction", Float, range(0.0, 1.0), "fraction of the position sold when the cooldown fires"),
    set("env.lookback", "lookback", Int, range(1.0, 512.0), "bars of features in an observation"),
    set("env.reward", "reward", Choice(&["excess_vs_equal_weight", "portfolio_change", "log_return"]), None, "what the reward measures"),
    set("env.reward_scale", "reward_scale", Float, None, "multiplier of the reward (100: a 1 % excess return is a reward of 1)"),
    set("env.episode_bars", "episode_bars", Int, range(0.0, 1_000_000.0), "steps per episode (0: half the split)"),
    set("env.start", "start", Choice(&["random", "strided", "fixed"]), None, "where episodes start"),
    set("env.seed", "env seed", Int, None, "seed of the episodes' start offsets"),
    set("env.compat_finrl_crypto", "compat_finrl_crypto", Bool, None, "reproduce FinRL_Crypto's environment quirks"),
    opt("env.placement", "placement", Choice(&["auto", "device", "host"]), None, "where the environment steps: auto, device or host"),
    // How long a trial trains.
    set("train.total_timesteps", "total_timesteps", Int, range(1.0, 1e10), "samples each trial trains on"),
    set("train.eval_every", "eval_every", Int, range(0.0, 100_000.0), "updates between evaluations on the validation split (0: only at the end)"),
    // PPO and its network.
    set("ppo.learning_rate", "learning_rate", Float, range(1e-7, 1.0), "Adam learning rate (at the start, for a linear schedule)"),
    set("ppo.lr_schedule", "lr_schedule", Choice(&["constant", "linear"]), None, "how the learning rate changes with progress"),
    set("ppo.n_steps", "n_steps", Int, range(1.0, 1_000_000.0), "steps per environment per rollout"),
    set("ppo.batch_size", "batch_size", Int, range(1.0, 1e7), "minibatch size of the update"),
    set("ppo.n_epochs", "n_epochs", Int, range(1.0, 1_000.0), "passes over the rollout per update"),
    set("ppo.gamma", "gamma", Float, range(0.0, 1.0), "discount factor"),
    set("ppo.gae_lambda", "gae_lambda", Float, range(0.0, 1.0), "GAE λ"),
    set("ppo.clip_range", "clip_range", Float, range(0.0, 10.0), "clipping ε of the surrogate objective"),
    opt("ppo.clip_range_vf", "clip_range_vf", Float, range(0.0, 10.0), "clipping of the value prediction (none: no clipping)"),
    set("ppo.ent_coef", "ent_coef", Float, range(0.0, 10.0), "entropy bonus coefficient"),
    set("ppo.vf_coef", "vf_coef", Float, range(0.0, 10.0), "value loss coefficient"),
    set("ppo.max_grad_norm", "max_grad_norm", Float, range(0.0, 1e6), "global L2 norm the gradient is clipped to"),
    opt("ppo.target_kl", "target_kl", Float, range(0.0, 10.0), "stop an update early when the approximate KL exceeds 1.5 × target_kl"),
    set("ppo.adam_eps", "adam_eps", Float, range(0.0, 1.0), "Adam ε"),
    set("ppo.seed", "ppo seed", Int, None, "seed of initialisation, action sampling and shuffling"),
    set("ppo.normalize_advantage", "normalize_advantage", Bool, None, "normalise advantages per minibatch"),
    set("ppo.normalize_obs", "normalize_obs", Bool, None, "running normalisation of observations"),
    set("ppo.normalize_reward", "normalize_reward", Bool, None, "running normalisation of rewards"),
    set("ppo.clip_obs", "clip_obs", Float, range(0.0, 1e6), "normalised observations are clipped to ± this"),
    set("ppo.clip_reward", "clip_reward", Float, range(0.0, 1e6), "normalised rewards are clipped to ± this"),
    set("ppo.precision", "precision", Choice(&["f32", "bf16", "f16"]), None, "compute precision of the passes (parameters stay f32)"),
    set("ppo.initial_loss_scale", "initial_loss_scale", Float, range(1.0, 1e12), "initial loss scale for f16"),
    set("ppo.loss_scale_growth_interval", "loss_scale_growth_interval", Int, range(1.0, 1e9), "clean f16 steps after which the loss scale doubles"),
    set("ppo.policy.activation", "activation", Choice(&["tanh", "relu", "elu", "silu"]), None, "activation of the hidden layers"),
    set("ppo.policy.log_std_init", "log_std_init", Float, range(-20.0, 20.0), "initial log standard deviation of the policy"),
    set("ppo.policy.ortho_init", "ortho_init", Bool, None, "orthogonal initialisation of the weights"),
    set("ppo.policy.net_arch.pi", "net_arch.pi", Widths, range(1.0, 65_536.0), "hidden layers of the policy network"),
    set("ppo.policy.net_arch.vf", "net_arch.vf", Widths, range(1.0, 65_536.0), "hidden layers of the value network"),
    // The study (its file's [study], [sampler] and [pruner] tables).
    set("study.name", "study name", Text, None, "the study's name in the database"),
    set("study.n_trials", "n_trials", Int, range(1.0, 100_000.0), "trials this run adds"),
    set("study.workers", "workers", Int, range(1.0, 64.0), "trials run at the same time"),
    set("study.devices", "devices", Devices, None, "the devices trials run on; each worker is bound to one"),
    set("study.memory_fraction", "memory_fraction", Float, range(0.01, 1.0), "share of a device's memory the study's workers may use"),
    set("study.objective", "objective", Choice(&["sharpe_excess", "sharpe", "sortino_excess", "sortino", "excess_return", "total_return"]), None, "what a trial's value measures on the validation split"),
    set("study.direction", "direction", Choice(&["maximize", "minimize"]), None, "whether larger or smaller values are better"),
    set("sampler.kind", "sampler", Choice(&["tpe", "random", "grid"]), None, "how each trial's parameters are chosen"),
    set("sampler.seed", "sampler seed", Int, None, "seed of the sampler"),
    set("pruner.kind", "pruner", Choice(&["none", "median", "percentile", "successive_halving", "hyperband"]), None, "when a trial that is doing badly is stopped early"),
];
