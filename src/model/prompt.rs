//! Turning a prompt into the model's input tokens ([`PromptFormat`]), and the defaults of
//! `generation_config.json` ([`GenerationDefaults`]: the sampling knobs it names reach the
//! sampler as [`SamplingOverrides`], the same type the CLI's flags and the server's request
//! fields are laid over them with).
//!
//! Prompts are encoded with the tokenizer's normal behaviour (SentencePiece's leading `▁`,
//! special-token spellings such as `<|im_start|>` recognised), unlike [`crate::vocab::Vocab`]'s
//! byte-exact encoder, which is for constrained output. Whether a BOS goes first follows
//! transformers: `add_bos_token` in tokenizer_config.json when it says so, else whatever the
//! tokenizer's post-processor does (Llama, TinyLlama and stories260K add one; Qwen adds none).
//! A rendered chat template is encoded with no BOS added: templates that want one write
//! `{{ bos_token }}` themselves (transformers' `apply_chat_template` does the same). In a chat,
//! special-token spellings in the caller's strings are encoded as text, so control tokens come
//! only from the template's markup (see [`content`](super::content); [`ContentTokens`] opts out).

use std::path::Path;

use serde_json::Value;

use super::chat::{ChatMessage, ChatTemplate, ChatTool, TemplateVars};
use super::config::token_ids;
use super::content::{ChatPrompt, ContentTokens, Specials};
use super::read_file;
use super::reasoning::{PromptReasoning, Reasoning};
use crate::error::{Error, Result};
use crate::sample::{SamplingOverrides, SamplingParams};
use crate::vocab::TokenId;

/// How prompts become tokens for one model.
pub struct PromptFormat {
    tokenizer: tokenizers::Tokenizer,
    /// The BOS token, if the model has one.
    pub bos: Option<TokenId>,
    bos_text: String,
    eos_text: String,
    /// Whether [`encode`](PromptFormat::encode) puts the BOS first.
    pub add_bos: bool,
    /// The model's own chat template, if it has one.
    template: Option<ChatTemplate>,
    plain: ChatTemplate,
    /// The tokenizer's special tokens, kept out of message content.
    specials: Specials,
    /// The tokenizer with special-token matching off (made when first needed).
    text_tokenizer: std::sync::OnceLock<tokenizers::Tokenizer>,
}

/// A token string in tokenizer_config.json: `"<s>"` or `{"content": "<s>", ...}`.
fn token_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

fn read_json(path: &Path) -> Result<Option<Value>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = read_file(path)?;
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| Error::model_from(format!("{}: not valid JSON: {e}", path.display()), e))
}

impl PromptFormat {
    /// From a model directory: tokenizer.json, and tokenizer_config.json,
    /// chat_template.jinja and config.json where present.
    pub fn from_dir(dir: &Path) -> Result<PromptFormat> {
        let tok_path = dir.join("tokenizer.json");
        let tokenizer = tokenizers::Tokenizer::from_file(&tok_path)
            .map_err(|e| Error::Tokenizer { path: tok_path.display().to_string(), msg: e.to_string() })?;
        let tc_path = dir.join("tokenizer_config.json");
        let tc = read_json(&tc_path)?;
        let config = read_json(&dir.join("config.json"))?;
        let jinja = dir.join("chat_template.jinja");
        let template = if jinja.is_file() {
            let src = String::from_utf8(read_file(&jinja)?)
                .map_err(|_| Error::model(format!("{}: not UTF-8", jinja.display())))?;
            Some(ChatTemplate::new(&src, &jinja.display().to_string())?)
        } else {
            match tc.as_ref().and_then(|t| t.get("chat_template")) {
                Some(Value::String(s)) => Some(ChatTemplate::new(s, &tc_path.display().to_string())?),
                // A list of named templates: the one called "default", else the first.
                Some(Value::Array(list)) => {
                    let named = |n: &str| list.iter().find(|t| t.get("name").and_then(Value::as_str) == Some(n));
                    match named("default").or(list.first()).and_then(|t| t.get("template")).and_then(Value::as_str) {
                        Some(s) => Some(ChatTemplate::new(s, &tc_path.display().to_string())?),
                        None => None,
                    }
                }
                _ => None,
            }
        };
        PromptFormat::new(tokenizer, tc.as_ref(), config.as_ref(), template)
    }

