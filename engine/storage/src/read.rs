//! Reading studies and trials.
//!
//! A study's trials load with one query per table (trials, params, values, intermediate values,
//! user and system attributes), each walking the trials of the study through
//! `ix_trials_study_id`, and are joined in memory; a distribution JSON text is parsed once and
//! shared. Optuna loads trials the same way (`selectinload`), but builds Python objects per row.

use std::collections::HashMap;
use std::sync::Arc;

use super::db::{DbError, Row, Value, args};
use super::distribution_json::float_distribution_log;
use super::error::StorageError;
use super::json_value::JsonValue;
use super::model::OptunaDistribution;
use super::model::{StudyDirection, TrialState};
use super::open::{Storage, sql_err};
use super::records::{SetAside, StudyRecord, StudySummary, TrialParam, TrialRecord};

/// Which rows to load: one study's trials, one trial, or the trials of a study that may have
/// changed since an earlier read.
#[derive(Clone, Copy)]
enum Scope<'a> {
    Study(i64),
    Trial(i64),
    /// The trials of `study` with an id above `after`, and those of `again`.
    Since {
        study: i64,
        after: i64,
        again: &'a [i64],
    },
}

/// One attribute row: (row id, study id, key, value JSON).
type AttrRow = (i64, Option<i64>, Option<String>, Option<String>);

/// More trials to read again than this and [`Storage::trials_since`] reads from the first of
/// them on instead of listing each (a list of placeholders has a length limit).
const MAX_AGAIN: usize = 256;

impl Scope<'_> {
    /// The `FROM … WHERE …` that selects the scope's trials as `t` (`{JOIN}` left for the
    /// caller), and its arguments.
    fn select_clause(self) -> (String, Vec<Value>) {
        match self {
            Scope::Study(id) => (
                "FROM trials t {JOIN} WHERE t.study_id = ?1".into(),
                vec![Value::from(id)],
            ),
            Scope::Trial(id) => (
                "FROM trials t {JOIN} WHERE t.trial_id = ?1".into(),
                vec![Value::from(id)],
            ),
            Scope::Since {
                study,
                after,
                again,
            } if again.len() > MAX_AGAIN => {
                let first = again.iter().copied().min().unwrap_or(after + 1);
                (
                    "FROM trials t {JOIN} WHERE t.study_id = ?1 AND t.trial_id >= ?2".into(),
                    vec![Value::from(study), Value::from(first.min(after + 1))],
                )
            }
            Scope::Since {
                study,
                after,
                again,
            } => {
                // One placeholder per id: the statement differs only by how many there are
                // (a few: the trials that were running), so PostgreSQL prepares few of them.
                let mut clause =
                    "FROM trials t {JOIN} WHERE t.study_id = ?1 AND (t.trial_id > ?2".to_owned();
                if !again.is_empty() {
                    let list: Vec<String> =
                        (0..again.len()).map(|i| format!("?{}", i + 3)).collect();
                    clause.push_str(&format!(" OR t.trial_id IN ({})", list.join(", ")));
                }
                clause.push(')');
                let mut args = vec![Value::from(study), Value::from(after)];
                args.extend(again.iter().map(|&id| Value::from(id)));
                (clause, args)
            }
        }
    }
}

impl Storage {
    fn corrupt(
        &self,
        table: &'static str,
        row_id: i64,
        column: &'static str,
        message: String,
    ) -> StorageError {
        StorageError::Corrupt {
            path: self.path.clone(),
            table,
            row_id,
            column,
            message,
        }
    }

    fn json(
        &self,
        table: &'static str,
        row_id: i64,
        text: &str,
    ) -> Result<JsonValue, StorageError> {
        JsonValue::parse(text).map_err(|e| self.corrupt(table, row_id, "value_json", e.to_string()))
    }

    /// All studies, by id.
    pub fn studies(&self) -> Result<Vec<StudyRecord>, StorageError> {
        self.studies_of(None)
    }

