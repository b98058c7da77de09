//! Sampler benchmark: first the quality table (median best value over 10 seeds after 100
//! trials on Branin, Hartmann-6, Rosenbrock-5 and a mixed space, TPE vs random), then
//! criterion's timing of one `sample` call with a history of 100 and 1,000 trials.
//! Compare with `python engine/benches/optuna_sampler_reference.py` (Optuna's TPE).

use std::hint::black_box;

use criterion::{Criterion, criterion_group};
use tradetune_engine::study::bench::{
    BenchFunction, SamplerBenchConfig, SamplerKind, run_sampler_bench, run_study,
};
use tradetune_engine::study::{Direction, SampleContext};

fn suggest(c: &mut Criterion) {
    let mut group = c.benchmark_group("sample_one_trial");
    for function in [BenchFunction::Hartmann6, BenchFunction::Mixed] {
        for kind in [
            SamplerKind::Tpe,
            SamplerKind::TpeUnivariate,
            SamplerKind::Random,
        ] {
            let sampler = kind.build(0).expect("valid sampler");
            for n in [100usize, 1000] {
                // A real history: the trials this sampler itself proposed.
                let run = run_study(sampler.as_ref(), function, n).expect("study");
                let space = function.space();
                let history = run.history;
                let ctx = SampleContext::new(&space, &history, Direction::Minimize, n as u64);
                group.bench_function(
                    format!("{}/{:?}/history={n}", function.name(), kind).to_lowercase(),
                    |b| b.iter(|| black_box(sampler.sample(black_box(&ctx)).expect("sample"))),
                );
            }
        }
    }
    group.finish();
}

criterion_group!(benches, suggest);

fn main() {
    let cfg = SamplerBenchConfig {
        overhead_trials: 1000,
        ..SamplerBenchConfig::default()
    };
    match run_sampler_bench(&cfg) {
        Ok(report) => println!("{}", report.to_table()),
        Err(e) => eprintln!("sampler benchmark failed: {e}"),
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
