//! The dense arithmetic of the embedding model: a matrix product against weights packed
//! once at load time, and the row-wise layer norm, GELU and softmax around it.
//!
//! A query is a handful of tokens, so each product is a few rows times a 384- or
//! 1536-wide weight matrix: general-purpose GEMM libraries spend most of such a call
//! re-packing the weights. Here the weights are packed once, in the order the kernel reads
//! them, and the kernel is compiled twice — for AVX2 with FMA, chosen at run time when the
//! CPU has them, and for the baseline target — from the same portable code, which the
//! compiler vectorises.

/// Output columns per packed panel: one 16-lane vector (AVX-512) or two 8-lane ones.
const PANEL: usize = 16;

/// A linear layer `y = x·Wᵀ + b`, with `W` packed into panels of [`PANEL`] output columns,
/// each stored input-major (`panel[k][j]`) so the kernel reads it front to back.
///
/// The weights are kept in half precision: with a few rows the product is bound by how
/// fast the weights stream from memory, not by arithmetic, and half the bytes is nearly
/// half the time. Their 11-bit mantissa moves an embedding by far less than the
/// differences that rank tools (see the reference test); activations stay in f32.
#[derive(Debug)]
pub(crate) struct Linear {
    inputs: usize,
    outputs: usize,
    /// `ceil(outputs / PANEL)` panels of `inputs × PANEL` IEEE half-precision values;
    /// columns past `outputs` are 0.
    packed: Vec<u16>,
    bias: Vec<f32>,
}

impl Linear {
    /// Packs a PyTorch-layout weight (`outputs` rows of `inputs`) and its bias. Fails when
    /// a weight is not finite or too large for half precision (no embedding model has such).
    pub(crate) fn new(weight: &[f32], bias: Vec<f32>, inputs: usize) -> Result<Linear, String> {
        let outputs = bias.len();
        debug_assert_eq!(weight.len(), outputs * inputs);
        let panels = outputs.div_ceil(PANEL);
        let mut packed = vec![0u16; panels * inputs * PANEL];
        for (n, row) in weight.chunks_exact(inputs).enumerate() {
            let panel = &mut packed[(n / PANEL) * inputs * PANEL..][..inputs * PANEL];
            for (k, &w) in row.iter().enumerate() {
                let h = half::f16::from_f32(w);
                if !h.is_finite() {
                    return Err(format!("weight {w} does not fit half precision"));
                }
                panel[k * PANEL + n % PANEL] = h.to_bits();
            }
        }
        Ok(Linear {
            inputs,
            outputs,
            packed,
            bias,
        })
    }

    pub(crate) fn outputs(&self) -> usize {
        self.outputs
    }

    /// `y` (rows × outputs) = `x` (rows × inputs) · Wᵀ + b.
    pub(crate) fn forward(&self, x: &[f32], y: &mut [f32]) {
        let rows = x.len() / self.inputs;
        debug_assert_eq!(x.len(), rows * self.inputs);
        debug_assert_eq!(y.len(), rows * self.outputs);
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has the features the function is compiled for.
                unsafe { self.forward_avx512(x, y, rows) };
                return;
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                // SAFETY: as above.
                unsafe { self.forward_avx2(x, y, rows) };
                return;
            }
        }
        // Baseline x86-64 has 16 four-lane registers: 8 columns of 6 rows fill 12.
        self.forward_with::<8, 6, false>(x, y, rows);
    }

    /// 32 sixteen-lane registers: one per row's 16 columns, up to 24 rows at once, so a
    /// query's tokens usually share one pass over the weights.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    fn forward_avx512(&self, x: &[f32], y: &mut [f32], rows: usize) {
        self.forward_with::<16, 24, true>(x, y, rows);
    }

    /// 16 eight-lane registers: 8 columns of up to 12 rows, then the panel's other 8.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn forward_avx2(&self, x: &[f32], y: &mut [f32], rows: usize) {
        self.forward_with::<8, 12, true>(x, y, rows);
    }

    /// The product in blocks of at most `MAX` rows by `W` columns (`W` divides [`PANEL`]),
    /// sized so the accumulators stay in registers. Rows are split into equal blocks:
    /// every block widens the weights again, so 7 rows go as 4 + 3, not 6 + 1. `FUSED`
    /// uses fused multiply-add: one instruction with FMA, a slow library call without.
    #[inline(always)]
    fn forward_with<const W: usize, const MAX: usize, const FUSED: bool>(
        &self,
        x: &[f32],
        y: &mut [f32],
        rows: usize,
    ) {
        if rows == 0 {
            return;
        }
        let k = self.inputs;
        let blocks = rows.div_ceil(MAX);
        let per_block = rows.div_ceil(blocks);
        for (p, panel) in self.packed.chunks_exact(k * PANEL).enumerate() {
            for offset in (0..PANEL).step_by(W) {
                let col = p * PANEL + offset;
                if col >= self.outputs {
                    break;
                }
                let width = W.min(self.outputs - col);
                let mut bias = [0.0; W];
                bias[..width].copy_from_slice(&self.bias[col..col + width]);
                let place = Place {
                    stride: self.outputs,
                    col,
                    width,
                    offset,
                };
                let mut r = 0;
                while r < rows {
                    let n = per_block.min(rows - r);
                    let xs = &x[r * k..(r + n) * k];
                    let ys = &mut y[r * self.outputs..(r + n) * self.outputs];
                    macro_rules! rows {
                        ($($r:literal)*) => {
                            match n {
                                $($r => block::<$r, W, FUSED>(xs, panel, &bias, ys, place),)*
                                _ => unreachable!("blocks hold at most {MAX} rows"),
                            }
                        };
                    }
                    rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24);
                    r += n;
                }
            }
        }
    }
}

