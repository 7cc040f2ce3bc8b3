//! Running one case: compile, then every instance token by token through a fresh matcher.
//!
//! The method is peer-bench's (its README, "Per case"), step for step:
//!
//! 1. Every instance is serialized with serde_json (compact, or pretty with `--pretty`; key
//!    order as written in the input) and tokenized once with [`Vocab::encode_canonical`]
//!    (Hugging Face `encode(text, add_special_tokens=false)`, prefix-space normalizers
//!    removed). Not timed.
//! 2. `compile_us`: schema → ready [`Compiled`]. `ttfm_us`: compile + fresh matcher + first
//!    mask.
//! 3. For each token: [`Matcher::fill_mask`](crate::automaton::Matcher::fill_mask) over the whole vocabulary (only this call is in
//!    `mask_us`); the token must be in that mask, else the instance is `rejected` at that step;
//!    then [`Matcher::commit`](crate::automaton::Matcher::commit) (timed apart, `commit_us_mean`). A commit that fails for a token
//!    the mask allowed is an `engine_error`.
//! 4. After the last token the matcher must accept (EOS allowed), else `not_accepting`.
//! 5. strictly's addition: around every mask call, outside its timing, the thread's page
//!    faults and context switches and the wall clock are read; the slowest mask's are
//!    reported (`mask_slowest`). With `recheck_over_ns`, a case whose slowest mask passed it
//!    is run [`RECHECKS`] more times (after its memory was measured) and those runs' slowest
//!    masks are reported (`mask_max_rechecks_us`); the first run's figures stay the case's.
//!
//! Valid instances must end `accepted`; invalid ones `rejected` or `not_accepting`.

use std::sync::Arc;

use serde_json::Value;

use super::cases::{Case, Instance};
pub use super::result::{CaseResult, InstanceResult, SlowestMask};
use super::stats::{summarize_ns_as_us, us, Clock, ThreadEvents};
use crate::automaton::VocabEnv;
use crate::automaton::{CompileOptions, Compiled, Constraint};
use crate::grammar::json_schema::{self, JsonSchemaOptions};
use crate::vocab::{TokenId, TokenSet, Vocab};

/// How cases are run (everything but the inputs). The default compiles schemas to their
/// exact language ([`JsonSchemaOptions::exact`]): engines are compared on the same language.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Serialize instances indented (serde_json's pretty printer) instead of compact.
    pub pretty: bool,
    pub clock: Clock,
    pub schema: JsonSchemaOptions,
    pub compile: CompileOptions,
    /// Re-run a case [`RECHECKS`] times (fresh compile, same process) when its slowest mask
    /// took longer than this many ns, and report those runs' slowest masks beside it.
    pub recheck_over_ns: Option<u64>,
    /// Every mask under a budget of exactly the tokens the instance has left
    /// ([`Matcher::fill_mask_within`](crate::automaton::Matcher::fill_mask_within)), the
    /// tightest budget its own tokens fit: it measures what counting a budget costs where it
    /// binds at every step, and a valid instance rejected under it is a budget that refused a
    /// completion that fits (counts across lexemes are upper bounds, see `automaton::shortest`).
    pub tight_budget: bool,
}

impl Default for RunSettings {
    fn default() -> RunSettings {
        RunSettings {
            pretty: false,
            clock: Clock::default(),
            schema: JsonSchemaOptions::exact(),
            compile: CompileOptions::default(),
            recheck_over_ns: None,
            tight_budget: false,
        }
    }
}

/// How many times `recheck_over_ns` re-runs a case.
pub const RECHECKS: usize = 2;

/// Only cases whose first run took less than this (wall clock) are re-run.
const RECHECK_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// `s` cut to at most `n` bytes (on a character boundary), with `...` if cut.
pub fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

fn serialize(v: &Value, pretty: bool) -> String {
    let r = if pretty { serde_json::to_string_pretty(v) } else { serde_json::to_string(v) };
    // A `Value` with string keys always serializes.
    r.expect("serde_json::Value serializes")
}

