//! `tradetune bench matmul`: every matmul routine burn's autotune chooses among, and the
//! autotuned choice itself, on each product an update of the named configurations runs, in
//! the layouts it runs them: which routine the device's autotune picks, what each reaches, and
//! what one minibatch's products cost at autotune's rates against the best routines' (issue 33:
//! "investigate cubecl's matmul choice on Vulkan").

use tradetune_engine::device::precision::Precision;
use tradetune_engine::device::{DeviceSpec, describe_spec, open};
use tradetune_engine::ppo::bench::TrainBenchConfig;
use tradetune_engine::ppo::bench::matmul::{
    CaseSweep, MatmulCase, MatmulFeatures, matmul_features, routine_names, sweep,
};

use super::MatmulArgs;

/// `12.3` or `-`.
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn print_features(spec: DeviceSpec, f: &MatmulFeatures) {
    let list = |l: &[String]| {
        if l.is_empty() {
            "none".to_string()
        } else {
            l.join(", ")
        }
    };
    outln!("device: {spec} ({})", describe_spec(spec));
    outln!(
        "runtime {}; planes of {}–{} units, plane operations {}; {} units per cube, {} KiB shared \
         memory; cooperative matrices (cmma): {}; manual mma: {}",
        f.runtime,
        f.plane_size_min,
        f.plane_size_max,
        if f.plane_ops { "yes" } else { "no" },
        f.max_units_per_cube,
        f.max_shared_memory_bytes / 1024,
        list(&f.cmma),
        list(&f.mma),
    );
}

fn print_sweep(config: &str, s: &CaseSweep) {
    let c = &s.case;
    let best = s.best();
    outln!(
        "\n{} {config} {} {} (×{} a minibatch): autotune {} GFLOP/s, first call {} s; best routine {}{}",
        s.precision,
        c.role,
        c.label(),
        c.per_minibatch,
        opt(s.autotune.gflops, 1),
        opt(s.autotune.first_s, 2),
        best.map_or("none".into(), |b| format!(
            "{} {} GFLOP/s",
            b.name,
            opt(b.gflops, 1)
        )),
        match (best.and_then(|b| b.gflops), s.autotune.gflops) {
            (Some(b), Some(a)) => format!(" (autotune at {:.0} % of it)", 100.0 * a / b),
            _ => String::new(),
        }
    );
    outln!(
        "  {:<66} {:>9} {:>9} {:>8} {:>9}  note",
        "routine",
        "GFLOP/s",
        "ms",
        "first s",
        "rel err"
    );
    for r in &s.routines {
        outln!(
            "  {:<66} {:>9} {:>9} {:>8} {:>9}  {}",
            r.name,
            opt(r.gflops, 1),
            opt(r.ms, 3),
            opt(r.first_s, 2),
            r.rel_err.map_or("-".into(), |e| format!("{e:.1e}")),
            r.error
                .as_deref()
                .map(|e| e.lines().next().unwrap_or(e))
                .unwrap_or("")
        );
    }
}

/// Milliseconds one minibatch spends in `sweeps`' products at autotune's rates and at the best
/// routines' (where a product has no routine that ran, autotune's).
fn minibatch_ms(sweeps: &[&CaseSweep]) -> (f64, f64) {
    let mut at_autotune = 0.0;
    let mut at_best = 0.0;
    for s in sweeps {
        let n = s.case.per_minibatch as f64;
        let auto = s.autotune.ms.unwrap_or(0.0);
        at_autotune += n * auto;
        at_best += n * s.best().and_then(|b| b.ms).unwrap_or(auto).min(auto);
    }
    (at_autotune, at_best)
}

