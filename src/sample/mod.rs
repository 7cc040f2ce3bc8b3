//! Logits processors and samplers (being written: see issue 6).
