"""Optuna's PED-ANOVA importances of the studies in a database, for tests/tests/importance_optuna.rs.

    python3 ped_anova_importances.py make DB       # write the test studies with Optuna's client
    python3 ped_anova_importances.py evaluate DB   # print every study's importances as JSON

`evaluate` prints {study: {config: {"normalized": {param: importance}, "raw": {...}}}} for
each single-objective study with at least two COMPLETE trials of finite value, where config is
one of CONFIGS below (Optuna's default evaluator first). Floats keep every digit (json uses repr).
"""

import json
import math
import sys
import warnings

import optuna
from optuna.importance import PedAnovaImportanceEvaluator

CONFIGS = {
    "default": {},
    "target0.2_region0.6": {"target_quantile": 0.2, "region_quantile": 0.6},
    "global": {"evaluate_on_local": False},
}


def mixed_space(trial):
    x = trial.suggest_float("x", -5.0, 5.0)
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    n = trial.suggest_int("n", 1, 64)
    m = trial.suggest_int("m", 0, 100, step=5)
    k = trial.suggest_int("k", 1, 1000, log=True)
    f = trial.suggest_float("f", 0.0, 1.0, step=0.1)
    act = trial.suggest_categorical("act", ["relu", "tanh", "gelu"])
    batch = trial.suggest_categorical("batch", [16, 32, 64, 128])
    trial.suggest_int("fixed", 3, 3)
    return x, lr, n, m, k, f, act, batch


def mixed_min(trial):
    x, lr, n, m, k, f, act, batch = mixed_space(trial)
    return (
        x * x
        + 3.0 * abs(math.log10(lr) + 3.0)
        + 0.05 * n
        + 0.01 * m
        + 0.3 * math.log(k)
        + f
        + {"relu": 0.0, "tanh": 2.0, "gelu": 0.5}[act]
        + 0.002 * batch
    )


def mixed_max(trial):
    x, lr, n, m, k, f, act, batch = mixed_space(trial)
    return -abs(x - 2.0) + 0.5 * math.log10(lr) - abs(n - 40) / 10.0 + (act == "gelu") + batch / 64


def conditional(trial):
    model = trial.suggest_categorical("model", ["a", "b"])
    # The range of `shared` changes after trial 40: two regimes of one parameter.
    high = 1.0 if trial.number < 40 else 2.0
    s = trial.suggest_float("shared", 0.0, high)
    if model == "a":
        v = trial.suggest_float("a_lr", 1e-4, 1.0, log=True)
        value = abs(math.log10(v) + 2.0) + s
    else:
        d = trial.suggest_int("b_depth", 1, 8)
        value = 0.5 * d + s * s
    if trial.number == 7:
        trial.suggest_float("once", 0.0, 1.0)  # in one trial only: its regime is dropped
    if trial.number % 13 == 5:
        return float("inf")  # COMPLETE, but not finite: left out
    if trial.number % 11 == 3:
        raise optuna.TrialPruned()
    return value


def ties(trial):
    x = trial.suggest_float("x", 0.0, 1.0)
    y = trial.suggest_int("y", 0, 9)
    return round(x * 3) + 0.0 * y  # four distinct values, many ties


def make(db):
    # Optimised in memory, then copied: one SQLite commit per trial instead of several.
    memory = optuna.storages.InMemoryStorage()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for name, objective, direction, n, sampler in [
        ("mixed_min", mixed_min, "minimize", 80, optuna.samplers.RandomSampler(seed=1)),
        ("mixed_max", mixed_max, "maximize", 70, optuna.samplers.RandomSampler(seed=2)),
        ("tpe_min", mixed_min, "minimize", 60, optuna.samplers.TPESampler(seed=3)),
        ("conditional", conditional, "minimize", 90, optuna.samplers.RandomSampler(seed=4)),
        ("ties", ties, "minimize", 40, optuna.samplers.RandomSampler(seed=5)),
        ("two_trials", ties, "maximize", 2, optuna.samplers.RandomSampler(seed=6)),
    ]:
        study = optuna.create_study(
            study_name=name, storage=memory, direction=direction, sampler=sampler
        )
        study.optimize(objective, n_trials=n, catch=())
        optuna.copy_study(
            from_study_name=name, from_storage=memory, to_storage=f"sqlite:///{db}"
        )


def evaluate(db):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    storage = f"sqlite:///{db}"
    out = {}
    for summary in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        if len(study.directions) != 1:
            continue
        complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
        if sum(1 for t in complete if math.isfinite(t.value)) < 2:
            continue
        out[study.study_name] = {}
        for config, kwargs in CONFIGS.items():
            result = {}
            for normalize, key in [(True, "normalized"), (False, "raw")]:
                imp = optuna.importance.get_param_importances(
                    study, evaluator=PedAnovaImportanceEvaluator(**kwargs), normalize=normalize
                )
                result[key] = {k: float(v) for k, v in imp.items()}
            out[study.study_name][config] = result
    print(json.dumps(out))


if __name__ == "__main__":
    {"make": make, "evaluate": evaluate}[sys.argv[1]](sys.argv[2])
