"""Stable-Baselines3 PPO on the Python port of TradeTune's trading env: samples/s end to end
(rollout + update), the peer of `tradetune bench train` (which runs this script with `--peer`).

    python benches/peers/sb3_ppo.py --n-envs 8 --n-steps 256 --batch-size 256 --n-epochs 4 \
        --net 64,64 --assets 7 --features 16 --updates 3 --threads 2

Trains one warm-up update (not counted), then `--updates` updates, and prints one JSON line:
{"peer": "stable-baselines3", "versions": {...}, "threads": N, "samples": S, "seconds": T,
 "samples_per_second": S/T, "env_seconds": the part of T spent stepping the env}. The environment is the one `tradetune bench train` trains: a
random-walk dataset of 20,000 bars, `--n-envs` envs with 1,000-bar episodes, the env's other
defaults. PPO's hyperparameters are SB3's defaults (which are ours) except those given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parser() -> argparse.ArgumentParser:
    """The protocol's arguments (a peer script adds its own to them)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--n-steps", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--n-epochs", type=int, default=4)
    p.add_argument("--net", default="64,64", help="hidden layers of both networks, comma-separated")
    p.add_argument("--assets", type=int, default=7)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--updates", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--seed", type=int, default=0)
    return p


def parse_args():
    return parser().parse_args()


def main() -> None:
    args = parse_args()
    import gymnasium
    import numpy as np
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    import stable_baselines3
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecEnv

    from tradetune_env import TradingVecEnv, random_walk_dataset

    class BatchedVecEnv(VecEnv):
        """SB3's VecEnv over the port's batched `TradingVecEnv` (all envs in one numpy step, as
        our CpuVecEnv), timing the env's steps."""

        def __init__(self, env: TradingVecEnv):
            obs_space = gymnasium.spaces.Box(-np.inf, np.inf, shape=(env.obs_dim,), dtype=np.float32)
            act_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(env.m,), dtype=np.float32)
            super().__init__(env.n, obs_space, act_space)
            self.env = env
            self.actions = None
            self.env_seconds = 0.0

        def reset(self):
            return self.env.reset()

        def step_async(self, actions):
            self.actions = actions

        def step_wait(self):
            t = time.perf_counter()
            obs, reward, done, terminal, _ = self.env.step(self.actions)
            infos = [{} for _ in range(self.num_envs)]
            if terminal is not None:
                for i in np.flatnonzero(done):
                    infos[i]["terminal_observation"] = terminal[i]
            self.env_seconds += time.perf_counter() - t
            return obs, reward, done, infos

        def close(self):
            pass

        def get_attr(self, attr_name, indices=None):
            return [getattr(self.env, attr_name)] * len(self._get_indices(indices))

        def set_attr(self, attr_name, value, indices=None):
            setattr(self.env, attr_name, value)

        def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
            return [None] * len(self._get_indices(indices))

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False] * len(self._get_indices(indices))

    net = [int(x) for x in args.net.split(",") if x.strip()]
    prices, features = random_walk_dataset(20_000, args.assets, args.features, seed=7)
    cfg = {"n_envs": args.n_envs, "episode_bars": 1_000}
    venv = BatchedVecEnv(TradingVecEnv(prices, features, cfg))
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        policy_kwargs={"net_arch": {"pi": net, "vf": net}},
        device="cpu",
        seed=args.seed,
        verbose=0,
    )
    per_update = args.n_steps * args.n_envs
    model.learn(total_timesteps=per_update)
    venv.env_seconds = 0.0
    start = time.perf_counter()
    model.learn(total_timesteps=per_update * args.updates, reset_num_timesteps=False)
    seconds = time.perf_counter() - start
    samples = per_update * args.updates
    print(
        json.dumps(
            {
                "peer": "stable-baselines3",
                "versions": {
                    "stable_baselines3": stable_baselines3.__version__,
                    "torch": torch.__version__,
                    "gymnasium": gymnasium.__version__,
                    "numpy": np.__version__,
                    "python": sys.version.split()[0],
                },
                "threads": torch.get_num_threads(),
                "samples": samples,
                "seconds": seconds,
                "samples_per_second": samples / seconds,
                "env_seconds": venv.env_seconds,
            }
        )
    )


if __name__ == "__main__":
    main()
