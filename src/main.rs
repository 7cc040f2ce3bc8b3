//! The `strictly` command line. Contract (see DESIGN.md): exit 0 on success, 2 on bad input
//! with a one-line error on stderr naming the problem.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Context};
use clap::{Args, Parser, Subcommand};
use serde_json::json;
use strictly::automaton::{Compiled, Constraint};
use strictly::decode::{self, GenerateOptions, RandomLogits};
use strictly::sample::SamplingParams;
use strictly::{TokenSet, Vocab};

// The IR of a large schema is hundreds of thousands of small allocations, built and freed within
// a compile: mimalloc makes compiles 25-35% faster than the system allocator (BENCHMARKS.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc returns freed pages to the OS ("purges") about a second after they are freed, in
/// one batch, inside whichever allocation comes next: tens of MiB at ~1 µs a page stalled one
/// mask for 10-20 ms (the bench's rare worst masks, BENCHMARKS.md). A server keeps its
/// working set anyway, so purging is off; `MIMALLOC_PURGE_DELAY` set in the environment wins.
#[cfg(feature = "mimalloc")]
fn tune_allocator() {
    // `mi_option_purge_delay`: the 16th option of mimalloc 3's `mi_option_t` (libmimalloc-sys
    // names only some options). Its default, 1,000 ms, is no other option's: the number is
    // used only when the option there holds it (another mimalloc, another numbering: untouched).
    // `MIMALLOC_SHOW_STATS=1 strictly bench …` then reports "purges: 0".
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    const PURGE_DELAY_DEFAULT: std::ffi::c_long = 1000;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: plain C calls on integers; mimalloc reads its options on every purge.
    unsafe {
        if libmimalloc_sys::mi_version() / 10_000 == 3
            && libmimalloc_sys::mi_option_get(PURGE_DELAY) == PURGE_DELAY_DEFAULT
        {
            libmimalloc_sys::mi_option_set(PURGE_DELAY, -1);
        }
    }
}

#[cfg(not(feature = "mimalloc"))]
fn tune_allocator() {}

#[derive(Parser)]
#[command(
    name = "strictly",
    version,
    about = "Constrained decoding: regexes, grammars and JSON Schemas as token masks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Sample outputs with seeded random logits (a grammar fuzzer). One JSON line per sample.
    Sample(SampleArgs),
    /// Compile a constraint and print one JSON line of facts about it.
    Check(CheckArgs),
    /// JSON Schema benchmark (peer-bench's inputs, method and output): one JSON line per case,
    /// a summary on stderr.
    Bench(BenchArgs),
    /// Generate text with a real model (default: the embedded stories260K), optionally
    /// constrained by a regex, grammar, schema or choice. stdout: the generated text only.
    #[cfg(feature = "model")]
    Generate(GenerateArgs),
    /// Serve the OpenAI-compatible HTTP API (default: the embedded stories260K model):
    /// /health, /metrics, /v1/models, /v1/chat/completions, /v1/completions.
    #[cfg(feature = "server")]
    Serve(ServeArgs),
}

/// The constraint flags; at most one. `sample`/`check` need one, `generate` may have none.
#[derive(Args)]
#[group(required = false, multiple = false)]
struct ConstraintArgs {
    /// A regex the whole output must match.
    #[arg(long)]
    regex: Option<String>,
    /// An EBNF/GBNF grammar file (start rule `root`).
    #[arg(long)]
    grammar: Option<PathBuf>,
    /// A JSON Schema file.
    #[arg(long)]
    schema: Option<PathBuf>,
    /// The output is exactly one of these strings.
    #[arg(long, num_args = 1..)]
    choice: Option<Vec<String>>,
}

