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

/// Where an output stands with its reasoning, from the bytes of its tokens as they come (held
/// text included: a stop string's possible start does not hide the end marker from it).
#[derive(Debug, Clone)]
pub(crate) struct Track {
    budget: ReasoningBudget,
    state: State,
    /// Undecided: the output's bytes so far; inside: the last bytes read, fewer than the end
    /// marker's (where a marker split across tokens begins).
    tail: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The output may still begin with the start marker.
    Undecided,
    /// Inside the reasoning since output token `since`.
    Inside { since: usize },
    /// Past the reasoning, or none, or its end could not be forced: nothing more to do.
    Done,
}

impl Track {
    pub fn new(budget: ReasoningBudget) -> Track {
        let state = match budget.start {
            None => State::Inside { since: 0 },
            Some(_) => State::Undecided,
        };
        Track { budget, state, tail: Vec::new() }
    }

    /// Follows the output after a token: `bytes` are its bytes, `tokens` the output's length.
    pub fn update(&mut self, bytes: &[u8], tokens: usize) {
        self.tail.extend_from_slice(bytes);
        if let State::Undecided = self.state {
            let start = self.budget.start.as_deref().unwrap_or_default().as_bytes();
            let t = trim_start(&self.tail);
            if t.starts_with(start) {
                let after = t[start.len()..].to_vec();
                self.state = State::Inside { since: tokens - 1 };
                self.tail = after;
            } else if start.starts_with(t) {
                return;
            } else {
                self.state = State::Done;
            }
        }
        match self.state {
            State::Inside { .. } => {
                let end = self.budget.end.as_bytes();
                if self.tail.windows(end.len()).any(|w| w == end) {
                    self.state = State::Done;
                } else {
                    let keep = self.tail.len().min(end.len() - 1);
                    self.tail.drain(..self.tail.len() - keep);
                }
            }
            _ => self.tail.clear(),
        }
    }

    /// The end marker, if the reasoning has used its budget and not ended.
    pub fn overdue(&self, tokens: usize) -> Option<&str> {
        match self.state {
            State::Inside { since } if tokens - since >= self.budget.max_tokens => Some(&self.budget.end),
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
        for (i, piece) in ["Hm", ", ", "</th", "ink>"].iter().enumerate() {
            assert_eq!(t.overdue(i), if i >= 3 { Some("</think>") } else { None });
            t.update(piece.as_bytes(), i + 1);
        }
        assert_eq!(t.overdue(4), None, "the marker (split across tokens) ended it");
    }

    #[test]
    fn optional_reasoning_counts_only_after_its_start_marker() {
        let mut t = Track::new(budget(Some("<think>"), 2));
        for (i, piece) in ["\n<th", "ink>", "a", "b"].iter().enumerate() {
            t.update(piece.as_bytes(), i + 1);
        }
        // Inside since the token that completed the start marker (index 1): 3 tokens.
        assert_eq!(t.overdue(4), Some("</think>"));
        let mut none = Track::new(budget(Some("<think>"), 1));
        none.update(b"{\"a\"", 1);
        // A marker right after the start marker, in the same token, ends the part at once.
        let mut quick = Track::new(budget(Some("<think>"), 1));
        quick.update(b"<think></think>", 1);
        assert_eq!(quick.overdue(9), None);
        assert_eq!(none.overdue(5), None, "no reasoning part: no budget");
    }
}
