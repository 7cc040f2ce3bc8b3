//! Regex syntax to HIR: [`parse`] for user regexes (the full syntax of the `regex` crate, with
//! errors that name the problem and its column), `builtin` for the engine's own regexes
//! (memoized per thread). The result only ever matches valid UTF-8.

use regex_syntax::hir::Hir;

use crate::error::{Error, Location, Result};

/// The deepest nesting of groups/repetitions accepted.
pub const NEST_LIMIT: u32 = 250;

/// Parses a regex into a HIR, with errors that name the problem and its column.
pub fn parse(pattern: &str) -> Result<Hir> {
    let mut parser = regex_syntax::ParserBuilder::new().nest_limit(NEST_LIMIT).utf8(true).build();
    parser.parse(pattern).map_err(|e| syntax_error(pattern, &e))
}

/// Parses one of the engine's own regexes (JSON string units, numbers, whitespace: known to
/// be valid), memoized per thread: front ends build the same few regexes for every property of
/// every schema, and parsing them again each time was a sizeable share of compile time. The
/// memo is cleared past [`BUILTIN_MEMO`] entries (bounds come from schemas, so some vary).
pub(crate) fn builtin(pattern: &str) -> Hir {
    (*builtin_shared(pattern)).clone()
}

/// [`builtin`], shared: the grammar holds one copy of each built-in regex however many
/// properties use it (cloning and dropping a grammar touches each copy once).
pub(crate) fn builtin_shared(pattern: &str) -> std::sync::Arc<Hir> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::sync::Arc;
    thread_local! {
        static MEMO: RefCell<HashMap<String, Arc<Hir>>> = RefCell::new(HashMap::new());
    }
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if let Some(h) = m.get(pattern) {
            return h.clone();
        }
        let h = Arc::new(parse(pattern).unwrap_or_else(|e| panic!("built-in regex {pattern:?} must parse: {e}")));
        if m.len() >= BUILTIN_MEMO {
            m.clear();
        }
        m.insert(pattern.to_string(), h.clone());
        h
    })
}

/// Most memoized built-in regexes per thread (see [`builtin`]).
const BUILTIN_MEMO: usize = 512;

/// A one-line error for a regex-syntax error: the kind, the column and the text there.
pub(crate) fn syntax_error(pattern: &str, e: &regex_syntax::Error) -> Error {
    let (msg, span) = match e {
        regex_syntax::Error::Parse(e) => (e.kind().to_string(), Some(*e.span())),
        regex_syntax::Error::Translate(e) => (e.kind().to_string(), Some(*e.span())),
        other => (other.to_string(), None),
    };
    let Some(span) = span else {
        return Error::Regex { at: Location::Column(1), msg };
    };
    let near: String = pattern.get(span.start.offset..span.end.offset.max(span.start.offset)).unwrap_or("").into();
    // One line of reasonable length, whatever the span (a 10,000-deep nesting spans it all).
    let near =
        if near.chars().count() > 40 { format!("{}…", near.chars().take(40).collect::<String>()) } else { near };
    let msg = if near.is_empty() { msg } else { format!("{msg} (at {near:?})") };
    Error::Regex { at: Location::Column(span.start.column), msg }
}

/// A rough size of the automaton a regex determinizes to: literal bytes, class ranges,
/// repetition copies (`u64::MAX` past that).
pub(crate) fn hir_weight(h: &Hir) -> u64 {
    hir_weight_within(h, u64::MAX - 1).unwrap_or(u64::MAX)
}

/// [`hir_weight`] if it is at most `cap` (a heavier regex is not walked in full).
pub(crate) fn hir_weight_within(h: &Hir, cap: u64) -> Option<u64> {
    use regex_syntax::hir::{Class, HirKind};
    let w = match h.kind() {
        HirKind::Empty | HirKind::Look(_) => 1,
        HirKind::Literal(l) => l.0.len().max(1) as u64,
        HirKind::Class(Class::Unicode(c)) => c.ranges().len() as u64 + 4,
        HirKind::Class(Class::Bytes(c)) => c.ranges().len() as u64,
        HirKind::Repetition(r) => {
            hir_weight_within(&r.sub, cap)?.checked_mul(u64::from(r.max.unwrap_or(r.min).max(1)) + 1)?
        }
        HirKind::Capture(c) => hir_weight_within(&c.sub, cap)?,
        HirKind::Concat(xs) | HirKind::Alternation(xs) => {
            let mut sum = 0u64;
            for x in xs {
                sum += hir_weight_within(x, cap - sum)?;
            }
            sum
        }
    };
    (w <= cap).then_some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_column() {
        let e = parse("ab(c").unwrap_err().to_string();
        assert!(e.contains("column 3"), "{e}");
        let e = parse("a{5,2}").unwrap_err().to_string();
        assert!(e.contains("invalid regex"), "{e}");
        let e = parse("[z-a]").unwrap_err().to_string();
        assert!(e.contains("column 2"), "{e}");
        // Matching a lone byte that is not UTF-8 is refused.
        assert!(parse(r"(?-u:\xFF)").is_err());
    }

    #[test]
    fn parses_unicode_and_counted_repetition() {
        parse(r"\p{Greek}{2,5}[😀-🙏]+(foo|bar)?\d{3}").unwrap();
    }
}
