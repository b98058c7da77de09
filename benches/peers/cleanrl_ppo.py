"""CleanRL-style PPO (after `ppo_continuous_action.py`: one file, plain torch, no framework) on the
Python port of TradeTune's trading env: samples/s end to end, a second peer of
`tradetune bench train` (`--peer PYTHON --peer-script benches/peers/cleanrl_ppo.py`).

The same arguments and JSON line as `sb3_ppo.py`. The settings are those of SB3 and ours (tanh
MLPs pi and vf of `--net`, orthogonal init, Adam lr 3e-4 eps 1e-5, γ 0.99, λ 0.95, clip 0.2,
vf_coef 0.5, max_grad_norm 0.5, advantages normalised per minibatch, no observation or reward
normalisation), so only the implementation differs.

It is also the GPU peer of `tradetune bench gpu --peer PYTHON`: `--device cuda` puts the model,
the rollout buffer and the update on torch's CUDA device (ROCm builds of torch answer to `cuda`
too) while the numpy env steps on the CPU, as a CleanRL user runs it; `--precision tf32` lets
matmuls use TF32 tensor cores, `bf16` runs the forward passes and the loss under bf16 autocast.
The JSON line then also names the device and precision and gives the first (cold) update's
seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sb3_ppo import parser  # noqa: E402


def parse_args():
    p = parser()
    p.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:N")
    p.add_argument(
        "--precision",
        choices=["f32", "tf32", "bf16"],
        default="f32",
        help="f32; tf32 (TF32 matmuls on CUDA); bf16 (autocast)",
    )
    return p.parse_args()


def main() -> None:
    args = parse_args()
    import contextlib

    import numpy as np
    import torch
    from torch import nn

    from tradetune_env import TradingVecEnv, random_walk_dataset

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit(f"--device {args.device}: torch {torch.__version__} sees no CUDA/ROCm device")
    on_gpu = device.type == "cuda"
    if on_gpu:
        allow = args.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow

    def autocast():
        if args.precision == "bf16":
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def wait():
        if on_gpu:
            torch.cuda.synchronize(device)
    net = [int(x) for x in args.net.split(",") if x.strip()]
    prices, features = random_walk_dataset(20_000, args.assets, args.features, seed=7)
    env = TradingVecEnv(prices, features, {"n_envs": args.n_envs, "episode_bars": 1_000})
    n, od, ad = env.n, env.obs_dim, env.m

    def layer(i, o, gain):
        lin = nn.Linear(i, o)
        nn.init.orthogonal_(lin.weight, gain)
        nn.init.constant_(lin.bias, 0.0)
        return lin

    def mlp(out, gain):
        layers, fan_in = [], od
        for w in net:
            layers += [layer(fan_in, w, 2**0.5), nn.Tanh()]
            fan_in = w
        return nn.Sequential(*layers, layer(fan_in, out, gain))

    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.critic = mlp(1, 1.0)
            self.actor_mean = mlp(ad, 0.01)
            self.actor_logstd = nn.Parameter(torch.zeros(1, ad))

        def value(self, x):
            return self.critic(x)

        def act(self, x, action=None):
            mean = self.actor_mean(x)
            dist = torch.distributions.Normal(mean, self.actor_logstd.expand_as(mean).exp())
            if action is None:
                action = dist.sample()
            return action, dist.log_prob(action).sum(1), dist.entropy().sum(1), self.critic(x)

    agent = Agent().to(device)
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4, eps=1e-5)
    t_steps = args.n_steps
    obs_buf = torch.zeros((t_steps, n, od), device=device)
    act_buf = torch.zeros((t_steps, n, ad), device=device)
    logp_buf = torch.zeros((t_steps, n), device=device)
    rew_buf = torch.zeros((t_steps, n), device=device)
    done_buf = torch.zeros((t_steps, n), device=device)
    val_buf = torch.zeros((t_steps, n), device=device)
    next_obs = torch.from_numpy(env.reset()).to(device)
    state = {"env_seconds": 0.0}

    def one_update():
        for t in range(t_steps):
            obs_buf[t] = next_obs_ref[0]
            with torch.no_grad(), autocast():
                action, logp, _, value = agent.act(next_obs_ref[0])
            act_buf[t], logp_buf[t], val_buf[t] = action, logp, value.flatten()
            # The numpy env reads the actions back: one device-to-host copy per step.
            actions = action.float().cpu().numpy()
            t0 = time.perf_counter()
            o, r, d, _, _ = env.step(np.clip(actions, -1.0, 1.0))
            state["env_seconds"] += time.perf_counter() - t0
            next_obs_ref[0] = torch.from_numpy(o).to(device)
            rew_buf[t] = torch.from_numpy(r).to(device)
            done_buf[t] = torch.from_numpy(d.astype(np.float32)).to(device)
        with torch.no_grad():
            next_value = agent.value(next_obs_ref[0]).flatten()
            adv = torch.zeros_like(rew_buf)
            last = torch.zeros(n, device=device)
            for t in reversed(range(t_steps)):
                nv = next_value if t == t_steps - 1 else val_buf[t + 1]
                nonterminal = 1.0 - done_buf[t]
                delta = rew_buf[t] + 0.99 * nv * nonterminal - val_buf[t]
                last = delta + 0.99 * 0.95 * nonterminal * last
                adv[t] = last
            ret = adv + val_buf
        b_obs, b_act = obs_buf.reshape(-1, od), act_buf.reshape(-1, ad)
        b_logp, b_adv = logp_buf.reshape(-1), adv.reshape(-1)
        b_ret = ret.reshape(-1)
        size = b_obs.shape[0]
        for _ in range(args.n_epochs):
            perm = torch.randperm(size, device=device)
            for s in range(0, size, args.batch_size):
                mb = perm[s : s + args.batch_size]
                with autocast():
                    _, logp, entropy, value = agent.act(b_obs[mb], b_act[mb])
                    ratio = (logp.float() - b_logp[mb]).exp()
                    a = b_adv[mb]
                    a = (a - a.mean()) / (a.std() + 1e-8)
                    pg = torch.max(-a * ratio, -a * ratio.clamp(0.8, 1.2)).mean()
                    v_loss = ((value.float().flatten() - b_ret[mb]) ** 2).mean()
                    loss = pg + 0.5 * v_loss - 0.0 * entropy.float().mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                opt.step()

    next_obs_ref = [next_obs]
    cold = time.perf_counter()
    one_update()
    wait()
    cold_seconds = time.perf_counter() - cold
    state["env_seconds"] = 0.0
    start = time.perf_counter()
    for _ in range(args.updates):
        one_update()
    wait()
    seconds = time.perf_counter() - start
    samples = t_steps * n * args.updates
    print(
        json.dumps(
            {
                "peer": "cleanrl-style",
                "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
                "precision": args.precision,
                "cold_update_seconds": cold_seconds,
                "versions": {
                    "torch": torch.__version__,
                    "numpy": np.__version__,
                    "python": sys.version.split()[0],
                },
                "threads": torch.get_num_threads(),
                "samples": samples,
                "seconds": seconds,
                "samples_per_second": samples / seconds,
                "env_seconds": state["env_seconds"],
            }
        )
    )


if __name__ == "__main__":
    main()
