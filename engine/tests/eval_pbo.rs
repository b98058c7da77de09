//! Issue 16, items 2 and 3: the probability of backtest overfitting by CSCV
//! (`eval::pbo`) and the probabilistic and deflated Sharpe ratios (`eval::dsr`).

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use tradetune_engine::eval::dsr::{
    self, DsrError, SharpeEstimate, deflate_best, deflated_sharpe_ratio, expected_max_sharpe,
    normal_cdf, normal_inv_cdf, probabilistic_sharpe_ratio,
};
use tradetune_engine::eval::pbo::{self, PboError, cscv};

/// `strategies` columns of `periods` independent N(0, 0.01²) returns.
fn noise(strategies: usize, periods: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..strategies)
        .map(|_| {
            (0..periods)
                .map(|_| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    0.01 * z
                })
                .collect::<Vec<f64>>()
        })
        .collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

// ---------------------------------------------------------------------------------------------
// PBO
// ---------------------------------------------------------------------------------------------

/// With no strategy better than another, the in-sample best is as likely below the
/// out-of-sample median as above it: PBO ≈ 1/2. One matrix alone ranges widely (the 12,870
/// combinations share the same 50 columns), so the test takes the mean of 20.
#[test]
fn pbo_of_pure_noise_is_one_half_on_average() {
    let runs: Vec<f64> = (0..20)
        .map(|seed| {
            cscv(&noise(50, 1024, 1_000 + seed), 16)
                .expect("noise has a PBO")
                .pbo
        })
        .collect();
    let mean = runs.iter().sum::<f64>() / runs.len() as f64;
    eprintln!("PBO of 20 noise matrices: mean {mean:.4}, each {runs:.3?}");
    assert!(
        (mean - 0.5).abs() <= 0.08,
        "mean PBO of pure noise {mean} is not within 0.5 ± 0.08 ({runs:?})"
    );
    // Not a constant: the runs differ, as noise does.
    let spread = runs.iter().copied().fold(f64::MIN, f64::max)
        - runs.iter().copied().fold(f64::MAX, f64::min);
    assert!(
        spread > 0.05,
        "PBO of 20 noise matrices barely varies: {runs:?}"
    );
}

/// One strategy beats every other in every period by a margin: it is the in-sample best and the
/// out-of-sample best of every combination, so no combination overfits.
#[test]
fn pbo_is_zero_when_one_strategy_has_a_clear_edge() {
    let mut m = noise(50, 1024, 7);
    let edge: Vec<f64> = (0..1024)
        .map(|t| m.iter().map(|c| c[t]).fold(f64::MIN, f64::max) + 0.001)
        .collect();
    m[17] = edge;
    let r = cscv(&m, 16).unwrap();
    assert_eq!(r.combinations, 12_870);
    assert_eq!(r.pbo, 0.0);
    assert_eq!(r.probability_of_loss, 0.0);
    assert!(
        r.selected.iter().all(|&s| s == 17),
        "{:?}",
        r.selection_counts()
    );
    // Rank N of N: ω̄ = 50/51, λ = ln(50).
    let top = 50f64.ln();
    assert!(r.logits.iter().all(|&l| close(l, top, 1e-12)));
    // And the same matrix without the edge is not 0.
    let plain = cscv(&noise(50, 1024, 7), 16).unwrap();
    assert!(plain.pbo > 0.1, "{}", plain.pbo);
}

