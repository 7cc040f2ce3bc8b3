use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use proptest::prelude::*;

use super::kernels::{self, Level};
use super::*;

const TYPES: [GgmlDType; 5] = [GgmlDType::Q4_0, GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1, GgmlDType::Q8_0];

/// A `(rows, cols)` weight of type `t` quantized by candle from pseudo-random values.
fn weight(t: GgmlDType, rows: usize, cols: usize, seed: u64) -> QTensor {
    let values = noise(rows * cols, seed);
    let w = Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap();
    QTensor::quantize(&w, t).unwrap()
}

/// Deterministic values in about [-1, 1], a few of them large, some blocks all zero.
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|i| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            match (i / BLOCK) % 7 {
                3 => 0.0,
                5 => v * 40.0,
                _ => v,
            }
        })
        .collect()
}

/// The weight's values as the kernels read them: `d · u + m`.
fn decoded(w: &QBlocks) -> Vec<f32> {
    let nb = w.cols / BLOCK;
    let mut values = Vec::with_capacity(w.rows * w.cols);
    for row in 0..w.rows {
        for b in 0..nb {
            let (d, m) = w.scale(row, b);
            values.extend((0..BLOCK).map(|j| d * w.code(row, b, j) as f32 + m));
        }
    }
    values
}

fn levels() -> Vec<Level> {
    let mut l = vec![Level::Scalar];
    if kernels::level() != Level::Scalar {
        l.push(kernels::level());
    }
    l
}

#[test]
fn every_type_decodes_to_candles_dequantized_values_exactly() {
    for t in TYPES {
        let q = weight(t, 5, 96, 7);
        let w = QBlocks::from_qtensor(&q).unwrap().expect("a block type");
        let reference = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(decoded(&w), reference, "{t:?}");
    }
}

#[test]
fn other_types_and_shapes_stay_with_candle() {
    let w = Tensor::from_vec(noise(256 * 2, 1), (2, 256), &Device::Cpu).unwrap();
    assert!(QBlocks::from_qtensor(&QTensor::quantize(&w, GgmlDType::Q4K).unwrap()).unwrap().is_none());
    let v = Tensor::from_vec(noise(64, 2), 64, &Device::Cpu).unwrap();
    assert!(QBlocks::from_qtensor(&QTensor::quantize(&v, GgmlDType::Q8_0).unwrap()).unwrap().is_none());
}

/// `x · Wᵀ` with the decoded weight, and for each output the most the activations'
/// quantization can move it: `Σ_blocks (e / 2) · Σ_j |w_j|` (each `a_j` is `x_j / e` rounded).
fn reference(w: &QBlocks, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (rows, cols) = (w.rows, w.cols);
    let wd = decoded(w);
    let m = x.len() / cols;
    let mut out = vec![0f32; m * rows];
    let mut bound = vec![0f32; m * rows];
    for i in 0..m {
        let xr = &x[i * cols..(i + 1) * cols];
        for r in 0..rows {
            let wr = &wd[r * cols..(r + 1) * cols];
            out[i * rows + r] = xr.iter().zip(wr).map(|(a, b)| (*a as f64) * (*b as f64)).sum::<f64>() as f32;
            bound[i * rows + r] = xr
                .chunks(BLOCK)
                .zip(wr.chunks(BLOCK))
                .map(|(xb, wb)| {
                    let e = xb.iter().fold(0f32, |a, v| a.max(v.abs())) / 127.0;
                    e / 2.0 * wb.iter().map(|v| v.abs()).sum::<f32>()
                })
                .sum();
        }
    }
    (out, bound)
}

