//! The distinct-items filter of a [`CfgRun`]'s masks (see [`distinct`](crate::automaton::distinct)):
//! the tokens that would finish a repeat, and a bounded look-ahead from the tokens near one.

use super::CfgRun;
use crate::automaton::cfg::{Cfg, Reading};
use crate::automaton::distinct::key::Old;
use crate::automaton::distinct::{
    in_string, is_space, opens_two_items, outside_strings, squeeze, Distinct, InString, Place, Repeatable, Repeated,
    Target,
};
use crate::automaton::earley::ChartLen;
use crate::automaton::VocabEnv;
use crate::vocab::{TokenId, TokenKind, TokenSet};

/// Most tokens [`CfgRun::filter_repeats`] looks ahead from, per mask.
const MAX_LOOKAHEADS: usize = 128;

/// Most bytes tried by the look-aheads of one mask, the least share of one of them, and how
/// deep one goes.
const MAX_SEARCH: usize = 1024;
const MIN_SEARCH_ONE: usize = 32;
const MAX_SEARCH_DEPTH: usize = 256;

/// Does `bytes`, after `tail` (the output's last bytes, as many as the longest literal), open
/// an array or object and finish two items of it, or complete one of `literals` and go on?
/// Only such a token can finish a repeat from idle (as the masks' guess reads it).
fn opens_and_goes_on(tail: &[u8], bytes: &[u8], literals: &[std::sync::Arc<str>]) -> bool {
    if opens_two_items(bytes) {
        return true;
    }
    (0..bytes.len().saturating_sub(1)).any(|i| {
        literals.iter().any(|l| {
            let l = l.as_bytes();
            let here = &bytes[..=i];
            if here.len() >= l.len() {
                here.ends_with(l)
            } else {
                l.ends_with(here) && tail.ends_with(&l[..l.len() - here.len()])
            }
        })
    })
}

/// A string that is an item: its text so far (from its opening quote) and the raw forms of
/// its list's earlier items.
type StringItem<'a> = (&'a [u8], &'a [std::sync::Arc<[u8]>]);

/// Inside a string's content (not after a backslash), what `bytes` can finish: `Some(repeats)`
/// where all they can finish is the string, which then equals an earlier item exactly when
/// `repeats` (`item`: the string's text so far, from its opening quote, and the raw forms of
/// its list's earlier items, where the string is an item); `None` where they may finish more
/// or where an escape makes raw bytes differ from the string's value (then the reader judges
/// them; see [`InString`], and `few` there).
fn closes_into(bytes: &[u8], item: Option<StringItem>, few: bool) -> Option<bool> {
    let (q, escaped) = match in_string(bytes, few) {
        InString::Nothing => return Some(false),
        InString::More => return None,
        InString::Closes { at, escaped } => (at, escaped),
    };
    let Some((so_far, raws)) = item else { return Some(false) };
    if raws.is_empty() {
        return Some(false);
    }
    if so_far.contains(&b'\\') || raws.iter().any(|r| r.contains(&b'\\')) {
        return None;
    }
    if escaped {
        return Some(false);
    }
    let n = so_far.len() + q + 1;
    Some(raws.iter().any(|r| r.len() == n && r.starts_with(so_far) && r[so_far.len()..] == bytes[..=q]))
}

/// Where the repeats filter reads from (see
/// [`DistinctTokens::candidates`](crate::automaton::cfg::DistinctTokens::candidates)) and what the
/// lists hold, for the reader `d` after `text` (`json_only`: no marked literals), and the
/// string item it is in where the tokens that close it into an earlier item are found apart
/// (see `closes_into`): in a string's content, without escapes in it or in its list.
///
/// Inside a string's content most tokens finish nothing or only the string, which then repeats
/// exactly when it closes into an earlier item of its list: those are found by spelling the rest
/// of each such item, and the reader reads only the tokens that may finish more. Not with marked
/// literals: the look-ahead from a token that ends a text item or completes a literal needs
/// every such token, repeat or not.
fn reading<'a>(d: &'a Distinct, text: &'a [u8], json_only: bool) -> (Reading, Repeatable, Option<StringItem<'a>>) {
    let held = if json_only { d.repeatable() } else { Repeatable::Any };
    let item = d.string_item().map(|(start, l)| (&text[start as usize..], l.raws()));
    let escaped = item.is_some_and(|(so_far, raws)| so_far.contains(&b'\\') || raws.iter().any(|r| r.contains(&b'\\')));
    if json_only && d.in_string_content() && !escaped {
        (Reading::StringContent { item: item.is_some() }, held, item)
    } else {
        (Reading::At(d.place()), held, None)
    }
}

