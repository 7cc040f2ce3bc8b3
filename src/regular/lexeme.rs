//! [`Lexeme`]: a regular language as a boolean combination of regexes (intersection,
//! complement, counted repetition), what one regex cannot say directly ("matches `pattern`
//! *and* has at most 20 characters", "any key *except* these"). Front ends build them; the
//! automaton compiles each into one [`Dfa`](super::Dfa) ([`Dfa::shared`](super::Dfa::shared)).
//!
//! Invariant: [`Lexeme::key`] names the language exactly (equal keys, equal languages); the
//! shared DFA cache and the mask cache rely on it.

use regex_syntax::hir::Hir;

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
        match self {
            Lexeme::Regex(h) => h.to_string(),
            Lexeme::And(xs) => format!("&({})", xs.iter().map(|x| x.key()).collect::<Vec<_>>().join(", ")),
            Lexeme::Not(x) => format!("!({})", x.key()),
            Lexeme::Counted { full, .. } => full.to_string(),
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