fn check(t: GgmlDType, rows: usize, blocks: usize, m: usize, seed: u64) {
    let cols = blocks * BLOCK;
    let w = QBlocks::from_qtensor(&weight(t, rows, cols, seed)).unwrap().unwrap();
    let x = noise(m * cols, seed ^ 0xfeed);
    let (exact, bound) = reference(&w, &x);
    // The multi-threaded matmul, with the detected kernels.
    let mut out = vec![0f32; m * rows];
    w.matmul(&x, &mut out);
    for (i, ((o, e), b)) in out.iter().zip(&exact).zip(&bound).enumerate() {
        let tol = b * 1.001 + 1e-4 * (1.0 + e.abs());
        assert!((o - e).abs() <= tol, "{t:?} {rows}x{cols} m={m} out {i}: {o} vs {e} (bound {b})");
    }
    // Every kernel level computes the same sums, to f32 rounding.
    let acts: Vec<_> = levels().into_iter().map(|l| (l, kernels::quantize_at(l, &x, cols))).collect();
    for (_, a) in &acts[1..] {
        assert_eq!((&a.codes, &a.scale, &a.scaled_sum), (&acts[0].1.codes, &acts[0].1.scale, &acts[0].1.scaled_sum));
    }
    for p in 0..rows.div_ceil(PANEL) {
        let mut per_level = Vec::new();
        for (l, a) in &acts {
            let mut dots = vec![[f32::NAN; PANEL]; m];
            kernels::panel_at(*l, &w, p, a, 0..m, &mut dots);
            per_level.push(dots);
        }
        for dots in &per_level[1..] {
            for (i, (got, want)) in dots.iter().zip(&per_level[0]).enumerate() {
                for (r, (a, b)) in got.iter().zip(want).enumerate() {
                    let row = p * PANEL + r;
                    if row >= rows {
                        assert_eq!((*a, *b), (0.0, 0.0), "{t:?}: a padding row");
                        continue;
                    }
                    // Rounding is relative to the terms summed, not to the sum: with an offset
                    // (`m · Σ a`), two large terms of a block can nearly cancel.
                    let tol = 1e-4 * (1.0 + b.abs()) + 4e-6 * term_size(&w, &x, row, i);
                    assert!((a - b).abs() <= tol, "{t:?}: {a} vs {b} (tolerance {tol})");
                }
            }
        }
    }
}

/// A bound on the size of the terms a kernel adds up for output `row` of activation row `i`:
/// per block, (|d| · the largest code + |m|) · Σ |x|.
fn term_size(w: &QBlocks, x: &[f32], row: usize, i: usize) -> f32 {
    let nb = w.cols / BLOCK;
    let most = match w.codes {
        Codes::Nibbles => 15.0,
        Codes::Small => 31.0,
        Codes::Signed => 128.0,
    };
    (0..nb)
        .map(|b| {
            let (d, m) = w.scale(row, b);
            let xs = &x[i * w.cols + b * BLOCK..i * w.cols + (b + 1) * BLOCK];
            (d.abs() * most + m.abs()) * xs.iter().map(|v| v.abs()).sum::<f32>()
        })
        .sum()
}

#[test]
fn every_type_multiplies_within_the_activation_rounding_on_every_kernel() {
    for t in TYPES {
        for (rows, blocks, m) in [(1, 1, 1), (4, 18, 1), (7, 3, 5), (13, 48, 2), (33, 2, 17), (16, 4, 70)] {
            check(t, rows, blocks, m, rows as u64 * 31 + m as u64);
        }
    }
}

#[test]
fn forward_keeps_the_leading_dimensions() {
    let w = QBlocks::from_qtensor(&weight(GgmlDType::Q4_1, 6, 64, 3)).unwrap().unwrap();
    let x = Tensor::from_vec(noise(2 * 3 * 64, 9), (2, 3, 64), &Device::Cpu).unwrap();
    let y = w.forward(&x).unwrap();
    assert_eq!(y.dims(), &[2, 3, 6]);
    let mut flat = vec![0f32; 6 * 6];
    w.matmul(&x.flatten_all().unwrap().to_vec1().unwrap(), &mut flat);
    assert_eq!(y.flatten_all().unwrap().to_vec1::<f32>().unwrap(), flat);
    assert!(w.forward(&Tensor::zeros((1, 32), candle_core::DType::F32, &Device::Cpu).unwrap()).is_err());
}

