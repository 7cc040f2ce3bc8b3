//! The last tokens of a budget where items must be distinct: each token kept only where a way
//! to finish after it is shown that commits through the repeat check.
//!
//! The lexeme-by-lexeme count does not count what keeping items distinct costs: within
//! `DISTINCT_SLACK` tokens of its end a budgeted mask keeps a token only where the witness after
//! it (found by committing, so it never repeats an item) fits. One witness search per token is
//! too much for a whole vocabulary (inside a free string, most of it may go on), so tokens that
//! stay inside their lexemes are judged a group at a time: those that reach one parse state
//! ([`CfgRun::plain_groups`](crate::automaton::cfg_run::CfgRun::plain_groups)) differ only in
//! the bytes they add. Outside every list the reader watches (and with no marked literals),
//! such tokens without a quote, a backslash or a `[` leave the reader as it was, so the witness
//! after one of them is a way on after each: the group shares it. Inside the content of a
//! string of a watched item, they differ in the content they add to that string. After one of
//! them, `r`, a witness `w` fits; after another, `t`, the same tokens `w` are a way on for the
//! grammar, and they finish the same items as after `r` except those that hold `t`. Such an
//! item is compared with the items of its lists: those finished before (their lists keep their
//! canonical forms, strings unescaped; an item that is not JSON is kept raw) and those `w`
//! finishes. It can equal one of them only where that one's canonical form holds the content
//! `s·t` (`s`: the string's content so far, unescaped) or its raw bytes hold `raw(s)·t`. So `t`
//! shares `r`'s witness unless `s·t` or `raw(s)·t` occurs in a finished item's canonical form
//! of a list in reach, or `s·t` in the unescaped bytes of `w`, or `raw(s)·t` in them raw. Those
//! tokens, and all the others (those that cross lexemes: `"},{"`), are committed one by one
//! (at most [`MAX_KEYED`], by id) and grouped by the state they reach
//! ([`CfgRun::witness_key`](crate::automaton::cfg_run::CfgRun::witness_key): the parse state,
//! the items the reader holds, the text of those it is reading): one judgement per state. A
//! state is judged by replaying the witness last found for its parse state (committing it
//! checks it: most such states differ only in an item they finished) and otherwise by a search,
//! at most [`MAX_CONFIRMED`] of them; tokens left unjudged are dropped, so the mask stays sound
//! and is narrower only there; the witness's own first token is kept.
//!
//! The same judgement applies, inside a list of distinct items, to the tokens the lexeme count
//! refused under a budget (`judged` is then those tokens only): their witness depends on the
//! items they write, so they cannot share one by parse state alone.
//!
//! The ways shown after the tokens kept are remembered (`Matcher::shown`): committing one of
//! those tokens makes its way the witness, so the next mask starts from a way that fits (a
//! fresh search from there may find only a longer one).
//!
//! Invariant: the matcher is left as it was (every commit rolled back, its witness restored),
//! but for the ways shown.

use std::collections::HashSet;
use std::iter::once;
use std::sync::Arc;

use super::witness::AfterKey;
use super::KeyMap;
use super::{allow_first, Backend, Matcher, Run, Shown};
use crate::automaton::distinct::unescape_all;
use crate::vocab::{TokenId, TokenKind, TokenSet};

/// The most states searched for a witness one by one (each reached by committing a token).
const MAX_CONFIRMED: usize = 64;

/// The most bytes the witness searches of those states try, all together (a search that finds
/// nothing tries up to 32,768: where nothing fits, 64 of them were 1.6-1.8 s a mask on a
/// 49k vocabulary); states met after that are refused as those past [`MAX_CONFIRMED`] are.
const MAX_CONFIRM_WORK: usize = 1 << 16;

/// The most tokens committed to find the states they reach.
const MAX_KEYED: usize = 1024;

/// The members of a group tried as its representative before the group is checked one by one.
const MAX_REPRESENTATIVES: usize = 2;

/// The groups judged a group at a time, the largest first (each costs up to
/// [`MAX_REPRESENTATIVES`] witness searches); the tokens of the others are checked one by one.
const MAX_GROUPS: usize = 8;

/// The most continuations a [`Occurs`] lists: beyond, every token counts as occurring (checked
/// one by one).
const MAX_OCCURS: usize = 1 << 18;

