//! TradeTune's own data, in `tradetune_*` tables that Optuna and its dashboard ignore:
//! per-trial run metadata (worker, device, backend, precision, the applied configuration),
//! learning curves (one row per metric per PPO update) and telemetry samples.
//!
//! The schema has its own version in `tradetune_version`; a file from a newer TradeTune with a
//! different version is refused rather than written into. NaN cannot be stored in SQLite
//! (it becomes NULL), so a NULL metric value reads back as NaN.

use chrono::NaiveDateTime;

use super::datetime::now_utc;
use super::db::{Dialect, args};
use super::error::StorageError;
use super::json_value::JsonValue;
use super::open::{Storage, sql_err};
pub use super::tradetune_schema::{APPLIED_CONFIG_KEY, RUN_ATTR_KEYS, TRADETUNE_SCHEMA_VERSION};

/// Where and how a trial ran.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMetadata {
    pub worker: Option<String>,
    /// e.g. `cpu`, `wgpu:0`.
    pub device: String,
    /// e.g. `flex`, `wgpu`.
    pub backend: String,
    /// `f32`, `bf16` or `f16`.
    pub precision: String,
    /// The configuration the trainer actually received.
    pub config: JsonValue,
}

/// One point of a learning curve.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    pub metric: String,
    pub update_index: i64,
    pub env_steps: i64,
    pub value: f64,
}

/// One bar of a cross-validation fold's out-of-sample returns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FoldReturn {
    /// The fold, in the study's fixed order.
    pub fold: i64,
    /// Position within the fold's test bars.
    pub bar_index: i64,
    /// Unix seconds of the bar.
    pub bar_time: i64,
    /// The agent's simple return over the bar (NaN stored as NULL).
    pub value: f64,
    /// Equal weight's simple return over the same bar, the benchmark the excess objectives
    /// measure the agent against; `None` where it was not stored (returns stored before it
    /// was, or by another program).
    pub benchmark: Option<f64>,
}

/// One telemetry sample (of a trial, or of a device when `trial_id` is None).
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetrySample {
    pub trial_id: Option<i64>,
    /// Naive UTC.
    pub recorded_at: NaiveDateTime,
    /// e.g. `wgpu:0`, `worker-2`.
    pub source: String,
    pub metric: String,
    pub value: f64,
}

impl Storage {
    /// Records where and how a trial runs, in our table and mirrored into the trial's user
    /// attributes (`worker`, `device`, `backend`, `precision`) and the system attribute
    /// `applied_config`, in one transaction. The trial must not be finished.
    pub fn set_run_metadata(
        &mut self,
        trial_id: i64,
        meta: &RunMetadata,
    ) -> Result<(), StorageError> {
        let now = now_utc();
        self.write("set run metadata", |tx| {
            super::trial_write::trial_row(&mut *tx, trial_id).and_then(|row| {
                if row.state.is_finished() {
                    Err(StorageError::TrialFinished { trial_id, number: row.number, state: row.state })
                } else {
                    Ok(row)
                }
            })?;
            let config = meta.config.dumps();
            tx.tx
                .execute(
                    "INSERT INTO tradetune_runs (trial_id, worker, device, backend, \"precision\", config_json, recorded_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (trial_id) DO UPDATE SET worker = excluded.worker, \
                     device = excluded.device, backend = excluded.backend, \"precision\" = excluded.\"precision\", \
                     config_json = excluded.config_json, recorded_at = excluded.recorded_at",
                    args![trial_id, &meta.worker, &meta.device, &meta.backend, &meta.precision, &config, now],
                )
                .map_err(tx.err())?;
            let mirrored = [
                (RUN_ATTR_KEYS[0], meta.worker.clone().map_or(JsonValue::Null, JsonValue::Str)),
                (RUN_ATTR_KEYS[1], JsonValue::from(meta.device.as_str())),
                (RUN_ATTR_KEYS[2], JsonValue::from(meta.backend.as_str())),
                (RUN_ATTR_KEYS[3], JsonValue::from(meta.precision.as_str())),
            ];
            for (key, value) in mirrored {
                tx.tx
                    .execute(
                        "INSERT INTO trial_user_attributes (trial_id, key, value_json) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json",
                        args![trial_id, key, value.dumps()],
                    )
                    .map_err(tx.err())?;
            }
            tx.tx
                .execute(
                    "INSERT INTO trial_system_attributes (trial_id, key, value_json) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json",
                    args![trial_id, APPLIED_CONFIG_KEY, config],
                )
                .map_err(tx.err())?;
            Ok(())
        })
    }

