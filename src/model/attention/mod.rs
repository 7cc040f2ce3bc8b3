//! Causal attention on the CPU in plain loops over the KV cache's own rows
//! ([`BatchNet`](super::batch::BatchNet) uses it for every pass, a prompt's first included).
//!
//! Why its own loops: a decode step of a small model is dominated by the cost of dispatching
//! tensor ops, not by arithmetic, and attention is most of a layer's ops; a long prompt's
//! first pass with tensor ops holds `heads · n²` scores (and as big a mask) and computes the
//! half the mask throws away; and a row must come out the same bits whether its token was run
//! alone or with others (a speculative draft is verified in one pass and must give the logits of
//! one-token steps, see `decode::speculate`). Each row here is computed by the same arithmetic
//! in the same order over its own keys (those up to its position), whatever else is in the pass
//! and however rows are grouped: a score is one chain of multiply-adds over the dimensions, a
//! value lane one chain over the keys in order, so its bits depend on its position alone.
//!
//! Keys and values are f32 or half floats ([`Kv`]; a GGUF model's cache holds halves, as
//! llama.cpp's does by default: a decode step over a long cache is bound by reading it from
//! memory, and halves are half the bytes). A half is widened to f32, exactly, where it is
//! loaded; all arithmetic is f32.
//!
//! Keys are kept in blocks of [`BLOCK`] positions, transposed ([`Keys`]): one load holds a
//! dimension of 8 keys, so a query's scores against them are 8 lanes of multiply-adds with no
//! sums across lanes, and one load serves up to 4 query rows. Values are kept by position.
//!
//! Work items are (query heads, block of [`ROW_BLOCK`] positions): the heads that read one
//! key/value head (grouped-query attention) go together where there is an item for every
//! thread, else one head per item (a decode step's few rows, with few key/value heads); the items are split
//! over candle's CPU pool (`--threads`), each computed whole by one thread. An item's rows go
//! through the keys and values [`KEY_CHUNK`] at a time, so each chunk is read from cache once
//! for all of them.
//!
//! Layouts (contiguous): `q` `(heads, n, d)` f32 (the new rows' queries, rotated); per
//! key/value head, its keys as [`Keys`] and its values `(total, d)` (the cache with the new rows
//! appended; `total = pos + n`). The result is `(n, heads · d)`. Query head `h` reads
//! key/value head `h / (heads / kv_heads)`.

use std::borrow::Cow;

use super::qblocks::SharedOut;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(test)]
mod tests;

/// Positions per key block.
pub(super) const BLOCK: usize = 8;

/// A key or value as the cache holds it: f32, or a half float (IEEE binary16) rounded to
/// nearest from the f32 the projection computed.
pub(super) trait Kv: Copy + Send + Sync + 'static {
    /// Is it a half (the AVX2 kernels widen 8 at a load)?
    const HALF: bool;
    const ZERO: Self;
    /// As an f32, exactly.
    fn widen(self) -> f32;
    /// `xs` as the cache holds them (a half: the nearest, and past the largest half, 65,504,
    /// that half, not an infinity: a score against an infinite key would be NaN); f32s as
    /// they are, not copied.
    fn narrow(xs: &[f32]) -> Cow<'_, [Self]>;
}

impl Kv for f32 {
    const HALF: bool = false;
    const ZERO: f32 = 0.0;
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    fn narrow(xs: &[f32]) -> Cow<'_, [f32]> {
        Cow::Borrowed(xs)
    }
}

impl Kv for half::f16 {
    const HALF: bool = true;
    const ZERO: half::f16 = half::f16::ZERO;
    #[inline(always)]
    fn widen(self) -> f32 {
        widen_half(self)
    }
    fn narrow(xs: &[f32]) -> Cow<'_, [half::f16]> {
        use half::slice::HalfFloatSliceExt;
        let mut out = vec![half::f16::ZERO; xs.len()];
        // Clamped a chunk at a time on the stack, then converted (vectorized) into place.
        let mut clamped = [0f32; 64];
        for (o, x) in out.chunks_mut(64).zip(xs.chunks(64)) {
            let c = &mut clamped[..x.len()];
            c.iter_mut().zip(x).for_each(|(c, x)| *c = x.clamp(-65_504.0, 65_504.0));
            o.convert_from_f32_slice(c);
        }
        Cow::Owned(out)
    }
}