#[derive(Args)]
struct SampleArgs {
    /// A Hugging Face tokenizer.json [default: the embedded stories260K tokenizer].
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    #[command(flatten)]
    constraint: ConstraintArgs,
    /// Number of samples.
    #[arg(short = 'n', long = "num", default_value_t = 1)]
    n: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Most tokens per sample; a sample cut here is still complete [default: 256]. With
    /// --cover/--mutate: a byte budget (so also a token bound), exceeded only where the grammar
    /// needs more [default with --cover: 4 bytes per coverage unit of the grammar, 256 to
    /// 16,384; with --mutate: 256].
    #[arg(long)]
    max_tokens: Option<usize>,
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    temperature: f32,
    /// Coverage-guided fuzzing: expand the grammar steering toward rules, alternatives and
    /// schema branches earlier samples did not use; print the coverage reached on stderr.
    #[arg(long)]
    cover: bool,
    /// Near misses: outputs one edit away from the language, each labelled with what makes
    /// it invalid (`"valid": false`, `"mutation"`, `"label"`).
    #[arg(long, conflicts_with = "cover")]
    mutate: bool,
    /// Drop duplicate outputs (keeps drawing until N distinct ones or it gives up).
    #[arg(long)]
    unique: bool,
    /// With --cover/--mutate: recursion depth (recursive rules entered) beyond which only
    /// closing choices are made [default with --cover: deep enough to reach every rule of the
    /// grammar, 24 to 1,024; with --mutate: 24].
    #[arg(long)]
    max_depth: Option<u32>,
    /// With --cover/--mutate: write the full coverage report (per rule, uncovered units) here.
    #[arg(long)]
    coverage_json: Option<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    /// A Hugging Face tokenizer.json [default: the embedded stories260K tokenizer].
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    #[command(flatten)]
    constraint: ConstraintArgs,
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            print!("{e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let msg = e.to_string();
            let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid arguments");
            eprintln!("strictly: {}", first.trim_start_matches("error: ").trim());
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Sample(a) => sample(a),
        Command::Check(a) => check(a),
        Command::Bench(a) => bench(a),
        #[cfg(feature = "model")]
        Command::Generate(a) => generate(a),
        #[cfg(feature = "server")]
        Command::Serve(a) => serve(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("strictly: error: {msg}");
            ExitCode::from(2)
        }
    }
}

