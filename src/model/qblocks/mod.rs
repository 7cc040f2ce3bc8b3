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
//! Invariants (checked when a weight is built, relied on by the unsafe kernels):
//! - `cols` is a positive multiple of 32; `scales.len() == rows · cols / 32`;
//! - packed codes hold 16 bytes per block, byte codes 32, in row-major block order;
//! - byte codes of Q5 types lie in 0..=31 and Q8_0's in -128..=127, so the AVX2 kernel's
//!   `maddubs` (|u| ≤ 128 times |a| ≤ 127, summed in pairs) never saturates.
//!
//! Threads: the rows of the output are split across candle's CPU pool (the one `--threads`
//! sizes), so a pass uses the same threads whichever kernels its weights take.

mod kernels;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// Values per block (every type here).
pub(crate) const BLOCK: usize = 32;

/// A quantized `(rows, cols)` weight (`rows` outputs of `cols` inputs each) in the layout the
/// kernels read. Build it with [`QBlocks::from_qtensor`].
#[derive(Debug)]
pub(crate) struct QBlocks {
    rows: usize,
    cols: usize,
    codes: Codes,
    /// `(d, m)` per block, row by row: the block's values are `d · u + m`.
    scales: Vec<[f32; 2]>,
}

/// The integer codes `u` of every block, row by row.
#[derive(Debug)]
enum Codes {
    /// 16 bytes per block, ggml's layout: value `j` in the low nibble of byte `j`, value
    /// `j + 16` in its high nibble; codes 0..=15.
    Nibbles(Vec<u8>),
    /// 32 bytes per block, one signed code each.
    Bytes(Vec<i8>),
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
        let blocks = rows * cols / BLOCK;
        let size = dtype.type_size();
        if raw.len() != blocks * size {
            candle_core::bail!(
                "a {dtype:?} tensor of {rows}x{cols} has {} bytes, expected {}",
                raw.len(),
                blocks * size
            );
        }
        let f16 = |b: &[u8], at: usize| half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
        let mut scales = Vec::with_capacity(blocks);
        let codes = match dtype {
            GgmlDType::Q4_0 | GgmlDType::Q4_1 => {
                let offset = if dtype == GgmlDType::Q4_0 { 2 } else { 4 };
                let mut packed = Vec::with_capacity(blocks * 16);
                for b in raw.chunks_exact(size) {
                    let d = f16(b, 0);
                    scales.push([d, if dtype == GgmlDType::Q4_0 { -8.0 * d } else { f16(b, 2) }]);
                    packed.extend_from_slice(&b[offset..offset + 16]);
                }
                Codes::Nibbles(packed)
            }
            GgmlDType::Q5_0 | GgmlDType::Q5_1 => {
                let offset = if dtype == GgmlDType::Q5_0 { 2 } else { 4 };
                let mut bytes = Vec::with_capacity(blocks * BLOCK);
                for b in raw.chunks_exact(size) {
                    let d = f16(b, 0);
                    scales.push([d, if dtype == GgmlDType::Q5_0 { -16.0 * d } else { f16(b, 2) }]);
                    let high = u32::from_le_bytes([b[offset], b[offset + 1], b[offset + 2], b[offset + 3]]);
                    let qs = &b[offset + 4..offset + 20];
                    let code = |j: usize, nibble: u8| (nibble | ((((high >> j) & 1) as u8) << 4)) as i8;
                    bytes.extend((0..16).map(|j| code(j, qs[j] & 0x0F)));
                    bytes.extend((0..16).map(|j| code(j + 16, qs[j] >> 4)));
                }
                Codes::Bytes(bytes)
            }
            GgmlDType::Q8_0 => {
                let mut bytes = Vec::with_capacity(blocks * BLOCK);
                for b in raw.chunks_exact(size) {
                    scales.push([f16(b, 0), 0.0]);
                    bytes.extend(b[2..2 + BLOCK].iter().map(|&q| q as i8));
                }
                Codes::Bytes(bytes)
            }
            other => candle_core::bail!("no block kernel for {other:?}"),
        };
        Ok(QBlocks { rows, cols, codes, scales })
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
        // Groups of rows a worker takes at a time: each group's rows read the activations once.
        let groups = self.rows.div_ceil(kernels::ROWS);
        let dst = SharedOut(out.as_mut_ptr());
        let work = |range: std::ops::Range<usize>| {
            for g in range {
                let first = g * kernels::ROWS;
                let last = (first + kernels::ROWS).min(self.rows);
                for i in 0..m {
                    let mut dots = [0f32; kernels::ROWS];
                    kernels::dot_rows(self, first..last, &acts, i, &mut dots);
                    for (r, v) in (first..last).zip(dots) {
                        // SAFETY: `i < m` and `r < rows`, so the index is inside `out`
                        // (`m · rows` long); each (i, r) belongs to exactly one group, and a
                        // group to one worker, so no two threads write the same element.
                        unsafe { *dst.at(i * self.rows + r) = v };
                    }
                }
            }
        };
        candle_core::utils::barrier_pool().execute_chunked(groups, work);
    }
}

/// An output buffer written by the pool's workers at disjoint indices (here and in
/// [`attention`](super::attention)).
#[derive(Clone, Copy)]
pub(super) struct SharedOut(pub(super) *mut f32);

// SAFETY: the workers write disjoint elements (see `QBlocks::matmul`, `attention::attend_rows`),
// and the pool joins them all before the caller reads the buffer, so the pointer never outlives
// it.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    pub(super) fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}

#[cfg(test)]
mod tests;
