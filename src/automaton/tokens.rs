//! Token terminals: grammar leaves matched by one token of the vocabulary, not by text
//! (GBNF's `<[id]>` and `<name>`, Lark's `<|name|>`; [`Expr::Token`]).
//!
//! The automata run on bytes, so compiling gives each named token bytes that no text can
//! spell: `0xFF`, then its id in seven bytes `0xF8..=0xFF` (three bits each). No UTF-8 text
//! holds a byte above `0xF7`, so no literal, character class or JSON Schema leaf reads them
//! (a grammar whose own byte-level regexes do is refused), and a text token that holds one (a
//! byte-level vocabulary's lone `0xFF`) is barred from the constraint, in masks and commits
//! alike. So only the named tokens ever write those bytes, and a named token is allowed
//! exactly where its bytes are; committed, it commits them. The Earley chart, the DFA, the
//! mask cache and budgets run as for any terminal (a named token's bytes count as eight
//! usable bytes: an upper bound on its one token, as counts must be).
//!
//! A named text token (Qwen3's `<think>`, plain text in its vocabulary) is used only where the
//! grammar names it: elsewhere its text is spelled by other tokens. A named end-of-sequence
//! token is refused (the output ends with EOS where the grammar is complete).
//!
//! A run of tokens but one ([`Expr::TokensBut`], GBNF's `(!<X>)*` and `(!<X>)+`) is any text
//! (non-empty for `+`): text tokens write it, and never `X` (a text `X` is barred like a named
//! text token; a control `X` no text writes anyway). Control tokens other than `X` are not
//! written inside it (llama.cpp's run may hold them): a subset, as text is everywhere here.
//! A single `!<X>` or one counted otherwise is refused: one token but `X` is not a language
//! of text.
//!
//! Invariants: every id in [`Named::tokens`] is below the vocabulary's size and is not EOS;
//! [`Named::barred`] holds every text token with a byte above `0xF7`, every named text token
//! and every text token a run keeps out; no leaf of the resolved grammar but the named tokens'
//! reads a byte above `0xF7`.

use std::collections::HashMap;
use std::sync::Arc;

use regex_syntax::hir::{Class, Hir, HirKind};

use crate::error::{Error, Location, Result};
use crate::grammar::{Expr, Grammar, TokenRef};
use crate::regular::{Lexeme, StateId};

use super::cfg::Cfg;
use crate::vocab::{TokenId, TokenKind, TokenSet, Vocab};

/// The first byte of a named token's bytes.
const LEAD: u8 = 0xFF;

/// The lowest byte of the id's digits (and of what no UTF-8 text holds).
pub(crate) const HIGH: u8 = 0xF8;

/// Digits of three bits after [`LEAD`]: ids below 2^21.
const DIGITS: usize = 7;

/// The tokens a grammar names, resolved against a vocabulary (see the module doc).
#[derive(Debug)]
pub(crate) struct Named {
    /// Each named token and its bytes, by id.
    tokens: Vec<(TokenId, Vec<u8>)>,
    /// Text tokens the constraint never uses as text.
    barred: TokenSet,
}

impl Named {
    /// The bytes `token` stands for in the automata, if the grammar names it.
    pub(crate) fn bytes(&self, token: TokenId) -> Option<&[u8]> {
        self.tokens.binary_search_by_key(&token, |(t, _)| *t).ok().map(|i| self.tokens[i].1.as_slice())
    }

    /// Is `token` barred from being used as text?
    pub(crate) fn is_barred(&self, token: TokenId) -> bool {
        (token.0 as usize) < self.barred.width() && self.barred.contains(token)
    }

    /// The named tokens and their bytes.
    pub(crate) fn tokens(&self) -> &[(TokenId, Vec<u8>)] {
        &self.tokens
    }

    /// Takes the barred tokens out of `mask`.
    pub(crate) fn remove_barred(&self, mask: &mut TokenSet) {
        for t in self.barred.iter() {
            if (t.0 as usize) < mask.width() {
                mask.remove(t);
            }
        }
    }
}