/// One key/value head's keys at positions `0..len`, in blocks of [`BLOCK`] positions, each
/// transposed: dimension `c` of position `8b + t` is element `c · 8 + t` of block `b`
/// (`8 · d` values).
pub(super) struct Keys<'a, T> {
    /// The whole blocks (`len / 8` of them), one after another.
    pub(super) whole: &'a [T],
    /// The block `len` ends inside (if it is not a multiple of 8): its first `len % 8` lanes,
    /// zeros in the others. Empty otherwise.
    pub(super) tail: Vec<T>,
    pub(super) len: usize,
}

impl<T> Keys<'_, T> {
    /// Block `b` (`8 · d` values).
    fn block(&self, b: usize, d: usize) -> &[T] {
        let whole = self.len / BLOCK;
        if b < whole {
            &self.whole[b * BLOCK * d..(b + 1) * BLOCK * d]
        } else {
            assert!(b == whole && !self.tail.is_empty(), "block {b} of {} positions", self.len);
            &self.tail
        }
    }
}

/// One pass's attention (see the module doc's layouts): `q` is `(heads, n, d)`, `keys[h]`
/// and `values[h]` (`(pos + n, d)`) are key/value head `h`'s.
#[derive(Clone, Copy)]
pub(super) struct Pass<'a, T> {
    pub(super) q: &'a [f32],
    pub(super) keys: &'a [Keys<'a, T>],
    pub(super) values: &'a [&'a [T]],
    pub(super) heads: usize,
    pub(super) d: usize,
    pub(super) n: usize,
    pub(super) pos: usize,
}

impl<T: Kv> Pass<'_, T> {
    /// Causal attention of the pass's rows, `(n, heads · d)`, with the AVX2 loops if `avx2`
    /// (the caller vouches the CPU has AVX2, FMA and F16C:
    /// [`qblocks::has_avx2`](super::qblocks::has_avx2)), else the portable ones.
    pub(super) fn attend(&self, avx2: bool) -> Vec<f32> {
        let Pass { q, keys, values, heads, d, n, pos } = *self;
        let (total, kv_heads) = (pos + n, keys.len());
        let tail = if total % BLOCK == 0 { 0 } else { BLOCK * d };
        assert!(
            q.len() == heads * n * d
                && kv_heads > 0
                && heads % kv_heads == 0
                && values.len() == kv_heads
                && values.iter().all(|v| v.len() == total * d)
                && keys
                    .iter()
                    .all(|k| k.len == total && k.whole.len() == total / BLOCK * BLOCK * d && k.tail.len() == tail)
        );
        // A key/value head's whole group of query heads per item where there is an item for
        // every thread, else one head per item. Grouped, a key is loaded once for the group's
        // rows: a decode step over a long cache reads it from memory once, not once per head.
        let group = heads / kv_heads;
        let per_item = if kv_heads * n.div_ceil(ROW_BLOCK) >= pool_threads() { group } else { 1 };
        self.attend_items(avx2, per_item)
    }

    /// [`attend`](Self::attend) with `per_item` query heads per work item (a divisor of the
    /// group).
    fn attend_items(&self, avx2: bool, per_item: usize) -> Vec<f32> {
        let Pass { q, keys, values, heads, d, n, pos } = *self;
        let (total, group) = (pos + n, heads / keys.len());
        assert!(group % per_item == 0);
        let scale = 1.0 / (d as f32).sqrt();
        let mut out = vec![0f32; n * heads * d];
        let dst = SharedOut(out.as_mut_ptr());
        let blocks = n.div_ceil(ROW_BLOCK);
        let sets = heads / per_item;
        let stride = total.next_multiple_of(BLOCK);
        // Work items are (set of `per_item` query heads, block of positions) pairs, split over
        // candle's CPU pool (the forward pass runs on one of its threads); each writes its own
        // rows' `d` outputs of its heads.
        let work = |items: std::ops::Range<usize>| {
            let mut scores = vec![0f32; per_item * ROW_BLOCK * stride];
            let mut ys = vec![0f32; per_item * ROW_BLOCK * d];
            let mut rows = Vec::with_capacity(per_item * ROW_BLOCK);
            for item in items {
                let (set, b) = (item / blocks, item % blocks);
                let (first_head, positions) = (set * per_item, b * ROW_BLOCK..((b + 1) * ROW_BLOCK).min(n));
                let kvh = first_head / group;
                // Position-major, so rows that see as many keys are neighbours.
                rows.clear();
                for i in positions.clone() {
                    for h in first_head..first_head + per_item {
                        rows.push(Row { q: &q[(h * n + i) * d..(h * n + i + 1) * d], len: pos + i + 1 });
                    }
                }
                let item = Item { rows: &rows, keys: &keys[kvh], vals: values[kvh], d, scale, stride };
                let ys = &mut ys[..rows.len() * d];
                #[cfg(target_arch = "x86_64")]
                if avx2 {
                    // SAFETY: the CPU has AVX2, FMA and F16C (the caller's word).
                    unsafe { item.attend_avx2(&mut scores, ys) };
                } else {
                    item.attend(&mut scores, ys);
                }
                #[cfg(not(target_arch = "x86_64"))]
                {
                    let _ = avx2;
                    item.attend(&mut scores, ys);
                }
                let outputs =
                    positions.flat_map(|i| (first_head..first_head + per_item).map(move |h| (i * heads + h) * d));
                for (at, y) in outputs.zip(ys.chunks_exact(d)) {
                    // SAFETY: the item owns `out[(i·heads + h)·d ..][..d]` for its positions `i`
                    // and heads `h`, inside `out` (`n·heads·d` long); items are disjoint and the
                    // pool joins before `out` is read.
                    unsafe { std::ptr::copy_nonoverlapping(y.as_ptr(), dst.at(at), d) };
                }
            }
        };
        candle_core::utils::barrier_pool().execute_chunked(sets * blocks, work);
        out
    }
}

