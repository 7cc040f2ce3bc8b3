//! Causal attention on the CPU in plain loops over the KV cache's own rows
//! ([`BatchNet`](super::batch::BatchNet) uses it for every pass, a prompt's first included).
//!
//! Why its own loops: a decode step of a small model is dominated by the cost of dispatching
//! tensor ops, not by arithmetic, and attention is most of a layer's ops; a long prompt's
//! first pass with tensor ops holds `heads · n²` scores (and as big a mask) and computes the
//! half the mask throws away; and a row must come out the same bits whether its token was run
//! alone or with others (a speculative draft is verified in one pass and must give the logits of
//! one-token steps, see `decode::speculate`). Each row here is computed by the same loops in
//! the same order over exactly its own keys (those up to its position), whatever else is in
//! the pass: its arithmetic depends on its position alone.
//!
//! Work items are (head, block of [`ROW_BLOCK`] rows), split over candle's CPU pool
//! (`--threads`), each computed whole by one thread, so the split changes no bit. A block's rows
//! go through the keys and values [`KEY_CHUNK`] at a time, so each chunk is read from cache once
//! for all of them.
//!
//! Layouts (contiguous f32): `q` `(heads, n, d)` (the new rows' queries, rotated), each key/value
//! head's keys and values `(total, d)` (the cache with the new rows appended; `total = pos + n`).
//! The result is `(n, heads · d)`. Query head `h` reads key/value head `h / (heads / kv_heads)`.

use super::qblocks::SharedOut;

/// Causal attention of the pass's rows (see the module doc), with the AVX2 loops if `avx2`
/// (the caller vouches the CPU has AVX2 and FMA: [`qblocks::has_avx2`](super::qblocks::has_avx2)),
/// else the portable ones: `q` is `(heads, n, d)`, `keys[h]` and `values[h]` are key/value head
/// `h`'s `(pos + n, d)`; the result is `(n, heads · d)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn attend_rows(
    avx2: bool,
    q: &[f32],
    keys: &[&[f32]],
    values: &[&[f32]],
    heads: usize,
    d: usize,
    n: usize,
    pos: usize,
) -> Vec<f32> {
    let (total, kv_heads) = (pos + n, keys.len());
    assert!(
        q.len() == heads * n * d
            && kv_heads > 0
            && heads % kv_heads == 0
            && values.len() == kv_heads
            && keys.iter().chain(values).all(|x| x.len() == total * d)
    );
    let group = heads / kv_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![0f32; n * heads * d];
    let dst = SharedOut(out.as_mut_ptr());
    let blocks = n.div_ceil(ROW_BLOCK);
    // Work items are (head, block of rows) pairs, split over candle's CPU pool (the forward pass
    // runs on one of its threads); each writes its own rows' `d` outputs of its head.
    let work = |items: std::ops::Range<usize>| {
        let mut scores = vec![0f32; ROW_BLOCK * total];
        let mut ys = vec![0f32; ROW_BLOCK * d];
        for item in items {
            let (h, b) = (item / blocks, item % blocks);
            let rows = b * ROW_BLOCK..((b + 1) * ROW_BLOCK).min(n);
            let kvh = h / group;
            let block = Block {
                q: &q[(h * n + rows.start) * d..(h * n + rows.end) * d],
                keys: keys[kvh],
                vals: values[kvh],
                d,
                first: pos + rows.start,
                scale,
            };
            let ys = &mut ys[..rows.len() * d];
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the CPU has AVX2 and FMA (the caller's word).
                unsafe { block.attend_avx2(&mut scores, ys) };
            } else {
                block.attend(&mut scores, ys);
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = avx2;
                block.attend(&mut scores, ys);
            }
            for (i, y) in rows.zip(ys.chunks_exact(d)) {
                // SAFETY: item (h, b) owns `out[(i·heads + h)·d ..][..d]` for its rows `i`,
                // inside `out` (`n·heads·d` long); items are disjoint and the pool joins before
                // `out` is read.
                unsafe { std::ptr::copy_nonoverlapping(y.as_ptr(), dst.at((i * heads + h) * d), d) };
            }
        }
    };
    candle_core::utils::barrier_pool().execute_chunked(heads * blocks, work);
    out
}

