//! A fast, non-cryptographic hasher for small integer keys (the multiply-rotate hash rustc
//! uses): DFA state tuples and parser items are hashed millions of times per compile, where
//! SipHash's per-call cost showed in profiles. The keys are numbers the engine assigns (states,
//! items), never text from a request.

use std::hash::{BuildHasherDefault, Hasher};

/// See the module docs.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

/// A `HashMap`/`HashSet` hasher builder for [`FxHasher`].
pub(crate) type FxBuild = BuildHasherDefault<FxHasher>;

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// [`FxHasher`] for long keys (the parse-state keys of `Vec<u32>` the matcher's searches
/// remember, hundreds of words each): eight bytes a step, where `FxHasher` takes one.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxWordsHasher(FxHasher);

/// A `HashMap`/`HashSet` hasher builder for [`FxWordsHasher`].
pub(crate) type FxWordsBuild = BuildHasherDefault<FxWordsHasher>;

impl Hasher for FxWordsHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0.write_u64(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.0.write_u64(u64::from_le_bytes(last));
        }
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0.write_u64(n as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0.finish()
    }
}
