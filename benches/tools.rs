//! Many tools (issue 26): a request that offers N real function schemas, as agents send them.
//! `cargo bench --profile ci --bench tools`.
//!
//! The tools are the BFCL subsets of `../shared/data/jsonschemabench` (each file a
//! `{"function.name": {parameters}}` object), then Glaive's (one parameters object each, named
//! after the file), in file order, the first N whose names are new. Timed, for N = 8, 32, 128,
//! 512 and `tool_choice` required and auto (Hermes calls, at most 8 per reply):
//! - `compile`: each tool's schema to a grammar, the calls grammar, `Compiled::new`;
//! - `compile_and_first_mask`: the same and the first mask (what a request waits for before
//!   its first token);
//!
//! each cold (the vocabulary's mask cache and the shared lexeme automata emptied first, as for
//! the first request with these tools) and warm (a later request with the same tools).
//! Uses the Llama-3.2 tokenizer (the embedded vocabulary when the data is missing), and mimalloc
//! as the `strictly` binary does.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::grammar::json_schema::{self, JsonSchemaOptions};
use strictly::grammar::Grammar;
use strictly::tools::{calls_grammar, ToolFormat, ToolMode};
use strictly::{TokenSet, Vocab};

const SIZES: [usize; 4] = [8, 32, 128, 512];

// The allocator the `strictly` binary (and so the server, which compiles these requests) runs
// with; the library never sets one.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    divan::main();
}

fn data() -> PathBuf {
    std::env::var_os("STRICTLY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"))
}

fn env() -> Arc<VocabEnv> {
    static E: OnceLock<Arc<VocabEnv>> = OnceLock::new();
    E.get_or_init(|| {
        let path = data().join("tokenizers/llama-3.2/tokenizer.json");
        VocabEnv::new(Arc::new(Vocab::from_tokenizer_json(&path).unwrap_or_else(|_| Vocab::embedded())))
    })
    .clone()
}

/// The tools: (name, parameters schema), BFCL's first, then Glaive's.
fn all_tools() -> &'static [(String, Value)] {
    static T: OnceLock<Vec<(String, Value)>> = OnceLock::new();
    T.get_or_init(|| {
        let root = data().join("jsonschemabench");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default();
        dirs.sort();
        let (bfcl, glaive): (Vec<_>, Vec<_>) = dirs
            .into_iter()
            .filter(|d| d.file_name().is_some_and(|n| n.to_string_lossy().starts_with("BFCL") || n == "Glaiveai2K"))
            .partition(|d| d.file_name().is_some_and(|n| n.to_string_lossy().starts_with("BFCL")));
        let mut out: Vec<(String, Value)> = Vec::new();
        for dir in bfcl.iter().chain(&glaive) {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let Ok(v) = serde_json::from_slice::<Value>(&std::fs::read(&f).unwrap()) else { continue };
                let schema = &v["schema"];
                let is_bfcl = dir.file_name().is_some_and(|n| n.to_string_lossy().starts_with("BFCL"));
                let found: Vec<(String, Value)> = if is_bfcl {
                    schema["properties"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, p)| (k.clone(), p.clone()))
                        .collect()
                } else {
                    let name =
                        f.file_stem().unwrap().to_string_lossy().replace(|c: char| !c.is_ascii_alphanumeric(), "_");
                    vec![(name, schema.clone())]
                };
                for (name, params) in found {
                    let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
                    // Tools whose parameters no value satisfies (a few Glaive schemas) are left out.
                    if !out.iter().any(|(n, _)| *n == name) && satisfiable(&name, &params) {
                        out.push((name, params));
                    }
                }
            }
        }
        assert!(
            out.len() >= SIZES[SIZES.len() - 1],
            "{} tools found under {}: the bench needs the jsonschemabench data",
            out.len(),
            root.display()
        );
        out
    })
}

fn satisfiable(name: &str, params: &Value) -> bool {
    let Some(g) = compile(params) else { return false };
    let calls = calls_grammar(vec![(name.to_string(), g)], &ToolMode::Required, 1, ToolFormat::Hermes, None);
    Compiled::new(&env(), &Constraint::Grammar(calls)).is_ok()
}

fn compile(params: &Value) -> Option<Grammar> {
    json_schema::compile(params, &JsonSchemaOptions::default()).ok().map(|c| c.grammar)
}

/// Compiles the calls of the first `n` tools; with `first_mask`, fills the first mask too.
fn request(n: usize, mode: &ToolMode, first_mask: bool) -> Arc<Compiled> {
    let args = all_tools().iter().take(n).map(|(name, p)| (name.clone(), compile(p).expect("checked"))).collect();
    let g = calls_grammar(args, mode, 8, ToolFormat::Hermes, None);
    let c = Compiled::new(&env(), &Constraint::Grammar(g)).unwrap();
    if first_mask {
        let mut mask = TokenSet::new(env().vocab().len());
        c.matcher().fill_mask(&mut mask);
    }
    c
}

fn run(bencher: divan::Bencher, n: usize, mode: ToolMode, first_mask: bool, cold: bool) {
    let _ = all_tools();
    request(n, &mode, first_mask); // warms what `cold` does not empty (the vocabulary's slices)
    bencher
        .with_inputs(|| {
            if cold {
                env().clear_mask_cache();
            }
        })
        .bench_local_values(|()| request(n, &mode, first_mask));
}

#[divan::bench(args = SIZES, sample_count = 10, sample_size = 1)]
fn required_compile_cold(bencher: divan::Bencher, n: usize) {
    run(bencher, n, ToolMode::Required, false, true);
}

#[divan::bench(args = SIZES, sample_count = 10, sample_size = 1)]
fn required_compile_and_first_mask_cold(bencher: divan::Bencher, n: usize) {
    run(bencher, n, ToolMode::Required, true, true);
}

#[divan::bench(args = SIZES, sample_count = 10, sample_size = 1)]
fn required_compile_and_first_mask_warm(bencher: divan::Bencher, n: usize) {
    run(bencher, n, ToolMode::Required, true, false);
}

#[divan::bench(args = SIZES, sample_count = 10, sample_size = 1)]
fn auto_compile_and_first_mask_cold(bencher: divan::Bencher, n: usize) {
    run(bencher, n, ToolMode::Auto, true, true);
}
