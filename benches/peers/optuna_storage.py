"""Optuna's own client on a study database, for `tradetune bench storage --peer PYTHON`.

Two measurements, each printing one JSON line (the last line of output):

  claim  --storage URL --study NAME --workers W --trials-per-worker M
      W processes (started and connected before the clock starts) each ask and tell M trials
      of a new study NAME with an instant objective (x**2, x from RandomSampler), as
      `study.optimize` does. Prints the trials finished, the failures (e.g. SQLite's "database
      is locked") and the wall time from the first start to the last finish.

  load   --storage URL --study NAME
      Opens the storage and reads every trial of NAME (`optuna.load_study(...).get_trials()`),
      timed from before `RDBStorage(URL)` to after the read; the import is not timed.

URL (--storage, or $TRADETUNE_BENCH_STORAGE): a SQLite file path (or sqlite:///...) or postgresql://user@host:port/dbname as TradeTune
takes it. Needs optuna (and psycopg for PostgreSQL), as CI installs them.
"""

import argparse
import json
import multiprocessing as mp
import os
import time

import optuna


def sqlalchemy_url(url):
    if url.startswith("postgresql://") or url.startswith("postgres://") or url.startswith("sqlite:"):
        return url
    return "sqlite:///" + os.path.abspath(url)


def objective(trial):
    x = trial.suggest_float("x", -10.0, 10.0)
    return x * x


def claim_worker(url, study, trials, seed, barrier, results):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    s = optuna.load_study(
        study_name=study, storage=url, sampler=optuna.samplers.RandomSampler(seed=seed)
    )
    barrier.wait()
    start = time.time()
    done = failed = 0
    errors = []
    for _ in range(trials):
        try:
            t = s.ask()
            s.tell(t, objective(t))
            done += 1
        except Exception as e:  # a storage error: counted, as a worker would log and go on
            failed += 1
            if len(errors) < 3:
                errors.append(str(e).splitlines()[0][:200])
    results.put({"start": start, "end": time.time(), "done": done, "failed": failed, "errors": errors})


def claim(args):
    url = sqlalchemy_url(args.storage)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name=args.study, storage=url, direction="minimize")
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(args.workers)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=claim_worker,
            args=(url, args.study, args.trials_per_worker, args.seed + i, barrier, results),
        )
        for i in range(args.workers)
    ]
    for p in procs:
        p.start()
    runs = [results.get() for _ in procs]
    for p in procs:
        p.join()
    seconds = max(r["end"] for r in runs) - min(r["start"] for r in runs)
    done = sum(r["done"] for r in runs)
    return {
        "peer": "optuna",
        "version": optuna.__version__,
        "workers": args.workers,
        "trials": done,
        "failed": sum(r["failed"] for r in runs),
        "errors": [e for r in runs for e in r["errors"]][:3],
        "seconds": seconds,
        "trials_per_second": done / seconds if seconds > 0 else 0.0,
    }


def load(args):
    url = sqlalchemy_url(args.storage)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    start = time.perf_counter()
    storage = optuna.storages.RDBStorage(url)
    study = optuna.load_study(study_name=args.study, storage=storage)
    trials = study.get_trials(deepcopy=False)
    seconds = time.perf_counter() - start
    storage.engine.dispose()
    return {
        "peer": "optuna",
        "version": optuna.__version__,
        "trials": len(trials),
        "params": sum(len(t.params) for t in trials),
        "intermediate_values": sum(len(t.intermediate_values) for t in trials),
        "seconds": seconds,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["claim", "load"])
    p.add_argument("--storage", default=os.environ.get("TRADETUNE_BENCH_STORAGE"),
                   help="default: $TRADETUNE_BENCH_STORAGE (keeps a password off the command line)")
    p.add_argument("--study", required=True)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--trials-per-worker", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if not args.storage:
        p.error("give --storage URL or set TRADETUNE_BENCH_STORAGE")
    out = claim(args) if args.mode == "claim" else load(args)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
