//! `Dfa`: a compact byte DFA for one regular language, with the facts the matcher needs per
//! state (accepting? how far to acceptance?).
//!
//! Built from a `regex-automata` dense DFA (anchored, `MatchKind::All` so no alternative is
//! pruned, byte classes), then copied into our own table:
//! - states are renumbered densely in breadth-first order from the start state;
//! - every state from which no accepting state is reachable is merged into the dead state, so
//!   "not dead" means "this prefix can still be completed" — exactly what a mask needs;
//! - `accept[s]` says the bytes read so far are a complete match (regex-automata reports
//!   matches one byte late, so we ask its end-of-input transition).
//!
//! Other constructions build the same kind of table directly (finite sets of strings as tries,
//! splices, products for intersections and complements, counters for length bounds), numbering
//! tuples by a dense slot where the tuple space is small. One kind is not a table: a counted
//! repetition with more than `MAX_TABLED_COUNTED` (4,096) states (`"` unit{0,5000} `"` has
//! 70,000; a JSON string of at most ~290 characters is tabled) is computed on the fly by a
//! `Counter` (`next` by arithmetic over the unit's table; `accept`, `open` and `dist` written
//! down), which behaves exactly as its table would, and whose rows far from both bounds read
//! every short string alike ([`Dfa::canonical`]: the mask cache shares their entries). A
//! product tables a counter before it reads it.
//!
//! Invariants: the dead state is always 0 and maps every class to 0; `start != 0` unless the
//! language is empty; `dist[s]` is the fewest bytes from `s` to an accepting state
//! (`u32::MAX` only for the dead state, and for a counter's states that no transition reaches);
//! `next` never leads to a state with `dist == u32::MAX` other than the dead state.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use regex_automata::{
    dfa::{dense, Automaton, StartKind},
    nfa::thompson,
    util::{primitives::StateID, start},
    Anchored, MatchKind,
};
use regex_syntax::hir::Hir;

use crate::error::{Error, Result};
use crate::grammar::Lexeme;

/// Default limits for building one DFA. Exponential regexes hit these and return an error.
#[derive(Debug, Clone, Copy)]
pub struct DfaLimits {
    /// Bytes of heap for the Thompson NFA.
    pub nfa_bytes: usize,
    /// Bytes of heap for the dense DFA and for determinization.
    pub dfa_bytes: usize,
    /// States in the final table.
    pub states: usize,
}

impl Default for DfaLimits {
    fn default() -> Self {
        DfaLimits { nfa_bytes: 8 << 20, dfa_bytes: 8 << 20, states: 200_000 }
    }
}

#[derive(Clone)]
pub struct Dfa {
    classes: [u8; 256],
    stride: usize,
    trans: Vec<u32>,
    accept: Vec<bool>,
    /// `open[s]`: some byte leads from `s` to a live state.
    open: Vec<bool>,
    dist: Vec<u32>,
    start: u32,
    /// The last [`dist_using`](Dfa::dist_using) answer, with its `usable` bytes: a shared DFA
    /// is compiled again and again for the same vocabulary.
    dist_memo: OnceLock<([bool; 256], Arc<[u32]>)>,
    /// Unique per built table (a clone keeps it: tables never change once built), so caches
    /// outside one compile can name a DFA (see [`id`](Dfa::id)).
    id: u64,
    /// A large counted repetition, computed on the fly: `trans` is empty and [`next`](Dfa::next)
    /// asks the counter ([`Dfa::counted`]).
    counter: Option<Arc<Counter>>,
}

/// The next [`Dfa::id`].
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

pub const DEAD: u32 = 0;

/// Most bytes of tables the process-wide cache of [`Dfa::shared`] holds.
pub const SHARED_DFA_BYTES: usize = 64 << 20;

type SharedKey = (String, usize, usize, usize);

#[derive(Default)]
struct Shared {
    map: HashMap<SharedKey, Arc<Dfa>>,
    bytes: usize,
}

static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();

impl Dfa {
    pub fn from_hir(hir: &Hir, limits: DfaLimits) -> Result<Dfa> {
        // A small finite language (a property name, a set of enum values) needs no NFA.
        if let Some(strings) = finite_strings(hir) {
            return Dfa::from_strings(strings, limits);
        }
        Dfa::from_hir_nfa(hir, limits)
    }

