//! Shortest completions as text: the fewest-usable-bytes string a lexeme DFA accepts from a
//! state ([`dfa_suffix`]) and each nonterminal's shortest derivation ([`Shortest`]).
//!
//! A token budget counted lexeme by lexeme ([`Cfg::token_costs`]) is an upper bound that
//! misses tokens spanning lexemes (`]}` is one token and two lexemes). Near the end of a budget
//! that is what refuses a completion that fits, so [`Chart::fits`](super::earley::Chart::fits)
//! also spells the cheapest completion in usable bytes and counts the tokens the vocabulary
//! encodes it in ([`Vocab::encode`](crate::vocab::Vocab::encode): the tokenizer's own split
//! when byte-exact, else the longest match): one way to finish, so another upper bound, and
//! often the exact count.
//!
//! Invariants: every string here is made of usable bytes (single-byte text tokens exist for
//! each), so the vocabulary can always encode it; a string's length is the usable-byte cost
//! the cost tables give ([`Term::dist`](super::cfg::Term), [`Nt::minlen`](super::cfg::Nt)).

use super::cfg::{Cfg, NtId, Sym};
use crate::regular::{Dfa, StateId, UNREACHABLE};

/// Longest completion spelled out; past it the byte and per-lexeme counts stand alone.
pub const MAX_SPELLED: u32 = 4096;

/// The shortest string in usable bytes that takes `dfa` from `state` to acceptance, given
/// `dist` (fewest usable bytes per state); `None` if there is none.
pub fn dfa_suffix(dfa: &Dfa, dist: &[u32], usable: &[bool; 256], mut state: StateId, out: &mut Vec<u8>) -> bool {
    let mut d = dist[state.index()];
    if d == UNREACHABLE {
        return false;
    }
    while d > 0 {
        let step = (0..=255u8).filter(|&b| usable[b as usize]).find_map(|b| {
            let t = dfa.next(state, b);
            (t != StateId::DEAD && dist[t.index()] == d - 1).then_some((b, t))
        });
        let Some((b, t)) = step else { return false };
        out.push(b);
        state = t;
        d -= 1;
    }
    true
}

/// Each nonterminal's shortest derivation in usable bytes (`None`: none, or longer than
/// [`MAX_SPELLED`]).
pub struct Shortest {
    pub nt: Vec<Option<Box<[u8]>>>,
}

impl Shortest {
    /// A fixpoint over the productions in order of cost: a nonterminal's string is set once,
    /// from a production whose symbols all have theirs and whose total is its `minlen`.
    pub fn new(cfg: &Cfg, usable: &[bool; 256]) -> Shortest {
        let terms: Vec<Option<Vec<u8>>> = cfg
            .terms
            .iter()
            .map(|t| {
                let mut s = Vec::new();
                let start = t.dfa.start();
                (t.dist[start.index()] <= MAX_SPELLED && dfa_suffix(&t.dfa, &t.dist, usable, start, &mut s))
                    .then_some(s)
            })
            .collect();
        let mut nt: Vec<Option<Box<[u8]>>> = vec![None; cfg.nts.len()];
        loop {
            let mut changed = false;
            for (i, n) in cfg.nts.iter().enumerate() {
                if nt[i].is_some() || n.minlen > MAX_SPELLED {
                    continue;
                }
                for &p in &n.prods {
                    let mut s = Vec::new();
                    let ok = cfg.prod(p).rhs.iter().all(|&x| match x {
                        Sym::T(t) => terms[t.index()].as_ref().map(|b| s.extend_from_slice(b)).is_some(),
                        Sym::N(m) => nt[m.index()].as_ref().map(|b| s.extend_from_slice(b)).is_some(),
                    });
                    if ok && s.len() as u32 == n.minlen {
                        nt[i] = Some(s.into());
                        changed = true;
                        break;
                    }
                }
            }
            if !changed {
                return Shortest { nt };
            }
        }
    }

    /// The shortest string of `sym` (a terminal's from its start state).
    pub fn of(&self, cfg: &Cfg, usable: &[bool; 256], sym: Sym, out: &mut Vec<u8>) -> bool {
        match sym {
            Sym::T(t) => {
                let t = cfg.term(t);
                t.dist[t.dfa.start().index()] <= MAX_SPELLED && dfa_suffix(&t.dfa, &t.dist, usable, t.dfa.start(), out)
            }
            Sym::N(n) => match &self.nt[n.index()] {
                Some(b) => {
                    out.extend_from_slice(b);
                    true
                }
                None => false,
            },
        }
    }

    /// The whole grammar's shortest string.
    pub fn top(&self) -> Option<&[u8]> {
        self.nt[NtId::TOP.index()].as_deref()
    }
}