/// S = 4 partitions of T = 4 periods (one period each), N = 3 strategies, worked by hand.
///
/// Each half holds two periods {a, b}: mean (a + b)/2, sample standard deviation |a − b|/√2,
/// so the per-period Sharpe ratio is (a + b) / (√2·|a − b|) = q/√2 with q = (a + b)/|a − b|.
#[test]
fn pbo_matches_a_case_worked_by_hand() {
    //            period:  0   1   2  3
    let a = vec![3.0, -1.0, 2.0, 4.0];
    let b = vec![1.0, 3.0, -2.0, 0.0];
    let c = vec![2.0, -1.0, 0.0, 3.0];
    // q = (a + b)/|a − b| of each pair of periods, per strategy:
    //   periods  {0,1}         {0,2}        {0,3}       {1,2}          {1,3}         {2,3}
    //   A        (3,−1) 2/4    (3,2) 5/1    (3,4) 7/1   (−1,2) 1/3     (−1,4) 3/5    (2,4) 6/2
    //   B        (1,3)  4/2    (1,−2) −1/3  (1,0) 1/1   (3,−2) 1/5     (3,0) 3/3     (−2,0) −2/2
    //   C        (2,−1) 1/3    (2,0) 2/2    (2,3) 5/1   (−1,0) −1/1    (−1,3) 2/4    (0,3) 3/3
    //
    // The C(4, 2) = 6 combinations in lexicographic order of the in-sample blocks:
    //   c  IS     q_IS (A, B, C)   n*  OOS    q_OOS (A, B, C)    n*'s OOS rank r̄  ω̄ = r̄/4  λ
    //   0  {0,1}  1/2, 2, 1/3      B   {2,3}  3, −1, 1           1 (worst)        1/4      ln(1/3)
    //   1  {0,2}  5, −1/3, 1       A   {1,3}  3/5, 1, 1/2        2 (median)       2/4      0
    //   2  {0,3}  7, 1, 5          A   {1,2}  1/3, 1/5, −1       3 (best)         3/4      ln 3
    //   3  {1,2}  1/3, 1/5, −1     A   {0,3}  7, 1, 5            3                3/4      ln 3
    //   4  {1,3}  3/5, 1, 1/2      B   {0,2}  5, −1/3, 1         1                1/4      ln(1/3)
    //   5  {2,3}  3, −1, 1         A   {0,1}  1/2, 2, 1/3        2                2/4      0
    //
    // PBO: λ ≤ 0 in combinations 0, 1, 4, 5 (at the median counts) = 4/6.
    // Loss: n*'s OOS q < 0 in combinations 0 (B: −1) and 4 (B: −1/3) = 2/6.
    let r = cscv(&[a, b, c], 4).unwrap();
    assert_eq!(r.combinations, 6);
    assert_eq!(
        (r.partition_len, r.periods_used, r.periods_dropped),
        (1, 4, 0)
    );
    assert_eq!(r.selected, vec![1, 0, 0, 0, 1, 0]);
    let third = (1.0f64 / 3.0).ln();
    let expected_logits = [third, 0.0, 3f64.ln(), 3f64.ln(), third, 0.0];
    for (got, want) in r.logits.iter().zip(expected_logits) {
        assert!(close(*got, want, 1e-12), "logits {:?}", r.logits);
    }
    assert!(close(r.pbo, 4.0 / 6.0, 1e-12), "PBO {}", r.pbo);
    assert!(close(r.probability_of_loss, 2.0 / 6.0, 1e-12));

    // The degradation pairs (q_IS, q_OOS)/√2 of the selected strategy:
    let s2 = 2f64.sqrt();
    let q_is = [2.0, 5.0, 7.0, 1.0 / 3.0, 1.0, 3.0];
    let q_oos = [-1.0, 3.0 / 5.0, 1.0 / 3.0, 7.0, -1.0 / 3.0, 1.0 / 2.0];
    for i in 0..6 {
        assert!(close(r.in_sample_sharpe[i], q_is[i] / s2, 1e-12));
        assert!(close(r.out_of_sample_sharpe[i], q_oos[i] / s2, 1e-12));
    }
    // Least squares in q (the 1/√2 scales both axes: the slope is unchanged, the intercept
    // and means take the 1/√2): mean q_IS = 55/18, mean q_OOS = 71/60,
    // Sxx = Σ(x − x̄)² = 1733/54, Sxy = −535/36, Syy = 3055/72, so
    // β = Sxy/Sxx = −1605/3466, α_q = ȳ − β·x̄ = 22514/8665, R² = Sxy²/(Sxx·Syy) = 171735/1058863.
    let d = r.degradation;
    assert!(close(d.slope.unwrap(), -1605.0 / 3466.0, 1e-12), "{d:?}");
    assert!(
        close(d.intercept.unwrap(), 22514.0 / 8665.0 / s2, 1e-12),
        "{d:?}"
    );
    assert!(
        close(d.r_squared.unwrap(), 171_735.0 / 1_058_863.0, 1e-12),
        "{d:?}"
    );
    assert!(close(d.mean_in_sample, 55.0 / 18.0 / s2, 1e-12));
    assert!(close(d.mean_out_of_sample, 71.0 / 60.0 / s2, 1e-12));
}

