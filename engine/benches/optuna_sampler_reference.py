#!/usr/bin/env python3
"""Optuna's reference figures for TradeTune's sampler benchmark.

Runs Optuna's default TPESampler (and RandomSampler) on the functions of
`engine/src/study/bench.rs` -- Branin, Hartmann-6, Rosenbrock-5 on [-5, 10], and the mixed
float/log/int/categorical function -- with the same trial count and seeds, and prints the
median best value and the time per suggestion (`study.ask()` with its parameters), so the
figures can be compared with `cargo bench -p tradetune-engine --bench sampler`.

    pip install optuna
    python engine/benches/optuna_sampler_reference.py [--trials 100] [--seeds 10] \
        [--overhead-trials 1000] [--json]
"""

import argparse
import json
import math
import statistics
import time

import optuna

H6_ALPHA = [1.0, 1.2, 3.0, 3.2]
H6_A = [
    [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
    [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
    [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
    [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
]
H6_P = [
    [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
    [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
    [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
    [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
]
MIXED_ACTS = ["relu", "tanh", "elu", "gelu"]
MIXED_OFFSETS = [0.6, 1.0, 0.0, 0.3]


def branin(t):
    x1 = t.suggest_float("x1", -5.0, 10.0)
    x2 = t.suggest_float("x2", 0.0, 15.0)
    b, c, s = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - s) * math.cos(x1) + 10


def hartmann6(t):
    x = [t.suggest_float(f"x{i}", 0.0, 1.0) for i in range(6)]
    return -sum(
        H6_ALPHA[i] * math.exp(-sum(H6_A[i][j] * (x[j] - H6_P[i][j]) ** 2 for j in range(6)))
        for i in range(4)
    )


def rosenbrock5(t):
    x = [t.suggest_float(f"x{i}", -5.0, 10.0) for i in range(5)]
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(4))


def mixed(t):
    x = t.suggest_float("x", -5.0, 5.0)
    lr = t.suggest_float("lr", 1e-4, 1.0, log=True)
    n = t.suggest_int("n", 2, 64, step=2)
    act = t.suggest_categorical("act", MIXED_ACTS)
    return (
        (x - 1.7) ** 2
        + (math.log10(lr) + 2.5) ** 2
        + ((n - 24) / 8) ** 2
        + MIXED_OFFSETS[MIXED_ACTS.index(act)]
    )


FUNCTIONS = {"branin": branin, "hartmann6": hartmann6, "rosenbrock5": rosenbrock5, "mixed": mixed}
SAMPLERS = {
    "tpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
}


def run(fn, sampler, n_trials):
    """Ask-and-tell loop; returns the best value and the seconds of each ask + suggestions."""
    study = optuna.create_study(sampler=sampler)
    times = []
    for _ in range(n_trials):
        start = time.perf_counter()
        trial = study.ask()
        # Suggestions are where the sampler works: time them with the ask, not the objective.
        value = fn(_TimedTrial(trial, times, start))
        study.tell(trial, value)
    return study.best_value, times


class _TimedTrial:
    """Forwards suggest_* and records the time from ask() to the last suggestion."""

    def __init__(self, trial, times, start):
        self._t, self._times, self._start = trial, times, start
        self._times.append(0.0)

    def __getattr__(self, name):
        attr = getattr(self._t, name)

        def call(*a, **k):
            out = attr(*a, **k)
            self._times[-1] = time.perf_counter() - self._start
            return out

        return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--overhead-trials", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    report = {"optuna_version": optuna.__version__, "trials": args.trials, "seeds": args.seeds,
              "quality": [], "overhead": []}
    for fname, fn in FUNCTIONS.items():
        for sname, make in SAMPLERS.items():
            best, times = [], []
            for seed in range(args.seeds):
                b, t = run(fn, make(seed), args.trials)
                best.append(b)
                times.extend(t)
            report["quality"].append({
                "function": fname, "sampler": sname, "best": best,
                "median_best": statistics.median(best),
                "mean_suggest_ms": 1e3 * sum(times) / len(times),
            })
    if args.overhead_trials > 0:
        for fname, fn in FUNCTIONS.items():
            _, times = run(fn, SAMPLERS["tpe"](0), args.overhead_trials)
            last = times[-100:]
            report["overhead"].append({
                "function": fname, "sampler": "tpe", "trials": args.overhead_trials,
                "last_100_mean_ms": 1e3 * sum(last) / len(last),
                "mean_ms": 1e3 * sum(times) / len(times),
            })

    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"Optuna {report['optuna_version']}: median best value over {args.seeds} seeds "
          f"after {args.trials} trials")
    print(f"{'function':<12} {'sampler':<8} {'median best':>12} {'ms / suggest':>13}")
    for r in report["quality"]:
        print(f"{r['function']:<12} {r['sampler']:<8} {r['median_best']:>12.4f} "
              f"{r['mean_suggest_ms']:>13.3f}")
    if report["overhead"]:
        print(f"\nTPE overhead: ms per trial's suggestions with ~{args.overhead_trials} trials")
        for r in report["overhead"]:
            print(f"{r['function']:<12} last 100 mean {r['last_100_mean_ms']:8.3f}   "
                  f"mean {r['mean_ms']:8.3f}")


if __name__ == "__main__":
    main()
