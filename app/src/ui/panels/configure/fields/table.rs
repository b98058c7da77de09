//! The table itself: the fields of the draft the Configure panel shows, in the order of its two
//! columns, each by its dotted path (which also says where it sits in the draft). Labels,
//! ranges, help and an enum's values are the engine's catalogue's; settings only a search or a
//! preset sets are not listed.

use tradetune_engine::study::Direction;
use tradetune_engine::study::file::{DIRECTIONS, direction_name};

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

fn parse_direction(name: &str) -> Option<Direction> {
    DIRECTIONS.into_iter().find(|d| direction_name(*d) == name)
}

/// The left column: the environment, then the study (its budget, devices, sampler, pruner).
pub static LEFT: &[Line] = &[
    Line::Heading("Environment"),
    number!(env.n_envs),
    number!(env.initial_cash),
    number!(env.buy_fee),
    number!(env.sell_fee),
    number!(env.min_order_value),
    number!(env.trailing_stop_pct),
    number!(env.cooldown_bars),
    number!(env.lookback),
    number!(env.episode_bars),
    number!(env.seed),
    Line::Problems("env"),
    Line::Heading("Study"),
    number!(train.total_timesteps),
    number!(train.eval_every),
    Line::Problems("train"),
    field!(study.name, Text),
    number!(study.n_trials),
    number!(study.workers),
    Line::Field(Field {
        path: path!(study.devices),
        kind: Kind::Devices,
    }),
    number!(study.memory_fraction),
    choice!(study.objective, display),
    choice!(study.direction, direction, parse_direction),
    choice!(sampler.kind, display),
    number!(sampler.seed),
    Line::Problems("sampler"),
    choice!(pruner.kind, display),
    Line::Problems("pruner"),
    Line::Problems("study"),
];

/// The right column: PPO and its network.
pub static RIGHT: &[Line] = &[
    Line::Heading("PPO"),
    number!(ppo.learning_rate),
    choice!(ppo.lr_schedule, debug),
    number!(ppo.n_steps),
    number!(ppo.batch_size),
    number!(ppo.n_epochs),
    number!(ppo.gamma),
    number!(ppo.gae_lambda),
    number!(ppo.clip_range),
    number!(ppo.ent_coef),
    number!(ppo.vf_coef),
    number!(ppo.max_grad_norm),
    number!(ppo.seed),
    field!(ppo.normalize_advantage, Toggle),
    field!(ppo.normalize_obs, Toggle),
    field!(ppo.normalize_reward, Toggle),
    choice!(ppo.precision, display),
    choice!(ppo.policy.activation, debug),
    field!(ppo.policy.net_arch.pi, Widths),
    field!(ppo.policy.net_arch.vf, Widths),
    Line::Problems("ppo"),
];
