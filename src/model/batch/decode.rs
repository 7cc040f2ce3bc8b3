//! Attention of a pass's one-token rows in one set of tensor ops: what a GPU server's decode step
//! is made of (every sequence adds its one sampled token).
//!
//! Row by row ([`BatchNet::attend`]), a pass of `B` sequences costs `B` times some twenty tensor
//! ops per layer; on a GPU each op is a kernel launch and an allocation, and those, not the
//! arithmetic, bounded a batch's step (session 38: 16 sequences of an 8B model stepped only
//! 2.3x faster than one). Here the rows that add one token to a non-empty cache (at least
//! two of them) attend together: their queries and keys are rotated in one op each (each row
//! at its own position), every row's keys and values (its cache with the new one appended) are
//! copied into one zero-padded `(B, kv_heads, longest, head_dim)` tensor, and the scores, the
//! masked softmax and the weighted sum are one batched op each. Per row, what is left is
//! its cache's growth (a concatenation, as row by row) and its copy into the padded tensor.
//!
//! Exactness: a row attends over exactly its own keys (the padding's scores are `-inf`, its
//! weights zero); the sums run over the padded length, so a row agrees with its row-by-row
//! attention to float tolerance, not bit for bit (as the projections of a batch already do on
//! a GPU). The CPU keeps its row loops ([`super::super::attention`]), which are faster there
//! and give the same bits however tokens are grouped into passes; [`BatchNet::set_batched_decode`]
//! turns this path on there for tests.
//!
//! Invariants: the caches stay what row-by-row attention makes of them (contiguous
//! `(1, kv_heads, pos + 1, head_dim)` per layer, never written after the pass), so a sequence
//! can go on in any later pass, batched or not.

use candle_core::{DType, Device, Tensor};

use super::{BatchNet, BatchRow};

/// What the one-token rows of a pass share across its layers.
pub(super) struct DecodeRows {
    /// Their indices among the pass's rows, in order (at least two).
    pub(super) rows: Vec<usize>,
    /// Per row of the pass: whether it is one of them.
    taken: Vec<bool>,
    /// Their rows in the pass's token matrix; `None` when they are the whole matrix, in order.
    index: Option<Tensor>,
    /// Each row's rotary angles, `(B, 1, head_dim / 2)`.
    cos: Tensor,
    sin: Tensor,
    /// The most keys a row attends over (its position + 1).
    longest: usize,
    /// `(B, 1, 1, longest)`: `-inf` past a row's own keys; `None` when all are as long.
    mask: Option<Tensor>,
    /// Where the pass's token rows are in the attention output laid out as these rows first,
    /// then the other rows' tokens in order; `None` when these are all the rows.
    pub(super) order: Option<Tensor>,
}

impl DecodeRows {
    /// The one-token rows of a pass whose cache is not empty, if there are at least two of them
    /// (`offsets`: where each row's tokens start in the token matrix).
    pub(super) fn new(net: &BatchNet, rows: &[BatchRow], offsets: &[usize]) -> candle_core::Result<Option<DecodeRows>> {
        let picked: Vec<usize> =
            (0..rows.len()).filter(|&i| rows[i].tokens.len() == 1 && rows[i].cache.pos > 0).collect();
        if picked.len() < 2 {
            return Ok(None);
        }
        let device = net.cos.device();
        let u32s =
            |v: Vec<usize>, dev: &Device| Tensor::new(v.into_iter().map(|x| x as u32).collect::<Vec<u32>>(), dev);
        let total: usize = rows.iter().map(|r| r.tokens.len()).sum();
        let all = picked.len() == rows.len();
        let index = if all { None } else { Some(u32s(picked.iter().map(|&i| offsets[i]).collect(), device)?) };
        let positions = u32s(picked.iter().map(|&i| rows[i].cache.pos).collect(), device)?;
        let (b, half) = (picked.len(), net.head_dim / 2);
        let cos = net.cos.index_select(&positions, 0)?.reshape((b, 1, half))?;
        let sin = net.sin.index_select(&positions, 0)?.reshape((b, 1, half))?;
        let lens: Vec<usize> = picked.iter().map(|&i| rows[i].cache.pos + 1).collect();
        let mut taken = vec![false; rows.len()];
        picked.iter().for_each(|&i| taken[i] = true);
        let longest = lens.iter().copied().max().unwrap_or(0);
        let mask = if lens.iter().all(|&n| n == longest) {
            None
        } else {
            let m: Vec<f32> = lens
                .iter()
                .flat_map(|&n| (0..longest).map(move |j| if j < n { 0.0 } else { f32::NEG_INFINITY }))
                .collect();
            Some(Tensor::from_vec(m, (b, 1, 1, longest), device)?)
        };
        let order = if all {
            None
        } else {
            // Attention output rows: these rows' tokens first, then the others' in pass order.
            let mut at = vec![0usize; total];
            let mut next = 0;
            for &i in &picked {
                at[offsets[i]] = next;
                next += 1;
            }
            for (i, r) in rows.iter().enumerate() {
                if !taken[i] {
                    for slot in &mut at[offsets[i]..offsets[i] + r.tokens.len()] {
                        *slot = next;
                        next += 1;
                    }
                }
            }
            Some(u32s(at, device)?)
        };
        Ok(Some(DecodeRows { rows: picked, taken, index, cos, sin, longest, mask, order }))
    }
}

