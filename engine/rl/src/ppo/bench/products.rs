//! The matrix products an update runs, and what a device offers the routines that compute
//! them: the plain types [`super::matmul`]'s sweep and [`super::routines`]' launches share.

use serde::Serialize;

use super::TrainBenchConfig;

/// One matrix product an update runs: `[m, k] · [k, n]`, either side possibly a transposed
/// view of a row-major tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MatmulCase {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// The left side is the transpose of a row-major `[k, m]` tensor (xᵀ in ∂W = xᵀ·∂y).
    pub lhs_transposed: bool,
    /// The right side is the transpose of a row-major `[n, k]` tensor (Wᵀ in ∂x = ∂y·Wᵀ).
    pub rhs_transposed: bool,
    /// `forward`, `weight grad` or `input grad`.
    pub role: &'static str,
    /// How many times one minibatch of the update runs this product (both networks).
    pub per_minibatch: usize,
}

impl MatmulCase {
    /// `[m, k] · [k, n]`, both sides row-major (a probe's product).
    pub fn plain(m: usize, k: usize, n: usize) -> Self {
        MatmulCase {
            m,
            k,
            n,
            lhs_transposed: false,
            rhs_transposed: false,
            role: "probe",
            per_minibatch: 1,
        }
    }

    /// `m×k·k×n`, with `ᵀ` on a transposed side.
    pub fn label(&self) -> String {
        let t = |on: bool| if on { "ᵀ" } else { "" };
        format!(
            "{}×{}{}·{}×{}{}",
            self.m,
            self.k,
            t(self.lhs_transposed),
            self.k,
            self.n,
            t(self.rhs_transposed)
        )
    }

    /// The same product in the same layout (whatever its role and count).
    pub fn same_product(&self, other: &MatmulCase) -> bool {
        (
            self.m,
            self.k,
            self.n,
            self.lhs_transposed,
            self.rhs_transposed,
        ) == (
            other.m,
            other.k,
            other.n,
            other.lhs_transposed,
            other.rhs_transposed,
        )
    }

    /// Floating-point operations of one product.
    pub fn flops(&self) -> f64 {
        2.0 * (self.m * self.k * self.n) as f64
    }
}

impl TrainBenchConfig {
    /// Every distinct matrix product one minibatch of the update runs, per layer of both
    /// networks: the forward `x·W` `[B, in]·[in, out]`, the weight gradient `xᵀ·∂y`
    /// `[in, B]·[B, out]` (a transposed view of x) and, past the first layer, the input
    /// gradient `∂y·Wᵀ` `[B, out]·[out, in]` (a transposed view of W).
    pub fn update_matmuls(&self) -> Vec<MatmulCase> {
        let b = self.batch_size;
        let mut cases: Vec<MatmulCase> = Vec::new();
        let mut push = |c: MatmulCase| match cases.iter_mut().find(|d| d.same_product(&c)) {
            Some(d) => d.per_minibatch += 1,
            None => cases.push(c),
        };
        // Both networks have the same hidden layers; the value head's one output adds its own.
        for head in [self.n_assets, 1] {
            let mut fan_in = self.obs_dim();
            for (layer, &w) in self.net.iter().chain(std::iter::once(&head)).enumerate() {
                let case = |m, k, n, lhs_transposed, rhs_transposed, role| MatmulCase {
                    m,
                    k,
                    n,
                    lhs_transposed,
                    rhs_transposed,
                    role,
                    per_minibatch: 1,
                };
                push(case(b, fan_in, w, false, false, "forward"));
                push(case(fan_in, b, w, true, false, "weight grad"));
                if layer > 0 {
                    push(case(b, w, fan_in, false, true, "input grad"));
                }
                fan_in = w;
            }
        }
        cases
    }
}

/// What a device offers the matmul routines.
#[derive(Debug, Clone, Serialize)]
pub struct MatmulFeatures {
    /// The cubecl runtime (`wgpu<wgsl>`, `wgpu<spirv>`, …).
    pub runtime: String,
    pub plane_size_min: u32,
    pub plane_size_max: u32,
    /// Plane (subgroup) operations: what the `gemm` and plane routines need.
    pub plane_ops: bool,
    /// Cooperative-matrix configurations (`a×b→c m×n×k`), what the `cmma` routines need.
    pub cmma: Vec<String>,
    /// Manual MMA configurations, what the `mma` routines need.
    pub mma: Vec<String>,
    pub max_units_per_cube: u32,
    pub max_shared_memory_bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_update_runs_forward_weight_and_input_gradient_products() {
        let c = TrainBenchConfig::rtx4080();
        let m = c.update_matmuls();
        let has = |m_: usize, k: usize, n: usize, lt: bool, rt: bool| {
            m.iter()
                .any(|c| (c.m, c.k, c.n, c.lhs_transposed, c.rhs_transposed) == (m_, k, n, lt, rt))
        };
        // obs 120, nets [2048, 1024, 512], 7 assets, batch 1024.
        assert!(has(1024, 120, 2048, false, false), "first forward: {m:?}");
        assert!(has(120, 1024, 2048, true, false), "first weight gradient");
        assert!(
            has(1024, 1024, 2048, false, true),
            "second layer's input gradient"
        );
        assert!(has(1024, 512, 7, false, false), "the action head");
        assert!(
            has(1024, 1, 512, false, true),
            "the value head's input gradient"
        );
        // No input gradient into the observations.
        assert!(!m.iter().any(|c| c.n == 120 && c.rhs_transposed));
        // 4 layers × (forward, weight grad) + 3 input grads for the policy; the value net
        // adds its head's three.
        assert_eq!(m.len(), 11 + 3);
        // The hidden layers' products run once per network; the heads' once.
        assert_eq!(m[0].per_minibatch, 2);
        assert!(
            m.iter()
                .filter(|c| c.n == 7 || c.n == 1 || c.k == 1)
                .all(|c| c.per_minibatch == 1)
        );
        assert_eq!(m.iter().map(|c| c.per_minibatch).sum::<usize>(), 2 * 11);
        assert_eq!(m[0].label(), "1024×120·120×2048");
        assert_eq!(m[1].label(), "120×1024ᵀ·1024×2048");
    }
}
