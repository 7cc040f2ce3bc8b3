//! Unit tests of the JSON Schema front end, one file per keyword family. Each compiles schemas
//! for a byte-level vocabulary (one token per byte) and runs texts through a matcher; some
//! compare with the `jsonschema` crate.

mod arrays;
mod basics;
mod combinators;
mod empty;
mod not;
mod numbers;
mod objects;
mod refs;
mod sensible;
mod spellings;
mod strings;

use serde_json::json;

use super::*;
use crate::automaton::{Compiled, Constraint, VocabEnv};
use crate::vocab::Vocab;

/// Byte vocabulary (every text is one token per byte), with its caches: one per test thread.
fn bytes_env() -> std::sync::Arc<VocabEnv> {
    thread_local! {
        static ENV: std::sync::Arc<VocabEnv> = {
            let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain([b"</s>".to_vec()]).collect();
            VocabEnv::new(std::sync::Arc::new(Vocab::from_byte_tokens(toks, &[256])))
        };
    }
    ENV.with(|e| e.clone())
}

/// `schema` compiled for [`bytes_env`]: the one place these tests build a [`Compiled`].
fn compiled(schema: &Value, opts: &JsonSchemaOptions) -> crate::error::Result<std::sync::Arc<Compiled>> {
    Compiled::new(&bytes_env(), &Constraint::JsonSchema(schema.clone(), opts.clone()))
}

/// Does the grammar of `schema` (its exact language, [`JsonSchemaOptions::exact`]) accept
/// `text`?
fn accepts(schema: &Value, text: &str) -> bool {
    accepts_with(schema, &JsonSchemaOptions::exact(), text)
}

/// Does the grammar of `schema` under `opts` accept `text`?
fn accepts_with(schema: &Value, opts: &JsonSchemaOptions, text: &str) -> bool {
    let c = compiled(schema, opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let mut m = c.matcher();
    m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

/// Every (schema, instance) pair agrees with the `jsonschema` crate; each schema must compile.
fn agrees_with_validator(schemas: &[Value], instances: &[&str]) {
    for s in schemas {
        let judge = jsonschema::options().should_validate_formats(true).build(s).unwrap();
        for text in instances {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(accepts(s, text), judge.is_valid(&v), "schema {s}, instance {text}");
        }
    }
}