impl CfgRun {
    /// Takes out of `mask` the tokens that would finish an item equal to an earlier one of its
    /// list, and those after which every way on does (see [`distinct`](crate::automaton::distinct)).
    /// Applied the same way to the fast and the reference mask, after them.
    ///
    /// The second part is a look-ahead: a depth-first search from the token over the bytes that
    /// can come next, for a way to a new item (a tool whose arguments are all fixed, the last
    /// values of a small set, a closing quote that forces the rest of a repeated call). It looks
    /// only from tokens near a repeat (they go on spelling an earlier item of a list in reach,
    /// whitespace aside; they finish an item and go on; or a list of marked literals has items
    /// and few tokens are allowed), at most [`MAX_LOOKAHEADS`] of them and [`MAX_SEARCH`] bytes
    /// tried in all: beyond that a repeat is still refused where it ends, and a way with no
    /// other end is an error.
    pub fn filter_repeats(&mut self, cfg: &Cfg, env: &VocabEnv, mask: &mut TokenSet) {
        self.refused_repeats = false;
        if !cfg.has_marks || self.is_ended() {
            return;
        }
        let vocab = env.vocab();
        let json_only = cfg.after_literals.is_empty();
        let mut removed: Vec<TokenId> = Vec::new();
        // Only tokens that can finish a repeat at all, given where the reader is and what the
        // lists hold (see `reading`), and those that close a string item into an earlier one.
        let (candidates, levels_in_reach) = {
            let d = &self.pos().distinct;
            let (reading, held, item) = reading(d, &self.text, json_only);
            let few = held != Repeatable::Any;
            let mut candidates: Vec<TokenId> = cfg.distinct_tokens(env).candidates(reading, held).ids_in(mask);
            if let Some((so_far, raws)) = item {
                for raw in raws.iter().filter(|r| r.len() > so_far.len() && r.starts_with(so_far)) {
                    let closing =
                        |&&t: &&TokenId| mask.contains(t) && closes_into(vocab.bytes(t), item, few) == Some(true);
                    removed.extend(vocab.trie().with_prefix(&raw[so_far.len()..]).iter().filter(closing));
                }
            }
            if d.is_idle() {
                // Idle, a token matters only if it opens a list and finishes two items of it, or
                // completes a marked literal (with what is written before it) and goes on.
                let longest = cfg.after_literals.iter().map(|l| l.len()).max().unwrap_or(0);
                let tail = &self.text[self.text.len().saturating_sub(longest)..];
                candidates.retain(|&t| opens_and_goes_on(tail, vocab.bytes(t), &cfg.after_literals));
            }
            if json_only && d.in_string_content() && reading == Reading::At(Place::String) {
                // An escape in the item or its list: the reader judges every token that closes it.
                candidates.retain(|&t| in_string(vocab.bytes(t), few) != InString::Nothing);
            }
            (
                candidates,
                d.reach().iter().any(|l| l.looked_ahead_from(cfg.keys_ahead)) || (d.is_idle() && d.has_after_items()),
            )
        };
        removed.iter().for_each(|&t| mask.remove(t));
        if candidates.is_empty() && !levels_in_reach {
            // Nothing to read and no list to look ahead for.
            self.refused_repeats = !removed.is_empty();
            return;
        }
        let d = self.pos().distinct.clone();
        // Settled inside a string (see `Distinct::is_settled_in_string`): the answer is the
        // last one where the containers and the mask are the same (inside one value string,
        // token after token).
        let settled = d.is_settled_in_string() && json_only;
        if settled {
            if let Some(memo) = &self.repeats_memo {
                let (was, given, memo_removed) = &**memo;
                if given.width() == mask.width() && given.words() == mask.words() && was.same_containers(&d) {
                    memo_removed.iter().for_each(|&t| mask.remove(t));
                    removed.extend_from_slice(memo_removed);
                    self.refused_repeats = !removed.is_empty();
                    return;
                }
            }
        }
        let given = settled.then(|| mask.clone());
        let text_ids =
            |m: &TokenSet| -> Vec<TokenId> { m.iter().filter(|&t| vocab.kind(t) == TokenKind::Text).collect() };
        // Refused: a token that finishes a repeat. Looked ahead from, for each list in reach
        // (innermost first) that has items (one without cannot be repeated; a text item's
        // list is in reach even so, as what follows its end may be forced): a token that
        // finishes an item of it and may go on (`},{"`), and one that goes on spelling an
        // earlier item of it. An object's keys only where some key can run out of completions
        // part-way (`Cfg::keys_ahead`): elsewhere a repeat refused where it would end leaves
        // other keys (the look-ahead from every `,"` of every object cost 40x the mask).
        let levels: Vec<_> = d.reach().into_iter().filter(|l| l.looked_ahead_from(cfg.keys_ahead)).collect();
        let mut ahead: Vec<(TokenId, Target)> = Vec::new();
        // A token that holds a whole text item (its opening literal and its end) and goes on:
        // what follows may be forced into a repeat, though no list was in reach before it.
        let text_lists = cfg.after_closes.iter().any(Option::is_some);
        let all = Target::After(None);
        for t in candidates {
            match self.read_guess(cfg, vocab.bytes(t)) {
                Err(Repeated) => {
                    mask.remove(t);
                    removed.push(t);
                }
                Ok(after) => {
                    ahead.extend(
                        levels
                            .iter()
                            .filter(|l| after.finished(l.target) != d.finished(l.target))
                            .map(|l| (t, l.target)),
                    );
                    if text_lists && d.is_idle() && after.finished(all) != d.finished(all) {
                        ahead.push((t, all));
                    }
                }
            }
        }
        if d.is_idle() && d.has_after_items() && mask.len() <= MAX_LOOKAHEADS {
            ahead.extend(text_ids(mask).into_iter().map(|t| (t, Target::After(None))));
        }
        for l in &levels {
            // From where the item started, or (none started yet) from the start, also after a
            // comma; whitespace outside strings is passed over on both sides.
            let so_far = squeeze(l.start.map_or(&[][..], |s| &self.text[s as usize..]));
            for raw in l.list.raws().iter().filter(|r| r.starts_with(&so_far)) {
                let spelled = [&b","[..], raw].concat();
                let outside = outside_strings(&spelled);
                let step = |k: usize, b: u8| match spelled.get(k) {
                    Some(&c) if c == b => Some(k + 1),
                    _ if outside[k] && is_space(b) => Some(k),
                    _ => None,
                };
                let mut walk_from = |from: usize| {
                    vocab.trie().walk(from, step, |_, ids| {
                        ahead.extend(ids.iter().filter(|&&t| mask.contains(t)).map(|&t| (t, l.target)))
                    })
                };
                match l.start {
                    Some(_) => walk_from(1 + so_far.len()),
                    // The next item: after a comma, or without one (the first item, or the
                    // comma already written).
                    None => {
                        walk_from(0);
                        walk_from(1);
                    }
                }
            }
        }
        ahead.sort_unstable();
        ahead.dedup();
        ahead.truncate(MAX_LOOKAHEADS);
        // The search is shared out: a few tokens look far (a whole repeated tool call), many
        // look near (the last values of a small set).
        let memo = self.memo.take();
        let share = (MAX_SEARCH / ahead.len().max(1)).max(MIN_SEARCH_ONE);
        let mut budget = MAX_SEARCH;
        for &(t, target) in &ahead {
            if !mask.contains(t) {
                continue;
            }
            let mut one = budget.min(share);
            let given = one;
            let dead = self.dead_end_after(cfg, vocab.bytes(t), target, &mut one);
            budget -= given - one;
            if dead {
                mask.remove(t);
                removed.push(t);
            }
        }
        self.memo = memo;
        self.refused_repeats = !removed.is_empty();
        if let Some(given) = given {
            self.repeats_memo = Some(Box::new((d, given, removed)));
        }
    }

