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

    /// This set's non-empty words ([`SparseWords`]): for intersecting many dense sets with
    /// this one where it is small.
    pub fn sparse(&self) -> SparseWords {
        SparseWords {
            words: (0..self.words.len()).filter(|&i| self.words[i] != 0).map(|i| (i as u32, self.words[i])).collect(),
        }
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

/// A set of ids as its non-empty words only (index, word), ascending: intersecting it with a
/// [`TokenSet`] costs a word per non-empty word of this one, not per word of the vocabulary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseWords {
    words: Vec<(u32, u32)>,
}

impl SparseWords {
    /// The ids in both this set and `mask`, ascending (ids past `mask`'s width are left out).
    pub fn ids_in(&self, mask: &TokenSet) -> Vec<TokenId> {
        let mut out = Vec::new();
        for &(i, w) in &self.words {
            let Some(&m) = mask.words.get(i as usize) else { break };
            let mut w = w & m;
            while w != 0 {
                out.push(TokenId(i * 32 + w.trailing_zeros()));
                w &= w - 1;
            }
        }
        out
    }

    /// The ids in both this set and `other`.
    pub fn and(&self, other: &TokenSet) -> SparseWords {
        let words = self.words.iter().filter_map(|&(i, w)| {
            let w = w & other.words.get(i as usize).copied().unwrap_or(0);
            (w != 0).then_some((i, w))
        });
        SparseWords { words: words.collect() }
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

    /// The sparse intersection is the dense one, whatever the widths.
    #[test]
    fn sparse_words_intersect_as_sets_do() {
        let set = |width: usize, step: u32| {
            let mut s = TokenSet::new(width);
            (0..width as u32).filter(|i| i % step == 1 || i % 97 == 0).for_each(|i| s.insert(TokenId(i)));
            s
        };
        let (a, b, c) = (set(300, 7), set(300, 3), set(200, 5));
        let dense = |x: &TokenSet, y: &TokenSet| x.iter().filter(|&t| y.contains(t)).collect::<Vec<_>>();
        assert_eq!(a.sparse().ids_in(&b), dense(&a, &b));
        assert_eq!(a.sparse().ids_in(&c), dense(&a, &c));
        assert_eq!(c.sparse().ids_in(&a), dense(&c, &a));
        let abc = a.sparse().and(&b).ids_in(&c);
        assert_eq!(abc, dense(&a, &b).into_iter().filter(|&t| c.contains(t)).collect::<Vec<_>>());
        assert!(!abc.is_empty());
        assert_eq!(TokenSet::new(300).sparse().ids_in(&a), vec![]);
    }
}
