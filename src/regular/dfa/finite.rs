//! Finite languages: a small set of strings as a trie ([`Dfa::from_strings`]), the strings of a
//! regex whose language is small and finite ([`finite_strings`]), and a prefix-free language
//! spliced onto another ([`Dfa::splice`]).

use regex_syntax::hir::Hir;

use super::explore::explore;
use super::product::common_classes;
use super::{Dfa, DfaLimits, StateId};
use crate::error::{Error, LimitKind, Result};

impl Dfa {
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
        let stride = reps.len();
        let too_many = || Error::limit(LimitKind::DfaStates, "DFA states for a set of strings", limits.states);
        if strings.is_empty() {
            return Ok(Dfa::from_rows(classes, stride, vec![StateId::DEAD; stride], vec![false], StateId::DEAD));
        }
        // Breadth first, each state's children found by one pass over its strings (grouped by
        // their next byte, as they are sorted): O(total bytes + states x classes). State 0 is
        // dead; `nodes[i - 1]` is state i.
        let mut nodes: Vec<(usize, usize, usize)> = vec![(0, strings.len(), 0)];
        if nodes.len() + 1 > limits.states {
            return Err(too_many());
        }
        let mut trans = vec![StateId::DEAD; stride];
        let mut accept = vec![false];
        let mut i = 0;
        while i < nodes.len() {
            let (lo, hi, depth) = nodes[i];
            let row = trans.len();
            trans.resize(row + stride, StateId::DEAD);
            // Sorted and distinct: only the first string of the range can end here.
            let ends = strings[lo].len() == depth;
            accept.push(ends);
            let mut j = lo + usize::from(ends);
            while j < hi {
                let b = strings[j][depth];
                let k = j + strings[j..hi].iter().take_while(|s| s[depth] == b).count();
                if nodes.len() + 2 > limits.states {
                    return Err(too_many());
                }
                nodes.push((j, k, depth + 1));
                trans[row + classes[b as usize] as usize] = StateId(nodes.len() as u32);
                j = k;
            }
            i += 1;
        }
        Ok(Dfa::from_rows(classes, stride, trans, accept, StateId(1)))
    }

    /// Is the language prefix-free and without the empty string (no accepted string is a
    /// proper prefix of another): no accepting state reads anything more, and the start does
    /// not accept. What [`splice`](Dfa::splice) needs of its first part.
    pub fn is_prefix_free(&self) -> bool {
        self.start != StateId::DEAD
            && !self.accept[self.start.index()]
            && !(1..self.accept.len()).any(|s| self.accept[s] && self.open[s])
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
                        t if a.accept[t.index()] => (b.start != StateId::DEAD).then_some(Pos::B(b.start)),
                        t => Some(Pos::A(t)),
                    },
                    Pos::B(s) => match b.next(s, byte) {
                        StateId::DEAD => None,
                        t => Some(Pos::B(t)),
                    },
                })
            },
            |p| matches!(*p, Pos::B(s) if b.accept[s.index()]),
            || Error::limit(LimitKind::DfaStates, "DFA states for a sequence of regexes", limits.states),
            Some((a.accept.len() + b.accept.len(), &|p: &Pos| match *p {
                Pos::A(s) => s.index(),
                Pos::B(s) => a.accept.len() + s.index(),
            })),
        )
        .map(Some)
    }
}

/// Most strings, and most bytes in all, that [`finite_strings`] expands a regex into.
pub(super) const FINITE_STRINGS: usize = 512;
pub(super) const FINITE_BYTES: usize = 1 << 14;

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