    /// [`from_hir`](Dfa::from_hir) through `regex-automata` always (Thompson NFA, then
    /// determinization).
    fn from_hir_nfa(hir: &Hir, limits: DfaLimits) -> Result<Dfa> {
        let too_big = |what: &str, limit: usize| Error::Limit {
            what: format!("{what} for this regular expression"),
            limit,
            hint: Some(
                "the regex expands to too many automaton states; simplify it or reduce repetition counts".into(),
            ),
        };
        let nfa = thompson::Compiler::new()
            .configure(thompson::Config::new().nfa_size_limit(Some(limits.nfa_bytes)).shrink(false))
            .build_from_hir(hir)
            .map_err(|e| {
                if e.to_string().contains("exceeds") {
                    too_big("NFA bytes", limits.nfa_bytes)
                } else {
                    Error::Regex { at: crate::error::Location::Column(1), msg: e.to_string() }
                }
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
                    too_big("DFA bytes", limits.dfa_bytes)
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

    /// The DFA of a finite set of strings: a trie. A state is the range of the sorted,
    /// de-duplicated strings that share the prefix read so far, with that prefix's length.
    pub fn from_strings(mut strings: Vec<Vec<u8>>, limits: DfaLimits) -> Result<Dfa> {
        strings.sort_unstable();
        strings.dedup();
        let mut used = [false; 256];
        strings.iter().flatten().for_each(|&b| used[b as usize] = true);
        // Each used byte its own class; every other byte one class (always dead).
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let unused = (0..=255u8).find(|&b| !used[b as usize]);
        for b in 0..=255u8 {
            if used[b as usize] || Some(b) == unused {
                reps.push(b);
                classes[b as usize] = (reps.len() - 1) as u8;
            }
        }
        if let Some(u) = unused {
            let c = classes[u as usize];
            (0..=255u8).filter(|&b| !used[b as usize]).for_each(|b| classes[b as usize] = c);
        }
        let n = strings.len() as u32;
        explore(
            classes,
            &reps,
            (n > 0).then_some((0u32, n, 0u32)),
            limits.states,
            |&(lo, hi, depth), b| {
                let range = &strings[lo as usize..hi as usize];
                let d = depth as usize;
                // The strings longer than the prefix whose next byte is `b`: contiguous, sorted.
                let first = range.partition_point(|s| s.len() <= d || s[d] < b);
                let last = range.partition_point(|s| s.len() <= d || s[d] <= b);
                Ok((first < last).then_some((lo + first as u32, lo + last as u32, depth + 1)))
            },
            |&(lo, _, depth)| strings[lo as usize].len() == depth as usize,
            || Error::limit("DFA states for a set of strings", limits.states),
            None,
        )
    }

    /// `a` then `b`, for an `a` whose accepting states read nothing more (a prefix-free
    /// language such as a quoted name): on reaching acceptance in `a`, go on as `b` from its
    /// start. `None` if `a` does not have that shape.
    pub fn splice(a: &Dfa, b: &Dfa, limits: DfaLimits) -> Result<Option<Dfa>> {
        if a.start == DEAD || a.accept[a.start as usize] || (1..a.accept.len()).any(|s| a.accept[s] && a.open[s]) {
            return Ok(None);
        }
        #[derive(Clone, PartialEq, Eq, Hash)]
        enum Pos {
            A(u32),
            B(u32),
        }
        let (classes, reps) = common_classes([a, b].into_iter(), &[false; 256]);
        explore(
            classes,
            &reps,
            Some(Pos::A(a.start)),
            limits.states,
            |p, byte| {
                Ok(match *p {
                    Pos::A(s) => match a.next(s, byte) {
                        DEAD => None,
                        t if a.accept[t as usize] => (b.start != DEAD).then_some(Pos::B(b.start)),
                        t => Some(Pos::A(t)),
                    },
                    Pos::B(s) => match b.next(s, byte) {
                        DEAD => None,
                        t => Some(Pos::B(t)),
                    },
                })
            },
            |p| matches!(*p, Pos::B(s) if b.accept[s as usize]),
            || Error::limit("DFA states for a sequence of regexes", limits.states),
            Some((a.accept.len() + b.accept.len(), &|p: &Pos| match *p {
                Pos::A(s) => s as usize,
                Pos::B(s) => a.accept.len() + s as usize,
            })),
        )
        .map(Some)
    }

    /// The DFA of a boolean combination of regexes: each regex built as above, then
    /// intersections and complements as products of our own tables ([`Dfa::product`]).
    /// Goes through the process-wide [`shared`](Dfa::shared) cache (a copy of the cached table).
    pub fn from_lexeme(lexeme: &Lexeme, limits: DfaLimits) -> Result<Dfa> {
        Ok((*Dfa::shared(lexeme, limits)?).clone())
    }

    /// A name for this table, unique in the process (clones share it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// [`from_lexeme`](Dfa::from_lexeme), shared: built DFAs are kept process-wide, keyed by
    /// the lexeme's text ([`Lexeme::key`], which names its language) and the limits, so a
    /// lexeme that many schemas share (a JSON string, a number, `"name":` with its whitespace)
    /// is determinized once per process, not once per compile. Determinization was most of
    /// compile time. Failures are not kept (a limit error is computed again).
    ///
    /// Bounded: past [`SHARED_DFA_BYTES`] of tables the cache is emptied and starts again
    /// (entries still in use stay alive in their `Arc`s); a table above 1/64 of that is not kept.
    pub fn shared(lexeme: &Lexeme, limits: DfaLimits) -> Result<Arc<Dfa>> {
        Dfa::shared_keyed(lexeme, lexeme.key(), limits)
    }

    /// Empties the process-wide cache of [`shared`](Dfa::shared): DFAs built from now on are
    /// new (new ids, so nothing cached per DFA id applies to them). For measurements.
    pub(crate) fn clear_shared() {
        if let Some(cache) = SHARED.get() {
            *cache.lock().unwrap_or_else(|e| e.into_inner()) = Shared::default();
        }
    }

    /// [`shared`](Dfa::shared) when the caller already has `lexeme.key()`.
    pub fn shared_keyed(lexeme: &Lexeme, key: String, limits: DfaLimits) -> Result<Arc<Dfa>> {
        debug_assert_eq!(key, lexeme.key());
        let key = (key, limits.nfa_bytes, limits.dfa_bytes, limits.states);
        let cache = SHARED.get_or_init(Default::default);
        if let Some(d) = cache.lock().unwrap_or_else(|e| e.into_inner()).map.get(&key) {
            return Ok(d.clone());
        }
        // Built outside the lock: another thread may build the same DFA meanwhile (same value).
        let dfa = Arc::new(Dfa::build_lexeme(lexeme, limits)?);
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = dfa.heap_bytes() + key.0.len() + 64;
        if c.bytes + bytes > SHARED_DFA_BYTES {
            c.map.clear();
            c.bytes = 0;
        }
        // Very large tables are rare and particular to one schema: kept, they would flush the
        // common lexemes out.
        if bytes <= SHARED_DFA_BYTES / 64 {
            c.bytes += bytes;
            c.map.insert(key, dfa.clone());
        }
        Ok(dfa)
    }

    /// [`from_hir`](Dfa::from_hir), with one shortcut: a sequence that starts with a small
    /// prefix-free finite part (`"name"` before the whitespace and colon of every key) is that
    /// part's trie spliced onto the rest's DFA, which is shared ([`Dfa::shared`]) by all such
    /// sequences: no determinization of the common rest per name.
    fn from_regex_lexeme(h: &Hir, limits: DfaLimits) -> Result<Dfa> {
        use regex_syntax::hir::HirKind;
        // A look-around assertion (`^` inside, `\b`) speaks of the whole text: a part built on
        // its own would satisfy it at its own start. Such regexes go the regex path whole.
        let looks = !h.properties().look_set().is_empty();
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
            let head = (k > 0 && k < parts.len() && string_count(h).is_none())
                .then(|| finite_strings(&Hir::concat(parts[..k].to_vec())))
                .flatten();
            if let Some(head) = head {
                let head = Dfa::from_strings(head, limits)?;
                let rest = Dfa::shared(&Lexeme::Regex(Hir::concat(parts[k..].to_vec())), limits)?;
                if let Some(d) = Dfa::splice(&head, &rest, limits)? {
                    return Ok(d);
                }
            }
        }
        Dfa::from_hir(h, limits)
    }

    fn build_lexeme(lexeme: &Lexeme, limits: DfaLimits) -> Result<Dfa> {
        let part = |x: &Lexeme| -> Result<(Arc<Dfa>, bool)> {
            match x {
                Lexeme::Not(y) => Ok((Dfa::shared(y, limits)?, true)),
                _ => Ok((Dfa::shared(x, limits)?, false)),
            }
        };
        match lexeme {
            Lexeme::Regex(h) => Dfa::from_regex_lexeme(h, limits),
            Lexeme::Counted { open, unit, min, max, close, full } => {
                let unit = Dfa::shared(&Lexeme::Regex(unit.clone()), limits)?;
                match Dfa::counted(open, &unit, *min, *max, close, limits)? {
                    Some(d) => Ok(d),
                    None => Dfa::from_hir(full, limits),
                }
            }
            Lexeme::Not(_) => Dfa::product(&[part(lexeme)?], limits),
            Lexeme::And(xs) => Dfa::product(&xs.iter().map(part).collect::<Result<Vec<_>>>()?, limits),
        }
    }

    /// Heap bytes of the tables (for cache bounds).
    pub fn heap_bytes(&self) -> usize {
        self.trans.len() * 4 + self.accept.len() * 2 + self.dist.len() * 4
    }

    /// The product of `parts`: it accepts a string when every part accepts it, or, for a part
    /// flagged `true` (negated), does *not* accept it. States are the reachable tuples of part
    /// states, numbered breadth-first; byte classes are the common refinement of the parts'.
    ///
    /// A negated part in its dead state accepts every continuation, which is exactly the
    /// complement of "no continuation matches": the parts' dead-end pruning is what makes
    /// complementing by flipping acceptance correct. A tuple with a positive part dead is dead.
    pub fn product<D: std::ops::Deref<Target = Dfa>>(parts: &[(D, bool)], limits: DfaLimits) -> Result<Dfa> {
        // Where the tuple space is small enough, tuples are numbered by their slot (mixed
        // radix over the parts' state counts) instead of a hash.
        Dfa::product_numbered(parts, limits, 1 << 22)
    }

    /// [`product`](Dfa::product), numbering tuples by slot when there are at most
    /// `max_dense` of them (the same table either way: the numbering is breadth-first).
    fn product_numbered<D: std::ops::Deref<Target = Dfa>>(
        parts: &[(D, bool)],
        limits: DfaLimits,
        max_dense: usize,
    ) -> Result<Dfa> {
        let k = parts.len();
        // A counter computed on the fly is tabled first: the product reads each of its rows
        // once per tuple it appears in, and a table lookup is several times cheaper.
        let tabled: Vec<Option<Dfa>> = parts.iter().map(|(d, _)| d.counter.as_ref().map(|c| d.tabled(c))).collect();
        let parts: Vec<(&Dfa, bool)> =
            parts.iter().zip(&tabled).map(|((d, neg), t)| (t.as_ref().unwrap_or(&**d), *neg)).collect();
        let parts = &parts[..];
        // Bytes that a positive part refuses in every state make every tuple dead: one class.
        let mut dead_bytes = [false; 256];
        for (d, _) in parts.iter().filter(|(_, neg)| !neg) {
            let dead = d.dead_classes();
            for (b, slot) in dead_bytes.iter_mut().enumerate() {
                *slot |= dead[d.classes[b] as usize];
            }
        }
        let (classes, reps) = common_classes(parts.iter().map(|(d, _)| *d), &dead_bytes);
        let too_many = || Error::Limit {
            what: "DFA states for an intersection or complement of regexes".into(),
            limit: limits.states,
            hint: Some(
                "the combined constraints (pattern, length, format, excluded values) expand to too many states".into(),
            ),
        };
        // A tuple with a positive part dead is dead.
        let live = |t: &[u32]| !parts.iter().zip(t).any(|((_, neg), &s)| !neg && s == DEAD);
        // The same breadth-first numbering as `explore`, with the tuples kept flat (state `i`
        // is `tuples[(i - 1) * k..i * k]`) and looked up by slice, so that a transition to a
        // known tuple allocates nothing (products are most of compile time).
        let mut ids: HashMap<Box<[u32]>, u32, std::hash::BuildHasherDefault<super::earley::FxHasher>> =
            HashMap::default();
        let dense: Option<SlotIds> = parts
            .iter()
            .try_fold(1usize, |acc, (d, _)| acc.checked_mul(d.accept.len()))
            .filter(|&n| n <= max_dense)
            .map(SlotIds::new);
        // The largest part is the slot's most significant digit: the tuples that share its
        // state are one run of slots, and where it moves a little per byte (a length counter:
        // the next count) so do the slots a state's transitions look up, which then stay in
        // cache (a quarter of the time of a pattern ∧ length product went to slot lookups).
        let mut radix: Vec<usize> = (0..k).collect();
        radix.sort_by_key(|&j| std::cmp::Reverse(parts[j].0.accept.len()));
        let slot = |t: &[u32]| radix.iter().fold(0usize, |acc, &j| acc * parts[j].0.accept.len() + t[j] as usize);
        let mut slot_ids = dense;
        let mut tuples: Vec<u32> = parts.iter().map(|(d, _)| d.start).collect();
        let start = if live(&tuples) {
            if limits.states <= 1 {
                return Err(too_many());
            }
            match slot_ids.as_mut() {
                Some(v) => v.set(slot(&tuples), 1),
                None => {
                    ids.insert(tuples.clone().into_boxed_slice(), 1);
                }
            }
            1
        } else {
            tuples.clear();
            DEAD
        };
        let stride = reps.len();
        let mut trans = vec![DEAD; stride];
        let mut accept = vec![false];
        let mut buf = vec![0u32; k];
        let mut n = usize::from(start != DEAD);
        let mut i = 0;
        while i < n {
            for &rep in &reps {
                for j in 0..k {
                    buf[j] = parts[j].0.next(tuples[i * k + j], rep);
                }
                let known = || match slot_ids.as_ref() {
                    Some(v) => Some(v.get(slot(&buf))).filter(|&id| id != 0),
                    None => ids.get(&buf[..]).copied(),
                };
                let t = if !live(&buf) {
                    DEAD
                } else if let Some(id) = known() {
                    id
                } else {
                    n += 1;
                    if n >= limits.states {
                        return Err(too_many());
                    }
                    match slot_ids.as_mut() {
                        Some(v) => v.set(slot(&buf), n as u32),
                        None => {
                            ids.insert(buf.clone().into_boxed_slice(), n as u32);
                        }
                    }
                    tuples.extend_from_slice(&buf);
                    n as u32
                };
                trans.push(t);
            }
            let t = &tuples[i * k..(i + 1) * k];
            accept.push(parts.iter().zip(t).all(|((d, neg), &s)| d.accept[s as usize] != *neg));
            i += 1;
        }
        let mut dfa = Dfa {
            classes,
            stride,
            trans,
            accept,
            open: Vec::new(),
            dist: Vec::new(),
            start,
            dist_memo: OnceLock::new(),
            id: next_id(),
            counter: None,
        };
        dfa.prune_dead_ends();
        Ok(dfa)
    }

    /// This counter's automaton as a table (the same states, transitions and facts).
    fn tabled(&self, c: &Counter) -> Dfa {
        let n = self.accept.len();
        let mut trans = Vec::with_capacity(n * self.stride);
        for s in 0..n as u32 {
            trans.extend(c.reps.iter().map(|&b| c.next(s, b)));
        }
        Dfa {
            classes: self.classes,
            stride: self.stride,
            trans,
            accept: self.accept.clone(),
            open: self.open.clone(),
            dist: self.dist.clone(),
            start: self.start,
            dist_memo: OnceLock::new(),
            id: next_id(),
            counter: None,
        }
    }

    /// `open · unit{min,max} · close` with a counter: states are (phase, count, unit state),
    /// about `max × |unit|` of them, built directly instead of determinizing `max` copies.
    /// `None` (use the regex) unless the unit is prefix-free (an accepting state has no way
    /// on, so a unit ends exactly where it is complete), non-empty, and `close` cannot start
    /// a unit (so the end of the repetition is never in doubt).
    pub fn counted(
        open: &[u8],
        unit: &Dfa,
        min: u32,
        max: Option<u32>,
        close: &[u8],
        limits: DfaLimits,
    ) -> Result<Option<Dfa>> {
        Dfa::counted_with(open, unit, min, max, close, limits, MAX_TABLED_COUNTED)
    }

    /// [`counted`](Dfa::counted), tabled when it has at most `max_tabled` states and computed
    /// on the fly ([`Counter`]) above that: a string of at most 5,000 characters is 70,000
    /// states (about 14 per count: the states inside one escaped or multi-byte character),
    /// whose table took most of a compile to build and search.
    fn counted_with(
        open: &[u8],
        unit: &Dfa,
        min: u32,
        max: Option<u32>,
        close: &[u8],
        limits: DfaLimits,
        max_tabled: usize,
    ) -> Result<Option<Dfa>> {
        let n_unit = unit.accept.len();
        let prefix_free = (1..n_unit).all(|s| !unit.accept[s] || !unit.open[s]);
        let u0 = unit.start;
        if u0 == DEAD
            || unit.accept[u0 as usize]
            || !prefix_free
            || close.first().is_some_and(|&b| unit.next(u0, b) != DEAD)
        {
            return Ok(None);
        }
        if max.is_some_and(|m| m < min) {
            return Ok(None);
        }
        // Byte classes: the unit's, with every byte of `open`/`close` set apart.
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let mut class_of: HashMap<(u8, i16), u8> = HashMap::new();
        for b in 0..=255u8 {
            let special = if open.contains(&b) || close.contains(&b) { b as i16 } else { -1 };
            classes[b as usize] = *class_of.entry((unit.classes[b as usize], special)).or_insert_with(|| {
                reps.push(b);
                (reps.len() - 1) as u8
            });
        }
        // Positions: Open(i) for i < |open|; Unit(k, s); Close(i) for 1 ≤ i ≤ |close|.
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        enum Pos {
            Open(u32),
            Unit(u32, u32),
            Close(u32),
        }
        let cap = max.unwrap_or(min); // unbounded: the count saturates at `min`
        let step = |p: Pos, b: u8| -> Option<Pos> {
            let in_unit = |k: u32, s: u32| -> Option<Pos> {
                let t = unit.next(s, b);
                if t == DEAD {
                    return None;
                }
                if unit.accept[t as usize] {
                    Some(Pos::Unit((k + 1).min(cap), u0))
                } else {
                    Some(Pos::Unit(k, t))
                }
            };
            let enter = |k: u32| (k >= min).then_some(Pos::Close(1));
            match p {
                Pos::Open(i) => (open.get(i as usize) == Some(&b)).then(|| {
                    if i as usize + 1 == open.len() {
                        Pos::Unit(0, u0)
                    } else {
                        Pos::Open(i + 1)
                    }
                }),
                Pos::Unit(k, s) if s == u0 => {
                    if close.first() == Some(&b) {
                        return enter(k);
                    }
                    if max.is_some_and(|m| k >= m) {
                        return None;
                    }
                    in_unit(k, s)
                }
                Pos::Unit(k, s) => in_unit(k, s),
                Pos::Close(i) => (close.get(i as usize) == Some(&b)).then_some(Pos::Close(i + 1)),
            }
        };
        let accepting = |p: Pos| match p {
            Pos::Close(i) => i as usize == close.len(),
            Pos::Unit(k, s) => close.is_empty() && s == u0 && k >= min,
            Pos::Open(_) => false,
        };
        let start_pos = if open.is_empty() { Pos::Unit(0, u0) } else { Pos::Open(0) };
        // Every position has a slot: open bytes, then (count, unit state), then close bytes.
        let (n_open, n_close) = (open.len(), close.len());
        let slots = n_open + (cap as usize + 1) * n_unit + n_close + 1;
        if slots > max_tabled {
            let counter = Counter::new(open, unit, min, max, close, reps.clone(), limits.states)?;
            return Ok(Some(counter.into_dfa(classes)));
        }
        let slot = |p: &Pos| match *p {
            Pos::Open(i) => i as usize,
            Pos::Unit(k, s) => n_open + k as usize * n_unit + s as usize,
            Pos::Close(i) => n_open + (cap as usize + 1) * n_unit + i as usize,
        };
        explore(
            classes,
            &reps,
            Some(start_pos),
            limits.states,
            |&p, b| Ok(step(p, b)),
            |&p| accepting(p),
            || Error::limit("DFA states for a counted repetition", limits.states),
            Some((slots, &slot)),
        )
        .map(Some)
    }

    fn from_dense(dfa: &dense::DFA<Vec<u32>>, limits: DfaLimits) -> Result<Dfa> {
        // Our byte classes: the distinct class of each byte, with one representative byte each.
        let bc = dfa.byte_classes();
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let mut class_of_ra: HashMap<u8, u8> = HashMap::new();
        for b in 0..=255u8 {
            let c = bc.get(b);
            let ours = *class_of_ra.entry(c).or_insert_with(|| {
                reps.push(b);
                (reps.len() - 1) as u8
            });
            classes[b as usize] = ours;
        }

        let start_id = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| Error::invalid(format!("regex start state: {e}")))?;

        let live = |s: StateID| -> Result<Option<StateID>> {
            if dfa.is_quit_state(s) {
                return Err(Error::invalid("regex needs look-around that a DFA cannot do"));
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
            || Error::limit("DFA states for this regular expression", limits.states),
            None,
        )
    }

    /// Merges states that cannot reach acceptance into the dead state and fills `dist`.
    fn prune_dead_ends(&mut self) {
        let n = self.accept.len();
        let dist = self.distances(&vec![true; self.stride]);
        for s in 1..n {
            for c in 0..self.stride {
                let t = &mut self.trans[s * self.stride + c];
                if dist[*t as usize] == u32::MAX {
                    *t = DEAD;
                }
            }
        }
        if dist[self.start as usize] == u32::MAX {
            self.start = DEAD;
        }
        self.open = (0..n).map(|s| self.trans[s * self.stride..][..self.stride].iter().any(|&t| t != DEAD)).collect();
        self.dist = dist;
    }

    pub fn start(&self) -> u32 {
        self.start
    }

    #[inline(always)]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        debug_assert!((state as usize) < self.accept.len());
        if let Some(c) = &self.counter {
            return c.next(state, byte);
        }
        self.trans[state as usize * self.stride + self.classes[byte as usize] as usize]
    }

    /// The byte class of `byte` (bytes of one class have the same transitions everywhere).
    #[inline]
    pub fn class(&self, byte: u8) -> u8 {
        self.classes[byte as usize]
    }

    /// Runs `bytes` from `state`; `DEAD` as soon as the prefix cannot be completed.
    pub fn run(&self, mut state: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            state = self.next(state, b);
            if state == DEAD {
                break;
            }
        }
        state
    }