/// The threads of candle's CPU pool, read once (candle reads the environment and `/proc` on
/// every call, which cost a decode step of a small model ~10%).
fn pool_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(candle_core::utils::get_num_threads)
}

/// Positions per work item: each chunk of keys (and of values) is read once for all of an
/// item's rows, from cache, rather than once per row from memory.
const ROW_BLOCK: usize = 8;

/// Keys (and values) an item's rows go through at a time (16 KiB of keys at `d` = 64, half of
/// a core's L1 data cache on current x86 cores). A multiple of [`BLOCK`].
const KEY_CHUNK: usize = 64;

/// Query rows at most a key load serves ([`avx2::dots`], [`avx2::weigh`]).
const RUN: usize = 4;

/// `$go!(R)` with the run's length `$len` (1 to [`RUN`]) as the constant `R`.
macro_rules! by_run_length {
    ($len:expr, $go:ident) => {
        match $len {
            1 => $go!(1),
            2 => $go!(2),
            3 => $go!(3),
            _ => $go!(4),
        }
    };
}

/// One query row: its query (`d` values) and the keys it sees (`0..len`).
struct Row<'a> {
    q: &'a [f32],
    len: usize,
}

/// The rows of a work item, in order of position, and their key/value head.
struct Item<'a, T> {
    rows: &'a [Row<'a>],
    keys: &'a Keys<'a, T>,
    vals: &'a [T],
    d: usize,
    scale: f32,
    /// Scores per row in the scratch (`total` rounded up to a block).
    stride: usize,
}

