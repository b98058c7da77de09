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

/// Groups studies named `base_N` (two or more sharing `base`) into one entry; the others stay
/// alone. The user runs three parallel copies of one study this way.
pub fn aggregate(studies: &[StudySummary]) -> Vec<StudyGroup> {
    fn base(name: &str) -> Option<&str> {
        let (base, n) = name.rsplit_once('_')?;
        (!base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(base)
    }
    let mut groups: Vec<StudyGroup> = Vec::new();
    for s in studies {
        let name = &s.study.name;
        let shared = base(name).filter(|b| {
            studies
                .iter()
                .filter(|o| base(&o.study.name) == Some(*b))
                .count()
                >= 2
        });
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