/// The bytes that stand for token `id` (below 2^21).
fn encode(id: u32) -> Vec<u8> {
    let mut out = vec![LEAD];
    out.extend((0..DIGITS).rev().map(|k| HIGH | ((id >> (3 * k)) & 7) as u8));
    out
}

/// Does the grammar name any token?
pub(crate) fn has_tokens(g: &Grammar) -> bool {
    fn any(e: &Expr) -> bool {
        match e {
            Expr::Token(_) | Expr::TokensBut { .. } => true,
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().any(any),
            Expr::Repeat { body, .. } => any(body),
            _ => false,
        }
    }
    g.rules.iter().any(|r| any(&r.body))
}

/// The token `t` names in `vocab`, if any: by id, one the vocabulary has; by name, the control
/// token of that text, else the text token.
pub fn find(vocab: &Vocab, t: &TokenRef) -> Option<TokenId> {
    match t {
        TokenRef::Id(id) => {
            Some(TokenId(*id)).filter(|&t| (t.0 as usize) < vocab.len() && vocab.kind(t) != TokenKind::Unused)
        }
        TokenRef::Name(n) => [TokenKind::Special, TokenKind::Text].into_iter().find_map(|kind| {
            (0..vocab.len() as u32).map(TokenId).find(|&t| vocab.kind(t) == kind && vocab.bytes(t) == n.as_bytes())
        }),
    }
}

/// `g` with every [`Expr::Token`] replaced by its bytes, and what it names; `None` when it names
/// no token. Errors name the rule: a token not in the vocabulary, an id past it, an
/// end-of-sequence token, a leaf that reads the bytes named tokens use.
pub(crate) fn resolve(g: &Grammar, vocab: &Vocab) -> Result<Option<(Grammar, Named)>> {
    if !has_tokens(g) {
        return Ok(None);
    }
    let mut found: HashMap<TokenRef, Option<TokenId>> = HashMap::new();
    let mut named: Vec<TokenId> = Vec::new();
    // Text tokens a run of tokens keeps out (`(!<X>)*`): barred like named text tokens.
    let mut kept_out: Vec<TokenId> = Vec::new();
    let mut out = g.clone();
    for r in &mut out.rules {
        let err = |msg: String| {
            let span = r.span.unwrap_or_default();
            Error::Grammar { at: Location::LineCol { line: span.line.max(1), col: span.col.max(1) }, msg }
        };
        if let Some(what) = reads_high(&r.body) {
            return Err(err(format!(
                "rule `{}` reads {what}, bytes that token terminals stand for in this grammar",
                r.name
            )));
        }
        let name = r.name.clone();
        let mut lookup = |t: &TokenRef| -> Result<TokenId> {
            found.entry(t.clone()).or_insert_with(|| find(vocab, t)).ok_or_else(|| match t {
                TokenRef::Id(id) => {
                    err(format!("rule `{name}`: token id {id} is not in the vocabulary ({} ids)", vocab.len()))
                }
                TokenRef::Name(n) => err(format!("rule `{name}`: no single token of the vocabulary is `{n}`")),
            })
        };
        replace(&mut r.body, &mut |e| match e {
            Expr::Token(t) => {
                let id = lookup(t)?;
                if id.0 >= 1 << (3 * DIGITS) {
                    return Err(err(format!(
                        "rule `{name}`: token id {} is past the ids token terminals can name",
                        id.0
                    )));
                }
                if vocab.is_eos(id) {
                    return Err(err(format!(
                        "rule `{name}`: `{}` is an end-of-sequence token; an output ends with it wherever the \
                         grammar is complete, so leave it out of the grammar",
                        t.text()
                    )));
                }
                if !named.contains(&id) {
                    named.push(id);
                }
                // A lexeme of its own: never merged with its neighbours (see `mark_terms`).
                Ok(Expr::Lexeme(Arc::new(Lexeme::Regex(Hir::literal(encode(id.0))))))
            }
            Expr::TokensBut { but, min, max, text } => {
                if !e.is_supported_tokens_but() {
                    return Err(err(format!(
                        "rule `{name}`: `!{}` counted {{{min},{}}}: only `(!<...>)*` and `(!<...>)+` (any text \
                         without that token) are supported; one token but that is not a language of text",
                        but.text(),
                        max.map_or(String::new(), |m| m.to_string())
                    )));
                }
                let id = lookup(but)?;
                if vocab.kind(id) == TokenKind::Text && !kept_out.contains(&id) {
                    kept_out.push(id);
                }
                Ok(Expr::Regex(text.clone()))
            }
            _ => unreachable!("`replace` passes token leaves only"),
        })?;
    }
    named.sort_unstable();
    let mut barred = TokenSet::new(vocab.len());
    for id in (0..vocab.len() as u32).map(TokenId) {
        let text = vocab.kind(id) == TokenKind::Text;
        let high = vocab.bytes(id).iter().any(|&b| b >= HIGH);
        if text && (named.binary_search(&id).is_ok() || kept_out.contains(&id) || high) {
            barred.insert(id);
        }
    }
    let tokens = named.into_iter().map(|t| (t, encode(t.0))).collect();
    Ok(Some((out, Named { tokens, barred })))
}

