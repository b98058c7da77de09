//! What the panel tests (`ui_hardware`, `ui_configure`, `ui_run`, `ui_studies`, `ui_settings`)
//! share: dialogs answered by the test, the app in a window of their size, and the helpers that
//! read what a panel shows.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ui;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use tradetune_app::ui::app::SETTINGS_KEY;
use tradetune_app::ui::context::DataState;
use tradetune_app::ui::dialog::{FileDialogs, Pick};
use tradetune_app::ui::settings::Settings;
use tradetune_app::ui::{TradeTuneApp, draft::Draft};
use tradetune_engine::device::DeviceInfo;
use tradetune_engine::device::precision::Precision;
use tradetune_engine::storage::{
    APPLIED_CONFIG_KEY, JsonValue, NewTrial, OptunaDistribution, Storage, StudyDirection,
    TrialState,
};
use tradetune_engine::study::file::SearchSpec;

/// Answers every dialog with a path chosen by the test.
pub struct TestDialogs {
    pub database: Option<PathBuf>,
    pub save_as: Option<PathBuf>,
}

/// Answers the checkpoint dialog.
pub struct CheckpointDialog(pub PathBuf);

impl FileDialogs for CheckpointDialog {
    fn pick(&self, pick: &Pick) -> Vec<PathBuf> {
        match pick {
            Pick::Checkpoint => vec![self.0.clone()],
            _ => Vec::new(),
        }
    }
}

impl FileDialogs for TestDialogs {
    fn pick(&self, pick: &Pick) -> Vec<PathBuf> {
        match pick {
            Pick::Database => self.database.clone().into_iter().collect(),
            Pick::TrialsCsv(_) | Pick::TelemetryCsv(_) => {
                self.save_as.clone().into_iter().collect()
            }
            Pick::DataFiles | Pick::Checkpoint => Vec::new(),
        }
    }
}

pub fn app_with(settings: Settings, dialogs: TestDialogs) -> TradeTuneApp {
    ui::app(settings, Arc::new(dialogs))
}

pub fn no_dialogs() -> TestDialogs {
    TestDialogs {
        database: None,
        save_as: None,
    }
}

pub fn harness(app: TradeTuneApp) -> Harness<'static, TradeTuneApp> {
    ui::harness(app, [1400.0, 1100.0])
}

/// A click is handled in the frame that sees it and its effect drawn in the next; text that
/// follows a changed value (layer lists) catches up one frame later still.
pub fn settle(h: &mut Harness<'_, TradeTuneApp>) {
    h.run_steps(4);
}

pub fn data_loaded(app: &TradeTuneApp) -> bool {
    !matches!(app.cx.data, DataState::Loading(_) | DataState::None)
}

pub fn memory_text(h: &Harness<'_, TradeTuneApp>) -> String {
    let node = h.get_by_label_contains("memory:");
    format!("{:?}", node.accesskit_node().label())
}

/// Replaces the text of the text field named `label` with `text`, as a user would: click,
/// select all, type.
pub fn retype(h: &mut Harness<'_, TradeTuneApp>, label: &str, text: &str) {
    h.get_by_role_and_label(Role::TextInput, label).click();
    settle(h);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.run_steps(1);
    h.get_by_role_and_label(Role::TextInput, label)
        .type_text(text);
    settle(h);
}

pub fn search_spec(h: &Harness<'_, TradeTuneApp>, name: &str) -> Option<String> {
    let draft = &h.state().cx.settings.draft;
    draft
        .search
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.spec.to_string())
}

pub fn start_disabled(h: &Harness<'_, TradeTuneApp>) -> bool {
    h.get_by_role_and_label(Role::Button, "Start")
        .accesskit_node()
        .is_disabled()
}

/// A study of two trials that train for 256 samples with a searched learning rate: seconds
/// on a CPU.
pub fn tiny_draft(name: &str) -> Draft {
    let mut draft = Draft::default();
    draft.env.n_envs = 2;
    draft.ppo.n_steps = 32;
    draft.ppo.batch_size = 32;
    draft.ppo.n_epochs = 2;
    draft.ppo.policy.net_arch.pi = vec![16];
    draft.ppo.policy.net_arch.vf = vec![16];
    draft.train.total_timesteps = 256;
    draft.train.eval_every = 2;
    draft.study.name = name.into();
    draft.study.n_trials = 2;
    draft.pruner.kind = tradetune_engine::study::file::PrunerKind::None;
    draft.search = vec![tradetune_app::ui::draft::SearchEntry {
        name: "ppo.learning_rate".into(),
        spec: SearchSpec::parse("{ low = 1e-4, high = 1e-3, log = true }").unwrap(),
    }];
    draft
}

