//! [`QBlocks`]: a GGUF weight of one of ggml's 32-value block types (Q4_0, Q4_1, Q5_0, Q5_1,
//! Q8_0), multiplied on the CPU by kernels of this crate's own.
//!
//! Why: candle 0.11 has a SIMD CPU kernel for Q4_0 and Q8_0 only (Q4_1 and the Q5 types run a
//! scalar loop several times slower), and its repacked AVX-512 path needs the inner dimension
//! to be a multiple of 256 (SmolLM2's 576 is not). These kernels read every type as it is
//! stored, with the arithmetic of llama.cpp's `vec_dot_qX_q8_1`:
//!
//! ```text
//!   weight block b of a row:  w_j = d_b · u_j + m_b      (u_j the integer code of value j)
//!   activation block:         x_j ≈ e · a_j,  a_j = round(x_j / e) ∈ [-127, 127],  e = max|x| / 127
//!   their dot product:        Σ w_j x_j ≈ d_b · e · Σ u_j a_j  +  m_b · (e · Σ a_j)
//! ```
//!
//! so a block costs one integer dot product of 32 bytes (`maddubs`, or `dpbusd` with VNNI)
//! and two multiply-adds. Each type maps onto `(u, d, m)` exactly:
//!
//! | type | codes `u` | `d` | `m` |
//! | --- | --- | --- | --- |
//! | Q4_0 | the 4-bit `q` (0..=15), kept packed | `d` | `-8 d` |
//! | Q4_1 | the 4-bit `q`, kept packed | `d` | `m` |
//! | Q5_0 | the 5-bit `q` (0..=31), one byte each | `d` | `-16 d` |
//! | Q5_1 | the 5-bit `q`, one byte each | `d` | `m` |
//! | Q8_0 | the signed 8-bit `q`, one byte each | `d` | `0` |
//!
//! (`-8 d` and `-16 d` are exact in f32: a power-of-two multiple of an f16.) The only rounding
//! beyond llama.cpp's is none: its `e · Σ a_j` is an f16, here an f32.
//!
//! Layout: the rows are kept in *panels* of [`PANEL`] (8) rows, the last one padded with rows
//! of zero codes and zero scales. Within a panel, block by block, the stored bytes of the 8
//! rows' blocks (ggml's 16 bytes of nibbles, or the 32 byte codes) are interleaved 4 bytes at a
//! time: chunk `c` of the block holds bytes `4c..4c+4` of row 0, then of row 1, ... So one
//! 32-byte load holds 4 codes of each of the 8 rows, and one integer multiply-add against the
//! matching 4 activation codes (broadcast) adds to 8 dot products at once, one per 32-bit lane:
//! the kernels never sum across lanes, and a block's scales are applied to 8 rows in one vector
//! operation (`d` and `m` of the 8 rows are kept side by side).
//!
//! Invariants (checked when a weight is built, relied on by the unsafe kernels):
//! - `cols` is a positive multiple of 32; `codes` holds `panels · nb · PANEL · bytes` bytes
//!   (`nb = cols / 32`, `bytes` 16 for nibbles, else 32) and `scales` `panels · nb · 2 · PANEL`;
//! - byte codes of Q5 types lie in 0..=31 and Q8_0's in -128..=127, so the AVX2 kernel's
//!   `maddubs` (|u| ≤ 128 times |a| ≤ 127, summed in pairs) never saturates, nor the 16-bit
//!   sums it keeps of 8 nibble products (8 · 2 · 15 · 127) or of 4 Q5 ones (4 · 2 · 31 · 127).
//!
//! Threads: the panels are split across candle's CPU pool (the one `--threads` sizes), so a
//! pass uses the same threads whichever kernels its weights take. A worker takes the activation
//! rows [`ACT_CHUNK`] at a time, and each chunk through all its panels, so a long prompt's
//! activations are read from cache, not memory, once per panel.

mod kernels;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// Values per block (every type here).
pub(crate) const BLOCK: usize = 32;

/// Whether this CPU runs the AVX2 (with FMA and F16C) kernels: detected once per process, for every
/// hand-vectorized loop of the model (here and in [`attention`](super::attention)).
pub(crate) fn has_avx2() -> bool {
    kernels::level() == kernels::Level::Avx2
}

/// Rows per panel (see the module docs).
pub(crate) const PANEL: usize = 8;

/// Activation rows a worker takes through its panels at a time (see the module docs).
const ACT_CHUNK: usize = 64;

/// A quantized `(rows, cols)` weight (`rows` outputs of `cols` inputs each) in the layout the
/// kernels read (module docs). Build it with [`QBlocks::from_qtensor`].
#[derive(Debug)]
pub(crate) struct QBlocks {
    rows: usize,
    cols: usize,
    codes: Codes,
    /// The stored bytes of every block, in panels.
    bytes: Vec<u8>,
    /// Per panel and block: `d` of the panel's 8 rows, then their `m`: block values are `d · u + m`.
    scales: Vec<f32>,
}