/// Rows of one head attended together: each chunk of keys (and of values) is read once for
/// all of them, from cache, rather than once per row from memory.
const ROW_BLOCK: usize = 8;

/// Keys (and values) a block's rows go through at a time (16 KiB of keys at `d` = 64, half of a
/// core's L1 data cache on current x86 cores). A multiple of 4, so the groups of four keys
/// [`Block::dots`] takes are the same whatever the chunks: a row's arithmetic depends on its
/// position alone.
const KEY_CHUNK: usize = 64;

/// Consecutive query rows of one head and the keys and values they attend over: row `k` (at
/// position `first + k`) sees keys `0..=first + k`.
struct Block<'a> {
    /// The rows' queries, `d` each.
    q: &'a [f32],
    /// Every key of the head's cache, `d` each (at least `first + rows`).
    keys: &'a [f32],
    vals: &'a [f32],
    /// Values per query, key and value.
    d: usize,
    first: usize,
    scale: f32,
}

impl Block<'_> {
    /// [`attend`](Self::attend), compiled for AVX2 (the same loops, wider registers, the
    /// scores by [`avx2::dots`]): a process takes one of the two for every row, so a row's bits
    /// do not depend on how rows were grouped into passes or blocks.
    ///
    /// Safety: the CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn attend_avx2(&self, scores: &mut [f32], ys: &mut [f32]) {
        self.attend_with::<true>(scores, ys)
    }

    /// `ys[k] = softmax(scale · K q_k) · V` over row `k`'s keys, for every row; `scores`
    /// (`ROW_BLOCK` rows of at least the keys' count) is scratch.
    fn attend(&self, scores: &mut [f32], ys: &mut [f32]) {
        self.attend_with::<false>(scores, ys)
    }

    /// [`attend`](Self::attend), the scores by [`avx2::dots`] if `AVX2` (which the caller
    /// vouches the CPU has).
    #[inline(always)]
    fn attend_with<const AVX2: bool>(&self, scores: &mut [f32], ys: &mut [f32]) {
        let d = self.d;
        let rows = self.q.len() / d;
        let total = self.keys.len() / d;
        assert!(
            (1..=ROW_BLOCK).contains(&rows)
                && ys.len() == rows * d
                && self.first + rows <= total
                && scores.len() >= rows * total
        );
        let len = |k: usize| self.first + k + 1;
        let chunks = (0..len(rows - 1)).step_by(KEY_CHUNK);
        for c in chunks.clone() {
            let mut k = (0..rows).find(|&k| c < len(k)).unwrap_or(rows);
            while k < rows {
                let end = (c + KEY_CHUNK).min(len(k));
                #[cfg(target_arch = "x86_64")]
                if AVX2 && k + 1 < rows && end == c + KEY_CHUNK {
                    // Rows k and k + 1 (which sees more) both see the whole chunk: together,
                    // each key loaded once for both (the same bits as one row at a time).
                    let (q0, q1) = (&self.q[k * d..(k + 1) * d], &self.q[(k + 1) * d..(k + 2) * d]);
                    for j in (c..end).step_by(4) {
                        let four = [0, 1, 2, 3].map(|t| &self.keys[(j + t) * d..(j + t + 1) * d]);
                        // SAFETY: `AVX2` only where the CPU has AVX2 and FMA (`attend_avx2`).
                        let [s0, s1] = unsafe { avx2::dots::<2>([q0, q1], four) };
                        for (r, s) in [s0, s1].into_iter().enumerate() {
                            let at = (k + r) * total + j;
                            for (o, v) in scores[at..at + 4].iter_mut().zip(s) {
                                *o = v * self.scale;
                            }
                        }
                    }
                    k += 2;
                    continue;
                }
                let q = &self.q[k * d..(k + 1) * d];
                self.dots::<AVX2>(q, c..end, &mut scores[k * total + c..k * total + end]);
                k += 1;
            }
        }
        let mut inv = [0f32; ROW_BLOCK];
        for (k, inv) in inv.iter_mut().enumerate().take(rows) {
            let s = &mut scores[k * total..k * total + len(k)];
            let max = max8(s);
            for s in s.iter_mut() {
                *s = exp_nonpositive(*s - max);
            }
            *inv = 1.0 / sum8(s);
        }
        ys.fill(0.0);
        for c in chunks {
            for k in (0..rows).filter(|&k| c < len(k)) {
                let end = (c + KEY_CHUNK).min(len(k));
                let (p, y) = (&scores[k * total + c..k * total + end], &mut ys[k * d..(k + 1) * d]);
                #[cfg(target_arch = "x86_64")]
                if AVX2 && d % 8 == 0 {
                    // SAFETY: `AVX2` only where the CPU has AVX2 and FMA (`attend_avx2`).
                    unsafe { avx2::weigh(p, &self.vals[c * d..end * d], y) };
                    continue;
                }
                self.weigh(p, c, y);
            }
        }
        for (y, inv) in ys.chunks_exact_mut(d).zip(inv) {
            for o in y {
                *o *= inv;
            }
        }
    }

    /// `out[j - keys.start] = scale · q·key_j` for `j` in `keys` (`keys.start` a multiple of
    /// 4): four keys at a time (independent sums keep the multipliers busy), the last `< 4`
    /// of a row alone.
    #[inline(always)]
    fn dots<const AVX2: bool>(&self, q: &[f32], keys: std::ops::Range<usize>, out: &mut [f32]) {
        let d = q.len();
        let key = |j: usize| &self.keys[j * d..(j + 1) * d];
        let fours = keys.start + keys.len() / 4 * 4;
        for (j, s) in (keys.start..fours).step_by(4).zip(out.chunks_exact_mut(4)) {
            let four = [key(j), key(j + 1), key(j + 2), key(j + 3)];
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `AVX2` only where the CPU has AVX2 and FMA (`attend_avx2`).
            let dots = if AVX2 { unsafe { avx2::dots::<1>([q], four)[0] } } else { dot4(q, four) };
            #[cfg(not(target_arch = "x86_64"))]
            let dots = dot4(q, four);
            for (s, v) in s.iter_mut().zip(dots) {
                *s = v * self.scale;
            }
        }
        for (j, s) in (fours..keys.end).zip(&mut out[fours - keys.start..]) {
            *s = dot(q, key(j)) * self.scale;
        }
    }

    /// `y += Σ p[j] · val_{first + j}`, values from `first` (a multiple of 4) on: four at a
    /// time (a quarter of the loads and stores of `y`), the last `< 4` alone, in order.
    #[inline(always)]
    fn weigh(&self, p: &[f32], first: usize, y: &mut [f32]) {
        let d = y.len();
        let val = |j: usize| &self.vals[(first + j) * d..(first + j + 1) * d];
        let fours = p.len() / 4 * 4;
        for (j, p) in (0..fours).step_by(4).zip(p.chunks_exact(4)) {
            let (v0, v1, v2, v3) = (val(j), val(j + 1), val(j + 2), val(j + 3));
            for ((((o, a), b), c), e) in y.iter_mut().zip(v0).zip(v1).zip(v2).zip(v3) {
                *o += p[0] * a + p[1] * b + p[2] * c + p[3] * e;
            }
        }
        for (j, &p) in p.iter().enumerate().skip(fours) {
            for (o, &x) in y.iter_mut().zip(val(j)) {
                *o += p * x;
            }
        }
    }
}

