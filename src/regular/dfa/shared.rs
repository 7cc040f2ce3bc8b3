//! The process-wide cache of lexeme DFAs ([`Dfa::shared`]): a lexeme that many schemas use
//! (a JSON string, a number, `"name":` with its whitespace) is determinized once per process.
//! Keyed by the lexeme's text and the limits it was built under; bounded by
//! [`SHARED_DFA_BYTES`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::{Dfa, DfaLimits};
use crate::error::Result;
use crate::regular::Lexeme;

/// Most bytes of tables the process-wide cache of [`Dfa::shared`] holds.
pub const SHARED_DFA_BYTES: usize = 64 << 20;

/// The largest table the cache keeps (1/16 of it).
const MAX_SHARED_TABLE: usize = SHARED_DFA_BYTES / 16;

type SharedKey = (String, usize, usize, usize);

/// The cache's entries, least recently used first out: past its budget, the oldest entries
/// go until a quarter of the budget is free (one sort per quarter of new tables, not one per
/// insert). Emptying it whole instead made every lexeme of the next schemas a miss at once.
struct Shared {
    map: HashMap<SharedKey, Entry>,
    bytes: usize,
    budget: usize,
    /// Ticks once per lookup: an entry's `used` is the tick of its last hit or insert.
    tick: u64,
}

struct Entry {
    dfa: Arc<Dfa>,
    bytes: usize,
    used: u64,
}

impl Shared {
    fn new(budget: usize) -> Shared {
        Shared { map: HashMap::new(), bytes: 0, budget, tick: 0 }
    }

    fn get(&mut self, key: &SharedKey) -> Option<Arc<Dfa>> {
        self.tick += 1;
        let e = self.map.get_mut(key)?;
        e.used = self.tick;
        Some(e.dfa.clone())
    }

    /// Keeps `dfa` (of `bytes`) under `key`, the least recently used entries out first where
    /// it would not fit.
    fn insert(&mut self, key: SharedKey, dfa: Arc<Dfa>, bytes: usize) {
        if self.bytes + bytes > self.budget {
            // The newest use that goes (ticks are distinct): the oldest entries, oldest first,
            // until the rest fit in three quarters of the budget.
            let mut by_age: Vec<(u64, usize)> = self.map.values().map(|e| (e.used, e.bytes)).collect();
            by_age.sort_unstable();
            let target = (self.budget - self.budget / 4).saturating_sub(bytes);
            let mut left = self.bytes;
            let mut cutoff = None;
            for (used, b) in by_age {
                if left <= target {
                    break;
                }
                (left, cutoff) = (left - b, Some(used));
            }
            if let Some(cutoff) = cutoff {
                self.map.retain(|_, e| e.used > cutoff);
                self.bytes = left;
            }
        }
        self.tick += 1;
        let old = self.map.insert(key, Entry { dfa, bytes, used: self.tick });
        self.bytes = self.bytes + bytes - old.map_or(0, |e| e.bytes);
    }
}

static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();

impl Dfa {
    /// The DFA of a boolean combination of regexes: each regex built as above, then
    /// intersections and complements as products of our own tables ([`Dfa::product`]).
    /// Goes through the process-wide [`shared`](Dfa::shared) cache (a copy of the cached table).
    pub fn from_lexeme(lexeme: &Lexeme, limits: DfaLimits) -> Result<Dfa> {
        Ok((*Dfa::shared(lexeme, limits)?).clone())
    }

    /// [`from_lexeme`](Dfa::from_lexeme), shared: built DFAs are kept process-wide, keyed by
    /// the lexeme's text ([`Lexeme::key`], which names its language) and the limits, so a
    /// lexeme that many schemas share (a JSON string, a number, `"name":` with its whitespace)
    /// is determinized once per process, not once per compile. Determinization was most of
    /// compile time. Failures are not kept (a limit error is computed again).
    ///
    /// Bounded: past [`SHARED_DFA_BYTES`] of tables the least recently used go (entries still
    /// in use stay alive in their `Arc`s); a table above 1/16 of that is not kept.
    pub fn shared(lexeme: &Lexeme, limits: DfaLimits) -> Result<Arc<Dfa>> {
        Dfa::cached(lexeme.key(), limits, || Dfa::build_lexeme(lexeme, limits))
    }