/// What the stored bytes of a block are: the integer codes `u`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codes {
    /// 16 bytes per block, ggml's layout: value `j` in the low nibble of byte `j`, value
    /// `j + 16` in its high nibble; codes 0..=15 (Q4_0, Q4_1).
    Nibbles,
    /// 32 bytes per block, one unsigned code each, 0..=31 (Q5_0, Q5_1).
    Small,
    /// 32 bytes per block, one signed code each (Q8_0).
    Signed,
}

impl Codes {
    /// Stored bytes per block.
    fn block_bytes(self) -> usize {
        match self {
            Codes::Nibbles => 16,
            Codes::Small | Codes::Signed => BLOCK,
        }
    }
}

/// The quantized activations of `m` rows: the codes `a`, and per block `e` and `e · Σ a`.
pub(crate) struct QActs {
    pub(crate) codes: Vec<i8>,
    pub(crate) scale: Vec<f32>,
    pub(crate) scaled_sum: Vec<f32>,
}

impl QBlocks {
    /// The types these kernels take.
    pub(crate) fn supports(t: GgmlDType) -> bool {
        matches!(t, GgmlDType::Q4_0 | GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1 | GgmlDType::Q8_0)
    }

    /// Reads a 2-D GGUF tensor of a [supported](Self::supports) type; `None` for any other
    /// type or shape (which stays with candle's `QMatMul`).
    pub(crate) fn from_qtensor(w: &QTensor) -> candle_core::Result<Option<QBlocks>> {
        let dtype = w.dtype();
        let (rows, cols) = match w.shape().dims() {
            &[r, c] => (r, c),
            _ => return Ok(None),
        };
        if !Self::supports(dtype) || cols == 0 || cols % BLOCK != 0 {
            return Ok(None);
        }
        let data = w.data()?;
        QBlocks::from_raw(dtype, rows, cols, &data).map(Some)
    }

    /// Reads `rows · cols / 32` blocks of ggml type `dtype` from their raw bytes.
    fn from_raw(dtype: GgmlDType, rows: usize, cols: usize, raw: &[u8]) -> candle_core::Result<QBlocks> {
        let nb = cols / BLOCK;
        let size = dtype.type_size();
        if raw.len() != rows * nb * size {
            candle_core::bail!(
                "a {dtype:?} tensor of {rows}x{cols} has {} bytes, expected {}",
                raw.len(),
                rows * nb * size
            );
        }
        let codes = match dtype {
            GgmlDType::Q4_0 | GgmlDType::Q4_1 => Codes::Nibbles,
            GgmlDType::Q5_0 | GgmlDType::Q5_1 => Codes::Small,
            GgmlDType::Q8_0 => Codes::Signed,
            other => candle_core::bail!("no block kernel for {other:?}"),
        };
        let panels = rows.div_ceil(PANEL);
        let bb = codes.block_bytes();
        let mut w = QBlocks {
            rows,
            cols,
            codes,
            bytes: vec![0; panels * nb * PANEL * bb],
            scales: vec![0.0; panels * nb * 2 * PANEL],
        };
        let f16 = |b: &[u8], at: usize| half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
        let mut stored = [0u8; BLOCK];
        for (blk, b) in raw.chunks_exact(size).enumerate() {
            let (row, block) = (blk / nb, blk % nb);
            let d = f16(b, 0);
            let m = match dtype {
                GgmlDType::Q4_0 => -8.0 * d,
                GgmlDType::Q5_0 => -16.0 * d,
                GgmlDType::Q8_0 => 0.0,
                _ => f16(b, 2),
            };
            match dtype {
                GgmlDType::Q4_0 => stored[..16].copy_from_slice(&b[2..18]),
                GgmlDType::Q4_1 => stored[..16].copy_from_slice(&b[4..20]),
                GgmlDType::Q5_0 | GgmlDType::Q5_1 => {
                    let offset = if dtype == GgmlDType::Q5_0 { 2 } else { 4 };
                    let high = u32::from_le_bytes([b[offset], b[offset + 1], b[offset + 2], b[offset + 3]]);
                    let qs = &b[offset + 4..offset + 20];
                    let code = |j: usize, nibble: u8| nibble | ((((high >> j) & 1) as u8) << 4);
                    for j in 0..16 {
                        stored[j] = code(j, qs[j] & 0x0F);
                        stored[j + 16] = code(j + 16, qs[j] >> 4);
                    }
                }
                _ => stored.copy_from_slice(&b[2..2 + BLOCK]),
            }
            for (t, &byte) in stored[..bb].iter().enumerate() {
                let at = w.byte_at(row, block, t);
                w.bytes[at] = byte;
            }
            let at = w.scale_at(row, block);
            w.scales[at] = d;
            w.scales[at + PANEL] = m;
        }
        Ok(w)
    }

