//! GBNF-compatible EBNF front end (being written).
