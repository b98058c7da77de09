//! `tradetune eval`: how much to trust the best of N trials, on any matrix of per-period
//! returns (a CSV file: a header row of strategy names, then one row per period, one column per
//! strategy or trial).
//!
//! - `tradetune eval pbo --returns FILE.csv [--partitions S] [--bins B] [--json]`: the
//!   probability of backtest overfitting by CSCV (`tradetune_engine::eval::pbo`), the histogram
//!   of its logits, the performance degradation and the probability of loss.
//! - `tradetune eval dsr --returns FILE.csv [--column NAME] [--trials N] [--sr-variance V]
//!   [--periods-per-year P] [--json]`: the probabilistic and the deflated Sharpe ratio
//!   (`tradetune_engine::eval::dsr`) of the best column (or the one named), N and V[SR] taken
//!   from all the columns unless given.
//!
//! Every Sharpe ratio is per period (mean / sample standard deviation of the returns, no
//! risk-free rate); `--periods-per-year` only adds annualised figures to the text.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde::Serialize;
use tradetune_engine::eval::dsr::{
    Deflated, DsrError, DsrTrialError, SharpeEstimate, deflate_best, deflated_sharpe_ratio,
};
use tradetune_engine::eval::pbo::{self, Degradation, HistogramBin, PboError};

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Probability of backtest overfitting (CSCV) of a T×N returns matrix.
    Pbo(PboArgs),
    /// Deflated Sharpe ratio of the best of N trials' returns.
    Dsr(DsrArgs),
}

#[derive(Debug, Args)]
pub struct PboArgs {
    /// CSV of per-period returns: a header row of names, one column per strategy.
    #[arg(long, value_name = "FILE")]
    pub returns: PathBuf,
    /// S, the number of blocks the periods are cut into (even; C(S, S/2) combinations).
    #[arg(long, value_name = "S", default_value_t = pbo::DEFAULT_PARTITIONS)]
    pub partitions: usize,
    /// About how many bins the logit histogram has.
    #[arg(long, value_name = "B", default_value_t = 20)]
    pub bins: usize,
    /// Print JSON (every combination's logit and Sharpe ratios included) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DsrArgs {
    /// CSV of per-period returns: a header row of names, one column per trial.
    #[arg(long, value_name = "FILE")]
    pub returns: PathBuf,
    /// The column to deflate (default: the one with the highest Sharpe ratio).
    #[arg(long, value_name = "NAME")]
    pub column: Option<String>,
    /// N, the number of trials (default: the number of columns). Give it when more were tried
    /// than the file holds.
    #[arg(long, value_name = "N")]
    pub trials: Option<usize>,
    /// V[SR], the variance of the trials' per-period Sharpe ratios (default: the sample
    /// variance over the columns).
    #[arg(long, value_name = "V")]
    pub sr_variance: Option<f64>,
    /// Periods per year, to also show annualised Sharpe ratios (252 for daily equities).
    #[arg(long, value_name = "P")]
    pub periods_per_year: Option<f64>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: EvalCommand) -> anyhow::Result<()> {
    match command {
        EvalCommand::Pbo(a) => run_pbo(a),
        EvalCommand::Dsr(a) => run_dsr(a),
    }
}

/// A returns matrix read from CSV, by column.
#[derive(Debug)]
pub struct ReturnsCsv {
    pub names: Vec<String>,
    pub columns: Vec<Vec<f64>>,
}

