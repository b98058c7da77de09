//! The Studies and Compare panels driven through egui_kittest: the Optuna reference database
//! aggregated, sorted, filtered and exported, two studies compared, the table copied as CSV, and
//! a study of 10,000 trials read while frames go on.

use std::collections::HashMap;

use crate::common::panels::*;
use crate::common::ui::step_until;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_engine::storage::TrialState;

#[test]
fn the_optuna_reference_database_opens_aggregated_sorts_filters_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let db = reference_db(dir.path());
    let csv = dir.path().join("export.csv");
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    let dialogs = TestDialogs {
        database: Some(db.clone()),
        save_as: Some(csv.clone()),
    };
    let mut h = harness(app_with(settings, dialogs));
    settle(&mut h);
    h.get_by_label("Open database…").click();
    step_until(&mut h, "the database", |a| {
        a.panels.studies.db.is_some() || a.panels.studies.error.is_some()
    });
    let studies = &h.state().panels.studies;
    assert_eq!(studies.error, None);
    let db_studies = studies.db.as_ref().unwrap().studies.len();
    assert_eq!(db_studies, 4, "the reference database holds four studies");
    let groups: HashMap<String, Vec<String>> = studies
        .groups
        .iter()
        .map(|g| (g.name.clone(), g.members.clone()))
        .collect();
    assert_eq!(groups.len(), 3, "{groups:?}");
    let (aggregated, members) = groups
        .iter()
        .find(|(_, m)| m.len() == 2)
        .expect("the two x_aggressive_N studies are one entry");
    assert!(aggregated.ends_with("aggressive"), "{aggregated}");
    let total: usize = h
        .state()
        .panels
        .studies
        .groups
        .iter()
        .find(|g| &g.name == aggregated)
        .map(|g| g.n_trials())
        .unwrap();

    h.get_by_label(aggregated.as_str()).click();
    step_until(&mut h, "the trials", |a| {
        !a.panels.studies.table.rows.is_empty()
    });
    let view = &h.state().panels.studies;
    assert_eq!(view.table.rows.len(), total);
    for m in members {
        assert!(
            view.table.rows.iter().any(|r| &r.study == m),
            "no rows of {m}"
        );
    }

    // Sort by value: the visible rows come out ordered, missing values last.
    h.get_by_label("value").click();
    settle(&mut h);
    let values: Vec<Option<f64>> = {
        let v = &h.state().panels.studies;
        v.table
            .visible
            .iter()
            .map(|&i| v.table.rows[i].value)
            .collect()
    };
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    assert!(present.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
    h.get_by_label("value (asc)").click();
    settle(&mut h);
    let first = {
        let v = &h.state().panels.studies;
        v.table.rows[v.table.visible[0]].value
    };
    assert_eq!(
        first,
        present.last().copied(),
        "descending puts the largest first"
    );

    // Columns can be hidden.
    assert!(h.query_by_label("device").is_some());
    h.state_mut()
        .handle(tradetune_app::ui::panels::studies::Action::ToggleColumn(
            tradetune_app::ui::tasks::TrialColumn::Device,
        ));
    settle(&mut h);
    assert!(
        h.query_by_label("device").is_none(),
        "the device column is still shown"
    );

    // Filter by state.
    let complete = view_count(&h, "COMPLETE");
    h.state_mut()
        .handle(tradetune_app::ui::panels::studies::Action::FilterTrials(
            Some(TrialState::Complete),
        ));
    settle(&mut h);
    assert_eq!(h.state().panels.studies.table.visible.len(), complete);
    h.get_by_label_contains(&format!("{complete} of {total} trials"));

    // Export through the (test) save dialog: one file per member of the group.
    h.get_by_label("Export trials CSV…").click();
    step_until(&mut h, "the export", |a| {
        a.cx.notices
            .iter()
            .any(|n| n.starts_with("wrote ") || n.starts_with("export failed"))
    });
    let notice = h.state().cx.notices.last().cloned().unwrap();
    assert!(
        notice.starts_with(&format!("wrote {total} trials")),
        "{notice}"
    );
    let mut rows = 0;
    for m in members {
        // The notice names the files written (export.csv itself is not one of them).
        assert!(notice.contains(&format!("export-{m}.csv")), "{notice}");
        let path = dir.path().join(format!("export-{m}.csv"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let header = text.lines().next().unwrap_or_default();
        assert!(
            header.contains(",number,") && header.ends_with(",state"),
            "{header}"
        );
        rows += text.lines().count() - 1;
    }
    assert_eq!(rows, total);
}

#[test]
fn two_studies_compare_side_by_side_and_a_wrong_name_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = reference_db(dir.path());
    let settings = Settings {
        tab: Tab::Compare,
        database: Some(db.clone()),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    for (field, text) in [("A", "x_aggressive_1"), ("B", "x_aggressive_2")] {
        h.get_by_role_and_label(Role::TextInput, field).click();
        settle(&mut h);
        h.get_by_role_and_label(Role::TextInput, field)
            .type_text(text);
        settle(&mut h);
    }
    h.get_by_label("Compare A with B").click();
    settle(&mut h);
    assert!(
        h.state().panels.compare.loading || h.state().panels.compare.result.is_some(),
        "the button did not start a comparison"
    );
    step_until(&mut h, "the comparison", |a| !a.panels.compare.loading);
    let c = h
        .state()
        .panels
        .compare
        .result
        .clone()
        .unwrap_or_else(|| panic!("no comparison: {:?}", h.state().panels.compare));
    assert_eq!(h.state().panels.compare.error, None);
    assert!(
        c.table.contains("x_aggressive_1") && c.table.contains("x_aggressive_2"),
        "{}",
        c.table
    );
    assert!(!c.a_values.is_empty() && !c.b_values.is_empty());
    h.get_by_label_contains("samples/s");

    h.state_mut()
        .handle(tradetune_app::ui::panels::compare::Action::Compare(
            "x_aggressive_1".into(),
            "no_such_study".into(),
        ));
    step_until(&mut h, "the failed comparison", |a| {
        !a.panels.compare.loading
    });
    let e = h.state().panels.compare.error.clone().expect("an error");
    assert!(e.contains("no_such_study"), "{e}");
    // The failure is not shown above the earlier comparison's table.
    assert!(h.state().panels.compare.result.is_none());

    // A comparison is of its database: once Studies opens another, it is not shown under the
    // new one's name.
    h.state_mut()
        .handle(tradetune_app::ui::panels::compare::Action::Compare(
            "x_aggressive_1".into(),
            "x_aggressive_2".into(),
        ));
    step_until(&mut h, "the comparison", |a| !a.panels.compare.loading);
    assert!(h.state().panels.compare.result.is_some());
    let other = dir.path().join("other.db");
    std::fs::copy(&db, &other).unwrap();
    h.state_mut()
        .handle(tradetune_app::ui::panels::studies::Action::OpenDatabase(
            other.clone(),
        ));
    step_until(&mut h, "the other database", |a| {
        a.panels
            .studies
            .db
            .as_ref()
            .is_some_and(|d| d.path == other)
    });
    settle(&mut h);
    assert!(
        h.state().panels.compare.result.is_none(),
        "the first database's comparison is shown under the second's name"
    );
    assert_eq!(h.state().panels.compare.error, None);
}

#[test]
fn copy_table_as_csv_puts_the_visible_rows_on_the_clipboard() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(reference_db(dir.path())),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    let group = h
        .state()
        .panels
        .studies
        .groups
        .iter()
        .find(|g| g.n(TrialState::Complete) > 0 && g.n(TrialState::Complete) < g.n_trials())
        .map(|g| g.name.clone())
        .expect("a study with complete and other trials");
    h.get_by_label(group.as_str()).click();
    step_until(&mut h, "the trials", |a| {
        !a.panels.studies.table.rows.is_empty()
    });
    h.state_mut()
        .handle(tradetune_app::ui::panels::studies::Action::FilterTrials(
            Some(TrialState::Complete),
        ));
    settle(&mut h);

    h.get_by_label("Copy table as CSV").click();
    let mut copied = None;
    for _ in 0..5 {
        h.step();
        copied = copied.or_else(|| {
            h.output()
                .platform_output
                .commands
                .iter()
                .find_map(|c| match c {
                    egui::OutputCommand::CopyText(t) => Some(t.clone()),
                    _ => None,
                })
        });
    }
    let text = copied.expect("nothing was copied");
    let view = &h.state().panels.studies;
    let mut lines = text.lines();
    // The fixed columns, then one per parameter (every digit).
    let mut header = "study,number,state,value,duration_s,device".to_owned();
    for a in &view.table.param_axes {
        header.push(',');
        header.push_str(&a.name);
    }
    assert_eq!(lines.next(), Some(header.as_str()));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), view.table.visible.len(), "{text}");
    assert!(
        view.table.visible.len() < view.table.rows.len(),
        "the filter hid nothing"
    );
    for (line, &i) in rows.iter().zip(&view.table.visible) {
        let r = &view.table.rows[i];
        assert!(
            line.starts_with(&format!("{},{},COMPLETE,", r.study, r.number)),
            "{line}"
        );
    }
    h.get_by_label_contains(&format!("copied {} rows as CSV", rows.len()));
}