    /// From parts: the tokenizer, tokenizer_config.json and config.json (either may be absent),
    /// and the chat template if any.
    pub fn new(
        tokenizer: tokenizers::Tokenizer,
        tokenizer_config: Option<&Value>,
        config: Option<&Value>,
        template: Option<ChatTemplate>,
    ) -> Result<PromptFormat> {
        // BOS: tokenizer_config's bos_token (an explicit null means none), else config.json's id.
        let tc_bos = tokenizer_config.and_then(|t| t.get("bos_token"));
        let bos = match tc_bos {
            Some(v) => token_text(Some(v)).and_then(|s| tokenizer.token_to_id(&s)),
            None => token_ids(config.and_then(|c| c.get("bos_token_id"))).first().copied(),
        }
        .map(TokenId);
        let bos_text = bos.and_then(|b| tokenizer.id_to_token(b.0)).unwrap_or_default();
        let eos_text = token_text(tokenizer_config.and_then(|t| t.get("eos_token")))
            .or_else(|| {
                let id = token_ids(config.and_then(|c| c.get("eos_token_id"))).first().copied()?;
                tokenizer.id_to_token(id)
            })
            .unwrap_or_default();
        let add_bos = match tokenizer_config.and_then(|t| t.get("add_bos_token")).and_then(Value::as_bool) {
            Some(b) => b && bos.is_some(),
            None => match bos {
                // Does the post-processor put it first?
                Some(b) => tokenizer
                    .encode("a", true)
                    .ok()
                    .is_some_and(|e| e.get_ids().first() == Some(&b.0) && e.get_ids().len() > 1),
                None => false,
            },
        };
        let specials = Specials::new(&tokenizer);
        Ok(PromptFormat {
            tokenizer,
            bos,
            bos_text,
            eos_text,
            add_bos,
            template,
            plain: ChatTemplate::plain(),
            specials,
            text_tokenizer: std::sync::OnceLock::new(),
        })
    }

    /// The prompt's tokens: the BOS (when [`add_bos`](Self::add_bos)), then `text` as the
    /// tokenizer splits it.
    pub fn encode(&self, text: &str) -> Result<Vec<TokenId>> {
        let mut ids = Vec::new();
        if self.add_bos {
            ids.extend(self.bos);
        }
        ids.extend(self.encode_raw(text)?);
        Ok(ids)
    }

    /// [`encode`](Self::encode), with special-token spellings in `text` encoded as `content`
    /// says ([`ContentTokens::Text`]: as text).
    pub fn encode_with(&self, text: &str, content: ContentTokens) -> Result<Vec<TokenId>> {
        if content == ContentTokens::Control {
            return self.encode(text);
        }
        let mut ids = Vec::new();
        if self.add_bos {
            ids.extend(self.bos);
        }
        let e = self
            .text_tokenizer()
            .encode(text, false)
            .map_err(|e| Error::Tokenizer { path: "prompt".into(), msg: e.to_string() })?;
        ids.extend(e.get_ids().iter().map(|&i| TokenId(i)));
        Ok(ids)
    }

    /// The tokenizer with special-token matching off.
    fn text_tokenizer(&self) -> &tokenizers::Tokenizer {
        self.text_tokenizer.get_or_init(|| {
            let mut t = self.tokenizer.clone();
            t.set_encode_special_tokens(true);
            t
        })
    }

