//! The exact search under a budget: can a context-free output be finished within so many more
//! tokens, by any sequence of tokens of the vocabulary?
//!
//! The lexeme-by-lexeme count and the [`witness`](super::witness) are both upper bounds on the
//! tokens that finish: each shows a way that fits, neither proves that none does (a completion
//! longer in bytes may take fewer tokens: `"Attendance"` is one token, the cheapest enum value
//! `"Payroll"` two; a string may close with `"}]}` as one token where the cheapest bytes are
//! spelled otherwise). Where both refuse a token in a budgeted mask (with at most
//! `MAX_BUDGET_BY_WITNESS` tokens left, where a refused token is judged by a witness of its
//! own: [`Matcher::allow_by_witness`]), this search settles it: from the parse state after the
//! token, every token the parse allows is tried, depth first, down to the budget. Tokens that reach one parse state are
//! tried once (grouped by where they land: the lexer states they leave the current lexemes in
//! and the lexemes ending at their last byte, see
//! [`Refused`](crate::automaton::cfg_run::Refused)); a parse state shown unable to finish
//! within `n` tokens is remembered (keyed from the mask's position as
//! [`CfgRun::state_key`](crate::automaton::cfg_run::CfgRun::state_key) keys it, the rows since
//! chained into one word: [`CfgRun::chained_state_key`](crate::automaton::cfg_run::CfgRun::chained_state_key))
//! and not searched again
//! with `n` or fewer; the count settles every state it lets through. So under such a budget a
//! token is refused exactly when no sequence of tokens after it finishes in time: what a brute
//! force over token sequences finds (`tests/core/budget.rs`, up to 4 tokens left), and what the
//! same search without its work bound finds with 13-30 left (`exact_tests.rs`: with the search
//! stopped at 12 tokens left, as before session 42, 0.4% of the tokens it checks were refused
//! that fit).
//!
//! Limits, both on the safe side (a token not shown to fit is refused, never let through
//! unproven): grammars with distinct-items marks are not searched (a parse state's key does not
//! hold the reader of distinct items); one mask's search does at most [`MAX_SEARCH_WORK`]
//! (a parse state counts as a walk of the vocabulary, or a share of one where its mask needs
//! no walk: at the last token, or where the cache answers; so about ten walks of a large
//! vocabulary; the refused tokens with the shortest witnesses are searched first, one
//! parse state at a time and each from scratch, so the fast and the reference mask agree;
//! beyond, a token is refused). At the last token the count is exact (finishing in no more
//! tokens is being complete), so there the count's mask alone answers.
//!
//! The questions asked once per request (`min_tokens_to_finish`, `finishes_within`) ask it for
//! at most [`MAX_SEARCH_TOKENS`]; with more tokens left the same search runs as the *deep* search
//! ([`Matcher::deep_way`]), with the larger work bound [`MAX_DEEP_WORK`], where the count, the
//! witness and the descent all showed nothing: a mask that would otherwise be empty, the
//! per-request and per-forced-run questions, `min_tokens_to_finish`. A gap it closes: a value
//! `""` where the count and the cheapest bytes take `0`, since `":"` and `"}` cross lexemes
//! (SmolLM2, o7291: 13 tokens where the count, the witness and the descent say 14; galaxy.json
//! 33 where they say 34). It goes depth first along the ways that leave the fewest bytes, so
//! where one token too many is counted near the end it finds the way in about as many walks as
//! tokens are left; its way (the tokens it committed, then a descent from where the count
//! settled) becomes the witness, so the masks after it follow that way without searching again.
//! Beyond its work a token is refused, as before: the deep search makes more requests fit, it
//! does not make every budgeted mask exact (a mask that is not empty is not searched deeply).
//!
//! Invariants: the search leaves the matcher as it found it (every commit rolled back, the
//! witness restored); a state is recorded as short only after every way on from it was tried;
//! `Search::path` holds, last first, the tokens of the way the latest `true` answer found.

use super::{Backend, Matcher, Run};
use super::{KeyMap, KeySet};
use crate::automaton::cfg_run::{Refused, RowWords};
use crate::automaton::earley::ChartLen;
use crate::vocab::{TokenId, TokenSet};