    /// The studies, by id: all, or only the one of id `only` (so that a row of another study
    /// that does not parse, an attribute Python wrote that this reader refuses say, does not
    /// keep this one from being read).
    fn studies_of(&self, only: Option<i64>) -> Result<Vec<StudyRecord>, StorageError> {
        let err = sql_err(&self.path, "read studies");
        // An id of ours, not input text: written into the statements as it is.
        let of = only.map_or_else(String::new, |id| format!(" WHERE study_id = {id}"));
        let mut studies: Vec<StudyRecord> = self
            .conn
            .query(
                &format!("SELECT study_id, study_name FROM studies{of} ORDER BY study_id"),
                &[],
            )
            .and_then(|rows| {
                rows.iter()
                    .map(|r| {
                        Ok(StudyRecord {
                            study_id: r.i64(0)?,
                            name: r.string(1)?,
                            directions: Vec::new(),
                            user_attrs: Vec::new(),
                            system_attrs: Vec::new(),
                        })
                    })
                    .collect::<Result<Vec<_>, DbError>>()
            })
            .map_err(&err)?;
        let index: HashMap<i64, usize> = studies
            .iter()
            .enumerate()
            .map(|(i, s)| (s.study_id, i))
            .collect();
        let rows: Vec<(i64, i64, String)> = self
            .conn
            .query(&format!("SELECT study_direction_id, study_id, direction FROM study_directions{of} ORDER BY study_id, objective"), &[])
            .and_then(|rows| rows.iter().map(|r| Ok((r.i64(0)?, r.i64(1)?, r.string(2)?))).collect())
            .map_err(&err)?;
        for (row_id, study_id, direction) in rows {
            // Optuna 2.x's RDB storage created a study with the direction `NOT_SET` and set it
            // after; a study created through its storage API alone (or cut off between the
            // two) keeps it. Optuna orders such a study's trials as a minimized one's (its
            // best trial is the smallest value), and so are they read here: one such study
            // does not make the database unreadable.
            let d = match direction.as_str() {
                "NOT_SET" => Ok(StudyDirection::Minimize),
                other => other.parse::<StudyDirection>(),
            }
            .map_err(|m| self.corrupt("study_directions", row_id, "direction", m))?;
            if let Some(&i) = index.get(&study_id) {
                studies[i].directions.push(d);
            }
        }
        for (table, user) in [
            ("study_user_attributes", true),
            ("study_system_attributes", false),
        ] {
            let id_col = if user {
                "study_user_attribute_id"
            } else {
                "study_system_attribute_id"
            };
            let rows: Vec<AttrRow> = self
                .conn
                .query(
                    &format!(
                        "SELECT {id_col}, study_id, key, value_json FROM {table}{of} ORDER BY {id_col}"
                    ),
                    &[],
                )
                .and_then(|rows| rows.iter().map(attr_row).collect())
                .map_err(&err)?;
            for (row_id, study_id, key, value) in rows {
                let Some(&i) = study_id.and_then(|s| index.get(&s)) else {
                    continue;
                };
                let value = self.json(table, row_id, value.as_deref().unwrap_or("null"))?;
                let attrs = if user {
                    &mut studies[i].user_attrs
                } else {
                    &mut studies[i].system_attrs
                };
                attrs.push((key.unwrap_or_default(), value));
            }
        }
        Ok(studies)
    }

    /// The study named `name` (only its own rows are read).
    pub fn study(&self, name: &str) -> Result<StudyRecord, StorageError> {
        let id = self.study_id(name)?;
        self.studies_of(Some(id))?
            .into_iter()
            .next()
            .ok_or_else(|| self.unknown_study(name))
    }

    /// The id of the study named `name`.
    pub fn study_id(&self, name: &str) -> Result<i64, StorageError> {
        let id = self
            .conn
            .query_opt(
                "SELECT study_id FROM studies WHERE study_name = ?1",
                args![name],
            )
            .and_then(|r| r.map(|r| r.i64(0)).transpose())
            .map_err(sql_err(&self.path, "find study"))?;
        id.ok_or_else(|| self.unknown_study(name))
    }

