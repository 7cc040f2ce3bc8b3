//! [`KvCache`]: the keys and values one sequence has fed so far, per layer.
//!
//! Off the CPU a layer is a pair of tensors that a pass replaces (concatenation makes new ones)
//! and never writes into. On the CPU it is [`KvRows`]: rows in memory sized ahead (doubling)
//! that a pass appends to in place, so a decode step writes its one new position instead of
//! copying the whole cache (with tensors, 215 MB per step at 4.7k tokens of SmolLM2). The rows
//! hold f32, or half floats where the network says so ([`BatchNet`](super::BatchNet)'s
//! `half_kv`: a GGUF model's, as llama.cpp's cache; half the bytes for a decode step to read).
//!
//! Clones share a layer's rows (a checkpoint, a fork, a beam), so each stays an independent
//! sequence by these rules:
//! - A cache reads positions `0..pos` of its layers, nothing else.
//! - [`KvRows::filled`] counts the positions some holder has claimed. While the rows are shared,
//!   every holder's `pos` is at most `filled`, and `filled` only grows.
//! - A pass writes positions `pos..pos + n` in place only where no other holder can read them:
//!   its cache holds the only handle, or it moves `filled` from exactly `pos` to `pos + n` (then
//!   every other holder reads below `pos`, and a second writer at `pos` finds `filled` moved).
//!   Otherwise it copies the first `pos` positions into new rows.
//! - A failed pass leaves `pos` and positions `0..pos` as they were (what it wrote at `pos` and
//!   after is never read), so it changes no cache.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};

use super::super::attention::{Keys, Kv, BLOCK};
use super::super::candle_error::candle_err;
use super::super::device::make_current;

/// The keys and values one sequence has fed so far, per layer; empty for a new sequence. A
/// clone is an independent checkpoint (see the module doc).
#[derive(Clone, Default)]
pub struct KvCache {
    /// Per layer; empty until the first pass.
    pub(super) layers: Vec<LayerKv>,
    pub(super) pos: usize,
}

/// One layer's keys and values.
#[derive(Clone)]
pub(super) enum LayerKv {
    /// `(1, kv_heads, pos, head_dim)` each, in the network's dtype (off the CPU).
    Tensors(Tensor, Tensor),
    /// f32 rows appended to in place (the CPU).
    Rows(Arc<KvRows<f32>>),
    /// Half-float rows appended to in place (the CPU, `half_kv`).
    Halves(Arc<KvRows<half::f16>>),
}

/// Bytes of [`KvRows`] alive in this process (every sequence's CPU cache, room ahead
/// included): the server's `/metrics` reports it.
static ROWS_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Bytes the KV caches of this process hold on the CPU now (keys and values of every layer of
/// every live sequence, checkpoint and fork, with the room each has sized ahead; caches on a
/// GPU are not counted).
pub fn kv_cache_cpu_bytes() -> usize {
    ROWS_BYTES.load(Ordering::Relaxed)
}

/// What [`LayerKv`] holds rows of: the variant for each element type.
pub(super) trait Element: Kv {
    fn rows_of(layer: &LayerKv) -> Option<&Arc<KvRows<Self>>>;
    fn layer(rows: Arc<KvRows<Self>>) -> LayerKv;
}

impl Element for f32 {
    fn rows_of(layer: &LayerKv) -> Option<&Arc<KvRows<f32>>> {
        match layer {
            LayerKv::Rows(rows) => Some(rows),
            _ => None,
        }
    }
    fn layer(rows: Arc<KvRows<f32>>) -> LayerKv {
        LayerKv::Rows(rows)
    }
}

impl Element for half::f16 {
    fn rows_of(layer: &LayerKv) -> Option<&Arc<KvRows<half::f16>>> {
        match layer {
            LayerKv::Halves(rows) => Some(rows),
            _ => None,
        }
    }
    fn layer(rows: Arc<KvRows<half::f16>>) -> LayerKv {
        LayerKv::Halves(rows)
    }
}

impl KvCache {
    /// Tokens in the cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Forgets the last `n` tokens (errors, changing nothing, if it holds fewer).
    pub fn truncate(&mut self, n: usize) -> Result<()> {
        if n > self.pos {
            return Err(Error::state(format!("cannot forget {n} tokens of a cache holding {}", self.pos)));
        }
        let keep = self.pos - n;
        let e = candle_err("truncating the KV cache");
        let layers = self
            .layers
            .iter()
            .map(|layer| match layer {
                LayerKv::Tensors(k, v) => Ok(LayerKv::Tensors(k.narrow(2, 0, keep)?, v.narrow(2, 0, keep)?)),
                // Rows past `pos` are never read.
                rows => Ok(rows.clone()),
            })
            .collect::<candle_core::Result<Vec<_>>>()
            .map_err(e)?;
        self.layers = layers;
        self.pos = keep;
        Ok(())
    }
}

impl Drop for KvCache {
    /// Makes a CUDA device's context current before the tensors go: freeing device memory needs
    /// it, cudarc's free does not ask for it, and the driver's error it records otherwise
    /// surfaced in another sequence's next pass (`CUDA_ERROR_INVALID_CONTEXT`). A server's
    /// sequence drops its cache on the request's own thread, which runs no pass.
    fn drop(&mut self) {
        if let Some(LayerKv::Tensors(k, _)) = self.layers.first() {
            let _ = make_current(k.device());
        }
    }
}

impl std::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KvCache({} tokens)", self.pos)
    }
}

