//! What one batched forward pass costs against its batch size: `B` sequences, each with a
//! 32-token prompt already in its cache, stepped one token at a time, in one [`BatchNet`]
//! pass per step, with the steps' one-token rows attended together (the default on a GPU) and
//! row by row (the CPU's default); beside them, the same steps with the single-sequence model
//! (`B` passes per step). Prints, per batch size, the time per step and the tokens per second of
//! each, and the speed-ups of the batched passes over one at a time.
//!
//! `cargo bench --profile ci --bench batch [-- MODEL_DIR] [--device cuda] [--max-batch N]`
//! (default: the embedded stories260K on the CPU, batches up to 16; `scripts/random_llama.py`
//! writes a larger llama whose passes dominate).

use std::time::{Duration, Instant};

use strictly::decode::LanguageModel;
use strictly::model::{BatchNet, BatchRow, DeviceSpec, KvCache, LoadOptions, LoadedModel};
use strictly::TokenId;

const PROMPT: usize = 32;
const STEPS: usize = 32;

/// The time of one step of `b` sequences through `net` (after their prompts).
fn batched(net: &BatchNet, prompts: &[Vec<TokenId>], next: &[Vec<TokenId>]) -> Duration {
    let mut caches = vec![KvCache::default(); prompts.len()];
    let mut rows: Vec<BatchRow> =
        caches.iter_mut().zip(prompts).map(|(c, p)| BatchRow { cache: c, tokens: p }).collect();
    net.forward(&mut rows).unwrap();
    let t0 = Instant::now();
    for t in next {
        let mut rows: Vec<BatchRow> = caches.iter_mut().map(|c| BatchRow { cache: c, tokens: t }).collect();
        net.forward(&mut rows).unwrap();
    }
    t0.elapsed() / next.len() as u32
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let dir = args
        .iter()
        .enumerate()
        .find(|(i, a)| !a.starts_with('-') && (*i == 0 || !args[i - 1].starts_with("--")))
        .map(|(_, a)| a.clone());
    let device: DeviceSpec = flag("--device").map_or(DeviceSpec::Cpu, |d| d.parse().unwrap());
    let max_batch: usize = flag("--max-batch").map_or(16, |n| n.parse().unwrap());
    let opts = LoadOptions { device, ..LoadOptions::default() };
    let m = LoadedModel::load(dir.as_deref().map(std::path::Path::new), &opts).unwrap();
    let mut together = m.model.batched().unwrap();
    together.set_batched_decode(true);
    let mut by_row = together.clone();
    by_row.set_batched_decode(false);
    let tok = |i: usize| TokenId((i % 400 + 20) as u32);
    println!(
        "{} ({:.1}M parameters, {:?}): {STEPS} steps after a {PROMPT}-token prompt",
        m.info.name,
        m.info.parameters as f64 / 1e6,
        device
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    // Untimed: a GPU's first passes load its kernels and start cuBLAS.
    let two: Vec<Vec<TokenId>> = (0..2).map(|s| (0..PROMPT).map(|i| tok(7 * s + i)).collect()).collect();
    batched(&together, &two, &[vec![tok(1)], vec![tok(2)]]);
    batched(&by_row, &two[..1], &[vec![tok(1)]]);
    for b in (0..).map(|i| 1usize << i).take_while(|&b| b <= max_batch) {
        let prompts: Vec<Vec<TokenId>> = (0..b).map(|s| (0..PROMPT).map(|i| tok(7 * s + i)).collect()).collect();
        let next: Vec<Vec<TokenId>> = (0..STEPS).map(|i| vec![tok(i)]).collect();
        let t_together = batched(&together, &prompts, &next);
        let t_by_row = batched(&by_row, &prompts, &next);
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
        let tps = |d: Duration| b as f64 / d.as_secs_f64();
        println!(
            "batch {b:>2}: rows together {:>8.3} ms/step {:>7.0} tokens/s | row by row {:>8.3} ms/step {:>7.0} tokens/s | \
             one at a time {:>8.3} ms/step {:>7.0} tokens/s | x{:.2} x{:.2}",
            ms(t_together),
            tps(t_together),
            ms(t_by_row),
            tps(t_by_row),
            ms(b_passes),
            tps(b_passes),
            b_passes.as_secs_f64() / t_together.as_secs_f64(),
            b_passes.as_secs_f64() / t_by_row.as_secs_f64(),
        );
    }
}
