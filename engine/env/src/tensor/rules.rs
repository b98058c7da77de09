//! The env's rules as burn tensor operations, for every env and asset at once with masks
//! instead of branches: the step on devices the kernel of [`super::kernel`] does not run on
//! (flex, an autodiff device), and the reset everywhere.

use burn::tensor::{Bool, Tensor};

use super::state::State;
use super::{COMPAT_GAMMA, Tables, TensorStep, f1};
use crate::config::RewardKind;

impl Tables {
    /// Starts a new episode (number `episode`) in the envs where `mask` is true.
    pub(super) fn restart(&self, s: &mut State, mask: Tensor<1, Bool>, first_episode: bool) {
        let (n, m, d) = (self.n, self.m, &self.device);
        let slot = s
            .episode
            .clone()
            .remainder_scalar(self.episodes_per_env as i64);
        let start = self
            .starts
            .clone()
            .select(0, self.env_offsets.clone().add(slot));
        let mask2 = mask.clone().unsqueeze_dim::<2>(1).expand([n, m]);
        s.bar = s.bar.clone().mask_where(mask.clone(), start.clone());
        s.end = s
            .end
            .clone()
            .mask_where(mask.clone(), start.add_scalar(self.episode_len as i64));
        let init = self.cfg.initial_cash;
        s.cash = s.cash.clone().mask_fill(mask.clone(), init);
        s.hold = s.hold.clone().mask_fill(mask2.clone(), 0.0);
        s.trail = s.trail.clone().mask_fill(mask2.clone(), 0.0);
        s.held = s.held.clone().mask_fill(mask2.clone(), 0.0);
        let p0 = self.prices.clone().select(0, s.bar.clone());
        if first_episode || !self.cfg.compat_finrl_crypto {
            // `initial_cash / M` divided by each price, as the CPU env and the kernel divide
            // (the cash times the price's reciprocal is one ulp off for many prices).
            let units = Tensor::full([n, m], init / m as f32, d).div(p0.clone());
            s.eqw = s.eqw.clone().mask_where(mask2, units);
        }
        let eqw_value = s.eqw.clone().mul(p0).sum_dim(1).squeeze_dim::<1>(1);
        s.prev_value = s.prev_value.clone().mask_fill(mask.clone(), init);
        s.prev_eqw = s
            .prev_eqw
            .clone()
            .mask_where(mask.clone(), eqw_value.clone());
        s.eqw_start = s.eqw_start.clone().mask_where(mask.clone(), eqw_value);
        let zero = f1(0.0, n, d);
        s.gamma_return = s
            .gamma_return
            .clone()
            .mask_where(mask.clone(), zero.clone());
        s.ep_reward = s.ep_reward.clone().mask_where(mask.clone(), zero.clone());
        s.ep_fees = s.ep_fees.clone().mask_where(mask, zero);
    }

    /// Observations `[N, obs_dim]` at each env's current bar.
    pub(super) fn observe(&self, s: &State) -> Tensor<2> {
        let p = self.prices.clone().select(0, s.bar.clone());
        let holding_values = s.hold.clone().mul(p);
        let value = holding_values
            .clone()
            .sum_dim(1)
            .add(s.cash.clone().unsqueeze_dim::<2>(1))
            .clamp_min(f32::MIN_POSITIVE);
        let mut parts = vec![
            s.cash.clone().unsqueeze_dim::<2>(1).div(value.clone()),
            holding_values.div(value),
        ];
        for lag in 0..self.cfg.lookback {
            let bars = s.bar.clone().sub_scalar(lag as i64);
            parts.push(self.features.clone().select(0, bars));
        }
        Tensor::cat(parts, 1)
    }

