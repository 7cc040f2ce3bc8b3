//! Drawing strings for the regular leaves of the IR: regexes (walked as a `regex_syntax` HIR)
//! and [`Lexeme`]s (intersections and complements), each checked against its own anchored DFA
//! before it is used.
//!
//! A regex is drawn top-down: a class gives one of its characters (a range first, then a
//! character in it, so `[a-z0-9_]` does not drown in its biggest range), an alternation one
//! branch, a repetition a count that favours the boundaries (`min`, `max`, `min + 1`). With
//! `shortest` set, every choice is the shortest one. A lexeme that one regex cannot say is
//! drawn by rejection: candidates from its positive parts until one satisfies the whole
//! combination; when that keeps failing, the engine itself ([`Compiled`] over the byte-level
//! vocabulary) samples a member, which always succeeds for a non-empty language.
//!
//! Look-around assertions are treated as empty while drawing; the DFA check afterwards throws
//! out a draw that breaks one.

use std::collections::HashMap;
use std::sync::Arc;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::{Class, Hir, HirKind};

use super::plan::hir_min;
use super::Source;
use crate::automaton::{Compiled, Constraint, VocabEnv};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};
use crate::grammar::{Expr, Grammar};
use crate::regular::{DfaLimits, Lexeme};
use crate::vocab::{TokenSet, Vocab};

/// Draws tried per lexeme before falling back to the engine.
const REJECTION_TRIES: usize = 24;
/// Extra copies an unbounded repetition inside a regex gets at most.
const UNBOUNDED_EXTRA: u32 = 3;

/// Anchored full-match DFAs for regex leaves, built on first use and cached by address.
#[derive(Default)]
pub struct Leaves {
    dfas: HashMap<usize, dense::DFA<Vec<u32>>>,
    engines: HashMap<String, Arc<Compiled>>,
    bytes: Option<Arc<VocabEnv>>,
}

impl Leaves {
    fn dfa(&mut self, h: &Hir) -> Result<&dense::DFA<Vec<u32>>> {
        let key = h as *const Hir as usize;
        if let std::collections::hash_map::Entry::Vacant(slot) = self.dfas.entry(key) {
            // Under the default automaton limits, as every automaton built for a request.
            let limits = DfaLimits::default();
            let nfa = thompson::Compiler::new()
                .configure(thompson::Config::new().nfa_size_limit(Some(limits.nfa_bytes)))
                .build_from_hir(h)
                .map_err(|e| Error::Regex {
                    at: crate::error::Location::Column(1),
                    msg: format!("fuzz: cannot compile regex leaf {h}: {e}"),
                })?;
            let dfa = dense::Builder::new()
                .configure(
                    dense::Config::new()
                        .match_kind(MatchKind::All)
                        .start_kind(StartKind::Anchored)
                        .dfa_size_limit(Some(limits.dfa_bytes))
                        .determinize_size_limit(Some(limits.dfa_bytes)),
                )
                .build_from_nfa(&nfa)
                .map_err(|e| Error::Regex {
                    at: crate::error::Location::Column(1),
                    msg: format!("fuzz: cannot build a DFA for regex leaf {h}: {e}"),
                })?;
            slot.insert(dfa);
        }
        Ok(&self.dfas[&key])
    }

    /// Is `s`, in full, in the regex's language?
    pub fn full_match(&mut self, h: &Hir, s: &[u8]) -> Result<bool> {
        let dfa = self.dfa(h)?;
        let mut st = dfa.start_state(&start::Config::new().anchored(Anchored::Yes)).map_err(|e| Error::Regex {
            at: crate::error::Location::Column(1),
            msg: format!("fuzz: regex leaf {h}: {e}"),
        })?;
        for &b in s {
            st = dfa.next_state(st, b);
            if dfa.is_dead_state(st) || dfa.is_quit_state(st) {
                return Ok(false);
            }
        }
        Ok(dfa.is_match_state(dfa.next_eoi_state(st)))
    }

    /// Is `s`, in full, in the lexeme's language?
    pub fn lexeme_match(&mut self, l: &Lexeme, s: &[u8]) -> Result<bool> {
        Ok(match l {
            Lexeme::Regex(h) => self.full_match(h, s)?,
            Lexeme::Counted { full, .. } => self.full_match(full, s)?,
            Lexeme::And(xs) => {
                for x in xs {
                    if !self.lexeme_match(x, s)? {
                        return Ok(false);
                    }
                }
                true
            }
            Lexeme::Not(x) => !self.lexeme_match(x, s)?,
        })
    }