    pub fn is_accepting(&self, state: u32) -> bool {
        self.accept[state as usize]
    }

    /// A state that reads every string of at most `horizon` bytes as `state` does (the same
    /// deaths, acceptances and ends after every prefix), the same one for all such states of
    /// a counted repetition computed on the fly, else `state` itself. Its distance to
    /// acceptance is at least `state`'s. The mask cache keys entries by it, so the tokens
    /// inside a long bounded string share one entry until its bound comes within reach.
    pub fn canonical(&self, state: u32, horizon: u32) -> u32 {
        match &self.counter {
            Some(c) => c.canonical(state, horizon),
            None => state,
        }
    }

    /// Is this a counted repetition computed on the fly (see [`canonical`](Self::canonical))?
    pub fn is_counter(&self) -> bool {
        self.counter.is_some()
    }

    /// Per byte class of a table (a product tables its counters first): does every state go
    /// dead on it?
    fn dead_classes(&self) -> Vec<bool> {
        debug_assert!(self.counter.is_none(), "a counter has no table to read");
        (0..self.stride).map(|c| self.trans.iter().skip(c).step_by(self.stride).all(|&t| t == DEAD)).collect()
    }

    /// Can `state` read another byte (is some transition live)?
    #[inline]
    pub fn can_continue(&self, state: u32) -> bool {
        self.open[state as usize]
    }

