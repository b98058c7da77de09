//! The study list: the open database's studies, parallel ones (`x_1`, `x_2`, `x_3`) shown
//! as one group.

use tradetune_engine::storage::{StudyDirection, StudySummary, TrialState};

/// A study, or several parallel studies (`x_1`, `x_2`, `x_3`) shown as one.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyGroup {
    /// The shared name (`x`), or the study's own name.
    pub name: String,
    /// The studies in it.
    pub members: Vec<String>,
    /// Trials in each state, summed.
    pub n_by_state: [usize; 5],
    /// Best value over the members (by each study's direction).
    pub best: Option<f64>,
    /// Whether smaller values are better (the first member's direction).
    pub minimize: bool,
}

impl StudyGroup {
    /// Trials in all states.
    pub fn n_trials(&self) -> usize {
        self.n_by_state.iter().sum()
    }

    /// Trials in `state`.
    pub fn n(&self, state: TrialState) -> usize {
        self.n_by_state[state.index()]
    }
}

/// Groups parallel copies of one study into one entry: studies named `base_1` … `base_N` (two
/// or more, numbered from 1 without a gap or a leading zero) where no study is named `base`
/// itself; the others stay alone. The user runs three parallel copies of one study this way.
/// A study `ppo` beside `ppo_1` and `ppo_2` is another study, not a copy, so none of them is
/// grouped (its trials would be mixed into the copies'); nor are `btc_2024` and `btc_2025`.
pub fn aggregate(studies: &[StudySummary]) -> Vec<StudyGroup> {
    fn split(name: &str) -> Option<(&str, usize)> {
        let (base, n) = name.rsplit_once('_')?;
        if base.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((base, n.parse().ok()?))
    }
    let copies = |b: &str| -> bool {
        if studies.iter().any(|o| o.study.name == b) {
            return false;
        }
        let mut numbers: Vec<usize> = studies
            .iter()
            .filter_map(|o| {
                split(&o.study.name)
                    .filter(|(ob, _)| *ob == b)
                    .map(|(_, n)| n)
            })
            .collect();
        numbers.sort_unstable();
        numbers.len() >= 2 && numbers.iter().copied().eq(1..=numbers.len())
    };
    let mut groups: Vec<StudyGroup> = Vec::new();
    for s in studies {
        let name = &s.study.name;
        let shared = split(name).map(|(b, _)| b).filter(|b| copies(b));
        let key = shared.unwrap_or(name);
        let minimize = s
            .study
            .directions
            .first()
            .is_none_or(|d| *d == StudyDirection::Minimize);
        let best = s.best.map(|(_, v)| v);
        match groups.iter_mut().find(|g| g.name == key) {
            Some(g) => {
                g.members.push(name.clone());
                for (acc, n) in g.n_by_state.iter_mut().zip(s.n_trials_by_state) {
                    *acc += n;
                }
                g.best = match (g.best, best) {
                    (Some(a), Some(b)) => Some(if minimize { a.min(b) } else { a.max(b) }),
                    (a, b) => a.or(b),
                };
            }
            None => groups.push(StudyGroup {
                name: key.to_owned(),
                members: vec![name.clone()],
                n_by_state: s.n_trials_by_state,
                best,
                minimize,
            }),
        }
    }
    groups
}
