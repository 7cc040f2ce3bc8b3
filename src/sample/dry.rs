//! [`Dry`] ("don't repeat yourself"): a penalty on the tokens that would extend a sequence the
//! context already holds, as llama.cpp and text-generation-webui define it.
//!
//! At each step, for every earlier place where the context's last `n` tokens occurred before,
//! the token that followed them there would now repeat `n + 1` tokens; when `n` reaches
//! `allowed_length`, that token's logit drops by `multiplier · base^(n − allowed_length)`
//! (the longest repeat per token counts). Sequence breakers (by default a newline, `:`, `"` and
//! `*`) end a repeat: the repeated tokens never include a token whose text holds a breaker, so
//! JSON keys and markdown lists may recur, and a breaker token is never penalized.
//!
//! How the lengths are found: the context (the last `last_n` tokens, all of them by default)
//! reversed, `s[0]` the last token; the Z-array of `s` gives at each `i` the length of the
//! longest common prefix of `s` and `s[i..]`, which is how far the tokens before position
//! `len − 1 − i` repeat the context's end; the token after that position, `s[i − 1]`, is the one
//! penalized. Linear in the context per step.
//!
//! A breaker is matched inside one token's text: a token is a breaker when its text contains one
//! of the breaker strings (a breaker string split across tokens is not seen). Without a
//! vocabulary ([`Dry::set_breakers`] not called) nothing is a breaker.
//!
//! Invariants: only finite logits change (masked tokens stay `-inf`); the penalty's exponent is
//! capped at [`MAX_EXPONENT`] so it stays finite.

use crate::error::{Error, Result};
use crate::vocab::{TokenId, TokenKind, Vocab};

/// The default sequence breakers (llama.cpp's and text-generation-webui's).
pub const DEFAULT_BREAKERS: &[&str] = &["\n", ":", "\"", "*"];

/// The largest exponent of `base` applied (a repeat longer than `allowed_length + MAX_EXPONENT`
/// is penalized as that long): keeps the penalty finite.
pub const MAX_EXPONENT: usize = 40;

/// The DRY penalty with its parameters (see the module doc).
#[derive(Debug, Clone)]
pub struct Dry {
    multiplier: f32,
    base: f32,
    allowed_length: usize,
    last_n: Option<usize>,
    breakers: Vec<String>,
    /// Per token id: is its text a sequence breaker (empty: none is).
    is_breaker: Vec<bool>,
}

impl Dry {
    /// `multiplier > 0`, `base > 1`, `allowed_length >= 1`, `last_n` the context it looks at
    /// (`None`: all of it); every breaker non-empty.
    pub fn new(
        multiplier: f32,
        base: f32,
        allowed_length: usize,
        last_n: Option<usize>,
        breakers: &[String],
    ) -> Result<Dry> {
        check(multiplier, base, allowed_length, breakers)?;
        Ok(Dry { multiplier, base, allowed_length, last_n, breakers: breakers.to_vec(), is_breaker: Vec::new() })
    }

    /// Marks the tokens of `vocab` whose text contains a breaker string (special tokens too:
    /// an end-of-turn marker ends a repeat).
    pub fn set_breakers(&mut self, vocab: &Vocab) {
        let found = |bytes: &[u8]| self.breakers.iter().any(|b| contains(bytes, b.as_bytes()));
        self.is_breaker = (0..vocab.len() as u32)
            .map(TokenId)
            .map(|t| vocab.kind(t) != TokenKind::Unused && found(vocab.bytes(t)))
            .collect();
    }

    fn breaks(&self, t: TokenId) -> bool {
        self.is_breaker.get(t.0 as usize).copied().unwrap_or(false)
    }

    /// Lowers the logits of the tokens that would extend a repeat of the end of `history`.
    pub fn apply(&self, logits: &mut [f32], history: &[TokenId]) {
        let start = self.last_n.map_or(0, |n| history.len().saturating_sub(n));
        let context = &history[start..];
        // The repeat may not reach back over a breaker: the context's tail without one.
        let tail = context.iter().rev().take_while(|&&t| !self.breaks(t)).count();
        if tail < self.allowed_length {
            return;
        }
        let s: Vec<TokenId> = context.iter().rev().copied().collect();
        let z = z_array(&s);
        let mut longest: Vec<(TokenId, usize)> = Vec::new();
        for i in 1..s.len() {
            let n = z[i].min(tail);
            let next = s[i - 1];
            if n < self.allowed_length || self.breaks(next) {
                continue;
            }
            match longest.iter_mut().find(|(t, _)| *t == next) {
                Some(e) => e.1 = e.1.max(n),
                None => longest.push((next, n)),
            }
        }
        for (t, n) in longest {
            let Some(l) = logits.get_mut(t.0 as usize) else { continue };
            if l.is_finite() {
                let exp = (n - self.allowed_length).min(MAX_EXPONENT) as i32;
                *l -= self.multiplier * self.base.powi(exp);
            }
        }
    }
}