/// Reads `path`: a header row of names, then rows of finite numbers, as many as names. Errors
/// name the file, and the line and column (both from 1) of a bad cell.
pub fn read_returns(path: &Path) -> anyhow::Result<ReturnsCsv> {
    let file = path.display();
    let bytes = std::fs::read(path).with_context(|| format!("cannot read returns file {file}"))?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(bytes.as_slice());
    let mut records = reader.records();
    let header = match records.next() {
        None => bail!(
            "{file}: empty; expected a header row of strategy names, then one row of returns per period"
        ),
        Some(r) => r.with_context(|| format!("{file}: reading the header row"))?,
    };
    let mut names: Vec<String> = Vec::with_capacity(header.len());
    for (i, name) in header.iter().enumerate() {
        if let Some(first) = names.iter().position(|n| n == name) {
            bail!(
                "{file} line 1: column {} repeats the name \"{name}\" of column {}; every strategy needs its own name",
                i + 1,
                first + 1
            );
        }
        names.push(name.to_owned());
    }
    let mut columns: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for record in records {
        let record = record.with_context(|| format!("{file}: reading a row"))?;
        let line = record.position().map_or(0, |p| p.line());
        if record.len() != names.len() {
            bail!(
                "{file} line {line}: {} field(s), but the header names {} column(s)",
                record.len(),
                names.len()
            );
        }
        for (c, field) in record.iter().enumerate() {
            let at = || format!("{file} line {line} column {} (\"{}\")", c + 1, names[c]);
            if field.is_empty() {
                bail!("{}: empty cell; every cell must be a return", at());
            }
            let v: f64 = field
                .parse()
                .map_err(|_| anyhow::anyhow!("{}: \"{field}\" is not a number", at()))?;
            if !v.is_finite() {
                bail!("{}: {field} is not a finite return", at());
            }
            columns[c].push(v);
        }
    }
    if columns.first().is_none_or(|c| c.is_empty()) {
        bail!("{file}: a header row but no returns below it");
    }
    Ok(ReturnsCsv { names, columns })
}

/// `--json` of `eval pbo`.
#[derive(Debug, Serialize)]
struct PboJson<'a> {
    file: &'a Path,
    names: &'a [String],
    periods: usize,
    strategies: usize,
    partitions: usize,
    partition_len: usize,
    periods_dropped: usize,
    combinations: usize,
    pbo: f64,
    probability_of_loss: f64,
    degradation: Degradation,
    histogram: Vec<HistogramBin>,
    /// Per strategy, how many combinations chose it in sample.
    selection_counts: Vec<(&'a str, usize)>,
    logits: &'a [f64],
    /// The in-sample best of each combination, by name.
    selected: Vec<&'a str>,
    in_sample_sharpe: &'a [f64],
    out_of_sample_sharpe: &'a [f64],
}