impl LayerKv {
    /// The first `pos` positions as tensors `(1, kv_heads, pos, d)` in `dtype` on `device`
    /// (rows are copied out).
    pub(super) fn tensors(&self, pos: usize, dtype: DType, device: &Device) -> candle_core::Result<(Tensor, Tensor)> {
        match self {
            LayerKv::Tensors(k, v) => {
                Ok((k.to_device(device)?.to_dtype(dtype)?, v.to_device(device)?.to_dtype(dtype)?))
            }
            LayerKv::Rows(rows) => rows.tensors(pos, dtype, device),
            LayerKv::Halves(rows) => rows.tensors(pos, dtype, device),
        }
    }

    /// The rows of a cache at `pos` whose layer is `past` (`None` for an empty cache), with a
    /// pass's new keys and values appended (`(kv_heads, n, d)` each, f32, contiguous; stored as
    /// `T`): `past`'s own rows, written in place, where no other holder can read positions
    /// `pos..pos + n` (see the module doc); else new rows holding a copy of its first `pos`
    /// positions, with room to grow (to at most `max_positions`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append<T: Element>(
        past: Option<&LayerKv>,
        pos: usize,
        keys: &[f32],
        values: &[f32],
        kv_heads: usize,
        d: usize,
        max_positions: usize,
    ) -> candle_core::Result<Arc<KvRows<T>>> {
        let n = keys.len() / (kv_heads * d);
        if keys.len() != kv_heads * n * d || values.len() != keys.len() || pos + n > max_positions {
            candle_core::bail!("{} new keys for {kv_heads} heads of {d} at position {pos}", keys.len());
        }
        let rows = match past.map(|p| (p, T::rows_of(p))) {
            Some((_, Some(rows))) if rows.kv_heads == kv_heads && rows.d == d => {
                let fits = pos + n <= rows.capacity;
                // The cache's handle is the only one (nobody else can take one while this pass
                // holds the cache), or nobody has claimed past `pos`.
                let claimed = fits
                    && (Arc::strong_count(rows) == 1 && {
                        rows.filled.store(pos + n, Ordering::Release);
                        true
                    } || rows.filled.compare_exchange(pos, pos + n, Ordering::AcqRel, Ordering::Acquire).is_ok());
                if claimed {
                    rows.clone()
                } else {
                    Arc::new(KvRows::copy_of(rows, pos, pos + n, max_positions))
                }
            }
            Some((_, Some(_))) => candle_core::bail!("a cache's rows do not match the network's heads"),
            // Tensors, or rows of the other element type: copied into new rows.
            Some((other, None)) => {
                let (k, v) = other.tensors(pos, DType::F32, &Device::Cpu)?;
                let (k, v) = (k.flatten_all()?.to_vec1::<f32>()?, v.flatten_all()?.to_vec1::<f32>()?);
                let rows = KvRows::new(kv_heads, d, capacity(pos + n, 0, max_positions));
                // SAFETY: the rows are new, nobody else holds them.
                unsafe { rows.write(0, &k, &v) };
                rows.filled.store(pos + n, Ordering::Release);
                Arc::new(rows)
            }
            None if pos > 0 => candle_core::bail!("a cache at position {pos} has no rows"),
            None => {
                let rows = KvRows::new(kv_heads, d, capacity(pos + n, 0, max_positions));
                rows.filled.store(pos + n, Ordering::Release);
                Arc::new(rows)
            }
        };
        // SAFETY: positions `pos..pos + n` are this cache's: claimed above (only handle, or
        // `filled` moved from `pos`), or the rows are new.
        unsafe { rows.write(pos, keys, values) };
        Ok(rows)
    }
}