/// Runs `case` (the `idx`-th of the run) and measures it: 1. serialize and tokenize the
/// instances (untimed), 2. compile and take the first mask, 3-4. every instance token by token,
/// then the status, the memory, and with `recheck_over_ns` the re-runs of a slow maximum.
pub fn run_case(env: &Arc<VocabEnv>, case: &Case, idx: usize, settings: &RunSettings) -> CaseResult {
    let vocab = env.vocab();
    let mut res = CaseResult::for_case(case, idx);
    let prepared = prepare_instances(vocab, case, settings.pretty);
    let memory = MemoryProbe::start();
    let started = std::time::Instant::now();
    let mut mask = TokenSet::new(vocab.len());
    let Some(compiled) = compile_case(env, case, settings, &mut mask, &mut res) else { return res };
    let slowest = run_instances(vocab, &compiled, &mut mask, case, prepared, settings, &mut res);
    res.status = status(&res).into();
    drop(compiled);
    (res.peak_rss_mib, res.rss_before_mib) = memory.finish();
    if let (Some((ns, _)), Some(limit)) = (&slowest, settings.recheck_over_ns) {
        // A long case is not re-run: its re-runs could pass the worker's per-case timeout.
        if *ns > limit && started.elapsed() < RECHECK_WITHIN {
            res.mask_max_rechecks_us = recheck(env, case, idx, settings);
        }
    }
    res.mask_slowest = slowest.map(|(_, s)| s);
    res
}

/// Each instance's text (serialized compact or pretty) and its tokens (canonical where the
/// vocabulary has a canonical tokenization, else any; empty when none).
fn prepare_instances(vocab: &Vocab, case: &Case, pretty: bool) -> Vec<(String, Vec<TokenId>)> {
    case.instances
        .iter()
        .map(|inst| {
            let text = serialize(&inst.data, pretty);
            let toks = vocab.encode_canonical(&text).or_else(|| vocab.encode(text.as_bytes())).unwrap_or_default();
            (text, toks)
        })
        .collect()
}

/// Compiles the case's schema and takes the first mask, timing both into `res` (and listing
/// what a lenient compile let through); `None` after a compile error, recorded in `res`.
fn compile_case(
    env: &Arc<VocabEnv>,
    case: &Case,
    settings: &RunSettings,
    mask: &mut TokenSet,
    res: &mut CaseResult,
) -> Option<Arc<Compiled>> {
    let clock = settings.clock;
    let constraint = Constraint::JsonSchema(case.schema.clone(), settings.schema.clone());
    let t0 = clock.now_ns();
    let compiled = Compiled::with_options(env, &constraint, &settings.compile);
    res.compile_us = Some(us(clock.now_ns() - t0));
    let compiled = match compiled {
        Ok(c) => c,
        Err(e) => {
            res.status = "compile_error".into();
            res.error = Some(truncate(&e.to_string(), 500));
            return None;
        }
    };
    let mut first = compiled.matcher();
    first.fill_mask(mask);
    res.ttfm_us = Some(us(clock.now_ns() - t0));
    drop(first);
    res.automaton = Some(compiled.stats());
    if settings.schema.lenient {
        // Compiled once more, untimed, only to list what the lenient compile let through.
        if let Ok(g) = json_schema::compile(&case.schema, &settings.schema) {
            res.unenforced = g.unenforced.iter().filter_map(|u| serde_json::to_value(u).ok()).collect();
        }
    }
    Some(compiled)
}

/// Runs every instance token by token, adding its result and counts to `res`; returns the
/// case's slowest mask (ns, and where).
fn run_instances(
    vocab: &Vocab,
    compiled: &Arc<Compiled>,
    mask: &mut TokenSet,
    case: &Case,
    prepared: Vec<(String, Vec<TokenId>)>,
    settings: &RunSettings,
    res: &mut CaseResult,
) -> Option<(u64, SlowestMask)> {
    let mut all_mask_ns = Vec::new();
    let mut commit_total = 0u64;
    let mut slowest: Option<(u64, SlowestMask)> = None;
    for (i, (inst, (text, toks))) in case.instances.iter().zip(prepared).enumerate() {
        let mut ir = run_instance(vocab, compiled, mask, inst, &text, &toks, settings);
        ir.idx = i;
        if let Some((ns, mut s)) = ir.slowest.take() {
            if slowest.as_ref().is_none_or(|(best, _)| ns > *best) {
                s.instance = i;
                slowest = Some((ns, s));
            }
        }
        if inst.valid {
            res.n_valid_accepted += usize::from(ir.outcome == "accepted");
        } else {
            res.n_invalid_rejected += usize::from(ir.agree);
        }
        res.n_tokens += ir.n_tokens;
        res.n_masks += ir.mask_ns.len();
        commit_total += ir.commit_ns_total;
        ir.mask_us = summarize_ns_as_us(&ir.mask_ns);
        all_mask_ns.extend_from_slice(&ir.mask_ns);
        res.instances.push(ir);
    }
    res.mask_us = summarize_ns_as_us(&all_mask_ns);
    if res.n_masks > 0 {
        res.commit_us_mean = Some((commit_total as f64 / res.n_masks as f64 / 100.0).round() / 10.0);
    }
    slowest
}

