"""Replays a trace of the Rust env (written by engine/tests/env_peer_port.rs) through the Python
port and compares observations, rewards and done flags step for step.

    python3 benches/peers/check_port.py TRACE.json

Exit status 0 when every value agrees within float32 rounding (|a − b| ≤ 1e-5 · max(1, |b|)),
1 with the first disagreement otherwise.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tradetune_env import TradingEnv, TradingVecEnv  # noqa: E402

TOL = 1e-5


def close(a, b) -> bool:
    return abs(float(a) - float(b)) <= TOL * max(1.0, abs(float(b)))


def check_case(case: dict) -> tuple[int, float]:
    name = case["name"]
    cfg = case["config"]
    prices = np.array(case["prices"], dtype=np.float32)
    features = np.array(case["features"], dtype=np.float32)
    n = int(cfg["n_envs"])
    m = prices.shape[1]
    rng = tuple(case["range"])
    venv = TradingVecEnv(prices, features, cfg, range_=rng)
    # The same envs one by one through the gymnasium API (terminal observation, then reset).
    gym_envs = [TradingEnv(prices, features, cfg, env_index=i, range_=rng) for i in range(n)]
    od = venv.obs_dim
    if od * n != len(case["obs0"]):
        raise SystemExit(f"{name}: obs_dim {od} × {n} envs != {len(case['obs0'])} values in the trace")
    worst = 0.0

    def compare(what, step, env, got, want):
        nonlocal worst
        for j, (g, w) in enumerate(zip(got, want)):
            worst = max(worst, abs(float(g) - float(w)))
            if not close(g, w):
                raise SystemExit(
                    f"MISMATCH {name}: step {step} env {env} {what}[{j}]: python {float(g)!r} rust {float(w)!r}"
                )

    obs0 = venv.reset()
    for i in range(n):
        want = case["obs0"][i * od : (i + 1) * od]
        compare("obs (reset)", -1, i, obs0[i], want)
        compare("obs (gymnasium reset)", -1, i, gym_envs[i].reset()[0], want)
    dones_seen = 0
    for s, (acts, obs, rew, done) in enumerate(zip(case["actions"], case["obs"], case["rewards"], case["dones"])):
        a = np.array(acts, dtype=np.float32).reshape(n, m)
        o, r, d, _, _ = venv.step(a)
        for i in range(n):
            compare("obs", s, i, o[i], obs[i * od : (i + 1) * od])
            compare("reward", s, i, [r[i]], [rew[i]])
            if float(d[i]) != float(done[i]):
                raise SystemExit(f"MISMATCH {name}: step {s} env {i} done: python {d[i]} rust {done[i]}")
            go, gr, term, trunc, _ = gym_envs[i].step(a[i])
            if term:
                go, _ = gym_envs[i].reset()
                dones_seen += 1
            compare("obs (gymnasium)", s, i, go, obs[i * od : (i + 1) * od])
            compare("reward (gymnasium)", s, i, [gr], [rew[i]])
            if term != bool(done[i]) or trunc:
                raise SystemExit(f"MISMATCH {name}: step {s} env {i} gymnasium terminated {term} truncated {trunc}")
    return dones_seen, worst


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: check_port.py TRACE.json")
    with open(sys.argv[1], encoding="utf-8") as f:
        trace = json.load(f)
    for case in trace["cases"]:
        dones, worst = check_case(case)
        print(
            f"ok {case['name']}: {len(case['actions'])} steps × {case['config']['n_envs']} envs, "
            f"{dones} episode ends, largest difference {worst:.3g}"
        )


if __name__ == "__main__":
    main()
