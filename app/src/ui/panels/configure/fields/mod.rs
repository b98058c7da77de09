//! The Configure panel's fields: which settings each column shows, in order, and where each
//! sits in the draft. Everything else about a setting (its label, what the panel and tests find
//! it by; its range; its help; an enum's values) is the engine's
//! [`catalogue`](tradetune_engine::study::catalogue), found by the field's dotted path. The panel
//! draws its two columns from the table, shows each problem under the field it names (or at the
//! end of the field's section), and the fields a search can set are the catalogue's trial
//! settings.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use tradetune_engine::study::catalogue::{self, Setting};

use crate::ui::draft::{Draft, Problem};
use crate::ui::panels::widgets;

/// One field of the draft on the panel.
pub struct Field {
    /// Its dotted name (`ppo.batch_size`): the catalogue's setting it edits.
    pub path: &'static str,
    /// How it is edited.
    pub kind: Kind,
}

impl Field {
    /// The catalogue's setting (None only for a path the catalogue lacks, which a test
    /// refuses).
    pub fn setting(&self) -> Option<&'static Setting> {
        catalogue::get(self.path)
    }

    /// The label beside its widget (its accessible name).
    pub fn label(&self) -> &'static str {
        self.setting().map_or(self.path, |s| s.label)
    }

    /// What it means, shown on hover.
    pub fn help(&self) -> &'static str {
        self.setting().map_or("", |s| s.doc)
    }
}

/// How a field is edited.
pub enum Kind {
    /// A number dragged within its range.
    Number(&'static dyn NumberField),
    /// A checkbox.
    Toggle(fn(&mut Draft) -> &mut bool),
    /// One value of an enum.
    Choice(&'static dyn ChoiceField),
    /// A line of text.
    Text(fn(&mut Draft) -> &mut String),
    /// Layer widths typed as a comma-separated list.
    Widths(fn(&mut Draft) -> &mut Vec<usize>),
    /// The study's devices, with the workers bound to each (their own editor).
    Devices,
}

/// One line of a column: a heading, a field, or the problems of a section that no field of
/// the panel shows (`sampler.grid` under `sampler`).
pub enum Line {
    Heading(&'static str),
    Field(Field),
    Problems(&'static str),
}

/// A numeric field: its place in the draft (its range is the catalogue's).
pub struct Number<T: 'static> {
    /// The field in the draft.
    pub at: fn(&mut Draft) -> &mut T,
}

/// The range of the setting at `path`, in the field's type: the catalogue's, or every value of
/// the type where it gives none (seeds).
fn range<T: egui::emath::Numeric>(path: &str) -> RangeInclusive<T> {
    match catalogue::get(path).and_then(|s| s.range) {
        Some(r) => T::from_f64(r.low)..=T::from_f64(r.high),
        None => T::MIN..=T::MAX,
    }
}

/// A [`Number`] of any numeric type.
pub trait NumberField: Sync {
    /// The labelled drag value of the field at `path`.
    fn ui(&self, ui: &mut egui::Ui, path: &str, label: &str, draft: &mut Draft) -> egui::Response;

    /// Sets the field to an end of its range other than its value.
    #[cfg(test)]
    fn set_far(&self, path: &str, draft: &mut Draft);
}

impl<T: egui::emath::Numeric + Sync> NumberField for Number<T> {
    fn ui(&self, ui: &mut egui::Ui, path: &str, label: &str, draft: &mut Draft) -> egui::Response {
        widgets::drag(ui, label, (self.at)(draft), range(path))
    }

    #[cfg(test)]
    fn set_far(&self, path: &str, draft: &mut Draft) {
        let range = range::<T>(path);
        let v = (self.at)(draft);
        *v = if *v == *range.end() {
            *range.start()
        } else {
            *range.end()
        };
    }
}

/// An enum field: its place in the draft, how a catalogue name reads as a value, and how a
/// value is shown.
pub struct Choice<T: 'static> {
    /// The field in the draft.
    pub at: fn(&mut Draft) -> &mut T,
    /// The value of one of the catalogue's names.
    pub parse: fn(&str) -> Option<T>,
    /// A value as shown.
    pub text: fn(&T) -> String,
}

impl<T> Choice<T> {
    /// Every value of the setting at `path`, in the catalogue's order.
    fn values(&self, path: &str) -> Vec<T> {
        catalogue::get(path)
            .map(Setting::choices)
            .unwrap_or_default()
            .iter()
            .filter_map(|name| (self.parse)(name))
            .collect()
    }
}

/// A catalogue name read as a value by the value's own (serde) name.
pub fn by_name<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

/// A [`Choice`] of any enum.
pub trait ChoiceField: Sync {
    /// The labelled combo box (its id is the label) of the field at `path`.
    fn ui(&self, ui: &mut egui::Ui, path: &str, label: &str, draft: &mut Draft) -> egui::Response;

    /// How many of the catalogue's names read as values.
    #[cfg(test)]
    fn count(&self, path: &str) -> usize;
}

impl<T: PartialEq + Copy + Sync> ChoiceField for Choice<T> {
    fn ui(&self, ui: &mut egui::Ui, path: &str, label: &str, draft: &mut Draft) -> egui::Response {
        let all = self.values(path);
        let value = (self.at)(draft);
        ui.horizontal(|ui| {
            let l = ui.label(label);
            egui::ComboBox::from_id_salt(label)
                .selected_text((self.text)(value))
                .show_ui(ui, |ui| {
                    for v in &all {
                        ui.selectable_value(value, *v, (self.text)(v));
                    }
                })
                .response
                .labelled_by(l.id)
        })
        .inner
    }

    #[cfg(test)]
    fn count(&self, path: &str) -> usize {
        self.values(path).len()
    }
}

/// The dotted path of a field of the draft: `path!(ppo.batch_size)` is `"ppo.batch_size"`.
macro_rules! path {
    ($first:ident $(.$rest:ident)*) => {
        concat!(stringify!($first) $(, ".", stringify!($rest))*)
    };
}

/// A numeric field, named once: `number!(ppo.batch_size)`.
macro_rules! number {
    ($($seg:ident).+) => {
        Line::Field(Field {
            path: path!($($seg).+),
            kind: Kind::Number(&Number {
                at: |d: &mut Draft| &mut d.$($seg).+,
            }),
        })
    };
}

/// An enum field: `choice!(ppo.precision, display)` shows each value with `display` and reads
/// the catalogue's names by serde; `choice!(study.direction, show, parse)` reads them with
/// `parse`.
macro_rules! choice {
    ($($seg:ident).+, $text:expr) => {
        choice!($($seg).+, $text, super::by_name)
    };
    ($($seg:ident).+, $text:expr, $parse:expr) => {
        Line::Field(Field {
            path: path!($($seg).+),
            kind: Kind::Choice(&Choice {
                at: |d: &mut Draft| &mut d.$($seg).+,
                parse: $parse,
                text: $text,
            }),
        })
    };
}

/// Any other field: `field!(ppo.normalize_obs, Toggle)`; the kind gets the field's place in
/// the draft.
macro_rules! field {
    ($($seg:ident).+, $kind:ident) => {
        Line::Field(Field {
            path: path!($($seg).+),
            kind: Kind::$kind(|d: &mut Draft| &mut d.$($seg).+),
        })
    };
}

mod table;

pub use table::{LEFT, RIGHT};

/// Every field of the table.
pub fn all() -> impl Iterator<Item = &'static Field> {
    LEFT.iter().chain(RIGHT).filter_map(|line| match line {
        Line::Field(f) => Some(f),
        _ => None,
    })
}

/// Every name a search can set (`env.n_envs`, `ppo.learning_rate`, …), sorted: the
/// catalogue's trial settings.
pub fn searchable_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = catalogue::trial().map(|s| s.name).collect();
    names.sort_unstable();
    names
}

