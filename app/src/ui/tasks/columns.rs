//! The columns of the rows the trials jobs read, derived where they were read (off the UI
//! thread): each parameter's axis and the user attributes' keys, the rows' axis positions and
//! their order.

use std::collections::BTreeMap;

use tradetune_engine::storage::{OptunaDistribution, TrialParam};

use super::rows::{AxisPositions, ParamAxis, TrialColumn, TrialRow};

/// The columns of a set of rows: their parameters' axes (by name) and their user attributes'
/// keys (sorted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    pub param_axes: Vec<ParamAxis>,
    pub attr_keys: Vec<String>,
}

impl Columns {
    /// The columns of `rows`, and each row's axis positions filled for them. A parameter's axis
    /// follows the first distribution seen for it. Rows of a study list the same parameters
    /// and attributes in the same order as the row before them, so a row is compared with its
    /// predecessor before its names are searched (10,000 rows: a few milliseconds less).
    pub fn of(rows: &mut [TrialRow]) -> Columns {
        let mut found: Vec<(&str, &OptunaDistribution)> = Vec::new();
        let mut keys: Vec<&str> = Vec::new();
        let mut params_before: &[TrialParam] = &[];
        let mut attrs_before: &[(String, String, Option<f64>)] = &[];
        for r in rows.iter() {
            let params = &r.stored_params[..];
            let same = params.len() == params_before.len()
                && params
                    .iter()
                    .zip(params_before)
                    .all(|(a, b)| a.name == b.name);
            if !same {
                for p in params {
                    if !found.iter().any(|(n, _)| *n == p.name) {
                        found.push((&p.name, &p.distribution));
                    }
                }
                params_before = params;
            }
            let attrs = &r.attrs[..];
            let same = attrs.len() == attrs_before.len()
                && attrs.iter().zip(attrs_before).all(|(a, b)| a.0 == b.0);
            if !same {
                for (k, _, _) in attrs {
                    if !keys.contains(&k.as_str()) {
                        keys.push(k);
                    }
                }
                attrs_before = attrs;
            }
        }
        found.sort_unstable_by(|a, b| a.0.cmp(b.0));
        keys.sort_unstable();
        let columns = Columns {
            param_axes: found.iter().map(|(n, d)| ParamAxis::of(n, d)).collect(),
            attr_keys: keys.into_iter().map(str::to_owned).collect(),
        };
        let mut guess = vec![0; columns.param_axes.len()];
        for r in rows.iter_mut() {
            r.axis_positions = axis_positions(r, &columns.param_axes, &mut guess);
        }
        columns
    }
}

/// Row `r`'s [`TrialRow::axis_positions`] on `axes`. `guess` holds, per axis, where the row before
/// had that parameter among its cells: looked at first.
pub fn axis_positions(r: &TrialRow, axes: &[ParamAxis], guess: &mut [usize]) -> AxisPositions {
    let cells = &r.param_cells;
    AxisPositions(
        axes.iter()
            .zip(guess.iter_mut())
            .map(|(a, g)| {
                let at = if cells.get(*g).is_some_and(|c| c.name == a.name) {
                    Some(*g)
                } else {
                    cells.iter().position(|c| c.name == a.name)
                };
                let j = at?;
                *g = j;
                Some(a.to_plot(cells[j].key))
            })
            .collect(),
    )
}

/// Sorts `rows` by a column, ascending or not (stable: equal rows keep their order).
pub fn sort_rows(rows: &mut [TrialRow], (column, ascending): &(TrialColumn, bool)) {
    rows.sort_by(|a, b| {
        let o = a.cmp_by(b, column);
        if *ascending { o } else { o.reverse() }
    });
}

/// Rows read for the table, made ready where they were read (off the UI thread): their
/// columns derived, each row's axis positions filled, sorted as the table was when the read was
/// asked for. Over 10,000 trials that work is longer than a frame.
#[derive(Debug)]
pub struct ReadRows {
    pub rows: Vec<TrialRow>,
    pub columns: Columns,
}

impl ReadRows {
    /// Makes `rows` ready for a table sorted by `sort`.
    pub fn new(mut rows: Vec<TrialRow>, sort: &(TrialColumn, bool)) -> ReadRows {
        let columns = Columns::of(&mut rows);
        sort_rows(&mut rows, sort);
        ReadRows { rows, columns }
    }
}

/// A trial's stored training curves: (env steps, value) points by metric name.
pub type Curves = BTreeMap<String, Vec<[f64; 2]>>;