#[test]
fn a_study_of_10000_trials_loads_while_frames_go_on_and_fills_the_table() {
    const N: usize = 10_000;
    const BEST: usize = 4321;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("many.db");
    many_trials_db(&db, N, BEST);
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(db.clone()),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    // The trials are read and made into rows on a background thread while the harness keeps
    // stepping frames, and the panel says it is reading. The job is held back until the test
    // lets it go, so "frames go on while it loads" holds however fast or loaded the machine is.
    h.state_mut().hold_jobs();
    h.get_by_label("many").click();
    h.run_steps(2);
    assert!(
        h.state().panels.studies.table.loading,
        "the click asked for no trials"
    );
    for _ in 0..5 {
        h.step();
        assert!(h.state().panels.studies.table.loading);
        assert!(h.state().panels.studies.table.rows.is_empty());
    }
    h.get_by_label("reading trials…");
    assert_eq!(h.state_mut().release_jobs(), 1, "one job reads the trials");
    // The job sends the rows made (`TaskEvent::Trials` carries `TrialRow`s): no frame makes
    // them.
    step_until(&mut h, "the trials", |a| {
        !a.panels.studies.table.rows.is_empty()
    });
    let view = &h.state().panels.studies;
    assert_eq!(view.table.rows.len(), N);
    assert_eq!(view.table.visible.len(), N);
    assert!(!view.table.loading);
    assert!(
        view.table.rows.iter().all(|r| r.applied_config.is_some()),
        "a row lost its applied configuration"
    );
    h.get_by_label(&format!("{N} of {N} trials"));
    // Only the rows in view are laid out: the first numbers are there, the last are not.
    h.get_by_role_and_label(Role::Link, "0");
    h.get_by_role_and_label(Role::Link, "1");
    assert!(h.query_by_role_and_label(Role::Link, "9999").is_none());

    // The best trial is the one the table highlights, whatever the order.
    let best_number = |h: &Harness<'_, TradeTuneApp>| {
        let v = &h.state().panels.studies;
        v.table
            .best_row(v.selected_group().and_then(|g| g.best))
            .map(|i| v.table.rows[i].number)
    };
    assert_eq!(best_number(&h), Some(BEST as i64));
    h.get_by_label("value").click();
    settle(&mut h);
    assert_eq!(best_number(&h), Some(BEST as i64));
}

