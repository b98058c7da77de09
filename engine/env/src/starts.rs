//! Where each episode starts: a table of start bars per env, computed once on the host.
//!
//! Every implementation (CPU and tensor) reads the same table, indexed by
//! `(env, episode mod episodes_per_env)`, so they agree exactly and the tensor version needs no
//! host round-trip to pick a new start when an env resets.

use std::ops::Range;

use crate::EnvError;
use crate::config::{EnvConfig, MAX_BARS, StartMode};

/// Refuses a `range` of bars that is empty or runs past the dataset's `n_bars`.
pub(crate) fn check_range(range: &Range<usize>, n_bars: usize) -> Result<(), EnvError> {
    if range.end > n_bars || range.start >= range.end {
        return Err(EnvError::Config {
            field: "range",
            value: format!("{}..{}", range.start, range.end),
            reason: format!("must be a non-empty range within the dataset's {n_bars} bars"),
        });
    }
    Ok(())
}

/// Where a configuration's episodes lie within a range of bars ([`StartTable::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Episodes {
    /// The first usable bar (an observation needs `lookback` bars of features).
    pub first: usize,
    /// Steps per episode.
    pub episode_len: usize,
    /// How many start bars the episodes spread over.
    pub span: usize,
}

/// The bars an episode may use and the start bar of every (env, episode slot).
#[derive(Debug, Clone, PartialEq)]
pub struct StartTable {
    /// Number of episodes per env before the table repeats.
    pub episodes_per_env: usize,
    /// `n_envs × episodes_per_env` start bars (absolute bar indices into the dataset).
    pub starts: Vec<u32>,
    /// Steps per episode: an episode starting at `s` ends at bar `s + episode_len`.
    pub episode_len: usize,
}

/// Total size of the table (entries over all envs) before it repeats; enough for ~64k episodes,
/// i.e. many passes over any dataset, at 4 bytes each.
const TABLE_ENTRIES: usize = 1 << 16;