    /// Empties the process-wide cache of [`shared`](Dfa::shared): DFAs built from now on are
    /// new (new ids, so nothing cached per DFA id applies to them). For measurements.
    pub(crate) fn clear_shared() {
        if let Some(cache) = SHARED.get() {
            *cache.lock().unwrap_or_else(|e| e.into_inner()) = Shared::new(SHARED_DFA_BYTES);
        }
    }

    /// [`shared`](Dfa::shared) under a key the caller has made, with the lexeme made (and its
    /// table built) only on a miss. The key is any regex text (`regex-syntax` notation, default
    /// flags) of the lexeme's language, not necessarily [`Lexeme::key`]: equal keys must name
    /// equal languages, which any faithful text of a language does; two texts of one language
    /// only cost a second table. (The lowering prints its runs' texts from the grammar, so that
    /// a run already built needs no regex tree at all.)
    pub fn shared_by(key: String, limits: DfaLimits, lexeme: impl FnOnce() -> Result<Lexeme>) -> Result<Arc<Dfa>> {
        Dfa::cached(key, limits, || Dfa::build_lexeme(&lexeme()?, limits))
    }

    /// The cache itself: the table under `key` and `limits`, or `build`'s, kept.
    fn cached(key: String, limits: DfaLimits, build: impl FnOnce() -> Result<Dfa>) -> Result<Arc<Dfa>> {
        let key = (key, limits.nfa_bytes, limits.dfa_bytes, limits.states);
        let cache = SHARED.get_or_init(|| Mutex::new(Shared::new(SHARED_DFA_BYTES)));
        if let Some(d) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(d);
        }
        // Built outside the lock: another thread may build the same DFA meanwhile (same value).
        let dfa = Arc::new(build()?);
        let bytes = dfa.heap_bytes() + key.0.len() + 64;
        // Very large tables are rare and particular to one schema: kept, they would flush the
        // common lexemes out. (Common formats with a length are large: an email of at most 254
        // characters is 16,000 states, 2 MB, 10-20 ms to build, in many schemas.)
        if bytes <= MAX_SHARED_TABLE {
            cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, dfa.clone(), bytes);
        }
        Ok(dfa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> SharedKey {
        (format!("k{i}"), 0, 0, 0)
    }

    /// Past its budget the cache drops its least recently used entries (a hit counts as a
    /// use) until a quarter of the budget is free, and never holds more than the budget.
    #[test]
    fn the_least_recently_used_tables_go_first() {
        let dfa = Arc::new(Dfa::from_strings(vec![b"x".to_vec()], DfaLimits::default()).unwrap());
        let mut c = Shared::new(100);
        for i in 0..10 {
            c.insert(key(i), dfa.clone(), 10);
        }
        assert_eq!((c.map.len(), c.bytes), (10, 100));
        // Entries 0 and 1 used again: the oldest are now 2, 3, ...
        assert!(c.get(&key(0)).is_some() && c.get(&key(1)).is_some());
        c.insert(key(10), dfa.clone(), 10);
        // Down to at most 75 with the new entry in: 2, 3, 4 and 5 went.
        assert_eq!(c.bytes, 70);
        for i in [0, 1, 6, 7, 8, 9, 10] {
            assert!(c.get(&key(i)).is_some(), "entry {i} kept");
        }
        for i in [2, 3, 4, 5] {
            assert!(c.get(&key(i)).is_none(), "entry {i} dropped");
        }
        // The same key again replaces its entry's size, not adds to it.
        c.insert(key(10), dfa.clone(), 20);
        assert_eq!(c.bytes, 80);
        let total: usize = c.map.values().map(|e| e.bytes).sum();
        assert_eq!(total, c.bytes);
    }
}
