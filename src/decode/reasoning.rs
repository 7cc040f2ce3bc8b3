//! The reasoning budget ([`ReasoningBudget`]): a reasoning part at the output's start may take
//! at most so many tokens; once it has, its end marker is appended without a choice (forced,
//! like a constraint's fast-forward) and the output goes on to the answer. [`Track`] follows an
//! output's text to know whether it is inside its reasoning and for how many tokens.

/// A reasoning part at the start of the output, and the most tokens it may take
/// ([`GenerateOptions::reasoning`](super::GenerateOptions::reasoning)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningBudget {
    /// `None`: the output begins inside its reasoning (the prompt opened it); `Some(start)`: the
    /// output has a reasoning part only if it begins with `start` (after whitespace).
    pub start: Option<String>,
    /// The end marker (`</think>`); not empty.
    pub end: String,
    /// Once the reasoning holds this many tokens and has not ended, `end` is forced.
    pub max_tokens: usize,
}

/// Where an output stands with its reasoning.
#[derive(Debug, Clone)]
pub(crate) struct Track {
    budget: ReasoningBudget,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The output may still begin with the start marker.
    Undecided,
    /// Inside the reasoning since output token `since`; the end marker was looked for in the
    /// text before byte `scanned`.
    Inside { since: usize, scanned: usize },
    /// Past the reasoning, or none, or its end could not be forced: nothing more to do.
    Done,
}

impl Track {
    pub fn new(budget: ReasoningBudget) -> Track {
        let state = match budget.start {
            None => State::Inside { since: 0, scanned: 0 },
            Some(_) => State::Undecided,
        };
        Track { budget, state }
    }

    /// Follows the output after a token: `text` is all of its bytes so far, `tokens` its length.
    pub fn update(&mut self, text: &[u8], tokens: usize) {
        if let State::Undecided = self.state {
            let start = self.budget.start.as_deref().unwrap_or_default().as_bytes();
            let t = trim_start(text);
            if t.starts_with(start) {
                self.state = State::Inside { since: tokens - 1, scanned: text.len() - t.len() + start.len() };
            } else if !start.starts_with(t) {
                self.state = State::Done;
            }
        }
        if let State::Inside { scanned, .. } = &mut self.state {
            let end = self.budget.end.as_bytes();
            let from = scanned.saturating_sub(end.len() - 1);
            if text.len() >= from + end.len() && text[from..].windows(end.len()).any(|w| w == end) {
                self.state = State::Done;
            } else {
                *scanned = text.len();
            }
        }
    }

    /// The end marker, if the reasoning has used its budget and not ended.
    pub fn overdue(&self, tokens: usize) -> Option<&str> {
        match self.state {
            State::Inside { since, .. } if tokens - since >= self.budget.max_tokens => Some(&self.budget.end),
            _ => None,
        }
    }

    /// The end could not be forced (no room left, or the constraint refused it): stop trying.
    pub fn give_up(&mut self) {
        self.state = State::Done;
    }
}

fn trim_start(t: &[u8]) -> &[u8] {
    let n = t.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &t[n..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(start: Option<&str>, max: usize) -> ReasoningBudget {
        ReasoningBudget { start: start.map(String::from), end: "</think>".into(), max_tokens: max }
    }

    #[test]
    fn open_reasoning_counts_from_the_first_token_until_the_end_marker() {
        let mut t = Track::new(budget(None, 3));
        let mut text = Vec::new();
        for (i, piece) in ["Hm", ", ", "</th", "ink>"].iter().enumerate() {
            assert_eq!(t.overdue(i), if i >= 3 { Some("</think>") } else { None });
            text.extend_from_slice(piece.as_bytes());
            t.update(&text, i + 1);
        }
        assert_eq!(t.overdue(4), None, "the marker (split across tokens) ended it");
    }

    #[test]
    fn optional_reasoning_counts_only_after_its_start_marker() {
        let mut t = Track::new(budget(Some("<think>"), 2));
        let mut text = Vec::new();
        for (i, piece) in ["\n<th", "ink>", "a", "b"].iter().enumerate() {
            text.extend_from_slice(piece.as_bytes());
            t.update(&text, i + 1);
        }
        // Inside since the token that completed the start marker (index 1): 3 tokens.
        assert_eq!(t.overdue(4), Some("</think>"));
        let mut none = Track::new(budget(Some("<think>"), 1));
        none.update(b"{\"a\"", 1);
        assert_eq!(none.overdue(5), None, "no reasoning part: no budget");
    }
}
