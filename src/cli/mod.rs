//! The `strictly` command line: one file per verb, each with its clap `Args` and its `run`.
//!
//! ```text
//! strictly sample   (sample.rs)    seeded random logits: a grammar fuzzer; --cover, --mutate
//! strictly check    (check.rs)     one JSON line of facts about a compiled constraint
//! strictly bench    (bench.rs)     the JSON Schema benchmark (src/bench)
//! strictly generate (generate.rs)  a real model, constrained or not (feature `model`)
//! strictly serve    (serve.rs)     the OpenAI-compatible server (feature `server`)
//! ```
//!
//! This module holds what the verbs share: the parser ([`Cli`]), the constraint flags
//! ([`ConstraintArgs`], [`SchemaArgs`]) and how they become a [`Constraint`], and the vocabulary flag.
//!
//! The contract (DESIGN.md, checked by `tests/cli.rs`): exit 0 on success; exit 2 on bad input
//! with one line on stderr, `strictly: ` and the message (`strictly: error: ` for errors of a
//! verb, the error's causes joined on one line). `--help` and `--version` go to stdout, exit 0.

mod bench;
#[cfg(feature = "model")]
mod chat;
mod check;
#[cfg(feature = "model")]
mod generate;
mod sample;
#[cfg(feature = "server")]
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use clap::{Args, Parser, Subcommand};
use strictly::automaton::Constraint;
use strictly::grammar::json_schema::{JsonSchemaOptions, Whitespace};
use strictly::grammar::trigger::Trigger;
use strictly::grammar::TokenRef;
use strictly::Vocab;

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
    Sample(sample::SampleArgs),
    /// Compile a constraint and print one JSON line of facts about it.
    Check(check::CheckArgs),
    /// JSON Schema benchmark (peer-bench's inputs, method and output): one JSON line per case,
    /// a summary on stderr.
    Bench(bench::BenchArgs),
    /// Generate text with a real model (default: the embedded stories260K), optionally
    /// constrained by a regex, grammar, schema or choice. stdout: the generated text only.
    #[cfg(feature = "model")]
    Generate(Box<generate::GenerateArgs>),
    /// An interactive chat over a model (default: the embedded stories260K), through its chat
    /// template, the replies streamed: a line is a user turn; /schema FILE, /regex RE,
    /// /tools FILE, /reset, /help, /exit. Ctrl-C stops the reply being written.
    #[cfg(feature = "model")]
    Chat(Box<chat::ChatArgs>),
    /// Serve the OpenAI-compatible HTTP API (default: the embedded stories260K model):
    /// /health, /metrics, /v1/models, /v1/chat/completions, /v1/completions.
    #[cfg(feature = "server")]
    Serve(serve::ServeArgs),
}

