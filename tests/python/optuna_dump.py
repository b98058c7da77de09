#!/usr/bin/env python3
"""Dump what the real Optuna client sees in a storage, as plain JSON.

Usage: python3 optuna_dump.py DB OUT_JSON

Every study with its directions and attributes, and every trial as `FrozenTrial` shows it:
number, state, values, datetimes (converted to naive UTC text), params (external values with
their Python type), distributions (Optuna's own JSON), intermediate values and attributes.
Non-finite floats are written as the strings "nan", "inf", "-inf" so the output is strict JSON;
attributes are written as `json.dumps` text so NaN inside them survives. TradeTune's tests
compare their own reading of a file against this dump.
"""
import datetime
import json
import math
import sys

import optuna
from optuna.distributions import distribution_to_json


def num(x):
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def typed(v):
    # bool before int: bool is an int subclass in Python.
    for t in (bool, int, float, str):
        if isinstance(v, t):
            return {"type": t.__name__, "value": num(v)}
    if v is None:
        return {"type": "None", "value": None}
    raise TypeError(f"unexpected param type {type(v)}")


def utc(dt):
    if dt is None:
        return None
    return dt.astimezone(datetime.timezone.utc).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def main():
    db, out = sys.argv[1], sys.argv[2]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(db if "://" in db else f"sqlite:///{db}")
    studies = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        trials = []
        for t in study.get_trials(deepcopy=False):
            trials.append({
                "number": t.number,
                "state": t.state.name,
                "values": None if t.values is None else [num(v) for v in t.values],
                "datetime_start": utc(t.datetime_start),
                "datetime_complete": utc(t.datetime_complete),
                "params": {k: typed(v) for k, v in t.params.items()},
                "param_order": list(t.params.keys()),
                "distributions": {k: distribution_to_json(d) for k, d in t.distributions.items()},
                "intermediate_values": [[k, num(v)] for k, v in sorted(t.intermediate_values.items())],
                "user_attrs": {k: json.dumps(v) for k, v in t.user_attrs.items()},
                "system_attrs": {k: json.dumps(v) for k, v in t.system_attrs.items()},
            })
        best = None
        if len(study.directions) == 1:
            try:
                best = [study.best_trial.number, num(study.best_value)]
            except ValueError:
                best = None
        studies.append({
            "name": s.study_name,
            "directions": [d.name for d in study.directions],
            "user_attrs": {k: json.dumps(v) for k, v in study.user_attrs.items()},
            "system_attrs": {k: json.dumps(v) for k, v in storage.get_study_system_attrs(study._study_id).items()},
            "best": best,
            "trials": trials,
        })
    with open(out, "w") as f:
        json.dump({"optuna": optuna.__version__, "studies": studies}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
