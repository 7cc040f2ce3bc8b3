//! The loops against tensor attention; each kernel's rows against the bits of one row.

use candle_core::{Device, Tensor};

use super::*;

/// Keys `(len, d)` by position as blocks ([`Keys`]' layout, the last block padded with zeros),
/// as `T`.
fn blocked<T: Kv>(rows: &[f32], d: usize) -> Vec<T> {
    let (len, rows) = (rows.len() / d, T::narrow(rows));
    let mut out = vec![T::ZERO; len.next_multiple_of(BLOCK) * d];
    for (p, key) in rows.chunks_exact(d).enumerate() {
        for (c, &x) in key.iter().enumerate() {
            out[(p / BLOCK * d + c) * BLOCK + p % BLOCK] = x;
        }
    }
    out
}

/// `xs` as the cache would hold them, widened again.
fn held<T: Kv>(xs: &[f32]) -> Vec<f32> {
    T::narrow(xs).iter().map(|x| x.widen()).collect()
}

#[test]
fn every_half_widens_exactly() {
    for bits in 0..=u16::MAX {
        let (x, want) = (half::f16::from_bits(bits), half::f16::from_bits(bits).to_f32());
        let got = widen_half(x);
        assert!(got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(), "{bits:#06x}: {got} vs {want}");
    }
}