/// `dot(a, b[k])` for the four `b[k]`, interleaved: the same operations in the same order for
/// each, so the same bits.
#[inline(always)]
fn dot4(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
    let rest = a.len() / 8 * 8;
    let (mut l0, mut l1, mut l2, mut l3) = ([0f32; 8], [0f32; 8], [0f32; 8], [0f32; 8]);
    let eight = |s: &[f32], c: usize| -> [f32; 8] { s[c * 8..c * 8 + 8].try_into().expect("8 values") };
    for c in 0..rest / 8 {
        let (x, y0, y1, y2, y3) = (eight(a, c), eight(b[0], c), eight(b[1], c), eight(b[2], c), eight(b[3], c));
        for l in 0..8 {
            l0[l] += x[l] * y0[l];
            l1[l] += x[l] * y1[l];
            l2[l] += x[l] * y2[l];
            l3[l] += x[l] * y3[l];
        }
    }
    let lanes = [l0, l1, l2, l3];
    std::array::from_fn(|k| {
        let mut s = lanes[k].iter().sum::<f32>();
        for (x, y) in a[rest..].iter().zip(&b[k][rest..]) {
            s += x * y;
        }
        s
    })
}

/// `Σ a·b` in eight lanes (the compiler vectorizes it), then the lanes in a fixed order.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            lanes[l] += x[l] * y[l];
        }
    }
    let mut s = lanes.iter().sum::<f32>();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// `out[r][k] = Σ q[r]·keys[k]` (all as long), `R` query rows by four keys: one FMA chain
    /// per pair in 8 lanes, the lanes summed by a fixed tree, the last `< 8` values in order. A
    /// pair's operations are the same whatever `R` (each key loaded once for the `R` rows), so
    /// `dots::<2>` gives each row the bits `dots::<1>` would.
    ///
    /// Safety: the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dots<const R: usize>(q: [&[f32]; R], keys: [&[f32]; 4]) -> [[f32; 4]; R] {
        let d = keys[0].len();
        assert!(keys.iter().all(|k| k.len() == d) && q.iter().all(|q| q.len() == d));
        let full = d / 8 * 8;
        let mut acc = [[_mm256_setzero_ps(); 4]; R];
        for c in (0..full).step_by(8) {
            // SAFETY (all loads): `c + 8 ≤ d`, the length of each key and query.
            let k: [__m256; 4] = std::array::from_fn(|t| _mm256_loadu_ps(keys[t].as_ptr().add(c)));
            for (acc, q) in acc.iter_mut().zip(q) {
                let x = _mm256_loadu_ps(q.as_ptr().add(c));
                for (acc, k) in acc.iter_mut().zip(k) {
                    *acc = _mm256_fmadd_ps(x, k, *acc);
                }
            }
        }
        let mut out = [[0f32; 4]; R];
        for ((out, [k0, k1, k2, k3]), q) in out.iter_mut().zip(acc).zip(q) {
            // Lane sums of the four: hadd pairs within each 128-bit half, then the halves.
            let s = _mm256_hadd_ps(_mm256_hadd_ps(k0, k1), _mm256_hadd_ps(k2, k3));
            let s = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
            _mm_storeu_ps(out.as_mut_ptr(), s);
            for (o, key) in out.iter_mut().zip(keys) {
                for (x, y) in q[full..].iter().zip(&key[full..]) {
                    *o += x * y;
                }
            }
        }
        out
    }

    /// `y += Σ p[j] · vals[j]` (rows of `y.len()`, a multiple of 8), in order of `j`: `y` in
    /// stripes of up to 64 values held in registers across the values.
    ///
    /// Safety: the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn weigh(p: &[f32], vals: &[f32], y: &mut [f32]) {
        let d = y.len();
        assert!(d % 8 == 0 && vals.len() == p.len() * d);
        for at in (0..d).step_by(64) {
            match (d - at).min(64) / 8 {
                8 => stripe::<8>(p, vals, at, y),
                7 => stripe::<7>(p, vals, at, y),
                6 => stripe::<6>(p, vals, at, y),
                5 => stripe::<5>(p, vals, at, y),
                4 => stripe::<4>(p, vals, at, y),
                3 => stripe::<3>(p, vals, at, y),
                2 => stripe::<2>(p, vals, at, y),
                _ => stripe::<1>(p, vals, at, y),
            }
        }
    }

    /// [`weigh`] for `y[at..at + 8 · W]`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn stripe<const W: usize>(p: &[f32], vals: &[f32], at: usize, y: &mut [f32]) {
        let d = y.len();
        assert!(at + 8 * W <= d && vals.len() == p.len() * d);
        // SAFETY (all loads and stores): `at + 8 · W ≤ d`, and value `j` is
        // `vals[j · d..(j + 1) · d]`, `j < p.len()`.
        let mut acc: [__m256; W] = std::array::from_fn(|c| _mm256_loadu_ps(y.as_ptr().add(at + 8 * c)));
        for (j, &pj) in p.iter().enumerate() {
            let w = _mm256_set1_ps(pj);
            let v = vals.as_ptr().add(j * d + at);
            for (c, acc) in acc.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(w, _mm256_loadu_ps(v.add(8 * c)), *acc);
            }
        }
        for (c, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(y.as_mut_ptr().add(at + 8 * c), *acc);
        }
    }
}

