#!/usr/bin/env python3
"""An Optuna process that adds trials to a study while TradeTune workers write the same file.

Usage: python3 optuna_worker.py DB STUDY N_TRIALS   (DB: a SQLite file or a postgresql:// URL)

Runs `study.optimize` for N_TRIALS trials with one float parameter `x` in [-10, 10] (the same
distribution the TradeTune workers use) and objective x**2, through Optuna's own RDBStorage
with its default SQLite settings (5 s lock timeout). Any storage error ("database is locked")
propagates and makes the exit status non-zero.
"""
import sys

import optuna


def main():
    db, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(
        study_name=name,
        storage=db if "://" in db else f"sqlite:///{db}",
        sampler=optuna.samplers.RandomSampler(seed=7),
    )
    study.optimize(lambda t: t.suggest_float("x", -10.0, 10.0) ** 2, n_trials=n, catch=())
    print(f"optuna worker: {n} trials done")


if __name__ == "__main__":
    main()