impl Matcher {
    /// Keeps in `mask`, of the text tokens of `judged` (a part of it), only those after which a
    /// way to finish that commits through the repeat check fits in `after_budget` tokens (see
    /// the module doc); lets in the witness's first token where it fits.
    pub(super) fn confirm_distinct(&mut self, mask: &mut TokenSet, judged: &TokenSet, after_budget: u32) {
        let compiled = self.compiled.clone();
        let vocab = compiled.env.vocab();
        let mut kept = TokenSet::new(mask.width());
        let mut shown: Shown = Vec::new();
        let (groups, string) = self.plain_groups(judged);
        // The items a new one is compared with: the same for every group.
        let items = if string.is_some() { self.items_in_reach() } else { Vec::new() };
        for ids in groups {
            let bytes = |t: TokenId| vocab.bytes(t);
            let longest = ids.iter().map(|&t| bytes(t).len()).max().unwrap_or(0);
            for &r in ids.iter().take(MAX_REPRESENTATIVES) {
                let Some(w) = self.fitting_witness_after(r, after_budget) else { continue };
                let way: Arc<[TokenId]> = w.into();
                kept.insert(r);
                shown.push((r, way.clone()));
                // Outside every list: no item holds the token, its group shares the witness.
                let Some(string) = &string else {
                    ids.iter().filter(|&&t| t != r).for_each(|&t| {
                        kept.insert(t);
                        shown.push((t, way.clone()));
                    });
                    break;
                };
                let w: Vec<u8> = way.iter().flat_map(|&t| bytes(t).iter().copied()).collect();
                let w_content = unescape_all(&w);
                let (contents, raws) = (once(&w_content[..]), once(&w[..]));
                let occurs = (
                    Occurs::new(&string.content, contents.chain(items.iter().map(|k| &k[..])), longest),
                    Occurs::new(&string.raw, raws.chain(items.iter().map(|k| &k[..])), longest),
                );
                if let (Some(a), Some(b)) = occurs {
                    ids.iter().filter(|&&t| t != r && !a.holds(bytes(t)) && !b.holds(bytes(t))).for_each(|&t| {
                        kept.insert(t);
                        shown.push((t, way.clone()));
                    });
                }
                break;
            }
        }
        // The others by the state they reach: one witness search per state, at most
        // `MAX_CONFIRMED`; tokens met after that, or past `MAX_KEYED`, are dropped.
        let texts: Vec<TokenId> =
            judged.iter().filter(|&t| vocab.kind(t) == TokenKind::Text && !kept.contains(t)).collect();
        let old = self.old_items();
        // A state's way to finish, where one fits.
        let mut known: KeyMap<Option<Arc<[TokenId]>>> = KeyMap::default();
        // The last witness found per parse state, replayed first where the reader differs
        // (most often only in the items it finished): committing it checks it.
        let mut found: KeyMap<Arc<[TokenId]>> = KeyMap::default();
        let (mut searched, mut work) = (0, MAX_CONFIRM_WORK);
        for (i, t) in texts.into_iter().enumerate() {
            let way = if i < MAX_KEYED {
                self.after_token(t, &old, |m, AfterKey { key, state }| {
                    if let Some(way) = known.get(&key) {
                        return way.clone();
                    }
                    let parse = &key[..state];
                    let replayed = found.get(parse).filter(|w| m.replays(w)).cloned();
                    let way = replayed.or_else(|| {
                        (searched < MAX_CONFIRMED && work > 0).then_some(())?;
                        searched += 1;
                        let w: Arc<[TokenId]> =
                            m.find_witness_within(&mut work).filter(|w| w.len() as u32 <= after_budget)?.into();
                        found.insert(parse.to_vec(), w.clone());
                        Some(w)
                    });
                    known.insert(key, way.clone());
                    way
                })
                .flatten()
            } else {
                None
            };
            match way {
                Some(way) => shown.push((t, way)),
                None => mask.remove(t),
            }
        }
        self.shown = Some((self.len(), shown));
        let witness = self.witness().map(<[TokenId]>::to_vec);
        allow_first(mask, witness.as_deref(), after_budget);
    }

    /// A witness after `t` that fits in `after_budget` tokens.
    fn fitting_witness_after(&mut self, t: TokenId, after_budget: u32) -> Option<Vec<TokenId>> {
        self.witness_after(t).filter(|w| w.len() as u32 <= after_budget)
    }

    /// The mask's tokens that may share a witness, by parse state (the largest groups first),
    /// with the JSON string the output is inside where that matters: outside every list the
    /// reader watches (and with no marked literals, whose guess reads back into the text), the
    /// plain tokens but `[` (which the guess reads as opening a list), which leave the reader
    /// as it was; inside the content of a string of a watched item, the plain tokens, with that
    /// string so far. None elsewhere.
    fn plain_groups(&self, mask: &TokenSet) -> (Vec<Vec<TokenId>>, Option<StringSoFar>) {
        let none = (Vec::new(), None);
        let (Run::Cfg(c), Backend::Earley(cfg)) = (&self.run, &self.compiled.backend) else {
            return none;
        };
        let idle = c.shares_witness(cfg);
        let string = if idle {
            None
        } else {
            match c.in_string_content().then(|| StringSoFar::of(c.text())).flatten() {
                Some(s) => Some(s),
                None => return none,
            }
        };
        let mut groups = c.plain_groups(cfg, &self.compiled.env, mask, idle);
        groups.truncate(MAX_GROUPS);
        (groups, string)
    }

    /// The canonical forms of the items a new item is compared with (see
    /// [`CfgRun::items_in_reach`](crate::automaton::cfg_run::CfgRun::items_in_reach)).
    fn items_in_reach(&self) -> Vec<std::sync::Arc<[u8]>> {
        match &self.run {
            Run::Cfg(c) => c.items_in_reach(),
            Run::Dfa(_) => Vec::new(),
        }
    }
}

