#!/usr/bin/env python3
"""Check that the real Optuna client reads a TradeTune-written storage as TradeTune meant it.

Usage: python3 check_optuna_reads.py DB EXPECTED_JSON CSV_DIR

EXPECTED_JSON has the shape `optuna_dump.py` writes (studies → trials with number, state,
values, datetimes, params with Python types, distribution JSON, intermediate values, attrs,
best trial). This script loads DB with `optuna.load_study` for every study, builds the same
dump from what Optuna sees, and fails listing every difference. It also checks
`study.best_trial`/`best_value`, that `trials_dataframe()` has one row per trial, and writes
`trials_dataframe().to_csv()` of each study to CSV_DIR/<study>.csv for the byte comparison
done by the Rust test. Exit status 0 = all equal.
"""
import json
import os
import sys

import optuna

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import optuna_dump  # noqa: E402


def diff(path, expected, actual, out):
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual)):
            if k not in actual:
                out.append(f"{path}/{k}: missing in Optuna's view (expected {expected[k]!r})")
            elif k not in expected:
                out.append(f"{path}/{k}: unexpected {actual[k]!r}")
            else:
                diff(f"{path}/{k}", expected[k], actual[k], out)
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (e, a) in enumerate(zip(expected, actual)):
            diff(f"{path}[{i}]", e, a, out)
    elif expected != actual or type(expected) is not type(actual):
        out.append(f"{path}: expected {expected!r}, Optuna read {actual!r}")


def main():
    db, expected_path, csv_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dump_path = os.path.join(csv_dir, "optuna_view.json")
    optuna_dump.sys.argv = ["optuna_dump.py", db, dump_path]
    optuna_dump.main()
    with open(dump_path) as f:
        actual = json.load(f)
    with open(expected_path) as f:
        expected = json.load(f)
    problems = []
    diff("", expected["studies"], actual["studies"], problems)

    storage = optuna.storages.RDBStorage(db if "://" in db else f"sqlite:///{db}")
    for s in expected["studies"]:
        study = optuna.load_study(study_name=s["name"], storage=storage)
        if s["best"] is not None:
            best = [study.best_trial.number, optuna_dump.num(study.best_value)]
            if best != s["best"]:
                problems.append(f"{s['name']}: best trial {best}, expected {s['best']}")
        df = study.trials_dataframe()
        if len(df) != len(s["trials"]):
            problems.append(f"{s['name']}: trials_dataframe has {len(df)} rows, expected {len(s['trials'])}")
        df.to_csv(os.path.join(csv_dir, f"{s['name']}.csv"))

    if problems:
        print(f"Optuna {optuna.__version__} reads {db} differently from what TradeTune wrote:")
        for p in problems:
            print("  " + p)
        sys.exit(1)
    n = sum(len(s["trials"]) for s in expected["studies"])
    print(f"Optuna {optuna.__version__} read {len(expected['studies'])} studies, {n} trials: all as expected")


if __name__ == "__main__":
    main()