/// Which part of a panel a block reads and where its results go in the output rows.
#[derive(Clone, Copy)]
struct Place {
    stride: usize,
    col: usize,
    width: usize,
    /// First column of the block within the panel.
    offset: usize,
}

/// `R` rows of `x` (each `panel.len() / PANEL` long) times `W` columns of one packed
/// panel, plus bias, written to columns `col..col + width` of `R` rows of `y`.
#[inline(always)]
fn block<const R: usize, const W: usize, const FUSED: bool>(
    x: &[f32],
    panel: &[u16],
    bias: &[f32; W],
    y: &mut [f32],
    place: Place,
) {
    let k = panel.len() / PANEL;
    let rows: [&[f32]; R] = std::array::from_fn(|i| &x[i * k..(i + 1) * k]);
    let mut acc = [*bias; R];
    for (kk, w) in panel.chunks_exact(PANEL).enumerate() {
        let w = &w[place.offset..place.offset + W];
        let w: [f32; W] = std::array::from_fn(|j| widen(w[j]));
        for i in 0..R {
            let a = rows[i][kk];
            for j in 0..W {
                acc[i][j] = madd::<FUSED>(a, w[j], acc[i][j]);
            }
        }
    }
    for (i, a) in acc.iter().enumerate() {
        y[i * place.stride + place.col..][..place.width].copy_from_slice(&a[..place.width]);
    }
}

/// A finite IEEE half-precision value as f32, in operations the compiler vectorises (the
/// magnitude's bits moved into place, then rescaled by 2^112, which also handles zero
/// and subnormals; the sign copied).
#[inline(always)]
fn widen(h: u16) -> f32 {
    const REBIAS: f32 = 5.192_297e33; // 2^112: f32's exponent bias minus half's, as a power
    let h = u32::from(h);
    let magnitude = f32::from_bits((h & 0x7fff) << 13) * REBIAS;
    f32::from_bits(magnitude.to_bits() | ((h & 0x8000) << 16))
}

#[inline(always)]
fn madd<const FUSED: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FUSED { a.mul_add(b, c) } else { a * b + c }
}

/// Layer normalisation of each `gamma.len()`-wide row of `x`, in place.
pub(crate) fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = gamma.len();
    for row in x.chunks_exact_mut(width) {
        let mean = row.iter().sum::<f32>() / width as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
        let scale = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = (*v - mean) * scale * g + b;
        }
    }
}

/// The activation between a layer's two feed-forward products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// `x·Φ(x)` with the exact normal CDF (BERT's `gelu`).
    Gelu,
    /// The tanh approximation of GELU (`gelu_new`, `gelu_pytorch_tanh`).
    GeluTanh,
    Relu,
}