#[derive(Args)]
struct BenchArgs {
    /// A Hugging Face tokenizer.json [default: the embedded stories260K tokenizer].
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// A directory (searched recursively for .json / .jsonl) or one file of cases.
    #[arg(long)]
    cases: PathBuf,
    /// Only the first N cases (after sorting by path and the filters).
    #[arg(long)]
    limit: Option<usize>,
    /// Only the first N cases of each group, applied before --limit.
    #[arg(long)]
    per_group_limit: Option<usize>,
    /// Only cases whose id contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Skip cases whose id contains this.
    #[arg(long)]
    exclude: Option<String>,
    /// Serialize instances indented (serde_json pretty) instead of compact.
    #[arg(long)]
    pretty: bool,
    /// Skip instances marked "valid": false.
    #[arg(long)]
    only_valid: bool,
    /// Compile schemas even where a keyword cannot be enforced (listed as `unenforced`).
    #[arg(long)]
    lenient: bool,
    /// Whitespace the JSON Schema grammar allows between tokens.
    #[arg(long, value_enum, default_value_t = BenchWhitespace::Bounded)]
    whitespace: BenchWhitespace,
    /// Force the Earley engine even for regular schemas.
    #[arg(long)]
    earley: bool,
    /// Worker processes, each single-threaded (take timings with 1).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Clock for compile / mask / commit timings.
    #[arg(long, value_enum, default_value_t = strictly::bench::Clock::Wall)]
    clock: strictly::bench::Clock,
    /// Per-case wall-clock limit (compile and all instances), seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout_s: f64,
    /// Per-worker address-space limit, GiB (0 = none).
    #[arg(long, default_value_t = 8.0)]
    mem_limit_gb: f64,
    /// Run cases in this process (no timeout, memory limit or crash isolation).
    #[arg(long)]
    no_isolate: bool,
    /// A fresh worker process for every case, so each case's peak RSS is its own.
    #[arg(long, conflicts_with = "no_isolate")]
    worker_per_case: bool,
    /// Skip the untimed warm-up case.
    #[arg(long)]
    no_warmup: bool,
    /// Add every step's mask µs to the JSON lines.
    #[arg(long)]
    per_step: bool,
    /// Re-run (twice, in the same worker) every case whose slowest mask took longer than this
    /// many ms, and report those runs' slowest masks beside the first: a maximum that does not
    /// come back was the machine's. The first run's timings are the ones summarized.
    #[arg(long)]
    recheck_max_ms: Option<f64>,
    /// Also write the summary as JSON to this file.
    #[arg(long)]
    summary_json: Option<PathBuf>,
    /// Print at most this many failing cases / instances to stderr.
    #[arg(long, default_value_t = 0)]
    show_failures: usize,
    /// Internal: run as a worker process (case indices on stdin, results on stdout).
    #[arg(long, hide = true)]
    worker: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum BenchWhitespace {
    Bounded,
    Compact,
    Pretty,
}

fn bench(a: BenchArgs) -> anyhow::Result<()> {
    use strictly::automaton::{CompileOptions, EngineChoice};
    use strictly::bench::{run::RunSettings, BenchOptions};
    use strictly::grammar::json_schema::{JsonSchemaOptions, Whitespace};
    let whitespace = match a.whitespace {
        BenchWhitespace::Bounded => Whitespace::Bounded,
        BenchWhitespace::Compact => Whitespace::Compact,
        BenchWhitespace::Pretty => Whitespace::Pretty,
    };
    let engine = if a.earley { EngineChoice::Earley } else { EngineChoice::Auto };
    if let Some(ms) = a.recheck_max_ms.filter(|ms| !(ms.is_finite() && *ms >= 0.0)) {
        anyhow::bail!("--recheck-max-ms must be a non-negative number of milliseconds, not {ms}");
    }
    let mut worker_argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    worker_argv.push("--worker".into());
    let opts = BenchOptions {
        tokenizer: a.tokenizer,
        cases: a.cases,
        limit: a.limit,
        per_group_limit: a.per_group_limit,
        filter: a.filter,
        exclude: a.exclude,
        only_valid: a.only_valid,
        threads: a.threads.max(1),
        settings: RunSettings {
            pretty: a.pretty,
            clock: a.clock,
            schema: JsonSchemaOptions { whitespace, lenient: a.lenient, ..Default::default() },
            compile: CompileOptions { engine, ..CompileOptions::default() },
            recheck_over_ns: a.recheck_max_ms.map(|ms| (ms.max(0.0) * 1e6) as u64),
        },
        per_step: a.per_step,
        timeout_s: a.timeout_s,
        mem_limit_gb: a.mem_limit_gb,
        isolate: !a.no_isolate,
        worker_per_case: a.worker_per_case,
        warmup: !a.no_warmup,
        summary_json: a.summary_json,
        show_failures: a.show_failures,
        worker_argv,
    };
    if a.worker {
        strictly::bench::worker_main(&opts)?;
    } else {
        strictly::bench::run(&opts)?;
    }
    Ok(())
}

fn load_vocab(path: &Option<PathBuf>) -> anyhow::Result<Arc<Vocab>> {
    Ok(Arc::new(match path {
        // One token per byte: no model tokenizer needed.
        Some(p) if p.as_os_str() == "bytes" => Vocab::byte_level(),
        Some(p) => Vocab::from_tokenizer_json(p)?,
        None => Vocab::embedded(),
    }))
}

fn read_constraint(c: &ConstraintArgs) -> anyhow::Result<Constraint> {
    read_optional_constraint(c)?
        .ok_or_else(|| anyhow!("a constraint is required: --regex, --grammar, --schema or --choice"))
}

/// The constraint given on the command line, if any.
fn read_optional_constraint(c: &ConstraintArgs) -> anyhow::Result<Option<Constraint>> {
    if c.regex.is_none() && c.grammar.is_none() && c.schema.is_none() && c.choice.is_none() {
        return Ok(None);
    }
    read_given_constraint(c).map(Some)
}

fn read_given_constraint(c: &ConstraintArgs) -> anyhow::Result<Constraint> {
    if let Some(r) = &c.regex {
        return Ok(Constraint::Regex(r.clone()));
    }
    if let Some(options) = &c.choice {
        return Ok(Constraint::Choice(options.clone()));
    }
    if let Some(path) = &c.grammar {
        let text = std::fs::read(path).with_context(|| format!("cannot read grammar {}", path.display()))?;
        let text = String::from_utf8(text).map_err(|e| anyhow!("grammar {} is not UTF-8: {e}", path.display()))?;
        let g = strictly::grammar::ebnf::parse(&text).with_context(|| format!("grammar {}", path.display()))?;
        return Ok(Constraint::Grammar(g));
    }
    if let Some(path) = &c.schema {
        let text = std::fs::read(path).with_context(|| format!("cannot read schema {}", path.display()))?;
        let schema: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| anyhow!("schema {} is not valid JSON: {e}", path.display()))?;
        return Ok(Constraint::JsonSchema(schema, Default::default()));
    }
    Err(anyhow!("no constraint given"))
}

