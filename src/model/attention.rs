//! Attention of a later pass's rows on the CPU, row by row, in plain loops over the tensors'
//! own memory ([`BatchNet`](super::batch::BatchNet) uses it for every pass after the first).
//!
//! Why its own loops: a decode step of a small model is dominated by the cost of dispatching
//! tensor ops, not by arithmetic, and attention is most of a layer's ops; and a row must come
//! out the same bits whether its token was run alone or with others (a speculative draft is
//! verified in one pass and must give the logits of one-token steps, see `decode::speculate`).
//! Each row here is computed by the same loops in the same order over exactly its own keys
//! (those up to its position), whatever else is in the pass.
//!
//! The (row, head) pairs are split over candle's CPU pool (`--threads`), each computed whole by
//! one thread, so the split changes no bit.
//!
//! Layouts (contiguous f32): `q` `(heads, n, d)` (the new rows' queries, rotated), `k` and `v`
//! `(kv_heads, total, d)` (the cache with the new rows appended; `total = pos + n`). The result
//! is `(n, heads · d)`. Query head `h` reads key/value head `h / (heads / kv_heads)`.

use candle_core::{Device, Storage, Tensor};

use super::qblocks::SharedOut;

/// Row-by-row causal attention (see the module doc). `None` if a tensor is not a contiguous f32
/// CPU tensor (the caller then uses tensor ops).
#[allow(clippy::too_many_arguments)]
pub(super) fn attend_rows(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    heads: usize,
    kv_heads: usize,
    d: usize,
    n: usize,
    pos: usize,
) -> candle_core::Result<Option<Tensor>> {
    let total = pos + n;
    let (qs, ql) = q.storage_and_layout();
    let (ks, kl) = k.storage_and_layout();
    let (vs, vl) = v.storage_and_layout();
    let (Storage::Cpu(qc), Storage::Cpu(kc), Storage::Cpu(vc)) = (&*qs, &*ks, &*vs) else { return Ok(None) };
    let (Some((q0, q1)), Some((k0, k1)), Some((v0, v1))) =
        (ql.contiguous_offsets(), kl.contiguous_offsets(), vl.contiguous_offsets())
    else {
        return Ok(None);
    };
    let (Ok(qa), Ok(ka), Ok(va)) = (qc.as_slice::<f32>(), kc.as_slice::<f32>(), vc.as_slice::<f32>()) else {
        return Ok(None);
    };
    let (qa, ka, va) = (&qa[q0..q1], &ka[k0..k1], &va[v0..v1]);
    if qa.len() != heads * n * d || ka.len() != kv_heads * total * d || va.len() != kv_heads * total * d {
        return Ok(None);
    }
    let group = heads / kv_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![0f32; n * heads * d];
    let dst = SharedOut(out.as_mut_ptr());
    // Work items are (row, head) pairs, split over candle's CPU pool (the forward pass runs on
    // one of its threads); each writes its own `d` outputs, computed the same way on any thread.
    let work = |items: std::ops::Range<usize>| {
        let mut scores = vec![0f32; total];
        for item in items {
            let (i, h) = (item / heads, item % heads);
            let len = pos + i + 1;
            let kvh = h / group;
            let qrow = &qa[(h * n + i) * d..(h * n + i + 1) * d];
            let keys = &ka[kvh * total * d..];
            let vals = &va[kvh * total * d..];
            let mut max = f32::NEG_INFINITY;
            for (j, s) in scores[..len].iter_mut().enumerate() {
                *s = dot(qrow, &keys[j * d..(j + 1) * d]) * scale;
                max = max.max(*s);
            }
            let mut sum = 0f32;
            for s in &mut scores[..len] {
                *s = (*s - max).exp();
                sum += *s;
            }
            // SAFETY: item (i, h) owns `out[(i·heads + h)·d ..][..d]`, inside `out`
            // (`n·heads·d` long); items are disjoint and the pool joins before `out` is read.
            let y = unsafe { std::slice::from_raw_parts_mut(dst.at((i * heads + h) * d), d) };
            for (j, &p) in scores[..len].iter().enumerate() {
                let w = p / sum;
                for (o, &x) in y.iter_mut().zip(&vals[j * d..(j + 1) * d]) {
                    *o += w * x;
                }
            }
        }
    };
    candle_core::utils::barrier_pool().execute_chunked(n * heads, work);
    Tensor::from_vec(out, (n, heads * d), &Device::Cpu).map(Some)
}

/// `Σ a·b` in eight lanes (the compiler vectorizes it), then the lanes in a fixed order.
#[inline]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The loops against attention written with tensor ops (masked softmax), on random values;
    /// and a row is the same bits alone or in a pass with others.
    #[test]
    fn rows_match_tensor_attention_and_do_not_depend_on_the_pass() -> candle_core::Result<()> {
        let (heads, kv_heads, d, pos, n) = (6, 2, 16, 5, 4);
        let total = pos + n;
        let dev = Device::Cpu;
        let q = Tensor::randn(0f32, 1.0, (heads, n, d), &dev)?;
        let k = Tensor::randn(0f32, 1.0, (kv_heads, total, d), &dev)?;
        let v = Tensor::randn(0f32, 1.0, (kv_heads, total, d), &dev)?;
        let got = attend_rows(&q, &k, &v, heads, kv_heads, d, n, pos)?.expect("contiguous f32");
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
                    assert!((a - b).abs() < 1e-5, "row {i} head {h}: {a} vs {b}");
                }
            }
        }
        // The last row alone (a pass of one token at position pos + n - 1) is the same bits.
        let q_last = q.narrow(1, n - 1, 1)?.contiguous()?;
        let alone = attend_rows(&q_last, &k, &v, heads, kv_heads, d, 1, pos + n - 1)?.expect("contiguous f32");
        assert_eq!(alone.flatten_all()?.to_vec1::<f32>()?, got.narrow(0, n - 1, 1)?.flatten_all()?.to_vec1::<f32>()?);
        Ok(())
    }
}