/// An answer for a database or a selection the user has since left is dropped: a study of the
/// same name in another database keeps its own trials, and a late failure of the first
/// database does not cover the second.
#[test]
fn a_late_answer_for_a_database_since_left_is_dropped() {
    use tradetune_app::ui::tasks::{ReadRows, TrialColumn};
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a.db"), dir.path().join("b.db"));
    // Both hold a study named "many", as every preset's studies share their default names.
    many_trials_db(&first, 30, 3);
    many_trials_db(&second, 20, 2);
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(first.clone()),
        ..Settings::default()
    };
    let dialogs = TestDialogs {
        database: Some(second.clone()),
        save_as: None,
    };
    let mut h = harness(app_with(settings, dialogs));
    step_until(&mut h, "the first database", |a| {
        a.panels.studies.db.is_some()
    });
    h.get_by_label("many").click();
    step_until(&mut h, "its trials", |a| {
        a.panels.studies.table.rows.len() == 30
    });
    let (asked_in, members, first_rows) = {
        let v = &h.state().panels.studies;
        let members = v.selected_members().map(<[String]>::to_vec).unwrap();
        (v.generation, members, v.table.rows.clone())
    };
    h.get_by_label("Open database…").click();
    step_until(&mut h, "the second database", |a| {
        a.panels
            .studies
            .db
            .as_ref()
            .is_some_and(|d| d.path == second)
    });
    h.get_by_label("many").click();
    step_until(&mut h, "the second database's trials", |a| {
        a.panels.studies.table.rows.len() == 20 && !a.panels.studies.table.loading
    });
    // The first database's read of "many", answering late.
    let app = h.state_mut();
    let rows = ReadRows::new(first_rows, &(TrialColumn::Value, false));
    app.panels.studies.trials_read(asked_in, members, Ok(rows));
    assert_eq!(
        app.panels.studies.table.rows.len(),
        20,
        "the first's trials took over"
    );
    // And a late failure of the first database's open.
    let mut out = Vec::new();
    app.panels
        .studies
        .database_opened(&app.cx, asked_in, Err("a.db: gone".into()), &mut out);
    assert_eq!(app.panels.studies.error, None);
    assert_eq!(
        app.panels.studies.db.as_ref().map(|d| d.path.clone()),
        Some(second)
    );
}

