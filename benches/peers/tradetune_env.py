"""A Python port of TradeTune's trading environment (engine/env/src/cpu.rs) as a gymnasium.Env.

Written for the peer benchmark (benches/peers/README.md): Stable-Baselines3 and CleanRL train this
env with the same observation layout, rules and reward as the Rust `CpuVecEnv`, so their
samples/s compare with `tradetune bench train`. It needs numpy, and gymnasium for `TradingEnv`
alone (the CleanRL-style peer steps `TradingVecEnv` and runs where gymnasium is not installed, as
on a GPU machine's image that lacks it).

Arithmetic is float32 in the Rust order of operations (element-wise over envs and assets, running
sums added one after the other),
so a step agrees with the Rust env to float32 rounding; `check_port.py` replays a trace written
by the Rust test `engine/tests/env_peer_port.rs` and compares step for step.

`TradingVecEnv` steps a batch of envs together with numpy, one row per env, as the Rust
`CpuVecEnv` (the peer benchmark trains it through a thin Stable-Baselines3 `VecEnv`). `TradingEnv`
is one env of such a batch as a `gymnasium.Env`: env number `env_index` of a batch of `n_envs`
(the start bars of its episodes depend on both, as in the Rust `StartTable`). When an episode
ends, its `step` returns the episode's last observation with `terminated=True` and the next
`reset()` the new episode's first observation; any other `reset()` starts over from the first
episode, as the Rust env's `reset`.
"""

from __future__ import annotations

import math

import numpy as np

try:
    import gymnasium as gym
except ImportError:  # `TradingVecEnv` needs numpy alone; `TradingEnv` says what it lacks.
    gym = None

F = np.float32
MASK64 = (1 << 64) - 1
F32_MIN_POSITIVE = F(np.finfo(np.float32).tiny)
COMPAT_GAMMA = F(0.99)
TABLE_ENTRIES = 1 << 16

# The defaults of the Rust `EnvConfig` (engine/env/src/config.rs), with the same field names.
DEFAULT_CONFIG = {
    "n_envs": 8,
    "initial_cash": 1_000_000.0,
    "buy_fee": 0.0025,
    "sell_fee": 0.0025,
    "min_order_value": 10.0,
    "min_order_values": [],
    "max_buy_fraction": 1.0,
    "action_scale": 100_000.0,
    "trailing_stop_pct": 0.0,
    "cooldown_bars": 48,
    "cooldown_sell_fraction": 0.05,
    "lookback": 1,
    "reward": "excess_vs_equal_weight",
    "reward_scale": 100.0,
    "episode_bars": 0,
    "start": "random",
    "seed": 0,
    "compat_finrl_crypto": False,
}


