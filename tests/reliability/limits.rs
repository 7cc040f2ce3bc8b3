//! Every automaton built for a request honours the request's limits (issue 22): the DFAs a
//! front end builds to decide something (does an `enum` value match the `pattern` beside it?
//! is this key region empty? which `const` does the grammar of the keywords beside it
//! accept?) are built under the same [`DfaLimits`] as the lexer's, so each such schema is
//! answered with [`Error::Limit`] or a correct compile, never after building an automaton of
//! unbounded size.
//!
//! Deterministic, not timed: each compile runs on a thread of its own whose allocations are
//! counted (a counting global allocator, per thread), and the test asserts the bytes that thread
//! had live at its peak. The pattern `(a|b)*a(a|b){20}` needs 2^21 DFA states (~480 MB as a
//! dense table): a path that builds it without a limit shows up as hundreds of megabytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use serde_json::{json, Value};
use strictly::automaton::{CfgLimits, CompileOptions, Compiled, Constraint, VocabEnv};
use strictly::grammar::json_schema::JsonSchemaOptions;
use strictly::regular::DfaLimits;
use strictly::{Error, Vocab};

/// Counts the bytes each thread has live (allocated there, not yet freed there) and the peak.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + delta);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the counting touches only
// thread-locals that need no allocation and no destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// The most bytes one of these small schemas may hold live while compiling: the default limits
/// allow 8 MiB for an NFA and 8 MiB for a DFA under construction, and the shared DFA cache keeps
/// tables up to 1 MiB each.
const PEAK_BOUND: isize = 64 << 20;

/// The same under the tight limits below (at most 64 KiB per automaton under construction): a
/// compile that stays within them holds well under a megabyte.
const TIGHT_PEAK_BOUND: isize = 1 << 20;

/// Compiles on a fresh thread; the outcome and the peak bytes that thread held live.
fn compile_counted(schema: Value, limits: CfgLimits) -> (Result<Arc<Compiled>, Error>, isize) {
    std::thread::spawn(move || {
        let vocab = Arc::new(Vocab::byte_level());
        let opts = CompileOptions { limits, ..CompileOptions::default() };
        let constraint = Constraint::JsonSchema(schema, JsonSchemaOptions::default());
        let base = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(base));
        let r = Compiled::with_options(&VocabEnv::new(vocab), &constraint, &opts);
        (r, PEAK.with(Cell::get) - base)
    })
    .join()
    .expect("compiling panicked")
}

