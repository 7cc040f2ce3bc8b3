//! The AVX2 kernels of [`attention`](super): scores against key blocks, values weighed into
//! registers. Each serves up to [`RUN`](super::RUN) query rows per load, and each row's
//! operations are the same whatever the others: one multiply-add chain per score (over the
//! dimensions in order) and per output lane (over the keys in order).

use std::arch::x86_64::*;

use super::{Kv, BLOCK};

/// `out[r][8b + t] = scale · q[r]·key_t` of block `b` ([`Keys`](super::Keys)' layout, `8 · d`
/// values): `R` rows by `B` blocks of 8 keys, one chain of `d` multiply-adds per lane, then
/// the scale.
///
/// Safety: the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dots<const R: usize, const B: usize, T: Kv>(
    q: [&[f32]; R],
    blocks: [&[T]; B],
    scale: f32,
    out: [&mut [f32]; R],
) {
    let d = q[0].len();
    assert!(
        q.iter().all(|q| q.len() == d)
            && blocks.iter().all(|b| b.len() == BLOCK * d)
            && out.iter().all(|o| o.len() == BLOCK * B)
    );
    let mut acc = [[_mm256_setzero_ps(); B]; R];
    for c in 0..d {
        // SAFETY (all loads): `c < d`; a block holds `8 · d` values.
        let k: [__m256; B] = std::array::from_fn(|b| load(blocks[b].as_ptr().add(c * BLOCK)));
        for (acc, q) in acc.iter_mut().zip(q) {
            let x = _mm256_set1_ps(*q.get_unchecked(c));
            for (acc, k) in acc.iter_mut().zip(k) {
                *acc = _mm256_fmadd_ps(x, k, *acc);
            }
        }
    }
    let scale = _mm256_set1_ps(scale);
    for (out, acc) in out.into_iter().zip(acc) {
        for (b, acc) in acc.into_iter().enumerate() {
            // SAFETY: `out` holds `8 · B` values.
            _mm256_storeu_ps(out.as_mut_ptr().add(b * BLOCK), _mm256_mul_ps(acc, scale));
        }
    }
}

/// `y[r] += Σ p[r][j] · vals[j]` for `R` rows (`y` holds them one after another, `d` each, a
/// multiple of 8), in order of `j`: `y` in stripes of 16 (then 8) values held in registers
/// across the values, each value loaded once for the `R` rows.
///
/// Safety: the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn weigh<const R: usize, T: Kv>(p: [&[f32]; R], vals: &[T], y: &mut [f32]) {
    let m = p[0].len();
    let d = y.len() / R;
    assert!(d % 8 == 0 && y.len() == R * d && vals.len() == m * d && p.iter().all(|p| p.len() == m));
    let mut at = 0;
    while at < d {
        if d - at >= 16 {
            stripe::<R, 2, T>(p, vals, at, y);
            at += 16;
        } else {
            stripe::<R, 1, T>(p, vals, at, y);
            at += 8;
        }
    }
}

/// [`weigh`] for `y[r · d + at..][..8 · W]` of every row `r`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn stripe<const R: usize, const W: usize, T: Kv>(p: [&[f32]; R], vals: &[T], at: usize, y: &mut [f32]) {
    let d = y.len() / R;
    assert!(at + 8 * W <= d && vals.len() == p[0].len() * d);
    let yp = y.as_mut_ptr();
    // SAFETY (all loads and stores): `at + 8 · W ≤ d`, row `r` of `y` is `y[r · d..(r + 1) · d]`,
    // and value `j` is `vals[j · d..(j + 1) · d]`, `j < p[r].len()`.
    let mut acc: [[__m256; W]; R] =
        std::array::from_fn(|r| std::array::from_fn(|c| _mm256_loadu_ps(yp.add(r * d + at + 8 * c))));
    for j in 0..p[0].len() {
        let v = vals.as_ptr().add(j * d + at);
        let v: [__m256; W] = std::array::from_fn(|c| load(v.add(8 * c)));
        for (acc, p) in acc.iter_mut().zip(p) {
            let w = _mm256_set1_ps(*p.get_unchecked(j));
            for (acc, v) in acc.iter_mut().zip(v) {
                *acc = _mm256_fmadd_ps(w, v, *acc);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        for (c, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(yp.add(r * d + at + 8 * c), *acc);
        }
    }
}

/// The 8 elements at `at`, as f32 (halves widened, exactly).
///
/// Safety: the CPU has AVX2 and F16C; `at` points at 8 readable elements.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn load<T: Kv>(at: *const T) -> __m256 {
    if T::HALF {
        _mm256_cvtph_ps(_mm_loadu_si128(at as *const __m128i))
    } else {
        _mm256_loadu_ps(at as *const f32)
    }
}
