//! Building a [`Dfa`] from a regex: a finite language (up to a few thousand strings) as its minimal
//! automaton, a sequence that starts with a prefix-free part (finite: a quoted name; or not: a
//! string's body and closing quote) spliced onto a shared rest, a long bounded repetition of a
//! countable unit counted, an alternation as the union of its branches, anything else through
//! `regex-automata` (Thompson NFA, one compiler per thread, then an anchored dense DFA copied into
//! our own table).

use std::sync::Arc;

use regex_automata::{
    dfa::{dense, Automaton, StartKind},
    nfa::thompson,
    util::{primitives::StateID, start},
    Anchored, MatchKind,
};
use regex_syntax::hir::Hir;

use super::counted::{Repeat, MAX_TABLED_COUNTED};
use super::explore::explore;
use super::finite::{finite_strings, prefix_free, string_count, FINITE_STRINGS};
use super::marked::MIN_MARKED_WEIGHT;
use super::restrict::{restrict_lexeme, usable_bytes};
use super::{number_bytes, Dfa, DfaLimits};
use crate::error::{Error, LimitKind, Location, Result};
use crate::regular::Lexeme;

/// The fewest repetitions [`Dfa::counted_regex`] counts: fewer copies determinize quickly.
const MIN_COUNTED_REGEX: u32 = 32;

/// Most branches an alternation is built from as a union ([`Dfa::union`]): a state of the
/// union holds one state per branch (a 100,000-way choice of strings would hold 100,000), and
/// the alternations it is for (an optional member) have a few.
const MAX_UNION_BRANCHES: usize = 16;

impl Dfa {
    pub fn from_hir(hir: &Hir, limits: DfaLimits) -> Result<Dfa> {
        // A finite language (a property name, a set of enum values) needs no NFA.
        if let Some(strings) = finite_strings(hir) {
            return Dfa::from_strings(strings, limits);
        }
        Dfa::from_hir_nfa(hir, limits)
    }

