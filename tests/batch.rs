//! Batched decoding: [`BatchNet`] steps several sequences at different positions in one pass
//! and gives each the logits candle's single-sequence model gives it (the embedded stories260K
//! and tiny random-weight llamas: grouped-query attention, tied and untied heads, Llama 3 rope
//! scaling; tiny random qwen2s and mistrals: q/k/v biases, rope theta, tied heads, windows as
//! long as the context, mistral's own head_dim; tiny random phi3s: fused weights); models it
//! cannot run exactly (a sliding window shorter than the context, phi3's longrope or partial
//! rotary) are refused with the reason; bad rows are errors that
//! change no cache; and [`Batcher`] sequences driven by the real generation loop on concurrent
//! threads give the outputs single sequences give, in fewer passes than sequence steps, never
//! more than `max_batch` per pass.

use std::sync::{Arc, Barrier};

use strictly::automaton::{Compiled, Constraint};
use strictly::decode::{generate, GenerateOptions, LanguageModel, Overlap};
use strictly::model::{Arch, BatchNet, BatchRow, Batcher, CandleModel, KvCache, LoadOptions, LoadedModel};
use strictly::sample::SamplingParams;
use strictly::{Error, TokenId};

use crate::model::{embedded, ids, max_diff, sample_opts, scratch_dir, write_tiny_model};

/// Feeds `plan` (per step, per sequence: the tokens to append, or nothing to sit the step
/// out) through one batched pass per step and through one single-sequence model per sequence,
/// and checks that every row agrees.
fn check_batched_equals_single(model: &CandleModel, plan: &[Vec<Vec<u32>>], what: &str) {
    check_batched_close_to_single(model, plan, 1e-5, what)
}

/// [`check_batched_equals_single`] within `tol` times the largest logit, with one-token rows
/// attended row by row (the CPU's way) and together (a GPU's way, `set_batched_decode`).
fn check_batched_close_to_single(model: &CandleModel, plan: &[Vec<Vec<u32>>], tol: f32, what: &str) {
    for together in [false, true] {
        let mut batched = model.batched().unwrap_or_else(|e| panic!("{what}: {e}"));
        batched.set_batched_decode(together);
        check_pass(model, &batched, plan, tol, &format!("{what}, one-token rows together: {together}"));
    }
}

fn check_pass(model: &CandleModel, batched: &BatchNet, plan: &[Vec<Vec<u32>>], tol: f32, what: &str) {
    let n = plan[0].len();
    let mut caches = vec![KvCache::default(); n];
    let mut singles: Vec<CandleModel> = (0..n).map(|_| model.restart()).collect();
    let w = model.logits_width();
    for (s, step) in plan.iter().enumerate() {
        let toks: Vec<Vec<TokenId>> = step.iter().map(|t| ids(t)).collect();
        let mut who = Vec::new();
        let mut rows = Vec::new();
        for (i, cache) in caches.iter_mut().enumerate() {
            if !toks[i].is_empty() {
                who.push(i);
                rows.push(BatchRow { cache, tokens: &toks[i] });
            }
        }
        let out = batched.forward(&mut rows).unwrap_or_else(|e| panic!("{what} step {s}: {e}"));
        assert_eq!(out.len(), who.len());
        for (row, &i) in out.iter().zip(&who) {
            let mut single = vec![0.0; w];
            singles[i].forward(&toks[i], &mut single).unwrap();
            let scale = single.iter().fold(1.0f32, |m, x| m.max(x.abs()));
            let d = max_diff(row, &single);
            assert!(d <= tol * scale, "{what}: step {s}, sequence {i}: logits differ by {d} (scale {scale})");
            assert_eq!(caches[i].position(), singles[i].position(), "{what}: step {s}, sequence {i}");
        }
    }
}

/// Three sequences of different lengths: prefills of different sizes in one pass, a prefill
/// joining sequences already decoding, runs of several tokens beside single ones, a sequence
/// sitting a step out, one-token steps of all three at different lengths.
fn plan() -> Vec<Vec<Vec<u32>>> {
    vec![
        vec![vec![1, 400, 20, 30, 40, 77], vec![1, 5], vec![]],
        vec![vec![90], vec![300, 301, 302], vec![1, 100, 200]],
        vec![vec![91], vec![], vec![201]],
        vec![vec![92, 93], vec![303], vec![202]],
        vec![vec![94], vec![304], vec![203, 204, 205, 206]],
        vec![vec![95], vec![305], vec![207]],
        vec![vec![96], vec![306], vec![208]],
    ]
}

