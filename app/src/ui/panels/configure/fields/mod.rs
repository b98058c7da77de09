//! The Configure panel's fields as one table: each field's label (what the panel shows and
//! tests find it by), its dotted path (what the engine's checks and a search name it by), how it
//! is edited with its range, and a line of help. The panel draws its two columns from it, shows
//! each problem under the field it names (or at the end of the field's section), and the list of
//! fields a search can set is its rows under `env`, `ppo` and `train`.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use crate::ui::draft::{Draft, Problem};
use crate::ui::panels::widgets;

/// One field of the draft.
pub struct Field {
    /// The label beside its widget (its accessible name).
    pub label: &'static str,
    /// Its dotted name: `ppo.batch_size`.
    pub path: &'static str,
    /// How it is edited.
    pub kind: Kind,
    /// What it means, shown on hover.
    pub help: &'static str,
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
    /// Not on the panel: set by a search or a preset.
    SearchOnly,
}

/// One line of a column: a heading, a field, or the problems of a section that no field of
/// the panel shows (`sampler.grid` under `sampler`).
pub enum Line {
    Heading(&'static str),
    Field(Field),
    Problems(&'static str),
}

/// A numeric field: its place in the draft and its range.
pub struct Number<T: 'static> {
    /// The field in the draft.
    pub at: fn(&mut Draft) -> &mut T,
    /// What the widget allows.
    pub range: RangeInclusive<T>,
}

/// A [`Number`] of any numeric type.
pub trait NumberField: Sync {
    /// The labelled drag value.
    fn ui(&self, ui: &mut egui::Ui, label: &str, draft: &mut Draft) -> egui::Response;

    /// Sets the field to an end of its range other than its value.
    #[cfg(test)]
    fn set_far(&self, draft: &mut Draft);
}

impl<T: egui::emath::Numeric + Sync> NumberField for Number<T> {
    fn ui(&self, ui: &mut egui::Ui, label: &str, draft: &mut Draft) -> egui::Response {
        widgets::drag(ui, label, (self.at)(draft), self.range.clone())
    }

    #[cfg(test)]
    fn set_far(&self, draft: &mut Draft) {
        let v = (self.at)(draft);
        *v = if *v == *self.range.end() {
            *self.range.start()
        } else {
            *self.range.end()
        };
    }
}

/// An enum field: its place in the draft, its values and how each reads.
pub struct Choice<T: 'static> {
    /// The field in the draft.
    pub at: fn(&mut Draft) -> &mut T,
    /// Every value, in the order listed.
    pub all: &'static [T],
    /// A value as shown.
    pub text: fn(&T) -> String,
}

/// A [`Choice`] of any enum.
pub trait ChoiceField: Sync {
    /// The labelled combo box (its id is the label).
    fn ui(&self, ui: &mut egui::Ui, label: &str, draft: &mut Draft) -> egui::Response;
}

impl<T: PartialEq + Copy + Sync> ChoiceField for Choice<T> {
    fn ui(&self, ui: &mut egui::Ui, label: &str, draft: &mut Draft) -> egui::Response {
        let value = (self.at)(draft);
        ui.horizontal(|ui| {
            let l = ui.label(label);
            egui::ComboBox::from_id_salt(label)
                .selected_text((self.text)(value))
                .show_ui(ui, |ui| {
                    for v in self.all {
                        ui.selectable_value(value, *v, (self.text)(v));
                    }
                })
                .response
                .labelled_by(l.id)
        })
        .inner
    }
}

/// The dotted path of a field of the draft: `path!(ppo.batch_size)` is `"ppo.batch_size"`.
macro_rules! path {
    ($first:ident $(.$rest:ident)*) => {
        concat!(stringify!($first) $(, ".", stringify!($rest))*)
    };
}

/// A numeric field, named once: `number!("batch_size", ppo.batch_size, 1..=10, "help")`.
macro_rules! number {
    ($label:expr, $($seg:ident).+, $range:expr, $help:expr) => {
        Line::Field(Field {
            label: $label,
            path: path!($($seg).+),
            kind: Kind::Number(&Number {
                at: |d: &mut Draft| &mut d.$($seg).+,
                range: $range,
            }),
            help: $help,
        })
    };
}