/// The help of the setting at `path`.
pub fn help(path: &str) -> Option<&'static str> {
    catalogue::get(path).map(|s| s.doc)
}

/// Whether the panel shows `path`'s problems under a widget of its own.
fn shown(path: &str) -> bool {
    all().any(|f| f.path == path)
}

/// The problems a [`Line::Problems`] of `section` lists: the section's own and those of its
/// fields that no widget shows.
pub fn section_problems<'a>(
    section: &'a str,
    problems: &'a [Problem],
) -> impl Iterator<Item = &'a Problem> {
    problems.iter().filter(move |p| {
        p.field == section
            || (p
                .field
                .strip_prefix(section)
                .is_some_and(|rest| rest.starts_with('.'))
                && !shown(&p.field))
    })
}

/// What the column's editors keep between frames: the layer lists as typed, by path.
pub type Texts = BTreeMap<&'static str, String>;

/// Draws one column of lines. The devices editor is drawn by `devices`.
pub fn column(
    ui: &mut egui::Ui,
    lines: &[Line],
    draft: &mut Draft,
    texts: &mut Texts,
    problems: &[Problem],
    mut devices: impl FnMut(&mut egui::Ui, &mut Draft),
) {
    for line in lines {
        match line {
            Line::Heading(h) => {
                ui.heading(*h);
            }
            Line::Problems(section) => {
                for p in section_problems(section, problems) {
                    ui.colored_label(widgets::WARN, p.message.as_str());
                }
            }
            Line::Field(f) => {
                if let Some(r) = editor(ui, f, draft, texts, &mut devices) {
                    r.on_hover_text(f.help());
                }
                widgets::problem_line(ui, f.path, problems);
            }
        }
    }
}