/// Parses the command line, runs the verb, and turns the outcome into the exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version: a page for a reader that may stop early (`--help | head`)
            quiet_on_closed_pipe();
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
    #[cfg(feature = "server")]
    let serving = matches!(cli.command, Command::Serve(_));
    #[cfg(not(feature = "server"))]
    let serving = false;
    if !serving {
        quiet_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Sample(a) => sample::run(a),
        Command::Check(a) => check::run(a),
        Command::Bench(a) => bench::run(a),
        #[cfg(feature = "model")]
        Command::Generate(a) => generate::run(*a),
        #[cfg(feature = "model")]
        Command::Chat(a) => chat::run(*a),
        #[cfg(feature = "server")]
        Command::Serve(a) => serve::run(a),
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

/// A verb (or a help page) that writes to stdout ends quietly when the reader goes away (`strictly sample … | head`)
/// instead of panicking in `println!`: the default action of SIGPIPE, which Rust's runtime
/// sets to "ignore". Not for `serve`, whose sockets must never kill the process.
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: one C call at start-up, before any thread is spawned; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The constraint flags; at most one. `sample`/`check` need one, `generate` may have none.
#[derive(Args)]
#[group(required = false, multiple = false)]
pub struct ConstraintArgs {
    /// A regex the whole output must match.
    #[arg(long)]
    regex: Option<String>,
    /// A grammar file: GBNF (start rule `root`), or Lark when its name ends in `.lark`
    /// (start rule `start`).
    #[arg(long)]
    grammar: Option<PathBuf>,
    /// A Lark grammar file, whatever its name (start rule `start`).
    #[arg(long, value_name = "FILE")]
    lark: Option<PathBuf>,
    /// A JSON Schema file.
    #[arg(long)]
    schema: Option<PathBuf>,
    /// The output is exactly one of these strings.
    #[arg(long, num_args = 1..)]
    choice: Option<Vec<String>>,
}

impl ConstraintArgs {
    /// The constraint given; an error when none is.
    pub fn required(&self, schema: &SchemaArgs) -> anyhow::Result<Constraint> {
        let (constraint, warnings) = self.required_with_warnings(schema)?;
        print_warnings(&warnings);
        Ok(constraint)
    }

    /// [`required`](Self::required), with the warnings about the input returned instead of
    /// printed (a grammar's unused rules: each as `FILE: LINE:COL: what`).
    pub fn required_with_warnings(&self, schema: &SchemaArgs) -> anyhow::Result<(Constraint, Vec<String>)> {
        let (constraint, warnings) = self.load(schema)?;
        let constraint = constraint
            .ok_or_else(|| anyhow!("a constraint is required: --regex, --grammar, --lark, --schema or --choice"))?;
        Ok((constraint, warnings))
    }

    /// The constraint given, if any (files read and parsed; a schema with `schema`'s options);
    /// warnings about it go to stderr.
    pub fn optional(&self, schema: &SchemaArgs) -> anyhow::Result<Option<Constraint>> {
        let (constraint, warnings) = self.load(schema)?;
        print_warnings(&warnings);
        Ok(constraint)
    }

    fn load(&self, schema: &SchemaArgs) -> anyhow::Result<(Option<Constraint>, Vec<String>)> {
        if let Some(r) = &self.regex {
            return Ok((Some(Constraint::Regex(r.clone())), vec![]));
        }
        if let Some(options) = &self.choice {
            return Ok((Some(Constraint::Choice(options.clone())), vec![]));
        }
        let grammar = match (&self.grammar, &self.lark) {
            (Some(path), _) => Some((path, path.extension().is_some_and(|e| e == "lark"))),
            (None, Some(path)) => Some((path, true)),
            (None, None) => None,
        };
        if let Some((path, lark)) = grammar {
            let text = std::fs::read(path).with_context(|| format!("cannot read grammar {}", path.display()))?;
            let text = String::from_utf8(text).map_err(|e| anyhow!("grammar {} is not UTF-8: {e}", path.display()))?;
            let (g, warnings) = if lark {
                strictly::grammar::lark::parse_with_warnings(&text, &Default::default())
                    .with_context(|| format!("Lark grammar {}", path.display()))?
            } else {
                strictly::grammar::ebnf::parse_with_warnings(&text, &Default::default())
                    .with_context(|| format!("grammar {}", path.display()))?
            };
            let warnings = warnings.iter().map(|w| format!("grammar {}: {w}", path.display())).collect();
            return Ok((Some(Constraint::Grammar(g)), warnings));
        }
        if let Some(path) = &self.schema {
            let options = schema;
            let text = std::fs::read(path).with_context(|| format!("cannot read schema {}", path.display()))?;
            let schema = strictly::grammar::json_schema::read_document(&text)
                .map_err(|e| anyhow!("schema {}: {e}", path.display()))?;
            return Ok((Some(Constraint::JsonSchema(schema, options.options())), vec![]));
        }
        Ok((None, vec![]))
    }
}

/// The sampling flags `generate` and `chat` share.
#[derive(Args, Debug, Clone, Default)]
pub struct SamplingArgs {
    /// Seed for sampling (same seed, same output).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Softmax temperature (0 = greedy) [default: generation_config.json's, else 1].
    #[arg(long, allow_negative_numbers = true)]
    pub temperature: Option<f32>,
    /// Greedy decoding (temperature 0).
    #[arg(long)]
    pub greedy: bool,
    #[arg(long)]
    pub top_k: Option<usize>,
    #[arg(long, allow_negative_numbers = true)]
    pub top_p: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    pub min_p: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    pub top_n_sigma: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    pub repetition_penalty: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    pub frequency_penalty: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    pub presence_penalty: Option<f32>,
    /// DRY: a token that would extend a repeat of the context longer than
    /// --dry-allowed-length loses multiplier·base^(length − allowed) [default: 0, off].
    #[arg(long, allow_negative_numbers = true)]
    pub dry_multiplier: Option<f32>,
    /// DRY's base [default: 1.75].
    #[arg(long, allow_negative_numbers = true)]
    pub dry_base: Option<f32>,
    /// The longest repeat DRY lets pass [default: 2].
    #[arg(long)]
    pub dry_allowed_length: Option<usize>,
    /// How many of the last tokens DRY looks at: -1 all (the default), 0 none.
    #[arg(long, allow_negative_numbers = true)]
    pub dry_penalty_last_n: Option<i64>,
    /// A string that ends a DRY repeat (repeatable; replaces the default \n : " *).
    #[arg(long = "dry-sequence-breaker")]
    pub dry_sequence_breakers: Vec<String>,
}

impl SamplingArgs {
    /// The flags given (`--greedy` wins over `--temperature`).
    pub fn overrides(&self) -> strictly::sample::SamplingOverrides {
        strictly::sample::SamplingOverrides {
            temperature: if self.greedy { Some(0.0) } else { self.temperature },
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            top_n_sigma: self.top_n_sigma,
            repetition_penalty: self.repetition_penalty,
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            dry_multiplier: self.dry_multiplier,
            dry_base: self.dry_base,
            dry_allowed_length: self.dry_allowed_length,
            dry_penalty_last_n: self.dry_penalty_last_n,
            dry_sequence_breakers: (!self.dry_sequence_breakers.is_empty()).then(|| self.dry_sequence_breakers.clone()),
            seed: self.seed,
        }
    }
}

/// `--chat-template FILE`: a Jinja chat template in place of the model's own.
#[derive(Args)]
pub struct ChatTemplateArgs {
    /// A Jinja chat template (Hugging Face's format) to use instead of the model's own, e.g. for
    /// a GGUF file without one or to try another tool-call or reasoning format.
    #[arg(long, value_name = "FILE")]
    chat_template: Option<std::path::PathBuf>,
}

impl ChatTemplateArgs {
    /// Reads the template (errors name the file) and puts it into `loaded`.
    pub fn apply(&self, loaded: &mut strictly::model::LoadedModel) -> anyhow::Result<()> {
        let Some(path) = &self.chat_template else { return Ok(()) };
        let source = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("cannot read the chat template {}: {e}", path.display()))?;
        let template = strictly::model::ChatTemplate::new(&source, &path.display().to_string())?;
        loaded.prompt.set_chat_template(template);
        Ok(())
    }
}

