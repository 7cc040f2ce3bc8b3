//! Vocabulary (being written).
pub mod tokenset;
pub use tokenset::TokenSet;

/// A token id as the model and tokenizer number it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenId(pub u32);
