//! [`AllowedMask`]: the first step of the chain, `-inf` for every token the constraint forbids.

use crate::vocab::TokenSet;

/// Sets the logit of every token not in the set to `-inf`, ids past the set's width included
/// (the model's logits may be wider than the vocabulary the matcher knows).
///
/// It runs first, before penalties and truncation, so every later step only ever sees allowed
/// tokens and cannot truncate the last of them away.
#[derive(Debug, Clone, Copy)]
pub struct AllowedMask<'a> {
    allowed: &'a TokenSet,
}

impl<'a> AllowedMask<'a> {
    pub fn new(allowed: &'a TokenSet) -> AllowedMask<'a> {
        AllowedMask { allowed }
    }

    /// Masks `logits` in place, a 32-bit word of the set at a time.
    pub fn apply(&self, logits: &mut [f32]) {
        let words = self.allowed.words();
        for (wi, chunk) in logits.chunks_mut(32).enumerate() {
            // Past the set's last word nothing is allowed. Bits past the set's width are zero
            // (a `TokenSet` invariant), so the last word masks the ids past the width as well.
            let w = words.get(wi).copied().unwrap_or(0);
            match w {
                u32::MAX => {}
                0 => chunk.fill(f32::NEG_INFINITY),
                _ => {
                    for (b, l) in chunk.iter_mut().enumerate() {
                        if w & (1 << b) == 0 {
                            *l = f32::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenId;

    #[test]
    fn matches_tokenset_reference() {
        // Widths that end mid-word, on a word, and logits wider and narrower than the set.
        for (width, n_logits) in [(70, 100), (64, 64), (64, 96), (100, 40), (1, 33)] {
            let mut set = TokenSet::new(width);
            for i in (0..width as u32).filter(|i| i % 3 == 0 || (32..64).contains(i)) {
                set.insert(TokenId(i));
            }
            let logits: Vec<f32> = (0..n_logits).map(|i| i as f32 * 0.5 - 3.0).collect();
            let mut fast = logits.clone();
            AllowedMask::new(&set).apply(&mut fast);
            let mut reference = logits.clone();
            set.apply_to_logits(&mut reference);
            assert_eq!(fast, reference, "width {width}, {n_logits} logits");
            for (i, l) in fast.iter().enumerate() {
                let allowed = i < width && (i % 3 == 0 || (32..64).contains(&i));
                assert_eq!(l.is_finite(), allowed, "token {i}");
            }
        }
    }
}