/// `--trigger` / `--trigger-token`: the constraint starts where the output first writes this
/// text (or this token); before it, free text (a lazy constraint, see
/// `strictly::grammar::trigger`).
#[derive(Args)]
pub struct TriggerArgs {
    /// Free text until this string, then the constraint from it on (a lazy grammar); an output
    /// that never writes it is free text. Repeat it for several: the first the output writes
    /// starts the constraint.
    #[arg(long)]
    trigger: Vec<String>,
    /// Like --trigger, but one token of the vocabulary starts the constraint (a control token
    /// such as `<|python_tag|>`, or `<[ID]>` by id), never its text spelled by other tokens.
    #[arg(long, value_name = "TOKEN")]
    trigger_token: Vec<String>,
}

impl TriggerArgs {
    fn triggers(&self) -> Vec<Trigger> {
        let texts = self.trigger.iter().map(|t| Trigger::Text(t.clone()));
        texts.chain(self.trigger_token.iter().map(|t| Trigger::Token(TokenRef::parse(t)))).collect()
    }

    /// `constraint`, started by the triggers when any is given.
    pub fn wrap(&self, constraint: Constraint) -> Constraint {
        let triggers = self.triggers();
        if triggers.is_empty() {
            return constraint;
        }
        Constraint::Triggered { triggers, then: Box::new(constraint) }
    }

