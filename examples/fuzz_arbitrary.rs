//! Structure-aware fuzzing of a small parser with the `arbitrary` entry (feature `arbitrary`).
//!
//! `cargo run --profile ci --features arbitrary --example fuzz_arbitrary`
//!
//! A cargo-fuzz target would be
//! ```text
//! fuzz_target!(|input: Valid<KeyValues>| { assert!(parse(&input.text).is_some()) });
//! ```
//! Here the fuzzer is stood in for by 2,000 seeded random byte buffers (so it runs in CI with
//! no cargo-fuzz): each buffer becomes a string in the grammar's language through
//! `Valid<KeyValues>`, and the parser must accept it. The parser under test reads a
//! `key = value` config format (sections, quoted strings with escapes, numbers, booleans).

use std::collections::HashSet;

use arbitrary::Unstructured;
use rand::{Rng, SeedableRng};
use strictly::automaton::Constraint;
use strictly::fuzz::unstructured::{Spec, Valid};
use strictly::grammar::ebnf;

const GRAMMAR: &str = r##"
root    ::= line*
line    ::= (section | pair | comment)? "\n"
section ::= "[" name "]"
pair    ::= name " "? "=" " "? value
comment ::= "#" [^\n]*
name    ::= [a-z_] [a-z0-9_]*
value   ::= number | "true" | "false" | string
number  ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)?
string  ::= "\"" (char | "\\" ["\\nt])* "\""
char    ::= [^"\\\n]
"##;

struct KeyValues;
impl Spec for KeyValues {
    fn constraint() -> Constraint {
        Constraint::Grammar(ebnf::parse(GRAMMAR).expect("the example grammar parses"))
    }
}

#[derive(Debug, PartialEq)]
enum Value {
    Num(f64),
    Bool(bool),
    Str(String),
}

/// The parser under test: (section, key, value) triples, or `None` with bad input.
fn parse(text: &str) -> Option<Vec<(String, String, Value)>> {
    let mut out = Vec::new();
    let mut section = String::new();
    let ident = |s: &str| {
        !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !s.as_bytes()[0].is_ascii_digit()
    };
    for line in text.split_terminator('\n') {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            ident(name).then_some(())?;
            section = name.to_string();
            continue;
        }
        let (key, raw) = line.split_once('=')?;
        let (key, raw) = (key.strip_suffix(' ').unwrap_or(key), raw.strip_prefix(' ').unwrap_or(raw));
        ident(key).then_some(())?;
        let value = match raw {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            s if s.starts_with('"') => {
                let inner = s.strip_prefix('"')?.strip_suffix('"')?;
                let mut v = String::new();
                let mut chars = inner.chars();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => v.push(match chars.next()? {
                            'n' => '\n',
                            't' => '\t',
                            c @ ('"' | '\\') => c,
                            _ => return None,
                        }),
                        '"' => return None,
                        c => v.push(c),
                    }
                }
                Value::Str(v)
            }
            s => Value::Num(s.parse().ok()?),
        };
        out.push((section.clone(), key.to_string(), value));
    }
    Some(out)
}

fn main() -> anyhow::Result<()> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let (mut distinct, mut pairs) = (HashSet::new(), 0usize);
    for i in 0..2000 {
        let len = rng.random_range(0..256);
        let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let input: Valid<KeyValues> = Unstructured::new(&bytes).arbitrary()?;
        let parsed =
            parse(&input.text).ok_or_else(|| anyhow::anyhow!("buffer {i}: the parser rejected {:?}", input.text))?;
        pairs += parsed.len();
        distinct.insert(input.text);
    }
    println!("fuzz_arbitrary: 2000 buffers, {} distinct valid inputs, {pairs} key/value pairs parsed", distinct.len());
    anyhow::ensure!(distinct.len() > 800, "too few distinct inputs: {}", distinct.len());
    anyhow::ensure!(pairs > 300, "too few pairs exercised: {pairs}");
    Ok(())
}
