//! Budgeted masks with many tokens left (13 to 30) against the [`search`](super::search)
//! without its work bound: on a small vocabulary whose tokens cross JSON's lexemes (`":`,
//! `","`, random pieces), every token the mask holds must finish within the budget and every
//! token that does must be in the mask (exact), and the fast mask must equal the reference.
//! With the mask's search stopped at 12 tokens left (before session 42) 42 of 10,604 checks
//! were refused that fit.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::search::Search;
use super::{Matcher, Run};
use crate::automaton::{Compiled, Constraint, VocabEnv};
use crate::grammar::json_schema::JsonSchemaOptions;
use crate::vocab::{TokenId, TokenSet, Vocab};

impl Matcher {
    /// Can the output be finished within `n` more tokens? The search with no bound on its
    /// work: exact.
    fn finishes_within_unbounded(&mut self, n: u32) -> bool {
        let Run::Cfg(c) = &self.run else { unreachable!("a context-free run") };
        let mut search = Search::new(c.chart_len(), false);
        search.work = usize::MAX;
        self.search_within(n, &mut search)
    }
}

#[test]
fn budgeted_masks_with_many_tokens_left_are_exact() {
    let alphabet: &[u8] = b"{}[]\",:ab01";
    let schemas = [
        serde_json::json!({"type": "object", "properties": {
            "ab": {"type": "array", "items": {"type": "string"}, "minItems": 3}, "b": {"type": "integer"}},
            "required": ["ab", "b"], "additionalProperties": false}),
        serde_json::json!({"type": "array", "minItems": 4, "items": {"type": "object",
            "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}}),
        serde_json::json!({"$defs": {"t": {"type": "object", "properties": {
            "a": {"type": "array", "items": {"$ref": "#/$defs/t"}}, "b": {"type": "string", "minLength": 3}},
            "required": ["a", "b"], "additionalProperties": false}}, "$ref": "#/$defs/t"}),
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (mut checks, mut refused_that_fit) = (0, Vec::new());
    for round in 0..400 {
        let mut extra: Vec<Vec<u8>> = (0..rng.random_range(4..14))
            .map(|_| (0..rng.random_range(2..5)).map(|_| alphabet[rng.random_range(0..alphabet.len())]).collect())
            .collect();
        extra.extend([&b"\":"[..], b"\",\"", b"\"]", b"\"}"].map(<[u8]>::to_vec));
        let v = Arc::new(Vocab::from_alphabet(alphabet, &extra));
        let env = VocabEnv::new(v.clone());
        let schema = schemas[round % schemas.len()].clone();
        let c = Compiled::new(&env, &Constraint::JsonSchema(schema, JsonSchemaOptions::default())).unwrap();
        let (mut mask, mut slow) = (TokenSet::new(v.len()), TokenSet::new(v.len()));
        let mut m = c.matcher();
        // A budget that binds from the start: the fewest tokens, and up to three more.
        let total = m.min_tokens_to_finish().unwrap() as usize + rng.random_range(0..4);
        let mut walked = Vec::new();
        for used in 0..total {
            let left = total - used;
            m.fill_mask_within(&mut mask, left);
            if left > 12 {
                m.reference_mask_within(&mut slow, left);
                assert_eq!(mask, slow, "round {round}: fast == reference with {left} left");
                for id in (0..v.len() as u32).map(TokenId) {
                    if v.is_eos(id) || !m.allows(id) {
                        continue;
                    }
                    m.commit(id).unwrap();
                    let fits = m.finishes_within_unbounded(left as u32 - 1);
                    m.rollback(1).unwrap();
                    let at = String::from_utf8_lossy(&v.decode(&walked)).into_owned();
                    let token = String::from_utf8_lossy(v.bytes(id)).into_owned();
                    assert!(fits || !mask.contains(id), "round {round}: {token:?} after {at:?} let through");
                    if fits && !mask.contains(id) {
                        refused_that_fit.push(format!("round {round}: {token:?} after {at:?}, {left} left"));
                    }
                    checks += 1;
                }
            }
            let ids: Vec<TokenId> = mask.iter().filter(|&t| !v.is_eos(t)).collect();
            if ids.is_empty() {
                assert!(m.is_accepting(), "round {round}: an empty mask");
                break;
            }
            let t = ids[rng.random_range(0..ids.len())];
            m.commit(t).unwrap();
            walked.push(t);
        }
    }
    assert!(checks > 5_000, "{checks} checks");
    assert!(
        refused_that_fit.is_empty(),
        "{} of {checks} refused that fit:\n{}",
        refused_that_fit.len(),
        refused_that_fit.join("\n")
    );
}