/// SplitMix64 (Steele, Lea & Flood 2014): a seedable, stateless mixer, so a start depends only on
/// (seed, env, episode) and not on the order in which envs reset.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl StartTable {
    /// Builds the table for `cfg` over the bars `range` of a dataset.
    ///
    /// The first usable bar is `range.start + lookback − 1` (an observation needs `lookback`
    /// bars of features); the last bar an episode may reach is `range.end − 1`.
    pub fn new(cfg: &EnvConfig, range: Range<usize>) -> Result<Self, EnvError> {
        let Episodes {
            first: lo,
            episode_len,
            span,
        } = Self::check(cfg, range)?;
        let n = cfg.n_envs.max(1);
        let per_env = (TABLE_ENTRIES / n).max(64);
        let stride = (span / n).max(1);
        let mut starts = Vec::with_capacity(n * per_env);
        for env in 0..n {
            for k in 0..per_env {
                let off = match cfg.start {
                    StartMode::Fixed => 0,
                    StartMode::Strided => ((env + k * n) * stride) % span,
                    // Stratified: episode k shifts every env by one random offset, and env
                    // i starts at a random bar of the i-th of N equal strata from there, so
                    // the N envs start on N distinct bars spread over the span (when N ≤
                    // span) and each episode uses other bars.
                    StartMode::Random => {
                        let h = |salt: u64| {
                            splitmix64(
                                cfg.seed
                                    ^ splitmix64((env as u64) << 32 | k as u64).wrapping_add(salt),
                            )
                        };
                        let shift = splitmix64(cfg.seed ^ splitmix64(k as u64 ^ 0xA5A5_0000));
                        let shift = (shift % span as u64) as usize;
                        let stratum = env * span / n;
                        let width = ((env + 1) * span / n).saturating_sub(stratum).max(1);
                        let jitter = (h(0x5151_5151) % width as u64) as usize;
                        (shift + stratum + jitter) % span
                    }
                };
                starts.push((lo + off) as u32);
            }
        }
        Ok(Self {
            episodes_per_env: per_env,
            starts,
            episode_len,
        })
    }

    /// Whether `cfg`'s episodes fit the bars `range` (what [`Self::new`] refuses, without the
    /// table): the first usable bar, the steps of an episode and the bars its starts spread
    /// over. Cheap: a study's launch asks it of every combination of its searched settings.
    pub fn check(cfg: &EnvConfig, range: Range<usize>) -> Result<Episodes, EnvError> {
        let lookback = cfg.lookback.max(1);
        // Start bars are u32 (and an episode's end, a start plus its length, stays below the
        // split's end): a split past that is refused, not wrapped.
        if u32::try_from(range.end).is_err() {
            return Err(EnvError::Config {
                field: "range",
                value: format!("{}..{}", range.start, range.end),
                reason: format!("bars past {} cannot be indexed", u32::MAX),
            });
        }
        let Some(lo) = range.start.checked_add(lookback - 1) else {
            return Err(EnvError::Config {
                field: "lookback",
                value: lookback.to_string(),
                reason: format!(
                    "from bar {} it reaches past the largest bar index",
                    range.start
                ),
            });
        };
        let last = range.end.saturating_sub(1);
        if range.end <= range.start || last <= lo {
            return Err(EnvError::TooFewBars {
                bars: range.len(),
                needed: lookback.saturating_add(1).saturating_add(cfg.episode_bars),
                detail: format!(
                    "lookback {lookback} needs at least {} bars",
                    lookback.saturating_add(1)
                ),
            });
        }
        let (episode_len, span) = if cfg.episode_bars == 0 && cfg.start == StartMode::Fixed {
            (last - lo, 1)
        } else if cfg.episode_bars == 0 {
            // Auto: half the usable bars per episode, so the starts spread over the other
            // half and no two envs move in lock-step over the same bars.
            let usable = last - lo;
            let e = usable.div_ceil(2).max(1);
            (e, usable - e + 1)
        } else {
            let e = cfg.episode_bars;
            if lo.checked_add(e).is_none_or(|end| end > last) {
                let needed = lookback.saturating_add(e);
                return Err(EnvError::TooFewBars {
                    bars: range.len(),
                    needed,
                    detail: format!("lookback {lookback} + episode_bars {e} need {needed} bars"),
                });
            }
            (e, last - e - lo + 1)
        };
        Ok(Episodes {
            first: lo,
            episode_len,
            span,
        })
    }

    /// [`Self::check`] for the device env ([`crate::TensorVecEnv`]), whose kernel reads an
    /// episode's length as an f32, exact only up to [`MAX_BARS`] (2²⁴): past it the length
    /// rounds, and an episode ends a bar early or steps a bar past the split. The config caps
    /// `episode_bars` there, but with `episode_bars = 0` the length is derived from the split
    /// (the whole split for an evaluation, half of it for training), so a split that long is
    /// refused here. The host env counts in exact integers and takes it.
    pub fn check_device(cfg: &EnvConfig, range: Range<usize>) -> Result<Episodes, EnvError> {
        let split = range.len();
        let episodes = Self::check(cfg, range)?;
        if episodes.episode_len > MAX_BARS {
            return Err(EnvError::Config {
                field: "episode_bars",
                value: cfg.episode_bars.to_string(),
                reason: format!(
                    "on a split of {split} bars this makes episodes of {} bars (the whole split \
                     for an evaluation, half of it for training), more than the {MAX_BARS} the \
                     device env counts exactly (its kernel's lengths are f32); set \
                     env.episode_bars to at most {MAX_BARS}, use a shorter split, or use the \
                     host env (env.placement = \"host\")",
                    episodes.episode_len
                ),
            });
        }
        Ok(episodes)
    }

    /// Start bar of `env`'s `episode`-th episode.
    #[inline]
    pub fn start(&self, env: usize, episode: u32) -> u32 {
        self.starts[env * self.episodes_per_env + episode as usize % self.episodes_per_env]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: usize, start: StartMode, episode_bars: usize, lookback: usize) -> EnvConfig {
        EnvConfig::new()
            .with_n_envs(n)
            .with_start(start)
            .with_episode_bars(episode_bars)
            .with_lookback(lookback)
            .with_seed(7)
    }

    #[test]
    fn starts_stay_inside_the_usable_bars() {
        for mode in [StartMode::Random, StartMode::Strided, StartMode::Fixed] {
            let t = StartTable::new(&cfg(5, mode, 30, 4), 100..200).unwrap();
            for &s in &t.starts {
                assert!(s as usize >= 103, "{mode:?} start {s} before lookback");
                assert!(
                    s as usize + 30 <= 199,
                    "{mode:?} start {s} runs past the end"
                );
            }
        }
    }

    #[test]
    fn whole_split_episode_when_episode_bars_is_zero_and_the_start_fixed() {
        let t = StartTable::new(&cfg(3, StartMode::Fixed, 0, 2), 10..50).unwrap();
        assert!(t.starts.iter().all(|&s| s == 11));
        assert_eq!(t.episode_len, 49 - 11);
    }

    /// Issue 13: the default configuration staggers its envs. Its N envs start on N distinct
    /// bars spread over the split, and stay on distinct bars through every episode after a
    /// reset (all envs have the same episode length, so distinct starts mean no two envs
    /// ever step the same bar at the same time).
    #[test]
    fn the_default_config_staggers_its_envs_over_the_split() {
        let d = EnvConfig::new();
        assert_eq!((d.episode_bars, d.start), (0, StartMode::Random));
        let range = 100..1100;
        let t = StartTable::new(&d, range.clone()).unwrap();
        let n = d.n_envs;
        assert!(n >= 2);
        let (lo, last) = (range.start + d.lookback - 1, range.end - 1);
        assert!(t.episode_len < last - lo, "episodes leave room to stagger");
        let span = (last - lo) - t.episode_len + 1;
        for episode in 0..200u32 {
            let mut s: Vec<u32> = (0..n).map(|e| t.start(e, episode)).collect();
            for &b in &s {
                assert!(b as usize >= lo && b as usize + t.episode_len <= last);
            }
            s.sort_unstable();
            s.dedup();
            assert_eq!(
                s.len(),
                n,
                "episode {episode}: two envs in lock-step: {s:?}"
            );
            // Spread: the gaps between consecutive starts (around the span) are all below
            // two strata, so the starts cover the span rather than bunch up.
            let mut offs: Vec<usize> = s.iter().map(|&b| b as usize - lo).collect();
            offs.push(offs[0] + span);
            let widest = offs.windows(2).map(|w| w[1] - w[0]).max().unwrap();
            assert!(
                widest <= 2 * span.div_ceil(n),
                "episode {episode}: {offs:?}"
            );
        }
        // Episodes after a reset start elsewhere.
        assert_ne!(t.start(0, 0), t.start(0, 1));
    }

    #[test]
    fn random_starts_differ_between_envs_and_depend_on_seed() {
        let a = StartTable::new(&cfg(4, StartMode::Random, 10, 1), 0..1000).unwrap();
        let b = StartTable::new(&cfg(4, StartMode::Random, 10, 1).with_seed(8), 0..1000).unwrap();
        assert_ne!(a.start(0, 0), a.start(1, 0));
        assert_ne!(a.starts, b.starts);
        let again = StartTable::new(&cfg(4, StartMode::Random, 10, 1), 0..1000).unwrap();
        assert_eq!(a, again);
    }

    /// An `episode_bars` or `lookback` whose sums overflowed (a debug panic, in release a
    /// wrapped check and starts past the prices) is refused: by the config's validation,
    /// naming the field, and by the table, which computes those sums checked.
    #[test]
    fn huge_episode_bars_or_lookback_are_refused_not_overflowed() {
        let huge = [
            ("episode_bars", cfg(2, StartMode::Random, usize::MAX, 1)),
            (
                "episode_bars",
                cfg(2, StartMode::Strided, usize::MAX - 3, 4),
            ),
            ("episode_bars", cfg(2, StartMode::Fixed, MAX_BARS + 1, 1)),
            ("lookback", cfg(2, StartMode::Random, 0, usize::MAX)),
            ("lookback", cfg(2, StartMode::Fixed, 10, usize::MAX - 1)),
            ("lookback", cfg(2, StartMode::Random, 10, MAX_BARS + 1)),
        ];
        for (field, c) in huge {
            let err = c.validate(3).unwrap_err().to_string();
            assert!(err.contains(&format!("env.{field} = ")), "{field}: {err}");
            let err = StartTable::new(&c, 5..100).unwrap_err().to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
        let at_most = cfg(2, StartMode::Random, MAX_BARS, MAX_BARS);
        assert!(at_most.validate(3).is_ok());
        // A split whose bars a u32 start cannot index.
        let far = (u32::MAX as usize)..(u32::MAX as usize + 100);
        let err = StartTable::new(&cfg(1, StartMode::Fixed, 10, 1), far).unwrap_err();
        assert!(err.to_string().contains("env.range"), "{err}");
    }

    /// Review env44 finding 2: with `episode_bars = 0` the episode's length comes from the
    /// split, and the device env's kernel reads it as an f32. A split whose derived length
    /// passes 2²⁴ is refused for the device (naming the split and what to do), one at 2²⁴
    /// taken; the host env, counting in integers, takes both. Only the start table (64k
    /// entries) is built, no dataset.
    #[test]
    fn a_derived_episode_past_f32s_exact_counts_is_refused_for_the_device() {
        // Fixed starts (an evaluation): the episode is the whole split after the lookback.
        let eval = cfg(1, StartMode::Fixed, 0, 1);
        let at = 0..MAX_BARS + 1;
        assert_eq!(
            StartTable::check(&eval, at.clone()).unwrap().episode_len,
            MAX_BARS
        );
        assert!(StartTable::check_device(&eval, at.clone()).is_ok());
        assert_eq!(StartTable::new(&eval, at).unwrap().episode_len, MAX_BARS);
        let over = 0..MAX_BARS + 2;
        assert_eq!(
            StartTable::check(&eval, over.clone()).unwrap().episode_len,
            MAX_BARS + 1
        );
        let err = StartTable::check_device(&eval, over)
            .unwrap_err()
            .to_string();
        for part in [
            "env.episode_bars = 0",
            &format!("split of {} bars", MAX_BARS + 2),
            &format!("episodes of {} bars", MAX_BARS + 1),
            "set env.episode_bars",
            "host",
        ] {
            assert!(err.contains(part), "{part:?} missing from: {err}");
        }
        // Random starts (training): half the usable bars, so twice the split.
        let train = cfg(4, StartMode::Random, 0, 1);
        let at = 0..2 * MAX_BARS + 1;
        assert_eq!(
            StartTable::check_device(&train, at).unwrap().episode_len,
            MAX_BARS
        );
        let over = 0..2 * MAX_BARS + 3;
        assert_eq!(
            StartTable::check(&train, over.clone()).unwrap().episode_len,
            MAX_BARS + 1
        );
        assert!(StartTable::check_device(&train, over).is_err());
        // A configured length at the cap on the long split is taken.
        let set = cfg(4, StartMode::Random, MAX_BARS, 1);
        assert!(StartTable::check_device(&set, 0..2 * MAX_BARS + 3).is_ok());
    }

    #[test]
    fn too_short_a_range_is_an_error() {
        let err = StartTable::new(&cfg(1, StartMode::Random, 50, 5), 0..40).unwrap_err();
        assert!(err.to_string().contains("episode_bars 50"), "{err}");
    }
}
