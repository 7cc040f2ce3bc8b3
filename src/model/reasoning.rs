//! Reasoning ("thinking") before a reply: the markers a chat template's model writes its
//! reasoning between ([`Reasoning`], found in the template's source), whether a rendered prompt
//! has opened, closed or left open that part ([`Phase`]), and the split of a reply into its
//! reasoning and its content, whole ([`Reasoning::split`]) or streamed ([`Splitter`]).
//!
//! ```text
//!   Qwen3, thinking on:   prompt …<|im_start|>assistant\n          reply <think>…</think>\n\n{"a": 1}
//!   QwQ, R1 distills:     prompt …<|im_start|>assistant\n<think>\n   reply …</think>\n\n{"a": 1}
//!   Qwen3, thinking off:  prompt …assistant\n<think>\n\n</think>\n\n  reply {"a": 1}
//! ```
//!
//! Known marker pairs ([`KNOWN`]): `<think>`/`</think>` (Qwen3, QwQ, DeepSeek R1 and V3.1,
//! GLM-4.6, MiniMax-M2, Nemotron, SmolLM3, Granite 3.3), `<seed:think>`/`</seed:think>`
//! (Seed-OSS), `[THINK]`/`[/THINK]` (Ministral reasoning), `<|inner_prefix|>`/`<|inner_suffix|>`
//! (Apertus), `<|channel>thought`/`<channel|>` (Gemma 4). gpt-oss's harmony format ([`HARMONY`])
//! heads each message of a reply with its channel: the reasoning is the `analysis` message
//! (`<|channel|>analysis<|message|>`…`<|end|>`), the answer the `final` one, after
//! `<|start|>assistant` when a reasoning message came first:
//!
//! ```text
//!   gpt-oss:              prompt …<|end|><|start|>assistant
//!                         reply <|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>{"a": 1}
//! ```
//!
//! so its end marker is `<|end|><|start|>assistant` and the answer's content has a header,
//! `<|channel|>final<|message|>` ([`Reasoning::header`]), which a constrained answer is written
//! after and the split takes out of the content (tool calls write headers of their own: see
//! `tools::harmony`).
//!
//! A constrained reply of a reasoning model is free text up to the end marker, then the
//! constraint (`grammar::trigger::after_reasoning`); the server returns the part before the
//! marker as `reasoning_content`.

use crate::automaton::Constraint;
use crate::decode::ReasoningBudget;

/// The marker pairs this module knows, start then end (the vocabulary keeps them as text
/// tokens, see [`crate::vocab::REASONING_MARKERS`]).
pub const KNOWN: &[(&str, &str)] = crate::vocab::REASONING_MARKERS;

/// gpt-oss's harmony channels as reasoning markers (see the module doc).
pub const HARMONY: (&str, &str, &str) =
    ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant", "<|channel|>final<|message|>");

/// The markers a model writes its reasoning between.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Reasoning {
    pub start: String,
    pub end: String,
    /// What the answer's content begins with, after the reasoning part or in its place
    /// (harmony's `<|channel|>final<|message|>`); `None` for the marker pairs of [`KNOWN`].
    pub header: Option<String>,
}

/// Where a rendered prompt leaves the reasoning part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Phase {
    /// The prompt ends with the start marker: the reply begins inside the reasoning.
    Open,
    /// The prompt ends with the end marker (thinking turned off by pre-filling an empty
    /// reasoning part): the reply is the answer only.
    Closed,
    /// Neither: the reply may begin with a reasoning part (start marker first) or without one.
    Optional,
}

impl Reasoning {
    /// [`HARMONY`] for a template that writes harmony's channels, else the first [`KNOWN`]
    /// pair whose end marker the template's source writes, if any.
    pub fn detect(template_source: &str) -> Option<Reasoning> {
        let (start, end, header) = HARMONY;
        if template_source.contains("<|channel|>") && template_source.contains(start) {
            return Some(Reasoning { start: start.into(), end: end.into(), header: Some(header.into()) });
        }
        KNOWN.iter().find(|(_, end)| template_source.contains(end)).map(|&(start, end)| Reasoning {
            start: start.into(),
            end: end.into(),
            header: None,
        })
    }