/// "Write new runs here" on the database the Studies panel shows makes Run → Start write its
/// studies there (remembered in the settings), and goes once it is so.
#[test]
fn the_open_database_becomes_where_new_runs_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    many_trials_db(&db, 3, 1);
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(db.clone()),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    assert_eq!(h.state().cx.settings.study_db, None);
    h.get_by_label("Write new runs here").click();
    settle(&mut h);
    assert_eq!(h.state().cx.settings.study_db, Some(db.clone()));
    assert!(h.query_by_label("Write new runs here").is_none());
    assert_eq!(
        tradetune_app::ui::panels::studies::runs_database(&h.state().cx.settings),
        Some(db)
    );
}

/// A study of [`studies_db`]: its name, trial count and trial k's value.
type StudyOf<'a> = (&'a str, usize, fn(usize) -> f64);

/// Studies in a new database at `path`, each of `n` COMPLETE trials over two searched
/// parameters (`ppo.learning_rate`, `ppo.gamma`), trial k's value `value(k)`.
fn studies_db(path: &std::path::Path, studies: &[StudyOf<'_>]) {
    use tradetune_engine::storage::{NewTrial, OptunaDistribution, Storage, StudyDirection};
    let mut s = Storage::open(path).unwrap();
    let lr = OptunaDistribution::float(1e-5, 1e-3, true, None).unwrap();
    let gamma = OptunaDistribution::float(0.9, 0.999, false, None).unwrap();
    for &(name, n, value) in studies {
        let study = s.create_study(name, &[StudyDirection::Maximize]).unwrap();
        for k in 0..n {
            let mut t = NewTrial::new(TrialState::Complete);
            t.values = Some(vec![value(k)]);
            t.params = vec![
                (
                    "ppo.learning_rate".into(),
                    1e-5 + 4e-5 * k as f64,
                    lr.clone(),
                ),
                (
                    "ppo.gamma".into(),
                    0.9 + 0.004 * ((k * 7) % 20) as f64,
                    gamma.clone(),
                ),
            ];
            s.add_trial(study, &t).unwrap();
        }
    }
}

/// The "blue LO to yellow HI" colour range in the label that contains `label`.
fn colour_range(h: &Harness<'_, TradeTuneApp>, label: &str) -> (f64, f64) {
    use egui_kittest::kittest::NodeT;
    let node = h.get_by_label_contains(label);
    let a = node.accesskit_node();
    let text = format!(
        "{} {}",
        a.label().unwrap_or_default(),
        a.value().unwrap_or_default()
    );
    let number = |after: &str| -> f64 {
        let rest = &text[text.find(after).unwrap_or_else(|| panic!("{text}")) + after.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || ".-e".contains(c)))
            .unwrap_or(rest.len());
        rest[..end]
            .parse()
            .unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    (number("blue "), number("yellow "))
}

/// The contour and parallel-coordinates plots are derived once and kept across frames: a
/// study of another database with the same parameters and the same number of trials (the
/// same preset's default name, say) shows its own values, not the last study's.
#[test]
fn the_plots_show_the_study_shown_not_the_last_one_of_its_size() {
    use tradetune_app::ui::panels::studies::{Action, PlotTab};
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a.db"), dir.path().join("b.db"));
    studies_db(&first, &[("ppo", 20, |k| 1.0 + k as f64)]);
    studies_db(&second, &[("ppo", 20, |k| 101.0 + k as f64)]);
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(first.clone()),
        ..Settings::default()
    };
    let dialogs = TestDialogs {
        database: Some(second.clone()),
        save_as: None,
    };
    let mut h = harness(app_with(settings, dialogs));
    step_until(&mut h, "the first database", |a| {
        a.panels.studies.db.is_some()
    });
    h.get_by_label("ppo").click();
    step_until(&mut h, "its trials", |a| {
        a.panels.studies.table.rows.len() == 20
    });
    h.state_mut().handle(Action::ShowPlot(PlotTab::Contour));
    settle(&mut h);
    let (lo, hi) = colour_range(&h, "colour: interpolated objective");
    assert!(
        (1.0..=20.0).contains(&lo) && (1.0..=20.0).contains(&hi),
        "{lo} {hi}"
    );
    h.state_mut()
        .handle(Action::ShowPlot(PlotTab::ParallelCoordinates));
    settle(&mut h);
    assert_eq!(colour_range(&h, "parallel coordinates:"), (1.0, 20.0));

    h.get_by_label("Open database…").click();
    step_until(&mut h, "the second database", |a| {
        a.panels
            .studies
            .db
            .as_ref()
            .is_some_and(|d| d.path == second)
    });
    h.get_by_label("ppo").click();
    step_until(&mut h, "its trials", |a| {
        let t = &a.panels.studies.table;
        t.rows.len() == 20 && !t.loading
    });
    assert_eq!(
        colour_range(&h, "parallel coordinates:"),
        (101.0, 120.0),
        "the lines are the first database's"
    );
    h.state_mut().handle(Action::ShowPlot(PlotTab::Contour));
    settle(&mut h);
    let (lo, hi) = colour_range(&h, "colour: interpolated objective");
    assert!(
        (101.0..=120.0).contains(&lo) && (101.0..=120.0).contains(&hi),
        "the contour is the first database's: {lo} {hi}"
    );
}

