//! Masks for a whole batch of sequences at one decode step, across cores (issue 26): `B`
//! sequences (64, 256), each a matcher of one of the JSON Schema cases of
//! `../shared/data/jsonschemabench` (the first compiled cases of every group, round robin),
//! each walking its valid instance's tokens: one batch step fills every sequence's mask, then
//! commits its next token (a sequence that reaches its instance's end starts again). The masks
//! are shared out over a pool of `N` threads that lives across steps (rayon's, one mask per task,
//! so a thread that drew cheap masks takes the next; one thread: the plain loop), as a server's
//! generations compute theirs in parallel while the model runs, each on a thread of its own.
//!
//! `cargo bench --profile ci --bench batch_masks [-- THREADS...]` (default: 1 and every core).
//! Prints per batch size and thread count: the median wall time of a batch step, masks/s, the
//! speedup over one thread, and the median of each step's slowest mask (no split of masks over
//! threads makes a step shorter than that one mask). Llama-3.2 tokenizer (the embedded vocabulary when the data is
//! missing, then the cases are missing too and it says so).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use serde_json::Value;
use strictly::automaton::{Compiled, Constraint, Matcher, VocabEnv};
use strictly::grammar::json_schema::JsonSchemaOptions;
use strictly::{TokenId, TokenSet, Vocab};

const BATCHES: [usize; 2] = [64, 256];
const STEPS: usize = 40;
const CASES_PER_GROUP: usize = 3;

struct Seq {
    m: Matcher,
    tokens: Arc<Vec<TokenId>>,
    at: usize,
    mask: TokenSet,
}

fn main() {
    let data = std::env::var_os("STRICTLY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let vocab = Vocab::from_tokenizer_json(data.join("tokenizers/llama-3.2/tokenizer.json"))
        .map(Arc::new)
        .unwrap_or_else(|_| Arc::new(Vocab::embedded()));
    let env = VocabEnv::new(vocab.clone());
    let cases = load_cases(&data.join("jsonschemabench"), &env, &vocab);
    if cases.is_empty() {
        eprintln!("batch_masks: SKIPPED, no cases under {}", data.display());
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    if threads.is_empty() {
        threads = if cores > 1 { vec![1, cores] } else { vec![1] };
    }
    println!("{} cases, vocabulary {}, {cores} cores, {STEPS} steps", cases.len(), vocab.len());
    println!("| sequences | threads | batch step (median) | masks/s | speedup | slowest mask (median) |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for b in BATCHES {
        let mut base = None;
        for &n in &threads {
            let fresh = || -> Vec<Seq> {
                (0..b)
                    .map(|i| {
                        let (c, toks) = &cases[i % cases.len()];
                        let mut s =
                            Seq { m: c.matcher(), tokens: toks.clone(), at: 0, mask: TokenSet::new(vocab.len()) };
                        // Spread the sequences over their instances.
                        for _ in 0..(i * 7) % toks.len().max(1) {
                            advance(&mut s);
                        }
                        s
                    })
                    .collect()
            };
            // The same steps once untimed (the vocabulary's mask cache warm, as in a server that
            // has run a while), then timed from the same start.
            let pool = rayon::ThreadPoolBuilder::new().num_threads(n).build().expect("a thread pool");
            let mut seqs = fresh();
            for _ in 0..STEPS {
                step(&mut seqs, &pool);
            }
            let mut seqs = fresh();
            let (mut times, mut slowest): (Vec<Duration>, Vec<Duration>) =
                (0..STEPS).map(|_| step(&mut seqs, &pool)).unzip();
            times.sort();
            slowest.sort();
            let median = times[STEPS / 2];
            let rate = b as f64 / median.as_secs_f64();
            let speedup = base.map_or(1.0, |b: Duration| b.as_secs_f64() / median.as_secs_f64());
            base.get_or_insert(median);
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "| {b} | {n} | {:.2} ms | {rate:.0} | {speedup:.2}x | {:.3} ms |",
                ms(median),
                ms(slowest[STEPS / 2])
            );
        }
    }
}

/// One batch step on the pool: every mask, then every sequence's next token. Returns the
/// step's wall time and its slowest mask's.
fn step(seqs: &mut [Seq], pool: &rayon::ThreadPool) -> (Duration, Duration) {
    let slowest = AtomicU64::new(0);
    let fill = |q: &mut Seq| {
        let t = Instant::now();
        q.m.fill_mask(&mut q.mask);
        slowest.fetch_max(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    };
    let t0 = Instant::now();
    if pool.current_num_threads() == 1 {
        seqs.iter_mut().for_each(fill);
    } else {
        pool.install(|| seqs.par_iter_mut().for_each(fill));
    }
    let took = (t0.elapsed(), Duration::from_nanos(slowest.into_inner()));
    for q in seqs.iter_mut() {
        advance(q);
    }
    took
}

/// Commits the sequence's next instance token (from the start again at the end).
fn advance(q: &mut Seq) {
    if q.at >= q.tokens.len() || q.m.commit(q.tokens[q.at]).is_err() {
        q.m.reset();
        q.at = 0;
        return;
    }
    q.at += 1;
}

/// The first compiled cases of every group whose first valid instance the matcher takes.
fn load_cases(root: &std::path::Path, env: &Arc<VocabEnv>, vocab: &Vocab) -> Vec<(Arc<Compiled>, Arc<Vec<TokenId>>)> {
    let mut groups: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    groups.sort();
    let mut out = Vec::new();
    for g in groups {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&g)
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect())
            .unwrap_or_default();
        files.sort();
        let mut taken = 0;
        for f in files {
            if taken == CASES_PER_GROUP {
                break;
            }
            let Some(case) = std::fs::read(&f).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok()) else {
                continue;
            };
            let Some(schema) = case.get("schema") else { continue };
            let instance =
                case["tests"].as_array().and_then(|t| t.iter().find(|t| t["valid"] == true)).map(|t| &t["data"]);
            let Some(instance) = instance else { continue };
            let c = Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::exact());
            let Ok(compiled) = Compiled::new(env, &c) else { continue };
            let Some(tokens) = vocab.encode(serde_json::to_string(instance).unwrap_or_default().as_bytes()) else {
                continue;
            };
            let mut m = compiled.matcher();
            if tokens.iter().all(|&t| m.commit(t).is_ok()) && m.is_accepting() {
                out.push((compiled, Arc::new(tokens)));
                taken += 1;
            }
        }
    }
    out
}