    /// [`from_hir`](Dfa::from_hir) through `regex-automata` always (Thompson NFA, then
    /// determinization).
    pub(super) fn from_hir_nfa(hir: &Hir, limits: DfaLimits) -> Result<Dfa> {
        let too_big = |kind: LimitKind, what: &str, limit: usize| Error::Limit {
            kind,
            what: format!("{what} for this regular expression"),
            limit,
            hint: Some(
                "the regex expands to too many automaton states; simplify it or reduce repetition counts".into(),
            ),
        };
        // One NFA compiler per thread, reused: a fresh one allocates and clears its UTF-8
        // caches (some 10,000 entries) on the first Unicode class of every regex; a reused one
        // only bumps their version. Its output depends on the regex and the config alone.
        thread_local! {
            static NFA: std::cell::RefCell<thompson::Compiler> = std::cell::RefCell::new(thompson::Compiler::new());
        }
        let nfa = NFA.with_borrow_mut(|compiler| {
            compiler
                .configure(thompson::Config::new().nfa_size_limit(Some(limits.nfa_bytes)).shrink(false))
                .build_from_hir(hir)
                .map_err(|e| {
                    if e.to_string().contains("exceeds") {
                        too_big(LimitKind::NfaBytes, "NFA bytes", limits.nfa_bytes)
                    } else {
                        Error::Regex { at: crate::error::Location::Column(1), msg: e.to_string() }
                    }
                })
        })?;
        let dense = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .byte_classes(true)
                    .minimize(false)
                    // We copy the table out and never search with it: no acceleration analysis.
                    .accelerate(false)
                    .dfa_size_limit(Some(limits.dfa_bytes))
                    .determinize_size_limit(Some(limits.dfa_bytes)),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| {
                let s = e.to_string();
                if s.contains("exceeded") || s.contains("limit") {
                    too_big(LimitKind::DfaBytes, "DFA bytes", limits.dfa_bytes)
                } else if s.contains("word boundary") || s.contains("quit") {
                    Error::Regex {
                        at: crate::error::Location::Column(1),
                        msg: "Unicode word boundaries (\\b) are not supported; use (?-u:\\b) for ASCII".into(),
                    }
                } else {
                    Error::Regex { at: crate::error::Location::Column(1), msg: s }
                }
            })?;
        Self::from_dense(&dense, limits)
    }

    /// [`from_hir`](Dfa::from_hir), with shortcuts: a sequence that starts with a small
    /// prefix-free finite part (`"name"` before the whitespace and colon of every key) is that
    /// part's automaton spliced onto the rest's DFA, which is shared ([`Dfa::shared`]) by all
    /// such sequences: no determinization of the common rest per name; a long counted
    /// repetition is counted ([`counted_regex`](Dfa::counted_regex)); an alternation that is
    /// not a set of strings is the union of its branches' DFAs ([`Dfa::union`]).
    pub(super) fn from_regex_lexeme(h: &Hir, limits: DfaLimits) -> Result<Dfa> {
        use regex_syntax::hir::HirKind;
        // A look-around assertion (`^` inside, `\b`) speaks of the whole text: a part built on
        // its own would satisfy it at its own start. Such regexes go the regex path whole.
        let looks = !h.properties().look_set().is_empty();
        if !looks {
            if let Some(d) = Dfa::counted_regex(h, limits)? {
                return Ok(d);
            }
            if let Some(d) = Dfa::counted_by_marker(h, limits, MIN_MARKED_WEIGHT, MAX_TABLED_COUNTED) {
                return Ok(d);
            }
        }
        if let (HirKind::Concat(parts), false) = (h.kind(), looks) {
            // The longest finite prefix that leaves a non-finite rest.
            let (mut k, mut count) = (0, 1usize);
            while let Some(n) = parts.get(k).and_then(string_count) {
                count = count.saturating_mul(n);
                if count > FINITE_STRINGS {
                    break;
                }
                k += 1;
            }
            // The splice needs a prefix-free head (`"deb` beside `"deb-src` is not): the
            // longest prefix of those parts that is, found before the rest is built (its
            // determinization was paid, then the splice refused and the whole regex built).
            let head = (k > 0 && k < parts.len() && string_count(h).is_none())
                .then(|| {
                    (1..=k).rev().find_map(|j| {
                        finite_strings(&Hir::concat(parts[..j].to_vec())).filter(|s| prefix_free(s)).map(|s| (j, s))
                    })
                })
                .flatten();
            if let Some((k, head)) = head {
                let head = Dfa::from_strings(head, limits)?;
                let rest = Dfa::shared(&Lexeme::Regex(Hir::concat(parts[k..].to_vec())), limits)?;
                if let Some(d) = Dfa::splice(&head, &rest, limits)? {
                    return Ok(d);
                }
            }
            if k == 0 && string_count(h).is_none() {
                if let Some(d) = Dfa::splice_infinite_head(parts, limits)? {
                    return Ok(d);
                }
            }
        }
        if let (HirKind::Alternation(branches), false) = (h.kind(), looks) {
            // Not a set of strings: the union of the branches' DFAs, each built by these
            // shortcuts (an optional next member of an object, `(?:,"a":…)|`, is a splice).
            // Past a limit the regex path decides.
            if string_count(h).is_none() && branches.len() <= MAX_UNION_BRANCHES {
                let union = branches
                    .iter()
                    .map(|b| Dfa::from_regex_lexeme(b, limits))
                    .collect::<Result<Vec<Dfa>>>()
                    .and_then(|dfas| Dfa::union(&dfas.iter().collect::<Vec<&Dfa>>(), limits));
                if let Ok(d) = union {
                    return Ok(d);
                }
            }
        }
        Dfa::from_hir(h, limits)
    }

    /// A shortcut of [`from_regex_lexeme`](Dfa::from_regex_lexeme): a bounded repetition of a
    /// countable unit between literals (a pattern's `"[^\n]{0,1000}"`, `[a-z]{1,255}`) is
    /// counted ([`Dfa::counted`], states linear in the count, computed on the fly when large)
    /// instead of determinizing `max` copies of the unit (~50 ms for a thousand copies of a
    /// Unicode class). `None` for other shapes, counts below [`MIN_COUNTED_REGEX`], and units
    /// that cannot be counted.
    pub(super) fn counted_regex(h: &Hir, limits: DfaLimits) -> Result<Option<Dfa>> {
        use regex_syntax::hir::HirKind;
        fn literal(x: &Hir) -> Option<&[u8]> {
            match x.kind() {
                regex_syntax::hir::HirKind::Literal(l) => Some(&l.0),
                _ => None,
            }
        }
        let parts = match h.kind() {
            HirKind::Concat(parts) => &parts[..],
            _ => std::slice::from_ref(h),
        };
        // An optional literal on either side of one repetition.
        let (open, parts) = match parts.split_first() {
            Some((a, rest)) if !rest.is_empty() => literal(a).map_or((&[][..], parts), |open| (open, rest)),
            _ => (&[][..], parts),
        };
        let (close, parts) = match parts.split_last() {
            Some((b, rest)) if !rest.is_empty() => literal(b).map_or((&[][..], parts), |close| (close, rest)),
            _ => (&[][..], parts),
        };
        let [rep] = parts else { return Ok(None) };
        let HirKind::Repetition(rep) = rep.kind() else { return Ok(None) };
        let Some(max) = rep.max.filter(|&m| m >= MIN_COUNTED_REGEX) else { return Ok(None) };
        let unit = Dfa::shared(&Lexeme::Regex((*rep.sub).clone()), limits)?;
        if !Dfa::is_countable(&unit, rep.min, Some(max), close) {
            return Ok(None);
        }
        Dfa::counted(Repeat { open, unit: &unit, min: rep.min, max: Some(max), close }, limits)
    }

    /// A shortcut of [`from_regex_lexeme`](Dfa::from_regex_lexeme): a sequence whose
    /// first part is infinite and whose second is a literal (a string's body, then its closing
    /// quote and the next key, all in one lexeme) is, where the first part and the literal's
    /// first byte are prefix-free together, their DFA spliced onto the rest's, both shared:
    /// the body is determinized once, not once per key that follows it. One head is tried, as
    /// cheap to build as the first part (refused at once for `[\s\S]*c`); `None` if it is not
    /// prefix-free.
    pub(super) fn splice_infinite_head(parts: &[Hir], limits: DfaLimits) -> Result<Option<Dfa>> {
        use regex_syntax::hir::HirKind;
        let (Some(first), Some(HirKind::Literal(lit))) = (parts.first(), parts.get(1).map(Hir::kind)) else {
            return Ok(None);
        };
        // (Nothing after the literal's first byte: the head would be this sequence itself.)
        if !lit.0[0].is_ascii() || (lit.0.len() == 1 && parts.len() == 2) {
            return Ok(None);
        }
        let head = Hir::concat(vec![first.clone(), Hir::literal(&lit.0[..1])]);
        let Ok(head) = Dfa::shared(&Lexeme::Regex(head), limits) else { return Ok(None) };
        if !head.is_prefix_free() {
            return Ok(None);
        }
        let mut rest = Vec::with_capacity(parts.len() - 1);
        if lit.0.len() > 1 {
            rest.push(Hir::literal(&lit.0[1..]));
        }
        rest.extend_from_slice(&parts[2..]);
        let rest = Dfa::shared(&Lexeme::Regex(Hir::concat(rest)), limits)?;
        Dfa::splice(&head, &rest, limits)
    }

    pub(super) fn build_lexeme(lexeme: &Lexeme, limits: DfaLimits) -> Result<Dfa> {
        match lexeme {
            Lexeme::Regex(h) => Dfa::from_regex_lexeme(h, limits),
            Lexeme::Counted { open, unit, min, max, close, full } => {
                let unit = Dfa::shared(&Lexeme::Regex(unit.clone()), limits)?;
                match Dfa::counted(Repeat { open, unit: &unit, min: *min, max: *max, close }, limits)? {
                    Some(d) => Ok(d),
                    None => Dfa::from_hir(full, limits),
                }
            }
            Lexeme::Not(y) => Dfa::product(&[(Dfa::shared(y, limits)?, true)], limits),
            Lexeme::And(xs) => {
                // Each part over the bytes the intersection can use (see `restrict`): no UTF-8
                // states for a `.` that an ASCII-only part never lets through.
                let restricted = restrict_lexeme(lexeme, &usable_bytes(lexeme));
                let xs = match &restricted {
                    Some(Lexeme::And(r)) => r,
                    _ => xs,
                };
                // A length with other constraints (a pattern, a format): counted over their
                // product with the uncounted string, not tabled with them.
                let counted = xs.iter().position(|x| matches!(x, Lexeme::Counted { .. }));
                let Some(c @ Lexeme::Counted { open, unit, min, max, close, .. }) = counted.map(|i| &xs[i]) else {
                    return Dfa::product_of_clauses(&Dfa::and_parts(xs, limits)?, limits);
                };
                let rest: Vec<Lexeme> =
                    xs.iter().enumerate().filter(|&(i, _)| Some(i) != counted).map(|(_, x)| x.clone()).collect();
                let mut parts = Dfa::and_parts(&rest, limits)?;
                let unit = Dfa::shared(&Lexeme::Regex(unit.clone()), limits)?;
                let r = Repeat { open, unit: &unit, min: *min, max: *max, close };
                if let Ok(Some(d)) = Dfa::counted_product(&parts, r, limits, MAX_TABLED_COUNTED) {
                    return Ok(d);
                }
                // The table after all: the same parts, and the count as one more.
                parts.push((Dfa::shared(c, limits)?, None));
                Dfa::product_of_clauses(&parts, limits)
            }
        }
    }

    /// The parts of an intersection, as [`product_of_clauses`](Dfa::product_of_clauses) takes
    /// them.
    fn and_parts(xs: &[Lexeme], limits: DfaLimits) -> Result<Vec<(Arc<Dfa>, Option<u32>)>> {
        let mut parts: Vec<(Arc<Dfa>, Option<u32>)> = Vec::with_capacity(xs.len());
        for (i, x) in xs.iter().enumerate() {
            match x {
                // `¬(b ∧ c …)`: its parts join this product as one clause, so that only the
                // tuples the other parts let through are built (a string's "not containing `{{`
                // and at most 255 characters" was 17,622 states built in full where the product
                // with a 255-character name kept 259).
                Lexeme::Not(y) => match &**y {
                    Lexeme::And(ys) if ys.iter().all(|y| !matches!(y, Lexeme::Not(_))) => {
                        for y in ys {
                            parts.push((Dfa::shared(y, limits)?, Some(i as u32)));
                        }
                    }
                    _ => parts.push((Dfa::shared(y, limits)?, Some(i as u32))),
                },
                _ => parts.push((Dfa::shared(x, limits)?, None)),
            }
        }
        Ok(parts)
    }

    fn from_dense(dfa: &dense::DFA<Vec<u32>>, limits: DfaLimits) -> Result<Dfa> {
        // Our byte classes: the distinct class of each byte, with one representative byte each.
        let bc = dfa.byte_classes();
        let (classes, reps) = number_bytes(256, |b| bc.get(b) as usize);

        let start_id = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| Error::Regex { at: Location::Column(1), msg: format!("regex start state: {e}") })?;

        let live = |s: StateID| -> Result<Option<StateID>> {
            if dfa.is_quit_state(s) {
                return Err(Error::Regex {
                    at: Location::Column(1),
                    msg: "regex needs look-around that a DFA cannot do".into(),
                });
            }
            Ok((!dfa.is_dead_state(s)).then_some(s))
        };
        explore(
            classes,
            &reps,
            live(start_id)?,
            limits.states,
            |&s, b| live(dfa.next_state(s, b)),
            |&s| dfa.is_match_state(dfa.next_eoi_state(s)),
            || Error::limit(LimitKind::DfaStates, "DFA states for this regular expression", limits.states),
            None,
        )
        .map(Dfa::with_alike_classes_merged)
    }
}
