//! Typed extraction with the embedded model: `cargo run --example extract`.
//!
//! A Rust type is the constraint: `schemars` derives its JSON Schema, the engine generates JSON
//! under it, and the value comes back deserialized. The embedded stories260K model is tiny, so
//! its answers are silly, but they are always well-typed values.

use schemars::JsonSchema;
use serde::Deserialize;
use strictly::{Engine, GenerateOptions};

/// A character of a story.
#[derive(Debug, Deserialize, JsonSchema)]
struct Character {
    /// The character's name.
    #[schemars(length(min = 1, max = 24))]
    name: String,
    /// Age in years.
    #[schemars(range(min = 1, max = 99))]
    age: u8,
    mood: Mood,
    /// Up to three friends.
    #[schemars(length(max = 3))]
    friends: Vec<String>,
    /// A pet, if the character has one.
    pet: Option<Pet>,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Mood {
    Happy,
    Sad,
    Sleepy,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Pet {
    #[schemars(length(min = 1, max = 12))]
    kind: String,
    #[schemars(range(max = 8))]
    legs: u8,
}

fn main() -> anyhow::Result<()> {
    let engine = Engine::embedded()?;
    let prompt = "Once upon a time, there was a little girl named Lily. She was three years old.";
    for seed in 0..4 {
        let opts = GenerateOptions::default().with_seed(seed).with_max_tokens(160);
        let c: Character = engine.generate(prompt, &opts)?;
        println!("seed {seed}: {c:?}");
        // The schema's bounds hold for every value (enforced while generating, not checked after).
        assert!((1..=24).contains(&c.name.chars().count()), "name length {:?}", c.name);
        assert!((1..=99).contains(&c.age), "age {}", c.age);
        assert!(c.friends.len() <= 3);
        assert!(c.pet.is_none_or(|p| p.legs <= 8 && !p.kind.is_empty()));
    }
    // Greedy decoding is deterministic.
    let greedy = GenerateOptions::default().with_temperature(0.0).with_max_tokens(160);
    let a: Character = engine.generate(prompt, &greedy)?;
    let b: Character = engine.generate(prompt, &greedy)?;
    assert_eq!((a.name, a.age, a.mood), (b.name, b.age, b.mood));
    println!("extract: ok");
    Ok(())
}