impl Activation {
    pub(crate) fn apply(self, x: &mut [f32]) {
        match self {
            Activation::Gelu => {
                for v in x {
                    *v = 0.5 * *v * (1.0 + libm::erff(*v * std::f32::consts::FRAC_1_SQRT_2));
                }
            }
            Activation::GeluTanh => {
                const C: f32 = 0.797_884_6; // sqrt(2/π)
                for v in x {
                    let u = C * (*v + 0.044_715 * *v * *v * *v);
                    *v = 0.5 * *v * (1.0 + u.tanh());
                }
            }
            Activation::Relu => {
                for v in x {
                    *v = v.max(0.0);
                }
            }
        }
    }
}

/// Softmax of `x`, in place.
pub(crate) fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// Dot product, in eight independent lanes so the compiler can vectorise it.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            lanes[l] += x[l] * y[l];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition, for comparison.
    fn naive(x: &[f32], w: &[f32], b: &[f32], inputs: usize) -> Vec<f32> {
        let rows = x.len() / inputs;
        let mut y = Vec::new();
        for r in 0..rows {
            for (n, wr) in w.chunks_exact(inputs).enumerate() {
                let s: f64 = (0..inputs)
                    .map(|k| f64::from(x[r * inputs + k]) * f64::from(wr[k]))
                    .sum();
                y.push((s + f64::from(b[n])) as f32);
            }
        }
        y
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        // A small deterministic generator: the test needs varied values, not randomness.
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn linear_matches_the_definition_for_every_shape() {
        // Row counts around the block size, widths that do and do not fill a panel.
        for (rows, inputs, outputs) in [
            (1, 8, 16),
            (7, 13, 5),
            (6, 384, 48),
            (13, 40, 33),
            (50, 24, 40),
        ] {
            let x = values(rows * inputs, 1);
            let w = values(outputs * inputs, 2);
            let b = values(outputs, 3);
            // The weights as half precision will hold them, so the comparison is exact
            // up to the order of additions.
            let w: Vec<f32> = w.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
            let layer = Linear::new(&w, b.clone(), inputs).expect("finite weights");
            let mut y = vec![0.0; rows * outputs];
            layer.forward(&x, &mut y);
            let want = naive(&x, &w, &b, inputs);
            for (got, want) in y.iter().zip(&want) {
                assert!(
                    (got - want).abs() < 1e-3,
                    "{rows}x{inputs}x{outputs}: {got} vs {want}"
                );
            }
            // Every instruction-set path, whichever this CPU picks.
            let mut plain = vec![0.0; rows * outputs];
            layer.forward_with::<8, 6, false>(&x, &mut plain, rows);
            let mut wide = vec![0.0; rows * outputs];
            layer.forward_with::<16, 24, false>(&x, &mut wide, rows);
            let mut narrow = vec![0.0; rows * outputs];
            layer.forward_with::<8, 12, false>(&x, &mut narrow, rows);
            for ((p, (w, n)), want) in plain.iter().zip(wide.iter().zip(&narrow)).zip(&want) {
                for got in [p, w, n] {
                    assert!((got - want).abs() < 1e-3, "{got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn half_precision_widening_is_exact() {
        for bits in 0..=u16::MAX {
            let h = half::f16::from_bits(bits);
            if h.is_finite() {
                assert_eq!(widen(bits).to_bits(), h.to_f32().to_bits(), "{bits:#06x}");
            }
        }
        assert!(Linear::new(&[1e6], vec![0.0], 1).is_err());
    }

    #[test]
    fn row_operations() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut x, &[1.0, 1.0], &[0.0, 0.5], 1e-12);
        assert_eq!(x, vec![-1.0, 1.5, -1.0, 1.5]);

        let mut p = vec![1.0, 2.0, 3.0];
        softmax(&mut p);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(p[2] > p[1] && p[1] > p[0]);

        let mut g = vec![-3.0, 0.0, 1.0];
        Activation::Gelu.apply(&mut g);
        assert!((g[0] + 0.004_05).abs() < 1e-4 && g[1] == 0.0 && (g[2] - 0.841_34).abs() < 1e-4);

        let a = values(37, 4);
        let b = values(37, 5);
        let want: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - want).abs() < 1e-4);
    }
}
