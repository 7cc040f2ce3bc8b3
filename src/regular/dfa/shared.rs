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

#[derive(Default)]
struct Shared {
    map: HashMap<SharedKey, Arc<Dfa>>,
    bytes: usize,
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
    /// Bounded: past [`SHARED_DFA_BYTES`] of tables the cache is emptied and starts again
    /// (entries still in use stay alive in their `Arc`s); a table above 1/16 of that is not kept.
    pub fn shared(lexeme: &Lexeme, limits: DfaLimits) -> Result<Arc<Dfa>> {
        Dfa::cached(lexeme.key(), limits, || Dfa::build_lexeme(lexeme, limits))
    }

    /// Empties the process-wide cache of [`shared`](Dfa::shared): DFAs built from now on are
    /// new (new ids, so nothing cached per DFA id applies to them). For measurements.
    pub(crate) fn clear_shared() {
        if let Some(cache) = SHARED.get() {
            *cache.lock().unwrap_or_else(|e| e.into_inner()) = Shared::default();
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
        let cache = SHARED.get_or_init(Default::default);
        if let Some(d) = cache.lock().unwrap_or_else(|e| e.into_inner()).map.get(&key) {
            return Ok(d.clone());
        }
        // Built outside the lock: another thread may build the same DFA meanwhile (same value).
        let dfa = Arc::new(build()?);
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = dfa.heap_bytes() + key.0.len() + 64;
        if c.bytes + bytes > SHARED_DFA_BYTES {
            c.map.clear();
            c.bytes = 0;
        }
        // Very large tables are rare and particular to one schema: kept, they would flush the
        // common lexemes out. (Common formats with a length are large: an email of at most 254
        // characters is 16,000 states, 2 MB, 10-20 ms to build, in many schemas.)
        if bytes <= MAX_SHARED_TABLE {
            c.bytes += bytes;
            c.map.insert(key, dfa.clone());
        }
        Ok(dfa)
    }
}
