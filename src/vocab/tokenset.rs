//! `TokenSet`: a fixed-width bitmask over token ids.
//!
//! The layout is the one a GPU kernel takes: `u32` words, bit `i % 32` of word `i / 32` is
//! token `i`. The width is the model's logits width, which may be larger than the tokenizer's
//! vocabulary; ids past the vocabulary are simply never set by the matcher.
//!
//! Invariant: bits at positions `>= width` in the last word are always zero.

use super::TokenId;

#[derive(Clone, PartialEq, Eq)]
pub struct TokenSet {
    words: Vec<u32>,
    width: usize,
}

impl TokenSet {
    /// An empty set over ids `0..width`.
    pub fn new(width: usize) -> TokenSet {
        TokenSet { words: vec![0; width.div_ceil(32)], width }
    }

    /// The number of ids this set ranges over (the logits width).
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    /// Sets every id in `0..width`.
    pub fn fill(&mut self) {
        self.words.iter_mut().for_each(|w| *w = u32::MAX);
        let tail = self.width % 32;
        if tail != 0 {
            *self.words.last_mut().unwrap() = (1u32 << tail) - 1;
        }
    }

    #[inline]
    pub fn insert(&mut self, id: TokenId) {
        let i = id.0 as usize;
        debug_assert!(i < self.width, "token {i} outside set width {}", self.width);
        self.words[i / 32] |= 1 << (i % 32);
    }

    #[inline]
    pub fn remove(&mut self, id: TokenId) {
        let i = id.0 as usize;
        if i < self.width {
            self.words[i / 32] &= !(1 << (i % 32));
        }
    }

    #[inline]
    pub fn contains(&self, id: TokenId) -> bool {
        let i = id.0 as usize;
        i < self.width && self.words[i / 32] & (1 << (i % 32)) != 0
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Keeps only the ids also in `other` (same width).
    pub fn intersect(&mut self, other: &TokenSet) {
        debug_assert_eq!(self.width, other.width);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// Removes every id of `other` (same width).
    pub fn subtract(&mut self, other: &TokenSet) {
        debug_assert_eq!(self.width, other.width);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !*b;
        }
    }

    /// Adds every id of `other` (same width).
    pub fn union(&mut self, other: &TokenSet) {
        debug_assert_eq!(self.width, other.width);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    /// Becomes a copy of `other` (same width), reusing this set's storage.
    pub fn copy_from(&mut self, other: &TokenSet) {
        assert_eq!(self.width, other.width, "copy between sets of different widths");
        self.words.copy_from_slice(&other.words);
    }

    /// Adds the ids that are below this set's width (a mask may be narrower than the
    /// vocabulary; ids past it stay unset).
    #[inline]
    pub fn insert_clipped(&mut self, ids: &[TokenId]) {
        for &id in ids {
            if (id.0 as usize) < self.width {
                self.insert(id);
            }
        }
    }

    /// Adds every id of `other` that is below this set's width (the widths may differ).
    pub fn union_clipped(&mut self, other: &TokenSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
        let tail = self.width % 32;
        if tail != 0 && other.words.len() >= self.words.len() {
            *self.words.last_mut().unwrap() &= (1u32 << tail) - 1;
        }
    }

    /// The ids in this set and in both `a` and `b` (when given), ascending (the widths may
    /// differ: ids past the narrowest are left out). A word at a time, for sparse results.
    pub fn ids_in_all(&self, a: &TokenSet, b: Option<&TokenSet>) -> Vec<TokenId> {
        let mut out = Vec::new();
        let n = self.words.len().min(a.words.len()).min(b.map_or(usize::MAX, |b| b.words.len()));
        let (x, y) = (&self.words[..n], &a.words[..n]);
        let z = b.map(|b| &b.words[..n]);
        for i in 0..n {
            let mut w = x[i] & y[i];
            if let Some(z) = z {
                w &= z[i];
            }
            while w != 0 {
                out.push(TokenId(i as u32 * 32 + w.trailing_zeros()));
                w &= w - 1;
            }
        }
        out
    }

    /// The ids in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(TokenId(wi as u32 * 32 + b))
            })
        })
    }

    /// Sets `logits[i] = -inf` for every id not in the set (ids past the set's width too).
    pub fn apply_to_logits(&self, logits: &mut [f32]) {
        for (i, l) in logits.iter_mut().enumerate() {
            if !self.contains(TokenId(i as u32)) {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u32> = self.iter().take(16).map(|t| t.0).collect();
        write!(
            f,
            "TokenSet(width {}, {} set: {:?}{})",
            self.width,
            self.len(),
            ids,
            if self.len() > 16 { " ..." } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_contains_iter() {
        let mut s = TokenSet::new(70);
        for i in [0u32, 31, 32, 69] {
            s.insert(TokenId(i));
        }
        assert!(s.contains(TokenId(31)) && !s.contains(TokenId(30)) && !s.contains(TokenId(1000)));
        assert_eq!(s.iter().map(|t| t.0).collect::<Vec<_>>(), vec![0, 31, 32, 69]);
        assert_eq!(s.len(), 4);
        s.fill();
        assert_eq!(s.len(), 70);
        let mut logits = vec![1.0f32; 72];
        s.remove(TokenId(3));
        s.apply_to_logits(&mut logits);
        assert_eq!(logits[3], f32::NEG_INFINITY);
        assert_eq!(logits[70], f32::NEG_INFINITY);
        assert_eq!(logits[69], 1.0);
    }
}
