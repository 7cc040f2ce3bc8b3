pub mod error;
pub mod grammar;
pub mod sample;
pub mod vocab;

pub use error::{Error, Result};
pub use vocab::{TokenId, TokenSet};
