//! The block dot products of [`QBlocks`] (see the [module docs](super) for the arithmetic),
//! and the quantization of the activations they read.
//!
//! Two implementations, chosen once per process by what the CPU has ([`level`]): AVX2 with FMA
//! (x86-64), and a portable scalar one. Both compute the same sums (the tests compare them,
//! and both with the dequantized weights); they differ only in the order f32 additions happen.

use std::ops::Range;
use std::sync::OnceLock;

use super::{Codes, QActs, QBlocks, BLOCK};

/// Rows of the weight one call of [`dot_rows`] takes: they share each activation load, and
/// their independent sums keep the FMA units busy.
pub(crate) const ROWS: usize = 4;

/// Which implementation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Scalar,
    /// x86-64 with AVX2 and FMA.
    Avx2,
}

/// The best [`Level`] this CPU runs, detected once.
pub(crate) fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
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

pub(crate) fn quantize_at(level: Level, x: &[f32], cols: usize) -> QActs {
    debug_assert!(cols % BLOCK == 0 && x.len() % cols == 0);
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Level::Avx2` is only detected (or asked for by tests) where the CPU has it.
        Level::Avx2 => unsafe { avx2::quantize(x) },
        _ => quantize_portable(x),
    }
}

#[inline(always)]
fn quantize_portable(x: &[f32]) -> QActs {
    let blocks = x.len() / BLOCK;
    let mut acts =
        QActs { codes: vec![0; x.len()], scale: Vec::with_capacity(blocks), scaled_sum: Vec::with_capacity(blocks) };
    for (xs, codes) in x.chunks_exact(BLOCK).zip(acts.codes.chunks_exact_mut(BLOCK)) {
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
        acts.scale.push(e);
        acts.scaled_sum.push(e * sum as f32);
    }
    acts
}

/// The dot products of weight rows `rows` (at most [`ROWS`]) with activation row `i`, into
/// `out[..rows.len()]`.
pub(crate) fn dot_rows(w: &QBlocks, rows: Range<usize>, acts: &QActs, i: usize, out: &mut [f32; ROWS]) {
    dot_rows_at(level(), w, rows, acts, i, out)
}

pub(crate) fn dot_rows_at(
    level: Level,
    w: &QBlocks,
    rows: Range<usize>,
    acts: &QActs,
    i: usize,
    out: &mut [f32; ROWS],
) {
    let nb = w.cols / BLOCK;
    assert!(rows.len() <= ROWS && rows.end <= w.rows && (i + 1) * nb <= acts.scale.len());
    let a = Act {
        codes: &acts.codes[i * w.cols..(i + 1) * w.cols],
        scale: &acts.scale[i * nb..(i + 1) * nb],
        scaled_sum: &acts.scaled_sum[i * nb..(i + 1) * nb],
    };
    let scales = &w.scales[rows.start * nb..rows.end * nb];
    let out = &mut out[..rows.len()];
    match (level, &w.codes) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `quantize_at`; the slices hold `rows.len()` rows of `nb` blocks (the
        // assert above and the `QBlocks` invariants).
        (Level::Avx2, Codes::Nibbles(c)) => unsafe {
            avx2::rows::<true>(&c[rows.start * nb * 16..rows.end * nb * 16], scales, &a, out)
        },
        #[cfg(target_arch = "x86_64")]
        (Level::Avx2, Codes::Bytes(c)) => unsafe {
            let c = &c[rows.start * nb * BLOCK..rows.end * nb * BLOCK];
            avx2::rows::<false>(std::slice::from_raw_parts(c.as_ptr().cast(), c.len()), scales, &a, out)
        },
        _ => {
            for (r, o) in out.iter_mut().enumerate() {
                *o = (0..nb)
                    .map(|b| {
                        let blk = r * nb + b;
                        let dot: i32 = (0..BLOCK)
                            .map(|j| code(&w.codes, rows.start * nb + blk, j) * a.codes[b * BLOCK + j] as i32)
                            .sum();
                        let [d, m] = scales[blk];
                        d * a.scale[b] * dot as f32 + m * a.scaled_sum[b]
                    })
                    .sum();
            }
        }
    }
}

/// Code `j` of block `blk` (counted over the whole weight).
fn code(codes: &Codes, blk: usize, j: usize) -> i32 {
    match codes {
        Codes::Nibbles(c) => {
            let byte = c[blk * 16 + j % 16];
            (if j < 16 { byte & 0x0F } else { byte >> 4 }) as i32
        }
        Codes::Bytes(c) => c[blk * BLOCK + j] as i32,
    }
}

/// One activation row, quantized.
struct Act<'a> {
    codes: &'a [i8],
    scale: &'a [f32],
    scaled_sum: &'a [f32],
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{quantize_portable, Act, QActs, BLOCK};

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn quantize(x: &[f32]) -> QActs {
        // The portable code, compiled here with AVX2 enabled (it vectorizes).
        quantize_portable(x)
    }

    /// `out[r]` = the dot product of weight row `r` (`codes` and `scales` hold `out.len()`
    /// rows, in packed nibbles if `NIBBLES`, else one byte per code) with `a`.
    ///
    /// Safety: the CPU has AVX2 and FMA; `codes` holds `out.len()` rows of
    /// `a.scale.len()` blocks (16 or 32 bytes each), `scales` as many entries, `a.codes`
    /// 32 bytes per block.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn rows<const NIBBLES: bool>(codes: &[u8], scales: &[[f32; 2]], a: &Act, out: &mut [f32]) {
        match out.len() {
            4 => rows_n::<4, NIBBLES>(codes, scales, a, out),
            3 => rows_n::<3, NIBBLES>(codes, scales, a, out),
            2 => rows_n::<2, NIBBLES>(codes, scales, a, out),
            1 => rows_n::<1, NIBBLES>(codes, scales, a, out),
            _ => {}
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows_n<const N: usize, const NIBBLES: bool>(codes: &[u8], scales: &[[f32; 2]], a: &Act, out: &mut [f32]) {
        let nb = a.scale.len();
        let block_bytes = if NIBBLES { 16 } else { BLOCK };
        assert!(codes.len() >= N * nb * block_bytes && scales.len() >= N * nb && a.codes.len() >= nb * BLOCK);
        let low = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut offset = [0f32; N];
        for b in 0..nb {
            // SAFETY (all loads): in bounds by the assert above.
            let x = _mm256_loadu_si256(a.codes.as_ptr().add(b * BLOCK).cast());
            let (e, es) = (*a.scale.get_unchecked(b), *a.scaled_sum.get_unchecked(b));
            for r in 0..N {
                let blk = r * nb + b;
                let pairs = if NIBBLES {
                    let raw = _mm_loadu_si128(codes.as_ptr().add(blk * 16).cast());
                    let u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), low);
                    _mm256_maddubs_epi16(u, x)
                } else {
                    // |w| · (a with w's sign): `maddubs` takes its first operand unsigned.
                    let w = _mm256_loadu_si256(codes.as_ptr().add(blk * BLOCK).cast());
                    _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w))
                };
                let dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                let [d, m] = *scales.get_unchecked(blk);
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * e), dot, acc[r]);
                offset[r] += m * es;
            }
        }
        for r in 0..N {
            out[r] = hsum(acc[r]) + offset[r];
        }
    }

    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }
}