/// Marks the terminals of `cfg` that are a named token's bytes ([`Term::one_token`](super::cfg::Term::one_token)): those
/// that read [`LEAD`] first, since no other leaf reads it (checked by [`resolve`]) and a named
/// token's lexeme is never merged with another.
pub(crate) fn mark_terms(cfg: &mut Cfg) {
    for t in &mut cfg.terms {
        t.one_token = t.dfa.next(t.dfa.start(), LEAD) != StateId::DEAD;
    }
}

/// Replaces every token leaf of `e` ([`Expr::Token`], [`Expr::TokensBut`]) by what `f` makes
/// of it.
fn replace(e: &mut Expr, f: &mut impl FnMut(&Expr) -> Result<Expr>) -> Result<()> {
    match e {
        Expr::Token(_) | Expr::TokensBut { .. } => *e = f(e)?,
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter_mut().try_for_each(|x| replace(x, f))?,
        Expr::Repeat { body, .. } => replace(body, f)?,
        _ => {}
    }
    Ok(())
}

/// What in `e` may read a byte above `0xF7` (a byte-level regex; a complement of regexes),
/// if anything.
fn reads_high(e: &Expr) -> Option<&'static str> {
    match e {
        Expr::Regex(h) => hir_reads_high(h).then_some("bytes above 0xF7 in a regex"),
        Expr::Lexeme(l) => lexeme_reads_high(l).then_some("any byte (a complement of regexes)"),
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().find_map(reads_high),
        Expr::Repeat { body, .. } => reads_high(body),
        _ => None,
    }
}

fn lexeme_reads_high(l: &Lexeme) -> bool {
    match l {
        Lexeme::Regex(h) => hir_reads_high(h),
        // An intersection reads what every part reads.
        Lexeme::And(xs) => xs.iter().all(lexeme_reads_high),
        Lexeme::Not(_) => true,
        Lexeme::Counted { full, .. } => hir_reads_high(full),
    }
}

fn hir_reads_high(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Class(Class::Unicode(_)) => false,
        HirKind::Literal(l) => l.0.iter().any(|&b| b >= HIGH),
        HirKind::Class(Class::Bytes(c)) => c.ranges().iter().any(|r| r.end() >= HIGH),
        HirKind::Repetition(r) => hir_reads_high(&r.sub),
        HirKind::Capture(c) => hir_reads_high(&c.sub),
        HirKind::Concat(xs) | HirKind::Alternation(xs) => xs.iter().any(hir_reads_high),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_spelled_in_bytes_no_text_holds() {
        for id in [0u32, 1, 7, 8, 128_000, (1 << 21) - 1] {
            let b = encode(id);
            assert_eq!(b.len(), 1 + DIGITS);
            assert!(b.iter().all(|&x| x >= HIGH));
            assert!(std::str::from_utf8(&b).is_err());
            let back = b[1..].iter().fold(0u32, |a, &x| (a << 3) | u32::from(x & 7));
            assert_eq!(back, id);
        }
        assert_ne!(encode(1), encode(8));
    }
}
