//! [`ToolFormat`]: how a model writes its tool calls, detected from its chat template.
//!
//! ```text
//! the template's source mentions           format     a reply with calls
//! <tool_call>  (Qwen 2.5, Hermes, plain)   Hermes     <tool_call>\n{"name": "f", "arguments": {..}}\n</tool_call>
//! <|start_header_id|> and "parameters"     Llama3     {"name": "f", "parameters": {..}}   then <|eot_id|> / <|eom_id|>
//!   (Llama 3.1, 3.2, 3.3)
//! [TOOL_CALLS]  (Mistral v3 templates,     List(Mistral)  [TOOL_CALLS] [{"name": "f", "arguments": {..}}, ..]
//!   with [AVAILABLE_TOOLS])
//! <|tool_call|> (Granite 3.x)               List(Granite)  <|tool_call|>[{"name": "f", "arguments": {..}}, ..]
//! <TOOLCALL> (Nemotron Nano v2)             List(Nemotron) <TOOLCALL>[{"name": "f", "arguments": {..}}, ..]</TOOLCALL>
//! [TOOL_CALLS] and [ARGS] (Mistral Small    MistralArgs [TOOL_CALLS]f[ARGS]{..}[TOOL_CALLS]g[ARGS]{..}, with
//!   3.2, Devstral, Ministral 3, Magistral)            [CALL_ID]id before [ARGS] where the template writes one
//! <｜tool▁calls▁begin｜> and <｜tool▁sep｜>,   DeepSeek  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{..}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//!   no fenced json (DeepSeek V3.1; its
//!   template lists no tools: they go in
//!   the system turn in its own words)
//! [func_name1( (Llama 4's pythonic         Pythonic  [f(city="Paris", days=3), g(x=True)], the whole reply
//!   tool templates)
//! <tool_call> with <function= and          Xml(Qwen)  <tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>
//!   <parameter= (Qwen3-Coder, Qwen3.5)
//! <seed:tool_call> (Seed-OSS)              Xml(Seed), <tool_call> with <arg_key> (GLM 4.5/4.6): Xml(Glm),
//! <minimax:tool_call> (MiniMax-M2)         Xml(MiniMax): see [`super::xml`]
//! <|channel|>commentary and <|call|>       Harmony    to=functions.f<|channel|>commentary json<|message|>{..}   then <|call|>
//!   (gpt-oss)
//! anything else, or a template that        Hermes, with the tools described in the system turn:
//!   does not render tools                      the documented default
//! ```
//!
//! Details per format (the grammar in [`super::calls_grammar`], the reader in
//! [`super::OutputParser`]):
//!
//! - **Hermes**: one `<tool_call>` block per call, blocks separated by a newline. Under `Auto`,
//!   text that does not contain `<tool_call>`, then optionally calls.
//! - **Llama 3**: the whole reply is one bare JSON object whose arguments key is `parameters`;
//!   the end-of-turn token the model writes next ends the output (EOS is allowed exactly where
//!   the grammar accepts). Llama 3's templates take one call per assistant turn, so a reply
//!   holds at most one call (parallel calls off). Under `Auto`, a reply is a call or text that
//!   does not begin with `{`: a reply that begins with `{` is read as a call.
//! - **List** (Mistral, Granite, Nemotron): a marker (`[TOOL_CALLS]`, `<|tool_call|>`,
//!   `<TOOLCALL>`: control tokens in their tokenizers, which the vocabulary keeps as text so
//!   that grammars can write them: see [`crate::vocab`]), an optional space, then a JSON list
//!   of call objects, then the dialect's closing marker where it has one (`</TOOLCALL>`).
//!   Under `Auto`, text without the marker, then optionally the calls. Mistral's templates
//!   demand call ids of 9 letters and digits, so calls read in that dialect get such ids, and
//!   other ids in the history are mapped to such ids when the chat is rendered.
//! - **MistralArgs**: each call is `[TOOL_CALLS]`, the name, then (where the template writes
//!   call ids, Mistral Small 3.2) `[CALL_ID]` and the call's 9-letter-and-digit id, then
//!   `[ARGS]` and the arguments' JSON; the calls follow each other directly and the turn's end
//!   token ends them. The id the model writes is the call's id. Under `Auto`, text without
//!   `[TOOL_CALLS]`, then optionally calls. History ids are mapped as for Mistral.
//! - **Pythonic** (Llama 4's tool templates): the whole reply is a Python list of calls with
//!   keyword arguments, values as Python literals typed by the schema: see [`super::pythonic`].
//!   Under `Auto`, a reply is the list or text that does not begin with `[`.
//! - **DeepSeek** (V3.1): `<｜tool▁calls▁begin｜>`, then per call `<｜tool▁call▁begin｜>`, the name,
//!   `<｜tool▁sep｜>`, the arguments' JSON, `<｜tool▁call▁end｜>`, then `<｜tool▁calls▁end｜>`. The
//!   template renders the history's calls (arguments as JSON text) but not the tools, so they
//!   are described in the system turn the way DeepSeek's model card describes them. Under
//!   `Auto`, text without `<｜tool▁calls▁begin｜>`, then optionally calls.
//! - **Harmony** (gpt-oss): after the analysis message (the reasoning), one call: a
//!   `commentary` message to `functions.NAME` whose content is the arguments' JSON, ended by
//!   `<|call|>` (end-of-sequence); see [`super::harmony`]. Under `Auto`, a call or the final
//!   answer (`<|channel|>final<|message|>` and text, or the response format's output).
//! - **Xml** (Qwen3-Coder, Qwen3.5, Seed-OSS, GLM, MiniMax): one block per call (`<tool_call>`,
//!   `<seed:tool_call>`, `<minimax:tool_call>`), holding the function's element and one element
//!   per argument whose value is typed by the tool's schema (strings as bare text, other values
//!   as JSON): see [`super::xml`]. Under `Auto`, text without the block's opening tag, then
//!   optionally calls.
//!
//! [`Hermes`]: ToolFormat::Hermes
//! [`Llama3`]: ToolFormat::Llama3