/// The most tokens the per-request questions ask the search for (each level opens the parse
/// states one token further); a budgeted mask's search goes as far as its budget.
pub(super) const MAX_SEARCH_TOKENS: u32 = 12;

/// The work one mask's search may do, in tokens looked at: each parse state it opens costs a
/// budgeted mask of its own, counted as the vocabulary's size (so a few states on a 128k
/// vocabulary; on a small one, every state the budget reaches).
pub(super) const MAX_SEARCH_WORK: usize = 1 << 19;

/// The work of one deep search (more tokens left than [`MAX_SEARCH_TOKENS`]; see the module
/// docs): 128 walks of a 128k vocabulary, 340 of a 49k one (a state costs a walk per scan).
/// Asked only where a mask would otherwise be empty, once per request, or once per forced run.
pub(super) const MAX_DEEP_WORK: usize = 1 << 24;

/// The most parse states one deep search opens (a state's cost is at least its share).
pub(super) const MAX_DEEP_STATES: usize = 2048;

/// The most times `min_tokens_to_finish` asks the deep search for one token fewer.
pub(super) const MAX_DEEP_STEPS: usize = 8;

/// A parse state whose mask needs no lexer walk of the vocabulary (the cache answers it, or at
/// the last token no token inside a lexeme can finish) counts 1/`UNWALKED_SHARE` of the
/// vocabulary as the search's work (the walks of the lexeme ends' groups, the commits of its
/// ways on), where the search met its lexer states before: the first time, the cache's entry
/// may have been built for it (as costly as a walk, or more: a counted string's content), so it
/// counts whole. Counted so, the work is still the search's own (not what the cache held).
/// Counting a state by the tokens its walk looked at was measured too: inside a UTF-8 character a walk ends soon, and the search then opened more states that cost whole
/// walks (SmolLM2, a count near its bound: 30-50% more mask time in `generate`).
const UNWALKED_SHARE: usize = 32;

/// One mask's search: what it has shown, and how much more it may open.
pub(super) struct Search {
    /// The position the keys are taken from: an ancestor of every state searched.
    root: ChartLen,
    /// Parse states (keyed from `root`) shown unable to finish within the tokens recorded.
    short: KeyMap<u32>,
    /// The work it may still do (at most [`MAX_SEARCH_WORK`], or [`MAX_DEEP_WORK`]).
    pub(super) work: usize,
    /// Deep: a state costs a walk per scan (see [`state_cost`](Search::state_cost)).
    deep: bool,
    /// The lexer states of the parse states it opened
    /// ([`CfgRun::lexer_key`](crate::automaton::cfg_run::CfgRun::lexer_key)).
    lexers: KeySet,
    /// The way the latest `true` answer found, last token first: the tokens committed down to
    /// where the count settled (and the count's first token there, where a mask showed it).
    path: Vec<TokenId>,
    /// The rows since `root`, chained into words for the keys
    /// ([`CfgRun::chained_state_key`](crate::automaton::cfg_run::CfgRun::chained_state_key)).
    rows: RowWords,
    /// Per state being searched, outermost first: its chart's rows and their word.
    chain: Vec<(u32, u32)>,
}

impl Search {
    /// A search from `root` (the current position), deep or not (its work and costs).
    pub(super) fn new(root: ChartLen, deep: bool) -> Search {
        let work = if deep { MAX_DEEP_WORK } else { MAX_SEARCH_WORK };
        Search {
            root,
            short: KeyMap::default(),
            work,
            deep,
            lexers: KeySet::default(),
            path: Vec::new(),
            rows: RowWords::default(),
            chain: Vec::new(),
        }
    }

    /// What opening a parse state with `scans` lexemes alive costs: a walk of the vocabulary;
    /// in the deep search, one per scan (a walk steps every scan's lexer at every trie node:
    /// sixteen counted patterns made each state cost 0.1-0.4 s on SmolLM2, Handwritten/allany22).
    /// In the deep search a state costs at least 1/[`MAX_DEEP_STATES`] of its work: on a small
    /// vocabulary the walks are cheap and a state's commits (its ways on, each closing rows)
    /// are what it costs (llguidance's rfc.lark on the embedded vocabulary: 32k states, ten
    /// seconds to show an empty mask).
    fn state_cost(&self, vocab: usize, scans: usize) -> usize {
        if self.deep {
            vocab.saturating_mul(scans.max(1)).max(MAX_DEEP_WORK / MAX_DEEP_STATES)
        } else {
            vocab
        }
    }
}