fn run_pbo(args: PboArgs) -> anyhow::Result<()> {
    // Before the combinations are computed: a huge one asked for terabytes.
    anyhow::ensure!(
        (1..=1000).contains(&args.bins),
        "--bins: 1 to 1000, got {}",
        args.bins
    );
    let file = args.returns.display();
    let m = read_returns(&args.returns)?;
    if m.names.len() < 2 {
        bail!(
            "{file}: {} column (\"{}\"); PBO compares strategies and needs at least 2 columns, one per strategy",
            m.names.len(),
            m.names.join("\", \"")
        );
    }
    let r = pbo::cscv(&m.columns, args.partitions).map_err(|e| match e {
        PboError::NoVariance {
            strategy,
            combination,
            half,
            value,
        } => anyhow::anyhow!(
            "{file}: column {} (\"{}\") returns the same {value} in every period of the {half} half of combination {combination}: its Sharpe ratio is undefined; remove the column or use fewer partitions",
            strategy + 1,
            m.names[strategy]
        ),
        e => anyhow::anyhow!("{file}: {e}"),
    })?;
    let histogram = r.histogram(args.bins);
    let counts = r.selection_counts();
    if args.json {
        let json = PboJson {
            file: &args.returns,
            names: &m.names,
            periods: m.columns[0].len(),
            strategies: r.strategies,
            partitions: r.partitions,
            partition_len: r.partition_len,
            periods_dropped: r.periods_dropped,
            combinations: r.combinations,
            pbo: r.pbo,
            probability_of_loss: r.probability_of_loss,
            degradation: r.degradation,
            histogram,
            selection_counts: m
                .names
                .iter()
                .map(String::as_str)
                .zip(counts.iter().copied())
                .collect(),
            logits: &r.logits,
            selected: r.selected.iter().map(|&s| m.names[s].as_str()).collect(),
            in_sample_sharpe: &r.in_sample_sharpe,
            out_of_sample_sharpe: &r.out_of_sample_sharpe,
        };
        outln!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }

    let overfit = r.logits.iter().filter(|&&l| l <= 0.0).count();
    outln!("PBO by CSCV of {file}");
    outln!(
        "  {} periods × {} strategies; S = {} partitions of {} periods; {} combinations",
        m.columns[0].len(),
        r.strategies,
        r.partitions,
        r.partition_len,
        r.combinations
    );
    if r.periods_dropped > 0 {
        outln!(
            "  (the first {} period(s) left out so that the partitions are equal)",
            r.periods_dropped
        );
    }
    outln!();
    outln!(
        "Probability of backtest overfitting: {:.4}  ({overfit} of {} combinations: the in-sample best ranked at or below the out-of-sample median)",
        r.pbo,
        r.combinations
    );
    outln!();
    outln!(
        "Logits λ = ln(ω/(1 − ω)) of the in-sample best's out-of-sample relative rank ω (λ ≤ 0: overfit):"
    );
    out!("{}", histogram_text(&histogram));
    outln!();
    outln!("Performance degradation (per-period Sharpe ratio of the in-sample best):");
    let d = r.degradation;
    match (d.slope, d.intercept) {
        (Some(b), Some(a)) => outln!(
            "  out-of-sample = {a:.4} {} {:.4} × in-sample{}",
            if b < 0.0 { '−' } else { '+' },
            b.abs(),
            d.r_squared
                .map_or(String::new(), |r2| format!("   (R² {r2:.3})"))
        ),
        _ => outln!("  no line: the in-sample Sharpe ratios do not vary"),
    }
    outln!(
        "  mean in-sample {:.4}, mean out-of-sample {:.4}",
        d.mean_in_sample,
        d.mean_out_of_sample
    );
    outln!(
        "Probability of loss (out-of-sample Sharpe ratio < 0): {:.4}",
        r.probability_of_loss
    );
    let mut often: Vec<(usize, usize)> = counts.iter().copied().enumerate().collect();
    often.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let top: Vec<String> = often
        .iter()
        .take(5)
        .filter(|(_, c)| *c > 0)
        .map(|(s, c)| format!("{} ({c})", m.names[*s]))
        .collect();
    outln!("In-sample best most often: {}", top.join(", "));
    Ok(())
}

/// The histogram as text, one bin a line with a bar of up to 40 characters.
fn histogram_text(bins: &[HistogramBin]) -> String {
    let max = bins.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let mut out = String::new();
    for b in bins {
        let bar = "█".repeat((b.count * 40).div_ceil(max));
        out.push_str(&format!(
            "  ({:>7.3}, {:>7.3}]  {:>7}  {bar}\n",
            b.lower, b.upper, b.count
        ));
    }
    out
}

/// `--json` of `eval dsr`.
#[derive(Debug, Serialize)]
struct DsrJson<'a> {
    file: &'a Path,
    column: &'a str,
    /// How the column was chosen: "best" or "given".
    chosen: &'static str,
    /// Where N and V came from: "columns" or "given".
    trials_from: &'static str,
    sr_variance_from: &'static str,
    #[serde(flatten)]
    deflated: Deflated,
    /// Every column's per-period Sharpe ratio (when the file has several).
    sharpes: Vec<(&'a str, f64)>,
    periods_per_year: Option<f64>,
}