    /// Fewest bytes from `state` to a complete match (`u32::MAX` for the dead state).
    pub fn dist(&self, state: u32) -> u32 {
        self.dist[state as usize]
    }

    /// The number of states, the dead state included.
    pub fn state_count(&self) -> usize {
        self.accept.len()
    }

    /// The one byte that may follow `state`, if exactly one byte value keeps it alive.
    pub fn only_byte(&self, state: u32) -> Option<u8> {
        let step = |c: usize| match &self.counter {
            Some(k) => k.next(state, k.reps[c]),
            None => self.trans[state as usize * self.stride + c],
        };
        let mut live = (0..self.stride).map(step).enumerate().filter(|&(_, t)| t != DEAD);
        let (class, _) = live.next()?;
        if live.next().is_some() {
            return None;
        }
        let mut bytes = (0..=255u8).filter(|&b| self.classes[b as usize] as usize == class);
        let b = bytes.next()?;
        bytes.next().is_none().then_some(b)
    }

    /// Fewest bytes to acceptance when only bytes with `usable[b]` may be used (e.g. bytes that
    /// exist as single-byte tokens): an upper bound on the tokens needed to finish.
    pub fn dist_using(&self, usable: &[bool; 256]) -> Arc<[u32]> {
        if let Some((u, d)) = self.dist_memo.get() {
            if u == usable {
                return d.clone();
            }
        }
        let d: Arc<[u32]> = self.dist_using_uncached(usable).into();
        let _ = self.dist_memo.set((*usable, d.clone()));
        d
    }

    fn dist_using_uncached(&self, usable: &[bool; 256]) -> Vec<u32> {
        let mut usable_class = vec![false; self.stride];
        for b in 0..256 {
            usable_class[self.classes[b] as usize] |= usable[b];
        }
        // Every class usable: the distances over all bytes, already known.
        if usable_class.iter().all(|&u| u) && self.dist.len() == self.accept.len() {
            return self.dist.clone();
        }
        self.distances(&usable_class)
    }

    /// Fewest transitions over the byte classes with `classes[c]` from each state to an
    /// accepting one (`u32::MAX`: none), by a breadth-first search backwards from the accepting
    /// states.
    fn distances(&self, classes: &[bool]) -> Vec<u32> {
        if let Some(c) = &self.counter {
            let mut usable = [false; 256];
            (0..256).for_each(|b| usable[b] = classes[self.classes[b] as usize]);
            return c.distances(&usable);
        }
        let n = self.accept.len();
        let mut edges = Vec::new();
        // One edge per distinct successor (most classes of a row share one): `seen[t] == s`
        // marks `t` as already linked from `s`.
        let mut seen = vec![0u32; n];
        for s in 1..n {
            for c in (0..self.stride).filter(|&c| classes[c]) {
                let t = self.trans[s * self.stride + c];
                if t != DEAD && seen[t as usize] != s as u32 {
                    seen[t as usize] = s as u32;
                    edges.push((t, s as u32));
                }
            }
        }
        backward_distances(n, &edges, (1..n).filter(|&s| self.accept[s]), 0)
    }
}