    /// `text` as the tokenizer splits it, nothing added.
    pub fn encode_raw(&self, text: &str) -> Result<Vec<TokenId>> {
        let e = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| Error::Tokenizer { path: "prompt".into(), msg: e.to_string() })?;
        Ok(e.get_ids().iter().map(|&i| TokenId(i)).collect())
    }

    /// Replaces the chat template (a `--chat-template` file given in place of the model's).
    pub fn set_chat_template(&mut self, template: ChatTemplate) {
        self.template = Some(template);
    }

    /// Whether the model brings its own chat template (else [`PLAIN_TEMPLATE`](super::chat::PLAIN_TEMPLATE) is used).
    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    /// Whether the chat template in use renders tools and tool calls
    /// ([`ChatTemplate::takes_tools`]; the plain one does).
    pub fn chat_takes_tools(&self) -> bool {
        self.chat_template().takes_tools()
    }

    /// Whether the chat template in use renders tools, the history's calls or not
    /// ([`ChatTemplate::renders_tools`]).
    pub fn chat_renders_tools(&self) -> bool {
        self.chat_template().renders_tools()
    }

    /// The chat rendered as text with `tools` (none if empty): the model's template, or the
    /// plain one.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
    ) -> Result<String> {
        self.render_chat_with_vars(messages, tools, add_generation_prompt, &TemplateVars::new())
    }

    /// [`render_chat`](Self::render_chat) with more template variables
    /// ([`ChatTemplate::render_with_vars`]).
    pub fn render_chat_with_vars(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
        vars: &TemplateVars,
    ) -> Result<String> {
        let t = self.chat_template();
        t.render_with_vars(messages, tools, add_generation_prompt, &self.bos_text, &self.eos_text, vars)
    }

    /// The markers the chat template's model reasons between, if it does
    /// ([`Reasoning::detect`]).
    pub fn reasoning(&self) -> Option<Reasoning> {
        Reasoning::detect(self.chat_template().source())
    }

    /// [`reasoning`](Self::reasoning), with where `prompt` (a chat this template rendered,
    /// ending where the reply begins) leaves it.
    pub fn reasoning_after(&self, prompt: &str) -> Option<PromptReasoning> {
        self.reasoning().map(|markers| {
            let phase = markers.phase(prompt);
            PromptReasoning { markers, phase }
        })
    }

    /// The chat's tokens: [`render_chat`](Self::render_chat), encoded with nothing added, the
    /// messages' and tools' text as text ([`ContentTokens::Text`]).
    pub fn encode_chat(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
    ) -> Result<Vec<TokenId>> {
        self.encode_chat_with(messages, tools, add_generation_prompt, ContentTokens::Text)
    }

    /// [`encode_chat`](Self::encode_chat), with special-token spellings in the messages and
    /// tools encoded as `content` says.
    pub fn encode_chat_with(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
        content: ContentTokens,
    ) -> Result<Vec<TokenId>> {
        self.encode_prompt(&self.render_chat_prompt(messages, tools, add_generation_prompt, content)?)
    }

    /// The chat rendered for [`encode_prompt`](Self::encode_prompt): with
    /// [`ContentTokens::Text`], special-token spellings in the caller's strings (messages,
    /// tool calls, tools) are marked so that they encode as text; see [`super::content`].
    pub fn render_chat_prompt(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
        content: ContentTokens,
    ) -> Result<ChatPrompt> {
        self.render_chat_prompt_with_vars(messages, tools, add_generation_prompt, content, &TemplateVars::new())
    }

    /// [`render_chat_prompt`](Self::render_chat_prompt) with more template variables
    /// ([`ChatTemplate::render_with_vars`]).
    pub fn render_chat_prompt_with_vars(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
        content: ContentTokens,
        vars: &TemplateVars,
    ) -> Result<ChatPrompt> {
        let json = |e: serde_json::Error| Error::param(format!("the chat does not serialize: {e}"));
        let (mv, tv) = (serde_json::to_value(messages).map_err(json)?, serde_json::to_value(tools).map_err(json)?);
        if content == ContentTokens::Control || !self.specials.occur_in(&[&mv, &tv]) {
            return Ok(ChatPrompt::plain(self.render_chat_with_vars(messages, tools, add_generation_prompt, vars)?));
        }
        let source = Value::String(self.chat_template().source().to_string());
        let escapes = self.specials.escapes_for(&[&mv, &tv, &source])?;
        let messages: Vec<ChatMessage> =
            serde_json::from_value(self.specials.escape_value(&mv, &escapes)).map_err(json)?;
        let tools: Vec<ChatTool> = serde_json::from_value(self.specials.escape_value(&tv, &escapes)).map_err(json)?;
        Ok(escapes.prompt(self.render_chat_with_vars(&messages, &tools, add_generation_prompt, vars)?))
    }

    /// A rendered chat's tokens, nothing added: the template's special-token spellings as
    /// control tokens, the caller's as text.
    pub fn encode_prompt(&self, prompt: &ChatPrompt) -> Result<Vec<TokenId>> {
        let (marked, escapes) = prompt.parts();
        let Some(escapes) = escapes else { return self.encode_raw(marked) };
        let err = |e: tokenizers::Error| Error::Tokenizer { path: "prompt".into(), msg: e.to_string() };
        let text_tokenizer = self.text_tokenizer();
        let mut ids = Vec::new();
        let stretch = |ids: &mut Vec<TokenId>, text: &str| -> Result<()> {
            if !text.is_empty() {
                let e = text_tokenizer.encode(escapes.restore(text), false).map_err(err)?;
                ids.extend(e.get_ids().iter().map(|&i| TokenId(i)));
            }
            Ok(())
        };
        // The template's control tokens, and the stretches between them.
        let e = self.tokenizer.encode(marked, false).map_err(err)?;
        let mut at = 0;
        for (&id, &(start, end)) in e.get_ids().iter().zip(e.get_offsets()) {
            if self.specials.is_special(id) && start >= at {
                stretch(&mut ids, &marked[at..start])?;
                ids.push(TokenId(id));
                at = end;
            }
        }
        stretch(&mut ids, &marked[at..])?;
        Ok(ids)
    }

    /// The source of the chat template in use (the model's, or the plain one).
    pub fn chat_template_source(&self) -> &str {
        self.chat_template().source()
    }

    fn chat_template(&self) -> &ChatTemplate {
        self.template.as_ref().unwrap_or(&self.plain)
    }

    /// The tokenizer, for callers that need more of it.
    pub fn tokenizer(&self) -> &tokenizers::Tokenizer {
        &self.tokenizer
    }
}

