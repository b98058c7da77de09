//! The permutation `numpy.random.RandomState(seed).shuffle(x)` makes, which Optuna's
//! `GridSampler` applies to its grid (`LazyRandomState(seed or 0)`): so that a grid id means
//! the same point to TradeTune and to an Optuna process working the same study, TradeTune
//! shuffles the same way.
//!
//! `RandomState` is numpy's legacy generator: Mersenne Twister MT19937 seeded by
//! `init_genrand(seed)` (seeds 0 to 2³² − 1; numpy refuses any other), and `shuffle` is a
//! Fisher–Yates pass from the last element down, each swap partner drawn by `random_interval`:
//! 32-bit outputs masked to the smallest all-ones mask covering the bound, drawn again while
//! above it (64-bit outputs past 2³² − 1, which no grid of 10⁷ points reaches). Numpy has kept
//! this stream unchanged for its legacy generator.

/// MT19937 as numpy's `RandomState` holds it.
struct Mt19937 {
    state: [u32; N],
    pos: usize,
}

const N: usize = 624;
const M: usize = 397;

impl Mt19937 {
    /// `init_genrand`: numpy's seeding of `RandomState(seed)` for an integer seed.
    fn from_u32(seed: u32) -> Self {
        let mut state = [0u32; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, pos: N }
    }

    /// `init_by_array`: numpy's seeding by a sequence of 32-bit words.
    fn from_words(key: &[u32]) -> Self {
        let mut mt = Mt19937::from_u32(19_650_218);
        let s = &mut mt.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = s[i - 1];
            s[i] = (s[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = s[i - 1];
            s[i] =
                (s[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
        }
        s[0] = 0x8000_0000;
        mt
    }

    fn refill(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        for k in 0..N {
            let y = (self.state[k] & UPPER) | (self.state[(k + 1) % N] & LOWER);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            self.state[k] = self.state[(k + M) % N] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.refill();
        }
        let mut y = self.state[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    fn next_u64(&mut self) -> u64 {
        let high = u64::from(self.next_u32());
        (high << 32) | u64::from(self.next_u32())
    }

    /// numpy's `random_interval(max)`: uniform on `0..=max` by masked rejection.
    fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mask = u64::MAX >> max.leading_zeros();
        loop {
            let v = if max <= u64::from(u32::MAX) {
                u64::from(self.next_u32()) & mask
            } else {
                self.next_u64() & mask
            };
            if v <= max {
                return v;
            }
        }
    }
}

/// Shuffles `items` as `numpy.random.RandomState(seed).shuffle` shuffles a list of the same
/// length. A seed past 2³² − 1, which numpy (and so Optuna) refuses, seeds MT19937 by its two
/// 32-bit words, low first, as numpy seeds from an array: a permutation of its own that no
/// Optuna process can share.
pub(crate) fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut mt = match u32::try_from(seed) {
        Ok(s) => Mt19937::from_u32(s),
        Err(_) => Mt19937::from_words(&[seed as u32, (seed >> 32) as u32]),
    };
    for i in (1..items.len()).rev() {
        let j = mt.interval(i as u64) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference outputs of MT19937 (Matsumoto and Nishimura's `mt19937ar.c`, seeded by
    /// `init_by_array({0x123, 0x234, 0x345, 0x456})`), which numpy's generator reproduces.
    #[test]
    fn matches_the_reference_generator() {
        let mut mt = Mt19937::from_words(&[0x123, 0x234, 0x345, 0x456]);
        let first: Vec<u32> = (0..5).map(|_| mt.next_u32()).collect();
        assert_eq!(
            first,
            [
                1_067_595_299,
                955_945_823,
                477_289_528,
                4_107_218_783,
                4_228_976_476
            ]
        );
        // The C++ standard's check of `std::mt19937` (default seed 5489): its 10000th output.
        let mut mt = Mt19937::from_u32(5489);
        let tenth_thousand = (0..10_000).map(|_| mt.next_u32()).last();
        assert_eq!(tenth_thousand, Some(4_123_659_995));
    }

    /// What numpy 2.4's `x = list(range(n)); RandomState(seed).shuffle(x)` leaves.
    #[test]
    fn shuffles_as_numpy_does() {
        let shuffled = |seed: u64, n: usize| {
            let mut v: Vec<usize> = (0..n).collect();
            shuffle(&mut v, seed);
            v
        };
        assert_eq!(shuffled(5, 6), [5, 2, 4, 1, 0, 3]);
        assert_eq!(shuffled(0, 12), [6, 11, 4, 10, 2, 8, 1, 7, 9, 3, 0, 5]);
        assert_eq!(shuffled(3, 12), [5, 4, 1, 2, 11, 6, 7, 0, 3, 9, 8, 10]);
        assert_eq!(
            shuffled(7, 1000)[..14],
            [
                778, 334, 271, 802, 216, 408, 812, 94, 487, 170, 24, 242, 542, 930
            ]
        );
    }

    #[test]
    fn a_shuffle_is_a_permutation_fixed_by_its_seed() {
        let shuffled = |seed: u64| {
            let mut v: Vec<usize> = (0..1000).collect();
            shuffle(&mut v, seed);
            v
        };
        let a = shuffled(7);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_eq!(a, shuffled(7));
        assert_ne!(a, shuffled(8));
        assert_ne!(shuffled(1 << 40), shuffled(0));
        let mut one = [5];
        shuffle(&mut one, 3);
        assert_eq!(one, [5]);
    }
}