/// Any other field: `field!("label", ppo.gamma, Kind::Toggle, "help")`; the kind gets the field's
/// place in the draft (and `field!(.., Kind::SearchOnly, ..)` none).
macro_rules! field {
    ($label:expr, $($seg:ident).+, Kind::SearchOnly, $help:expr) => {
        Line::Field(Field {
            label: $label,
            path: path!($($seg).+),
            kind: Kind::SearchOnly,
            help: $help,
        })
    };
    ($label:expr, $($seg:ident).+, Kind::Choice($all:expr, $text:expr), $help:expr) => {
        Line::Field(Field {
            label: $label,
            path: path!($($seg).+),
            kind: Kind::Choice(&Choice {
                at: |d: &mut Draft| &mut d.$($seg).+,
                all: $all,
                text: $text,
            }),
            help: $help,
        })
    };
    ($label:expr, $($seg:ident).+, Kind::$kind:ident $(($($arg:expr),*))?, $help:expr) => {
        Line::Field(Field {
            label: $label,
            path: path!($($seg).+),
            kind: Kind::$kind(|d: &mut Draft| &mut d.$($seg).+ $($(, $arg)*)?),
            help: $help,
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

/// Whether a search can set the field: the trial's configuration (`env`, `ppo`, `train`), not
/// the study's own settings.
pub fn searchable(field: &Field) -> bool {
    ["env.", "ppo.", "train."]
        .iter()
        .any(|p| field.path.starts_with(p))
}

/// Every name a search can set (`env.n_envs`, `ppo.learning_rate`, …), sorted.
pub fn searchable_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = all().filter(|f| searchable(f)).map(|f| f.path).collect();
    names.sort_unstable();
    names
}

/// The help of the field at `path`.
pub fn help(path: &str) -> Option<&'static str> {
    all().find(|f| f.path == path).map(|f| f.help)
}

/// Whether the panel shows `path`'s problems under a widget of its own.
fn shown(path: &str) -> bool {
    all().any(|f| f.path == path && !matches!(f.kind, Kind::SearchOnly))
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
                if matches!(f.kind, Kind::SearchOnly) {
                    continue;
                }
                if let Some(r) = editor(ui, f, draft, texts, &mut devices) {
                    r.on_hover_text(f.help);
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
    Some(match &f.kind {
        Kind::Number(n) => n.ui(ui, f.label, draft),
        Kind::Toggle(at) => ui.checkbox(at(draft), f.label),
        Kind::Choice(c) => c.ui(ui, f.label, draft),
        Kind::Text(at) => {
            ui.horizontal(|ui| {
                let l = ui.label(f.label);
                ui.text_edit_singleline(at(draft)).labelled_by(l.id)
            })
            .inner
        }
        Kind::Widths(at) => {
            let text = texts.entry(f.path).or_default();
            widgets::widths(ui, f.label, at(draft), text);
            return None;
        }
        Kind::Devices => {
            devices(ui, draft);
            return None;
        }
        Kind::SearchOnly => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base_leaves(d: &Draft) -> Vec<String> {
        tradetune_engine::study::config_path::leaf_paths(&d.base_json())
    }

    /// The table lists every setting of the trial's configuration, under the name the engine
    /// knows it by, for the default draft and every preset's.
    #[test]
    fn the_searchable_names_are_the_configurations_settings() {
        let names: Vec<String> = searchable_names().iter().map(|s| s.to_string()).collect();
        assert_eq!(names, base_leaves(&Draft::default()));
        for p in tradetune_engine::study::preset::bundled().unwrap() {
            let d = Draft::from_preset(&p).unwrap();
            assert_eq!(names, base_leaves(&d), "{}", p.name);
        }
    }

    #[test]
    fn no_path_or_label_is_listed_twice() {
        let mut paths: Vec<&str> = all().map(|f| f.path).collect();
        let mut labels: Vec<&str> = all().map(|f| f.label).collect();
        let n = paths.len();
        paths.sort_unstable();
        paths.dedup();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!((paths.len(), labels.len()), (n, n));
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
            n.set_far(&mut draft);
            assert_ne!(
                before,
                at(&draft, f.path),
                "{} does not edit {}",
                f.label,
                f.path
            );
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
