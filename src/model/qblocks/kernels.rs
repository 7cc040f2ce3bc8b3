//! The block dot products of [`QBlocks`] (see the [module docs](super) for the arithmetic),
//! and the quantization of the activations they read.
//!
//! Two implementations, chosen once per process by what the CPU has ([`level`]): AVX2 with FMA
//! (x86-64), and a portable one (plain loops the compiler vectorizes, e.g. for NEON). Both
//! compute the same sums (the tests compare them with each other, with the exact sums of the
//! same codes, and with the dequantized weights); they differ only in the order f32 additions
//! happen.

use std::ops::Range;
use std::sync::OnceLock;

use super::{Codes, QActs, QBlocks, SharedOut, BLOCK, PANEL};

/// Activation rows the AVX2 kernel takes through a panel at a time: they share each loaded
/// (and unpacked) weight block, and their independent sums keep the multipliers busy.
#[cfg(target_arch = "x86_64")]
const TILE: usize = 4;

/// Which implementation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Scalar,
    /// x86-64 with AVX2, FMA and F16C (every CPU with the first two has the third; attention
    /// widens the KV cache's halves with it).
    Avx2,
}

/// The best [`Level`] this CPU runs, detected once.
pub(crate) fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            return Level::Avx2;
        }
        Level::Scalar
    })
}

/// Quantizes the rows of `x` (`cols` values each) block by block (see the module docs):
/// `e = max|x| / 127`, `a = round(x / e)` (ties to even, as llama.cpp's AVX2 code rounds).
pub(crate) fn quantize(x: &[f32], cols: usize) -> QActs {
    quantize_at(level(), x, cols)
}