/// The contour's grid is one entry in egui's memory, kept while the complete trials it is of
/// stay the same: sorting and filtering the table (each a new table revision) neither compute
/// it again nor add an entry (a day of live polls would otherwise pile up grids); another
/// study computes it anew, in the same entry.
#[test]
fn the_contour_is_one_cached_grid_kept_across_sorts_and_filters() {
    use std::sync::Arc;
    use tradetune_app::ui::panels::studies::plots::{ContourCache, contour_id};
    use tradetune_app::ui::panels::studies::{Action, PlotTab};
    use tradetune_app::ui::tasks::TrialColumn;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    studies_db(
        &db,
        &[("ppo", 20, |k| 1.0 + k as f64), ("sac", 8, |k| k as f64)],
    );
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(db),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h.get_by_label("ppo").click();
    step_until(&mut h, "its trials", |a| {
        a.panels.studies.table.rows.len() == 20
    });
    h.state_mut().handle(Action::ShowPlot(PlotTab::Contour));
    settle(&mut h);
    let cached = |h: &Harness<'_, TradeTuneApp>| {
        h.ctx.data(|d| {
            (
                d.count::<ContourCache>(),
                d.get_temp::<ContourCache>(contour_id()),
            )
        })
    };
    let (n, first) = cached(&h);
    let (key, grid) = first.expect("the contour's grid is kept under its Id");
    assert_eq!((n, key.done, key.trials), (1, 20, 20));

    let revision = h.state().panels.studies.table.revision;
    for action in [
        Action::SortTrials(TrialColumn::Value),
        Action::SortTrials(TrialColumn::Value),
        Action::FilterTrials(Some(TrialState::Complete)),
        Action::FilterTrials(None),
        Action::SortTrials(TrialColumn::Number),
    ] {
        h.state_mut().handle(action);
        settle(&mut h);
    }
    assert!(h.state().panels.studies.table.revision >= revision + 5);
    let (n, again) = cached(&h);
    assert_eq!(n, 1, "a grid kept per table revision");
    let (_, again) = again.expect("the grid is kept");
    assert!(
        Arc::ptr_eq(&grid, &again),
        "the grid was computed again for a new sort or filter"
    );

    // Another study: its own grid, in the same one entry.
    h.get_by_label("sac").click();
    step_until(&mut h, "its trials", |a| {
        let t = &a.panels.studies.table;
        t.rows.len() == 8 && !t.loading
    });
    settle(&mut h);
    let (n, other) = cached(&h);
    let (key, other) = other.expect("the grid is kept");
    assert_eq!((n, key.group.as_deref(), key.trials), (1, Some("sac"), 8));
    assert!(!Arc::ptr_eq(&grid, &other));
}