    /// Where stored byte `t` of block `block` of row `row` is in `bytes`.
    fn byte_at(&self, row: usize, block: usize, t: usize) -> usize {
        let nb = self.cols / BLOCK;
        let panel_block = (row / PANEL) * nb + block;
        panel_block * PANEL * self.codes.block_bytes() + (t / 4) * PANEL * 4 + (row % PANEL) * 4 + t % 4
    }

    /// Where `d` of block `block` of row `row` is in `scales` (its `m` is [`PANEL`] further).
    fn scale_at(&self, row: usize, block: usize) -> usize {
        let nb = self.cols / BLOCK;
        ((row / PANEL) * nb + block) * 2 * PANEL + row % PANEL
    }

    /// The integer code of value `j` of block `block` of row `row` (the tests read the layout
    /// through this and [`scale`](Self::scale); the kernels read it in bulk).
    #[cfg(test)]
    fn code(&self, row: usize, block: usize, j: usize) -> i32 {
        match self.codes {
            Codes::Nibbles => {
                let byte = self.bytes[self.byte_at(row, block, j % 16)];
                (if j < 16 { byte & 0x0F } else { byte >> 4 }) as i32
            }
            Codes::Small => self.bytes[self.byte_at(row, block, j)] as i32,
            Codes::Signed => self.bytes[self.byte_at(row, block, j)] as i8 as i32,
        }
    }

    /// `(d, m)` of block `block` of row `row`: its values are `d · u + m`.
    #[cfg(test)]
    fn scale(&self, row: usize, block: usize) -> (f32, f32) {
        let at = self.scale_at(row, block);
        (self.scales[at], self.scales[at + PANEL])
    }

    /// `x · Wᵀ`: `x` is f32 `(..., cols)`, the result `(..., rows)`.
    pub(crate) fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dims = x.dims();
        let Some((&k, lead)) = dims.split_last() else { candle_core::bail!("a matmul of a scalar") };
        if k != self.cols {
            candle_core::bail!("a matmul of {k} inputs by a weight of {}", self.cols);
        }
        let m: usize = lead.iter().product();
        let xs = x.to_dtype(candle_core::DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        let mut out = vec![0f32; m * self.rows];
        self.matmul(&xs, &mut out);
        let mut shape = dims.to_vec();
        *shape.last_mut().expect("not a scalar") = self.rows;
        Tensor::from_vec(out, shape, &Device::Cpu)
    }

    /// `out[i · rows + r] = Σ_j x[i · cols + j] · W[r][j]` for the `m = x.len() / cols` rows of `x`.
    pub(crate) fn matmul(&self, x: &[f32], out: &mut [f32]) {
        let m = x.len() / self.cols;
        debug_assert_eq!(out.len(), m * self.rows);
        let acts = kernels::quantize(x, self.cols);
        let dst = SharedOut(out.as_mut_ptr());
        let work = |panels: std::ops::Range<usize>| {
            let mut dots = [[0f32; PANEL]; ACT_CHUNK];
            for first in (0..m).step_by(ACT_CHUNK) {
                let chunk = first..(first + ACT_CHUNK).min(m);
                for p in panels.clone() {
                    let dots = &mut dots[..chunk.len()];
                    kernels::panel(self, p, &acts, chunk.clone(), dots);
                    let rows = p * PANEL..((p + 1) * PANEL).min(self.rows);
                    for (i, row_dots) in chunk.clone().zip(dots.iter()) {
                        for (r, &v) in rows.clone().zip(row_dots) {
                            // SAFETY: `i < m` and `r < rows`, so the index is inside `out`
                            // (`m · rows` long); each (i, r) belongs to exactly one panel, and a
                            // panel to one worker, so no two threads write the same element.
                            unsafe { *dst.at(i * self.rows + r) = v };
                        }
                    }
                }
            }
        };
        candle_core::utils::barrier_pool().execute_chunked(self.rows.div_ceil(PANEL), work);
    }
}

/// An output buffer written by the pool's workers at disjoint indices (here, in
/// `kernels::quantize_at` and in [`attention`](super::attention)).
pub(super) struct SharedOut<T = f32>(pub(super) *mut T);

impl<T> Clone for SharedOut<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SharedOut<T> {}

// SAFETY: the workers write disjoint elements (see `QBlocks::matmul`, `attention::Pass::attend`,
// `kernels::quantize_at`), and the pool joins them all before the caller reads the buffer, so
// the pointer never outlives it.
unsafe impl<T> Send for SharedOut<T> {}
unsafe impl<T> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    pub(super) fn at(self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

#[cfg(test)]
mod tests;