/// Found by the property below: a Q4_0 sum whose block terms nearly cancel, where the FMA
/// kernel and the scalar one round differently (5e-4 on 3.85, terms of ~100).
#[test]
fn nearly_cancelling_terms_round_alike_enough() {
    check(TYPES[0], 2, 3, 2, 5265774863380678173);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_shapes_agree_with_the_reference(t in 0..TYPES.len(), rows in 1usize..20, blocks in 1usize..6, m in 1usize..10, seed in any::<u64>()) {
        check(TYPES[t], rows, blocks, m, seed);
    }
}

/// Every kernel against the exact (f64) sums of the very codes and scales it multiplies: the
/// only error left is f32 rounding, a few ulp of the terms' size (the activations' quantization,
/// which [`check`] bounds, is the same on both sides). Each kernel sums a row in its own order,
/// so their logits differ from llama.cpp's (whose order is a third) by rounding alone.
#[test]
fn every_kernel_rounds_the_exact_sums_only() {
    for t in TYPES {
        let (rows, blocks, m) = (19, 48, 9);
        let cols = blocks * BLOCK;
        let w = QBlocks::from_qtensor(&weight(t, rows, cols, 11)).unwrap().unwrap();
        let x = noise(m * cols, 12);
        for level in levels() {
            let acts = kernels::quantize_at(level, &x, cols);
            let mut worst = 0f64;
            for p in 0..rows.div_ceil(PANEL) {
                let mut dots = vec![[0f32; PANEL]; m];
                kernels::panel_at(level, &w, p, &acts, 0..m, &mut dots);
                for (i, got) in dots.iter().enumerate() {
                    for (r, &got) in got.iter().enumerate().filter(|&(r, _)| p * PANEL + r < rows) {
                        let row = p * PANEL + r;
                        let exact: f64 = (0..blocks)
                            .map(|b| {
                                let (d, mm) = w.scale(row, b);
                                let dot: i64 = (0..BLOCK)
                                    .map(|j| w.code(row, b, j) as i64 * acts.codes[i * cols + b * BLOCK + j] as i64)
                                    .sum();
                                let e = acts.scale[i * blocks + b] as f64;
                                d as f64 * e * dot as f64 + mm as f64 * acts.scaled_sum[i * blocks + b] as f64
                            })
                            .sum();
                        let size = term_size(&w, &x, row, i) as f64;
                        worst = worst.max((got as f64 - exact).abs() / size);
                    }
                }
            }
            eprintln!("{t:?} {level:?}: worst error {worst:.2e} of the terms' size");
            assert!(worst < 1e-7, "{t:?} {level:?}: an error of {worst:.2e} of the terms' size");
        }
    }
}

/// Activations long enough to be quantized in parts over the pool: the same codes and scales
/// as quantizing each row alone, on every level.
#[test]
fn long_activations_quantize_in_parts_as_row_by_row() {
    let cols = 576;
    let x = noise(300 * cols, 7);
    for level in levels() {
        let whole = kernels::quantize_at(level, &x, cols);
        assert!(whole.scale.len() >= 4 * 1024 && x.len() == whole.codes.len());
        let rows: Vec<_> = x.chunks_exact(cols).map(|row| kernels::quantize_at(level, row, cols)).collect();
        assert_eq!(whole.codes, rows.iter().flat_map(|r| r.codes.iter().copied()).collect::<Vec<_>>());
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&whole.scale), rows.iter().flat_map(|r| bits(&r.scale)).collect::<Vec<_>>());
        assert_eq!(bits(&whole.scaled_sum), rows.iter().flat_map(|r| bits(&r.scaled_sum)).collect::<Vec<_>>());
    }
}
