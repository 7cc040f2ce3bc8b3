//! Regex front end (being written).