fn sample(a: SampleArgs) -> anyhow::Result<()> {
    let vocab = load_vocab(&a.tokenizer)?;
    let constraint = read_constraint(&a.constraint)?;
    let compiled = Compiled::new(vocab.clone(), &constraint)?;
    let sampling = SamplingParams { temperature: a.temperature, seed: Some(a.seed), ..SamplingParams::default() };
    sampling.validate()?;
    if a.cover || a.mutate {
        return fuzz_run(&a, &vocab, &constraint);
    }
    let mut stdout = std::io::stdout().lock();
    let mut seen = std::collections::HashSet::new();
    let (mut emitted, attempts) = (0, sample_attempts(a.n, a.unique));
    for i in 0..attempts {
        if emitted == a.n {
            break;
        }
        let seed = a.seed.wrapping_add(i as u64);
        let mut model = RandomLogits::new(vocab.len(), seed);
        let mut matcher = compiled.matcher();
        let opts = GenerateOptions {
            max_tokens: a.max_tokens.unwrap_or(256),
            sampling: SamplingParams { seed: Some(seed), ..sampling.clone() },
            // Random logits cost nothing: there is no forward pass worth a thread to overlap.
            overlap: decode::Overlap::Off,
            ..GenerateOptions::default()
        };
        let out = decode::generate(&mut model, &vocab, Some(&mut matcher), &[], &opts)?;
        if a.unique && !seen.insert(out.bytes.clone()) {
            continue;
        }
        emitted += 1;
        let line = json!({"text": out.text(), "tokens": out.tokens.len(), "finish_reason": out.finish_reason});
        use std::io::Write;
        writeln!(stdout, "{line}")?;
    }
    if emitted < a.n {
        eprintln!("strictly: only {emitted} distinct samples in {attempts} attempts (the language may be that small)");
    }
    Ok(())
}

/// Draws allowed for `n` outputs: `n`, or with --unique enough to get past repeats.
fn sample_attempts(n: usize, unique: bool) -> usize {
    if unique {
        n.saturating_mul(20).saturating_add(100)
    } else {
        n
    }
}