/// A way to finish found by the deep search: its first token, and the whole way where a
/// descent spelled its end in tokens (the count settled it, so it exists either way).
pub(super) struct Way {
    pub first: TokenId,
    pub path: Option<Vec<TokenId>>,
}

impl Matcher {
    /// A search from the current position for `n` more tokens, when it can settle them: at
    /// most [`MAX_SEARCH_TOKENS`], a context-free run without distinct-items marks.
    pub(super) fn new_search(&self, n: u32) -> Option<Search> {
        match (&self.run, &self.compiled.backend) {
            (Run::Cfg(c), Backend::Earley(cfg)) if !cfg.has_marks && n <= MAX_SEARCH_TOKENS => {
                Some(Search::new(c.chart_len(), false))
            }
            _ => None,
        }
    }

    /// A search for the refused tokens of one budgeted mask, any number of tokens left (its work
    /// bounds it): a context-free run without distinct-items marks.
    pub(super) fn mask_search(&self) -> Option<Search> {
        match (&self.run, &self.compiled.backend) {
            (Run::Cfg(c), Backend::Earley(cfg)) if !cfg.has_marks => Some(Search::new(c.chart_len(), false)),
            _ => None,
        }
    }

    /// A way to finish within `n` more tokens found by the deep search (any `n`, the work
    /// [`MAX_DEEP_WORK`]), or `None` (none within its work; a regular run, or one with
    /// distinct-items marks; already complete). Where the way is spelled whole it is kept as
    /// the witness from here. The matcher is otherwise left as it was.
    pub(super) fn deep_way(&mut self, n: u32) -> Option<Way> {
        let (Run::Cfg(c), Backend::Earley(cfg)) = (&self.run, &self.compiled.backend) else { return None };
        if cfg.has_marks || self.is_accepting() {
            return None;
        }
        let mut search = Search::new(c.chart_len(), true);
        if !self.search_within(n, &mut search) {
            return None;
        }
        let mut path = search.path;
        path.reverse();
        // The end of the way: a descent from where the count settled (at most its tokens).
        let saved = self.witness.take();
        let start = self.len();
        let committed = path.iter().all(|&t| self.commit(t).is_ok());
        let rest = if !committed {
            None
        } else if self.is_accepting() {
            Some(Vec::new())
        } else {
            self.descent_path()
        };
        self.rollback(self.len() - start).expect("committed here");
        let whole = rest.filter(|r| path.len() + r.len() <= n as usize).map(|r| [path.as_slice(), &r].concat());
        self.witness = match &whole {
            Some(w) if !w.is_empty() => Some((start, w.clone())),
            _ => saved,
        };
        let first = whole.as_ref().and_then(|w| w.first().copied()).or(path.first().copied())?;
        Some(Way { first, path: whole })
    }

    /// Can the output be finished within `n` more tokens from here, by some sequence of
    /// tokens? Exact while the search has work left (`search` was made for at least `n`);
    /// otherwise `true` only where a way was shown. The matcher is left as it was.
    pub(super) fn search_within(&mut self, n: u32, search: &mut Search) -> bool {
        let saved = self.witness.take();
        let found = self.search_from(n, search);
        self.witness = saved;
        found
    }