/// Ties: two identical strategies. The in-sample choice is the first column; out of sample the
/// two share ranks 2 and 3 (average 2.5), so ω̄ = 2.5/4 and λ = ln(5/3) in every combination.
#[test]
fn tied_strategies_share_their_average_rank() {
    // Every half holds two 2s and two 3s of the leader (Sharpe 2.5/0.577…) and ±1 of the
    // other (mean 0, Sharpe 0), whichever blocks it takes.
    let lead = vec![2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0];
    let flat = vec![-1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0];
    let r = cscv(&[lead.clone(), lead, flat], 4).unwrap();
    assert!(r.selected.iter().all(|&s| s == 0));
    let want = (5.0f64 / 3.0).ln();
    assert!(
        r.logits.iter().all(|&l| close(l, want, 1e-12)),
        "{:?}",
        r.logits
    );
    assert_eq!(r.pbo, 0.0);
}

/// The fast path (block sums, O(S·N) a combination) against the definition computed directly:
/// concatenate each half's rows, two-pass mean and standard deviation, rank by sorting. With T
/// not a multiple of S, so the oldest rows are dropped.
#[test]
fn block_sums_agree_with_the_definition_computed_directly() {
    let (n, t, s) = (7, 203, 8);
    let m = noise(n, t, 42);
    let r = cscv(&m, s).unwrap();
    let len = t / s;
    let dropped = t % s;
    assert_eq!((r.partition_len, r.periods_dropped), (len, dropped));

    let sharpe = |v: &[f64]| {
        let k = v.len() as f64;
        let mean = v.iter().sum::<f64>() / k;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (k - 1.0);
        mean / var.sqrt()
    };
    let mut c = 0;
    let mut overfit = 0;
    // Every subset of S blocks with S/2 members, in lexicographic order of its members.
    let mut subsets: Vec<Vec<usize>> = (0u32..1 << s)
        .filter(|mask| mask.count_ones() as usize == s / 2)
        .map(|mask| (0..s).filter(|b| mask & (1 << b) != 0).collect())
        .collect();
    subsets.sort();
    for inside in &subsets {
        let rows = |want_in: bool| -> Vec<usize> {
            (0..s)
                .filter(|b| inside.contains(b) == want_in)
                .flat_map(|b| dropped + b * len..dropped + (b + 1) * len)
                .collect()
        };
        let (is_rows, oos_rows) = (rows(true), rows(false));
        let is: Vec<f64> = m
            .iter()
            .map(|col| sharpe(&is_rows.iter().map(|&i| col[i]).collect::<Vec<_>>()))
            .collect();
        let oos: Vec<f64> = m
            .iter()
            .map(|col| sharpe(&oos_rows.iter().map(|&i| col[i]).collect::<Vec<_>>()))
            .collect();
        let best = (0..n).fold(0, |b, j| if is[j] > is[b] { j } else { b });
        let mut sorted = oos.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = sorted.iter().position(|&v| v == oos[best]).unwrap() + 1;
        let w = rank as f64 / (n as f64 + 1.0);
        let logit = (w / (1.0 - w)).ln();
        assert_eq!(r.selected[c], best, "combination {c}");
        assert!(close(r.logits[c], logit, 1e-12), "combination {c}");
        assert!(
            close(r.in_sample_sharpe[c], is[best], 1e-10),
            "combination {c}"
        );
        assert!(
            close(r.out_of_sample_sharpe[c], oos[best], 1e-10),
            "combination {c}"
        );
        overfit += usize::from(logit <= 0.0);
        c += 1;
    }
    assert_eq!(c, r.combinations);
    assert_eq!(r.pbo, overfit as f64 / c as f64);
}