/// Breadth-first distances over a graph of `n` nodes given by its `(node, predecessor)` edges,
/// backwards from `sources` (at distance `first`): for each node, the fewest edges to a source
/// plus `first` (`u32::MAX`: none reaches one). Reverse edges are kept flat (counted, then
/// filled), not one `Vec` per node.
pub(crate) fn backward_distances(
    n: usize,
    edges: &[(u32, u32)],
    sources: impl Iterator<Item = usize>,
    first: u32,
) -> Vec<u32> {
    let mut start = vec![0u32; n + 1];
    for &(t, _) in edges {
        start[t as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut rev = vec![0u32; edges.len()];
    for &(t, p) in edges {
        rev[fill[t as usize] as usize] = p;
        fill[t as usize] += 1;
    }
    let mut dist = vec![u32::MAX; n];
    let mut queue: VecDeque<usize> = sources.collect();
    queue.iter().for_each(|&s| dist[s] = first);
    while let Some(s) = queue.pop_front() {
        for &p in &rev[start[s] as usize..start[s + 1] as usize] {
            if dist[p as usize] == u32::MAX {
                dist[p as usize] = dist[s] + 1;
                queue.push_back(p as usize);
            }
        }
    }
    dist
}

/// The common refinement of the DFAs' byte classes, with one representative byte per class;
/// the `dead` bytes (which some positive part of a product refuses everywhere) form one class.
fn common_classes<'a>(dfas: impl Iterator<Item = &'a Dfa> + Clone, dead: &[bool; 256]) -> ([u8; 256], Vec<u8>) {
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut class_of: HashMap<Vec<u8>, u8> = HashMap::new();
    let mut key: Vec<u8> = Vec::new();
    for b in 0..=255u8 {
        key.clear();
        // `dead` bytes share one key that no other byte has (an empty one).
        if !dead[b as usize] {
            key.extend(dfas.clone().map(|d| d.classes[b as usize]));
        }
        classes[b as usize] = match class_of.get(&key) {
            Some(&c) => c,
            None => {
                reps.push(b);
                class_of.insert(key.clone(), (reps.len() - 1) as u8);
                (reps.len() - 1) as u8
            }
        };
    }
    (classes, reps)
}

/// Most strings, and most bytes in all, that [`finite_strings`] expands a regex into.
const FINITE_STRINGS: usize = 512;
const FINITE_BYTES: usize = 1 << 14;

/// How many strings (with multiplicity) [`finite_strings`] would list for `hir`, or `None` if
/// more than [`FINITE_STRINGS`] or infinite: a cheap test before listing them.
fn string_count(hir: &Hir) -> Option<usize> {
    use regex_syntax::hir::{Class, HirKind};
    let n = match hir.kind() {
        HirKind::Empty | HirKind::Literal(_) => 1,
        HirKind::Class(Class::Unicode(c)) => c.ranges().iter().map(|r| r.end() as usize - r.start() as usize + 1).sum(),
        HirKind::Class(Class::Bytes(c)) => c.ranges().iter().map(|r| r.end() as usize - r.start() as usize + 1).sum(),
        HirKind::Look(_) => return None,
        HirKind::Capture(c) => return string_count(&c.sub),
        HirKind::Concat(parts) => parts.iter().try_fold(1usize, |acc, p| {
            string_count(p).map(|n| acc.saturating_mul(n)).filter(|&n| n <= FINITE_STRINGS)
        })?,
        HirKind::Alternation(parts) => {
            parts.iter().try_fold(0usize, |acc, p| string_count(p).map(|n| acc + n).filter(|&n| n <= FINITE_STRINGS))?
        }
        HirKind::Repetition(r) => {
            let max = r.max?;
            let sub = string_count(&r.sub)?;
            let (mut total, mut power) = (0usize, 1usize);
            for k in 0..=max {
                if k >= r.min {
                    total = total.saturating_add(power);
                }
                if total > FINITE_STRINGS || (k < max && sub > 1 && power > FINITE_STRINGS) {
                    return None;
                }
                power = power.saturating_mul(sub);
            }
            total
        }
    };
    (n <= FINITE_STRINGS).then_some(n)
}

/// The strings of a regex whose language is finite and small (literals, small classes,
/// alternations, bounded repetitions of those), or `None`. Look-around gives `None`.
pub(crate) fn finite_strings(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    string_count(hir)?;
    finite_strings_unchecked(hir)
}

fn finite_strings_unchecked(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    use regex_syntax::hir::{Class, HirKind};
    let fits = |v: &Vec<Vec<u8>>| v.len() <= FINITE_STRINGS && v.iter().map(Vec::len).sum::<usize>() <= FINITE_BYTES;
    let concat = |a: Vec<Vec<u8>>, b: &[Vec<u8>]| -> Option<Vec<Vec<u8>>> {
        if a.len().saturating_mul(b.len()) > FINITE_STRINGS {
            return None;
        }
        let v: Vec<Vec<u8>> = a.iter().flat_map(|x| b.iter().map(move |y| [x.as_slice(), y].concat())).collect();
        fits(&v).then_some(v)
    };
    let v = match hir.kind() {
        HirKind::Empty => vec![Vec::new()],
        HirKind::Literal(l) => vec![l.0.to_vec()],
        HirKind::Class(Class::Unicode(c)) => {
            let n: u32 = c.ranges().iter().map(|r| r.end() as u32 - r.start() as u32 + 1).sum();
            if n > 64 {
                return None;
            }
            let mut buf = [0u8; 4];
            c.ranges()
                .iter()
                .flat_map(|r| r.start()..=r.end())
                .map(|ch| ch.encode_utf8(&mut buf).as_bytes().to_vec())
                .collect()
        }
        HirKind::Class(Class::Bytes(c)) => {
            let n: u32 = c.ranges().iter().map(|r| r.end() as u32 - r.start() as u32 + 1).sum();
            if n > 64 {
                return None;
            }
            c.ranges().iter().flat_map(|r| r.start()..=r.end()).map(|b| vec![b]).collect()
        }
        HirKind::Look(_) => return None,
        HirKind::Capture(c) => return finite_strings_unchecked(&c.sub),
        HirKind::Concat(parts) => {
            let mut acc = vec![Vec::new()];
            for p in parts {
                acc = concat(acc, &finite_strings_unchecked(p)?)?;
            }
            acc
        }
        HirKind::Alternation(parts) => {
            let mut acc = Vec::new();
            for p in parts {
                acc.extend(finite_strings_unchecked(p)?);
                if !fits(&acc) {
                    return None;
                }
            }
            acc
        }
        HirKind::Repetition(r) => {
            let max = r.max?;
            if max > 64 {
                return None;
            }
            let sub = finite_strings_unchecked(&r.sub)?;
            let mut acc = Vec::new();
            let mut power = vec![Vec::new()];
            for n in 0..=max {
                if n >= r.min {
                    acc.extend(power.iter().cloned());
                    if !fits(&acc) {
                        return None;
                    }
                }
                if n < max {
                    power = concat(power, &sub)?;
                }
            }
            acc
        }
    };
    fits(&v).then_some(v)
}

/// Counted repetitions with more states than this are computed on the fly ([`Counter`]).
const MAX_TABLED_COUNTED: usize = 4_096;

/// `open · unit{min,max} · close` computed on the fly: the same automaton as the table
/// [`Dfa::counted`] builds, with states numbered by arithmetic instead of breadth-first.
///
/// States: 0 is dead; `1 + i` is "read `open[..i]`" (`i < |open|`); then one row of `width`
/// states per count `k` in `0..=cap`, the unit's non-accepting states in `row` order (the
/// unit's start first: "between units"); then "read `close[..i]`" for `i` in `1..=|close|`.
/// A unit's accepting state is never a state here: completing a unit moves to the next row's
/// start (`cap` saturates when there is no maximum). States inside a unit on the row of the
/// maximum cannot be reached (no unit starts there) and are dead.
///
/// Every other state is live (the unit is pruned, so a started unit can complete, and counts
/// up to the maximum can reach the minimum), which is what lets `dist` and `open` be written
/// down directly instead of searched.
struct Counter {
    unit: Dfa,
    open: Vec<u8>,
    close: Vec<u8>,
    min: u32,
    max: Option<u32>,
    cap: u32,
    /// Unit state → its place in a row (`u32::MAX`: accepting or dead, never a state here).
    place: Vec<u32>,
    /// Place in a row → unit state.
    row: Vec<u32>,
    /// One byte per class of the counted automaton.
    reps: Vec<u8>,
    /// First state of row 0, first "close" state, number of states.
    rows_at: u32,
    close_at: u32,
    states: usize,
}

impl Counter {
    /// The counter, or a limit error past `limit` states (counted before any state numbers).
    fn new(
        open: &[u8],
        unit: &Dfa,
        min: u32,
        max: Option<u32>,
        close: &[u8],
        reps: Vec<u8>,
        limit: usize,
    ) -> Result<Counter> {
        let cap = max.unwrap_or(min);
        let mut row = vec![unit.start];
        row.extend((1..unit.accept.len() as u32).filter(|&s| s != unit.start && !unit.accept[s as usize]));
        let states =
            (1 + open.len()).saturating_add((cap as usize + 1).saturating_mul(row.len())).saturating_add(close.len());
        if states > limit {
            return Err(Error::limit("DFA states for a counted repetition", limit));
        }
        let mut place = vec![u32::MAX; unit.accept.len()];
        row.iter().enumerate().for_each(|(i, &s)| place[s as usize] = i as u32);
        let rows_at = 1 + open.len() as u32;
        let close_at = rows_at + (cap + 1) * row.len() as u32;
        Ok(Counter {
            unit: unit.clone(),
            open: open.to_vec(),
            close: close.to_vec(),
            min,
            max,
            cap,
            place,
            row,
            reps,
            rows_at,
            close_at,
            states,
        })
    }

    fn width(&self) -> u32 {
        self.row.len() as u32
    }

    /// The start of row `k`.
    fn between(&self, k: u32) -> u32 {
        self.rows_at + k * self.width()
    }

    #[inline]
    fn next(&self, state: u32, b: u8) -> u32 {
        if state == DEAD {
            return DEAD;
        }
        if state < self.rows_at {
            let i = (state - 1) as usize;
            return match self.open[i] == b {
                false => DEAD,
                true if i + 1 == self.open.len() => self.between(0),
                true => state + 1,
            };
        }
        if state >= self.close_at {
            let i = (state - self.close_at) as usize + 1; // close[..i] read
            return if self.close.get(i) == Some(&b) { state + 1 } else { DEAD };
        }
        let (k, p) = ((state - self.rows_at) / self.width(), (state - self.rows_at) % self.width());
        let at_max = self.max == Some(k);
        if p == 0 {
            if self.close.first() == Some(&b) {
                return if k >= self.min { self.close_at } else { DEAD };
            }
            if at_max {
                return DEAD;
            }
        } else if at_max {
            return DEAD; // unreachable: no unit starts on the maximum's row
        }
        let t = self.unit.next(self.row[p as usize], b);
        if t == DEAD {
            return DEAD;
        }
        if self.unit.accept[t as usize] {
            return self.between((k + 1).min(self.cap));
        }
        self.between(k) + self.place[t as usize]
    }

    /// Fewest bytes to acceptance from every state, using only bytes with `usable[b]`
    /// (`u32::MAX`: none), written down from the unit's own distances.
    fn distances(&self, usable: &[bool; 256]) -> Vec<u32> {
        let inf = u32::MAX;
        let unit_dist: Vec<u32> = self.unit.dist_using_uncached(usable);
        let unit_min = unit_dist[self.unit.start as usize];
        let close_ok = self.close.iter().all(|&b| usable[b as usize]);
        let add = |a: u32, b: u32| if a == inf || b == inf { inf } else { a.saturating_add(b) };
        // From the start of row k: the units still needed, then `close`.
        let between = |k: u32| -> u32 {
            if !close_ok {
                return inf;
            }
            let needed = self.min.saturating_sub(k);
            if needed == 0 {
                return self.close.len() as u32;
            }
            if unit_min == inf {
                return inf;
            }
            needed.saturating_mul(unit_min).saturating_add(self.close.len() as u32)
        };
        let mut d = vec![inf; self.states];
        for (i, slot) in d.iter_mut().enumerate().take(self.rows_at as usize).skip(1) {
            let rest = self.open.len() - (i - 1);
            *slot =
                if self.open[i - 1..].iter().all(|&b| usable[b as usize]) { add(rest as u32, between(0)) } else { inf };
        }
        for k in 0..=self.cap {
            for (p, &s) in self.row.iter().enumerate() {
                let at = (self.between(k) + p as u32) as usize;
                d[at] = if p == 0 {
                    between(k)
                } else if self.max == Some(k) {
                    inf
                } else {
                    add(unit_dist[s as usize], between((k + 1).min(self.cap)))
                };
            }
        }
        for i in 1..=self.close.len() {
            let at = self.close_at as usize + i - 1;
            d[at] =
                if self.close[i..].iter().all(|&b| usable[b as usize]) { (self.close.len() - i) as u32 } else { inf };
        }
        d
    }

    /// The state of the same place (open, close, or unit place) on the row that reads every
    /// string of at most `horizon` bytes the way `state` does: one byte completes at most one
    /// unit, so a row matters only within `horizon` units of the minimum (acceptance) and of
    /// the maximum (the end). Rows further than that below the minimum read like row 0, rows
    /// at or past the minimum and further than that below the maximum like the minimum's.
    /// (Distances differ: the row chosen needs at least as many units as `state`'s.)
    fn canonical(&self, state: u32, horizon: u32) -> u32 {
        if state < self.rows_at || state >= self.close_at {
            return state;
        }
        let (k, p) = ((state - self.rows_at) / self.width(), (state - self.rows_at) % self.width());
        let far_from_max = self.max.is_none_or(|m| m - k > horizon);
        let row = if self.min.saturating_sub(k) > horizon {
            0
        } else if k >= self.min && far_from_max {
            self.min
        } else {
            k
        };
        self.between(row) + p
    }

    /// The automaton: no table, `accept`, `open` and `dist` written down.
    fn into_dfa(self, classes: [u8; 256]) -> Dfa {
        let n = self.states;
        let dist = self.distances(&[true; 256]);
        let mut accept = vec![false; n];
        let mut open = vec![false; n];
        for s in 1..n as u32 {
            let at = s as usize;
            if s >= self.close_at {
                // Read `close[..i]`: done at its end, else its next byte.
                let i = (s - self.close_at) as usize + 1;
                accept[at] = i == self.close.len();
                open[at] = i < self.close.len();
            } else if s >= self.rows_at {
                let (k, p) = ((s - self.rows_at) / self.width(), (s - self.rows_at) % self.width());
                let at_max = self.max == Some(k);
                accept[at] = self.close.is_empty() && p == 0 && k >= self.min;
                // Between units: another unit below the maximum, or `close` (k ≥ min there,
                // since min ≤ max). Inside a unit (never on the maximum's row): its next byte.
                open[at] = if p == 0 { !at_max || !self.close.is_empty() } else { !at_max };
            } else {
                open[at] = true; // reading `open`
            }
        }
        let start = if self.open.is_empty() { self.between(0) } else { 1 };
        let start = if dist[start as usize] == u32::MAX { DEAD } else { start };
        let stride = self.reps.len();
        Dfa {
            classes,
            stride,
            trans: Vec::new(),
            accept,
            open,
            dist,
            start,
            dist_memo: OnceLock::new(),
            id: next_id(),
            counter: Some(Arc::new(self)),
        }
    }
}

/// State ids by slot (0: not numbered yet) for a slot space too large to zero up front: pages
/// of ids, each allocated when a slot in it is first numbered. `format: uri` (476 states)
/// ∧ `maxLength` 255 (a 3,843-state counter) has 1.8 million slots of which 16,525 are
/// reached; zeroing them all (7 MiB; up to 16 MiB) was a fifth of that compile in a fresh
/// process.
struct SlotIds {
    pages: Vec<Option<Box<[u32; SLOT_PAGE]>>>,
}

const SLOT_PAGE: usize = 1024;

impl SlotIds {
    fn new(slots: usize) -> SlotIds {
        SlotIds { pages: std::iter::repeat_with(|| None).take(slots.div_ceil(SLOT_PAGE)).collect() }
    }

    #[inline]
    fn get(&self, slot: usize) -> u32 {
        self.pages[slot / SLOT_PAGE].as_ref().map_or(0, |p| p[slot % SLOT_PAGE])
    }

    #[inline]
    fn set(&mut self, slot: usize, id: u32) {
        self.pages[slot / SLOT_PAGE].get_or_insert_with(|| Box::new([0; SLOT_PAGE]))[slot % SLOT_PAGE] = id;
    }
}

/// Keys numbered by a dense slot instead of a hash (`slots` slots, `slot(k) < slots`, one key
/// per slot): for constructions whose states can be indexed directly.
type DenseSlots<'a, K> = (usize, &'a dyn Fn(&K) -> usize);