use serde::Serialize;

/// How tool calls are written in a reply. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
pub enum ToolFormat {
    /// `<tool_call>{"name": .., "arguments": ..}</tool_call>`: the default.
    #[default]
    Hermes,
    /// A bare `{"name": .., "parameters": ..}`, one per reply.
    Llama3,
    /// A marker, then a JSON list of `{"name": .., "arguments": ..}` (Mistral's
    /// `[TOOL_CALLS] [..]`), then the dialect's closing marker, if any.
    List(ListDialect),
    /// `[NAME(KEY=VALUE, ..), ..]`, the whole reply.
    Pythonic,
    /// `[TOOL_CALLS]NAME[ARGS]{..}` per call; with `call_id`, `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{..}`.
    MistralArgs { call_id: bool },
    /// `<｜tool▁calls▁begin｜>` (`<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>`)+ `<｜tool▁calls▁end｜>`.
    DeepSeek,
    /// XML elements per call and argument, in one of several dialects (Qwen's:
    /// `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>\n</tool_call>`).
    Xml(super::xml::XmlDialect),
    /// gpt-oss's harmony messages: ` to=functions.NAME<|channel|>commentary json<|message|>{..}`,
    /// one per reply.
    Harmony,
}

/// Whose JSON list of calls [`ToolFormat::List`] writes: the markers around it differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ListDialect {
    /// `[TOOL_CALLS] [..]` (Mistral v3 templates: Mistral 7B v0.3, Nemo).
    Mistral,
    /// `<|tool_call|>[..]` (IBM Granite 3.x).
    Granite,
    /// `<TOOLCALL>[..]</TOOLCALL>` (NVIDIA Nemotron Nano v2).
    Nemotron,
}

impl ListDialect {
    /// The marker before the list, and the one after it (if any).
    pub fn markers(self) -> (&'static str, Option<&'static str>) {
        match self {
            ListDialect::Mistral => (MISTRAL_CALLS, None),
            ListDialect::Granite => ("<|tool_call|>", None),
            ListDialect::Nemotron => ("<TOOLCALL>", Some("</TOOLCALL>")),
        }
    }
}