/// Does the compiled constraint accept exactly `text` (committed byte by byte)?
fn accepts(c: &Arc<Compiled>, text: &str) -> bool {
    let mut m = c.matcher();
    m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

/// `schema` compiles to exactly the `valid` texts among `valid ∪ invalid`, or is refused with a
/// limit error; either way its compile held at most [`PEAK_BOUND`] bytes ([`TIGHT_PEAK_BOUND`]
/// under tight limits).
#[track_caller]
fn limit_or_exact(what: &str, schema: Value, limits: CfgLimits, valid: &[&str], invalid: &[&str]) {
    let bound = if limits.dfa.dfa_bytes < DfaLimits::default().dfa_bytes { TIGHT_PEAK_BOUND } else { PEAK_BOUND };
    let (r, peak) = compile_counted(schema, limits);
    match &r {
        Ok(c) => {
            for v in valid {
                assert!(accepts(c, v), "{what}: the valid {v} is rejected");
            }
            for v in invalid {
                assert!(!accepts(c, v), "{what}: the invalid {v} is accepted");
            }
        }
        Err(Error::Limit { .. }) => {}
        Err(e) => panic!("{what}: neither a compile nor a limit error: {e}"),
    }
    assert!(peak <= bound, "{what}: the compile held {} KiB at its peak (bound {} KiB)", peak >> 10, bound >> 10);
    eprintln!(
        "limits {what}: {} ({} KiB peak)",
        r.as_ref().map(|_| "compiled".to_string()).unwrap_or_else(|e| e.to_string()),
        peak >> 10
    );
}

/// A pattern whose DFA has 2^21 states, and a 21-letter string it matches.
const EXPONENTIAL: &str = "^(a|b)*a(a|b){20}$";
const MATCHES: &str = "\"abbbbbbbbbbbbbbbbbbbb\"";

#[test]
fn enum_beside_an_exponential_pattern() {
    let s = json!({"type": "string", "pattern": EXPONENTIAL, "enum": ["ab", "abbbbbbbbbbbbbbbbbbbb"]});
    limit_or_exact("enum + pattern", s, CfgLimits::default(), &[MATCHES], &["\"ab\"", "\"b\""]);
    // No value matches: the language is empty (compiled as such, or a schema error), or a limit.
    let s = json!({"type": "string", "pattern": EXPONENTIAL, "enum": ["ab"]});
    let (r, peak) = compile_counted(s, CfgLimits::default());
    let empty = matches!(&r, Ok(c) if c.is_empty_language());
    assert!(empty || matches!(r, Err(Error::Limit { .. } | Error::Schema { .. })), "{:?}", r.map(|_| ()));
    assert!(peak <= PEAK_BOUND, "enum + pattern, none valid: {} MiB at the peak", peak >> 20);
}

#[test]
fn const_beside_keywords_the_value_checker_does_not_know() {
    // `maxItems` sends the `const` through the grammar of the keywords beside it, whose items
    // hold the exponential pattern.
    let s =
        json!({"const": ["abbbbbbbbbbbbbbbbbbbb"], "maxItems": 3, "items": {"type": "string", "pattern": EXPONENTIAL}});
    let valid = format!("[{MATCHES}]");
    limit_or_exact("const + maxItems + items.pattern", s, CfgLimits::default(), &[&valid], &["[\"ab\"]", "[]"]);
    let s = json!({"enum": [["ab"], ["abbbbbbbbbbbbbbbbbbbb"]], "minItems": 1, "items": {"pattern": EXPONENTIAL}});
    limit_or_exact("enum of arrays + items.pattern", s, CfgLimits::default(), &[&valid], &["[\"ab\"]"]);
}

#[test]
fn enum_beside_a_format_under_tight_limits() {
    // The request's own (tight) limits apply to the format's automaton too: a limit error, or
    // the right values.
    let tight =
        CfgLimits { dfa: DfaLimits { nfa_bytes: 64 << 10, dfa_bytes: 64 << 10, states: 500 }, ..Default::default() };
    let s = json!({"type": "string", "format": "email", "maxLength": 200, "enum": ["a@b.co", "nope"]});
    limit_or_exact("enum + format (tight)", s.clone(), tight, &["\"a@b.co\""], &["\"nope\""]);
    limit_or_exact("enum + format", s, CfgLimits::default(), &["\"a@b.co\""], &["\"nope\""]);
}

#[test]
fn key_regions_under_the_request_limits() {
    let s = json!({"type": "object", "patternProperties": {EXPONENTIAL: {"type": "integer"}}, "additionalProperties": false});
    let valid = format!("{{{MATCHES}:1}}");
    limit_or_exact("patternProperties", s, CfgLimits::default(), &[&valid, "{}"], &["{\"ab\":1}"]);
    let s = json!({"type": "object", "propertyNames": {"pattern": EXPONENTIAL}});
    limit_or_exact("propertyNames", s, CfgLimits::default(), &["{}"], &["{\"ab\":1}"]);
    // Under tight limits the key regions are built under those limits, not the defaults.
    let tight =
        CfgLimits { dfa: DfaLimits { nfa_bytes: 16 << 10, dfa_bytes: 16 << 10, states: 40 }, ..Default::default() };
    let s = json!({"type": "object", "patternProperties": {EXPONENTIAL: {"type": "integer"}}, "additionalProperties": false});
    limit_or_exact("patternProperties (tight)", s, tight, &[&valid, "{}"], &["{\"ab\":1}"]);
    let s = json!({"type": "object", "propertyNames": {"pattern": EXPONENTIAL}});
    limit_or_exact("propertyNames (tight)", s, tight, &["{}"], &["{\"ab\":1}"]);
}