pub(super) fn bench_matmul(args: MatmulArgs) -> anyhow::Result<()> {
    if args.list {
        for name in routine_names() {
            outln!("{name}");
        }
        return Ok(());
    }
    let spec: DeviceSpec = args.device.parse()?;
    anyhow::ensure!(
        spec.is_wgpu(),
        "--device {spec}: the matmul routines are measured on a wgpu device (the CPU's products \
         are in `bench train`'s probe)"
    );
    let known = routine_names();
    if let Some(unknown) = args.routines.iter().find(|r| !known.contains(r)) {
        anyhow::bail!(
            "--routines: unknown routine '{unknown}' (`tradetune bench matmul --list` lists them)"
        );
    }
    let configs = TrainBenchConfig::all_named(&args.configs)
        .map_err(|e| anyhow::anyhow!("--configs: {e}"))?;
    let precisions = super::gpu::device_precisions(spec, &args.precisions)?.kept;
    let device = open(spec)?;
    let features = matmul_features(&device)?;
    if !args.json {
        print_features(spec, &features);
    }
    let mut out = Vec::new();
    let mut done: Vec<(MatmulCase, Precision)> = Vec::new();
    for cfg in &configs {
        for &precision in &precisions {
            let cases = cfg.update_matmuls();
            // A product another configuration already measured in this precision is not
            // measured again; its figures count towards this configuration's minibatch too.
            let fresh: Vec<MatmulCase> = cases
                .iter()
                .filter(|c| {
                    !done
                        .iter()
                        .any(|(d, p)| d.same_product(c) && *p == precision)
                })
                .copied()
                .collect();
            let total = fresh.len();
            let mut at = 0;
            let sweeps = sweep(
                &device,
                &fresh,
                precision,
                &args.routines,
                &mut |c: &MatmulCase| {
                    at += 1;
                    errln!("[{at}/{total}] {} {} {}", cfg.name, precision, c.label());
                },
            )?;
            done.extend(fresh.iter().map(|c| (*c, precision)));
            if !args.json {
                for s in &sweeps {
                    print_sweep(cfg.name, s);
                }
            }
            out.push((cfg.name, precision, cases, sweeps));
        }
    }
    // One minibatch's products per configuration, with every product's figures wherever in
    // the run it was measured.
    let all: Vec<&CaseSweep> = out.iter().flat_map(|o| o.3.iter()).collect();
    let mut summaries = Vec::new();
    for (name, precision, cases, _) in &out {
        let mine: Vec<CaseSweep> = cases
            .iter()
            .filter_map(|c| {
                all.iter()
                    .find(|s| s.case.same_product(c) && s.precision == precision.name())
                    .map(|s| CaseSweep {
                        case: *c,
                        ..(*s).clone()
                    })
            })
            .collect();
        let refs: Vec<&CaseSweep> = mine.iter().collect();
        let (auto_ms, best_ms) = minibatch_ms(&refs);
        let flops: f64 = cases
            .iter()
            .map(|c| c.flops() * c.per_minibatch as f64)
            .sum();
        let near = mine
            .iter()
            .filter(
                |s| match (s.best().and_then(|b| b.gflops), s.autotune.gflops) {
                    (Some(b), Some(a)) => a >= 0.9 * b,
                    _ => true,
                },
            )
            .count();
        if !args.json {
            outln!(
                "\n{name} {precision}: one minibatch's {} products ({:.3} GFLOP) take {auto_ms:.3} ms at \
                 autotune's rates ({:.0} GFLOP/s) and {best_ms:.3} ms at the best routines' ({:.0} \
                 GFLOP/s); autotune within 10 % of the best routine on {near} of {} products",
                cases.iter().map(|c| c.per_minibatch).sum::<usize>(),
                flops / 1e9,
                flops / 1e6 / auto_ms.max(1e-12),
                flops / 1e6 / best_ms.max(1e-12),
                mine.len()
            );
        }
        summaries.push(serde_json::json!({
            "config": name,
            "precision": precision.name(),
            "products": cases,
            "minibatch_gflop": flops / 1e9,
            "minibatch_ms_at_autotune": auto_ms,
            "minibatch_ms_at_best": best_ms,
            "autotune_within_10pct": near,
        }));
    }
    if args.json {
        let sweeps: Vec<&CaseSweep> = out.iter().flat_map(|o| o.3.iter()).collect();
        let json = serde_json::json!({
            "device": spec.to_string(),
            "adapter": describe_spec(spec),
            "features": features,
            "sweeps": sweeps,
            "minibatches": summaries,
        });
        outln!("{}", serde_json::to_string_pretty(&json)?);
    } else if cfg!(debug_assertions) {
        errln!(
            "note: this is a debug build; the routines' rates are the device's either way, but \
             measure on a release build for figures to quote"
        );
    }
    Ok(())
}