    /// May one completion be judged for every token that reaches the same parse state from
    /// here (the witness after a refused token, see `Matcher::fill`)? Yes without marks; with
    /// them, only outside every list the reader watches and with no marked literals: then the
    /// reader is the same after such tokens (its exact marks come from the parse) and its
    /// guess reads only the bytes after them (a literal's guess looks back into the text).
    pub fn shares_witness(&self, cfg: &Cfg) -> bool {
        !cfg.has_marks || (cfg.after_literals.is_empty() && self.pos().distinct.is_idle())
    }

    /// Words that two positions reached from the position where the chart had size `from`, by
    /// any paths, share only when every way on from one is a way on from the other: whether
    /// the output ended and the parse state as
    /// [`Chart::frontier_key`](crate::automaton::earley::Chart::frontier_key) writes it. `None`
    /// where the reader of distinct items matters (inside a list it watches, or in the middle of
    /// a value: its state then holds offsets into the output; marked literals look back into it).
    pub fn join_key(&self, cfg: &Cfg, from: ChartLen) -> Option<Vec<u32>> {
        let p = self.pos();
        if cfg.has_marks && !(cfg.after_literals.is_empty() && p.distinct.is_at_rest()) {
            return None;
        }
        let mut key = vec![u32::from(p.ended)];
        self.chart.frontier_key(from.rows(), &p.scans, p.boundary, &mut key);
        Some(key)
    }