    fn search_from(&mut self, n: u32, search: &mut Search) -> bool {
        if self.is_accepting() {
            search.path.clear();
            return true;
        }
        let compiled = self.compiled.clone();
        let (Run::Cfg(c), Backend::Earley(cfg)) = (&mut self.run, &compiled.backend) else {
            return false;
        };
        if n == 0 || c.is_ended() {
            return false;
        }
        if c.can_finish_within(cfg, &compiled.env, n) {
            search.path.clear();
            return true;
        }
        let cost = search.state_cost(compiled.env.vocab().len(), c.scans_len());
        if search.work < cost {
            return false;
        }
        // Keyed from the state this one was committed from (the root for the first).
        let (from, chain) = search.chain.last().copied().unwrap_or((search.root.rows(), 0));
        let (key, word) = c.chained_state_key(from, chain, &mut search.rows);
        if search.short.get(&key).is_some_and(|&m| m >= n) {
            return false;
        }
        search.work -= cost;
        search.chain.push((c.chart_len().rows(), word));
        // One level per token of the way: the deep search may go thousands deep (`x{5000}`
        // under a short budget), past a 2 MiB thread stack, so the stack grows onto the heap
        // as it runs low (looked at every few levels, well within the red zone).
        let found = if search.chain.len() % super::STACK_CHECK_EVERY == 0 {
            stacker::maybe_grow(super::STACK_RED_ZONE, super::STACK_GROWTH, || self.search_next(n, search))
        } else {
            self.search_next(n, search)
        };
        search.chain.pop();
        if !found {
            let m = search.short.entry(key).or_insert(n);
            *m = (*m).max(n);
        }
        found
    }

