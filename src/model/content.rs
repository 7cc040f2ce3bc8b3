//! Message content is text: the spellings of special tokens (`<|im_end|>`, `</s>`,
//! `<|eot_id|>`) in what a caller passes into a chat become text tokens, never control tokens.
//! Control tokens come only from the chat template's own markup.
//!
//! A chat template renders caller strings (message content, tool results, tool calls'
//! arguments, tool descriptions) and its own markup into one text; encoded as it is, a
//! `<|im_end|>\n<|im_start|>system` in a user message would be real turn markers (a prompt
//! injection). So before rendering, every caller string has each special-token spelling
//! replaced by a *placeholder*: one private-use character per special token, from a block no
//! caller string uses ([`Escapes`]). The template renders the placeholders as it would any
//! text (they survive `trim`, `strip()` and splitting), so every special-token spelling left
//! in the rendered text ([`ChatPrompt`]) is the template's. Encoding
//! ([`PromptFormat::encode_prompt`](super::PromptFormat::encode_prompt)) lets the tokenizer
//! find those, and encodes each stretch between them with the placeholders turned back into
//! their spellings and special-token matching off, so they become ordinary text tokens.
//!
//! When no caller string holds a special-token spelling (nearly always) nothing is replaced,
//! and the prompt is encoded exactly as before, in one call. Between the template's control
//! tokens, the tokenizer works on each stretch alone anyway (it splits at special tokens
//! before anything else), so encoding stretch by stretch gives the same tokens. (Except with
//! a `Metaspace` pre-tokenizer whose `prepend_scheme` is `first`, which adds `▁` only at the
//! start of the whole text: there a stretch after a control token may gain a `▁`, and only in
//! a prompt whose content held a special-token spelling.)
//!
//! Trusted callers that put control tokens in content on purpose opt in with
//! [`ContentTokens::Control`]: the rendered text is then encoded as the tokenizer parses it.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// How special-token spellings in a chat's caller-given strings are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentTokens {
    /// As text: only the chat template's markup yields control tokens (the default).
    #[default]
    Text,
    /// As the tokenizer parses them: `<|im_end|>` in a message is the control token. For
    /// trusted callers only: content from anyone else can then forge turns.
    Control,
}

/// A rendered chat: its text, with placeholders where caller strings spelled special tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatPrompt {
    marked: String,
    escapes: Option<Escapes>,
}

impl ChatPrompt {
    /// A prompt whose special-token spellings are all control tokens.
    pub fn plain(text: String) -> ChatPrompt {
        ChatPrompt { marked: text, escapes: None }
    }

    /// The text the model is given (placeholders turned back into their spellings).
    pub fn text(&self) -> String {
        match &self.escapes {
            None => self.marked.clone(),
            Some(e) => e.restore(&self.marked),
        }
    }

    /// The rendered text with placeholders, and what they stand for (`None`: no placeholders).
    pub(crate) fn parts(&self) -> (&str, Option<&Escapes>) {
        (&self.marked, self.escapes.as_ref())
    }
}

/// A tokenizer's special tokens: their spellings and ids.
#[derive(Debug, Clone, Default)]
pub(crate) struct Specials {
    /// Spellings, longest first (so the first that matches at a position is the longest).
    spellings: Vec<String>,
    ids: HashSet<u32>,
    /// Whether some spelling starts with this byte.
    first: Vec<bool>,
}

/// The private-use blocks placeholders may come from (planes 15 and 16).
const BLOCKS: [(u32, u32); 2] = [(0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)];