/// The field's widget; its response, for the help.
fn editor(
    ui: &mut egui::Ui,
    f: &Field,
    draft: &mut Draft,
    texts: &mut Texts,
    devices: &mut impl FnMut(&mut egui::Ui, &mut Draft),
) -> Option<egui::Response> {
    let label = f.label();
    Some(match &f.kind {
        Kind::Number(n) => n.ui(ui, f.path, label, draft),
        Kind::Toggle(at) => ui.checkbox(at(draft), label),
        Kind::Choice(c) => c.ui(ui, f.path, label, draft),
        Kind::Text(at) => {
            ui.horizontal(|ui| {
                let l = ui.label(label);
                ui.text_edit_singleline(at(draft)).labelled_by(l.id)
            })
            .inner
        }
        Kind::Widths(at) => {
            let text = texts.entry(f.path).or_default();
            widgets::widths(ui, label, at(draft), text);
            return None;
        }
        Kind::Devices => {
            devices(ui, draft);
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_engine::study::catalogue::Type;

    fn base_leaves(d: &Draft) -> Vec<String> {
        tradetune_engine::study::config_path::leaf_paths(&d.base_json())
    }

    /// The names a search can set are every setting of the trial's configuration, for the
    /// default draft and every preset's.
    #[test]
    fn the_searchable_names_are_the_configurations_settings() {
        let names: Vec<String> = searchable_names().iter().map(|s| s.to_string()).collect();
        assert_eq!(names, base_leaves(&Draft::default()));
        for p in tradetune_engine::study::preset::bundled().unwrap() {
            let d = Draft::from_preset(&p).unwrap();
            assert_eq!(names, base_leaves(&d), "{}", p.name);
        }
    }

    /// Every field the panel shows is a setting of the engine's catalogue, edited as the
    /// catalogue types it; an enum offers every value the catalogue lists.
    #[test]
    fn the_catalogue_covers_every_field_the_panel_shows() {
        let mut n = 0;
        for f in all() {
            n += 1;
            let s = f
                .setting()
                .unwrap_or_else(|| panic!("{} is not in the engine's catalogue", f.path));
            assert_eq!(f.label(), s.label);
            assert!(!f.help().is_empty(), "{}", f.path);
            let fits = match &f.kind {
                Kind::Number(_) => matches!(s.ty, Type::Int | Type::Float),
                Kind::Toggle(_) => s.ty == Type::Bool,
                Kind::Choice(c) => {
                    assert_eq!(c.count(f.path), s.choices().len(), "{}", f.path);
                    matches!(s.ty, Type::Choice(_))
                }
                Kind::Text(_) => s.ty == Type::Text,
                Kind::Widths(_) => s.ty == Type::Widths,
                Kind::Devices => s.ty == Type::Devices,
            };
            assert!(fits, "{} is edited as another type than {:?}", f.path, s.ty);
        }
        assert!(n >= 40, "the panel shows only {n} fields");
        let mut paths: Vec<&str> = all().map(|f| f.path).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), n, "a path is listed twice");
    }

    /// A field's place in the draft is the one its path names: a value set through it is the
    /// value at the path.
    #[test]
    fn each_number_edits_the_field_its_path_names() {
        let at = |d: &Draft, path: &str| {
            let json = serde_json::to_value(d).unwrap();
            path.split('.')
                .try_fold(&json, |v, part| v.get(part))
                .cloned()
                .unwrap_or_else(|| panic!("{path} is not a field of the draft"))
        };
        for f in all() {
            let Kind::Number(n) = &f.kind else { continue };
            let mut draft = Draft::default();
            let before = at(&draft, f.path);
            n.set_far(f.path, &mut draft);
            let after = at(&draft, f.path);
            assert_ne!(before, after, "{} does not edit {}", f.label(), f.path);
            // The far end is in the catalogue's range (seeds: every value of the type).
            if let Some(s) = f.setting()
                && s.range.is_some()
            {
                s.check(&after)
                    .unwrap_or_else(|e| panic!("{}: {e}", f.path));
            }
        }
    }

    #[test]
    fn a_section_lists_only_the_problems_no_field_shows() {
        let p = |field: &str| Problem {
            field: field.into(),
            message: field.into(),
        };
        let problems = [
            p("ppo"),
            p("ppo.batch_size"),
            p("ppo.target_kl"),
            p("ppo_other"),
            p("sampler.grid"),
        ];
        let listed: Vec<&str> = section_problems("ppo", &problems)
            .map(|p| p.field.as_str())
            .collect();
        assert_eq!(listed, ["ppo", "ppo.target_kl"]);
        let listed: Vec<&str> = section_problems("sampler", &problems)
            .map(|p| p.field.as_str())
            .collect();
        assert_eq!(listed, ["sampler.grid"]);
    }
}
