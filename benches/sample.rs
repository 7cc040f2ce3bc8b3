//! One sampling step over a whole vocabulary (128,256 logits, Llama 3's size; 49,152,
//! SmolLM2's), as a server's request thread takes it after every forward pass while, at one
//! client, the GPU waits: `cargo bench --profile ci --bench sample` (divan).
//!
//! Timed: the default draw (temperature 1, no truncation: every token a candidate), greedy,
//! and top-p 0.9, each on logits spread over [-10, 10) with 32 tokens over [10, 20) (a
//! model's few likely tokens, which take most of the probability).

use strictly::sample::{Sampler, SamplingParams, TokenCounts};

const VOCABS: [usize; 2] = [49_152, 128_256];

fn logits(n: usize) -> Vec<f32> {
    let mut x = 12345u64;
    (0..n)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let l = (x >> 40) as f32 / (1u64 << 24) as f32 * 20.0 - 10.0;
            if i % (n / 32) == 7 {
                l / 2.0 + 15.0
            } else {
                l
            }
        })
        .collect()
}

fn step(bencher: divan::Bencher, n: usize, params: SamplingParams) {
    let base = logits(n);
    let mut s = Sampler::new(SamplingParams { seed: Some(7), ..params }).unwrap();
    let counts = TokenCounts::new();
    bencher.with_inputs(|| base.clone()).bench_local_refs(|l| s.sample(l, None, &counts).unwrap().token);
}

#[divan::bench(args = VOCABS)]
fn draw(bencher: divan::Bencher, n: usize) {
    step(bencher, n, SamplingParams::default());
}

#[divan::bench(args = VOCABS)]
fn greedy(bencher: divan::Bencher, n: usize) {
    step(bencher, n, SamplingParams { temperature: 0.0, ..SamplingParams::default() });
}

#[divan::bench(args = VOCABS)]
fn top_p(bencher: divan::Bencher, n: usize) {
    step(bencher, n, SamplingParams { top_p: 0.9, ..SamplingParams::default() });
}

fn main() {
    divan::main();
}