    /// A member of the regex's language, at most about `room` bytes unless the regex needs more.
    pub fn regex(&mut self, h: &Hir, src: &mut dyn Source, shortest: bool, room: u32) -> Result<Vec<u8>> {
        for attempt in 0..REJECTION_TRIES {
            let mut out = Vec::new();
            let mut room = room as i64;
            draw(h, src, shortest || attempt + 1 == REJECTION_TRIES, &mut room, &mut out);
            if self.full_match(h, &out)? {
                return Ok(out);
            }
        }
        self.engine_sample(&Expr::Regex(std::sync::Arc::new(h.clone())), h.to_string(), src, room)
    }

    /// A member of the lexeme's language.
    pub fn lexeme(&mut self, l: &Lexeme, src: &mut dyn Source, shortest: bool, room: u32) -> Result<Vec<u8>> {
        // Candidates come from the positive regexes (reached through intersections only).
        let mut positive = Vec::new();
        positives(l, &mut positive);
        for attempt in 0..REJECTION_TRIES {
            let Some(&part) = positive.get(attempt % positive.len().max(1)) else { break };
            let mut out = Vec::new();
            let mut budget = room as i64;
            match part {
                Lexeme::Counted { open, unit, min, max, close, .. } => {
                    let k = count(*min, *max, src, shortest, hir_min(unit), &mut budget);
                    out.extend_from_slice(open);
                    for _ in 0..k {
                        draw(unit, src, shortest, &mut budget, &mut out);
                    }
                    out.extend_from_slice(close);
                }
                Lexeme::Regex(h) => draw(h, src, shortest, &mut budget, &mut out),
                _ => unreachable!("positives are regexes or counted strings"),
            }
            if self.lexeme_match(l, &out)? {
                return Ok(out);
            }
        }
        self.engine_sample(&Expr::Lexeme(std::sync::Arc::new(l.clone())), l.key(), src, room)
    }

    /// Samples a member of `e` with the engine over the byte-level vocabulary (random logits,
    /// seeded from the source). The never-truncated rule makes every output complete.
    fn engine_sample(&mut self, e: &Expr, key: String, src: &mut dyn Source, room: u32) -> Result<Vec<u8>> {
        let env = self.bytes.get_or_insert_with(|| VocabEnv::new(Arc::new(Vocab::byte_level()))).clone();
        let vocab = env.vocab();
        if !self.engines.contains_key(&key) {
            let c = Compiled::new(&env, &Constraint::Grammar(Grammar::single(e.clone())))?;
            if c.is_empty_language() {
                return Err(Error::Grammar {
                    at: crate::error::Location::Column(1),
                    msg: format!("fuzz: the terminal {key} matches nothing"),
                });
            }
            self.engines.insert(key.clone(), c);
        }
        let c = &self.engines[&key];
        let mut rng = ChaCha8Rng::seed_from_u64(src.below(1 << 30) as u64);
        let budget = room.max(c.min_tokens().unwrap_or(0)).max(1) as usize;
        random_walk(c, vocab, &mut rng, budget)
    }
}

/// A member of `c`'s language: tokens drawn uniformly among those the mask allows (the stop
/// token among them once the output is complete), within `budget` tokens, so the walk always
/// ends complete (the never-truncated rule). The matcher alone, no model.
fn random_walk(c: &Arc<Compiled>, vocab: &Vocab, rng: &mut ChaCha8Rng, budget: usize) -> Result<Vec<u8>> {
    let mut m = c.matcher();
    let mut mask = TokenSet::new(vocab.len());
    let mut out = Vec::new();
    for step in 0..budget {
        m.fill_mask_within(&mut mask, budget - step);
        let allowed: Vec<_> = mask.iter().collect();
        if allowed.is_empty() {
            break;
        }
        let t = allowed[rng.random_range(0..allowed.len())];
        if vocab.is_eos(t) {
            break;
        }
        m.commit(t)?;
        out.extend_from_slice(vocab.bytes(t));
    }
    if !m.is_accepting() {
        return Err(Error::state(format!("fuzz: no complete member of {} bytes or fewer", budget)));
    }
    Ok(out)
}

fn positives<'l>(l: &'l Lexeme, out: &mut Vec<&'l Lexeme>) {
    match l {
        Lexeme::Regex(_) | Lexeme::Counted { .. } => out.push(l),
        Lexeme::And(xs) => xs.iter().for_each(|x| positives(x, out)),
        Lexeme::Not(_) => {}
    }
}