#[test]
fn the_exponential_is_within_a_few_ulp() {
    let mut worst = 0f64;
    for i in 0..=200_000 {
        let x = -86.99 * i as f32 / 200_000.0;
        let want = (x as f64).exp();
        worst = worst.max(((exp_nonpositive(x) as f64) - want).abs() / want);
    }
    assert!(worst < 4e-7, "relative error {worst}");
    assert_eq!((exp_nonpositive(0.0), exp_nonpositive(-88.0), exp_nonpositive(f32::NEG_INFINITY)), (1.0, 0.0, 0.0));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn rows_at_once_are_each_the_bits_of_one() {
    if !super::super::qblocks::has_avx2() {
        return;
    }
    kernel_rows::<f32>();
    kernel_rows::<half::f16>();
}

#[cfg(target_arch = "x86_64")]
fn kernel_rows<T: Kv>() {
    for d in [64, 72, 8] {
        let v = |seed: usize, len: usize| -> Vec<f32> {
            (0..len).map(|i| ((i * 7 + seed * 13) as f32 * 0.21).sin()).collect()
        };
        let qs: Vec<Vec<f32>> = (0..4).map(|r| v(r, d)).collect();
        let keys = blocked::<T>(&v(9, 16 * d), d);
        let (b0, b1) = (&keys[..8 * d], &keys[8 * d..]);
        let (mut four, mut ones) = (vec![[0f32; 16]; 4], vec![[0f32; 16]; 4]);
        // SAFETY: the CPU has AVX2, FMA and F16C (checked above).
        unsafe {
            let [f0, f1, f2, f3] = &mut four[..] else { unreachable!() };
            avx2::dots::<4, 2, T>([&qs[0], &qs[1], &qs[2], &qs[3]], [b0, b1], 0.5, [f0, f1, f2, f3]);
            for (q, one) in qs.iter().zip(&mut ones) {
                let (lo, hi) = one.split_at_mut(8);
                avx2::dots::<1, 1, T>([q], [b0], 0.5, [lo]);
                avx2::dots::<1, 1, T>([q], [b1], 0.5, [hi]);
            }
        }
        for (r, q) in qs.iter().enumerate() {
            assert_eq!(four[r].map(f32::to_bits), ones[r].map(f32::to_bits));
            for (t, (got, key)) in four[r].iter().zip(held::<T>(&v(9, 16 * d)).chunks_exact(d)).enumerate() {
                let want: f32 = q.iter().zip(key).map(|(a, b)| a * b).sum::<f32>() * 0.5;
                assert!((got - want).abs() < 1e-4, "row {r} key {t}");
            }
        }
        // Three rows weighed at once, and each alone, over 11 values.
        let (p, vals) = ((0..3).map(|r| v(r + 20, 11)).collect::<Vec<_>>(), T::narrow(&v(30, 11 * d)).into_owned());
        let mut y3: Vec<f32> = v(40, 3 * d);
        let mut y1 = y3.clone();
        // SAFETY: as above.
        unsafe {
            avx2::weigh::<3, T>([&p[0], &p[1], &p[2]], &vals, &mut y3);
            for (r, y) in y1.chunks_exact_mut(d).enumerate() {
                avx2::weigh::<1, T>([&p[r]], &vals, y);
            }
        }
        assert_eq!(
            y3.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            y1.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
}

/// The loops against attention written with tensor ops (masked softmax), on random values;
/// and a row is the same bits alone or in a pass with others.
#[test]
fn rows_match_tensor_attention_and_do_not_depend_on_the_pass() -> candle_core::Result<()> {
    // Short rows; and rows past several whole chunks of keys, in blocks that start on
    // either side of a chunk's end (runs of rows there), with a remainder of keys; a `d` not a
    // multiple of 8.
    for (heads, kv_heads, d, pos, n) in
        [(6, 2, 16, 5, 4), (4, 2, 64, 120, 21), (3, 3, 72, 0, 70), (2, 1, 5, 3, 9), (6, 2, 16, 5, 300)]
    {
        check_rows(heads, kv_heads, d, pos, n)?;
    }
    Ok(())
}

fn check_rows(heads: usize, kv_heads: usize, d: usize, pos: usize, n: usize) -> candle_core::Result<()> {
    check_rows_of::<f32>(heads, kv_heads, d, pos, n)?;
    check_rows_of::<half::f16>(heads, kv_heads, d, pos, n)
}

fn check_rows_of<T: Kv>(heads: usize, kv_heads: usize, d: usize, pos: usize, n: usize) -> candle_core::Result<()> {
    let paths = if super::super::qblocks::has_avx2() { vec![false, true] } else { vec![false] };
    let (total, dev) = (pos + n, Device::Cpu);
    // Keys and values as the cache holds them (for tensor attention too).
    let q = Tensor::randn(0f32, 1.0, (heads, n, d), &dev)?;
    let held = |t: Tensor| -> candle_core::Result<Tensor> {
        Tensor::from_vec(held::<T>(&t.flatten_all()?.to_vec1::<f32>()?), t.shape(), &dev)
    };
    let k = held(Tensor::randn(0f32, 1.0, (kv_heads, total, d), &dev)?)?;
    let v = held(Tensor::randn(0f32, 1.0, (kv_heads, total, d), &dev)?)?;
    for avx2 in paths {
        // One query head per work item, and the key/value head's whole group: the same bits.
        let one = check_rows_on::<T>(avx2, 1, (&q, &k, &v), heads, kv_heads, d, pos, n)?;
        let all = check_rows_on::<T>(avx2, heads / kv_heads, (&q, &k, &v), heads, kv_heads, d, pos, n)?;
        assert!(one.iter().zip(&all).all(|(a, b)| a.to_bits() == b.to_bits()), "avx2 {avx2}: grouped heads differ");
    }
    Ok(())
}

/// The rows of a pass with `per_item` query heads per work item, against tensor attention and
/// each row alone; returns them.
#[allow(clippy::too_many_arguments)]
fn check_rows_on<T: Kv>(
    avx2: bool,
    per_item: usize,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    heads: usize,
    kv_heads: usize,
    d: usize,
    pos: usize,
    n: usize,
) -> candle_core::Result<Vec<f32>> {
    // The loops on the tensors' data (keys and values of the first `len` positions).
    let attend_rows = |q: &Tensor, k: &Tensor, v: &Tensor, n: usize, pos: usize| -> candle_core::Result<Tensor> {
        let len = pos + n;
        let (k, v) = (k.narrow(1, 0, len)?, v.narrow(1, 0, len)?);
        let heads_of = |t: &Tensor| -> candle_core::Result<Vec<Vec<f32>>> {
            (0..kv_heads).map(|h| t.narrow(0, h, 1)?.flatten_all()?.to_vec1::<f32>()).collect()
        };
        let (ks, vs) = (heads_of(&k)?, heads_of(&v)?);
        // The cache's layout: whole blocks, and the last one's keys apart (zeros after them).
        let blocks: Vec<Vec<T>> = ks.iter().map(|k| blocked::<T>(k, d)).collect();
        let keys: Vec<Keys<T>> = blocks
            .iter()
            .map(|b| {
                let whole = len / BLOCK * BLOCK * d;
                Keys { whole: &b[..whole], tail: b[whole..].to_vec(), len }
            })
            .collect();
        let vs: Vec<Vec<T>> = vs.iter().map(|x| T::narrow(x).into_owned()).collect();
        let vs: Vec<&[T]> = vs.iter().map(|x| &x[..]).collect();
        let q = q.flatten_all()?.to_vec1::<f32>()?;
        let y = Pass { q: &q, keys: &keys, values: &vs, heads, d, n, pos }.attend_items(avx2, per_item);
        Tensor::from_vec(y, (n, heads * d), &Device::Cpu)
    };
    let got = attend_rows(q, k, v, n, pos)?;
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
        let alone = attend_rows(&q_i, k, v, 1, len - 1)?;
        let want = got.narrow(0, i, 1)?.flatten_all()?.to_vec1::<f32>()?;
        assert_eq!(alone.flatten_all()?.to_vec1::<f32>()?, want, "row {i} alone");
    }
    got.flatten_all()?.to_vec1::<f32>()
}
