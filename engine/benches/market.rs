//! Criterion benchmark of market-data loading: reading a long CSV (plain and gzip) of
//! 10 assets × 20,000 five-minute bars, and preparing the dataset (alignment, the 18 default
//! feature columns, split, scaling). Throughput is in bars (elements = assets × bars).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tradetune_engine::market::DatasetConfig;
use tradetune_engine::market::read::{SourcedBars, merge_files, read_file};
use tradetune_engine::market::synth::{self, SynthConfig};

const ASSETS: usize = 10;
const BARS: usize = 20_000;

fn market(c: &mut Criterion) {
    let cfg = SynthConfig {
        assets: ASSETS,
        bars: BARS,
        ..SynthConfig::default()
    };
    let bars = synth::generate(&cfg).expect("synthetic data");
    let dir = std::env::temp_dir().join(format!("tradetune-bench-market-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let plain = dir.join("market.csv");
    let gz = dir.join("market.csv.gz");
    synth::write_long_csv(&plain, &bars).expect("write csv");
    synth::write_long_csv(&gz, &bars).expect("write csv.gz");

    let mut group = c.benchmark_group(format!("market_{ASSETS}x{BARS}_5m"));
    group.sample_size(10);
    group.throughput(Throughput::Elements((ASSETS * BARS) as u64));
    group.bench_function("generate", |b| {
        b.iter(|| synth::generate(black_box(&cfg)).expect("generate"))
    });
    group.bench_function("read_long_csv", |b| {
        b.iter(|| read_file(black_box(&plain)).expect("read"))
    });
    group.bench_function("read_long_csv_gz", |b| {
        b.iter(|| read_file(black_box(&gz)).expect("read"))
    });
    let sourced: Vec<SourcedBars> =
        merge_files(vec![read_file(&plain).expect("read")]).expect("merge");
    let config = DatasetConfig::default();
    group.bench_function("build_dataset_18_features", |b| {
        b.iter(|| {
            config
                .build(black_box(sourced.clone()), "bench".into(), &[])
                .expect("build")
        })
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, market);
criterion_main!(benches);