    /// The items the reader holds now, to key the positions after single commits from here
    /// by ([`witness_key`](Self::witness_key)); kept while those keys are compared.
    pub fn old_items(&self) -> Old {
        Old::of(&self.pos().distinct)
    }

    /// Words that two positions reached by single commits from the position where the chart
    /// had size `from` (and the reader held `old`) share only when every way on from one is a
    /// way on from the other, accepted and refused alike: the parse state
    /// ([`state_key`](Self::state_key)) and, where the witness is not shared, the reader's
    /// key (see [`distinct::key`](crate::automaton::distinct::key)) and the output's last
    /// bytes, as many as the longest marked literal (its guess looks back into them).
    /// The parse state's words come first: `key[..state]`, with `state` returned beside it.
    pub fn witness_key(&self, cfg: &Cfg, from: ChartLen, old: &Old) -> (Vec<u32>, usize) {
        let mut key = self.state_key(from);
        let state = key.len();
        if !self.shares_witness(cfg) {
            key.push(u32::MAX);
            self.pos().distinct.key(&self.text, old, &mut key);
            let longest = cfg.after_literals.iter().map(|l| l.len()).max().unwrap_or(0);
            key.extend(self.text[self.text.len().saturating_sub(longest)..].iter().map(|&b| u32::from(b)));
        }
        (key, state)
    }

    /// Words that two positions reached from the position where the chart had size `from`
    /// share where the same bytes finish both, as far as keeping items distinct goes: the
    /// parse state, the reader's [`unordered_key`](crate::automaton::distinct::Distinct::unordered_key)
    /// and the output's last bytes (as many as the longest marked literal). `None` where the
    /// reader is inside a value (between items, orders of the same items meet again; inside
    /// one, the key would cost more than it saves).
    pub fn between_items_key(&self, cfg: &Cfg, from: ChartLen) -> Option<Vec<u32>> {
        let d = &self.pos().distinct;
        if !matches!(d.place(), Place::Between | Place::Idle) {
            return None;
        }
        let mut key = self.state_key(from);
        key.push(u32::MAX);
        d.unordered_key(&self.text, &mut key);
        let longest = cfg.after_literals.iter().map(|l| l.len()).max().unwrap_or(0);
        key.extend(self.text[self.text.len().saturating_sub(longest)..].iter().map(|&b| u32::from(b)));
        Some(key)
    }

    /// Did the last mask take out tokens for repeating an earlier item (see
    /// [`filter_repeats`](Self::filter_repeats))?
    pub fn refused_repeats(&self) -> bool {
        self.refused_repeats
    }

    /// After `bytes`, does every way on run into a repeat before `target`'s list finishes
    /// another item (or the output may end)? A depth-first search over the bytes that can come
    /// next (whitespace only where nothing else can: it never makes two JSON values differ),
    /// `budget` bytes tried at most: out of budget it answers no (unsure: not refused). Leaves
    /// the position as it was.
    fn dead_end_after(&mut self, cfg: &Cfg, bytes: &[u8], target: Target, budget: &mut usize) -> bool {
        let depth = self.positions.len();
        let dead = matches!(self.commit_or_why(cfg, bytes, true), Ok(Ok(()))) && {
            let before = self.pos().distinct.finished(target);
            !self.avoids_repeat(cfg, target, before, budget, 0)
        };
        self.rollback(self.positions.len() - depth);
        dead
    }