/// A repetition count in `min..=max`, favouring the boundaries; the shortest is `min`.
/// Extra copies stop when `budget` (bytes left) cannot pay for them.
fn count(min: u32, max: Option<u32>, src: &mut dyn Source, shortest: bool, unit_min: u32, budget: &mut i64) -> u32 {
    if shortest || src.exhausted() {
        return min;
    }
    let hi = max.unwrap_or(min.saturating_add(UNBOUNDED_EXTRA));
    if hi <= min {
        return min;
    }
    let affordable =
        if unit_min == 0 { hi - min } else { ((*budget).max(0) / unit_min as i64).min((hi - min) as i64) as u32 };
    let hi = min + affordable;
    // 0: min, 1: min + 1, 2: max, 3: anything between.
    let k = match src.weighted(&[4, 2, 1, 1]) {
        0 => min,
        1 => (min + 1).min(hi),
        2 => hi,
        _ => min + src.below((hi - min) as usize + 1) as u32,
    };
    *budget -= (k - min) as i64 * unit_min as i64;
    k
}

/// Characters on which regex dialects disagree about `\s` (Python's `re` counts U+001C..U+001F
/// and U+0085 as whitespace, ECMA-262 does not; ECMA-262 counts U+FEFF, Python does not):
/// drawn only when a class has nothing else, so a corpus is valid under any checker.
pub fn contested(c: u32) -> bool {
    matches!(c, 0x1C..=0x1F | 0x85 | 0xFEFF)
}

/// One character of a Unicode class: printable ASCII half the time when the class has some
/// (readable corpora), else a range and then a character in it. Shortest: the first one.
fn unicode_char(ranges: &[regex_syntax::hir::ClassUnicodeRange], src: &mut dyn Source, shortest: bool) -> char {
    if shortest || src.exhausted() {
        return ranges
            .iter()
            .flat_map(|r| [r.start(), r.end()])
            .find(|c| !contested(*c as u32))
            .unwrap_or(ranges[0].start());
    }
    let ascii: Vec<(u32, u32)> = ranges
        .iter()
        .map(|r| ((r.start() as u32).max(0x20), (r.end() as u32).min(0x7E)))
        .filter(|(lo, hi)| lo <= hi)
        .collect();
    let mut last = ranges[0].start();
    for _ in 0..4 {
        let (lo, hi) = if !ascii.is_empty() && src.below(2) == 0 {
            ascii[src.below(ascii.len())]
        } else {
            let r = &ranges[src.below(ranges.len())];
            (r.start() as u32, r.end() as u32)
        };
        let cp = lo + src.below((hi - lo) as usize + 1) as u32;
        // Ranges never hold surrogates as a whole, but a drawn point inside one could be one.
        let Some(c) = char::from_u32(cp) else { continue };
        last = c;
        if !contested(cp) {
            return c;
        }
    }
    last
}

/// Appends one draw of `h` to `out`.
fn draw(h: &Hir, src: &mut dyn Source, shortest: bool, budget: &mut i64, out: &mut Vec<u8>) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => out.extend_from_slice(&l.0),
        HirKind::Class(Class::Unicode(c)) => {
            let ranges = c.ranges();
            if ranges.is_empty() {
                return;
            }
            let ch = unicode_char(ranges, src, shortest);
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            *budget -= ch.len_utf8() as i64;
        }
        HirKind::Class(Class::Bytes(c)) => {
            let ranges = c.ranges();
            if ranges.is_empty() {
                return;
            }
            let (r, pick_lo) = if shortest || src.exhausted() {
                (&ranges[0], true)
            } else {
                (&ranges[src.below(ranges.len())], false)
            };
            let b = if pick_lo { r.start() } else { r.start() + src.below((r.end() - r.start()) as usize + 1) as u8 };
            out.push(b);
            *budget -= 1;
        }
        HirKind::Repetition(rep) => {
            let k = count(rep.min, rep.max, src, shortest, hir_min(&rep.sub).min(1 << 20), budget);
            for _ in 0..k {
                draw(&rep.sub, src, shortest, budget, out);
            }
        }
        HirKind::Capture(c) => draw(&c.sub, src, shortest, budget, out),
        HirKind::Concat(xs) => xs.iter().for_each(|x| draw(x, src, shortest, budget, out)),
        HirKind::Alternation(xs) => {
            let viable: Vec<&Hir> = xs.iter().filter(|x| hir_min(x) != super::plan::INF).collect();
            if viable.is_empty() {
                return;
            }
            let pick = if shortest || src.exhausted() || *budget <= 0 {
                viable.iter().min_by_key(|x| hir_min(x)).copied().unwrap()
            } else {
                viable[src.below(viable.len())]
            };
            draw(pick, src, shortest, budget, out);
        }
    }
}