    /// Where `prompt` (the rendered chat, ending where the reply begins) leaves the reasoning.
    /// With a [`header`](Self::header) the end marker also ends every earlier turn, so the
    /// prompt closes the reasoning only by ending with the header (the answer pre-filled).
    pub fn phase(&self, prompt: &str) -> Phase {
        let tail = prompt.trim_end();
        if tail.ends_with(&self.start) {
            Phase::Open
        } else if self.header.as_ref().map_or(tail.ends_with(&self.end), |h| tail.ends_with(h)) {
            Phase::Closed
        } else {
            Phase::Optional
        }
    }

    /// Splits a whole reply that began in `phase` into its reasoning (without the markers,
    /// trimmed; `None` if it has none) and its content (with the whitespace after the end marker
    /// trimmed). A reply whose reasoning never ended is all reasoning.
    pub fn split(&self, phase: Phase, reply: &str) -> (Option<String>, String) {
        let mut s = Splitter::new(self.clone(), phase);
        let (mut r, mut c) = s.feed(reply);
        let (r2, c2) = s.finish();
        r.push_str(&r2);
        c.push_str(&c2);
        (s.had_reasoning().then(|| r.trim().to_string()), c)
    }
}

/// A template's reasoning markers and where a rendered prompt leaves them
/// ([`PromptFormat::reasoning_after`](super::PromptFormat::reasoning_after)): what the
/// constraint, the reasoning budget and the reply's split follow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct PromptReasoning {
    pub markers: Reasoning,
    pub phase: Phase,
}

impl PromptReasoning {
    /// The start marker the reply must write to reason, if it may (`None` when it begins inside
    /// the reasoning); `None` too where it may not reason at all.
    fn start(&self) -> Option<String> {
        (self.phase == Phase::Optional).then(|| self.markers.start.clone())
    }

    /// `answer`, the reply's content, after the reasoning part ([`Constraint::AfterReasoning`])
    /// and the content's header where the format has one; `answer` alone where the prompt
    /// closed the reasoning.
    pub fn constrain(&self, answer: Constraint) -> Constraint {
        self.after(self.markers.header.clone(), answer)
    }

    /// `calls` (tool calls in the template's format, which writes its own headers) after the
    /// reasoning part.
    pub fn constrain_calls(&self, calls: Constraint) -> Constraint {
        self.after(None, calls)
    }

    fn after(&self, header: Option<String>, then: Constraint) -> Constraint {
        match self.phase {
            Phase::Closed => then,
            _ => Constraint::AfterReasoning {
                start: self.start(),
                end: self.markers.end.clone(),
                header,
                then: Box::new(then),
            },
        }
    }

    /// The reasoning budget of `max_tokens` tokens; `None` where the prompt closed the reasoning.
    pub fn budget(&self, max_tokens: usize) -> Option<ReasoningBudget> {
        (self.phase != Phase::Closed).then(|| ReasoningBudget {
            start: self.start(),
            end: self.markers.end.clone(),
            max_tokens,
        })
    }

    /// [`Reasoning::split`] of a whole reply.
    pub fn split(&self, reply: &str) -> (Option<String>, String) {
        self.markers.split(self.phase, reply)
    }

    /// A [`Splitter`] for a streamed reply.
    pub fn splitter(&self) -> Splitter {
        Splitter::new(self.markers.clone(), self.phase)
    }
}

/// Splits a streamed reply into reasoning and content as its text arrives: text that may still
/// turn out to be (part of) a marker is held back until it is known.
#[derive(Debug, Clone)]
pub struct Splitter {
    markers: Reasoning,
    state: State,
    /// Text held back: a possible start of the marker looked for.
    held: String,
    had_reasoning: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the reply's start, where a start marker may come (after whitespace).
    Start,
    /// Inside the reasoning.
    Reasoning,
    /// Right after the end marker: whitespace here is dropped.
    AfterEnd,
    /// Where the content's header may come (taken out).
    Header,
    Content,
}