/// The text that opens Mistral's calls.
pub const MISTRAL_CALLS: &str = "[TOOL_CALLS]";
/// What comes before a call's arguments in [`ToolFormat::MistralArgs`].
pub const MISTRAL_ARGS: &str = "[ARGS]";
/// What comes before a call's id in [`ToolFormat::MistralArgs`] with ids.
pub const MISTRAL_CALL_ID: &str = "[CALL_ID]";

/// What opens DeepSeek's calls.
pub const DEEPSEEK_CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
/// What closes DeepSeek's calls.
pub const DEEPSEEK_CALLS_END: &str = "<｜tool▁calls▁end｜>";
/// What opens one DeepSeek call.
pub const DEEPSEEK_CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
/// What closes one DeepSeek call.
pub const DEEPSEEK_CALL_END: &str = "<｜tool▁call▁end｜>";
/// What comes between a DeepSeek call's name and its arguments.
pub const DEEPSEEK_SEP: &str = "<｜tool▁sep｜>";

impl ToolFormat {
    /// The format a chat template teaches, from its source; `None` when it teaches none of
    /// the known ones (then tools are described in the system turn in the default format).
    pub fn detect(template_source: &str) -> Option<ToolFormat> {
        let has = |s: &str| template_source.contains(s);
        if has(MISTRAL_CALLS) && has(MISTRAL_ARGS) {
            Some(ToolFormat::MistralArgs { call_id: has(MISTRAL_CALL_ID) })
        } else if has(MISTRAL_CALLS) {
            Some(ToolFormat::List(ListDialect::Mistral))
        } else if has("<|tool_call|>") {
            Some(ToolFormat::List(ListDialect::Granite))
        } else if has("<TOOLCALL>") && has("</TOOLCALL>") {
            Some(ToolFormat::List(ListDialect::Nemotron))
        } else if has(DEEPSEEK_CALLS_BEGIN) && has(DEEPSEEK_SEP) && !has("```json") {
            // (R1's calls hold `function`, the name and a fenced JSON block: not this format.)
            Some(ToolFormat::DeepSeek)
        } else if has("<|channel|>commentary") && has("<|call|>") {
            Some(ToolFormat::Harmony)
        } else if has("[func_name1(") {
            Some(ToolFormat::Pythonic)
        } else if let Some(d) = super::xml::XmlDialect::detect(template_source) {
            Some(ToolFormat::Xml(d))
        } else if has(super::TOOL_CALL_OPEN) {
            Some(ToolFormat::Hermes)
        } else if has("<|start_header_id|>") && has("\"parameters\"") {
            Some(ToolFormat::Llama3)
        } else {
            None
        }
    }

    /// The key of a call object that holds the arguments (Xml has no call object).
    pub fn arguments_key(self) -> &'static str {
        match self {
            ToolFormat::Llama3 => "parameters",
            _ => "arguments",
        }
    }

    /// The most calls one reply may hold in this format, given the caller's `max_calls`.
    pub fn max_calls(self, max_calls: u32) -> u32 {
        match self {
            ToolFormat::Llama3 | ToolFormat::Harmony => 1,
            _ => max_calls.max(1),
        }
    }

    /// The text that starts the calls of a reply under `Auto` (`None` for Llama 3, whose call
    /// is the whole reply).
    pub fn marker(self) -> Option<&'static str> {
        match self {
            ToolFormat::Hermes => Some(super::TOOL_CALL_OPEN),
            ToolFormat::Xml(d) => Some(d.syntax().call_open),
            ToolFormat::List(d) => Some(d.markers().0),
            ToolFormat::MistralArgs { .. } => Some(MISTRAL_CALLS),
            ToolFormat::DeepSeek => Some(DEEPSEEK_CALLS_BEGIN),
            ToolFormat::Llama3 | ToolFormat::Pythonic | ToolFormat::Harmony => None,
        }
    }

    /// Whether a call's arguments are written as the JSON of the tool's `parameters` (else as
    /// elements or keyword arguments: see [`super::arguments_grammar`]).
    pub fn json_arguments(self) -> bool {
        !matches!(self, ToolFormat::Xml(_) | ToolFormat::Pythonic)
    }

    /// What a reply that holds calls begins with, for formats without a marker (the calls are
    /// the whole reply): Llama 3's object, the pythonic list.
    pub fn lead(self) -> Option<char> {
        match self {
            ToolFormat::Llama3 => Some('{'),
            ToolFormat::Pythonic => Some('['),
            _ => None,
        }
    }

    /// A fresh id for a call read in this format: 9 letters and digits for Mistral (what its
    /// templates demand), else `call_` and 24 letters and digits.
    pub fn call_id(self) -> String {
        match self {
            ToolFormat::List(ListDialect::Mistral) | ToolFormat::MistralArgs { .. } => random_alnum(9),
            _ => format!("call_{}", random_alnum(24)),
        }
    }
}