    /// [`wrap`](Self::wrap) for a constraint that may be absent (an error if a trigger is given
    /// without one).
    pub fn wrap_optional(&self, constraint: Option<Constraint>) -> anyhow::Result<Option<Constraint>> {
        match constraint {
            None if !self.triggers().is_empty() => {
                Err(anyhow!("--trigger/--trigger-token needs a constraint: --regex, --grammar, --schema or --choice"))
            }
            c => Ok(c.map(|c| self.wrap(c))),
        }
    }
}

/// The model at `path` as a draft model for `vocab`'s model: the same vocabulary, token for
/// token, and a cache that can truncate (a safetensors model moves to the batched network).
pub fn draft_model(
    path: &std::path::Path,
    vocab: &strictly::Vocab,
    opts: &strictly::model::LoadOptions,
) -> anyhow::Result<strictly::decode::DraftModel> {
    let loaded = strictly::model::LoadedModel::load(Some(path), opts)
        .map_err(|e| anyhow!("--draft-model {}: {e}", path.display()))?;
    let same = loaded.vocab().len() == vocab.len()
        && (0..vocab.len() as u32)
            .all(|i| loaded.vocab().bytes(strictly::TokenId(i)) == vocab.bytes(strictly::TokenId(i)));
    if !same {
        return Err(anyhow!("--draft-model {}: its vocabulary is not the model's", path.display()));
    }
    use strictly::decode::LanguageModel;
    let mut model = loaded.model;
    if !model.can_truncate() {
        model = model.on_batch_net().map_err(|e| anyhow!("--draft-model {}: cannot draft: {e}", path.display()))?;
    }
    let model = std::sync::Mutex::new(model);
    Ok(strictly::decode::DraftModel::new(move || {
        Ok(Box::new(model.lock().unwrap_or_else(|p| p.into_inner()).restart()))
    }))
}

/// Warnings about the input, one line each on stderr (stdout stays the verb's own output).
pub fn print_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("strictly: warning: {w}");
    }
}

/// `--whitespace`: the layout of JSON Schema output (see [`Whitespace`]).
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum WhitespaceArg {
    /// No whitespace: `{"a":1}`.
    Compact,
    /// One newline and two spaces per level, `": "` after keys.
    Pretty,
    /// Any bounded whitespace between tokens, as the model chooses.
    #[value(alias = "bounded")]
    Flexible,
}

impl From<WhitespaceArg> for Whitespace {
    fn from(w: WhitespaceArg) -> Whitespace {
        match w {
            WhitespaceArg::Compact => Whitespace::Compact,
            WhitespaceArg::Pretty => Whitespace::Pretty,
            WhitespaceArg::Flexible => Whitespace::Flexible,
        }
    }
}

/// How `--schema` compiles: the flags beside the constraint flags (they do nothing without
/// `--schema`).
#[derive(Args)]
pub struct SchemaArgs {
    /// The layout of JSON output.
    #[arg(long, value_enum, default_value_t = WhitespaceArg::Compact)]
    whitespace: WhitespaceArg,
    /// The schema's exact language: keys and items the schema allows without naming them,
    /// integers of any size, any year (default: the sensible subset; see the README's "What
    /// strictly generates").
    #[arg(long)]
    exact: bool,
}

impl SchemaArgs {
    /// The JSON Schema options these flags ask for.
    pub fn options(&self) -> JsonSchemaOptions {
        let base = if self.exact { JsonSchemaOptions::exact() } else { JsonSchemaOptions::default() };
        base.with_whitespace(self.whitespace.into())
    }
}

/// The vocabulary of `--tokenizer` ([`strictly::bench::vocab_at`]).
pub fn load_vocab(path: &Option<PathBuf>) -> anyhow::Result<Arc<Vocab>> {
    Ok(Arc::new(strictly::bench::vocab_at(path.as_deref())?))
}