impl Splitter {
    pub fn new(markers: Reasoning, phase: Phase) -> Splitter {
        let (state, had_reasoning) = match phase {
            Phase::Open => (State::Reasoning, true),
            Phase::Closed => (State::Content, false),
            Phase::Optional => (State::Start, false),
        };
        Splitter { markers, state, held: String::new(), had_reasoning }
    }

    /// Whether the reply has had a reasoning part so far.
    pub fn had_reasoning(&self) -> bool {
        self.had_reasoning
    }

    /// Feeds more of the reply; returns the (reasoning, content) text now known.
    pub fn feed(&mut self, text: &str) -> (String, String) {
        let (mut reasoning, mut content) = (String::new(), String::new());
        self.held.push_str(text);
        loop {
            let held = std::mem::take(&mut self.held);
            match self.state {
                State::Start => {
                    let rest = held.trim_start();
                    if rest.starts_with(&self.markers.start) {
                        self.state = State::Reasoning;
                        self.had_reasoning = true;
                        self.held = rest[self.markers.start.len()..].to_string();
                    } else if self.markers.start.starts_with(rest) {
                        self.held = held; // still possibly the marker
                        break;
                    } else {
                        self.state = State::Header;
                        self.held = held;
                    }
                }
                State::Reasoning => match held.find(&self.markers.end) {
                    Some(i) => {
                        reasoning.push_str(&held[..i]);
                        self.held = held[i + self.markers.end.len()..].to_string();
                        self.state = State::AfterEnd;
                    }
                    None => {
                        let keep = partial_suffix(&held, &self.markers.end);
                        reasoning.push_str(&held[..held.len() - keep]);
                        self.held = held[held.len() - keep..].to_string();
                        break;
                    }
                },
                State::AfterEnd => {
                    let rest = held.trim_start();
                    if rest.is_empty() {
                        break;
                    }
                    self.state = State::Header;
                    self.held = rest.to_string();
                }
                State::Header => match &self.markers.header {
                    Some(h) if held.starts_with(h.as_str()) => {
                        self.state = State::Content;
                        self.held = held[h.len()..].to_string();
                    }
                    Some(h) if h.starts_with(held.as_str()) => {
                        self.held = held; // still possibly the header
                        break;
                    }
                    _ => {
                        self.state = State::Content;
                        self.held = held;
                    }
                },
                State::Content => {
                    content.push_str(&held);
                    break;
                }
            }
        }
        (reasoning, content)
    }

    /// The reply is over: what was held back, as what it turned out to be.
    pub fn finish(&mut self) -> (String, String) {
        let held = std::mem::take(&mut self.held);
        match self.state {
            State::Reasoning => (held, String::new()),
            State::AfterEnd => (String::new(), String::new()),
            State::Start | State::Header | State::Content => (String::new(), held),
        }
    }
}