/// `sample --cover` / `sample --mutate`: the coverage-guided generator (`strictly::fuzz`).
/// Every output is checked by the compiled matcher before it is printed or counted: samples
/// must be accepted, near misses rejected.
fn fuzz_run(a: &SampleArgs, vocab: &Arc<Vocab>, constraint: &Constraint) -> anyhow::Result<()> {
    use std::io::Write;
    use strictly::fuzz::{mutate, Checker, GenOptions, Generator, RngSource};
    let schema = match constraint {
        Constraint::JsonSchema(v, _) => Some(v),
        _ => None,
    };
    let grammar = Arc::new(strictly::fuzz::fuzz_grammar(constraint)?);
    let checker = Checker::new(constraint)?;
    let mut gen = Generator::new(
        grammar.clone(),
        GenOptions { max_depth: a.max_depth.unwrap_or(24), max_bytes: 256, cover: true },
    )?;
    if a.max_depth.is_none() && !a.mutate {
        // Rules nested through long cycles of references are out of reach at a fixed depth.
        gen.set_max_depth(gen.auto_max_depth());
    }
    gen.set_max_bytes(match a.max_tokens {
        Some(n) => u32::try_from(n).unwrap_or(u32::MAX),
        // Near misses are about one edit, not coverage: small samples keep them cheap to check.
        None if a.mutate => 256,
        None => Generator::auto_max_bytes(gen.units().len()),
    });
    let mut src = RngSource::new(a.seed);
    let mut stdout = std::io::stdout().lock();
    let mut seen = std::collections::HashSet::new();
    let mut kinds: std::collections::BTreeMap<&'static str, usize> = Default::default();
    let (mut emitted, mut attempts, mut rejected) = (0usize, 0usize, 0usize);
    let limit = sample_attempts(a.n, true);
    while emitted < a.n && attempts < limit {
        attempts += 1;
        let d = gen.draw(&mut src)?;
        let Ok(text) = std::str::from_utf8(&d.text) else {
            rejected += 1;
            continue;
        };
        if schema.is_some() && strictly::fuzz::json_has_contested(text) {
            continue;
        }
        if !checker.accepts(&d.text) {
            // A generator bug: never printed, never counted; reported below.
            rejected += 1;
            continue;
        }
        let new_units = gen.record(&d);
        let line = if a.mutate {
            let mut cands =
                mutate::keep_invalid(mutate::structural(&grammar, &d, &mut src), &checker, schema.is_some());
            if let Some(s) = schema {
                cands.extend(mutate::keep_invalid(mutate::schema(s, text), &checker, false));
            }
            cands.retain(|m| !a.unique || !seen.contains(m.text.as_bytes()));
            // The kind printed least so far, then a random one of that kind.
            let Some(fewest) = cands.iter().map(|m| kinds.get(m.kind).copied().unwrap_or(0)).min() else { continue };
            cands.retain(|m| kinds.get(m.kind).copied().unwrap_or(0) == fewest);
            let m = cands.swap_remove(strictly::fuzz::Source::below(&mut src, cands.len()));
            *kinds.entry(m.kind).or_default() += 1;
            seen.insert(m.text.as_bytes().to_vec());
            json!({"text": m.text, "valid": false, "mutation": m.kind, "label": m.label, "from": text})
        } else {
            if a.unique && !seen.insert(d.text.clone()) {
                continue;
            }
            let tokens = vocab
                .encode(&d.text)
                .ok_or_else(|| anyhow!("sample {text:?} cannot be tokenized with this vocabulary"))?;
            json!({"text": text, "tokens": tokens.len(), "finish_reason": "stop", "new_units": new_units})
        };
        emitted += 1;
        writeln!(stdout, "{line}")?;
    }
    let cov = gen.coverage();
    let mut summary = json!({
        "samples": emitted, "attempts": attempts, "rejected_by_checker": rejected, "max_bytes": gen.options().max_bytes, "max_depth": gen.options().max_depth,
        "units_covered": cov.covered, "units_total": cov.total,
        "rules_covered": cov.rules_covered, "rules_total": cov.rules_total,
    });
    if a.mutate {
        summary["mutations"] = json!(kinds);
    }
    eprintln!("{}", json!({ "coverage": summary }));
    if let Some(path) = &a.coverage_json {
        let full = json!({"summary": summary, "per_rule": cov.per_rule, "uncovered": cov.uncovered});
        std::fs::write(path, serde_json::to_string_pretty(&full)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if emitted < a.n {
        eprintln!("strictly: only {emitted} outputs in {attempts} attempts (the language may be that small)");
    }
    Ok(())
}

fn check(a: CheckArgs) -> anyhow::Result<()> {
    let vocab = load_vocab(&a.tokenizer)?;
    let constraint = read_constraint(&a.constraint)?;
    let t0 = Instant::now();
    let compiled = Compiled::new(vocab.clone(), &constraint)?;
    let compile_us = t0.elapsed().as_micros();
    let mut m = compiled.matcher();
    let mut mask = TokenSet::new(vocab.len());
    let t1 = Instant::now();
    m.fill_mask(&mut mask);
    let mask_us = t1.elapsed().as_micros();
    let kind = match constraint {
        Constraint::Regex(_) => "regex",
        Constraint::Choice(_) => "choice",
        Constraint::Grammar(_) => "grammar",
        Constraint::JsonSchema(..) => "json_schema",
    };
    let mut facts = json!({
        "ok": true,
        "kind": kind,
        "vocab_size": vocab.len(),
        "eos_ids": vocab.eos().iter().map(|t| t.0).collect::<Vec<_>>(),
        "empty_language": compiled.is_empty_language(),
        "accepts_empty": m.is_accepting(),
        "min_tokens": compiled.min_tokens(),
        "forced_prefix": String::from_utf8_lossy(&m.forced_bytes()),
        "first_mask_allowed": mask.len(),
        "compile_us": compile_us,
        "first_mask_us": mask_us,
    });
    if let (Some(f), serde_json::Value::Object(stats)) = (facts.as_object_mut(), compiled.stats()) {
        f.extend(stats);
    }
    println!("{facts}");
    Ok(())
}

// ---- generate: a real model (src/model), constrained or not ----

#[cfg(feature = "model")]
#[derive(Args)]
struct GenerateArgs {
    /// A Hugging Face model directory (config.json, *.safetensors, tokenizer.json, ...)
    /// [default: the embedded stories260K model].
    #[arg(long)]
    model: Option<PathBuf>,
    #[command(flatten)]
    constraint: ConstraintArgs,
    /// The prompt: BOS (where the model wants one) + the prompt's tokens; with --chat, the
    /// user message of a chat.
    #[arg(long)]
    prompt: String,
    /// Render the prompt with the model's chat template (or, for a model without one, the
    /// plain `role: content` template) and generate the assistant's reply.
    #[arg(long)]
    chat: bool,
    /// A system message (with --chat).
    #[arg(long, requires = "chat")]
    system: Option<String>,
    /// Most tokens to generate; a constrained output cut here is still complete.
    #[arg(long, default_value_t = strictly::decode::DEFAULT_MAX_TOKENS)]
    max_tokens: usize,
    /// Seed for sampling (same seed, same output).
    #[arg(long)]
    seed: Option<u64>,
    /// Softmax temperature (0 = greedy) [default: generation_config.json's, else 1].
    #[arg(long, allow_negative_numbers = true)]
    temperature: Option<f32>,
    /// Greedy decoding (temperature 0).
    #[arg(long)]
    greedy: bool,
    #[arg(long)]
    top_k: Option<usize>,
    #[arg(long, allow_negative_numbers = true)]
    top_p: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    min_p: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    top_n_sigma: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    repetition_penalty: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    frequency_penalty: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    presence_penalty: Option<f32>,
    /// A stop string (repeatable); the output ends just before it.
    #[arg(long = "stop")]
    stop: Vec<String>,
    /// Beam search with this many beams (deterministic; prints the best output).
    #[arg(long)]
    beam_width: Option<usize>,
    /// Print text as it is generated.
    #[arg(long)]
    stream: bool,
    /// cpu, cuda or cuda:N (cuda needs a binary built with the `cuda` feature).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// f32, bf16 or f16 [default: f32 on cpu, bf16 on cuda].
    #[arg(long)]
    dtype: Option<String>,
    /// Timing on stderr: load, prefill, tokens/s, forward passes saved by fast-forward, mask time.
    #[arg(long)]
    verbose: bool,
    /// When to compute the mask during the forward pass, on a second thread: off, on, or auto
    /// (when the previous mask took 100 µs or more). The output is the same either way.
    #[arg(long, default_value = "auto")]
    overlap: decode::Overlap,
}

#[cfg(feature = "model")]
fn generate(a: GenerateArgs) -> anyhow::Result<()> {
    use std::io::{IsTerminal, Write};
    use strictly::decode::{BeamOptions, Event};
    use strictly::model::{ChatMessage, DeviceSpec, LoadOptions, LoadedModel, Precision};

    let device: DeviceSpec = a.device.parse()?;
    let precision = a.dtype.as_deref().map(str::parse::<Precision>).transpose()?;
    let load_opts = LoadOptions { device, precision };
    // Read the constraint before loading, so bad input fails fast.
    let constraint = read_optional_constraint(&a.constraint)?;

    let t_load = Instant::now();
    let spinner = a.model.as_ref().map(|dir| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_message(format!("loading {}", dir.display()));
        pb.enable_steady_tick(std::time::Duration::from_millis(100));
        pb
    });
    let loaded = LoadedModel::load(a.model.as_deref(), &load_opts);
    if let Some(pb) = spinner {
        pb.finish_and_clear();
    }
    let loaded = loaded?;
    let load_ms = t_load.elapsed().as_secs_f64() * 1e3;

    let prompt = if a.chat {
        let mut messages = Vec::new();
        if let Some(s) = &a.system {
            messages.push(ChatMessage::new("system", s.as_str()));
        }
        messages.push(ChatMessage::new("user", a.prompt.as_str()));
        loaded.prompt.encode_chat(&messages, &[], true)?
    } else {
        loaded.prompt.encode(&a.prompt)?
    };
    let vocab = loaded.vocab.clone();
    let t_compile = Instant::now();
    let compiled = constraint.map(|c| Compiled::new(vocab.clone(), &c)).transpose()?;
    let compile_ms = t_compile.elapsed().as_secs_f64() * 1e3;
    let mut matcher = compiled.as_ref().map(|c| c.matcher());

    let s = strictly::sample::SamplingOverrides {
        temperature: if a.greedy { Some(0.0) } else { a.temperature },
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        top_n_sigma: a.top_n_sigma,
        repetition_penalty: a.repetition_penalty,
        frequency_penalty: a.frequency_penalty,
        presence_penalty: a.presence_penalty,
        seed: a.seed,
    }
    .over(loaded.defaults.sampling());
    s.validate()?;
    let opts = GenerateOptions {
        max_tokens: a.max_tokens,
        sampling: s,
        stop: a.stop.clone(),
        stop_token_ids: loaded.defaults.eos.clone(),
        overlap: a.overlap,
    };

    let mut model = loaded.model;
    let mut stdout = std::io::stdout().lock();
    let t_gen = Instant::now();
    let out = if let Some(width) = a.beam_width {
        let beam = BeamOptions { width, ..BeamOptions::default() };
        let hyps = decode::beam_search(&model, &vocab, matcher.as_mut(), &prompt, &opts, &beam)?;
        let best = hyps.into_iter().next().ok_or_else(|| anyhow!("beam search finished no output"))?;
        stdout.write_all(best.output.text().as_bytes())?;
        best.output
    } else if a.stream {
        let mut werr = None;
        let out = decode::generate_stream(&mut model, &vocab, matcher.as_mut(), &prompt, &opts, |ev| {
            if let (Event::Text(t), None) = (ev, &werr) {
                if let Err(e) = stdout.write_all(t.as_bytes()).and_then(|_| stdout.flush()) {
                    werr = Some(e);
                }
            }
        })?;
        if let Some(e) = werr {
            return Err(e.into());
        }
        out
    } else {
        let out = decode::generate(&mut model, &vocab, matcher.as_mut(), &prompt, &opts)?;
        stdout.write_all(out.text().as_bytes())?;
        out
    };
    let gen_s = t_gen.elapsed().as_secs_f64();
    if std::io::stdout().is_terminal() {
        writeln!(stdout)?;
    }
    stdout.flush()?;

    if a.verbose {
        let i = &loaded.info;
        eprintln!(
            "strictly: model {} ({}, {:.2}M parameters, {} on {}) loaded in {load_ms:.1} ms",
            i.name,
            i.arch,
            i.parameters as f64 / 1e6,
            i.precision,
            i.device
        );
        if compiled.is_some() {
            eprintln!("strictly: constraint compiled in {compile_ms:.1} ms");
        }
        let st = model.stats();
        let n = out.tokens.len();
        if a.beam_width.is_none() {
            let decode_s = gen_s - st.prefill.as_secs_f64();
            eprintln!(
                "strictly: prompt {} tokens, prefill {:.1} ms; {n} tokens in {:.1} ms: {:.1} tokens/s after the prefill",
                prompt.len(),
                st.prefill.as_secs_f64() * 1e3,
                gen_s * 1e3,
                if decode_s > 0.0 { n.saturating_sub(1) as f64 / decode_s } else { 0.0 },
            );
        } else {
            eprintln!("strictly: prompt {} tokens; best beam {n} tokens in {:.1} ms", prompt.len(), gen_s * 1e3);
        }
        eprintln!(
            "strictly: {} forward passes, {} tokens forced (forward passes saved by fast-forward); finish: {:?}",
            out.forward_passes, out.forced, out.finish_reason
        );
        if compiled.is_some() {
            let m = &out.masks;
            eprintln!(
                "strictly: {} masks in {:.1} ms ({:.1} us each); {} overlapped with a forward pass, {} passes rewound",
                m.count,
                m.time.as_secs_f64() * 1e3,
                m.time.as_secs_f64() * 1e6 / m.count.max(1) as f64,
                m.overlapped,
                m.rewound
            );
        }
    }
    Ok(())
}

// ---- serve: the OpenAI-compatible server (src/server) ----

#[cfg(feature = "server")]
#[derive(Args)]
struct ServeArgs {
    /// A Hugging Face model directory [default: the embedded stories260K model].
    #[arg(long)]
    model: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// The model id clients send [default: the model directory's name, or stories260K].
    #[arg(long)]
    served_model_name: Option<String>,
    /// Generations running at once.
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().max_concurrent)]
    max_concurrent: usize,
    /// Sequences stepped in one batched forward pass (llama models; 1: each generation runs
    /// its own passes).
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().max_batch)]
    max_batch: usize,
    /// Requests waiting for a slot beyond those; more are refused with 429.
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().max_queue)]
    max_queue: usize,
    /// Largest request body in bytes (larger: 413).
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().max_body_bytes)]
    max_body_bytes: usize,
    /// Per-request time limit in seconds, queueing included.
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().request_timeout.as_secs_f64())]
    request_timeout: f64,
    /// Per-constraint compile time limit in seconds.
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().compile_timeout.as_secs_f64())]
    compile_timeout: f64,
    /// Seconds a connection may take to send its request headers (slower ones are closed).
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().header_timeout.as_secs_f64())]
    header_timeout: f64,
    /// cpu, cuda or cuda:N (cuda needs a binary built with the `cuda` feature).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// f32, bf16 or f16 [default: f32 on cpu, bf16 on cuda].
    #[arg(long)]
    dtype: Option<String>,
}