impl<T: Kv> Item<'_, T> {
    /// [`attend`](Self::attend) with the AVX2 kernels ([`avx2::dots`], [`avx2::weigh`]): a
    /// process takes one of the two for every row, so a row's bits do not depend on how rows
    /// were grouped into passes or items.
    ///
    /// Safety: the CPU has AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn attend_avx2(&self, scores: &mut [f32], ys: &mut [f32]) {
        self.attend_with::<true>(scores, ys)
    }

    /// `ys[r] = softmax(scale · K q_r) · V` over row `r`'s keys, for every row; `scores`
    /// (`stride` per row) is scratch.
    fn attend(&self, scores: &mut [f32], ys: &mut [f32]) {
        self.attend_with::<false>(scores, ys)
    }

    #[inline(always)]
    fn attend_with<const AVX2: bool>(&self, scores: &mut [f32], ys: &mut [f32]) {
        let (d, rows, stride) = (self.d, self.rows, self.stride);
        let last = rows.last().expect("an item has rows").len;
        assert!(
            ys.len() == rows.len() * d
                && scores.len() >= rows.len() * stride
                && rows.windows(2).all(|w| w[0].len <= w[1].len)
                && last <= self.keys.len
        );
        let chunks = (0..last).step_by(KEY_CHUNK);
        // Scores: runs of up to `RUN` rows that see keys in the chunk, through the blocks the
        // run's longest sees (a shorter row's lanes past its keys are computed, never read).
        for c in chunks.clone() {
            let first = rows.iter().position(|r| r.len > c).expect("the last row sees the chunk");
            for start in (first..rows.len()).step_by(RUN) {
                let run = start..(start + RUN).min(rows.len());
                let end = (c + KEY_CHUNK).min(rows[run.end - 1].len).div_ceil(BLOCK);
                let mut b = c / BLOCK;
                while b < end {
                    let two = b + 1 < end;
                    self.dots::<AVX2>(run.clone(), b, two, scores);
                    b += if two { 2 } else { 1 };
                }
            }
        }
        for (row, s) in rows.iter().zip(scores.chunks_exact_mut(stride)) {
            let s = &mut s[..row.len];
            let max = max8(s);
            for s in s.iter_mut() {
                *s = exp_nonpositive(*s - max);
            }
        }
        // Values: runs of up to `RUN` neighbouring rows that end at the same key in the chunk.
        ys.fill(0.0);
        for c in chunks {
            let end = |r: usize| (c + KEY_CHUNK).min(rows[r].len);
            let mut r = rows.iter().position(|row| row.len > c).expect("the last row sees the chunk");
            while r < rows.len() {
                let mut e = r + 1;
                while e < rows.len() && e - r < RUN && end(e) == end(r) {
                    e += 1;
                }
                self.weigh::<AVX2>(r..e, c..end(r), scores, &mut ys[r * d..e * d]);
                r = e;
            }
        }
        for ((y, row), s) in ys.chunks_exact_mut(d).zip(rows).zip(scores.chunks_exact(stride)) {
            let inv = 1.0 / sum8(&s[..row.len]);
            for o in y {
                *o *= inv;
            }
        }
    }

    /// Scores of rows `run` (at most [`RUN`]) against key block `b`, and `b + 1` if `two`:
    /// `scores[r · stride + j] = scale · q_r·key_j` for the blocks' 8 or 16 positions `j`.
    #[inline(always)]
    fn dots<const AVX2: bool>(&self, run: std::ops::Range<usize>, b: usize, two: bool, scores: &mut [f32]) {
        let (d, stride) = (self.d, self.stride);
        let q = |r: usize| self.rows[r].q;
        let at = |r: usize| r * stride + b * BLOCK;
        let b0 = self.keys.block(b, d);
        #[cfg(target_arch = "x86_64")]
        if AVX2 {
            let width = if two { 2 * BLOCK } else { BLOCK };
            let mut outs =
                scores.chunks_exact_mut(stride).skip(run.start).map(|s| &mut s[b * BLOCK..b * BLOCK + width]);
            macro_rules! go {
                ($r:literal) => {{
                    let qs: [&[f32]; $r] = std::array::from_fn(|k| q(run.start + k));
                    let outs: [&mut [f32]; $r] = std::array::from_fn(|_| outs.next().expect("rows of the run"));
                    // SAFETY: `AVX2` only where the CPU has AVX2, FMA and F16C (`attend_avx2`).
                    if two {
                        unsafe { avx2::dots::<$r, 2, T>(qs, [b0, self.keys.block(b + 1, d)], self.scale, outs) }
                    } else {
                        unsafe { avx2::dots::<$r, 1, T>(qs, [b0], self.scale, outs) }
                    }
                }};
            }
            by_run_length!(run.len(), go);
            return;
        }
        // Portable: row by row, block by block; 8 lanes the compiler vectorizes.
        let blocks: &[&[T]] = if two { &[b0, self.keys.block(b + 1, d)] } else { &[b0] };
        for r in run {
            for (k, block) in blocks.iter().enumerate() {
                let mut acc = [0f32; BLOCK];
                for (x, lanes) in q(r).iter().zip(block.chunks_exact(BLOCK)) {
                    for (a, y) in acc.iter_mut().zip(lanes) {
                        *a += x * y.widen();
                    }
                }
                let at = at(r) + k * BLOCK;
                for (s, v) in scores[at..at + BLOCK].iter_mut().zip(acc) {
                    *s = v * self.scale;
                }
            }
        }
    }

    /// `ys[r] += Σ_j p_r[j] · val_j` for the rows `run` (all seeing keys `keys`) and `j` in
    /// `keys`, in order of `j`.
    #[inline(always)]
    fn weigh<const AVX2: bool>(
        &self,
        run: std::ops::Range<usize>,
        keys: std::ops::Range<usize>,
        scores: &[f32],
        ys: &mut [f32],
    ) {
        let d = self.d;
        let p = |r: usize| &scores[r * self.stride + keys.start..r * self.stride + keys.end];
        let vals = &self.vals[keys.start * d..keys.end * d];
        #[cfg(target_arch = "x86_64")]
        if AVX2 && d % 8 == 0 {
            macro_rules! go {
                ($r:literal) => {{
                    let ps: [&[f32]; $r] = std::array::from_fn(|k| p(run.start + k));
                    // SAFETY: `AVX2` only where the CPU has AVX2, FMA and F16C (`attend_avx2`).
                    unsafe { avx2::weigh::<$r, T>(ps, vals, ys) }
                }};
            }
            by_run_length!(run.len(), go);
            return;
        }
        for (r, y) in run.zip(ys.chunks_exact_mut(d)) {
            weigh(p(r), vals, y);
        }
    }
}