/// The length of the longest proper prefix of `marker` that `text` ends with (at a character
/// boundary of `text`).
fn partial_suffix(text: &str, marker: &str) -> usize {
    (1..marker.len().min(text.len() + 1))
        .rev()
        .find(|&k| {
            text.is_char_boundary(text.len() - k) && marker.as_bytes().starts_with(&text.as_bytes()[text.len() - k..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn think() -> Reasoning {
        Reasoning { start: "<think>".into(), end: "</think>".into(), header: None }
    }

    #[test]
    fn phases_of_rendered_prompts() {
        let r = think();
        assert_eq!(r.phase("<|im_start|>assistant\n<think>\n"), Phase::Open);
        assert_eq!(r.phase("<|im_start|>assistant\n<think>\n\n</think>\n\n"), Phase::Closed);
        assert_eq!(r.phase("<|im_start|>assistant\n"), Phase::Optional);
    }

    #[test]
    fn whole_replies_split() {
        let r = think();
        assert_eq!(
            r.split(Phase::Open, "Let me see.\n</think>\n\n{\"a\":1}"),
            (Some("Let me see.".into()), "{\"a\":1}".into())
        );
        assert_eq!(r.split(Phase::Optional, "<think>hm</think>ok"), (Some("hm".into()), "ok".into()));
        assert_eq!(r.split(Phase::Optional, "\n<think>\nhm\n</think>\n\nok"), (Some("hm".into()), "ok".into()));
        assert_eq!(r.split(Phase::Optional, "plain <think> text"), (None, "plain <think> text".into()));
        assert_eq!(r.split(Phase::Optional, "<thin"), (None, "<thin".into()));
        assert_eq!(r.split(Phase::Closed, "<think>x</think>y"), (None, "<think>x</think>y".into()));
        // Never ended: all reasoning.
        assert_eq!(r.split(Phase::Open, "still thinking </thi"), (Some("still thinking </thi".into()), String::new()));
        assert_eq!(r.split(Phase::Open, "</think>"), (Some(String::new()), String::new()));
    }

    fn harmony() -> Reasoning {
        let (start, end, header) = HARMONY;
        Reasoning { start: start.into(), end: end.into(), header: Some(header.into()) }
    }

    #[test]
    fn harmony_replies_split_into_analysis_and_final_answer() {
        let r = harmony();
        assert_eq!(r.phase("<|start|>user<|message|>Hi<|end|><|start|>assistant"), Phase::Optional);
        assert_eq!(r.phase("…<|start|>assistant<|channel|>analysis<|message|>"), Phase::Open);
        assert_eq!(r.phase("…<|start|>assistant<|channel|>final<|message|>"), Phase::Closed);
        let reply = "<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|channel|>final<|message|>{\"a\":1}";
        assert_eq!(r.split(Phase::Optional, reply), (Some("Hm.".into()), "{\"a\":1}".into()));
        assert_eq!(r.split(Phase::Optional, "<|channel|>final<|message|>ok"), (None, "ok".into()));
        // A call's header is no content header: the calls parser reads it.
        let call = "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.f<|channel|>commentary";
        assert_eq!(r.split(Phase::Optional, call), (Some("x".into()), "to=functions.f<|channel|>commentary".into()));
        assert_eq!(
            r.split(Phase::Optional, "<|channel|>commentary to=functions.f"),
            (None, "<|channel|>commentary to=functions.f".into())
        );
        assert_eq!(r.split(Phase::Optional, "<|channel|>fin"), (None, "<|channel|>fin".into()));
    }

    #[test]
    fn streamed_replies_split_alike_at_every_cut() {
        for (r, phase, reply) in [
            (think(), Phase::Open, "Let me see: 2 < 3.\n</think>\n\n{\"a\": \"</\"}"),
            (think(), Phase::Optional, " <think>é and <</think> ok é"),
            (think(), Phase::Optional, "no reasoning <think> here"),
            (
                harmony(),
                Phase::Optional,
                "<|channel|>analysis<|message|>é<|end|><|start|>assistant<|channel|>final<|message|>ok",
            ),
            (harmony(), Phase::Optional, "<|channel|>final<|message|><|channel|>x"),
        ] {
            let whole = r.split(phase, reply);
            let chars: Vec<usize> = reply.char_indices().map(|(i, _)| i).chain([reply.len()]).collect();
            for &a in &chars {
                for &b in chars.iter().filter(|&&b| b >= a) {
                    let mut s = Splitter::new(r.clone(), phase);
                    let (mut rs, mut cs) = (String::new(), String::new());
                    for piece in [&reply[..a], &reply[a..b], &reply[b..]] {
                        let (x, y) = s.feed(piece);
                        rs.push_str(&x);
                        cs.push_str(&y);
                    }
                    let (x, y) = s.finish();
                    rs.push_str(&x);
                    cs.push_str(&y);
                    assert_eq!(
                        (s.had_reasoning().then(|| rs.trim().to_string()), cs),
                        whole,
                        "{reply:?} cut at {a}, {b}"
                    );
                }
            }
        }
    }
}