/// The largest of `xs` (not NaN), in eight lanes (the compiler vectorizes it).
#[inline(always)]
fn max8(xs: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..8 {
            lanes[l] = if c[l] > lanes[l] { c[l] } else { lanes[l] };
        }
    }
    lanes.iter().chain(rest).fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m })
}

/// `Σ xs` in eight lanes, then the lanes in a fixed order (the compiler vectorizes it).
#[inline(always)]
fn sum8(xs: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..8 {
            lanes[l] += c[l];
        }
    }
    lanes.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

/// `e^x` for `x ≤ 0` (a softmax's `s - max`), within 2 ulp, in arithmetic the compiler
/// vectorizes (no call to `expf`): `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, `e^r` by its degree-6
/// Taylor polynomial, `2^n` built in the exponent bits. Below -87 (where `e^x` leaves the normal
/// floats, under 1.7e-38) it is 0, as is a term that small beside a softmax's largest (1).
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2^23 rounds to an integer (ties to even) for |v| < 2^22.
    const ROUND: f32 = 12_582_912.0;
    let x = if x > -87.0 { x } else { -87.0 };
    let t = x * std::f32::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // n ∈ [-126, 0] is `t`'s mantissa less ROUND's (integer arithmetic, which vectorizes where
    // a float-to-int cast may not); 2^n is a normal float, its exponent bits `n + 127`.
    let n_int = t.to_bits() as i32 - ROUND.to_bits() as i32;
    let two_n = f32::from_bits(((n_int + 127) as u32) << 23);
    let e = p * two_n;
    if x <= -87.0 {
        0.0
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;

    #[test]
    fn the_exponential_is_within_a_few_ulp_and_dot4_is_dot() {
        let mut worst = 0f64;
        for i in 0..=200_000 {
            let x = -86.99 * i as f32 / 200_000.0;
            let want = (x as f64).exp();
            worst = worst.max(((exp_nonpositive(x) as f64) - want).abs() / want);
        }
        assert!(worst < 4e-7, "relative error {worst}");
        assert_eq!((exp_nonpositive(0.0), exp_nonpositive(-88.0), exp_nonpositive(f32::NEG_INFINITY)), (1.0, 0.0, 0.0));
        let a: Vec<f32> = (0..67).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<Vec<f32>> = (0..4).map(|k| (0..67).map(|i| ((i * (k + 2)) as f32 * 0.11).cos()).collect()).collect();
        let got = dot4(&a, [&b[0], &b[1], &b[2], &b[3]]);
        for k in 0..4 {
            assert_eq!(got[k].to_bits(), dot(&a, &b[k]).to_bits());
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn two_rows_at_once_are_each_the_bits_of_one() {
        if !super::super::qblocks::has_avx2() {
            return;
        }
        for d in [64, 72, 5] {
            let v = |seed: usize| -> Vec<f32> { (0..d).map(|i| ((i * 7 + seed * 13) as f32 * 0.21).sin()).collect() };
            let (q0, q1, keys) = (v(1), v(2), [v(3), v(4), v(5), v(6)]);
            let four = [&keys[0][..], &keys[1], &keys[2], &keys[3]];
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            let (pair, a, b) = unsafe {
                (avx2::dots::<2>([&q0, &q1], four), avx2::dots::<1>([&q0], four), avx2::dots::<1>([&q1], four))
            };
            assert_eq!(pair.map(|r| r.map(f32::to_bits)), [a[0], b[0]].map(|r| r.map(f32::to_bits)));
            for (t, key) in keys.iter().enumerate() {
                assert!((pair[0][t] - dot(&q0, key)).abs() < 1e-5);
            }
        }
    }

    /// The loops against attention written with tensor ops (masked softmax), on random values;
    /// and a row is the same bits alone or in a pass with others.
    #[test]
    fn rows_match_tensor_attention_and_do_not_depend_on_the_pass() -> candle_core::Result<()> {
        // Short rows; and rows past several whole chunks of keys, in blocks that start on
        // either side of a chunk's end (rows taken in pairs there), with a remainder of keys.
        for (heads, kv_heads, d, pos, n) in [(6, 2, 16, 5, 4), (4, 2, 64, 120, 21), (3, 3, 72, 0, 70)] {
            check_rows(heads, kv_heads, d, pos, n)?;
        }
        Ok(())
    }

    fn check_rows(heads: usize, kv_heads: usize, d: usize, pos: usize, n: usize) -> candle_core::Result<()> {
        let paths = if super::super::qblocks::has_avx2() { vec![false, true] } else { vec![false] };
        for avx2 in paths {
            check_rows_on(avx2, heads, kv_heads, d, pos, n)?;
        }
        Ok(())
    }

    fn check_rows_on(
        avx2: bool,
        heads: usize,
        kv_heads: usize,
        d: usize,
        pos: usize,
        n: usize,
    ) -> candle_core::Result<()> {
        // The loops on the tensors' data (keys and values of the first `len` positions).
        let attend_rows = |q: &Tensor, k: &Tensor, v: &Tensor, n: usize, pos: usize| -> candle_core::Result<Tensor> {
            let len = pos + n;
            let (k, v) = (k.narrow(1, 0, len)?, v.narrow(1, 0, len)?);
            let heads_of = |t: &Tensor| -> candle_core::Result<Vec<Vec<f32>>> {
                (0..kv_heads).map(|h| t.narrow(0, h, 1)?.flatten_all()?.to_vec1::<f32>()).collect()
            };
            let (ks, vs) = (heads_of(&k)?, heads_of(&v)?);
            let (ks, vs): (Vec<&[f32]>, Vec<&[f32]>) =
                (ks.iter().map(|x| &x[..]).collect(), vs.iter().map(|x| &x[..]).collect());
            let q = q.flatten_all()?.to_vec1::<f32>()?;
            let y = super::attend_rows(avx2, &q, &ks, &vs, heads, d, n, pos);
            Tensor::from_vec(y, (n, heads * d), &Device::Cpu)
        };
        let total = pos + n;
        let dev = Device::Cpu;
        let q = Tensor::randn(0f32, 1.0, (heads, n, d), &dev)?;
        let k = Tensor::randn(0f32, 1.0, (kv_heads, total, d), &dev)?;
        let v = Tensor::randn(0f32, 1.0, (kv_heads, total, d), &dev)?;
        let got = attend_rows(&q, &k, &v, n, pos)?;
        let group = heads / kv_heads;
        for i in 0..n {
            for h in 0..heads {
                let qi = q.narrow(0, h, 1)?.narrow(1, i, 1)?.reshape((1, d))?;
                let len = pos + i + 1;
                let ki = k.narrow(0, h / group, 1)?.narrow(1, 0, len)?.reshape((len, d))?;
                let vi = v.narrow(0, h / group, 1)?.narrow(1, 0, len)?.reshape((len, d))?;
                let att = (qi.matmul(&ki.t()?)? / (d as f64).sqrt())?;
                let att = candle_nn::ops::softmax_last_dim(&att)?;
                let want = att.matmul(&vi)?.flatten_all()?.to_vec1::<f32>()?;
                let row = got.narrow(0, i, 1)?.narrow(1, h * d, d)?.flatten_all()?.to_vec1::<f32>()?;
                for (a, b) in row.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-5, "avx2 {avx2}: row {i} head {h}: {a} vs {b}");
                }
            }
        }
        // Each row alone (a pass of one token at its position, over the cache up to it) is
        // the same bits.
        for i in 0..n {
            let len = pos + i + 1;
            let q_i = q.narrow(1, i, 1)?.contiguous()?;
            let alone = attend_rows(&q_i, &k, &v, 1, len - 1)?;
            let want = got.narrow(0, i, 1)?.flatten_all()?.to_vec1::<f32>()?;
            assert_eq!(alone.flatten_all()?.to_vec1::<f32>()?, want, "row {i} alone");
        }
        Ok(())
    }
}
