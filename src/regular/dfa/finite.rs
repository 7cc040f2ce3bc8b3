//! Finite languages: a set of strings as its minimal acyclic automaton ([`Dfa::from_strings`]), the
//! strings of a regex whose language is small and finite ([`finite_strings`]), and a prefix-free
//! language spliced onto another ([`Dfa::splice`]).

use regex_syntax::hir::Hir;

use super::explore::explore;
use super::product::common_classes;
use super::{Dfa, DfaLimits, StateId};
use crate::error::{Error, LimitKind, Result};
use crate::regular::FxBuild;

impl Dfa {
    /// The DFA of a finite set of strings: the minimal one (an acyclic automaton in which
    /// strings share their prefixes and their suffixes). A state of the trie is the range of
    /// the sorted, de-duplicated strings that share the prefix read so far; it is built
    /// children first and registered by what it is (accepting? which byte leads to which
    /// registered state?), so two prefixes with the same continuations are one state.
    /// O(total bytes) states and hash lookups; no NFA. A set of 600 time-zone names is 3,666
    /// states either way, built here in ~1 ms instead of ~25 ms by determinization.
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
        let stride = reps.len();
        if strings.is_empty() {
            return Ok(Dfa::from_rows(classes, stride, vec![StateId::DEAD; stride], vec![false], StateId::DEAD));
        }
        let too_many = || Error::limit(LimitKind::DfaStates, "DFA states for a set of strings", limits.states);
        let (nodes, root) = minimal_trie(&strings, &classes, limits.states).ok_or_else(too_many)?;
        if (nodes.len() + 1).saturating_mul(stride).saturating_mul(4) > limits.dfa_bytes {
            return Err(Error::limit(LimitKind::DfaBytes, "DFA bytes for a set of strings", limits.dfa_bytes));
        }
        // Tabled breadth first from the root (state 0 dead, the root 1), as every table is.
        let mut id = vec![u32::MAX; nodes.len()];
        let mut order = vec![root];
        id[root as usize] = 1;
        let mut i = 0;
        while i < order.len() {
            for &(_, child) in &nodes[order[i] as usize].1 {
                if id[child as usize] == u32::MAX {
                    order.push(child);
                    id[child as usize] = order.len() as u32;
                }
            }
            i += 1;
        }
        let mut trans = vec![StateId::DEAD; (order.len() + 1) * stride];
        let mut accept = vec![false; order.len() + 1];
        for (k, &n) in order.iter().enumerate() {
            let (ends, edges) = &nodes[n as usize];
            accept[k + 1] = *ends;
            for &(class, child) in edges {
                trans[(k + 1) * stride + class as usize] = StateId(id[child as usize]);
            }
        }
        Ok(Dfa::from_rows(classes, stride, trans, accept, StateId(1)))
    }

    /// The strings of the language in byte order, where it is finite and has at most `max`
    /// of them, none longer than `max_len` bytes; `None` otherwise (a cycle among live states,
    /// more or longer strings) and for a count computed on the fly. Every live state leads to
    /// acceptance, so the search visits at most `max * max_len` states.
    pub fn strings(&self, max: usize, max_len: usize) -> Option<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        if self.counter.is_some() {
            return None;
        }
        if self.start == StateId::DEAD {
            return Some(out);
        }
        let mut on_path = vec![false; self.state_count()];
        let mut word = Vec::new();
        self.collect_strings(self.start, (max, max_len), &mut on_path, &mut word, &mut out).then_some(out)
    }

    /// [`strings`](Dfa::strings) from `s` after `word`: false where the language is too large.
    fn collect_strings(
        &self,
        s: StateId,
        (max, max_len): (usize, usize),
        on_path: &mut [bool],
        word: &mut Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    ) -> bool {
        if self.is_accepting(s) {
            if out.len() == max {
                return false;
            }
            out.push(word.clone());
        }
        if !self.can_continue(s) {
            return true;
        }
        if word.len() == max_len {
            return false;
        }
        on_path[s.index()] = true;
        for b in 0..=255u8 {
            let t = self.next(s, b);
            if t == StateId::DEAD {
                continue;
            }
            if on_path[t.index()] {
                return false;
            }
            word.push(b);
            let fits = self.collect_strings(t, (max, max_len), on_path, word, out);
            word.pop();
            if !fits {
                return false;
            }
        }
        on_path[s.index()] = false;
        true
    }

    /// Does some live state that can read more have only finitely many ways to an end (no
    /// cycle within its reach)? Then a prefix can run out of completions: an output that must
    /// avoid some of them can be stuck after it. False where every prefix that can go on has
    /// endless completions (`"` any-string `"` but for the closing quote). A count computed on
    /// the fly bounds the length: true. Kahn's order backwards: a state whose live successors
    /// are all settled has a finite future.
    pub fn has_finite_tail(&self) -> bool {
        if self.counter.is_some() {
            return true;
        }
        let n = self.state_count();
        let mut edges: Vec<(u32, u32)> = Vec::new();
        let mut out = vec![0u32; n];
        for (s, row) in self.trans.chunks(self.stride).enumerate().skip(1) {
            for &t in row.iter().filter(|&&t| t != StateId::DEAD) {
                edges.push((t.0, s as u32));
                out[s] += 1;
            }
        }
        let reverse = super::Reverse::new(n, &edges);
        let mut settled: Vec<u32> = (1..n as u32).filter(|&s| out[s as usize] == 0).collect();
        let mut i = 0;
        while let Some(&t) = settled.get(i) {
            i += 1;
            for &p in reverse.preds(StateId(t)) {
                out[p as usize] -= 1;
                if out[p as usize] == 0 {
                    settled.push(p);
                }
            }
        }
        settled.iter().any(|&s| self.can_continue(StateId(s)))
    }

    /// Is the language prefix-free and without the empty string (no accepted string is a
    /// proper prefix of another): no accepting state reads anything more, and the start does
    /// not accept. What [`splice`](Dfa::splice) needs of its first part.
    pub fn is_prefix_free(&self) -> bool {
        self.start != StateId::DEAD
            && !self.is_accepting(self.start)
            && !(1..self.state_count() as u32).map(StateId).any(|s| self.is_accepting(s) && self.can_continue(s))
    }

    /// `a` then `b`, for an `a` whose accepting states read nothing more (a prefix-free
    /// language such as a quoted name): on reaching acceptance in `a`, go on as `b` from its
    /// start. `None` if `a` does not have that shape.
    pub fn splice(a: &Dfa, b: &Dfa, limits: DfaLimits) -> Result<Option<Dfa>> {
        if !a.is_prefix_free() {
            return Ok(None);
        }
        #[derive(Clone, PartialEq, Eq, Hash)]
        enum Pos {
            A(StateId),
            B(StateId),
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
                        StateId::DEAD => None,
                        t if a.is_accepting(t) => (b.start != StateId::DEAD).then_some(Pos::B(b.start)),
                        t => Some(Pos::A(t)),
                    },
                    Pos::B(s) => match b.next(s, byte) {
                        StateId::DEAD => None,
                        t => Some(Pos::B(t)),
                    },
                })
            },
            |p| matches!(*p, Pos::B(s) if b.is_accepting(s)),
            || Error::limit(LimitKind::DfaStates, "DFA states for a sequence of regexes", limits.states),
            Some((a.state_count() + b.state_count(), &|p: &Pos| match *p {
                Pos::A(s) => s.index(),
                Pos::B(s) => a.state_count() + s.index(),
            })),
        )
        .map(Some)
    }
}