/// The JSON string an output ends inside: its content so far, raw and unescaped.
struct StringSoFar {
    raw: Vec<u8>,
    content: Vec<u8>,
}

impl StringSoFar {
    /// The string `text` ends inside (its last quote not escaped is the opening one); `None`
    /// if the text ends inside an escape (the next bytes would not be content as they are).
    fn of(text: &[u8]) -> Option<StringSoFar> {
        let open = (0..text.len())
            .rev()
            .find(|&i| text[i] == b'"' && text[..i].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 0)?;
        let raw = &text[open + 1..];
        let mut i = 0;
        while i < raw.len() {
            if raw[i] == b'\\' {
                let need = if raw.get(i + 1) == Some(&b'u') { 6 } else { 2 };
                if i + need > raw.len() {
                    return None;
                }
                i += need;
            } else {
                i += 1;
            }
        }
        Some(StringSoFar { raw: raw.to_vec(), content: unescape_all(raw) })
    }
}

/// The byte strings (of at most `longest` bytes) that follow an occurrence of a prefix in some
/// texts: "does `prefix·t` occur in one of them?" is "is `t` listed?". `None` where there
/// would be more than [`MAX_OCCURS`].
struct Occurs<'a> {
    after: HashSet<&'a [u8]>,
}

impl<'a> Occurs<'a> {
    fn new(prefix: &[u8], texts: impl Iterator<Item = &'a [u8]>, longest: usize) -> Option<Occurs<'a>> {
        let mut after = HashSet::new();
        for text in texts {
            for at in memchr::memmem::find_iter(text, prefix) {
                let rest = &text[at + prefix.len()..];
                for k in 1..=longest.min(rest.len()) {
                    after.insert(&rest[..k]);
                }
                if after.len() > MAX_OCCURS {
                    return None;
                }
            }
        }
        Some(Occurs { after })
    }

    fn holds(&self, t: &[u8]) -> bool {
        !self.after.is_empty() && self.after.contains(t)
    }
}

#[cfg(test)]
mod tests {
    use super::{Occurs, StringSoFar};

    #[test]
    fn the_string_an_output_ends_inside() {
        let s = StringSoFar::of(br#"{"a":["x\"y\/z"#).unwrap();
        assert_eq!((s.raw.as_slice(), s.content.as_slice()), (&br#"x\"y\/z"#[..], &b"x\"y/z"[..]));
        // An escaped backslash before a quote: the quote closes, a later one opens.
        assert_eq!(StringSoFar::of(br#"["a\\","b"#).unwrap().raw, b"b");
        // Inside an escape: the next bytes are not content as they are.
        assert!(StringSoFar::of(br#"["a\u00"#).is_none());
        assert!(StringSoFar::of(br#"["a\"#).is_none());
        assert!(StringSoFar::of(b"[1,2").is_none());
    }

    #[test]
    fn what_follows_a_prefix_in_a_text() {
        let o = Occurs::new(b"ca", [&b"[\"cat\",\"cab\"]"[..]].into_iter(), 3).unwrap();
        assert!(o.holds(b"t") && o.holds(b"b\"") && o.holds(b"t\","));
        assert!(!o.holds(b"r") && !o.holds(b"tt"));
        // The empty prefix: every piece of the text.
        let o = Occurs::new(b"", [&b"dog"[..], b"cat"].into_iter(), 2).unwrap();
        assert!(o.holds(b"do") && o.holds(b"g") && o.holds(b"at") && !o.holds(b"gc"));
    }

    /// The tokens inside their lexemes, grouped by the lexer states they reach, are the same
    /// groups in the same order whether each token is read on its own or the trie is walked.
    #[test]
    fn plain_groups_read_one_by_one_are_those_of_the_walk() {
        use std::sync::Arc;

        use super::super::{Backend, Run};
        use crate::automaton::{Compiled, Constraint, VocabEnv};
        use crate::grammar::json_schema::JsonSchemaOptions;
        use crate::vocab::{TokenSet, Vocab};
        let v = Arc::new(Vocab::embedded());
        let env = VocabEnv::new(v.clone());
        let schema = serde_json::json!({
            "type": "array",
            "items": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "string", "pattern": "^on[a-z]*$"}]},
            "uniqueItems": true
        });
        let c = Compiled::new(&env, &Constraint::JsonSchema(schema, JsonSchemaOptions::default())).unwrap();
        let mut mask = TokenSet::new(v.len());
        let mut found = 0;
        for text in ["[", "[\"", "[\"on", "[\"once\",\"the", "[\"a\",12"] {
            let mut m = c.matcher();
            for t in v.encode(text.as_bytes()).unwrap() {
                m.commit(t).unwrap();
            }
            m.fill_mask(&mut mask);
            let (Run::Cfg(run), Backend::Earley(cfg)) = (&m.run, &c.backend) else { panic!("context-free") };
            for no_bracket in [false, true] {
                let walked = run.plain_groups_by(cfg, &env, &mask, no_bracket, false);
                let read = run.plain_groups_by(cfg, &env, &mask, no_bracket, true);
                assert_eq!(walked, read, "after {text:?}");
                found += walked.len();
            }
        }
        assert!(found > 4, "some groups: {found}");
    }
}