/// Room for `needed` positions: at least twice the old room (so appends copy `O(total)` in
/// all), a multiple of 64 the first time, not much more than `max_positions`; whole key blocks.
fn capacity(needed: usize, old: usize, max_positions: usize) -> usize {
    needed.next_multiple_of(64).max(2 * old).min(max_positions).max(needed).next_multiple_of(BLOCK)
}

#[derive(Clone, Copy)]
enum Part {
    Keys,
    Values,
}

/// One layer's keys and values on the CPU, as `T` (f32 or half floats), `capacity · d` values
/// per key/value head:
/// the values by position (head `h`'s at position `p` are `values[(h · capacity + p) · d..]
/// [..d]`), the keys in [`attention::Keys`]' blocks of 8 positions (dimension `c` of position
/// `p` at `(h · capacity + p - p % 8) · d + c · 8 + p % 8`). Shared by the caches that clone it;
/// written in place under the module doc's rules.
pub(super) struct KvRows<T> {
    kv_heads: usize,
    d: usize,
    /// Positions each head has room for.
    capacity: usize,
    keys: Box<[UnsafeCell<T>]>,
    values: Box<[UnsafeCell<T>]>,
    /// Positions claimed (written or being written) by some holder; see the module doc.
    filled: AtomicUsize,
}

// SAFETY: the cells are written only at positions a holder has claimed (the module doc), which
// no other holder reads, and read only below `filled`.
unsafe impl<T: Sync> Sync for KvRows<T> {}

impl<T: Kv> KvRows<T> {
    fn new(kv_heads: usize, d: usize, capacity: usize) -> KvRows<T> {
        let zeroed = || -> Box<[UnsafeCell<T>]> {
            let cells = vec![T::ZERO; kv_heads * capacity * d].into_boxed_slice();
            // SAFETY: `UnsafeCell<T>` has the layout of `T` (`repr(transparent)`).
            unsafe { Box::from_raw(Box::into_raw(cells) as *mut [UnsafeCell<T>]) }
        };
        let rows = KvRows { kv_heads, d, capacity, keys: zeroed(), values: zeroed(), filled: AtomicUsize::new(0) };
        ROWS_BYTES.fetch_add(rows.bytes(), Ordering::Relaxed);
        rows
    }

    /// New rows holding `rows`' first `pos` positions, with room for `needed` (as much as
    /// `rows` where that is enough: a fork's copy does not grow), `needed` claimed.
    fn copy_of(rows: &KvRows<T>, pos: usize, needed: usize, max_positions: usize) -> KvRows<T> {
        let (d, whole) = (rows.d, pos / BLOCK * BLOCK);
        let room = if needed <= rows.capacity { rows.capacity } else { capacity(needed, rows.capacity, max_positions) };
        let new = KvRows::new(rows.kv_heads, d, room);
        for h in 0..rows.kv_heads {
            let (values, keys) = (rows.values(h, pos), rows.keys(h, pos));
            // SAFETY (all writes): the new rows are nobody else's; `pos ≤ capacity`, and the
            // whole key blocks below `pos` are `whole · d` values.
            unsafe {
                std::ptr::copy_nonoverlapping(values.as_ptr(), new.at(Part::Values, h, 0), values.len());
                std::ptr::copy_nonoverlapping(keys.whole.as_ptr(), new.at(Part::Keys, h, 0), keys.whole.len());
                std::ptr::copy_nonoverlapping(keys.tail.as_ptr(), new.at(Part::Keys, h, whole), keys.tail.len());
            }
        }
        new.filled.store(needed, Ordering::Release);
        new
    }