/// An export writes the study selected when "Export trials CSV…" was clicked, even when
/// another is selected while the save dialog is open.
#[test]
fn an_export_writes_the_study_it_was_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    studies_db(
        &db,
        &[("alpha", 3, |k| k as f64), ("beta", 5, |k| k as f64)],
    );
    let csv = dir.path().join("alpha_trials.csv");
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(db.clone()),
        ..Settings::default()
    };
    let dialogs = TestDialogs {
        database: None,
        save_as: Some(csv.clone()),
    };
    let mut h = harness(app_with(settings, dialogs));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h.get_by_label("alpha").click();
    step_until(&mut h, "its trials", |a| {
        a.panels.studies.table.rows.len() == 3
    });
    // The dialog is open (its job held) while beta is selected.
    h.state_mut().hold_jobs();
    h.get_by_label("Export trials CSV…").click();
    settle(&mut h);
    h.get_by_label("beta").click();
    settle(&mut h);
    assert!(h.state_mut().release_jobs() >= 2);
    step_until(&mut h, "the export", |a| {
        a.cx.notices
            .iter()
            .any(|n| n.starts_with("wrote ") || n.starts_with("export failed"))
    });
    let notice = h.state().cx.notices.last().cloned().unwrap();
    assert_eq!(notice, format!("wrote 3 trials to {}", csv.display()));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1 + 3, "{text}");
}

/// The field beside "Open database…" reads what the CLI's `--db` reads (`sqlite:///path`,
/// `postgresql+psycopg2://…`), refuses another scheme beside the field, and a database is
/// remembered for the next launch only once it has opened.
#[test]
fn the_database_field_reads_what_the_clis_db_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    many_trials_db(&db, 3, 1);
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    settle(&mut h);
    let connect = |h: &mut Harness<'_, TradeTuneApp>, text: String| {
        h.state_mut().panels.studies.url_input = text;
        h.get_by_label("Connect").click();
        settle(h);
    };

    connect(&mut h, format!("sqlite:///{}", db.display()));
    step_until(&mut h, "the database", |a| {
        let v = &a.panels.studies;
        !v.opening && (v.db.is_some() || v.error.is_some())
    });
    let v = &h.state().panels.studies;
    assert_eq!(v.error, None);
    assert_eq!(v.db.as_ref().map(|d| d.path.clone()), Some(db.clone()));
    assert_eq!(h.state().cx.settings.database, Some(db.clone()));
    h.get_by_label("many");

    // Another scheme is refused by name beside the field; the open database stays.
    connect(&mut h, "mysql://me@db.local/studies".into());
    let error = h
        .state()
        .panels
        .studies
        .url_error
        .clone()
        .unwrap_or_default();
    assert!(error.contains("mysql:// is not a storage"), "{error}");
    h.get_by_label_contains("mysql:// is not a storage");
    assert_eq!(h.state().cx.settings.database, Some(db.clone()));
    assert!(h.state().panels.studies.db.is_some());

    // A database that does not open is not remembered for the next launch.
    let missing = dir.path().join("missing").join("studies.db");
    connect(&mut h, missing.display().to_string());
    step_until(&mut h, "the failed open", |a| {
        let v = &a.panels.studies;
        !v.opening && v.error.is_some()
    });
    assert_eq!(h.state().panels.studies.url_error, None);
    assert_eq!(h.state().cx.settings.database, Some(db));
}

/// The field expands a leading `~/` to the home directory, as the shell does for the CLI's
/// `--db`; another user's `~name` is refused beside the field.
#[test]
fn the_database_field_expands_a_leading_tilde() {
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    settle(&mut h);
    // The open is held: nothing is read or created in the home directory.
    h.state_mut().hold_jobs();
    let home = dirs::home_dir().expect("the tests run with a home directory");
    h.state_mut().panels.studies.url_input = "~/tradetune-nowhere/runs.db".into();
    h.get_by_label("Connect").click();
    settle(&mut h);
    let v = &h.state().panels.studies;
    assert_eq!(v.url_error, None);
    assert_eq!(
        v.source,
        Some(home.join("tradetune-nowhere").join("runs.db"))
    );
    assert!(v.opening);

    h.state_mut().panels.studies.url_input = "~bob/runs.db".into();
    h.get_by_label("Connect").click();
    settle(&mut h);
    h.get_by_label_contains("not another user's ~name");
    assert_eq!(
        h.state().panels.studies.source,
        Some(home.join("tradetune-nowhere").join("runs.db")),
        "the field's error opens nothing"
    );
}

