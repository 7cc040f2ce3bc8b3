//! Reference recognizer over the IR (being written).
