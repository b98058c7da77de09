"""Notes through optuna-dashboard's own API, for tests/tests/notes_dashboard.rs.

    python3 dashboard_notes.py read DB STUDY TRIAL_NUMBER
        prints {"study": {"version": v, "body": b}, "trial": {...}} as optuna-dashboard reads them
    python3 dashboard_notes.py write DB STUDY TRIAL_NUMBER STUDY_BODY_FILE TRIAL_BODY_FILE
        saves both notes with optuna_dashboard.save_note
"""

import json
import sys

import optuna
from optuna_dashboard import get_note, save_note
from optuna_dashboard._note import get_note_from_system_attrs


def handles(db, study_name, number):
    study = optuna.load_study(study_name=study_name, storage=f"sqlite:///{db}")
    frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == int(number))
    return study, optuna.trial.Trial(study, frozen._trial_id)


def read(db, study_name, number):
    study, trial = handles(db, study_name, number)
    attrs = study._storage.get_study_system_attrs(study._study_id)
    out = {}
    for key, handle, trial_id in [("study", study, None), ("trial", trial, trial._trial_id)]:
        note = get_note_from_system_attrs(attrs, trial_id)
        assert note["body"] == get_note(handle)
        out[key] = {"version": note["version"], "body": get_note(handle)}
    print(json.dumps(out))


def write(db, study_name, number, study_file, trial_file):
    study, trial = handles(db, study_name, number)
    with open(study_file, encoding="utf-8") as f:
        save_note(study, f.read())
    with open(trial_file, encoding="utf-8") as f:
        save_note(trial, f.read())


if __name__ == "__main__":
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    {"read": read, "write": write}[sys.argv[1]](*sys.argv[2:])
