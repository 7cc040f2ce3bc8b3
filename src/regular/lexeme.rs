//! [`Lexeme`]: a regular language as a boolean combination of regexes (intersection,
//! complement, counted repetition), what one regex cannot say directly ("matches `pattern`
//! *and* has at most 20 characters", "any key *except* these"). Front ends build them; the
//! automaton compiles each into one [`Dfa`](super::Dfa) ([`Dfa::shared`](super::Dfa::shared)).
//!
//! Invariant: [`Lexeme::key`] names the language exactly (equal keys, equal languages); the
//! shared DFA cache and the mask cache rely on it.

use std::sync::RwLock;

use regex_syntax::hir::Hir;

/// Most regexes whose key text is kept ([`Lexeme::share_text`]).
const SHARED_TEXTS: usize = 8;

/// Regexes with their key text printed once ([`Lexeme::share_text`]).
static SHARED: RwLock<Vec<(Hir, Box<str>)>> = RwLock::new(Vec::new());

/// Writes the key text of `h` to `out` if it is one of the [`SHARED`] regexes.
fn write_shared_text(h: &Hir, out: &mut String) -> bool {
    let shared = SHARED.read().unwrap_or_else(|e| e.into_inner());
    let found = shared.iter().find(|(x, _)| x == h);
    found.inspect(|(_, text)| out.push_str(text)).is_some()
}

/// A boolean combination of regular languages, each given as a regex HIR matched in full.
#[derive(Debug, Clone)]
pub enum Lexeme {
    Regex(Hir),
    /// The strings in every part.
    And(Vec<Lexeme>),
    /// The byte strings *not* in the part: a complement over all byte strings, so it is only
    /// useful inside an [`Lexeme::And`] with a positive part (the universe, e.g. JSON strings).
    Not(Box<Lexeme>),
    /// `open · unit{min,max} · close`, e.g. a JSON string of at most 4,096 characters: built
    /// with a counter instead of thousands of regex copies when `unit` allows it (prefix-free,
    /// and `close` cannot start a unit). `full` is the same language as one regex, for the
    /// reference recognizer and as the fallback.
    Counted {
        open: Vec<u8>,
        unit: Hir,
        min: u32,
        max: Option<u32>,
        close: Vec<u8>,
        full: Box<Hir>,
    },
}

impl Lexeme {
    /// A text naming the language exactly (equal keys, equal languages): the regexes in
    /// `regex-syntax` notation, `&(a, b)` for intersection, `!(a)` for complement.
    pub fn key(&self) -> String {
        let mut out = String::new();
        self.write_key(&mut out);
        out
    }

    fn write_key(&self, out: &mut String) {
        use std::fmt::Write;
        match self {
            Lexeme::Regex(h) => {
                if !write_shared_text(h, out) {
                    let _ = write!(out, "{h}");
                }
            }
            Lexeme::And(xs) => {
                out.push_str("&(");
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    x.write_key(out);
                }
                out.push(')');
            }
            Lexeme::Not(x) => {
                out.push_str("!(");
                x.write_key(out);
                out.push(')');
            }
            Lexeme::Counted { full, .. } => {
                let _ = write!(out, "{full}");
            }
        }
    }

    /// Prints a plain-regex lexeme's key once for the process: [`Lexeme::key`] then finds an
    /// equal regex among these (a comparison, which stops at the first difference, instead of
    /// printing the tree). For the few regexes that many lexemes contain (any JSON string, in
    /// the key lexeme of every object that allows unnamed keys). At most [`SHARED_TEXTS`]
    /// are kept; other lexemes are ignored.
    pub fn share_text(&self) {
        let Lexeme::Regex(h) = self else { return };
        let mut shared = SHARED.write().unwrap_or_else(|e| e.into_inner());
        if shared.len() < SHARED_TEXTS && !shared.iter().any(|(x, _)| x == h) {
            shared.push((h.clone(), h.to_string().into()));
        }
    }

    /// `open · unit{min,max} · close`.
    pub fn counted(open: &[u8], unit: Hir, min: u32, max: Option<u32>, close: &[u8]) -> Lexeme {
        use regex_syntax::hir::Repetition;
        let rep = Hir::repetition(Repetition { min, max, greedy: true, sub: Box::new(unit.clone()) });
        let full = Box::new(Hir::concat(vec![Hir::literal(open), rep, Hir::literal(close)]));
        Lexeme::Counted { open: open.to_vec(), unit, min, max, close: close.to_vec(), full }
    }

    /// `a ∧ b`, flattening nested intersections.
    pub fn and(parts: Vec<Lexeme>) -> Lexeme {
        let mut flat = Vec::new();
        for p in parts {
            match p {
                Lexeme::And(xs) => flat.extend(xs),
                other => flat.push(other),
            }
        }
        if flat.len() == 1 {
            flat.pop().unwrap()
        } else {
            Lexeme::And(flat)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared regex's key is the text printing would give, alone and inside intersections and
    /// complements; regexes that differ from it only deep inside keep their own text.
    #[test]
    fn a_shared_text_is_the_printed_text() {
        let parse = |s: &str| crate::regular::regex::parse(s).unwrap();
        let shared = Lexeme::Regex(parse(r#""(?:[^"\\]|\\["\\])*""#));
        let near = Lexeme::Regex(parse(r#""(?:[^"\\]|\\["\\/])*""#));
        let names = Lexeme::Not(Box::new(Lexeme::Regex(parse(r#""(?:a|bc)""#))));
        let lexemes = [
            shared.clone(),
            near.clone(),
            Lexeme::and(vec![shared.clone(), names.clone()]),
            Lexeme::and(vec![near.clone(), names]),
        ];
        let before: Vec<String> = lexemes.iter().map(Lexeme::key).collect();
        shared.share_text();
        let after: Vec<String> = lexemes.iter().map(Lexeme::key).collect();
        assert_eq!(before, after);
        assert_ne!(after[0], after[1]);
        assert!(after[2].starts_with(&format!("&({}, !(", after[0])), "{}", after[2]);
    }
}
