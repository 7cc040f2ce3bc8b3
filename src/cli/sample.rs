//! `strictly sample`: outputs of a constraint drawn with seeded random logits (no model), one
//! JSON line each: `{"text", "tokens", "finish_reason"}`. Every `stop` sample is in the
//! language, and with the never-truncated rule every `length` one too.
//!
//! `--cover` swaps the random logits for the coverage-guided generator of [`strictly::fuzz`]
//! (steering toward rules and branches earlier samples missed); `--mutate` prints labelled
//! near misses instead (`"valid": false`). Either way each output is checked by the compiled
//! matcher before it is printed: samples accepted, near misses rejected. The coverage reached
//! goes to stderr as one JSON line.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use clap::Args;
use serde_json::{json, Value};
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::decode::{self, GenerateOptions, RandomLogits};
use strictly::fuzz::{mutate, Checker, Derivation, GenOptions, Generator, RngSource};
use strictly::sample::SamplingParams;
use strictly::Vocab;

use super::{load_vocab, ConstraintArgs, SchemaArgs, TriggerArgs};

#[derive(Args)]
pub struct SampleArgs {
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

pub fn run(a: SampleArgs) -> anyhow::Result<()> {
    let vocab = load_vocab(&a.tokenizer)?;
    let constraint = a.trigger.wrap(a.constraint.required(&a.schema)?);
    let env = VocabEnv::new(vocab.clone());
    let compiled = Compiled::new(&env, &constraint)?;
    let sampling = SamplingParams { temperature: a.temperature, seed: Some(a.seed), ..SamplingParams::default() };
    sampling.validate()?;
    if a.cover || a.mutate {
        return fuzz(&a, &vocab, &constraint);
    }
    let mut stdout = std::io::stdout().lock();
    let mut seen = HashSet::new();
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
fn fuzz(a: &SampleArgs, vocab: &Arc<Vocab>, constraint: &Constraint) -> anyhow::Result<()> {
    let mut f = Fuzz {
        a,
        vocab,
        schema: match constraint {
            Constraint::JsonSchema(v, _) => Some(v),
            _ => None,
        },
        grammar: Arc::new(strictly::fuzz::fuzz_grammar(constraint)?),
        checker: Checker::new(constraint)?,
        src: RngSource::new(a.seed),
        seen: HashSet::new(),
        kinds: BTreeMap::new(),
    };
    let mut gen = f.generator()?;
    let mut stdout = std::io::stdout().lock();
    let (mut emitted, mut attempts, mut rejected) = (0usize, 0usize, 0usize);
    let limit = sample_attempts(a.n, true);
    while emitted < a.n && attempts < limit {
        attempts += 1;
        let mut d = gen.draw(&mut f.src)?;
        if f.schema.is_some() {
            // The generator does not keep an object's keys apart (see `with_distinct_keys`).
            if let Some(fixed) = std::str::from_utf8(&d.text).ok().and_then(strictly::fuzz::with_distinct_keys) {
                d.text = fixed.into_bytes();
            }
        }
        let Ok(text) = std::str::from_utf8(&d.text) else {
            rejected += 1;
            continue;
        };
        if f.schema.is_some() && strictly::fuzz::json_has_contested(text) {
            continue;
        }
        if !f.checker.accepts(&d.text) {
            // A generator bug: never printed, never counted; reported below.
            rejected += 1;
            continue;
        }
        let new_units = gen.record(&d);
        let line = if a.mutate { f.near_miss(&d, text) } else { f.sample(&d, text, new_units)? };
        let Some(line) = line else { continue };
        emitted += 1;
        writeln!(stdout, "{line}")?;
    }
    f.report(&gen, emitted, attempts, rejected)?;
    if emitted < a.n {
        eprintln!("strictly: only {emitted} outputs in {attempts} attempts (the language may be that small)");
    }
    Ok(())
}

/// One `--cover` / `--mutate` run's fixed inputs and what it has printed so far.
struct Fuzz<'a> {
    a: &'a SampleArgs,
    vocab: &'a Vocab,
    /// The JSON Schema, for a schema constraint (schema-aware near misses).
    schema: Option<&'a Value>,
    grammar: Arc<strictly::grammar::Grammar>,
    checker: Checker,
    src: RngSource,
    /// Outputs printed (with --unique, or near misses: never twice).
    seen: HashSet<Vec<u8>>,
    /// Near misses printed per kind of mutation.
    kinds: BTreeMap<&'static str, usize>,
}

impl Fuzz<'_> {
    /// The generator with the depth and byte budgets of the flags (or their defaults).
    fn generator(&self) -> anyhow::Result<Generator> {
        let a = self.a;
        let mut gen = Generator::new(
            self.grammar.clone(),
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
        Ok(gen)
    }

    /// The line for an accepted draw (`None`: a repeat under --unique).
    fn sample(&mut self, d: &Derivation, text: &str, new_units: usize) -> anyhow::Result<Option<Value>> {
        if self.a.unique && !self.seen.insert(d.text.clone()) {
            return Ok(None);
        }
        let tokens = self
            .vocab
            .encode(&d.text)
            .ok_or_else(|| anyhow!("sample {text:?} cannot be tokenized with this vocabulary"))?;
        Ok(Some(json!({"text": text, "tokens": tokens.len(), "finish_reason": "stop", "new_units": new_units})))
    }

    /// A near miss of an accepted draw: of the kind printed least so far, then a random one of
    /// that kind (`None`: no mutation of it is invalid, or new under --unique).
    fn near_miss(&mut self, d: &Derivation, text: &str) -> Option<Value> {
        let json_aware = self.schema.is_some();
        let mut cands =
            mutate::keep_invalid(mutate::structural(&self.grammar, d, &mut self.src), &self.checker, json_aware);
        if let Some(s) = self.schema {
            cands.extend(mutate::keep_invalid(mutate::schema(s, text), &self.checker, false));
        }
        cands.retain(|m| !self.a.unique || !self.seen.contains(m.text.as_bytes()));
        let count = |kinds: &BTreeMap<&str, usize>, kind| kinds.get(kind).copied().unwrap_or(0);
        let fewest = cands.iter().map(|m| count(&self.kinds, m.kind)).min()?;
        cands.retain(|m| count(&self.kinds, m.kind) == fewest);
        let m = cands.swap_remove(strictly::fuzz::Source::below(&mut self.src, cands.len()));
        *self.kinds.entry(m.kind).or_default() += 1;
        self.seen.insert(m.text.as_bytes().to_vec());
        Some(json!({"text": m.text, "valid": false, "mutation": m.kind, "label": m.label, "from": text}))
    }

    /// The coverage summary on stderr, and with --coverage-json the full report.
    fn report(&self, gen: &Generator, emitted: usize, attempts: usize, rejected: usize) -> anyhow::Result<()> {
        let cov = gen.coverage();
        let mut summary = json!({
            "samples": emitted, "attempts": attempts, "rejected_by_checker": rejected, "max_bytes": gen.options().max_bytes, "max_depth": gen.options().max_depth,
            "units_covered": cov.covered, "units_total": cov.total,
            "rules_covered": cov.rules_covered, "rules_total": cov.rules_total,
        });
        if self.a.mutate {
            summary["mutations"] = json!(self.kinds);
        }
        eprintln!("{}", json!({ "coverage": summary }));
        if let Some(path) = &self.a.coverage_json {
            let full = json!({"summary": summary, "per_rule": cov.per_rule, "uncovered": cov.uncovered});
            std::fs::write(path, serde_json::to_string_pretty(&full)?)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(())
    }
}
