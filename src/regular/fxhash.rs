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
