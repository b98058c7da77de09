//! `tradetune study importance NAME`: each parameter's importance in a study by PED-ANOVA,
//! the numbers of Optuna 5.0's `optuna.importance.get_param_importances(study)` (its default
//! `PedAnovaImportanceEvaluator`) on the same database.

use std::path::PathBuf;

use clap::Args;
use tradetune_engine::storage::{Storage, json_number};
use tradetune_engine::study::importance::{Importances, PedAnova, study_importances};

use tradetune_engine::front::format::significant;

#[derive(Debug, Args)]
pub struct ImportanceArgs {
    /// The study's name.
    pub name: String,
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
    pub db: Option<PathBuf>,
    /// The importances as JSON, at full precision.
    #[arg(long)]
    pub json: bool,
    /// Importance of reaching the best this fraction of the trials (Optuna's
    /// `target_quantile`).
    #[arg(long, default_value_t = PedAnova::default().target_quantile)]
    pub target_quantile: f64,
    /// Measure it among the best this fraction of the trials (Optuna's `region_quantile`;
    /// 1 = all trials).
    #[arg(long, default_value_t = PedAnova::default().region_quantile)]
    pub region_quantile: f64,
    /// Compare the top trials with the whole search space instead of the trials that ran
    /// (Optuna's `evaluate_on_local=False`).
    #[arg(long)]
    pub global: bool,
}

pub fn run(args: ImportanceArgs) -> anyhow::Result<()> {
    let db = super::db_path(args.db)?;
    crate::launch::require_db(&db)?;
    let storage = Storage::open_read_only(&db)?;
    let evaluator = PedAnova {
        target_quantile: args.target_quantile,
        region_quantile: args.region_quantile,
        evaluate_on_local: !args.global,
    };
    let imp = study_importances(&storage, &args.name, &evaluator)?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json(&args.name, &evaluator, &imp))?
        );
    } else {
        out!("{}", text(&args.name, &imp));
    }
    Ok(())
}

/// The JSON form: the evaluator's settings, the trial counts and every importance in full.
pub fn json(study: &str, evaluator: &PedAnova, imp: &Importances) -> serde_json::Value {
    serde_json::json!({
        "study": study,
        "evaluator": {
            "name": "PedAnovaImportanceEvaluator",
            "target_quantile": evaluator.target_quantile,
            "region_quantile": evaluator.region_quantile,
            "evaluate_on_local": evaluator.evaluate_on_local,
        },
        "n_trials": imp.n_trials,
        "n_top_trials": imp.n_top,
        "n_region_trials": imp.n_region,
        "all_equal": imp.all_equal(),
        "set_aside": imp.set_aside,
        "importances": imp.params.iter().map(|p| serde_json::json!({
            "param": p.name,
            "importance": json_number(p.importance),
            "raw": json_number(p.raw),
        })).collect::<Vec<_>>(),
    })
}

/// The form for people: one line per parameter, most important first, to 4 significant
/// digits, with a bar.
pub fn text(study: &str, imp: &Importances) -> String {
    let region = if imp.n_region == imp.n_trials {
        String::new()
    } else {
        format!(", among the best {}", imp.n_region)
    };
    let mut out = format!(
        "parameter importance in '{study}' (PED-ANOVA): top {} of {} COMPLETE trials{region}\n",
        imp.n_top, imp.n_trials
    );
    if imp.params.is_empty() {
        out.push_str("the study has no parameters\n");
    } else {
        table(imp, &mut out);
    }
    for note in &imp.set_aside {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// One line per parameter with its bar, and what an all-equal result means.
fn table(imp: &Importances, out: &mut String) {
    let width = imp
        .params
        .iter()
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("parameter".len());
    out.push_str(&format!("{:<width$}  {:>10}\n", "parameter", "importance"));
    for p in &imp.params {
        let bar = "#".repeat((p.importance.clamp(0.0, 1.0) * 40.0).round() as usize);
        out.push_str(&format!(
            "{:<width$}  {:>10}  {bar}\n",
            p.name,
            significant(p.importance, 4)
        ));
    }
    if imp.all_equal() {
        out.push_str(
            "no parameter tells the top trials apart (they share their value), so all are \
             shown equal\n",
        );
    }
}