pub fn reference_db(dir: &Path) -> PathBuf {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/testdata/optuna-reference.db");
    let db = dir.join("optuna-reference.db");
    std::fs::copy(&src, &db).unwrap_or_else(|e| panic!("copying {}: {e}", src.display()));
    db
}

pub fn view_count(h: &Harness<'_, TradeTuneApp>, state: &str) -> usize {
    h.state()
        .panels
        .studies
        .table
        .rows
        .iter()
        .filter(|r| r.state.to_string() == state)
        .count()
}

/// eframe's storage, in memory.
#[derive(Default)]
pub struct MemoryStorage(pub HashMap<String, String>);

impl eframe::Storage for MemoryStorage {
    fn get_string(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }
    fn set_string(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
    fn remove_string(&mut self, key: &str) {
        self.0.remove(key);
    }
    fn flush(&mut self) {}
}

/// The devices of a machine with only a CPU of `cpu_bytes` and a build without wgpu, fixed so
/// the tests do not depend on this machine.
pub fn cpu_only(cpu_bytes: u64) -> Vec<DeviceInfo> {
    vec![
        DeviceInfo {
            name: "cpu".into(),
            backend: "flex".into(),
            available: true,
            detail: "burn-flex on 2 threads (SIMD, rayon)".into(),
            memory_bytes: Some(cpu_bytes),
            precisions: vec![Precision::F32],
            reports_pool_usage: false,
            adapter: None,
        },
        DeviceInfo {
            name: "wgpu".into(),
            backend: "wgpu".into(),
            available: false,
            detail: "this build has no wgpu backend; rebuild with `--features wgpu`".into(),
            memory_bytes: None,
            precisions: Vec::new(),
            reports_pool_usage: false,
            adapter: None,
        },
    ]
}

pub fn saved_settings(h: &mut Harness<'_, TradeTuneApp>) -> Settings {
    let mut storage = MemoryStorage::default();
    eframe::App::save(h.state_mut(), &mut storage);
    eframe::get_value(&storage, SETTINGS_KEY).expect("settings saved")
}

/// The colour the memory bar is filled with in the last frame: the last rectangle painted from
/// the bar's left edge at its full height (its background comes first, then the fill).
pub fn memory_bar_fill(h: &Harness<'_, TradeTuneApp>) -> Option<egui::Color32> {
    fn rects(shape: &egui::Shape, out: &mut Vec<(egui::Rect, egui::Color32)>) {
        match shape {
            egui::Shape::Rect(r) => out.push((r.rect, r.fill)),
            egui::Shape::Vec(v) => v.iter().for_each(|s| rects(s, out)),
            _ => {}
        }
    }
    let bar = h.get_by_label_contains("memory:").rect();
    let mut all = Vec::new();
    for c in &h.output().shapes {
        rects(&c.shape, &mut all);
    }
    let near = |a: f32, b: f32| (a - b).abs() < 1.0;
    all.into_iter()
        .filter(|(r, _)| {
            near(r.min.x, bar.min.x) && near(r.min.y, bar.min.y) && near(r.height(), bar.height())
        })
        .map(|(_, c)| c)
        .next_back()
}

pub fn close_to(a: egui::Color32, b: egui::Color32) -> bool {
    a.to_array()
        .iter()
        .zip(b.to_array())
        .all(|(x, y)| x.abs_diff(y) <= 2)
}

/// A study database of `n` COMPLETE trials written through the engine's storage, as a long
/// TradeTune study leaves it (parameters, device and applied configuration with each trial);
/// trial `best` has the highest value.
pub fn many_trials_db(path: &Path, n: usize, best: usize) {
    let mut s = Storage::open(path).unwrap();
    let study = s.create_study("many", &[StudyDirection::Maximize]).unwrap();
    let lr = OptunaDistribution::float(1e-5, 1e-3, true, None).unwrap();
    let base = Draft::default().study_file(&[]).unwrap().base_config;
    let applied = JsonValue::from(&base);
    for k in 0..n {
        let mut t = NewTrial::new(TrialState::Complete);
        let value = if k == best {
            2.0
        } else {
            ((k * 7919) % 1000) as f64 / 1000.0
        };
        t.values = Some(vec![value]);
        t.params = vec![(
            "ppo.learning_rate".into(),
            1e-5 + 1e-7 * (k % 1000) as f64,
            lr.clone(),
        )];
        t.user_attrs = vec![
            ("device".into(), JsonValue::from("cpu")),
            (APPLIED_CONFIG_KEY.into(), applied.clone()),
        ];
        s.add_trial(study, &t).unwrap();
    }
}
