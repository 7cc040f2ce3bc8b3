//! The low-level API with no model at all: `cargo run --example mask_loop`.
//!
//! Bring your own model (or engine): compile a constraint once for your vocabulary, then per
//! sequence ask the `Matcher` for the allowed-token mask, apply it to your logits, pick a
//! token, and commit it. Here the "model" is a fixed scoring function over a hand-made
//! vocabulary; the output is a JSON value of a Rust type all the same.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::{TokenId, TokenSet, Vocab};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Point {
    #[schemars(range(min = -99, max = 99))]
    x: i32,
    #[schemars(range(min = -99, max = 99))]
    y: i32,
    label: Option<String>,
}

/// A stand-in for a model's forward pass: a score for every token, from the step number.
fn logits(step: usize, width: usize, out: &mut Vec<f32>) {
    out.clear();
    out.extend((0..width).map(|t| (((t * 7919 + step * 104_729) % 1000) as f32) / 100.0));
}

fn main() -> anyhow::Result<()> {
    // A vocabulary: every printable ASCII byte, a few longer tokens, and EOS last.
    let mut tokens: Vec<Vec<u8>> = (b' '..=b'~').map(|b| vec![b]).collect();
    for t in ["\"x\"", "\"y\"", "\"label\"", "null", ": ", ", ", "12", "-4"] {
        tokens.push(t.as_bytes().to_vec());
    }
    tokens.push(b"</s>".to_vec());
    let eos = TokenId(tokens.len() as u32 - 1);
    let vocab = Arc::new(Vocab::from_byte_tokens(tokens, &[eos.0]));

    // Compile once (shareable across threads), then one matcher per sequence.
    let env = VocabEnv::new(vocab.clone());
    let compiled = Compiled::new(&env, &Constraint::json_schema_for::<Point>())?;
    for run in 0..3 {
        let mut matcher = compiled.matcher();
        let mut mask = TokenSet::new(vocab.len());
        let mut scores = Vec::new();
        let mut out: Vec<u8> = Vec::new();
        for step in 0.. {
            // Ask for the mask first; it never lets the output go wrong.
            matcher.fill_mask_within(&mut mask, 64 - step);
            logits(step + run * 13, vocab.len(), &mut scores);
            mask.apply_to_logits(&mut scores); // disallowed tokens become -inf
            let best = (0..scores.len()).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).expect("a token");
            let token = TokenId(best as u32);
            assert!(scores[best].is_finite(), "the mask always allows something until the end");
            if vocab.eos().contains(&token) {
                break; // EOS is allowed exactly when the output is complete
            }
            matcher.commit(token)?; // errors if the token was not allowed
            out.extend_from_slice(vocab.bytes(token));
        }
        assert!(matcher.is_accepting());
        let text = String::from_utf8(out)?;
        let p: Point = serde_json::from_str(&text)?;
        println!("run {run}: {text}  ->  {p:?}");
        assert!((-99..=99).contains(&p.x) && (-99..=99).contains(&p.y));
        if let Some(label) = &p.label {
            println!("  label: {label}");
        }
    }
    // Undo is exact: roll back and the same mask comes back.
    let mut m = compiled.matcher();
    let (mut before, mut after) = (TokenSet::new(vocab.len()), TokenSet::new(vocab.len()));
    m.fill_mask(&mut before);
    m.commit_bytes(b"{\"x\"")?;
    m.rollback(m.len())?;
    m.fill_mask(&mut after);
    assert_eq!(before.iter().collect::<Vec<_>>(), after.iter().collect::<Vec<_>>());
    println!("mask_loop: ok");
    Ok(())
}