    /// Head `h`'s keys at positions `0..len`: the whole blocks in place, the last block's keys
    /// copied (its other lanes may be another holder's to write).
    pub(super) fn keys(&self, h: usize, len: usize) -> Keys<'_, T> {
        self.check(h, len);
        let (d, whole) = (self.d, len / BLOCK * BLOCK);
        // SAFETY: inside head `h`'s cells (`len ≤ capacity`); positions below `filled` are not
        // written while a holder may read them (the module doc).
        let blocks = unsafe { std::slice::from_raw_parts(self.at(Part::Keys, h, 0), whole * d) };
        let mut tail = Vec::new();
        if whole < len {
            tail = vec![T::ZERO; BLOCK * d];
            for c in 0..d {
                for t in 0..len - whole {
                    // SAFETY: position `whole + t < len`, as above.
                    tail[c * BLOCK + t] = unsafe { *self.at(Part::Keys, h, whole).add(c * BLOCK + t) };
                }
            }
        }
        Keys { whole: blocks, tail, len }
    }

    /// Head `h`'s keys at positions `0..len` by position (`len · d` values), widened.
    fn key_rows(&self, h: usize, len: usize) -> Vec<f32> {
        let (keys, d) = (self.keys(h, len), self.d);
        let mut blocks = keys.whole.to_vec();
        blocks.extend_from_slice(&keys.tail);
        (0..len)
            .flat_map(|p| (0..d).map(move |c| (p, c)))
            .map(|(p, c)| blocks[(p / BLOCK * d + c) * BLOCK + p % BLOCK].widen())
            .collect()
    }

    /// Head `h`'s values at positions `0..len` (`len · d` values).
    pub(super) fn values(&self, h: usize, len: usize) -> &[T] {
        self.check(h, len);
        // SAFETY: as in `keys`.
        unsafe { std::slice::from_raw_parts(self.at(Part::Values, h, 0), len * self.d) }
    }

    /// The first `pos` positions as tensors `(1, kv_heads, pos, d)` in `dtype` on `device`.
    fn tensors(&self, pos: usize, dtype: DType, device: &Device) -> candle_core::Result<(Tensor, Tensor)> {
        let (kv_heads, d) = (self.kv_heads, self.d);
        let keys: Vec<f32> = (0..kv_heads).flat_map(|h| self.key_rows(h, pos)).collect();
        let values: Vec<f32> = (0..kv_heads).flat_map(|h| self.values(h, pos).iter().map(|x| x.widen())).collect();
        let t = |data: Vec<f32>| Tensor::from_vec(data, (1, kv_heads, pos, d), device)?.to_dtype(dtype);
        Ok((t(keys)?, t(values)?))
    }

    fn check(&self, h: usize, len: usize) {
        assert!(h < self.kv_heads && len <= self.capacity && len <= self.filled.load(Ordering::Acquire));
    }

    /// Where head `h`'s position `p` starts (for keys, `p` a multiple of 8: its block).
    fn at(&self, part: Part, h: usize, p: usize) -> *mut T {
        let cells = match part {
            Part::Keys => &self.keys,
            Part::Values => &self.values,
        };
        UnsafeCell::raw_get(cells[(h * self.capacity + p) * self.d..].as_ptr())
    }

    /// Writes `keys` and `values` (`(kv_heads, n, d)` each, as `T`: [`Kv::narrow`]) at positions
    /// `pos..pos + n`.
    ///
    /// Safety: those positions are the caller's (claimed, see the module doc): nobody reads or
    /// writes them meanwhile.
    unsafe fn write(&self, pos: usize, keys: &[f32], values: &[f32]) {
        let (d, n) = (self.d, keys.len() / (self.kv_heads * self.d));
        assert!(pos + n <= self.capacity && keys.len() == self.kv_heads * n * d && values.len() == keys.len());
        let (keys, values) = (T::narrow(keys), T::narrow(values));
        for h in 0..self.kv_heads {
            let src = &values[h * n * d..(h + 1) * n * d];
            // SAFETY (all writes): inside head `h`'s room (`pos + n ≤ capacity`); the positions
            // are the caller's.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.at(Part::Values, h, pos), src.len()) };
            for (i, key) in keys[h * n * d..(h + 1) * n * d].chunks_exact(d).enumerate() {
                let p = pos + i;
                let block = self.at(Part::Keys, h, p / BLOCK * BLOCK);
                for (c, &x) in key.iter().enumerate() {
                    unsafe { *block.add(c * BLOCK + p % BLOCK) = x };
                }
            }
        }
    }
}