/// Builds a [`Dfa`] by exploring states of type `K` breadth-first from `start` (`None`: the
/// empty language): `step(k, byte)` is the next state (`None`: dead), `accepting(k)` whether `k`
/// accepts. States are numbered densely in discovery order after the dead state 0; past
/// `limit` states the build fails with `too_many()`. Transitions are asked once per byte class,
/// of its representative byte in `reps`. Dead ends are pruned at the end.
#[allow(clippy::too_many_arguments)]
fn explore<K: std::hash::Hash + Eq + Clone>(
    classes: [u8; 256],
    reps: &[u8],
    start: Option<K>,
    limit: usize,
    mut step: impl FnMut(&K, u8) -> Result<Option<K>>,
    accepting: impl Fn(&K) -> bool,
    too_many: impl Fn() -> Error,
    dense: Option<DenseSlots<'_, K>>,
) -> Result<Dfa> {
    let stride = reps.len();
    let mut ids: HashMap<K, u32, std::hash::BuildHasherDefault<super::earley::FxHasher>> = HashMap::default();
    let mut slot_ids = SlotIds::new(dense.map_or(0, |(n, _)| n));
    let mut order: Vec<K> = Vec::new(); // order[i - 1] is state i
    let mut number = |k: K, order: &mut Vec<K>| -> Result<u32> {
        use std::collections::hash_map::Entry;
        if let Some((_, slot)) = dense {
            let at = slot(&k);
            if slot_ids.get(at) != 0 {
                return Ok(slot_ids.get(at));
            }
            if order.len() + 1 >= limit {
                return Err(too_many());
            }
            order.push(k);
            slot_ids.set(at, order.len() as u32);
            return Ok(order.len() as u32);
        }
        match ids.entry(k) {
            Entry::Occupied(e) => Ok(*e.get()),
            Entry::Vacant(e) => {
                if order.len() + 1 >= limit {
                    return Err(too_many());
                }
                order.push(e.key().clone());
                Ok(*e.insert(order.len() as u32))
            }
        }
    };
    let start = match start {
        Some(k) => number(k, &mut order)?,
        None => DEAD,
    };
    let mut trans = vec![DEAD; stride]; // the dead state's row
    let mut accept = vec![false];
    let mut i = 0;
    while i < order.len() {
        let k = order[i].clone();
        for &rep in reps {
            let t = match step(&k, rep)? {
                Some(next) => number(next, &mut order)?,
                None => DEAD,
            };
            trans.push(t);
        }
        accept.push(accepting(&k));
        i += 1;
    }
    let mut dfa = Dfa {
        classes,
        stride,
        trans,
        accept,
        open: Vec::new(),
        dist: Vec::new(),
        start,
        dist_memo: OnceLock::new(),
        id: next_id(),
        counter: None,
    };
    dfa.prune_dead_ends();
    Ok(dfa)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(re: &str) -> Dfa {
        Dfa::from_hir(&crate::grammar::regex::parse(re).unwrap(), DfaLimits::default()).unwrap()
    }

    #[test]
    fn full_match_and_prefixes() {
        let d = dfa("a|ab|abc");
        let s = d.run(d.start(), b"ab");
        assert!(d.is_accepting(s));
        assert!(d.is_accepting(d.run(d.start(), b"abc")));
        assert_eq!(d.run(d.start(), b"abcd"), DEAD);
        assert_eq!(d.run(d.start(), b"b"), DEAD);
    }

    #[test]
    fn unreachable_acceptance_is_dead() {
        // `a` followed by a class with no members can never complete.
        let d = dfa(r"x|a[^\s\S]");
        assert_eq!(d.next(d.start(), b'a'), DEAD);
        assert_eq!(d.only_byte(d.start()), Some(b'x'));
    }

    #[test]
    fn distances() {
        let d = dfa(r#"\{"a":[0-9]+\}"#);
        assert_eq!(d.dist(d.start()), 7);
        assert_eq!(d.only_byte(d.start()), Some(b'{'));
    }

    fn lexeme(parts: &[(&str, bool)]) -> Dfa {
        let parts = parts
            .iter()
            .map(|(re, neg)| {
                let l = Lexeme::Regex(crate::grammar::regex::parse(re).unwrap());
                if *neg {
                    Lexeme::Not(Box::new(l))
                } else {
                    l
                }
            })
            .collect();
        Dfa::from_lexeme(&Lexeme::And(parts), DfaLimits::default()).unwrap()
    }

    fn accepts(d: &Dfa, s: &str) -> bool {
        d.is_accepting(d.run(d.start(), s.as_bytes()))
    }

    #[test]
    fn intersection_and_complement() {
        // Contains "ab", at most 4 letters, not exactly "abab".
        let d = lexeme(&[("[a-z]*ab[a-z]*", false), ("[a-z]{0,4}", false), ("abab", true)]);
        for (s, ok) in [
            ("ab", true),
            ("xaby", true),
            ("abab", false),
            ("aabb", true),
            ("xyz", false),
            ("abcde", false),
            ("", false),
        ] {
            assert_eq!(accepts(&d, s), ok, "{s:?}");
        }
        // Dead as soon as no completion exists: after 4 letters without "ab".
        assert_eq!(d.run(d.start(), b"xyzw"), DEAD);
        assert_eq!(d.dist(d.start()), 2);
        assert_eq!(d.dist(d.run(d.start(), b"x")), 2);
        // "abab" itself is rejected but "abab" + nothing else cannot grow (max 4): dead.
        assert_eq!(d.run(d.start(), b"abab"), DEAD);
        // An empty intersection has a dead start.
        assert_eq!(lexeme(&[("a+", false), ("b+", false)]).start(), DEAD);
        // A complement alone accepts everything else, including what extends the excluded word.
        let d = lexeme(&[("abc", true)]);
        assert!(accepts(&d, "") && accepts(&d, "ab") && accepts(&d, "abcd") && !accepts(&d, "abc"));
    }

    #[test]
    fn products_numbered_by_slot_or_by_hash_are_the_same_table() {
        let cases: &[&[(&str, bool)]] = &[
            &[("[a-z]*ab[a-z]*", false), ("[a-z]{0,4}", false), ("abab", true)],
            &[("(?:a|bc)*c?", false), ("[abc]{1,5}", false), ("(?:ab)+", true), ("[abc]*cc[abc]*", true)],
            &[("[^\"]{0,40}", false), ("(?:https?|ftp)://[a-z.]+(?:/[a-z0-9]*)*", false)],
            &[("abc", true)],
        ];
        for parts in cases {
            let dfas: Vec<(Arc<Dfa>, bool)> = parts.iter().map(|(re, neg)| (Arc::new(dfa(re)), *neg)).collect();
            let by_slot = Dfa::product_numbered(&dfas, DfaLimits::default(), usize::MAX).unwrap();
            let by_hash = Dfa::product_numbered(&dfas, DfaLimits::default(), 0).unwrap();
            assert!(by_slot.state_count() > 1, "{parts:?}");
            assert_eq!(
                (&by_slot.trans, &by_slot.accept, by_slot.start),
                (&by_hash.trans, &by_hash.accept, by_hash.start),
                "{parts:?}"
            );
            assert_eq!(by_slot.classes, by_hash.classes);
        }
    }

    #[test]
    fn product_agrees_with_the_regexes() {
        // Every string over a small alphabet up to length 6, against the `regex` crate. `d`
        // is refused everywhere by a positive part in the first set (one dead byte class), and
        // only by the negated part in the second (where it must stay alive).
        let sets: [&[(&str, bool)]; 2] = [
            &[("(?:a|bc)*c?", false), ("[abc]{1,5}", false), ("(?:ab)+", true), ("[abc]*cc[abc]*", true)],
            &[("[a-d]*", false), ("[abc]*cc[abc]*", true)],
        ];
        let mut words = vec![Vec::new()];
        for _ in 0..6 {
            words = words
                .iter()
                .flat_map(|w: &Vec<u8>| b"abcd".iter().map(move |&c| [w.clone(), vec![c]].concat()))
                .chain(words.clone())
                .collect();
            words.sort();
            words.dedup();
        }
        for parts in sets {
            let d = lexeme(parts);
            let res: Vec<(regex::bytes::Regex, bool)> = parts
                .iter()
                .map(|(re, neg)| (regex::bytes::Regex::new(&format!("^(?:{re})$")).unwrap(), *neg))
                .collect();
            for w in &words {
                let want = res.iter().all(|(r, neg)| r.is_match(w) != *neg);
                assert_eq!(d.is_accepting(d.run(d.start(), w)), want, "{parts:?} {:?}", String::from_utf8_lossy(w));
            }
        }
    }

    /// Every string over `alphabet` up to `len` bytes.
    fn words(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
        let mut words: Vec<Vec<u8>> = vec![Vec::new()];
        for n in 0..len {
            let next: Vec<Vec<u8>> = words
                .iter()
                .filter(|w| w.len() == n)
                .flat_map(|w| alphabet.iter().map(move |&c| [w.clone(), vec![c]].concat()))
                .collect();
            words.extend(next);
        }
        words
    }

    fn same_language(fast: &Dfa, slow: &Dfa, alphabet: &[u8], len: usize, what: &str) {
        for w in words(alphabet, len) {
            let (a, b) = (fast.run(fast.start(), &w), slow.run(slow.start(), &w));
            assert_eq!(fast.is_accepting(a), slow.is_accepting(b), "{what}: {:?}", String::from_utf8_lossy(&w));
            assert_eq!(a == DEAD, b == DEAD, "{what}: {:?}", String::from_utf8_lossy(&w));
            assert_eq!(fast.dist(a), slow.dist(b), "{what}: {:?}", String::from_utf8_lossy(&w));
        }
    }

    #[test]
    fn finite_languages_and_spliced_sequences_equal_the_nfa_path() {
        let hir = |re: &str| crate::grammar::regex::parse(re).unwrap();
        let finite = [
            r#""name""#,
            r#"(?:"a"|"ab"|"b"|"")"#,
            "[ab]{0,3}c?",
            "a(?:b|)(?:c|ab){1,2}",
            "(?:)",
            r"[^\x00-\x{10FFFF}]",
            "é|e\u{301}|[xy]{2}",
        ];
        for re in finite {
            let h = hir(re);
            assert!(finite_strings(&h).is_some(), "{re} is finite and small");
            let (fast, slow) = (
                Dfa::from_hir(&h, DfaLimits::default()).unwrap(),
                Dfa::from_hir_nfa(&h, DfaLimits::default()).unwrap(),
            );
            same_language(&fast, &slow, "abcé\"xy\u{301}".as_bytes(), 6, re);
        }
        assert!(
            finite_strings(&hir("a*")).is_none()
                && finite_strings(&hir("[a-z]{0,5}")).is_none()
                && finite_strings(&hir(r"(?-u:\b)a")).is_none()
        );
        // A quoted name spliced onto a shared rest, and shapes the splice must refuse.
        for re in [
            r#""ab"[ \t]{0,9}:"#,
            r#"(?:"a"|"bc")x*"#,
            r#""a"(?:b|c)*d"#,
            "(?:a|ab)c*",
            "(?:|a)b*",
            "ab^c*d",
            r"a(?-u:\b)x*",
        ] {
            let h = hir(re);
            let fast = Dfa::from_regex_lexeme(&h, DfaLimits::default()).unwrap();
            let slow = Dfa::from_hir_nfa(&h, DfaLimits::default()).unwrap();
            same_language(&fast, &slow, b"abcdx \t:\"", 6, re);
        }
        // A name longer than the listing budget: the regex path, same language.
        let long = format!("\"{}\" *:", "n".repeat(FINITE_BYTES + 1));
        let d = Dfa::from_regex_lexeme(&hir(&long), DfaLimits::default()).unwrap();
        assert!(d.is_accepting(d.run(d.start(), long.replace(" *", "  ").as_bytes())));
        let name = Dfa::from_strings(vec![b"\"ab\"".to_vec()], DfaLimits::default()).unwrap();
        let rest = Dfa::from_hir_nfa(&hir(" *:"), DfaLimits::default()).unwrap();
        assert!(Dfa::splice(&name, &rest, DfaLimits::default()).unwrap().is_some());
        let not_prefix_free = Dfa::from_strings(vec![b"a".to_vec(), b"ab".to_vec()], DfaLimits::default()).unwrap();
        assert!(Dfa::splice(&not_prefix_free, &rest, DfaLimits::default()).unwrap().is_none());
    }

    fn usable_of(bytes: &[u8]) -> [bool; 256] {
        let mut u = [false; 256];
        bytes.iter().for_each(|&b| u[b as usize] = true);
        u
    }

    #[test]
    fn counted_equals_the_regex() {
        let unit = r#"(?:[^"\\]|\\["\\n]|\\u00[0-9a-f]{2})"#;
        let hir = |re: &str| crate::grammar::regex::parse(re).unwrap();
        let unit_dfa = Dfa::from_hir(&hir(unit), DfaLimits::default()).unwrap();
        // Every string over a small alphabet up to length 6.
        let alphabet: &[u8] = b"\"\\anu0b";
        let words = words(alphabet, 6);
        let usables = [usable_of(alphabet), usable_of(b"\"a"), usable_of(b"a\\n"), usable_of(b"ab\"")];
        for (open, close) in [(&b"\""[..], &b"\""[..]), (b"", b""), (b"ab", b"\"b")] {
            for (min, max) in [(0, Some(3)), (2, Some(2)), (1, None), (0, None), (2, Some(4))] {
                let l = Lexeme::counted(open, hir(unit), min, max, close);
                let Lexeme::Counted { full, .. } = &l else { unreachable!() };
                let slow = Dfa::from_hir(full, DfaLimits::default()).unwrap();
                let slow_using: Vec<Arc<[u32]>> = usables.iter().map(|u| slow.dist_using(u)).collect();
                // Tabled, and computed on the fly: same acceptance, liveness, distances.
                for max_tabled in [usize::MAX, 0] {
                    let fast = Dfa::counted_with(open, &unit_dfa, min, max, close, DfaLimits::default(), max_tabled)
                        .unwrap()
                        .expect("prefix-free unit");
                    assert_eq!(fast.counter.is_some(), max_tabled == 0);
                    let fast_using: Vec<Arc<[u32]>> = usables.iter().map(|u| fast.dist_using(u)).collect();
                    // What a product reads: the counter as a table.
                    let tabled = fast.counter.as_ref().map(|c| fast.tabled(c));
                    for w in &words {
                        if let Some(t) = &tabled {
                            assert_eq!(
                                t.run(t.start(), w),
                                fast.run(fast.start(), w),
                                "tabled counter {:?}",
                                String::from_utf8_lossy(w)
                            );
                        }
                        let (a, b) = (fast.run(fast.start(), w), slow.run(slow.start(), w));
                        let at =
                            format!("{open:?} {close:?} {min} {max:?} {max_tabled} {:?}", String::from_utf8_lossy(w));
                        assert_eq!(fast.is_accepting(a), slow.is_accepting(b), "{at}");
                        assert_eq!(a == DEAD, b == DEAD, "{at}");
                        assert_eq!(fast.dist(a), slow.dist(b), "{at}");
                        assert_eq!(fast.can_continue(a), slow.can_continue(b), "{at}");
                        assert_eq!(fast.only_byte(a), slow.only_byte(b), "{at}");
                        for (fu, su) in fast_using.iter().zip(&slow_using) {
                            assert_eq!(fu[a as usize], su[b as usize], "{at}");
                        }
                    }
                }
            }
        }
        // A unit that is not prefix-free is refused (the caller falls back to the regex).
        let unit_dfa = Dfa::from_hir(&hir("a|ab"), DfaLimits::default()).unwrap();
        assert!(Dfa::counted(b"", &unit_dfa, 0, Some(3), b"", DfaLimits::default()).unwrap().is_none());
    }

    #[test]
    fn canonical_states_read_every_short_string_alike() {
        let hir = |re: &str| crate::grammar::regex::parse(re).unwrap();
        let unit = Dfa::from_hir(&hir(r#"(?:[^"\\]|\\["\\n])"#), DfaLimits::default()).unwrap();
        let alphabet: &[u8] = b"\"\\an";
        let words = words(alphabet, 4);
        for (min, max) in [(0, Some(12)), (9, Some(20)), (7, None), (0, None), (5, Some(5))] {
            let dfa = Dfa::counted_with(b"\"", &unit, min, max, b"\"", DfaLimits::default(), 0)
                .unwrap()
                .expect("prefix-free unit");
            for horizon in [1, 2, 3] {
                let mut distinct = std::collections::HashSet::new();
                for s in 1..dfa.state_count() as u32 {
                    let c = dfa.canonical(s, horizon);
                    distinct.insert(c);
                    assert!(dfa.dist(c) >= dfa.dist(s), "{min} {max:?} h{horizon} state {s} → {c}");
                    // Every prefix of every word of at most `horizon` bytes: the same fate.
                    for w in words.iter().filter(|w| w.len() <= horizon as usize) {
                        let (a, b) = (dfa.run(s, w), dfa.run(c, w));
                        let at = format!("{min} {max:?} h{horizon} state {s} → {c} {:?}", String::from_utf8_lossy(w));
                        assert_eq!(a == DEAD, b == DEAD, "{at}");
                        assert_eq!(dfa.is_accepting(a), dfa.is_accepting(b), "{at}");
                        assert_eq!(dfa.can_continue(a), dfa.can_continue(b), "{at}");
                    }
                }
                // Counts far from both bounds share states: fewer canonical states than states.
                if max.unwrap_or(min) > horizon + 1 {
                    assert!(distinct.len() < dfa.state_count() - 1, "{min} {max:?} h{horizon}");
                }
            }
        }
    }

    #[test]
    fn shared_dfas_are_built_once_per_lexeme_and_limits() {
        let l = Lexeme::Regex(crate::grammar::regex::parse("shared-[a-z]{2}").unwrap());
        let a = Dfa::shared(&l, DfaLimits::default()).unwrap();
        let b = Dfa::shared(&l, DfaLimits::default()).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the second compile reuses the table");
        // Other limits are another key: a limit error is never masked by a cached success.
        let tight = DfaLimits { states: 3, ..DfaLimits::default() };
        assert!(matches!(Dfa::shared(&l, tight), Err(Error::Limit { .. })));
        // Distances per usable-byte set are memoized and follow the set.
        let all = [true; 256];
        let mut no_z = all;
        no_z[b'z' as usize] = false;
        assert!(Arc::ptr_eq(&a.dist_using(&all), &a.dist_using(&all)));
        assert_eq!(a.dist_using(&all)[a.start() as usize], 9);
        let d = a.dist_using(&no_z);
        assert_eq!(d[a.run(a.start(), b"shared-z") as usize], 1);
        assert_eq!(a.dist_using(&all)[a.start() as usize], 9);
    }

    #[test]
    fn product_of_no_parts_accepts_everything() {
        let d = Dfa::product::<Arc<Dfa>>(&[], DfaLimits::default()).unwrap();
        assert!(d.is_accepting(d.start()) && d.is_accepting(d.run(d.start(), b"anything")));
    }

    #[test]
    fn exponential_regex_is_a_limit_error() {
        let hir = crate::grammar::regex::parse("(a|b)*a(a|b){40}").unwrap();
        let t = std::time::Instant::now();
        let e = Dfa::from_hir(&hir, DfaLimits::default()).err().expect("must hit a limit");
        assert!(matches!(e, Error::Limit { .. }), "{e}");
        assert!(t.elapsed().as_secs() < 5);
    }
}
