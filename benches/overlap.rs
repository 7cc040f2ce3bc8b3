//! What the mask/forward overlap buys when the forward pass leaves the CPU free (as a GPU's
//! does) and the masks are large (a real 128k-token vocabulary): a stand-in model that sleeps
//! for a fixed time per pass, then returns seeded random logits, constrained by the story
//! schema; tokens/s with overlap off, on and auto.
//!
//! `cargo bench --bench overlap [-- TOKENIZER_JSON]` (default: Llama 3.2's, from
//! `../shared/data`). Prints one line per (pass time, overlap) with the median of 5 runs.

use std::time::{Duration, Instant};

use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::decode::{generate, GenerateOptions, LanguageModel, Overlap, RandomLogits};
use strictly::sample::SamplingParams;
use strictly::{TokenId, Vocab};

/// Random logits after a sleep: a forward pass that takes `pass` and no CPU.
#[derive(Clone)]
struct Sleepy {
    inner: RandomLogits,
    pass: Duration,
}

impl LanguageModel for Sleepy {
    fn logits_width(&self) -> usize {
        self.inner.logits_width()
    }
    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> strictly::Result<()> {
        std::thread::sleep(self.pass);
        self.inner.forward(tokens, logits)
    }
    fn fork(&self) -> strictly::Result<Box<dyn LanguageModel>> {
        Ok(Box::new(self.clone()))
    }
    fn checkpoint(&mut self) -> bool {
        self.inner.checkpoint()
    }
    fn rewind(&mut self) -> strictly::Result<()> {
        self.inner.rewind()
    }
}

fn main() {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/tokenizers/llama-3.2/tokenizer.json");
    let path = std::env::args().nth(1).filter(|a| a != "--bench").unwrap_or_else(|| default.to_string());
    let vocab = std::sync::Arc::new(Vocab::from_tokenizer_json(&path).expect("a tokenizer.json"));
    let schema = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/story.schema.json")).unwrap();
    let constraint = Constraint::JsonSchema(serde_json::from_str(&schema).unwrap(), Default::default());
    let compiled = Compiled::new(&VocabEnv::new(vocab.clone()), &constraint).expect("the schema compiles");
    println!("vocabulary {} tokens ({path})", vocab.len());
    println!("pass ms | overlap | tokens/s (median of 5) | mask µs (mean) | masks overlapped | rewound");
    for pass_ms in [1u64, 3, 10] {
        for (name, overlap) in [("off", Overlap::Off), ("on", Overlap::On), ("auto", Overlap::DEFAULT)] {
            let mut rates = Vec::new();
            let (mut masks, mut mask_time, mut overlapped, mut rewound) = (0, Duration::ZERO, 0, 0);
            for seed in 0..5u64 {
                let mut model =
                    Sleepy { inner: RandomLogits::new(vocab.len(), seed), pass: Duration::from_millis(pass_ms) };
                let mut matcher = compiled.matcher();
                let opts = GenerateOptions {
                    max_tokens: 96,
                    sampling: SamplingParams { seed: Some(seed), ..SamplingParams::default() },
                    overlap,
                    ..GenerateOptions::default()
                };
                let t0 = Instant::now();
                let out = generate(&mut model, &vocab, Some(&mut matcher), &[], &opts).unwrap();
                rates.push(out.tokens.len() as f64 / t0.elapsed().as_secs_f64());
                masks += out.masks.count;
                mask_time += out.masks.time;
                overlapped += out.masks.overlapped;
                rewound += out.masks.rewound;
            }
            rates.sort_by(f64::total_cmp);
            let mean_us = mask_time.as_secs_f64() * 1e6 / masks.max(1) as f64;
            println!("{pass_ms:7} | {name:7} | {:22.1} | {mean_us:14.0} | {overlapped:16} | {rewound}", rates[2]);
        }
    }
}
