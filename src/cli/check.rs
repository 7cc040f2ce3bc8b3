//! `strictly check`: compile a constraint and print one JSON line of facts about it (kind,
//! vocabulary, whether the language is empty and why (`empty_reason`), the forced prefix, the first mask, compile and
//! first-mask times, and the compiled automaton's own statistics, and `warnings`: what loads
//! but is likely a mistake, such as a grammar's unused rules; each also on stderr). The
//! vocabulary is prepared first, as a server prepares it when its model loads, and that time
//! is reported apart (`vocab_prepare_us`): the compile and first-mask times are what each
//! request pays. Bad or unsupported input exits 2 naming the problem (for a schema: the
//! keyword and its JSON pointer).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde_json::json;
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::TokenSet;

use super::{load_vocab, ConstraintArgs, SchemaArgs, TriggerArgs};

#[derive(Args)]
pub struct CheckArgs {
    /// A Hugging Face tokenizer.json or a GGUF model (its tokenizer) [default: the embedded
    /// stories260K tokenizer].
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    #[command(flatten)]
    constraint: ConstraintArgs,
    #[command(flatten)]
    schema: SchemaArgs,
    #[command(flatten)]
    trigger: TriggerArgs,
}

pub fn run(a: CheckArgs) -> anyhow::Result<()> {
    let vocab = load_vocab(&a.tokenizer)?;
    let (constraint, warnings) = a.constraint.required_with_warnings(&a.schema)?;
    let constraint = a.trigger.wrap(constraint);
    super::print_warnings(&warnings);
    // What a server builds once per vocabulary, when its model loads (`VocabEnv::prepare`), is
    // timed apart from what each request pays: the compile and the first mask.
    let t = Instant::now();
    let env = VocabEnv::new(vocab.clone());
    env.prepare();
    let prepare_us = t.elapsed().as_micros();
    let t0 = Instant::now();
    let compiled = Compiled::new(&env, &constraint)?;
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
        Constraint::Triggered { .. } => "triggered",
        Constraint::AfterReasoning { .. } => "after reasoning",
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
        "vocab_prepare_us": prepare_us,
        "warnings": warnings,
    });
    if let (Some(f), Some(why)) = (facts.as_object_mut(), compiled.why_empty()) {
        f.insert("empty_reason".into(), why.into());
    }
    if let (Some(f), serde_json::Value::Object(stats)) = (facts.as_object_mut(), compiled.stats()) {
        f.extend(stats);
    }
    println!("{facts}");
    Ok(())
}
