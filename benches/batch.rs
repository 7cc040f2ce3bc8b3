//! What one batched forward pass costs against its batch size: `B` sequences, each with a
//! 32-token prompt already in its cache, stepped one token at a time, in one [`BatchNet`]
//! pass per step; beside it, the same steps with candle's single-sequence llama (`B` passes per
//! step). Prints, per batch size, the time per step and the tokens per second of both.
//!
//! `cargo bench --profile ci --bench batch [-- MODEL_DIR]` (default: the embedded stories260K;
//! `scripts/random_llama.py` writes a larger llama whose passes dominate).

use std::time::Instant;

use strictly::decode::LanguageModel;
use strictly::model::{BatchRow, KvCache, LoadOptions, LoadedModel};
use strictly::TokenId;

const PROMPT: usize = 32;
const STEPS: usize = 32;

fn main() {
    let dir = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let m = LoadedModel::load(dir.as_deref().map(std::path::Path::new), &LoadOptions::default()).unwrap();
    let batched = m.model.batched().unwrap();
    let tok = |i: usize| TokenId((i % 400 + 20) as u32);
    println!(
        "{} ({:.1}M parameters): {STEPS} steps after a {PROMPT}-token prompt",
        m.info.name,
        m.info.parameters as f64 / 1e6
    );
    for b in [1usize, 2, 4, 8, 16] {
        let prompts: Vec<Vec<TokenId>> = (0..b).map(|s| (0..PROMPT).map(|i| tok(7 * s + i)).collect()).collect();
        // Batched: one pass per step.
        let mut caches = vec![KvCache::default(); b];
        let mut rows: Vec<BatchRow> =
            caches.iter_mut().zip(&prompts).map(|(c, p)| BatchRow { cache: c, tokens: p }).collect();
        batched.forward(&mut rows).unwrap();
        let next: Vec<Vec<TokenId>> = (0..STEPS).map(|i| vec![tok(i)]).collect();
        let t0 = Instant::now();
        for t in &next {
            let mut rows: Vec<BatchRow> = caches.iter_mut().map(|c| BatchRow { cache: c, tokens: t }).collect();
            batched.forward(&mut rows).unwrap();
        }
        let one_pass = t0.elapsed() / STEPS as u32;
        // Single sequences: b passes per step.
        let mut singles: Vec<_> = (0..b).map(|_| m.model.restart()).collect();
        let mut row = vec![0.0; m.model.logits_width()];
        for (s, p) in singles.iter_mut().zip(&prompts) {
            s.forward(p, &mut row).unwrap();
        }
        let t0 = Instant::now();
        for t in &next {
            for s in singles.iter_mut() {
                s.forward(t, &mut row).unwrap();
            }
        }
        let b_passes = t0.elapsed() / STEPS as u32;
        let tps = |d: std::time::Duration| b as f64 / d.as_secs_f64();
        println!(
            "batch {b:>2}: batched {:>8.3} ms/step {:>8.0} tokens/s | one at a time {:>8.3} ms/step {:>8.0} tokens/s | x{:.2}",
            one_pass.as_secs_f64() * 1e3,
            tps(one_pass),
            b_passes.as_secs_f64() * 1e3,
            tps(b_passes),
            b_passes.as_secs_f64() / one_pass.as_secs_f64()
        );
    }
}