/// Checks DRY's parameters, naming the one out of range.
pub(crate) fn check(multiplier: f32, base: f32, allowed_length: usize, breakers: &[String]) -> Result<()> {
    if !(multiplier.is_finite() && multiplier >= 0.0) {
        return Err(Error::param(format!("dry_multiplier must be a finite number >= 0, got {multiplier}")));
    }
    if !(base.is_finite() && base > 1.0) {
        return Err(Error::param(format!("dry_base must be a finite number > 1, got {base}")));
    }
    if allowed_length == 0 {
        return Err(Error::param("dry_allowed_length must be at least 1"));
    }
    if breakers.iter().any(|b| b.is_empty()) {
        return Err(Error::param("dry_sequence_breakers must not hold an empty string"));
    }
    Ok(())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// `z[i]`: the length of the longest common prefix of `s` and `s[i..]` (`z[0] = s.len()`).
fn z_array(s: &[TokenId]) -> Vec<usize> {
    let n = s.len();
    let mut z = vec![0; n];
    if n == 0 {
        return z;
    }
    z[0] = n;
    let (mut l, mut r) = (0, 0);
    for i in 1..n {
        if i < r {
            z[i] = (r - i).min(z[i - l]);
        }
        while i + z[i] < n && s[z[i]] == s[i + z[i]] {
            z[i] += 1;
        }
        if i + z[i] > r {
            l = i;
            r = i + z[i];
        }
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u32]) -> Vec<TokenId> {
        v.iter().map(|&i| TokenId(i)).collect()
    }

    fn dry(allowed: usize) -> Dry {
        Dry::new(1.0, 2.0, allowed, None, &[]).unwrap()
    }

    #[test]
    fn z_array_matches_the_definition() {
        let s = ids(&[1, 2, 1, 2, 1, 3, 1, 2]);
        let z = z_array(&s);
        for i in 0..s.len() {
            let lcp = s.iter().zip(&s[i..]).take_while(|(a, b)| a == b).count();
            assert_eq!(z[i], lcp, "at {i}");
        }
    }

    /// `1 2 3 4 … 1 2 3`: the context ends with `1 2 3`, which was followed by `4`: `4` would
    /// repeat four tokens, a repeat of 3 ≥ allowed 2, so `4` loses `1 · 2^(3−2) = 2`.
    #[test]
    fn the_token_that_continues_a_repeat_is_penalized() {
        let mut logits = vec![0.0f32; 8];
        dry(2).apply(&mut logits, &ids(&[1, 2, 3, 4, 5, 1, 2, 3]));
        assert_eq!(logits, vec![0.0, 0.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0]);
    }

    /// Below the allowed length nothing changes; the longest repeat per token counts.
    #[test]
    fn short_repeats_pass_and_the_longest_counts() {
        let mut logits = vec![0.0f32; 8];
        dry(4).apply(&mut logits, &ids(&[1, 2, 3, 4, 5, 1, 2, 3]));
        assert!(logits.iter().all(|&l| l == 0.0), "a repeat of 3 < 4 is allowed");
        // `7 2 6 … 1 2 6 … 1 2`: after `1 2` came 6 (repeat 2) and after `2` came 6 and 5.
        let mut logits = vec![0.0f32; 8];
        dry(1).apply(&mut logits, &ids(&[7, 2, 5, 1, 2, 6, 1, 2]));
        assert_eq!(logits[6], -2.0, "`1 2` then 6: repeat 2, 2^(2-1)");
        assert_eq!(logits[5], -1.0, "`2` then 5: repeat 1, 2^0");
    }

    /// A breaker in the context's tail cuts the repeat; a breaker token is never penalized;
    /// masked logits stay masked.
    #[test]
    fn breakers_cut_repeats_and_masked_tokens_stay() {
        let v = Vocab::from_byte_tokens(vec![b"a".to_vec(), b"b".to_vec(), b":".to_vec(), b"c".to_vec()], &[]);
        let mut d = Dry::new(1.0, 2.0, 2, None, &[":".to_string()]).unwrap();
        d.set_breakers(&v);
        // a b c … a b → c would repeat `a b c`: penalized.
        let mut logits = vec![0.0f32; 4];
        d.apply(&mut logits, &ids(&[0, 1, 3, 0, 1]));
        assert_eq!(logits[3], -1.0);
        // a : b … a : b: the tail after the last `:` is one token, below 2: nothing.
        let mut logits = vec![0.0f32; 4];
        d.apply(&mut logits, &ids(&[0, 2, 1, 3, 0, 2, 1]));
        assert!(logits.iter().all(|&l| l == 0.0));
        // a b : … a b → `:` would repeat, but it is a breaker.
        let mut logits = vec![0.0f32, 0.0, 0.0, f32::NEG_INFINITY];
        d.apply(&mut logits, &ids(&[0, 1, 2, 0, 1]));
        assert_eq!(logits[..3], [0.0, 0.0, 0.0]);
        assert_eq!(logits[3], f32::NEG_INFINITY);
    }

    /// `last_n` limits the context; a very long repeat gets a finite penalty.
    #[test]
    fn window_and_cap() {
        let mut logits = vec![0.0f32; 8];
        Dry::new(1.0, 2.0, 2, Some(3), &[]).unwrap().apply(&mut logits, &ids(&[1, 2, 3, 4, 5, 1, 2, 3]));
        assert!(logits.iter().all(|&l| l == 0.0), "the earlier `1 2 3` is outside the window");
        let long: Vec<u32> = (0..400).map(|i| i % 2).collect();
        let mut logits = vec![0.0f32; 2];
        Dry::new(1.0, 1.75, 2, None, &[]).unwrap().apply(&mut logits, &ids(&long));
        assert!(logits[0].is_finite() && logits[0] < -1e6, "{logits:?}");
        assert_eq!(logits[1], 0.0, "only `0` follows a `1` in the context");
    }

    #[test]
    fn parameters_are_checked_by_name() {
        let e = |r: Result<Dry>| r.unwrap_err().to_string();
        assert!(e(Dry::new(-1.0, 1.75, 2, None, &[])).contains("dry_multiplier"));
        assert!(e(Dry::new(0.8, 1.0, 2, None, &[])).contains("dry_base"));
        assert!(e(Dry::new(0.8, 1.75, 0, None, &[])).contains("dry_allowed_length"));
        assert!(e(Dry::new(0.8, 1.75, 2, None, &[String::new()])).contains("dry_sequence_breakers"));
    }
}