/// [`quantize`] with the kernels of `level`. Long inputs are quantized in parts over candle's
/// CPU pool (a block's codes depend on that block alone, so the parts change no bit): a
/// prompt's activations would otherwise be quantized by one thread while the others wait.
pub(crate) fn quantize_at(level: Level, x: &[f32], cols: usize) -> QActs {
    debug_assert!(cols % BLOCK == 0 && x.len() % cols == 0);
    let blocks = x.len() / BLOCK;
    let mut acts = QActs { codes: vec![0; x.len()], scale: vec![0.0; blocks], scaled_sum: vec![0.0; blocks] };
    let one = |x: &[f32], codes: &mut [i8], scale: &mut [f32], scaled_sum: &mut [f32]| match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Level::Avx2` is only detected (or asked for by tests) where the CPU has it.
        Level::Avx2 => unsafe { avx2::quantize(x, codes, scale, scaled_sum) },
        _ => quantize_portable(x, codes, scale, scaled_sum),
    };
    if blocks < 2 * QUANTIZE_PART {
        one(x, &mut acts.codes, &mut acts.scale, &mut acts.scaled_sum);
        return acts;
    }
    let (codes, scale, scaled_sum) = (
        SharedOut(acts.codes.as_mut_ptr()),
        SharedOut(acts.scale.as_mut_ptr()),
        SharedOut(acts.scaled_sum.as_mut_ptr()),
    );
    let work = |parts: Range<usize>| {
        for part in parts {
            let b = part * QUANTIZE_PART..((part + 1) * QUANTIZE_PART).min(blocks);
            // SAFETY: part `part` owns blocks `b` of the three buffers (`blocks` long, codes
            // `BLOCK` per block); parts are disjoint and the pool joins before they are read.
            let (c, s, ss) = unsafe {
                (
                    std::slice::from_raw_parts_mut(codes.at(b.start * BLOCK), b.len() * BLOCK),
                    std::slice::from_raw_parts_mut(scale.at(b.start), b.len()),
                    std::slice::from_raw_parts_mut(scaled_sum.at(b.start), b.len()),
                )
            };
            one(&x[b.start * BLOCK..b.end * BLOCK], c, s, ss);
        }
    };
    candle_core::utils::barrier_pool().execute_chunked(blocks.div_ceil(QUANTIZE_PART), work);
    acts
}

/// Blocks of activations per part quantized by one worker (128 KiB of input).
const QUANTIZE_PART: usize = 1024;

/// The codes of `x`'s blocks, and per block `e` and `e · Σ a` (see [`QActs`]).
#[inline(always)]
fn quantize_portable(x: &[f32], codes: &mut [i8], scale: &mut [f32], scaled_sum: &mut [f32]) {
    let blocks = x.chunks_exact(BLOCK).zip(codes.chunks_exact_mut(BLOCK));
    for (((xs, codes), scale), scaled_sum) in blocks.zip(scale).zip(scaled_sum) {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let e = amax / 127.0;
        let inv = if e > 0.0 { 1.0 / e } else { 0.0 };
        let mut sum = 0i32;
        for (c, &v) in codes.iter_mut().zip(xs) {
            // |v · inv| ≤ 127 (up to rounding, which the clamp keeps in range).
            let q = (v * inv).round_ties_even().clamp(-127.0, 127.0) as i8;
            *c = q;
            sum += q as i32;
        }
        *scale = e;
        *scaled_sum = e * sum as f32;
    }
}

/// The dot products of the [`PANEL`] weight rows of panel `p` with activation rows `acts_rows`:
/// `out[k][r]` for activation row `acts_rows.start + k` and weight row `p · PANEL + r` (0 for
/// the padding rows of a last panel).
pub(crate) fn panel(w: &QBlocks, p: usize, acts: &QActs, acts_rows: Range<usize>, out: &mut [[f32; PANEL]]) {
    panel_at(level(), w, p, acts, acts_rows, out)
}

pub(crate) fn panel_at(
    level: Level,
    w: &QBlocks,
    p: usize,
    acts: &QActs,
    acts_rows: Range<usize>,
    out: &mut [[f32; PANEL]],
) {
    let nb = w.cols / BLOCK;
    assert!(p < w.rows.div_ceil(PANEL) && acts_rows.end * nb <= acts.scale.len() && out.len() == acts_rows.len());
    let bb = w.codes.block_bytes();
    let bytes = &w.bytes[p * nb * PANEL * bb..(p + 1) * nb * PANEL * bb];
    let scales = &w.scales[p * nb * 2 * PANEL..(p + 1) * nb * 2 * PANEL];
    match level {
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            for (first, out) in acts_rows.clone().step_by(TILE).zip(out.chunks_mut(TILE)) {
                // SAFETY: `Level::Avx2` is only detected (or asked for by tests) where the CPU
                // has it; `bytes` and `scales` hold the panel's `nb` blocks (the `QBlocks`
                // invariants), and `acts` the rows `first..first + out.len()` (the assert).
                unsafe { avx2::panel(w.codes, bytes, scales, acts, first, w.cols, out) }
            }
        }
        _ => {
            for (i, o) in acts_rows.zip(out.iter_mut()) {
                *o = panel_portable(w.codes, bytes, scales, &Act::row(acts, i, w.cols));
            }
        }
    }
}

/// The portable kernel: [`panel`] for one activation row, in plain loops over the panel's
/// layout that the compiler vectorizes (8 integer sums side by side, one per weight row). The
/// padding rows' codes and scales are 0, so their dot products are 0.
#[inline(always)]
fn panel_portable(codes: Codes, bytes: &[u8], scales: &[f32], a: &Act) -> [f32; PANEL] {
    let bb = PANEL * codes.block_bytes();
    let (mut acc, mut offset) = ([0f32; PANEL], [0f32; PANEL]);
    for (b, (w, x)) in bytes.chunks_exact(bb).zip(a.codes.chunks_exact(BLOCK)).enumerate() {
        let mut dot = [0i32; PANEL];
        // Chunk `c` holds stored bytes `4c..4c + 4` of each row (module docs of `qblocks`).
        for (c, chunk) in w.chunks_exact(4 * PANEL).enumerate() {
            for (dot, four) in dot.iter_mut().zip(chunk.chunks_exact(4)) {
                for (t, &byte) in four.iter().enumerate() {
                    let j = 4 * c + t;
                    *dot += match codes {
                        // Byte `j` holds value `j` (low nibble) and value `j + 16` (high).
                        Codes::Nibbles => (byte & 0x0F) as i32 * x[j] as i32 + (byte >> 4) as i32 * x[j + 16] as i32,
                        Codes::Small => byte as i32 * x[j] as i32,
                        Codes::Signed => byte as i8 as i32 * x[j] as i32,
                    };
                }
            }
        }
        let (d, m) = scales[b * 2 * PANEL..(b + 1) * 2 * PANEL].split_at(PANEL);
        let (e, es) = (a.scale[b], a.scaled_sum[b]);
        for r in 0..PANEL {
            acc[r] += d[r] * e * dot[r] as f32;
            offset[r] += m[r] * es;
        }
    }
    std::array::from_fn(|r| acc[r] + offset[r])
}

/// One activation row, quantized.
struct Act<'a> {
    codes: &'a [i8],
    scale: &'a [f32],
    scaled_sum: &'a [f32],
}

impl<'a> Act<'a> {
    /// Row `i` of `acts`, rows of `cols` values.
    fn row(acts: &'a QActs, i: usize, cols: usize) -> Act<'a> {
        let nb = cols / BLOCK;
        Act {
            codes: &acts.codes[i * cols..(i + 1) * cols],
            scale: &acts.scale[i * nb..(i + 1) * nb],
            scaled_sum: &acts.scaled_sum[i * nb..(i + 1) * nb],
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{quantize_portable, Act, Codes, QActs, BLOCK, PANEL};

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn quantize(x: &[f32], codes: &mut [i8], scale: &mut [f32], scaled_sum: &mut [f32]) {
        // The portable code, compiled here with AVX2 enabled (it vectorizes).
        quantize_portable(x, codes, scale, scaled_sum)
    }

    /// `out[k][r]` = the dot product of row `r` of a panel (`bytes` and `scales`, the layout
    /// of the [module docs](super::super)) with activation row `first + k` of `acts` (rows of
    /// `cols`), for up to [`TILE`](super::TILE) rows.
    ///
    /// Safety: the CPU has AVX2 and FMA (the rest is checked: slices are indexed, and
    /// [`tile`] asserts the lengths its unchecked loads rely on).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn panel(
        codes: Codes,
        bytes: &[u8],
        scales: &[f32],
        acts: &QActs,
        first: usize,
        cols: usize,
        out: &mut [[f32; PANEL]],
    ) {
        let acts = (acts, first, cols);
        match (codes, out.len()) {
            (Codes::Nibbles, 4) => tile::<4, NIBBLES>(bytes, scales, acts, out),
            (Codes::Nibbles, 3) => tile::<3, NIBBLES>(bytes, scales, acts, out),
            (Codes::Nibbles, 2) => tile::<2, NIBBLES>(bytes, scales, acts, out),
            (Codes::Nibbles, 1) => tile::<1, NIBBLES>(bytes, scales, acts, out),
            (Codes::Small, 4) => tile::<4, SMALL>(bytes, scales, acts, out),
            (Codes::Small, 3) => tile::<3, SMALL>(bytes, scales, acts, out),
            (Codes::Small, 2) => tile::<2, SMALL>(bytes, scales, acts, out),
            (Codes::Small, 1) => tile::<1, SMALL>(bytes, scales, acts, out),
            (Codes::Signed, 4) => tile::<4, SIGNED>(bytes, scales, acts, out),
            (Codes::Signed, 3) => tile::<3, SIGNED>(bytes, scales, acts, out),
            (Codes::Signed, 2) => tile::<2, SIGNED>(bytes, scales, acts, out),
            (Codes::Signed, 1) => tile::<1, SIGNED>(bytes, scales, acts, out),
            _ => {}
        }
    }

    const NIBBLES: u8 = 0;
    const SMALL: u8 = 1;
    const SIGNED: u8 = 2;

    /// [`panel`] for `N` activation rows (`first..first + N` of rows of `cols`) of codes of
    /// kind `KIND`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile<const N: usize, const KIND: u8>(
        bytes: &[u8],
        scales: &[f32],
        (acts, first, cols): (&QActs, usize, usize),
        out: &mut [[f32; PANEL]],
    ) {
        let acts: &[Act; N] = &std::array::from_fn(|k| Act::row(acts, first + k, cols));
        let nb = acts[0].scale.len();
        let block_bytes = PANEL * if KIND == NIBBLES { 16 } else { BLOCK };
        assert!(out.len() == N && bytes.len() >= nb * block_bytes && scales.len() >= nb * 2 * PANEL);
        for a in acts {
            assert!(a.codes.len() >= nb * BLOCK && a.scale.len() >= nb && a.scaled_sum.len() >= nb);
        }
        let low = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        // Per activation row, the sum of the blocks' `d · e · Σ u a` and, apart (as llama.cpp
        // keeps it), of their `m · e · Σ a`; one weight row per lane.
        let mut acc = [_mm256_setzero_ps(); N];
        let mut offset = [_mm256_setzero_ps(); N];
        for b in 0..nb {
            // SAFETY (all loads): in bounds by the asserts above.
            let w = bytes.as_ptr().add(b * block_bytes);
            // The 8 vectors of codes: vector `k` holds codes `4k..4k+4` of each row, one row
            // per 32-bit lane.
            let mut v = [_mm256_setzero_si256(); 8];
            if KIND == NIBBLES {
                for c in 0..4 {
                    let packed = _mm256_loadu_si256(w.add(c * 32).cast());
                    v[c] = _mm256_and_si256(packed, low);
                    v[c + 4] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
                }
            } else {
                for (k, v) in v.iter_mut().enumerate() {
                    *v = _mm256_loadu_si256(w.add(k * 32).cast());
                }
            }
            let d = _mm256_loadu_ps(scales.as_ptr().add(b * 2 * PANEL));
            let m = _mm256_loadu_ps(scales.as_ptr().add(b * 2 * PANEL + PANEL));
            for ((acc, offset), a) in acc.iter_mut().zip(offset.iter_mut()).zip(acts) {
                let x = a.codes.as_ptr().add(b * BLOCK);
                // Activation codes `4k..4k+4`, in every lane.
                let at = |k: usize| _mm256_set1_epi32(std::ptr::read_unaligned(x.add(4 * k).cast::<i32>()));
                let dot = match KIND {
                    NIBBLES => {
                        let mut s = _mm256_maddubs_epi16(v[0], at(0));
                        for (k, &v) in v.iter().enumerate().skip(1) {
                            s = _mm256_add_epi16(s, _mm256_maddubs_epi16(v, at(k)));
                        }
                        _mm256_madd_epi16(s, ones)
                    }
                    SMALL => {
                        let mut s = [_mm256_setzero_si256(); 2];
                        for (h, s) in s.iter_mut().enumerate() {
                            *s = _mm256_maddubs_epi16(v[4 * h], at(4 * h));
                            for (k, &v) in v.iter().enumerate().take(4 * h + 4).skip(4 * h + 1) {
                                *s = _mm256_add_epi16(*s, _mm256_maddubs_epi16(v, at(k)));
                            }
                        }
                        _mm256_add_epi32(_mm256_madd_epi16(s[0], ones), _mm256_madd_epi16(s[1], ones))
                    }
                    _ => {
                        // |w| · (a with w's sign): `maddubs` takes its first operand unsigned.
                        let mut s = _mm256_setzero_si256();
                        for (k, &v) in v.iter().enumerate() {
                            let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(at(k), v));
                            s = _mm256_add_epi32(s, _mm256_madd_epi16(pairs, ones));
                        }
                        s
                    }
                };
                let e = _mm256_set1_ps(*a.scale.get_unchecked(b));
                let es = _mm256_set1_ps(*a.scaled_sum.get_unchecked(b));
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, e), *acc);
                *offset = _mm256_fmadd_ps(m, es, *offset);
            }
        }
        for ((o, acc), offset) in out.iter_mut().zip(acc).zip(offset) {
            _mm256_storeu_ps(o.as_mut_ptr(), _mm256_add_ps(acc, offset));
        }
    }
}