    /// Does some token from here leave a state that finishes within `n - 1` more tokens? A
    /// token the count lets through does; the others are tried one per parse state (and each
    /// named token), those after which the fewest bytes finish first (the way on is usually
    /// among them), until the work runs out.
    fn search_next(&mut self, n: u32, search: &mut Search) -> bool {
        let compiled = self.compiled.clone();
        let env = &compiled.env;
        let named = compiled.named.as_ref();
        let mut mask = TokenSet::new(env.vocab().len());
        let mut refused = Refused::default();
        let (Run::Cfg(c), Backend::Earley(cfg)) = (&mut self.run, &compiled.backend) else {
            return false;
        };
        // At the last token the count is exact (finishing in no more tokens is being complete):
        // a token it refused does not end the output, so only the named tokens are tried.
        let walked = if n > 1 {
            c.fill(cfg, env, &mut mask, n - 1, Some(&mut refused))
        } else {
            c.fill(cfg, env, &mut mask, 0, None)
        };
        // Charged a walk of the vocabulary when opened; a state whose mask needed none keeps
        // only its share, where its lexer states were met before.
        if !walked && !search.lexers.insert(c.lexer_key()) {
            let cost = search.state_cost(env.vocab().len(), c.scans_len());
            search.work += cost - cost / UNWALKED_SHARE;
        }
        if let Some(named) = named {
            named.remove_barred(&mut mask);
        }
        if let Some(t) = mask.iter().next() {
            search.path.clear();
            search.path.push(t);
            return true;
        }
        // The ways on, as the bytes they commit: a token per parse state, and the named tokens.
        let vocab = env.vocab();
        let usable = |t: &TokenId| named.is_none_or(|nm| !nm.is_barred(*t));
        let firsts = refused.grouped.iter().filter_map(|(_, ids)| ids.iter().copied().find(usable));
        let texts = firsts.chain(refused.singles.iter().copied().filter(usable)).map(|t| (vocab.bytes(t), t));
        let mut order: Vec<(u32, &[u8], TokenId)> = Vec::new();
        for (bytes, t) in texts.chain(named.iter().flat_map(|nm| nm.tokens()).map(|(t, b)| (b.as_slice(), *t))) {
            if self.commit_text(bytes, true).is_ok() {
                order.push((self.byte_cost(), bytes, t));
                self.rollback(1).expect("committed just now");
            }
        }
        order.sort_unstable();
        let cost = vocab.len();
        for (_, bytes, t) in order {
            if search.work < cost {
                return false;
            }
            self.commit_text(bytes, true).expect("committed before");
            let found = self.search_from(n - 1, search);
            self.rollback(1).expect("committed just now");
            if found {
                search.path.push(t);
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{Backend, Run};
    use crate::automaton::cfg_run::Refused;
    use crate::automaton::{Compiled, Constraint, VocabEnv};
    use crate::grammar::json_schema::JsonSchemaOptions;
    use crate::vocab::{TokenId, TokenSet, Vocab};

    /// The count's mask with no refusals asked for (`fill` then skips the lexer walk where no
    /// token inside a lexeme can fit) is the mask with them, at every budget; and at budget 0
    /// no token the count refused leaves the output complete (why the search's last token
    /// asks the count alone).
    #[test]
    fn the_counts_mask_without_refusals_is_the_mask_with_them() {
        // The embedded vocabulary and tokens across lexemes, which end the output at budget 0.
        let embedded = Vocab::embedded();
        let mut tokens: Vec<Vec<u8>> =
            (0..embedded.len() as u32).map(|i| embedded.bytes(TokenId(i)).to_vec()).collect();
        tokens.extend(["\"}", "n\"}", "\"}}", "y\"}}", "\"]}", "e\"]}", "\",\""].map(|t| t.as_bytes().to_vec()));
        let eos: Vec<u32> = embedded.eos().iter().map(|t| t.0).collect();
        let v = Arc::new(Vocab::from_byte_tokens(tokens, &eos));
        let env = VocabEnv::new(v.clone());
        let schemas = [
            serde_json::json!({"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 12},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
                "required": ["name", "tags"], "additionalProperties": false}),
            serde_json::json!({"type": "object", "properties": {
                "words": {"type": "string", "pattern": "^(?:\\S+\\s+){0,2}\\S+$"},
                "n": {"type": "integer", "minimum": 3, "maximum": 700}},
                "required": ["words", "n"], "additionalProperties": false}),
            serde_json::json!({"$defs": {"sky": {"type": "object", "properties": {
                "sky": {"enum": ["sunny", "cloudy", "rain"]}, "next": {"$ref": "#/$defs/sky"}},
                "required": ["sky"], "additionalProperties": false}}, "$ref": "#/$defs/sky"}),
        ];
        let texts: [&[&str]; 3] = [
            &[r#"{"name":"Once upon","tags":["a","little"]}"#],
            &[r#"{"words":"the big dog","n":42}"#],
            &[r#"{"sky":"rain","next":{"sky":"cloudy"}}"#],
        ];
        let (mut skipped, mut refused_at_0, mut ended_by_group) = (0, 0, 0);
        for (schema, texts) in schemas.into_iter().zip(texts) {
            let c = Compiled::new(&env, &Constraint::JsonSchema(schema, JsonSchemaOptions::default())).unwrap();
            let Backend::Earley(cfg) = &c.backend else { panic!("context-free") };
            for text in texts {
                let mut m = c.matcher();
                let tokens = v.encode(text.as_bytes()).unwrap();
                for k in 0..=tokens.len() {
                    for budget in 0..6 {
                        let (mut with, mut without) = (TokenSet::new(v.len()), TokenSet::new(v.len()));
                        let mut refused = Refused::default();
                        let Run::Cfg(run) = &mut m.run else { panic!("context-free") };
                        run.fill(cfg, &env, &mut with, budget, Some(&mut refused));
                        let walked = run.fill(cfg, &env, &mut without, budget, None);
                        assert_eq!(with, without, "{text:?} after {k} tokens, budget {budget}");
                        skipped += usize::from(!walked);
                        ended_by_group += usize::from(!walked && budget == 0 && !with.is_empty());
                        if budget == 0 {
                            let listed = refused.grouped.iter().flat_map(|(_, ids)| ids).chain(&refused.singles);
                            for &t in listed.filter(|t| !with.contains(**t)) {
                                if m.commit_text(v.bytes(t), true).is_ok() {
                                    assert!(!m.is_accepting(), "{text:?} after {k} tokens: {t:?} ends it");
                                    m.rollback(1).unwrap();
                                    refused_at_0 += 1;
                                }
                            }
                        }
                    }
                    if let Some(&t) = tokens.get(k) {
                        m.commit(t).unwrap();
                    }
                }
            }
        }
        assert!(skipped > 10 && refused_at_0 > 100, "the fast path and the claim were met: {skipped}, {refused_at_0}");
        assert!(ended_by_group > 0, "a token across lexemes ended the output at budget 0 with no walk");
    }

    /// The searches that nest a level per token or byte of a way (the deep search for the
    /// shortest completion, the witness) finish on a thread with a small stack: `x{5000}` asked
    /// for its fewest tokens and for a mask under a short budget nests thousands deep (it
    /// overflowed a server worker's 2 MiB stack), and its answer is exact (one `x` a token
    /// in this vocabulary, so 5,000).
    #[test]
    fn deep_searches_run_on_a_small_stack() {
        let v = Arc::new(Vocab::embedded());
        let env = VocabEnv::new(v.clone());
        let c =
            Compiled::new(&env, &Constraint::Grammar(crate::grammar::ebnf::parse(r#"root ::= "x"{5000}"#).unwrap()))
                .unwrap();
        let answer = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let mut m = c.matcher();
                let mut mask = TokenSet::new(m.compiled().vocab().len());
                m.fill_mask_within(&mut mask, 10);
                (mask.is_empty(), m.min_tokens_to_finish(), m.witness().map(|w| w.len()))
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert_eq!(answer, (true, Some(5000), Some(5000)));
    }

    /// Inside a string past its `minLength`, a budget far above the bytes that close it takes
    /// the cached mask, with no lexer walk of the vocabulary (the entry is shared by the
    /// count's rows and bounds its tokens by the empty string's rest, 50 bytes and more: the
    /// scan's own row bounds them by a few); and the mask is the reference's at every budget.
    #[test]
    fn a_string_past_its_minimum_length_needs_no_walk_under_a_loose_budget() {
        let v = Arc::new(Vocab::embedded());
        let env = VocabEnv::new(v.clone());
        let schema = serde_json::json!({"type": "object",
            "properties": {"story": {"type": "string", "minLength": 50, "maxLength": 400}},
            "required": ["story"], "additionalProperties": false});
        let c = Compiled::new(&env, &Constraint::JsonSchema(schema, JsonSchemaOptions::default())).unwrap();
        let Backend::Earley(cfg) = &c.backend else { panic!("context-free") };
        let story = "Once upon a time there was a little dog. ".repeat(3);
        let text = format!(r#"{{"story":"{story}"}}"#);
        let tokens = v.encode(text.as_bytes()).unwrap();
        let mut m = c.matcher();
        let (mut written, mut past_min, mut walked) = (0, 0, 0);
        let (mut fast, mut slow) = (TokenSet::new(v.len()), TokenSet::new(v.len()));
        for &t in &tokens {
            for budget in [1, 3, 8, 30, 60] {
                m.fill_mask_within(&mut fast, budget + 1);
                m.reference_mask_within(&mut slow, budget + 1);
                assert_eq!(fast, slow, "{written} bytes written, budget {budget}");
            }
            // Well inside the string, past 50 characters and short of its end.
            if (70..text.len() - 10).contains(&written) {
                let Run::Cfg(run) = &mut m.run else { panic!("context-free") };
                past_min += 1;
                walked += usize::from(run.fill(cfg, &env, &mut fast, 30, None));
            }
            written += v.bytes(t).len();
            m.commit(t).unwrap();
        }
        assert!(m.is_accepting());
        assert!(past_min > 10, "{past_min} steps past the minimum");
        assert_eq!(walked, 0, "walks of the vocabulary past the minimum, budget 30");
    }

    /// Inside a string followed by a long enum value (many bytes, few tokens), a budget loose
    /// in tokens but not in bytes takes the cached mask, with no lexer walk of the vocabulary
    /// (the waits after the string counted in tokens); and the mask is the reference's.
    #[test]
    fn a_wait_short_in_tokens_needs_no_walk_where_its_bytes_bind() {
        let v = Arc::new(Vocab::embedded());
        let env = VocabEnv::new(v.clone());
        let kind = "Once upon a time there was a little girl named Lily who loved to play outside";
        let schema = serde_json::json!({"type": "object",
            "properties": {"note": {"type": "string"}, "kind": {"enum": [kind]}},
            "required": ["note", "kind"], "additionalProperties": false});
        let c = Compiled::new(&env, &Constraint::JsonSchema(schema, JsonSchemaOptions::exact())).unwrap();
        let Backend::Earley(cfg) = &c.backend else { panic!("context-free") };
        let mut m = c.matcher();
        m.commit_bytes(br#"{"note":"Tim"#).unwrap();
        let rest = format!(r#"","kind":"{kind}"}}"#);
        let rest_tokens = v.encode(rest.as_bytes()).unwrap().len() as u32;
        // Loose in tokens (the rest, and a character's escape before it), tight in bytes.
        let budget = rest_tokens + 24;
        assert!(rest.len() as u32 > budget + 24, "bytes bind: {} bytes, budget {budget}", rest.len());
        let Run::Cfg(run) = &mut m.run else { panic!("context-free") };
        let mut mask = TokenSet::new(v.len());
        assert!(!run.fill(cfg, &env, &mut mask, budget, None), "no walk under {budget} tokens");
        assert!(mask.len() > 300, "the string goes on: {} tokens", mask.len());
        let (mut fast, mut slow) = (TokenSet::new(v.len()), TokenSet::new(v.len()));
        for b in [budget, budget - 10, rest_tokens + 2, rest_tokens] {
            m.fill_mask_within(&mut fast, b as usize + 1);
            m.reference_mask_within(&mut slow, b as usize + 1);
            assert_eq!(fast, slow, "budget {b}");
        }
    }

    /// A budgeted mask's search and descents make the same lexer walks again from parse
    /// states that differ only where the lexer does not look, and the vocabulary keeps them
    /// (`WalkCache`): along valid outputs under their tightest budgets, the masks made with the
    /// walks of every earlier step kept are those made with none kept (a fresh vocabulary
    /// environment) and the reference's; and walks were taken from what was kept.
    #[test]
    fn kept_walks_give_the_masks_fresh_walks_do() {
        let v = Arc::new(Vocab::embedded());
        let env = VocabEnv::new(v.clone());
        let schema = serde_json::json!({"type": "object", "properties": {
            "title": {"type": "string"}, "rating": {"type": "number"}, "mood": {"enum": ["happy", "very sad"]}},
            "required": ["title", "rating", "mood"]});
        let compile = |env: &Arc<VocabEnv>| {
            Compiled::new(env, &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::exact())).unwrap()
        };
        let c = compile(&env);
        let mut hits = 0;
        for text in [
            r#"{"title":"The little dog","rating":8.5,"mood":"very sad"}"#,
            r#"{"title":"Lily","x":[1,true],"rating":-12,"mood":"happy"}"#,
        ] {
            let tokens = v.encode(text.as_bytes()).unwrap();
            let mut m = c.matcher();
            let (mut warm, mut cold, mut slow) =
                (TokenSet::new(v.len()), TokenSet::new(v.len()), TokenSet::new(v.len()));
            for (k, &t) in tokens.iter().enumerate() {
                let left = tokens.len() - k;
                let fresh = compile(&VocabEnv::new(v.clone()));
                let mut f = fresh.matcher();
                tokens[..k].iter().for_each(|&t| f.commit(t).unwrap());
                m.fill_mask_within(&mut warm, left);
                f.fill_mask_within(&mut cold, left);
                m.reference_mask_within(&mut slow, left);
                assert_eq!(warm, cold, "{text}: {k} tokens in, {left} left");
                assert_eq!(warm, slow, "{text}: {k} tokens in, {left} left");
                m.commit(t).unwrap();
            }
            assert!(m.is_accepting());
            assert!(env.budgeted_walks().hits() > hits, "{text}: no walk taken from the kept ones");
            hits = env.budgeted_walks().hits();
        }
    }

    /// Under a tight budget after free text, the tokens the count refuses end the text inside
    /// them (at every byte), and were each judged on their own: they are grouped by where they
    /// land ([`Refused`]), singles only where the marker started inside them goes on to their
    /// end; every member of a group finishes in exactly as few tokens as the group's first (the
    /// search, exact on this vocabulary); and the masks are the reference's.
    #[test]
    fn free_text_tokens_are_judged_by_where_they_land() {
        let v = Arc::new(Vocab::embedded());
        let env = VocabEnv::new(v.clone());
        let then = Constraint::JsonSchema(
            serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}},
                "required": ["n"], "additionalProperties": false}),
            JsonSchemaOptions::default(),
        );
        let c = Compiled::new(
            &env,
            &Constraint::AfterReasoning { start: None, end: "</think>".into(), header: None, then: Box::new(then) },
        )
        .unwrap();
        let Backend::Earley(cfg) = &c.backend else { panic!("context-free") };
        let mut m = c.matcher();
        m.commit_text(b"Once upon a time, a dog thought it over", false).unwrap();
        // The fewest tokens that finish after `t` (at most `most`), by the search.
        let finish_after = |m: &mut super::super::Matcher, t: TokenId, most: u32| {
            m.after_text(t, |m| {
                (0..=most).find(|&n| {
                    let Run::Cfg(run) = &m.run else { panic!("context-free") };
                    let mut search = super::Search::new(run.chart_len(), false);
                    m.search_within(n, &mut search)
                })
            })
        };
        let (mut grouped, mut checked) = (0, 0);
        for budget in [2u32, 4, 6, 9] {
            let mut mask = TokenSet::new(v.len());
            let mut refused = Refused::default();
            let Run::Cfg(run) = &mut m.run else { panic!("context-free") };
            run.fill(cfg, &env, &mut mask, budget, Some(&mut refused));
            for &t in &refused.singles {
                assert!(v.bytes(t).contains(&b'<'), "budget {budget}: {:?} is a single", v.bytes(t));
            }
            // The text's lexer states (inside a character or a partial marker), each ended or not.
            assert!(refused.grouped.len() <= 16, "budget {budget}: {} groups", refused.grouped.len());
            for (_, ids) in &refused.grouped {
                let open: Vec<TokenId> = ids.iter().copied().filter(|&t| !mask.contains(t)).collect();
                let Some(&first) = open.first() else { continue };
                let want = finish_after(&mut m, first, budget + 3);
                // Every member of the small groups, a spread of the large ones.
                for &t in open[1..].iter().step_by(open.len() / 40 + 1) {
                    assert_eq!(finish_after(&mut m, t, budget + 3), want, "budget {budget}: {:?}", v.bytes(t));
                    checked += 1;
                }
                grouped += open.len();
            }
            let (mut fast, mut slow) = (TokenSet::new(v.len()), TokenSet::new(v.len()));
            m.fill_mask_within(&mut fast, budget as usize + 1);
            m.reference_mask_within(&mut slow, budget as usize + 1);
            assert_eq!(fast, slow, "budget {budget}");
        }
        assert!(grouped > 1000 && checked > 100, "{grouped} tokens grouped, {checked} checked");
    }

    /// Free text before a marker may end at every byte, and each such end builds the same row
    /// (the text's lexeme and its origin alike): it is built once and reused, so a long
    /// reasoning part grows the chart by a few rows, not one per byte, and tokens of any
    /// length through the text reach the same parse state (one key, one judgement under a
    /// budget). Before, 2,000 bytes of text built 2,000 rows, and the keys after `hello` and
    /// `hello world` differed.
    #[test]
    fn free_text_reuses_its_row_at_every_byte() {
        let v = Arc::new(Vocab::embedded());
        let env = VocabEnv::new(v.clone());
        let then = Constraint::JsonSchema(serde_json::json!({"type": "integer"}), JsonSchemaOptions::default());
        let c = Compiled::new(
            &env,
            &Constraint::AfterReasoning { start: None, end: "</think>".into(), header: None, then: Box::new(then) },
        )
        .unwrap();
        let rows = |m: &super::super::Matcher| match &m.run {
            Run::Cfg(run) => run.chart_len().rows(),
            Run::Dfa(_) => panic!("context-free"),
        };
        let mut m = c.matcher();
        let start = rows(&m);
        for _ in 0..100 {
            m.commit_text(b"Think it over < twice. ", false).unwrap();
        }
        assert!(rows(&m) <= start + 4, "{} rows after 2,300 bytes of text", rows(&m) - start);
        // Tokens of different lengths through the text: one parse state.
        let key_after = |m: &mut super::super::Matcher, text: &[u8]| {
            let Run::Cfg(run) = &m.run else { panic!("context-free") };
            let from = run.chart_len();
            m.commit_text(text, false).unwrap();
            let Run::Cfg(run) = &m.run else { panic!("context-free") };
            let key = run.state_key(from);
            m.rollback(1).unwrap();
            key
        };
        assert_eq!(key_after(&mut m, b"hello"), key_after(&mut m, b"hello world"));
        m.commit_text(b"</think>42", false).unwrap();
        assert!(m.is_accepting());
    }
}