/// The case's status once its instances have run: the first kind of disagreement (valid
/// instances first), `engine_error` when an instance hit one, else `ok`.
fn status(res: &CaseResult) -> &'static str {
    let engine_error = res.instances.iter().any(|i| i.outcome == "engine_error");
    if res.n_valid_accepted < res.n_valid {
        if engine_error {
            "engine_error"
        } else {
            "rejected_valid"
        }
    } else if res.n_invalid_rejected < res.n_invalid {
        if engine_error {
            "engine_error"
        } else {
            "accepted_invalid"
        }
    } else {
        "ok"
    }
}

/// The slowest mask µs of each of [`RECHECKS`] re-runs of the case, from cold caches.
fn recheck(env: &Arc<VocabEnv>, case: &Case, idx: usize, settings: &RunSettings) -> Vec<f64> {
    let once = RunSettings { recheck_over_ns: None, ..settings.clone() };
    let rerun = || {
        // Warm caches would make this no replay: the DFAs (shared process-wide by
        // lexeme) and the vocabulary's mask cache are emptied, so the re-run starts
        // colder than the first run did (the lexemes earlier cases shared are cold too).
        env.clear_mask_cache();
        run_case(env, case, idx, &once).mask_us.map(|m| m.max)
    };
    (0..RECHECKS).filter_map(|_| rerun()).collect()
}

fn run_instance(
    vocab: &Vocab,
    compiled: &Arc<Compiled>,
    mask: &mut TokenSet,
    inst: &Instance,
    text: &str,
    toks: &[TokenId],
    settings: &RunSettings,
) -> InstanceResult {
    let clock = settings.clock;
    let mut ir = InstanceResult {
        description: inst.description.clone(),
        expected_valid: inst.valid,
        n_tokens: toks.len(),
        tokenization_mismatch: vocab.decode(toks) != text.as_bytes(),
        ..InstanceResult::default()
    };
    let text = text.as_bytes();
    let mut m = compiled.matcher();
    let mut off = 0usize;
    // (outcome, step, detail) of an instance that did not end accepted.
    let mut outcome: Option<(&str, usize, String)> = None;
    for (k, &t) in toks.iter().enumerate() {
        // The events and the wall clock are read outside the timed call.
        let (events, wall) = (ThreadEvents::now(), std::time::Instant::now());
        let ts = clock.now_ns();
        if settings.tight_budget {
            m.fill_mask_within(mask, toks.len() - k);
        } else {
            m.fill_mask(mask);
        }
        let ns = clock.now_ns() - ts;
        let (wall, events) = (wall.elapsed(), ThreadEvents::now().since(events));
        ir.mask_ns.push(ns);
        if ir.slowest.as_ref().is_none_or(|(best, _)| ns > *best) {
            let wall_us = us(wall.as_nanos() as u64);
            ir.slowest = Some((ns, SlowestMask { instance: 0, step: k, us: us(ns), wall_us, events }));
        }
        let bytes = vocab.bytes(t);
        if !mask.contains(t) {
            ir.rejected_in = Some(json_context(text, off).to_string());
            ir.mask_empty = mask.is_empty();
            let shown = String::from_utf8_lossy(bytes);
            let at = context_snippet(text, off, bytes.len());
            outcome = Some(("rejected", k, format!("token {} {shown:?} at byte {off}: {at}", t.0)));
            break;
        }
        let tc = clock.now_ns();
        let r = m.commit(t);
        ir.commit_ns_total += clock.now_ns() - tc;
        if let Err(e) = r {
            let detail = truncate(&format!("commit of allowed token {}: {e}", t.0), 300);
            outcome = Some(("engine_error", k, detail));
            break;
        }
        off += bytes.len();
    }
    if outcome.is_none() && !m.is_accepting() {
        outcome = Some(("not_accepting", toks.len(), "all tokens consumed but EOS not allowed".into()));
    }
    match outcome {
        None => ir.outcome = "accepted".into(),
        Some((o, k, d)) => {
            ir.outcome = o.into();
            ir.step = Some(k);
            ir.detail = Some(d);
        }
    }
    ir.agree = match (inst.valid, ir.outcome.as_str()) {
        (true, o) => o == "accepted",
        (false, o) => o == "rejected" || o == "not_accepting",
    };
    ir
}

/// `text` around bytes `off..off+len`, the token marked `⟦…⟧`: 40 bytes before, 20 after.
pub fn context_snippet(text: &[u8], off: usize, len: usize) -> String {
    let off = off.min(text.len());
    let (a, b) = (off.saturating_sub(40), (off + len).min(text.len()));
    let c = (b + 20).min(text.len());
    let s = |r: &[u8]| String::from_utf8_lossy(r).into_owned();
    format!("{}⟦{}⟧{}", s(&text[a..off]), s(&text[off..b]), s(&text[b..c]))
}