impl std::fmt::Debug for PromptFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PromptFormat(bos {:?}, add_bos {}, chat template {})",
            self.bos,
            self.add_bos,
            self.template.is_some()
        )
    }
}

/// What `generation_config.json` asks for. Every field is optional; [`sampling`](Self::sampling)
/// lays the ones present over [`SamplingParams::default`] (as [`SamplingOverrides`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationDefaults {
    /// Extra end-of-sequence ids (`eos_token_id`, one or a list).
    pub eos: Vec<TokenId>,
    pub do_sample: Option<bool>,
    pub temperature: Option<f32>,
    pub top_k: Option<usize>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub max_new_tokens: Option<usize>,
}

impl GenerationDefaults {
    /// Reads `dir/generation_config.json`; all defaults when there is none.
    pub fn from_dir(dir: &Path) -> Result<GenerationDefaults> {
        let path = dir.join("generation_config.json");
        Ok(read_json(&path)?.map(|v| GenerationDefaults::from_json(&v)).unwrap_or_default())
    }

    pub fn from_json(v: &Value) -> GenerationDefaults {
        let f = |k: &str| v.get(k).and_then(Value::as_f64).map(|x| x as f32);
        let u = |k: &str| v.get(k).and_then(Value::as_u64).map(|x| x as usize);
        GenerationDefaults {
            eos: token_ids(v.get("eos_token_id")).into_iter().map(TokenId).collect(),
            do_sample: v.get("do_sample").and_then(Value::as_bool),
            temperature: f("temperature"),
            top_k: u("top_k"),
            top_p: f("top_p"),
            min_p: f("min_p"),
            repetition_penalty: f("repetition_penalty"),
            max_new_tokens: u("max_new_tokens"),
        }
    }

    /// The sampling knobs these defaults give: greedy when `do_sample` is explicitly false
    /// (as in transformers, keeping the repetition penalty), else [`overrides`](Self::overrides)
    /// over [`SamplingParams::default`]. (transformers also treats a missing `do_sample` as
    /// false; here a missing one leaves sampling on, the OpenAI default.)
    pub fn sampling(&self) -> SamplingParams {
        if self.do_sample == Some(false) {
            let penalty = SamplingOverrides { repetition_penalty: self.repetition_penalty, ..Default::default() };
            return penalty.over(SamplingParams::greedy());
        }
        self.overrides().over(SamplingParams::default())
    }

    /// The knobs `generation_config.json` sets: temperature, top-k, top-p, min-p and the
    /// repetition penalty.
    pub fn overrides(&self) -> SamplingOverrides {
        SamplingOverrides {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty,
            ..SamplingOverrides::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_defaults() {
        let g = GenerationDefaults::from_json(&serde_json::json!({
            "eos_token_id": [128001, 128009], "do_sample": true, "temperature": 0.6, "top_p": 0.9
        }));
        assert_eq!(g.eos, vec![TokenId(128001), TokenId(128009)]);
        let s = g.sampling();
        assert_eq!((s.temperature, s.top_p, s.top_k), (0.6, 0.9, None));
        let greedy = GenerationDefaults { do_sample: Some(false), temperature: Some(0.7), ..Default::default() };
        assert!(greedy.sampling().is_greedy());
        assert_eq!(GenerationDefaults::default().sampling(), SamplingParams::default());
    }
}