/// A string of `n` random letters and digits.
pub(super) fn random_alnum(n: usize) -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..n).map(|_| CHARS[rng.random_range(0..CHARS.len())] as char).collect()
}

/// `id` as Mistral's templates accept it: itself when it is 9 letters and digits, else 9
/// letters and digits derived from it (the same id always maps to the same one, so a call and
/// the tool result that answers it still match).
pub fn mistral_id(id: &str) -> String {
    if id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return id.to_string();
    }
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    // FNV-1a, then base 62: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    (0..9)
        .map(|_| {
            let c = CHARS[(h % 62) as usize] as char;
            h = (h / 62) ^ h.rotate_left(17);
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_and_ids() {
        assert_eq!(ToolFormat::detect("{{ '<tool_call>' }}"), Some(ToolFormat::Hermes));
        assert_eq!(
            ToolFormat::detect("[AVAILABLE_TOOLS] .. [TOOL_CALLS]"),
            Some(ToolFormat::List(ListDialect::Mistral))
        );
        assert_eq!(
            ToolFormat::detect("respond only with <|tool_call|> followed by a JSON list"),
            Some(ToolFormat::List(ListDialect::Granite))
        );
        assert_eq!(
            ToolFormat::detect("{{- '<TOOLCALL>[' -}} .. {{- ']</TOOLCALL>' -}}"),
            Some(ToolFormat::List(ListDialect::Nemotron))
        );
        assert_eq!(
            ToolFormat::detect("'[TOOL_CALLS]' + name + '[ARGS]'"),
            Some(ToolFormat::MistralArgs { call_id: false })
        );
        assert_eq!(
            ToolFormat::detect("'[TOOL_CALLS]' + name + '[CALL_ID]' + id + '[ARGS]'"),
            Some(ToolFormat::MistralArgs { call_id: true })
        );
        assert_eq!(
            ToolFormat::detect("<|start_header_id|> {\"name\": function name, \"parameters\": ...}"),
            Some(ToolFormat::Llama3)
        );
        assert_eq!(
            ToolFormat::detect("'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + name + '<｜tool▁sep｜>' + args"),
            Some(ToolFormat::DeepSeek)
        );
        assert_eq!(ToolFormat::detect("<｜tool▁calls▁begin｜> function<｜tool▁sep｜>name ```json"), None);
        assert_eq!(ToolFormat::detect("Use exact format: [func_name1(param1=value1)]"), Some(ToolFormat::Pythonic));
        assert_eq!(
            ToolFormat::detect("\"functions.\" + name + \"<|channel|>commentary \" .. \"<|call|>\""),
            Some(ToolFormat::Harmony)
        );
        assert_eq!(ToolFormat::detect("{% for m in messages %}{{ m.content }}{% endfor %}"), None);
        assert_eq!(mistral_id("abcDEF123"), "abcDEF123");
        let m = mistral_id("call_1");
        assert!(m.len() == 9 && m.bytes().all(|b| b.is_ascii_alphanumeric()), "{m}");
        assert_eq!(m, mistral_id("call_1"));
        assert_ne!(m, mistral_id("call_2"));
        assert_eq!(ToolFormat::List(ListDialect::Mistral).call_id().len(), 9);
        assert!(ToolFormat::List(ListDialect::Granite).call_id().starts_with("call_"));
        assert!(ToolFormat::Hermes.call_id().starts_with("call_"));
    }
}