#[test]
fn batched_pass_equals_single_sequences_on_the_embedded_model() {
    let m = embedded();
    check_batched_equals_single(&m.model, &plan(), "stories260K");
    // A server's warm-up on a GPU; its passes run on the CPU too.
    m.model.batched().unwrap().warm_up().unwrap();
}

#[test]
fn batched_pass_equals_single_sequences_on_random_llamas() {
    for tied in [false, true] {
        for scaled in [false, true] {
            let what = format!("tiny llama tied={tied} llama3-rope={scaled}");
            let dir = scratch_dir(&format!("batch-{tied}-{scaled}"));
            write_tiny_model(&dir, Arch::Llama, tied, 1, None);
            if scaled {
                let path = dir.join("config.json");
                let mut raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                raw["rope_scaling"] = serde_json::json!({
                    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
                });
                std::fs::write(&path, serde_json::to_vec(&raw).unwrap()).unwrap();
            }
            let m = LoadedModel::from_dir(&dir, &LoadOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
            check_batched_equals_single(&m.model, &plan(), &what);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[test]
fn batched_pass_in_half_precision_stays_close() {
    use strictly::model::Precision;
    let dir = scratch_dir("batch-bf16");
    write_tiny_model(&dir, Arch::Llama, false, 1, None);
    let opts = LoadOptions { precision: Some(Precision::Bf16), ..LoadOptions::default() };
    let m = LoadedModel::from_dir(&dir, &opts).unwrap();
    // The same operations in bf16 on both sides; only the summation order differs, which bf16
    // rounding magnifies.
    check_batched_close_to_single(&m.model, &plan(), 0.02, "tiny llama bf16");
    let _ = std::fs::remove_dir_all(&dir);
    // candle's qwen2, mistral and phi3 also take the attention scores and softmax in bf16 (and
    // qwen2's and phi3's rotary angles) where the batched pass takes them in f32 (the f32 tests
    // above hold them to 1e-5), which moves a logit by a few bf16 steps more.
    for arch in [Arch::Qwen2, Arch::Mistral, Arch::Phi3] {
        let dir = scratch_dir(&format!("batch-bf16-{arch}"));
        write_tiny_model(&dir, arch, false, 1, None);
        let m = LoadedModel::from_dir(&dir, &opts).unwrap();
        check_batched_close_to_single(&m.model, &plan(), 0.04, &format!("tiny {arch} bf16"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Rewrites the model directory's config.json with `edit`.
fn edit_config(dir: &std::path::Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("config.json");
    let mut raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut raw);
    std::fs::write(&path, serde_json::to_vec(&raw).unwrap()).unwrap();
}

#[test]
fn batched_pass_equals_single_sequences_on_random_qwen2_mistral_and_phi3() {
    use serde_json::json;
    // (arch, tied, config changes): qwen2's biased q/k/v with its own rope theta and a
    // sliding window longer than the context, off or on; mistral
    // without a window, with one as long as the context, with a head_dim other than
    // hidden / heads; phi3's fused qkv and gate/up weights.
    let cases: Vec<(Arch, bool, serde_json::Value)> = vec![
        (Arch::Qwen2, false, json!({"rope_theta": 1000000.0})),
        (Arch::Qwen2, true, json!({"sliding_window": 100})),
        (Arch::Qwen2, false, json!({"use_sliding_window": true, "sliding_window": 64})),
        (Arch::Mistral, false, json!({})),
        (Arch::Mistral, true, json!({"sliding_window": 64, "rope_theta": 500000.0})),
        (Arch::Mistral, false, json!({"head_dim": 16})),
        (Arch::Phi3, false, json!({})),
        (Arch::Phi3, true, json!({"rope_theta": 50000.0, "partial_rotary_factor": 1.0})),
    ];
    for (n, (arch, tied, changes)) in cases.into_iter().enumerate() {
        let what = format!("tiny {arch} tied={tied} {changes}");
        let dir = scratch_dir(&format!("batch-{arch}-{n}"));
        write_tiny_model(&dir, arch, tied, 1, None);
        edit_config(&dir, |raw| {
            for (k, v) in changes.as_object().unwrap() {
                raw[k] = v.clone();
            }
        });
        if changes.get("head_dim").is_some() {
            // The weights must have the new shapes: write them for the edited config.
            let text = std::fs::read(dir.join("config.json")).unwrap();
            let cfg = strictly::model::ArchConfig::parse(&text, "config.json").unwrap();
            crate::model::write_tiny_weights(&dir, &cfg);
        }
        let m = LoadedModel::from_dir(&dir, &LoadOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
        check_batched_equals_single(&m.model, &plan(), &what);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn models_the_batched_pass_cannot_run_exactly_are_refused_with_the_reason() {
    use serde_json::json;
    let cases: Vec<(Arch, serde_json::Value, &str)> = vec![
        (
            Arch::Phi3,
            json!({"rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.0, 1.1, 1.2],
                   "long_factor": [1.0, 2.0, 3.0, 4.0]}, "original_max_position_embeddings": 32}),
            "rope_scaling",
        ),
        (Arch::Phi3, json!({"partial_rotary_factor": 0.5}), "partial rotary"),
        (Arch::Mistral, json!({"sliding_window": 8}), "sliding window (8) is shorter than its context (64"),
        (Arch::Qwen2, json!({"use_sliding_window": true, "sliding_window": 16}), "sliding window (16)"),
        (Arch::Qwen2, json!({"hidden_act": "gelu"}), "hidden_act"),
        // Off, but candle's qwen2 still masks by it inside a prefill.
        (Arch::Qwen2, json!({"sliding_window": 4}), "sliding window (4)"),
    ];
    for (n, (arch, changes, msg)) in cases.into_iter().enumerate() {
        let dir = scratch_dir(&format!("nobatch-{arch}-{n}"));
        write_tiny_model(&dir, arch, false, 1, None);
        edit_config(&dir, |raw| {
            for (k, v) in changes.as_object().unwrap() {
                raw[k] = v.clone();
            }
        });
        let mut m = LoadedModel::from_dir(&dir, &LoadOptions::default()).unwrap();
        let e = m.model.batched().unwrap_err().to_string();
        assert!(e.contains(msg), "{arch} {changes}: {e}");
        // The model itself still runs, one sequence at a time.
        let mut row = vec![0.0; m.model.logits_width()];
        m.model.forward(&ids(&[1, 5, 9]), &mut row).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_bad_row_is_an_error_that_changes_no_cache() {
    let m = embedded();
    let b: BatchNet = m.model.batched().unwrap();
    let (mut a, mut c) = (KvCache::default(), KvCache::default());
    let good = ids(&[1, 20, 30]);
    let bad_inputs: [(Vec<TokenId>, &str); 3] = [
        (ids(&[1, 512]), "outside the model's vocabulary"),
        (vec![], "at least one input token"),
        (vec![TokenId(5); 600], "context length"),
    ];
    for (bad, msg) in &bad_inputs {
        let e = b.forward(&mut [BatchRow { cache: &mut a, tokens: &good }, BatchRow { cache: &mut c, tokens: bad }]);
        let e = e.unwrap_err();
        assert!(e.to_string().contains(msg), "{e}");
        assert_eq!((a.position(), c.position()), (0, 0), "nothing was appended");
    }
    assert!(matches!(
        b.forward(&mut [BatchRow { cache: &mut c, tokens: &bad_inputs[2].0 }]),
        Err(Error::Limit { limit: 512, .. })
    ));
    let out = b.forward(&mut [BatchRow { cache: &mut a, tokens: &good }]).unwrap();
    assert_eq!((out.len(), a.position()), (1, 3));
}

fn greedy(max_tokens: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        sampling: SamplingParams { temperature: 0.0, ..SamplingParams::default() },
        ..GenerateOptions::default()
    }
}

#[test]
fn concurrent_batched_generations_equal_single_ones() {
    let m = Arc::new(embedded());
    let batcher = Arc::new(Batcher::new(m.model.batched().unwrap(), 8).unwrap());
    let compiled = Arc::new(Compiled::new(&m.env, &Constraint::Regex("[A-Z][a-z]+( [a-z]+){2,6}\\.".into())).unwrap());
    let prompts = ["Once upon a time", "The cat", "Lily and Tom went to the park. They", "One day", "A big dog", "Sam"];
    // (prompt, constrained, options): greedy and seeded, free and constrained, overlap forced on
    // for some (their speculative passes are rewound through the batched sequence too).
    let jobs: Vec<(Vec<TokenId>, bool, GenerateOptions)> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut o = if i % 2 == 0 { greedy(24 + i) } else { sample_opts(i as u64, 24 + i) };
            if i % 3 == 0 {
                o.overlap = Overlap::On;
            }
            (m.prompt.encode(p).unwrap(), i % 2 == 1 || i == 4, o)
        })
        .collect();
    let single: Vec<_> = jobs
        .iter()
        .map(|(p, c, o)| {
            let mut matcher = c.then(|| compiled.matcher());
            generate(&mut m.model.restart(), m.vocab(), matcher.as_mut(), p, o).unwrap()
        })
        .collect();
    let barrier = Arc::new(Barrier::new(jobs.len()));
    let handles: Vec<_> = jobs
        .into_iter()
        .map(|(p, c, o)| {
            let (m, batcher, compiled, barrier) = (m.clone(), batcher.clone(), compiled.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut seq = batcher.sequence();
                let mut matcher = c.then(|| compiled.matcher());
                barrier.wait();
                generate(&mut seq, m.vocab(), matcher.as_mut(), &p, &o).unwrap()
            })
        })
        .collect();
    let mut steps = 0;
    for (i, (h, s)) in handles.into_iter().zip(&single).enumerate() {
        let out = h.join().unwrap();
        assert_eq!(out.tokens, s.tokens, "job {i}: {:?} vs {:?}", out.text(), s.text());
        assert_eq!(out.text(), s.text());
        assert_eq!(out.forward_passes, s.forward_passes, "job {i}");
        for (a, b) in out.logprobs.iter().zip(&s.logprobs) {
            assert!((a.logprob - b.logprob).abs() < 1e-4, "job {i}: {a:?} vs {b:?}");
        }
        assert_eq!(out.masks.rewound, s.masks.rewound, "job {i}");
        // Undone speculative passes went through the batch thread too.
        steps += (s.forward_passes + s.masks.rewound) as u64;
    }
    let st = batcher.stats();
    assert_eq!(st.rows, steps, "every pass of every sequence went through the batch thread");
    assert!(st.passes < st.rows, "some passes stepped several sequences: {st:?}");
    assert_eq!(batcher.live(), 0);
}

#[test]
fn batched_sequences_fork_and_rewind_like_models() {
    let m = embedded();
    let batcher = Batcher::new(m.model.batched().unwrap(), 4).unwrap();
    let mut a = batcher.sequence();
    let mut single = m.model.restart();
    let (mut ra, mut rs) = (vec![0.0; 512], vec![0.0; 512]);
    a.forward(&ids(&[1, 20, 30]), &mut ra).unwrap();
    single.forward(&ids(&[1, 20, 30]), &mut rs).unwrap();
    let mut b = a.fork().unwrap();
    assert!(a.checkpoint());
    a.forward(&ids(&[40, 41]), &mut ra).unwrap();
    a.rewind().unwrap();
    a.forward(&ids(&[50]), &mut ra).unwrap();
    single.forward(&ids(&[50]), &mut rs).unwrap();
    assert!(max_diff(&ra, &rs) < 1e-4);
    let mut rb = vec![0.0; 512];
    b.forward(&ids(&[50]), &mut rb).unwrap();
    assert!(max_diff(&rb, &rs) < 1e-4, "the fork did not see a's tokens");
    assert_eq!(a.position(), 4);
    assert!(a.forward(&[TokenId(9999)], &mut ra).is_err());
    assert_eq!(a.position(), 4, "a refused input changes nothing");
    assert_eq!(batcher.live(), 2);
    drop(b);
    assert_eq!(batcher.live(), 1);
}

#[test]
fn max_batch_caps_a_pass_and_every_sequence_gets_its_turn() {
    let m = Arc::new(embedded());
    let batcher = Arc::new(Batcher::new(m.model.batched().unwrap(), 2).unwrap());
    let prompt = m.prompt.encode("Once upon a time").unwrap();
    let single = generate(&mut m.model.restart(), m.vocab(), None, &prompt, &greedy(20)).unwrap();
    let barrier = Arc::new(Barrier::new(5));
    let handles: Vec<_> = (0..5)
        .map(|_| {
            let (m, batcher, barrier, prompt) = (m.clone(), batcher.clone(), barrier.clone(), prompt.clone());
            std::thread::spawn(move || {
                let mut seq = batcher.sequence();
                barrier.wait();
                generate(&mut seq, m.vocab(), None, &prompt, &greedy(20)).unwrap()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().tokens, single.tokens);
    }
    let st = batcher.stats();
    assert_eq!(st.rows, 5 * single.forward_passes as u64);
    assert_eq!(st.buckets[1], st.passes, "no pass stepped more than 2 sequences: {st:?}");
    assert!(st.passes >= st.rows / 2);
}