#[cfg(feature = "server")]
fn serve(a: ServeArgs) -> anyhow::Result<()> {
    use std::time::Duration;
    use strictly::model::{DeviceSpec, LoadOptions, LoadedModel, Precision};
    use strictly::server::{AppState, ServerConfig};

    if a.max_batch == 0 {
        return Err(anyhow!("--max-batch must be at least 1 (1 turns batching off)"));
    }
    let seconds = |name: &str, v: f64| -> anyhow::Result<Duration> {
        Duration::try_from_secs_f64(v)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| anyhow!("--{name} must be a positive number of seconds, got {v}"))
    };
    let config = ServerConfig {
        served_model_name: a.served_model_name.clone(),
        max_concurrent: a.max_concurrent.max(1),
        max_queue: a.max_queue,
        max_batch: a.max_batch,
        max_body_bytes: a.max_body_bytes,
        request_timeout: seconds("request-timeout", a.request_timeout)?,
        compile_timeout: seconds("compile-timeout", a.compile_timeout)?,
        header_timeout: seconds("header-timeout", a.header_timeout)?,
        ..ServerConfig::default()
    };
    let device: DeviceSpec = a.device.parse()?;
    let precision = a.dtype.as_deref().map(str::parse::<Precision>).transpose()?;
    let loaded = LoadedModel::load(a.model.as_deref(), &LoadOptions { device, precision })?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tower_http=warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let info = loaded.info.clone();
    let state = AppState::new(loaded, config);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let addr = format!("{}:{}", a.host, a.port);
        let listener =
            tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        let local = listener.local_addr()?;
        eprintln!(
            "strictly: serving {} ({}, {:.2}M parameters, context {}) on http://{local}/v1",
            state.model_name(),
            info.arch,
            info.parameters as f64 / 1e6,
            info.max_positions
        );
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
            eprintln!("strictly: shutting down");
        };
        let header_timeout = state.config().header_timeout;
        strictly::server::serve(listener, strictly::server::app(state), header_timeout, shutdown).await;
        Ok(())
    })
}