/// The lexical JSON context at byte `off` of `text` (where a token was rejected): `key`
/// (inside or opening an object key), `string`, `number`, `literal`, `structure` (`{}[],:`),
/// `whitespace`, `end` or `other`.
pub fn json_context(text: &[u8], off: usize) -> &'static str {
    // Containers open before `off`; `expect_key`: the next string would be a key.
    let mut stack: Vec<u8> = Vec::new();
    let (mut expect_key, mut in_str, mut in_key, mut esc) = (false, false, false, false);
    for &b in &text[..off.min(text.len())] {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                (in_str, in_key) = (false, false);
            }
            continue;
        }
        match b {
            b'"' => {
                (in_str, in_key, expect_key) = (true, expect_key, false);
            }
            b'{' => {
                stack.push(b'{');
                expect_key = true;
            }
            b'[' => stack.push(b'['),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => expect_key = stack.last() == Some(&b'{'),
            b':' => expect_key = false,
            _ => {}
        }
    }
    if in_str {
        return if in_key { "key" } else { "string" };
    }
    let prev_digit = off > 0 && text.get(off - 1).is_some_and(u8::is_ascii_digit);
    match text.get(off) {
        None => "end",
        Some(b'"') if expect_key => "key",
        Some(b'"') => "string",
        Some(c) if c.is_ascii_digit() || *c == b'-' => "number",
        Some(b'.' | b'e' | b'E' | b'+') if prev_digit => "number",
        Some(b't' | b'f' | b'n') => "literal",
        Some(b'{' | b'}' | b'[' | b']' | b',' | b':') => "structure",
        Some(c) if c.is_ascii_whitespace() => "whitespace",
        Some(_) => "other",
    }
}

/// The untimed warm-up case (peer-bench's), run three times before the first real case.
pub fn warm_up(env: &Arc<VocabEnv>, settings: &RunSettings) -> CaseResult {
    let case = Case {
        id: "warmup".into(),
        group: "warmup".into(),
        description: String::new(),
        schema: serde_json::json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"array","items":{"type":"number"}}},"required":["a"]}),
        instances: vec![Instance {
            description: String::new(),
            data: serde_json::json!({"a":"hello world","b":42,"c":[1.5,2,-3e5]}),
            valid: true,
        }],
        file: std::path::PathBuf::new(),
    };
    let settings = RunSettings { pretty: false, clock: Clock::Wall, recheck_over_ns: None, ..settings.clone() };
    let mut last = CaseResult::default();
    for _ in 0..3 {
        last = run_case(env, &case, 0, &settings);
    }
    last
}

/// Peak resident memory over a stretch of work, from `/proc/self/status` (Linux). The
/// high-water mark is reset at the start through `/proc/self/clear_refs`; where that is not
/// possible nothing is reported.
struct MemoryProbe {
    before_kib: Option<u64>,
}

impl MemoryProbe {
    fn start() -> MemoryProbe {
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        MemoryProbe { before_kib: if reset { status_kib("VmRSS") } else { None } }
    }

    /// (peak, before) in MiB.
    fn finish(self) -> (Option<f64>, Option<f64>) {
        let Some(before) = self.before_kib else { return (None, None) };
        let mib = |k: u64| (k as f64 / 1024.0 * 10.0).round() / 10.0;
        (status_kib("VmHWM").map(mib), Some(mib(before)))
    }
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    line[field.len() + 1..].trim().trim_end_matches("kB").trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_context_classifies_positions() {
        let t = br#"{"name":"x","n":12e3,"a":[true,{"k":1}]}"#;
        let at = |needle: &str| json_context(t, String::from_utf8_lossy(t).find(needle).unwrap());
        assert_eq!(json_context(t, 1), "key");
        assert_eq!(json_context(t, 2), "key");
        assert_eq!(at("\"x\""), "string");
        assert_eq!(at("12e3"), "number");
        assert_eq!(at("e3"), "number");
        assert_eq!(at("true"), "literal");
        assert_eq!(at("\"k\""), "key");
        assert_eq!(at(",\"n\""), "structure");
        assert_eq!(json_context(t, t.len()), "end");
    }

    #[test]
    fn snippet_marks_the_token() {
        assert_eq!(context_snippet(b"[1,2,3]", 3, 1), "[1,⟦2⟧,3]");
        assert_eq!(context_snippet(b"ab", 2, 3), "ab⟦⟧");
    }

    #[test]
    fn memory_probe_reads_proc() {
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(status_kib("VmRSS").is_some_and(|k| k > 0));
        }
    }
}