    /// No study is named `name`: the error lists those there are.
    fn unknown_study(&self, name: &str) -> StorageError {
        let known = self
            .conn
            .query("SELECT study_name FROM studies ORDER BY study_id", &[])
            .and_then(|rows| {
                rows.iter()
                    .map(|r| r.string(0))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map(|names| names.join(", "))
            .unwrap_or_default();
        StorageError::UnknownStudyName {
            name: name.to_owned(),
            known: if known.is_empty() {
                "none".to_owned()
            } else {
                known
            },
        }
    }

    /// Every study with its trial counts per state and best value (single objective).
    pub fn study_summaries(&self) -> Result<Vec<StudySummary>, StorageError> {
        let err = sql_err(&self.path, "summarise studies");
        let studies = self.studies()?;
        let mut summaries: Vec<StudySummary> = studies
            .into_iter()
            .map(|study| StudySummary {
                study,
                n_trials_by_state: [0; 5],
                best: None,
                datetime_start: None,
            })
            .collect();
        let index: HashMap<i64, usize> = summaries
            .iter()
            .enumerate()
            .map(|(i, s)| (s.study.study_id, i))
            .collect();
        let rows: Vec<(i64, String, i64, Option<chrono::NaiveDateTime>)> = self
            .conn
            .query("SELECT study_id, state, COUNT(*), MIN(datetime_start) FROM trials WHERE study_id IS NOT NULL GROUP BY study_id, state", &[])
            .and_then(|rows| {
                rows.iter()
                    .map(|r| Ok((r.i64(0)?, r.string(1)?, r.i64(2)?, r.opt_time(3)?)))
                    .collect()
            })
            .map_err(&err)?;
        for (study_id, state, n, start) in rows {
            let Some(&i) = index.get(&study_id) else {
                continue;
            };
            let state = state
                .parse::<TrialState>()
                .map_err(|m| self.corrupt("trials", study_id, "state", m))?;
            summaries[i].n_trials_by_state[state.index()] += n as usize;
            summaries[i].datetime_start = match (summaries[i].datetime_start, start) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        for s in &mut summaries {
            if let [direction] = s.study.directions[..] {
                s.best = self.best_value(s.study.study_id, direction)?;
            }
        }
        Ok(summaries)
    }

    /// (number, value) of the best COMPLETE trial, ordered like Optuna's
    /// `find_max_value_trial_id`/`find_min_value_trial_id` (−inf < finite < +inf, ties to the
    /// earliest trial).
    fn best_value(
        &self,
        study_id: i64,
        direction: StudyDirection,
    ) -> Result<Option<(i64, f64)>, StorageError> {
        let order = match direction {
            StudyDirection::Maximize => "DESC",
            StudyDirection::Minimize => "ASC",
        };
        let sql = format!(
            "SELECT t.number, v.value, v.value_type FROM trials t JOIN trial_values v ON v.trial_id = t.trial_id \
             WHERE t.study_id = ?1 AND t.state = 'COMPLETE' AND v.objective = 0 \
             ORDER BY CASE v.value_type WHEN 'INF_NEG' THEN -1 WHEN 'FINITE' THEN 0 ELSE 1 END {order}, \
             v.value {order}, t.trial_id ASC LIMIT 1"
        );
        let row = self
            .conn
            .query_opt(&sql, args![study_id])
            .and_then(|r| {
                r.map(|r| Ok((r.i64(0)?, r.opt_f64(1)?, r.string(2)?)))
                    .transpose()
            })
            .map_err(sql_err(&self.path, "find best trial"))?;
        Ok(row.map(|(number, v, kind)| (number, stored_value(v, &kind))))
    }

    /// The best COMPLETE trial of a single-objective study (None when there is none).
    pub fn best_trial(&self, study_id: i64) -> Result<Option<TrialRecord>, StorageError> {
        let study = self
            .studies()?
            .into_iter()
            .find(|s| s.study_id == study_id)
            .ok_or(StorageError::UnknownStudy(study_id))?;
        let [direction] = study.directions[..] else {
            return Ok(None);
        };
        match self.best_value(study_id, direction)? {
            None => Ok(None),
            Some((number, _)) => {
                let id = self
                    .conn
                    .query_opt(
                        "SELECT trial_id FROM trials WHERE study_id = ?1 AND number = ?2",
                        args![study_id, number],
                    )
                    .and_then(|r| r.map(|r| r.i64(0)).transpose())
                    .map_err(sql_err(&self.path, "find best trial"))?
                    .ok_or(StorageError::UnknownStudy(study_id))?;
                self.trial(id).map(Some)
            }
        }
    }

    /// One trial by id.
    pub fn trial(&self, trial_id: i64) -> Result<TrialRecord, StorageError> {
        self.load(Scope::Trial(trial_id))?
            .pop()
            .ok_or(StorageError::UnknownTrial(trial_id))
    }

    /// All trials of a study, by trial id (= by number).
    pub fn trials(&self, study_id: i64) -> Result<Vec<TrialRecord>, StorageError> {
        let exists = self
            .conn
            .query_opt(
                "SELECT study_id FROM studies WHERE study_id = ?1",
                args![study_id],
            )
            .map_err(sql_err(&self.path, "find study"))?;
        exists.ok_or(StorageError::UnknownStudy(study_id))?;
        self.load(Scope::Study(study_id))
    }

    /// The trials of a study that may have changed since an earlier read, by trial id (like
    /// optuna-dashboard's `after` cursor): those with an id above `after` (the largest the
    /// earlier read saw) and those of `again` (the ones it saw RUNNING or WAITING, which may
    /// have finished since), as they are now. A finished trial does not change, so an earlier
    /// read and this one together are the study's trials; a live table polls this instead of
    /// reading 10,000 trials again.
    pub fn trials_since(
        &self,
        study_id: i64,
        after: i64,
        again: &[i64],
    ) -> Result<Vec<TrialRecord>, StorageError> {
        let exists = self
            .conn
            .query_opt(
                "SELECT study_id FROM studies WHERE study_id = ?1",
                args![study_id],
            )
            .map_err(sql_err(&self.path, "find study"))?;
        exists.ok_or(StorageError::UnknownStudy(study_id))?;
        self.load(Scope::Since {
            study: study_id,
            after,
            again,
        })
    }

    fn load(&self, scope: Scope<'_>) -> Result<Vec<TrialRecord>, StorageError> {
        let err = sql_err(&self.path, "load trials");
        let (clause, id) = scope.select_clause();
        let sql = |select: &str, join: &str, order: &str| {
            format!(
                "SELECT {select} {} ORDER BY {order}",
                clause.replace("{JOIN}", join)
            )
        };
        let id = id.as_slice();
        let mut trials: Vec<TrialRecord> = Vec::new();
        let rows = self
            .conn
            .query(
                &sql(
                    "t.trial_id, t.study_id, t.number, t.state, t.datetime_start, t.datetime_complete",
                    "",
                    "t.trial_id",
                ),
                id,
            )
            .map_err(&err)?;
        for r in &rows {
            trials.push(self.trial_from_row(r)?);
        }
        let index: HashMap<i64, usize> = trials
            .iter()
            .enumerate()
            .map(|(i, t)| (t.trial_id, i))
            .collect();

        // A distribution the model refuses (Optuna stores `FloatDistribution(0.0, float('inf'))`
        // from `add_trial`) sets that parameter aside on its trial (`SetAside`), as a row of
        // another study does not keep `studies_of` from reading this one: one row another
        // client wrote does not make the whole study unreadable.
        let mut distributions: HashMap<String, Result<Arc<OptunaDistribution>, String>> =
            HashMap::new();
        let rows = self
            .conn
            .query(
                &sql(
                    "p.param_id, p.trial_id, p.param_name, p.param_value, p.distribution_json",
                    "JOIN trial_params p ON p.trial_id = t.trial_id",
                    "p.trial_id, p.param_id",
                ),
                id,
            )
            .map_err(&err)?;
        for r in &rows {
            let row_id = r.i64(0).map_err(&err)?;
            let trial_id = r.i64(1).map_err(&err)?;
            let name = r.opt_string(2).map_err(&err)?;
            let internal = r.opt_f64(3).map_err(&err)?;
            let json = r.opt_string(4).map_err(&err)?.unwrap_or_default();
            let distribution = match distributions.get(&json) {
                Some(d) => d.clone(),
                None => {
                    let d = OptunaDistribution::from_optuna_json(&json)
                        .map(Arc::new)
                        .map_err(|e| e.to_string());
                    distributions.insert(json.clone(), d.clone());
                    d
                }
            };
            let internal = internal.ok_or_else(|| {
                self.corrupt("trial_params", row_id, "param_value", "NULL".into())
            })?;
            let Some(&i) = index.get(&trial_id) else {
                continue;
            };
            match distribution {
                Ok(distribution) => trials[i].params.push(TrialParam {
                    name: name.unwrap_or_default(),
                    internal,
                    distribution,
                }),
                Err(reason) => trials[i].set_aside.push(SetAside {
                    table: "trial_params",
                    row_id,
                    column: "distribution_json",
                    name: name.unwrap_or_default(),
                    float_value: float_distribution_log(&json).map(|_| internal),
                    internal: Some(internal),
                    text: json,
                    reason,
                }),
            }
        }
        let rows = self
            .conn
            .query(
                &sql(
                    "v.trial_value_id, v.trial_id, v.objective, v.value, v.value_type",
                    "JOIN trial_values v ON v.trial_id = t.trial_id",
                    "v.trial_id, v.objective",
                ),
                id,
            )
            .map_err(&err)?;
        for r in &rows {
            let row_id = r.i64(0).map_err(&err)?;
            let trial_id = r.i64(1).map_err(&err)?;
            let objective = r.i64(2).map_err(&err)?;
            let value = r.opt_f64(3).map_err(&err)?;
            let kind = r.string(4).map_err(&err)?;
            check_kind(&kind, value, false)
                .map_err(|m| self.corrupt("trial_values", row_id, "value_type", m))?;
            let Some(&i) = index.get(&trial_id) else {
                continue;
            };
            let values = trials[i].values.get_or_insert_with(Vec::new);
            let objective = usize::try_from(objective).map_err(|_| {
                self.corrupt("trial_values", row_id, "objective", format!("{objective}"))
            })?;
            // Read in objective order: each trial's objectives count 0, 1, … without a gap (a
            // damaged row's huge objective would otherwise be allocated for, and a missing
            // one read as a made-up value).
            if objective != values.len() {
                return Err(self.corrupt(
                    "trial_values",
                    row_id,
                    "objective",
                    format!(
                        "{objective}, where the trial's next objective is {} (they count from 0)",
                        values.len()
                    ),
                ));
            }
            values.push(stored_value(value, &kind));
        }
        let rows = self
            .conn
            .query(
                &sql(
                    "v.trial_intermediate_value_id, v.trial_id, v.step, v.intermediate_value, v.intermediate_value_type",
                    "JOIN trial_intermediate_values v ON v.trial_id = t.trial_id",
                    "v.trial_id, v.step",
                ),
                id,
            )
            .map_err(&err)?;
        for r in &rows {
            let row_id = r.i64(0).map_err(&err)?;
            let trial_id = r.i64(1).map_err(&err)?;
            let step = r.i64(2).map_err(&err)?;
            let value = r.opt_f64(3).map_err(&err)?;
            let kind = r.string(4).map_err(&err)?;
            check_kind(&kind, value, true).map_err(|m| {
                self.corrupt(
                    "trial_intermediate_values",
                    row_id,
                    "intermediate_value_type",
                    m,
                )
            })?;
            if let Some(&i) = index.get(&trial_id) {
                trials[i]
                    .intermediate_values
                    .push((step, stored_value(value, &kind)));
            }
        }
        for (table, id_col, user) in [
            ("trial_user_attributes", "trial_user_attribute_id", true),
            (
                "trial_system_attributes",
                "trial_system_attribute_id",
                false,
            ),
        ] {
            let rows = self
                .conn
                .query(
                    &sql(
                        &format!("a.{id_col}, a.trial_id, a.key, a.value_json"),
                        &format!("JOIN {table} a ON a.trial_id = t.trial_id"),
                        &format!("a.trial_id, a.{id_col}"),
                    ),
                    id,
                )
                .map_err(&err)?;
            for r in &rows {
                let (row_id, trial_id, key, text) = attr_row(r).map_err(&err)?;
                let Some(&i) = trial_id.and_then(|t| index.get(&t)) else {
                    continue;
                };
                let text = text.unwrap_or_else(|| "null".to_owned());
                // A value that does not parse (text another client wrote) is set aside on its
                // trial, as a parameter is above.
                let value = match JsonValue::parse(&text) {
                    Ok(value) => value,
                    Err(e) => {
                        trials[i].set_aside.push(SetAside {
                            table,
                            row_id,
                            column: "value_json",
                            name: key.unwrap_or_default(),
                            text,
                            internal: None,
                            float_value: None,
                            reason: e.to_string(),
                        });
                        continue;
                    }
                };
                let attrs = if user {
                    &mut trials[i].user_attrs
                } else {
                    &mut trials[i].system_attrs
                };
                attrs.push((key.unwrap_or_default(), value));
            }
        }
        Ok(trials)
    }

    fn trial_from_row(&self, r: &Row) -> Result<TrialRecord, StorageError> {
        let err = sql_err(&self.path, "load trials");
        let trial_id = r.i64(0).map_err(&err)?;
        let number = r.opt_i64(2).map_err(&err)?;
        let state = r.string(3).map_err(&err)?;
        let state = state
            .parse::<TrialState>()
            .map_err(|m| self.corrupt("trials", trial_id, "state", m))?;
        let number =
            number.ok_or_else(|| self.corrupt("trials", trial_id, "number", "NULL".into()))?;
        let time = |i: usize, column| {
            r.opt_time(i)
                .map_err(|e| self.corrupt("trials", trial_id, column, e.to_string()))
        };
        Ok(TrialRecord {
            trial_id,
            study_id: r.i64(1).map_err(&err)?,
            number,
            state,
            values: None,
            datetime_start: time(4, "datetime_start")?,
            datetime_complete: time(5, "datetime_complete")?,
            params: Vec::new(),
            intermediate_values: Vec::new(),
            user_attrs: Vec::new(),
            system_attrs: Vec::new(),
            set_aside: Vec::new(),
        })
    }
}

/// (row id, owner id, key, value JSON) of an attribute row.
fn attr_row(r: &Row) -> Result<AttrRow, DbError> {
    Ok((r.i64(0)?, r.opt_i64(1)?, r.opt_string(2)?, r.opt_string(3)?))
}

/// Optuna's `stored_repr_to_value`: the type tells what a NULL stands for.
fn stored_value(value: Option<f64>, kind: &str) -> f64 {
    match kind {
        "INF_POS" => f64::INFINITY,
        "INF_NEG" => f64::NEG_INFINITY,
        "NAN" => f64::NAN,
        _ => value.unwrap_or(f64::NAN),
    }
}

/// The value/type pairs Optuna's asserts accept.
fn check_kind(kind: &str, value: Option<f64>, nan_allowed: bool) -> Result<(), String> {
    match (kind, value) {
        ("FINITE", Some(_)) => Ok(()),
        ("INF_POS" | "INF_NEG", None) => Ok(()),
        ("NAN", None) if nan_allowed => Ok(()),
        (kind, value) => Err(format!("value type `{kind}` with value {value:?}")),
    }
}