    /// The run metadata of a trial, if recorded.
    pub fn run_metadata(&self, trial_id: i64) -> Result<Option<RunMetadata>, StorageError> {
        let row = self
            .conn
            .query_opt(
                "SELECT worker, device, backend, \"precision\", config_json FROM tradetune_runs WHERE trial_id = ?1",
                args![trial_id],
            )
            .and_then(|r| {
                r.map(|r| {
                    Ok((r.opt_string(0)?, r.string(1)?, r.string(2)?, r.string(3)?, r.string(4)?))
                })
                .transpose()
            })
            .map_err(sql_err(&self.path, "read run metadata"))?;
        row.map(|(worker, device, backend, precision, config)| {
            let config = JsonValue::parse(&config).map_err(|e| StorageError::Corrupt {
                path: self.path.clone(),
                table: "tradetune_runs",
                row_id: trial_id,
                column: "config_json",
                message: e.to_string(),
            })?;
            Ok(RunMetadata {
                worker,
                device,
                backend,
                precision,
                config,
            })
        })
        .transpose()
    }

    /// Appends learning-curve points (a repeated (metric, update) replaces the earlier one).
    pub fn append_learning_curve(
        &mut self,
        trial_id: i64,
        points: &[CurvePoint],
    ) -> Result<(), StorageError> {
        self.write("append learning curve", |tx| {
            let row = super::trial_write::trial_row(&mut *tx, trial_id)?;
            if row.state.is_finished() {
                return Err(StorageError::TrialFinished { trial_id, number: row.number, state: row.state });
            }
            for p in points {
                tx.tx
                    .execute(
                        "INSERT INTO tradetune_learning_curves (trial_id, metric, update_index, env_steps, value) \
                         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (trial_id, metric, update_index) DO UPDATE SET \
                         env_steps = excluded.env_steps, value = excluded.value",
                        args![trial_id, &p.metric, p.update_index, p.env_steps, p.value],
                    )
                    .map_err(tx.err())?;
            }
            Ok(())
        })
    }

    /// Stores the out-of-sample returns of one fold of a trial (a repeated bar replaces the
    /// earlier one), in one transaction.
    pub fn put_fold_returns(
        &mut self,
        trial_id: i64,
        rows: &[FoldReturn],
    ) -> Result<(), StorageError> {
        self.write("store fold returns", |tx| {
            let row = super::trial_write::trial_row(&mut *tx, trial_id)?;
            if row.state.is_finished() {
                return Err(StorageError::TrialFinished { trial_id, number: row.number, state: row.state });
            }
            for r in rows {
                let value = r.value.is_finite().then_some(r.value);
                let benchmark = r.benchmark.filter(|b| b.is_finite());
                tx.tx
                    .execute(
                        "INSERT INTO tradetune_fold_returns (trial_id, fold, bar_index, bar_time, value, benchmark) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (trial_id, fold, bar_index) DO UPDATE SET \
                         bar_time = excluded.bar_time, value = excluded.value, benchmark = excluded.benchmark",
                        args![trial_id, r.fold, r.bar_index, r.bar_time, value, benchmark],
                    )
                    .map_err(tx.err())?;
            }
            Ok(())
        })
    }

    /// A trial's stored fold returns, by fold then bar (empty when it has none).
    pub fn fold_returns(&self, trial_id: i64) -> Result<Vec<FoldReturn>, StorageError> {
        let err = sql_err(&self.path, "read fold returns");
        if !self.has_table("tradetune_fold_returns").map_err(&err)? {
            return Ok(Vec::new());
        }
        // A database no writable open has seen since the column came (opened read-only).
        let benchmark = if self
            .has_column("tradetune_fold_returns", "benchmark")
            .map_err(&err)?
        {
            "benchmark"
        } else {
            "NULL"
        };
        self.conn
            .query(
                &format!(
                    "SELECT fold, bar_index, bar_time, value, {benchmark} FROM tradetune_fold_returns \
                     WHERE trial_id = ?1 ORDER BY fold, bar_index"
                ),
                args![trial_id],
            )
            .and_then(|rows| {
                rows.iter()
                    .map(|r| {
                        Ok(FoldReturn {
                            fold: r.i64(0)?,
                            bar_index: r.i64(1)?,
                            bar_time: r.i64(2)?,
                            value: r.opt_f64(3)?.unwrap_or(f64::NAN),
                            benchmark: r.opt_f64(4)?,
                        })
                    })
                    .collect()
            })
            .map_err(&err)
    }