fn run_dsr(args: DsrArgs) -> anyhow::Result<()> {
    if let Some(p) = args.periods_per_year {
        anyhow::ensure!(
            p.is_finite() && p > 0.0,
            "--periods-per-year: must be a positive number of periods (252 for daily equities), \
             got {p}"
        );
    }
    let file = args.returns.display();
    let m = read_returns(&args.returns)?;
    let column = match &args.column {
        None => None,
        Some(name) => Some(m.names.iter().position(|n| n == name).with_context(|| {
            format!(
                "{file}: no column named \"{name}\"; the columns are \"{}\"",
                m.names.join("\", \"")
            )
        })?),
    };
    let name_error = |e: DsrError, c: usize| -> anyhow::Error {
        anyhow::anyhow!("{file}: column {} (\"{}\"): {e}", c + 1, m.names[c])
    };
    // With several columns, N, V and the best come from them; a single column needs N and V.
    let (selected, defaults, sharpes) = if m.names.len() >= 2 {
        let best = deflate_best(&m.columns, column).map_err(|e| match e {
            DsrTrialError::Trial { trial, source } => name_error(source, trial),
            DsrTrialError::NeverTraded { trial } => anyhow::anyhow!(
                "{file}: column {} (\"{}\") never traded (its returns are all 0): its Sharpe ratio is 0, with no track record to deflate",
                trial + 1,
                m.names[trial]
            ),
            e => anyhow::anyhow!("{file}: {e}"),
        })?;
        (
            best.selected,
            Some((best.deflated.trials, best.deflated.sharpe_variance)),
            best.sharpes,
        )
    } else {
        (0, None, Vec::new())
    };
    // N below the file's columns deflates their best as if fewer had been tried: right for an
    // effective number of independent trials (correlated trials clustered, as López de Prado
    // suggests), an understated selection otherwise. Said, not refused.
    if let Some(n) = args.trials
        && n < m.names.len()
    {
        errln!(
            "note: --trials {n} is below the {} trials' returns in {file}: right for an effective \
             number of independent trials (correlated ones clustered); if {n} were simply tried, \
             N counts every trial tried and the deflated Sharpe ratio below is too high",
            m.names.len()
        );
    }
    let (trials, variance) = match (args.trials, args.sr_variance, defaults) {
        (Some(n), Some(v), _) => (n, v),
        (n, v, Some((dn, dv))) => (n.unwrap_or(dn), v.unwrap_or(dv)),
        _ => bail!(
            "{file} has one column: give --trials N and --sr-variance V (the variance of the per-period Sharpe ratios of all the trials tried), or one column per trial"
        ),
    };
    let estimate =
        SharpeEstimate::from_returns(&m.columns[selected]).map_err(|e| name_error(e, selected))?;
    let d = deflated_sharpe_ratio(&estimate, trials, variance)
        .map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let name = m.names[selected].as_str();
    let chosen = if column.is_some() { "given" } else { "best" };
    let trials_from = if args.trials.is_some() {
        "given"
    } else {
        "columns"
    };
    let sr_variance_from = if args.sr_variance.is_some() {
        "given"
    } else {
        "columns"
    };
    if args.json {
        let json = DsrJson {
            file: &args.returns,
            column: name,
            chosen,
            trials_from,
            sr_variance_from,
            deflated: d,
            sharpes: m
                .names
                .iter()
                .map(String::as_str)
                .zip(sharpes.iter().copied())
                .collect(),
            periods_per_year: args.periods_per_year,
        };
        outln!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    let annual = |sr: f64| match args.periods_per_year {
        Some(p) if p > 0.0 => format!(" ({:.3} annualised)", sr * p.sqrt()),
        _ => String::new(),
    };
    let how = match chosen {
        "best" => format!("the highest Sharpe ratio of the {} columns", m.names.len()),
        _ => "given".to_owned(),
    };
    outln!("Deflated Sharpe ratio of {file}, column \"{name}\" ({how})");
    outln!(
        "  Sharpe ratio {:.5} per period{} over T = {} periods; skewness {:.3}, kurtosis {:.3}",
        estimate.sharpe,
        annual(estimate.sharpe),
        estimate.periods,
        estimate.skewness,
        estimate.kurtosis
    );
    outln!(
        "  Trials N = {trials} ({}); variance of their per-period Sharpe ratios V = {variance:.6} ({})",
        if trials_from == "given" {
            "given"
        } else {
            "the columns"
        },
        if sr_variance_from == "given" {
            "given"
        } else {
            "over the columns"
        }
    );
    outln!(
        "  Expected maximum Sharpe ratio of {trials} worthless trials: {:.5} per period{}",
        d.expected_max_sharpe,
        annual(d.expected_max_sharpe)
    );
    outln!();
    outln!(
        "Probabilistic Sharpe ratio PSR(0): {:.4}  (probability that the true Sharpe ratio is above 0)",
        d.psr
    );
    outln!(
        "Deflated Sharpe ratio DSR:         {:.4}  (the same, after picking the best of {trials} trials)",
        d.dsr
    );
    Ok(())
}
