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

#[derive(Parser)]
#[command(name = "strictly", version, about = "Constrained decoding: regexes, grammars and JSON Schemas as token masks")]
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
}

#[derive(Args)]
#[group(required = true, multiple = false)]
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
    /// Most tokens per sample; a sample cut here is still complete.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    temperature: f32,
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

fn load_vocab(path: &Option<PathBuf>) -> anyhow::Result<Arc<Vocab>> {
    Ok(Arc::new(match path {
        Some(p) => Vocab::from_tokenizer_json(p)?,
        None => Vocab::embedded(),
    }))
}

fn read_constraint(c: &ConstraintArgs) -> anyhow::Result<Constraint> {
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
        let schema: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| anyhow!("schema {} is not valid JSON: {e}", path.display()))?;
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
    let mut stdout = std::io::stdout().lock();
    for i in 0..a.n {
        let seed = a.seed.wrapping_add(i as u64);
        let mut model = RandomLogits::new(vocab.len(), seed);
        let mut matcher = compiled.matcher();
        let opts = GenerateOptions {
            max_tokens: a.max_tokens,
            sampling: SamplingParams { seed: Some(seed), ..sampling.clone() },
            ..GenerateOptions::default()
        };
        let out = decode::generate(&mut model, &vocab, Some(&mut matcher), &[], &opts)?;
        let line = json!({"text": out.text(), "tokens": out.tokens.len(), "finish_reason": out.finish_reason});
        use std::io::Write;
        writeln!(stdout, "{line}")?;
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