#[test]
fn pbo_refuses_bad_input_naming_the_problem() {
    let m = noise(3, 64, 1);
    let e = cscv(&m, 5).unwrap_err();
    assert_eq!(e, PboError::OddPartitions { partitions: 5 });
    assert!(e.to_string().contains("even"), "{e}");
    assert_eq!(
        cscv(&m, 0).unwrap_err(),
        PboError::OddPartitions { partitions: 0 }
    );

    let e = cscv(&noise(3, 10, 1), 12).unwrap_err();
    assert_eq!(
        e,
        PboError::MorePartitionsThanPeriods {
            partitions: 12,
            periods: 10
        }
    );
    assert!(e.to_string().contains("S ≤ T"), "{e}");

    let e = cscv(&noise(3, 3, 1), 2).unwrap_err();
    assert!(
        matches!(e, PboError::TooFewPeriods { half: 1, .. }),
        "{e:?}"
    );

    let e = cscv(&noise(1, 64, 1), 4).unwrap_err();
    assert_eq!(e, PboError::TooFewStrategies { strategies: 1 });
    assert!(e.to_string().contains("at least 2"), "{e}");

    let e = cscv(&m, 26).unwrap_err();
    assert!(
        matches!(e, PboError::TooManyCombinations { partitions: 26, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("10400600 combinations"), "{e}");
    // Counts past a u128 (C(400, 200) ≈ 1.0e119) are estimated, not overflowed.
    for (s, said) in [(128, "combinations"), (400, "about 1.0e119 combinations")] {
        let e = cscv(&m, s).unwrap_err();
        assert!(e.to_string().contains(said), "{e}");
    }

    let mut bad = m.clone();
    bad[2][40] = f64::NAN;
    let e = cscv(&bad, 4).unwrap_err();
    assert!(
        matches!(e, PboError::NonFinite { period: 40, strategy: 2, value } if value.is_nan()),
        "{e:?}"
    );
    assert!(e.to_string().contains("period 40 of strategy 2"), "{e}");

    let mut ragged = m.clone();
    ragged[1].pop();
    assert_eq!(
        cscv(&ragged, 4).unwrap_err(),
        PboError::Ragged {
            strategy: 1,
            periods: 63,
            expected: 64
        }
    );

    // A constant nonzero return has no Sharpe ratio; all zeros (never traded) has 0.
    let mut constant = m.clone();
    constant[1] = vec![0.001; 64];
    let e = cscv(&constant, 4).unwrap_err();
    assert!(
        matches!(
            e,
            PboError::NoVariance {
                strategy: 1,
                combination: 0,
                half: "in-sample",
                ..
            }
        ),
        "{e:?}"
    );
    let mut idle = m;
    idle[1] = vec![0.0; 64];
    assert!(cscv(&idle, 4).is_ok());
}

#[test]
fn the_logit_histogram_counts_every_combination_and_splits_at_zero() {
    let r = cscv(&noise(20, 256, 3), 8).unwrap();
    let h = r.histogram(12);
    assert_eq!(h.iter().map(|b| b.count).sum::<usize>(), r.combinations);
    let overfit: usize = h.iter().filter(|b| b.upper <= 0.0).map(|b| b.count).sum();
    assert_eq!(overfit as f64 / r.combinations as f64, r.pbo);
    assert_eq!(r.selection_counts().iter().sum::<usize>(), r.combinations);
    assert_eq!(pbo::DEFAULT_PARTITIONS, 16);
}

// ---------------------------------------------------------------------------------------------
// The normal distribution
// ---------------------------------------------------------------------------------------------

/// Φ⁻¹ against `scipy.stats.norm.ppf` (SciPy 1.17.1, which uses Cephes' `ndtri`).
#[test]
fn normal_quantile_agrees_with_scipy() {
    let table: [(f64, f64); 18] = [
        (1e-300, -37.0470962993612),
        (1e-20, -9.262340089798409),
        (1e-10, -6.361340902404056),
        (1e-5, -4.264890793922825),
        (0.001, -3.090232306167813),
        (0.01, -2.3263478740408408),
        (0.02425, -1.972961051311885),
        (0.025, -1.9599639845400545),
        (0.1, -1.2815515655446004),
        (0.3, -0.5244005127080409),
        (0.5, 0.0),
        (0.7, 0.5244005127080407),
        (0.9, 1.2815515655446004),
        (0.975, 1.959963984540054),
        (0.97575, 1.972961051311885),
        (0.99, 2.3263478740408408),
        (0.999, 3.090232306167813),
        (0.9999999999, 6.361340889697422),
    ];
    for (p, want) in table {
        let got = normal_inv_cdf(p);
        assert!(
            (got - want).abs() <= 1e-12 * want.abs().max(1.0),
            "Φ⁻¹({p}) = {got}, scipy {want}, off by {:e}",
            got - want
        );
    }
    assert_eq!(normal_inv_cdf(0.0), f64::NEG_INFINITY);
    assert_eq!(normal_inv_cdf(1.0), f64::INFINITY);
    assert!(normal_inv_cdf(1.5).is_nan() && normal_inv_cdf(f64::NAN).is_nan());
}

/// Φ against `scipy.stats.norm.cdf`, relative in the lower tail.
#[test]
fn normal_cdf_agrees_with_scipy() {
    let table: [(f64, f64); 13] = [
        (-10.0, 7.61985302416047e-24),
        (-5.0, 2.866515718791933e-07),
        (-3.0, 0.0013498980316300933),
        (-1.96, 0.024997895148220435),
        (-1.0, 0.15865525393145707),
        (0.0, 0.5),
        (0.5, 0.6914624612740131),
        (1.0, 0.8413447460685429),
        (1.2838160365336546, 0.9003968344493903),
        (2.0, 0.9772498680518208),
        (3.0, 0.9986501019683699),
        (5.0, 0.9999997133484281),
        (8.0, 0.9999999999999993),
    ];
    for (x, want) in table {
        let got = normal_cdf(x);
        assert!(
            (got - want).abs() <= 1e-13 * want,
            "Φ({x}) = {got}, scipy {want}"
        );
    }
    // Round trips.
    for p in [1e-12, 0.003, 0.2, 0.5, 0.8, 0.997] {
        assert!((normal_cdf(normal_inv_cdf(p)) - p).abs() <= 1e-14 * p.max(1e-3));
    }
}

// ---------------------------------------------------------------------------------------------
// DSR
// ---------------------------------------------------------------------------------------------

/// The numerical example of Bailey and López de Prado (2014), "The Deflated Sharpe Ratio": the
/// best of N = 100 trials shows an annualised SR of 2.5 over five years of daily returns
/// (T = 1,250, 250 a year); the trials' annualised Sharpe ratios have variance V = 1/2; the
/// returns have skewness −3 and kurtosis 10. In per-period units SR = 2.5/√250 ≈ 0.1581 and
/// V = 0.5/250, so E[max SR] ≈ 0.1132 (≈ 1.79 annualised) and DSR ≈ 0.9004, the two figures the
/// paper reports. (The inputs and figures are as the example is quoted; the paper's own text was
/// not at hand to check word for word. The formulas reproduce both figures to four digits; the
/// values to more digits are SciPy 1.17.1's `norm.ppf`/`norm.cdf` on the same formulas.)
#[test]
fn dsr_reproduces_the_papers_numerical_example() {
    let sr0 = expected_max_sharpe(100, 0.5 / 250.0).unwrap();
    assert!(close(sr0, 0.11317200186513214, 1e-12), "SR₀ {sr0}");
    assert!(close(sr0, 0.1132, 5e-5));
    let estimate = SharpeEstimate {
        sharpe: 2.5 / 250f64.sqrt(),
        periods: 1250,
        skewness: -3.0,
        kurtosis: 10.0,
    };
    let d = deflated_sharpe_ratio(&estimate, 100, 0.5 / 250.0).unwrap();
    assert!(close(d.dsr, 0.9003968344493903, 1e-12), "DSR {}", d.dsr);
    assert!(close(d.dsr, 0.9004, 5e-5));
    assert_eq!(d.expected_max_sharpe, sr0);
    // The same through the method, and PSR(SR₀) is the DSR by definition.
    assert_eq!(estimate.deflate(100, 0.5 / 250.0).unwrap(), d);
    assert_eq!(estimate.psr(sr0).unwrap(), d.dsr);
    // Without selection the same track record is near-certain to be positive.
    assert!(d.psr > 0.99 && d.psr > d.dsr, "{d:?}");
}

/// More trials raise the bar: DSR falls strictly as N grows, everything else equal.
#[test]
fn dsr_decreases_with_the_number_of_trials() {
    let estimate = SharpeEstimate {
        sharpe: 0.08,
        periods: 1000,
        skewness: -0.5,
        kurtosis: 5.0,
    };
    let v = 0.5 / 250.0;
    let mut previous = f64::INFINITY;
    let mut previous_sr0 = f64::NEG_INFINITY;
    for n in (2..=50).chain([100, 200, 500, 1_000, 10_000, 100_000]) {
        let d = estimate.deflate(n, v).unwrap();
        assert!(
            d.dsr < previous,
            "DSR({n}) = {} ≥ DSR before {previous}",
            d.dsr
        );
        assert!(d.expected_max_sharpe > previous_sr0);
        previous = d.dsr;
        previous_sr0 = d.expected_max_sharpe;
    }
    assert!(
        previous < 0.01,
        "the best of 100,000 trials is not significant: {previous}"
    );
}

#[test]
fn psr_and_moments_from_returns() {
    // scipy: mean/std(ddof=1), skew(r), kurtosis(r, fisher=False).
    let r = [0.01, -0.02, 0.03, 0.005, -0.01, 0.04, -0.03, 0.0];
    let e = SharpeEstimate::from_returns(&r).unwrap();
    assert!(close(e.sharpe, 0.13160498971352877, 1e-14), "{e:?}");
    assert!(close(e.skewness, 0.21534845731593383, 1e-13), "{e:?}");
    assert!(close(e.kurtosis, 1.9990540187277965, 1e-13), "{e:?}");
    assert_eq!(e.periods, 8);
    // PSR at its own Sharpe ratio is a coin toss; normal returns give the textbook z.
    assert!(close(e.psr(e.sharpe).unwrap(), 0.5, 1e-15));
    let normal = SharpeEstimate {
        sharpe: 0.1,
        periods: 101,
        skewness: 0.0,
        kurtosis: 3.0,
    };
    let z = 0.1 * 10.0 / (1.0f64 + 0.5 * 0.01).sqrt();
    assert!(close(
        probabilistic_sharpe_ratio(&normal, 0.0).unwrap(),
        normal_cdf(z),
        1e-15
    ));

    assert_eq!(
        SharpeEstimate::from_returns(&[0.01]).unwrap_err(),
        DsrError::TooFewPeriods { periods: 1 }
    );
    assert!(matches!(
        SharpeEstimate::from_returns(&[0.01, f64::INFINITY]).unwrap_err(),
        DsrError::NonFinite { index: 1, .. }
    ));
    assert!(matches!(
        SharpeEstimate::from_returns(&[0.01; 5]).unwrap_err(),
        DsrError::NoVariance { .. }
    ));
    assert_eq!(
        expected_max_sharpe(1, 0.1).unwrap_err(),
        DsrError::TooFewTrials { trials: 1 }
    );
    assert!(matches!(
        expected_max_sharpe(10, -0.1).unwrap_err(),
        DsrError::Input { .. }
    ));
    // Kurtosis given as excess (−1 is impossible for a raw kurtosis ≥ 1) can make the variance
    // term negative: named, not a NaN.
    let bad = SharpeEstimate {
        sharpe: 3.0,
        periods: 100,
        skewness: 1.0,
        kurtosis: -1.0,
    };
    assert!(matches!(
        bad.psr(0.0).unwrap_err(),
        DsrError::Moments { .. }
    ));
}

/// The best of several trials' series: N is the number of series and V the sample variance of
/// their Sharpe ratios; the selected series is the one with the highest.
#[test]
fn deflating_the_best_of_trials_uses_all_of_them() {
    let mut m = noise(10, 500, 11);
    m[4] = vec![0.0; 500]; // a trial that never traded: Sharpe 0
    let b = deflate_best(&m, None).unwrap();
    let sharpes: Vec<f64> = m
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i == 4 {
                0.0
            } else {
                SharpeEstimate::from_returns(c).unwrap().sharpe
            }
        })
        .collect();
    assert_eq!(b.sharpes, sharpes);
    let best = (0..10).fold(0, |b, j| if sharpes[j] > sharpes[b] { j } else { b });
    assert_eq!(b.selected, best);
    let mean = sharpes.iter().sum::<f64>() / 10.0;
    let v = sharpes.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / 9.0;
    let want = SharpeEstimate::from_returns(&m[best])
        .unwrap()
        .deflate(10, v)
        .unwrap();
    assert_eq!(b.deflated, want);
    assert_eq!(b.deflated.trials, 10);
    // Choosing a column keeps N and V.
    let chosen = deflate_best(&m, Some(2)).unwrap();
    assert_eq!(chosen.selected, 2);
    assert_eq!(chosen.deflated.sharpe_variance, v);
    assert!(matches!(
        deflate_best(&m, Some(10)).unwrap_err(),
        dsr::DsrTrialError::Selected {
            selected: 10,
            trials: 10
        }
    ));
    // The trial that never traded, chosen, has no track record to deflate: said as such,
    // not as returns that do not vary.
    assert_eq!(
        deflate_best(&m, Some(4)).unwrap_err(),
        dsr::DsrTrialError::NeverTraded { trial: 4 }
    );
    // Noise: the best of 10 is not significant once deflated.
    assert!(b.deflated.dsr < b.deflated.psr);
}