    /// Applies `actions` `[N, M]` (clipped to [-1, 1]; NaN = no order) and advances one bar.
    pub(super) fn step(&self, s: &mut State, actions: Tensor<2>) -> TensorStep {
        let cfg = &self.cfg;
        let (n, m) = (self.n, self.m);
        let a = actions
            .clone()
            .mask_fill(actions.is_nan(), 0.0)
            .clamp(-1.0, 1.0);

        s.bar = s.bar.clone().add_scalar(1);
        let p = self.prices.clone().select(0, s.bar.clone());
        let mut cash = s.cash.clone();
        let mut fees = Tensor::<1>::zeros([n], &self.device);
        let (sf, bf) = (cfg.sell_fee, cfg.buy_fee);
        let rowsum = |t: Tensor<2>| t.sum_dim(1).squeeze_dim::<1>(1);

        // 1. Time passes for open positions; trailing stops.
        let open = s.hold.clone().greater_elem(0.0);
        s.held = s.held.clone().add(open.clone().float());
        s.trail = s
            .trail
            .clone()
            .mask_where(open.clone(), s.trail.clone().max_pair(p.clone()));
        if cfg.trailing_stop_pct > 0.0 {
            let stop = open.bool_and(
                p.clone()
                    .lower_equal(s.trail.clone().mul_scalar(1.0 - cfg.trailing_stop_pct)),
            );
            let gross = s
                .hold
                .clone()
                .mul(p.clone())
                .mask_fill(stop.clone().bool_not(), 0.0);
            cash = cash.add(rowsum(gross.clone().mul_scalar(1.0 - sf)));
            fees = fees.add(rowsum(gross.mul_scalar(sf)));
            s.hold = s.hold.clone().mask_fill(stop.clone(), 0.0);
            s.trail = s.trail.clone().mask_fill(stop.clone(), 0.0);
            s.held = s.held.clone().mask_fill(stop, 0.0);
        }

        // Cash value of an order of |a|: value-based, or units·price in compat mode.
        let order_value = |abs_a: Tensor<2>| -> Tensor<2> {
            if cfg.compat_finrl_crypto {
                abs_a.mul(self.compat_units.clone()).mul(p.clone())
            } else {
                abs_a.mul_scalar(cfg.action_scale)
            }
        };
        let reaches_min = |v: Tensor<2>| v.greater_equal(self.min_order.clone().expand([n, m]));

        // 2. The agent's sells.
        let sell_value = order_value(a.clone().neg());
        let sell = a
            .clone()
            .lower_elem(0.0)
            .bool_and(s.hold.clone().greater_elem(0.0))
            .bool_and(reaches_min(sell_value.clone()));
        // Within a rounding of the position: all of it (`cpu::sold_units`).
        let wanted = sell_value.div(p.clone());
        let all = wanted
            .clone()
            .greater_equal(s.hold.clone().mul_scalar(1.0 - crate::cpu::SELL_ALL_WITHIN));
        let q = wanted
            .mask_where(all, s.hold.clone())
            .mask_fill(sell.clone().bool_not(), 0.0);
        let gross = q.clone().mul(p.clone());
        cash = cash.add(rowsum(gross.clone().mul_scalar(1.0 - sf)));
        fees = fees.add(rowsum(gross.mul_scalar(sf)));
        s.hold = s.hold.clone().sub(q);
        s.held = s.held.clone().mask_fill(sell, 0.0);

        // 3. Cooldown: forced partial sell of positions held `cooldown_bars` without a trade.
        if cfg.cooldown_bars > 0 {
            let due = s
                .hold
                .clone()
                .greater_elem(0.0)
                .bool_and(s.held.clone().greater_equal_elem(cfg.cooldown_bars as f32));
            let q = s
                .hold
                .clone()
                .mul_scalar(cfg.cooldown_sell_fraction)
                .mask_fill(due.clone().bool_not(), 0.0);
            let gross = q.clone().mul(p.clone());
            cash = cash.add(rowsum(gross.clone().mul_scalar(1.0 - sf)));
            fees = fees.add(rowsum(gross.mul_scalar(sf)));
            s.hold = s.hold.clone().sub(q);
            s.held = s.held.clone().mask_fill(due, 0.0);
        }
        let empty = s.hold.clone().lower_equal_elem(0.0);
        s.hold = s.hold.clone().mask_fill(empty.clone(), 0.0);
        s.trail = s.trail.clone().mask_fill(empty, 0.0);

        // 4. Buys from one shared budget, scaled pro rata.
        let buy_value = order_value(a.clone());
        let wants = a.greater_elem(0.0).bool_and(reaches_min(buy_value.clone()));
        let wanted = rowsum(
            buy_value
                .clone()
                .mul_scalar(1.0 + bf)
                .mask_fill(wants.clone().bool_not(), 0.0),
        );
        let budget = cash.clone().mul_scalar(cfg.max_buy_fraction);
        let over = wanted.clone().greater(budget.clone());
        let scale = f1(1.0, n, &self.device).mask_where(over, budget.div(wanted));
        let v = buy_value.mul(scale.unsqueeze_dim::<2>(1));
        let buy = wants
            .bool_and(reaches_min(v.clone()))
            .bool_and(v.clone().greater_elem(0.0));
        let v = v.mask_fill(buy.clone().bool_not(), 0.0);
        cash = cash.sub(rowsum(v.clone().mul_scalar(1.0 + bf)));
        fees = fees.add(rowsum(v.clone().mul_scalar(bf)));
        let opening = buy.clone().bool_and(s.hold.clone().lower_equal_elem(0.0));
        s.trail = s.trail.clone().mask_where(opening, p.clone());
        s.hold = s.hold.clone().add(v.div(p.clone()));
        s.trail = s
            .trail
            .clone()
            .mask_where(buy.clone(), s.trail.clone().max_pair(p.clone()));
        s.held = s.held.clone().mask_fill(buy, 0.0);
        cash = cash.clamp_min(0.0);

        // 5. Valuation and reward.
        let value = cash.clone().add(rowsum(s.hold.clone().mul(p.clone())));
        let eqw_value = rowsum(s.eqw.clone().mul(p));
        let init = cfg.initial_cash;
        let mut reward = match cfg.reward {
            RewardKind::ExcessVsEqualWeight => value
                .clone()
                .sub(s.prev_value.clone())
                .sub(eqw_value.clone().sub(s.prev_eqw.clone()))
                .div_scalar(init),
            RewardKind::PortfolioChange => value.clone().sub(s.prev_value.clone()).div_scalar(init),
            RewardKind::LogReturn => value
                .clone()
                .clamp_min(f32::MIN_POSITIVE)
                .div(s.prev_value.clone())
                .log(),
        }
        .mul_scalar(cfg.reward_scale);
        s.cash = cash;
        s.prev_value = value.clone();
        s.prev_eqw = eqw_value.clone();
        s.step_fees = fees.clone();
        s.ep_fees = s.ep_fees.clone().add(fees);
        let done = s.bar.clone().greater_equal(s.end.clone());
        if cfg.compat_finrl_crypto {
            s.gamma_return = s
                .gamma_return
                .clone()
                .mul_scalar(COMPAT_GAMMA)
                .add(reward.clone());
            reward = reward.mask_where(done.clone(), s.gamma_return.clone());
        }
        s.ep_reward = s.ep_reward.clone().add(reward.clone());

        // 6. Episode statistics and auto-reset of the envs whose episode ended.
        s.last_reward_sum = s
            .last_reward_sum
            .clone()
            .mask_where(done.clone(), s.ep_reward.clone());
        s.last_return = s
            .last_return
            .clone()
            .mask_where(done.clone(), value.div_scalar(init).sub_scalar(1.0));
        s.last_eqw_return = s.last_eqw_return.clone().mask_where(
            done.clone(),
            eqw_value.div(s.eqw_start.clone()).sub_scalar(1.0),
        );
        s.last_fees = s
            .last_fees
            .clone()
            .mask_where(done.clone(), s.ep_fees.clone());
        let done_f = done.clone().float();
        s.last_done = done_f.clone();
        s.episode = s.episode.clone().add(done.clone().int());
        self.restart(s, done, false);
        TensorStep {
            obs: self.observe(s),
            reward,
            done: done_f,
        }
    }
}