    /// A trial's learning curve, by metric then update.
    pub fn learning_curve(&self, trial_id: i64) -> Result<Vec<CurvePoint>, StorageError> {
        let err = sql_err(&self.path, "read learning curve");
        // A database Optuna wrote (opened read-only) has no TradeTune tables: no curve.
        if !self.has_table("tradetune_learning_curves").map_err(&err)? {
            return Ok(Vec::new());
        }
        self.conn
            .query(
                "SELECT metric, update_index, env_steps, value FROM tradetune_learning_curves \
                 WHERE trial_id = ?1 ORDER BY metric, update_index",
                args![trial_id],
            )
            .and_then(|rows| {
                rows.iter()
                    .map(|r| {
                        Ok(CurvePoint {
                            metric: r.string(0)?,
                            update_index: r.i64(1)?,
                            env_steps: r.i64(2)?,
                            value: r.opt_f64(3)?.unwrap_or(f64::NAN),
                        })
                    })
                    .collect()
            })
            .map_err(&err)
    }

    /// Whether table `table` has column `column` (one added later than the table may not be
    /// there, in a database opened read-only).
    fn has_column(&self, table: &str, column: &str) -> Result<bool, super::db::DbError> {
        let sql = super::tradetune_schema::has_column_sql(self.conn.dialect());
        match self.conn.query_opt(sql, args![table, column])? {
            Some(r) => r.bool(0),
            None => Ok(false),
        }
    }

    /// Whether the database has table `name` (a database Optuna wrote has none of ours).
    fn has_table(&self, name: &str) -> Result<bool, super::db::DbError> {
        let sql = match self.conn.dialect() {
            Dialect::Sqlite => {
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)"
            }
            Dialect::Postgres => {
                "SELECT EXISTS (SELECT 1 FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name = ?1)"
            }
        };
        match self.conn.query_opt(sql, args![name])? {
            Some(r) => r.bool(0),
            None => Ok(false),
        }
    }

    /// Appends telemetry samples.
    pub fn append_telemetry(&mut self, samples: &[TelemetrySample]) -> Result<(), StorageError> {
        self.write("append telemetry", |tx| {
            for s in samples {
                tx.tx
                    .execute(
                        "INSERT INTO tradetune_telemetry (trial_id, recorded_at, source, metric, value) \
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        args![s.trial_id, s.recorded_at, &s.source, &s.metric, s.value],
                    )
                    .map_err(|e| {
                        if e.is_constraint() {
                            StorageError::UnknownTrial(s.trial_id.unwrap_or(-1))
                        } else {
                            tx.err()(e)
                        }
                    })?;
            }
            Ok(())
        })
    }

    /// Telemetry of one trial (or of no trial when None), in recording order.
    pub fn telemetry(&self, trial_id: Option<i64>) -> Result<Vec<TelemetrySample>, StorageError> {
        let err = sql_err(&self.path, "read telemetry");
        // A database Optuna wrote (opened read-only) has no TradeTune tables: no telemetry.
        if !self.has_table("tradetune_telemetry").map_err(&err)? {
            return Ok(Vec::new());
        }
        let sql = match self.conn.dialect() {
            Dialect::Sqlite => {
                "SELECT trial_id, recorded_at, source, metric, value FROM tradetune_telemetry \
                 WHERE trial_id IS ?1 ORDER BY sample_id"
            }
            Dialect::Postgres => {
                "SELECT trial_id, recorded_at, source, metric, value FROM tradetune_telemetry \
                 WHERE trial_id IS NOT DISTINCT FROM ?1 ORDER BY sample_id"
            }
        };
        let rows = self.conn.query(sql, args![trial_id]).map_err(&err)?;
        rows.iter()
            .map(|r| {
                let trial_id = r.opt_i64(0).map_err(&err)?;
                let recorded_at =
                    r.opt_time(1)
                        .ok()
                        .flatten()
                        .ok_or_else(|| StorageError::Corrupt {
                            path: self.path.clone(),
                            table: "tradetune_telemetry",
                            row_id: trial_id.unwrap_or(-1),
                            column: "recorded_at",
                            message: format!("not a datetime: {:?}", r.0.get(1)),
                        })?;
                Ok(TelemetrySample {
                    trial_id,
                    recorded_at,
                    source: r.string(2).map_err(&err)?,
                    metric: r.string(3).map_err(&err)?,
                    value: r.opt_f64(4).map_err(&err)?.unwrap_or(f64::NAN),
                })
            })
            .collect()
    }
}