impl Specials {
    pub fn new(tokenizer: &tokenizers::Tokenizer) -> Specials {
        let mut found: Vec<(u32, String)> = tokenizer
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, t)| t.special && !t.content.is_empty())
            .map(|(id, t)| (id, t.content))
            .collect();
        found.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.1.cmp(&b.1)));
        let mut first = vec![false; 256];
        for (_, s) in &found {
            first[s.as_bytes()[0] as usize] = true;
        }
        Specials {
            ids: found.iter().map(|(id, _)| *id).collect(),
            spellings: found.into_iter().map(|(_, s)| s).collect(),
            first,
        }
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.ids.contains(&id)
    }

    /// The index of the longest spelling that starts at byte `i` of `s`.
    fn at(&self, s: &str, i: usize) -> Option<usize> {
        let rest = &s.as_bytes()[i..];
        if !self.first[rest[0] as usize] {
            return None;
        }
        self.spellings.iter().position(|sp| rest.starts_with(sp.as_bytes()))
    }

    fn occurs_in(&self, s: &str) -> bool {
        (0..s.len()).any(|i| self.at(s, i).is_some())
    }

    /// Whether any string (or key) in `values` holds a special-token spelling.
    pub fn occur_in(&self, values: &[&Value]) -> bool {
        !self.spellings.is_empty() && values.iter().any(|v| any_string(v, &mut |s| self.occurs_in(s)))
    }

    /// Placeholders for these specials from a block that no string in `values` uses.
    pub fn escapes_for(&self, values: &[&Value]) -> Result<Escapes> {
        let n = self.spellings.len() as u32;
        for (lo, hi) in BLOCKS {
            if lo + n > hi {
                continue;
            }
            let inside = |c: char| (lo..lo + n).contains(&(c as u32));
            if !values.iter().any(|v| any_string(v, &mut |s| s.chars().any(inside))) {
                return Ok(Escapes { base: lo, spellings: self.spellings.clone() });
            }
        }
        Err(Error::param(
            "message content spells special tokens and uses every private-use block the encoder \
             needs to keep them text",
        ))
    }

    /// `s` with every special-token spelling replaced by its placeholder.
    fn escape(&self, s: &str, e: &Escapes) -> String {
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            match self.at(s, i) {
                Some(k) => {
                    out.push(e.placeholder(k));
                    i += self.spellings[k].len();
                }
                None => {
                    let c = s[i..].chars().next().expect("i is on a character boundary");
                    out.push(c);
                    i += c.len_utf8();
                }
            }
        }
        out
    }

    /// `v` with every string and key escaped.
    pub fn escape_value(&self, v: &Value, e: &Escapes) -> Value {
        match v {
            Value::String(s) => Value::String(self.escape(s, e)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.escape_value(x, e)).collect()),
            Value::Object(o) => {
                let m: Map<String, Value> =
                    o.iter().map(|(k, x)| (self.escape(k, e), self.escape_value(x, e))).collect();
                Value::Object(m)
            }
            other => other.clone(),
        }
    }
}

/// Whether `f` holds for some string or key in `v`.
fn any_string(v: &Value, f: &mut dyn FnMut(&str) -> bool) -> bool {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().any(|x| any_string(x, f)),
        Value::Object(o) => o.iter().any(|(k, x)| f(k) || any_string(x, f)),
        _ => false,
    }
}

/// The placeholders of one prompt: special token `k` (in [`Specials`]' order) is the
/// character `base + k`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Escapes {
    base: u32,
    spellings: Vec<String>,
}

impl Escapes {
    fn placeholder(&self, k: usize) -> char {
        char::from_u32(self.base + k as u32).expect("a private-use character")
    }

    /// `s` with every placeholder turned back into its spelling.
    pub fn restore(&self, s: &str) -> String {
        let n = self.spellings.len() as u32;
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match (c as u32).checked_sub(self.base) {
                Some(k) if k < n => out.push_str(&self.spellings[k as usize]),
                _ => out.push(c),
            }
        }
        out
    }

    /// Builds a rendered prompt's [`ChatPrompt`].
    pub fn prompt(self, marked: String) -> ChatPrompt {
        ChatPrompt { marked, escapes: Some(self) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specials(list: &[&str]) -> Specials {
        let mut spellings: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        spellings.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        let mut first = vec![false; 256];
        for s in &spellings {
            first[s.as_bytes()[0] as usize] = true;
        }
        Specials { spellings, ids: HashSet::new(), first }
    }

    #[test]
    fn escape_and_restore_round_trip() {
        let sp = specials(&["</s>", "<|im_end|>", "<|im"]);
        let v = serde_json::json!({"role": "user", "content": "a</s>b<|im_end|>é<|im", "k</s>": [1, "x"]});
        assert!(sp.occur_in(&[&v]));
        assert!(!sp.occur_in(&[&serde_json::json!({"content": "plain <s> text"})]));
        let e = sp.escapes_for(&[&v]).unwrap();
        let escaped = sp.escape_value(&v, &e);
        let text = escaped.to_string();
        assert!(!text.contains("</s>") && !text.contains("<|im"), "{text}");
        assert_eq!(e.restore(&text), v.to_string());
    }

    #[test]
    fn placeholders_avoid_characters_the_content_uses() {
        let sp = specials(&["</s>"]);
        let v = serde_json::json!(["</s>\u{F0000}"]);
        let e = sp.escapes_for(&[&v]).unwrap();
        assert_eq!(e.base, 0x100000);
        assert_eq!(e.restore(&sp.escape_value(&v, &e).to_string()), v.to_string());
        let both = serde_json::json!(["</s>\u{F0000}\u{100000}"]);
        assert!(sp.escapes_for(&[&both]).is_err());
    }
}