/// `y += Σ p[j] · vals[j]` (rows of `y.len()`): four values at a time (a quarter of the loads
/// and stores of `y`), the last `< 4` alone, in order.
#[inline(always)]
fn weigh<T: Kv>(p: &[f32], vals: &[T], y: &mut [f32]) {
    let d = y.len();
    let val = |j: usize| &vals[j * d..(j + 1) * d];
    let fours = p.len() / 4 * 4;
    for (j, p) in (0..fours).step_by(4).zip(p.chunks_exact(4)) {
        let (v0, v1, v2, v3) = (val(j), val(j + 1), val(j + 2), val(j + 3));
        for ((((o, a), b), c), e) in y.iter_mut().zip(v0).zip(v1).zip(v2).zip(v3) {
            *o += p[0] * a.widen() + p[1] * b.widen() + p[2] * c.widen() + p[3] * e.widen();
        }
    }
    for (j, &p) in p.iter().enumerate().skip(fours) {
        for (o, &x) in y.iter_mut().zip(val(j)) {
            *o += p * x.widen();
        }
    }
}

/// `x` as an f32, exactly (every half is one), in arithmetic the compiler vectorizes (no
/// branch, no call): the magnitude's bits moved to an f32's places and scaled by 2^112 (the
/// difference of the two exponent biases; this also normalizes a subnormal half), the sign put
/// back, and an infinity or NaN given the f32's all-ones exponent.
#[inline(always)]
fn widen_half(x: half::f16) -> f32 {
    let h = x.to_bits() as u32;
    let magnitude = f32::from_bits((h & 0x7fff) << 13) * f32::from_bits((127 + 112) << 23);
    let special = if h & 0x7c00 == 0x7c00 { 0x7f80_0000 } else { 0 };
    f32::from_bits(magnitude.to_bits() | special | (h & 0x8000) << 16)
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