/// A database given relative in the field is opened in this directory and remembered as that
/// file, by its absolute path (the next launch may start elsewhere); and a database opened
/// through "Open database…" clears the field's error about an earlier text.
#[test]
fn a_relative_database_is_remembered_absolute_and_an_old_field_error_goes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    many_trials_db(&db, 3, 1);
    // `db` written relative to this process's directory (the test does not change it: the
    // tests share the process).
    let cwd = std::env::current_dir().unwrap();
    let up = "../".repeat(cwd.components().count().saturating_sub(1));
    let tail = db.strip_prefix("/").unwrap();
    let relative = format!("sqlite:///{up}{}", tail.display());
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    let dialogs = TestDialogs {
        database: Some(db.clone()),
        save_as: None,
    };
    let mut h = harness(app_with(settings, dialogs));
    settle(&mut h);
    h.state_mut().panels.studies.url_input = relative.clone();
    h.get_by_label("Connect").click();
    step_until(&mut h, "the database", |a| {
        let v = &a.panels.studies;
        !v.opening && (v.db.is_some() || v.error.is_some())
    });
    assert_eq!(h.state().panels.studies.error, None, "{relative}");
    let remembered = h.state().cx.settings.database.clone().unwrap_or_default();
    assert!(
        remembered.is_absolute(),
        "remembered as given: {}",
        remembered.display()
    );
    assert_eq!(
        remembered.canonicalize().unwrap(),
        db.canonicalize().unwrap()
    );

    // An error beside the field, then a database opened by the dialog: the error goes.
    h.state_mut().panels.studies.url_input = "mysql://me@db.local/studies".into();
    h.get_by_label("Connect").click();
    settle(&mut h);
    h.get_by_label_contains("mysql:// is not a storage");
    h.get_by_label("Open database…").click();
    step_until(&mut h, "the database again", |a| {
        let v = &a.panels.studies;
        v.source.as_ref() == Some(&db) && !v.opening && v.db.is_some()
    });
    assert_eq!(h.state().panels.studies.url_error, None);
    assert!(
        h.query_by_label_contains("mysql:// is not a storage")
            .is_none()
    );
}

/// A study `ppo` beside `ppo_1` and `ppo_2` is not a parallel copy: its trials are not mixed
/// into theirs (none of them is grouped). `x_1`, `x_2` are; `btc_2024`, `btc_2025` are not.
#[test]
fn a_study_named_like_a_group_is_not_merged_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    let one: fn(usize) -> f64 = |k| k as f64;
    studies_db(
        &db,
        &[
            ("ppo", 2, one),
            ("ppo_1", 3, one),
            ("ppo_2", 4, one),
            ("x_1", 1, one),
            ("x_2", 1, one),
            ("btc_2024", 1, one),
            ("btc_2025", 1, one),
        ],
    );
    let settings = Settings {
        tab: Tab::Studies,
        database: Some(db),
        ..Settings::default()
    };
    let mut h = harness(app_with(settings, no_dialogs()));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    let groups: HashMap<String, (Vec<String>, usize)> = h
        .state()
        .panels
        .studies
        .groups
        .iter()
        .map(|g| (g.name.clone(), (g.members.clone(), g.n_trials())))
        .collect();
    let alone = |name: &str, n: usize| (vec![name.to_owned()], n);
    assert_eq!(groups.get("ppo"), Some(&alone("ppo", 2)), "{groups:?}");
    assert_eq!(groups.get("ppo_1"), Some(&alone("ppo_1", 3)), "{groups:?}");
    assert_eq!(groups.get("ppo_2"), Some(&alone("ppo_2", 4)), "{groups:?}");
    assert_eq!(
        groups.get("x"),
        Some(&(vec!["x_1".to_owned(), "x_2".to_owned()], 2)),
        "{groups:?}"
    );
    assert_eq!(groups.get("btc_2024"), Some(&alone("btc_2024", 1)));
    assert_eq!(groups.len(), 6, "{groups:?}");
    h.get_by_label("ppo").click();
    step_until(&mut h, "its trials", |a| {
        !a.panels.studies.table.loading && !a.panels.studies.table.rows.is_empty()
    });
    assert_eq!(h.state().panels.studies.table.rows.len(), 2);
}