def splitmix64(x: int) -> int:
    """SplitMix64, as engine/env/src/starts.rs."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


class StartTable:
    """Start bars of env `env_index`'s episodes (engine/env/src/starts.rs), computed on demand."""

    def __init__(self, cfg: dict, range_start: int, range_end: int, env_index: int):
        lookback = max(int(cfg["lookback"]), 1)
        lo = range_start + lookback - 1
        last = max(range_end - 1, 0)
        if range_end <= range_start or last <= lo:
            raise ValueError(f"too few bars: {range_end - range_start} in the split for lookback {lookback}")
        episode_bars = int(cfg["episode_bars"])
        start = cfg["start"]
        if start not in ("random", "strided", "fixed"):
            raise ValueError(f"env.start = {start!r}: expected random, strided or fixed")
        if episode_bars == 0 and start == "fixed":
            episode_len, span = last - lo, 1
        elif episode_bars == 0:
            usable = last - lo
            e = max(-(-usable // 2), 1)
            episode_len, span = e, usable - e + 1
        else:
            e = episode_bars
            if lo + e > last:
                raise ValueError(f"too few bars: lookback {lookback} + episode_bars {e} need {lookback + e} bars")
            episode_len, span = e, last - e - lo + 1
        n = max(int(cfg["n_envs"]), 1)
        if not 0 <= env_index < n:
            raise ValueError(f"env_index {env_index} outside the batch of {n} envs")
        self.n = n
        self.lo = lo
        self.span = span
        self.episode_len = episode_len
        self.episodes_per_env = max(TABLE_ENTRIES // n, 64)
        self.stride = max(span // n, 1)
        self.mode = start
        self.seed = int(cfg["seed"]) & MASK64
        self.env = env_index

    def start(self, episode: int) -> int:
        k = episode % self.episodes_per_env
        env, n, span = self.env, self.n, self.span
        if self.mode == "fixed":
            off = 0
        elif self.mode == "strided":
            off = ((env + k * n) * self.stride) % span
        else:
            seed = self.seed
            h = splitmix64(seed ^ ((splitmix64((env << 32) | k) + 0x51515151) & MASK64))
            shift = splitmix64(seed ^ splitmix64(k ^ 0xA5A50000)) % span
            stratum = env * span // n
            width = max((env + 1) * span // n - stratum, 1)
            jitter = h % width
            off = (shift + stratum + jitter) % span
        return self.lo + off


def seq_rows(x):
    """float32 sums of the rows of `x`, the values added one after the other (the Rust order:
    numpy's `sum` adds pairwise, `add.accumulate` sequentially)."""
    return np.add.accumulate(x, axis=1, dtype=np.float32)[:, -1]


class TradingVecEnv:
    """Envs `env_indices` (default: all) of a batch of `cfg["n_envs"]` trading envs over bars
    `range_` of the data, stepped together as the Rust `CpuVecEnv`: one numpy row per env.

    `prices` is `T × M` and `features` `T × M × F` (float32); `cfg` takes the Rust `EnvConfig`'s
    fields (missing ones get its defaults). `step` resets the envs whose episode ended and returns
    their new episode's first observation, with the last one of the ended episode beside it.
    """

    render_mode = None

    def __init__(self, prices, features, cfg: dict | None = None, env_indices=None, range_=None):
        c = dict(DEFAULT_CONFIG)
        c.update({k: v for k, v in (cfg or {}).items() if v is not None})
        prices = np.ascontiguousarray(prices, dtype=np.float32)
        features = np.ascontiguousarray(features, dtype=np.float32)
        if prices.ndim != 2 or features.ndim != 3 or features.shape[:2] != prices.shape:
            raise ValueError(f"prices {prices.shape} and features {features.shape}: need T×M and T×M×F")
        t, m = prices.shape
        r0, r1 = range_ if range_ is not None else (0, t)
        if not (0 <= r0 < r1 <= t):
            raise ValueError(f"range {r0}..{r1}: must be a non-empty range within the dataset's {t} bars")
        if c["reward"] not in ("excess_vs_equal_weight", "portfolio_change", "log_return"):
            raise ValueError(f"env.reward = {c['reward']!r}: expected excess_vs_equal_weight, portfolio_change or log_return")
        if env_indices is None:
            env_indices = range(int(c["n_envs"]))
        self.cfg = c
        self.m = m
        self.mf = m * features.shape[2]
        self.lookback = int(c["lookback"])
        self.obs_dim = 1 + m + self.lookback * self.mf
        self.prices = prices
        # Per-bar feature rows, flattened once: an observation copies `lookback` of them.
        self.features = features.reshape(t, self.mf)
        self.starts = [StartTable(c, r0, r1, i) for i in env_indices]
        self.n = len(self.starts)
        self.episode_len = self.starts[0].episode_len if self.starts else 0
        self.initial_cash = F(c["initial_cash"])
        self.buy_fee = F(c["buy_fee"])
        self.sell_fee = F(c["sell_fee"])
        mov = c["min_order_values"]
        self.min_order = np.array(mov if len(mov) == m else [c["min_order_value"]] * m, dtype=np.float32)
        self.max_buy_fraction = F(c["max_buy_fraction"])
        self.action_scale = F(c["action_scale"])
        self.trailing_stop_pct = F(c["trailing_stop_pct"])
        self.one_minus_stop = F(1.0) - self.trailing_stop_pct
        self.cooldown_bars = F(int(c["cooldown_bars"]))
        self.cooldown_sell_fraction = F(c["cooldown_sell_fraction"])
        self.reward_kind = c["reward"]
        self.reward_scale = F(c["reward_scale"])
        self.compat = bool(c["compat_finrl_crypto"])
        self.compat_units = np.array(
            [float(c["action_scale"]) / 10.0 / 10.0 ** math.floor(math.log10(float(p))) for p in prices[r0]],
            dtype=np.float32,
        )
        n = self.n
        z = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731
        self.hold, self.trail, self.held, self.eqw = z(n, m), z(n, m), z(n, m), z(n, m)
        self.cash, self.prev_value, self.prev_eqw, self.eqw_start = z(n), z(n), z(n), z(n)
        self.gamma_return, self.ep_reward, self.ep_fees = z(n), z(n), z(n)
        self.bar = np.zeros(n, dtype=np.int64)
        self.end = np.zeros(n, dtype=np.int64)
        self.episode = np.zeros(n, dtype=np.int64)
        self.reset()

    # --- the rules (cpu.rs: reset_one, write_obs, step_one) ---

    def _reset_envs(self, idx, first: bool) -> None:
        """Starts episode `self.episode[i]` of each env `i` in `idx`."""
        start = np.array([self.starts[i].start(int(self.episode[i])) for i in idx], dtype=np.int64)
        self.bar[idx] = start
        self.end[idx] = start + self.episode_len
        p = self.prices[start]
        self.hold[idx] = 0.0
        self.trail[idx] = 0.0
        self.held[idx] = 0.0
        # The equal-weight benchmark buys initial_cash / M of every asset at the first bar;
        # FinRL_Crypto's quirk keeps the first episode's units.
        if first or not self.compat:
            self.eqw[idx] = (self.initial_cash / F(self.m)) / p
        eqw_value = seq_rows(self.eqw[idx] * p)
        self.cash[idx] = self.initial_cash
        self.prev_value[idx] = self.initial_cash
        self.prev_eqw[idx] = eqw_value
        self.eqw_start[idx] = eqw_value
        self.gamma_return[idx] = 0.0
        self.ep_reward[idx] = 0.0
        self.ep_fees[idx] = 0.0

    def _obs(self) -> np.ndarray:
        m = self.m
        p = self.prices[self.bar]
        hv = self.hold * p
        value = self.cash + seq_rows(hv)
        inv = F(1.0) / np.maximum(value, F32_MIN_POSITIVE)
        obs = np.empty((self.n, self.obs_dim), dtype=np.float32)
        obs[:, 0] = self.cash * inv
        obs[:, 1 : 1 + m] = hv * inv[:, None]
        mf = self.mf
        for lag in range(self.lookback):
            dst = 1 + m + lag * mf
            obs[:, dst : dst + mf] = self.features[self.bar - lag]
        return obs

    def _order_value(self, a, p):
        """Cash values of orders of |action| `a` ≥ 0 at prices `p`."""
        if self.compat:
            return a * self.compat_units * p
        return a * self.action_scale

    def _advance(self, actions):
        """One bar of the rules for every env; returns (rewards, dones).

        Element-wise over envs and assets (float32 operations are exact per element); the running
        cash and fees add up in the Rust order (asset by asset: trailing stop, sell, cooldown; then
        the buys) with a sequential accumulate along each row.
        """
        n, m = self.n, self.m
        zero = F(0.0)
        a = np.asarray(actions, dtype=np.float32).reshape(n, m)
        a = np.clip(np.where(np.isnan(a), zero, a), F(-1.0), F(1.0))
        self.bar += 1
        p = self.prices[self.bar]
        hold, trail, held = self.hold, self.trail, self.held
        cash_in = np.zeros((n, m, 3), dtype=np.float32)  # per asset: stop, sell, cooldown
        fee = np.zeros((n, m, 4), dtype=np.float32)  # the same, then the buy
        open_ = hold > zero
        h = hold
        # 1. Time passes for the open positions; trailing stop.
        held = np.where(open_, held + F(1.0), held)
        trail = np.where(open_, np.maximum(trail, p), trail)
        if self.trailing_stop_pct > zero:
            stop = open_ & (p <= trail * self.one_minus_stop)
            gross = h * p
            f = gross * self.sell_fee
            cash_in[:, :, 0] = np.where(stop, gross - f, zero)
            fee[:, :, 0] = np.where(stop, f, zero)
            h = np.where(stop, zero, h)
            trail = np.where(stop, zero, trail)
            held = np.where(stop, zero, held)
        # 2. The agent's sells (an order's cash value reaches the minimum).
        value = self._order_value(-a, p)
        sell = open_ & (a < zero) & (h > zero) & (value >= self.min_order)
        q = np.minimum(h, value / p)
        gross = q * p
        f = gross * self.sell_fee
        cash_in[:, :, 1] = np.where(sell, gross - f, zero)
        fee[:, :, 1] = np.where(sell, f, zero)
        h = np.where(sell, h - q, h)
        held = np.where(sell, zero, held)
        # 3. Forced partial sells of positions held `cooldown_bars` bars without a trade.
        if self.cooldown_bars > zero:
            cool = open_ & (h > zero) & (held >= self.cooldown_bars)
            q = h * self.cooldown_sell_fraction
            gross = q * p
            f = gross * self.sell_fee
            cash_in[:, :, 2] = np.where(cool, gross - f, zero)
            fee[:, :, 2] = np.where(cool, f, zero)
            h = np.where(cool, h - q, h)
            held = np.where(cool, zero, held)
        closed = open_ & (h <= zero)
        h = np.where(closed, zero, h)
        trail = np.where(closed, zero, trail)
        hold = np.where(open_, h, hold)
        cash = seq_rows(np.concatenate((self.cash[:, None], cash_in.reshape(n, 3 * m)), axis=1))

        # 4. Buys from one shared budget per env: the orders reaching the minimum are scaled down
        #    pro rata when their cost with fees exceeds cash·max_buy_fraction.
        value = self._order_value(a, p)
        want = (a > zero) & (value >= self.min_order)
        wanted = seq_rows(np.where(want, value * (F(1.0) + self.buy_fee), zero))
        budget = cash * self.max_buy_fraction
        over = wanted > budget
        scale = np.where(over, budget / np.where(over, wanted, F(1.0)), F(1.0))
        v = value * scale[:, None]
        buy = want & (v >= self.min_order) & (v > zero)
        f = v * self.buy_fee
        fee[:, :, 3] = np.where(buy, f, zero)
        cash = seq_rows(np.concatenate((cash[:, None], np.where(buy, -(v + f), zero)), axis=1))
        first_trail = np.where(hold <= zero, p, trail)
        hold = np.where(buy, hold + v / p, hold)
        trail = np.where(buy, np.maximum(first_trail, p), trail)
        held = np.where(buy, zero, held)
        # Fees in the Rust order: every sell of every asset, then the buys.
        fees = seq_rows(
            np.concatenate((fee[:, :, :3].reshape(n, 3 * m), fee[:, :, 3]), axis=1)
        )
        # Rounding of the pro-rata scaling can leave −1e-3 of a cent.
        cash = np.maximum(cash, zero)
        self.hold, self.trail, self.held, self.cash = hold, trail, held, cash

        # 5. Valuation and reward.
        value = cash + seq_rows(hold * p)
        eqw_value = seq_rows(self.eqw * p)
        if self.reward_kind == "excess_vs_equal_weight":
            reward = ((value - self.prev_value) - (eqw_value - self.prev_eqw)) / self.initial_cash
        elif self.reward_kind == "portfolio_change":
            reward = (value - self.prev_value) / self.initial_cash
        else:
            reward = np.log(np.maximum(value, F32_MIN_POSITIVE) / self.prev_value)
        reward = (reward * self.reward_scale).astype(np.float32)
        self.prev_value = value
        self.prev_eqw = eqw_value
        self.ep_fees += fees
        done = self.bar >= self.end
        if self.compat:
            # FinRL_Crypto: gamma_return = gamma_return·γ + reward; the last reward is replaced by it.
            self.gamma_return = self.gamma_return * COMPAT_GAMMA + reward
            reward = np.where(done, self.gamma_return, reward)
        self.ep_reward += reward
        self._last_value, self._last_eqw = value, eqw_value
        return reward, done

    # --- the Rust VecEnv ---

    def reset(self) -> np.ndarray:
        """Every env from its first episode; the first observations (`n × obs_dim`)."""
        self.episode[:] = 0
        self._reset_envs(np.arange(self.n), first=True)
        return self._obs()

    def step(self, actions):
        """Applies `actions` (`n × M`, clipped to [-1, 1]; NaN is no order) and advances every env
        one bar. Returns (observations, rewards, dones, terminal observations or None, episode
        stats): where an episode ended the env has already been reset, `observations` holds its
        new episode's first observation and `terminal observations` (all rows) the last one of
        the ended episode; `episode stats` maps those envs to their episode's statistics."""
        reward, done = self._advance(actions)
        if not done.any():
            return self._obs(), reward, done, None, {}
        terminal = self._obs()
        idx = np.flatnonzero(done)
        stats = {
            int(i): {
                "reward_sum": float(self.ep_reward[i]),
                "length": self.episode_len,
                "total_return": float(self._last_value[i] / self.initial_cash - F(1.0)),
                "equal_weight_return": float(self._last_eqw[i] / self.eqw_start[i] - F(1.0)),
                "fees": float(self.ep_fees[i]),
            }
            for i in idx
        }
        self.episode[idx] += 1
        self._reset_envs(idx, first=False)
        return self._obs(), reward, done, terminal, stats


class TradingEnv(gym.Env if gym is not None else object):
    """Env `env_index` of a batch of `cfg["n_envs"]` trading envs, as a `gymnasium.Env` (see
    [`TradingVecEnv`] for the arguments)."""

    metadata = {"render_modes": []}

    def __init__(self, prices, features, cfg: dict | None = None, env_index: int = 0, range_=None):
        if gym is None:
            raise ImportError("TradingEnv is a gymnasium.Env: pip install gymnasium (TradingVecEnv needs numpy alone)")
        super().__init__()
        self.vec = TradingVecEnv(prices, features, cfg, env_indices=[env_index], range_=range_)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(self.vec.obs_dim,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(self.vec.m,), dtype=np.float32)
        self._pending = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self._pending is not None:
            # After the step that ended an episode: the next episode already started.
            obs, self._pending = self._pending, None
            return obs, {}
        # Otherwise from the first episode again, as the Rust env's reset.
        return self.vec.reset()[0], {}

    def step(self, action):
        obs, reward, done, terminal, stats = self.vec.step(np.asarray(action).reshape(1, -1))
        if done[0]:
            self._pending = obs[0]
            return terminal[0], float(reward[0]), True, False, {"episode_stats": stats[0]}
        return obs[0], float(reward[0]), False, False, {}


def random_walk_dataset(bars: int, assets: int, features: int, seed: int):
    """Random-walk prices (T × M) and uniform features (T × M × F) in float32, shaped like the
    Rust `bench_dataset` (the values differ: the Rust one uses Rust's RNG)."""
    rng = np.random.default_rng(seed)
    prices = np.empty((bars, assets), dtype=np.float32)
    for a in range(assets):
        p0 = 10.0 ** rng.uniform(0.0, 3.0)
        steps = np.exp(rng.uniform(-0.02, 0.02, size=bars - 1))
        prices[:, a] = p0 * np.concatenate([[1.0], np.cumprod(steps)])
    feats = rng.uniform(-3.0, 3.0, size=(bars, assets, features)).astype(np.float32)
    return prices, feats