/// A state of [`minimal_trie`]: accepting?, and its edges (byte class, child) in byte order.
type Node = (bool, Vec<(u8, u32)>);

/// A trie node on [`minimal_trie`]'s current path: the range `lo..hi` of the strings that
/// share its prefix of `depth` bytes, the first string of its next child, its edges so far.
struct Frame {
    lo: usize,
    hi: usize,
    depth: usize,
    next: usize,
    edges: Vec<(u8, u32)>,
}

/// The minimal acyclic automaton of sorted, distinct, non-empty-set `strings`: its states
/// (each listed once, children before parents) and the root's index; `None` past `max_states`
/// (counting the dead state). Iterative (a string may be thousands of bytes long): a
/// [`Frame`] per trie node on the current path.
fn minimal_trie(strings: &[Vec<u8>], classes: &[u8; 256], max_states: usize) -> Option<(Vec<Node>, u32)> {
    let mut registry: std::collections::HashMap<Node, u32, FxBuild> = std::collections::HashMap::default();
    // Sorted and distinct: only the first string of a range can end at its node.
    let frame = |lo: usize, hi: usize, depth: usize| Frame {
        lo,
        hi,
        depth,
        next: lo + usize::from(strings[lo].len() == depth),
        edges: Vec::new(),
    };
    let mut stack = vec![frame(0, strings.len(), 0)];
    loop {
        let top = stack.last_mut().expect("the root's frame is popped last");
        if top.next < top.hi {
            // The next child: the strings of the range that go on with the same byte.
            let (j, depth) = (top.next, top.depth);
            let b = strings[j][depth];
            let k = j + strings[j..top.hi].iter().take_while(|s| s[depth] == b).count();
            top.next = k;
            stack.push(frame(j, k, depth + 1));
            continue;
        }
        let Frame { lo, depth, edges, .. } = stack.pop().expect("a frame");
        let node = (strings[lo].len() == depth, edges);
        let n = registry.len();
        let id = *registry.entry(node).or_insert(n as u32);
        if registry.len() + 1 > max_states {
            return None;
        }
        match stack.last_mut() {
            Some(parent) => parent.edges.push((classes[strings[lo][parent.depth] as usize], id)),
            None => {
                // Each node once, at its id.
                let mut nodes: Vec<Node> = vec![(false, Vec::new()); registry.len()];
                registry.into_iter().for_each(|(node, id)| nodes[id as usize] = node);
                return Some((nodes, id));
            }
        }
    }
}

/// Most strings, and most bytes in all, that [`finite_strings`] expands a regex into.
/// Listing is linear in what it lists and [`Dfa::from_strings`] in its bytes: an enum of a few
/// thousand names (time zones, languages) is a set of strings, not a regex to determinize.
pub(super) const FINITE_STRINGS: usize = 4096;
pub(super) const FINITE_BYTES: usize = 1 << 16;

/// How many strings (with multiplicity) [`finite_strings`] would list for `hir`, or `None` if
/// more than [`FINITE_STRINGS`] or infinite: a cheap test before listing them.
pub(super) fn string_count(hir: &Hir) -> Option<usize> {
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

/// Is a set of strings prefix-free: no string empty, none a proper prefix of another (what
/// [`Dfa::splice`] needs of its first part, known here before any DFA is built)?
pub(crate) fn prefix_free(strings: &[Vec<u8>]) -> bool {
    let mut sorted: Vec<&[u8]> = strings.iter().map(Vec::as_slice).collect();
    sorted.sort_unstable();
    sorted.dedup();
    // In sorted order a string's extensions follow it directly.
    !sorted.first().is_some_and(|s| s.is_empty()) && sorted.windows(2).all(|w| !w[1].starts_with(w[0]))
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