impl<T> KvRows<T> {
    /// The bytes the keys and values take.
    fn bytes(&self) -> usize {
        (self.keys.len() + self.values.len()) * std::mem::size_of::<T>()
    }
}

impl<T> Drop for KvRows<T> {
    fn drop(&mut self) {
        ROWS_BYTES.fetch_sub(self.bytes(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use half::f16;

    fn rows_of<T: Kv>(layer: &Arc<KvRows<T>>, len: usize) -> (Vec<f32>, Vec<f32>) {
        let all = |f: &dyn Fn(usize) -> Vec<f32>| (0..layer.kv_heads).flat_map(f).collect();
        (all(&|h| layer.key_rows(h, len)), all(&|h| layer.values(h, len).iter().map(|x| x.widen()).collect()))
    }

    /// `(kv_heads = 2, n, d = 3)` of distinct values for positions `pos..pos + n` (below 100),
    /// each a half float (tags of quarters: halves below 512 are multiples of a quarter).
    fn new_rows(pos: usize, n: usize, tag: f32) -> (Vec<f32>, Vec<f32>) {
        let k: Vec<f32> = (0..2).flat_map(|h| (0..n * 3).map(move |i| tag + (h * 250 + pos * 3 + i) as f32)).collect();
        let v = k.iter().map(|x| -x).collect();
        (k, v)
    }

    fn step<T: Element>(layer: Option<&LayerKv>, pos: usize, n: usize, tag: f32) -> Arc<KvRows<T>> {
        let (k, v) = new_rows(pos, n, tag);
        LayerKv::append(layer, pos, &k, &v, 2, 3, 1000).unwrap()
    }

    /// The positions `0..len` a sequence of appends (tag per step) should hold.
    fn want(steps: &[(usize, usize, f32)]) -> (Vec<f32>, Vec<f32>) {
        let len = steps.iter().map(|&(p, n, _)| p + n).max().unwrap();
        let (mut k, mut v) = (vec![0f32; 2 * len * 3], vec![0f32; 2 * len * 3]);
        for &(pos, n, tag) in steps {
            let (nk, nv) = new_rows(pos, n, tag);
            for h in 0..2 {
                let at = (h * len + pos) * 3;
                k[at..at + n * 3].copy_from_slice(&nk[h * n * 3..(h + 1) * n * 3]);
                v[at..at + n * 3].copy_from_slice(&nv[h * n * 3..(h + 1) * n * 3]);
            }
        }
        (k, v)
    }

    #[test]
    fn appends_in_place_until_shared_and_clones_stay_independent() {
        appends_in_place::<f32>();
        appends_in_place::<f16>();
    }

    fn appends_in_place<T: Element>() {
        // A prompt, then steps: the rows are written in place, and grow by copying.
        let a = step::<T>(None, 0, 5, 0.0);
        assert_eq!(a.capacity, 64);
        let mut layer = T::layer(a.clone());
        let mut done = vec![(0, 5, 0.0)];
        for pos in 5..70 {
            let next = step::<T>(Some(&layer), pos, 1, 0.0);
            assert_eq!(Arc::ptr_eq(&next, &a), pos < 64, "in place while there is room (pos {pos})");
            layer = T::layer(next);
            done.push((pos, 1, 0.0));
        }
        let rows = T::rows_of(&layer).unwrap();
        assert_eq!(rows.capacity, 128);
        assert_eq!(rows_of(rows, 70), want(&done));

        // A checkpoint at 70 shares the rows; the sequence goes on in place (it claims 70..72),
        // and the checkpoint, taken up again, copies instead of writing over positions 70..72.
        let saved = layer.clone();
        let ahead = step::<T>(Some(&layer), 70, 2, 0.0);
        assert!(Arc::ptr_eq(&ahead, rows), "the first writer at the shared end writes in place");
        let other = step::<T>(Some(&saved), 70, 1, 0.5);
        assert!(!Arc::ptr_eq(&other, rows), "a second writer at the same position copies");
        assert_eq!(other.capacity, 128, "a copy for sharing's sake keeps the room");
        let mut ahead_steps = done.clone();
        ahead_steps.push((70, 2, 0.0));
        let mut other_steps = done.clone();
        other_steps.push((70, 1, 0.5));
        assert_eq!(rows_of(&ahead, 72), want(&ahead_steps));
        assert_eq!(rows_of(&other, 71), want(&other_steps));

        // Rewound: the only handle left writes in place again, over what it had claimed.
        drop((layer, ahead));
        let only = T::rows_of(&saved).unwrap();
        assert_eq!(Arc::strong_count(only), 1);
        let again = step::<T>(Some(&saved), 70, 1, 0.25);
        assert!(Arc::ptr_eq(&again, only));
        let mut again_steps = done.clone();
        again_steps.push((70, 1, 0.25));
        assert_eq!(rows_of(&again, 71), want(&again_steps));
    }

    #[test]
    fn tensors_convert_and_bounds_are_checked() {
        let (k, v) = new_rows(0, 4, 0.0);
        let t = |x: Vec<f32>| Tensor::from_vec(x, (1, 2, 4, 3), &Device::Cpu).unwrap();
        let layer = LayerKv::Tensors(t(k), t(v));
        let rows = step::<f32>(Some(&layer), 4, 2, 0.0);
        assert_eq!(rows_of(&rows, 6), want(&[(0, 4, 0.0), (4, 2, 0.0)]));
        let (tk, _) = LayerKv::Rows(rows.clone()).tensors(6, DType::F32, &Device::Cpu).unwrap();
        assert_eq!(tk.flatten_all().unwrap().to_vec1::<f32>().unwrap(), want(&[(0, 4, 0.0), (4, 2, 0.0)]).0);
        // Rows of the other element type are copied over (and they say the same).
        let halves = step::<f16>(Some(&LayerKv::Rows(rows.clone())), 6, 1, 0.0);
        assert_eq!(rows_of(&halves, 7), want(&[(0, 4, 0.0), (4, 2, 0.0), (6, 1, 0.0)]));
        // Never past the context, never reading unclaimed positions.
        let (k, v) = new_rows(0, 2, 0.0);
        assert!(LayerKv::append::<f32>(None, 999, &k, &v, 2, 3, 1000).is_err());
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rows.keys(0, 7).len)).is_err());
        assert_eq!(capacity(8000, 4096, 8192), 8192);
        assert_eq!(capacity(4670, 0, 8192), 4672);
    }

    #[test]
    fn rows_are_counted_while_alive() {
        // Other tests' rows come and go meanwhile: these rows' own bytes are what is certain.
        let (halves, floats) = (KvRows::<f16>::new(2, 64, 4096), KvRows::<f32>::new(1, 8, 8));
        assert_eq!((halves.bytes(), floats.bytes()), (2 * 2 * 64 * 4096 * 2, 2 * 8 * 8 * 4));
        assert!(kv_cache_cpu_bytes() >= halves.bytes() + floats.bytes());
    }

    #[test]
    fn values_round_to_halves_and_saturate() {
        let got = f16::narrow(&[1.0 / 3.0, 70_000.0, -1e30, 65_519.0, f32::NAN]);
        assert_eq!(got[0].to_f32(), 0.333_251_95);
        assert_eq!([got[1], got[2], got[3]].map(|x| x.to_f32()), [65_504.0, -65_504.0, 65_504.0]);
        assert!(got[4].is_nan());
    }
}