    /// Can the output go on from here to a new item of `target`'s list (it had `before`) or
    /// to an end, without a repeat? `true` when unsure.
    fn avoids_repeat(
        &mut self,
        cfg: &Cfg,
        target: Target,
        before: Option<usize>,
        budget: &mut usize,
        depth: usize,
    ) -> bool {
        let now = self.pos().distinct.finished(target);
        if self.is_accepting() || before.is_none() || now != before || *budget == 0 || depth >= MAX_SEARCH_DEPTH {
            return true;
        }
        // Bytes that end things first: a way out is usually found at once.
        let (mut next, rest): (Vec<u8>, Vec<u8>) = self.next_bytes(cfg).partition(|b| b"\"}],".contains(b));
        next.sort_by_key(|b| b"\"}],".iter().position(|x| x == b));
        next.extend(rest);
        let solid: Vec<u8> = next.iter().copied().filter(|&b| !is_space(b)).collect();
        for b in if solid.is_empty() { next } else { solid } {
            if *budget == 0 {
                return true;
            }
            *budget -= 1;
            if let Ok(Ok(())) = self.commit_or_why(cfg, &[b], true) {
                let ok = self.avoids_repeat(cfg, target, before, budget, depth + 1);
                self.rollback(1);
                if ok {
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::{closes_into, opens_and_goes_on, reading};
    use crate::automaton::cfg::DistinctTokens;
    use crate::automaton::distinct::{read_marked, Distinct, MarkAt, Marks, Repeatable, Repeated};
    use crate::vocab::{TokenSet, Vocab};

    /// The reader after `p`, every `{` in it a marked object and every `[` a marked array.
    fn reader_after(p: &str) -> Distinct {
        let marks: Vec<(u32, MarkAt)> = (p.bytes().enumerate())
            .filter_map(|(i, b)| match b {
                b'{' => Some((i as u32, MarkAt::Object)),
                b'[' => Some((i as u32, MarkAt::Array)),
                _ => None,
            })
            .collect();
        read_marked(p, &marks).unwrap_or_else(|_| panic!("{p} repeats"))
    }

    /// The prefilter inside a string answers as the reader does wherever it answers: a
    /// token it lets pass finishes no repeat, and one it calls a repeat is one.
    #[test]
    fn closing_a_string_is_judged_as_the_reader_judges_it() {
        let prefixes = [r#"{"ab":1,"a":2,""#, r#"{"ab":1,"a"#, r#"["a","b\"c",""#, r#"{"x":"ab"#, r#"{"ab":{"q":""#];
        let tokens: [&[u8]; 17] = [
            b"b\"",
            b"\"",
            b"b\":",
            b"b\": 1",
            b"\",",
            b"\"]",
            b"\"}",
            b"b",
            b"b\"c\"",
            b"\\\"",
            b"\":[1,1",
            b"c\" ",
            b"\"\n",
            b"b\\\"\"",
            b"\\\"\"",
            b"\\u0062\"",
            b"\\n\":",
        ];
        for p in prefixes {
            let d = reader_after(p);
            let pb = p.as_bytes();
            assert!(d.in_string_content(), "{p}");
            let few = d.repeatable() != Repeatable::Any;
            for t in tokens {
                let item = d.string_item().map(|(start, l)| (&pb[start as usize..], l.raws()));
                let Some(fast) = closes_into(t, item, few) else { continue };
                let text = [pb, t].concat();
                let slow = d.clone().read(&text, pb.len(), Marks::Guess(&[])) == Err(Repeated);
                assert_eq!(fast, slow, "{p} + {}", String::from_utf8_lossy(t));
            }
        }
    }

    /// Every token up to three bytes over JSON's punctuation, a few letters and digits,
    /// whitespace and escapes, and two or three pieces of JSON run together.
    fn dense_vocab() -> Vocab {
        let alphabet = b"\",:[]{}ab10elnu/ \\";
        let mut toks: Vec<Vec<u8>> = alphabet.iter().map(|&b| vec![b]).collect();
        for len in 2..=3 {
            let longer: Vec<Vec<u8>> = (toks.iter().filter(|t| t.len() == len - 1))
                .flat_map(|t| alphabet.iter().map(move |&b| [t.as_slice(), &[b]].concat()))
                .collect();
            toks.extend(longer);
        }
        let pieces = [
            "\"", "\"a\"", "\"b\"", ",", ":", "1", "0e", "{}", "[]", "}", "]", "{", "[", " ", "null", "\\\"", "\\u0061",
        ];
        for a in pieces {
            for b in pieces {
                toks.push(format!("{a}{b}").into_bytes());
                for c in pieces {
                    toks.push(format!("{a}{b}{c}").into_bytes());
                }
            }
        }
        for t in ["[1,1]", "[1,1,", "{\"a\":1,\"a\"", "[0,0e", "[\"a\",\"a\"]", "[{},{}", "[[],[]"] {
            toks.push(t.as_bytes().to_vec());
        }
        toks.sort();
        toks.dedup();
        toks.push(b"</s>".to_vec());
        let eos = toks.len() as u32 - 1;
        Vocab::from_byte_tokens(toks, &[eos])
    }

    /// The filter reads only a mask's tokens among `DistinctTokens::candidates` (and those
    /// `closes_into` calls repeats, in a string item): every token that JSON allows next and
    /// that the reader, reading it whole, finds to finish a repeat is among them, wherever the
    /// reader is and whatever its lists hold.
    #[test]
    fn every_token_that_finishes_a_repeat_is_a_candidate() {
        use crate::automaton::{Compiled, Constraint, VocabEnv};
        use crate::grammar::json_schema::JsonSchemaOptions;
        let vocab = std::sync::Arc::new(dense_vocab());
        let sets = DistinctTokens::build(&vocab, &[], &[]);
        // Any JSON value, keys free to repeat: which tokens JSON allows next.
        let env = VocabEnv::new(vocab.clone());
        let json =
            Compiled::new(&env, &Constraint::JsonSchema(serde_json::json!({}), JsonSchemaOptions::exact())).unwrap();
        let mut all = TokenSet::new(vocab.len());
        all.fill();
        let prefixes = [
            // Nothing watched.
            "",
            // No list has items.
            "[",
            "[1",
            "[0",
            "[\"x",
            "[{",
            "[{\"",
            "[[",
            "[t",
            "[nul",
            "[\"a\\\"",
            // Only objects' keys.
            r#"{"a":1,"b":"x"#,
            r#"{"a":1,"b":"#,
            r#"{"a":1,"b":1"#,
            r#"{"a":1,"b":2,"#,
            r#"{"a":1,"#,
            r#"{"a":1,""#,
            r#"{"ab":1,"a"#,
            r#"{"a":1,"b"#,
            r#"{"a":1,"b":["#,
            r#"{"a":1,"b":["x"#,
            r#"{"a":{"b":1},"c":{""#,
            r#"{"a":{"b":1},"c":{"b":"#,
            r#"{"a\"":1,""#,
            r#"{"a":1,"b\"#,
            r#"{"a":1,"b":nul"#,
            r#"{"a":1,"b":0"#,
            r#"{"a":1,"b":[{"#,
            r#"{"a":1,"b":[{"c":"#,
            r#"{"a":1,"b": "#,
            // Arrays' items.
            "[1,",
            "[1,2",
            "[\"a\",\"",
            "[\"a\",\"b",
            "[{\"a\":1},{\"a\":",
            "[[1],[",
            "[[1],\"x",
            "[\"a\\\"\",\"",
            "[1,{\"b\":\"",
            "[0,0",
            "[null,",
            "[{},{",
            "[[],[1],",
            "[[\"a\"],[\"a",
            "[[\"a\"],[\"",
            "[{\"a\":\"x\"},{\"a\":\"x",
        ];
        let mut repeats = 0;
        for p in prefixes {
            let d = reader_after(p);
            let mut m = json.matcher();
            if !p.is_empty() {
                m.commit_bytes(p.as_bytes()).unwrap_or_else(|e| panic!("`{p}`: {e}"));
            }
            let (at, held, item) = reading(&d, p.as_bytes(), true);
            let few = held != Repeatable::Any;
            let candidates = sets.candidates(at, held).ids_in(&all);
            for t in (0..vocab.len() as u32).map(crate::vocab::TokenId).filter(|&t| !vocab.is_eos(t)) {
                let bytes = vocab.bytes(t);
                let text = [p.as_bytes(), bytes].concat();
                if !m.allows(t) || d.clone().read(&text, p.len(), Marks::Guess(&[])) != Err(Repeated) {
                    continue;
                }
                repeats += 1;
                let found = (candidates.binary_search(&t).is_ok()
                    && (!d.is_idle() || opens_and_goes_on(&[], bytes, &[])))
                    || closes_into(bytes, item, few) == Some(true) && item.is_some();
                assert!(
                    found,
                    "after `{p}` ({at:?}, {held:?}), `{}` finishes a repeat",
                    String::from_utf8_lossy(bytes)
                );
            }
        }
        assert!(repeats > 300, "only {repeats} repeats among the tokens");
    }
}