impl DecodeRows {
    /// Whether row `i` of the pass is one of these.
    pub(super) fn takes(&self, i: usize) -> bool {
        self.taken[i]
    }
}

impl BatchNet {
    /// Whether a pass's one-token rows attend together ([`DecodeRows`], this module): on by
    /// default off the CPU. Turning it on on the CPU is for tests of this path.
    pub fn set_batched_decode(&mut self, on: bool) {
        self.batched_decode = on;
    }

    /// Layer `l`'s attention for the rows of `dec`, from the pass's projections `q`, `k`, `v`
    /// (one row per token of the pass): their output rows `(B, heads · head_dim)` in the order
    /// of `dec.rows`, and each row's keys and values with its new ones appended.
    #[allow(clippy::type_complexity)]
    pub(super) fn attend_decode(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        dec: &DecodeRows,
        rows: &[BatchRow],
        l: usize,
    ) -> candle_core::Result<(Tensor, Vec<(Tensor, Tensor)>)> {
        let (b, d, kvh) = (dec.rows.len(), self.head_dim, self.kv_heads);
        let pick = |t: &Tensor| match &dec.index {
            Some(ix) => t.index_select(ix, 0),
            None => Ok(t.clone()),
        };
        let rope = if self.rope_interleaved { candle_nn::rotary_emb::rope_i } else { candle_nn::rotary_emb::rope };
        // (B, heads, 1, d): a batch of one-position sequences, each with its own angles.
        let q = rope(&pick(q)?.reshape((b, self.heads, 1, d))?, &dec.cos, &dec.sin)?;
        let k = rope(&pick(k)?.reshape((b, kvh, 1, d))?, &dec.cos, &dec.sin)?;
        let v = pick(v)?.reshape((b, kvh, 1, d))?;
        let longest = dec.longest;
        let device = q.device();
        let kpad = Tensor::zeros((b, kvh, longest, d), self.dtype, device)?;
        let vpad = Tensor::zeros((b, kvh, longest, d), self.dtype, device)?;
        let mut kv = Vec::with_capacity(b);
        for (j, &i) in dec.rows.iter().enumerate() {
            let Some(past) = rows[i].cache.layers.get(l) else {
                candle_core::bail!("a sequence at position {} has no cache for layer {l}", rows[i].cache.pos)
            };
            let (pk, pv) = past.tensors(rows[i].cache.pos, self.dtype, device)?;
            let kj = Tensor::cat(&[&pk, &k.narrow(0, j, 1)?], 2)?;
            let vj = Tensor::cat(&[&pv, &v.narrow(0, j, 1)?], 2)?;
            kpad.narrow(0, j, 1)?.slice_set(&kj, 2, 0)?;
            vpad.narrow(0, j, 1)?.slice_set(&vj, 2, 0)?;
            kv.push((kj, vj));
        }
        // Query head h reads key/value head h / group: (B, kv_heads, group, d).
        let group = self.heads / kvh;
        let q = q.to_dtype(DType::F32)?.reshape((b, kvh, group, d))?;
        let (kf, vf) = (kpad.to_dtype(DType::F32)?, vpad.to_dtype(DType::F32)?);
        let mut att = (q.matmul(&kf.t()?)? / (d as f64).sqrt())?;
        if let Some(mask) = &dec.mask {
            att = att.broadcast_add(mask)?;
        }
        let att = candle_nn::ops::softmax_last_dim(&att)?;
        let y = att.matmul(&vf)?.to_dtype(self.dtype)?.reshape((b, self.heads * d))?;
        Ok((y, kv))
    }
}
