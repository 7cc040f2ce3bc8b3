//! Loading a [`Vocab`] from a Hugging Face `tokenizer.json`.
//!
//! The tokenizer's own token strings are not bytes: byte-level BPE (GPT-2, Llama 3, Qwen)
//! spells each byte as a printable character, SentencePiece models spell a space as `▁` and
//! unknown bytes as `<0xNN>` pieces. We undo those spellings here so every token id maps to the
//! exact bytes it adds to the output. Added tokens are plain text; special ones are kept apart.
//!
//! We also keep a copy of the tokenizer with the "prefix space" behaviours removed (SentencePiece
//! `Prepend("▁")`, `add_prefix_space`, `prepend_scheme`) and Unicode normalizers dropped, so that
//! `encode(text)` yields tokens whose bytes concatenate to exactly `text`; the matcher uses it
//! to tokenize forced text canonically.

use std::path::Path;

use serde_json::Value;

use super::{TokenId, TokenKind, Vocab};
use crate::error::{Error, Result};

/// How the model's token strings spell bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    /// GPT-2 byte↔unicode table (every byte is one printable char).
    ByteLevel,
    /// SentencePiece: `▁` is a space; `<0xNN>` pieces are single bytes when `byte_fallback`.
    Metaspace { byte_fallback: bool },
    /// Token strings are the text itself.
    Plain,
}

/// Names that models use for end-of-sequence tokens. Any of them present as a special token
/// counts as EOS, together with what the config files declare (generation configs of real
/// instruct models list several, e.g. Llama 3's `<|end_of_text|>`, `<|eom_id|>`, `<|eot_id|>`).
const EOS_NAMES: &[&str] = &[
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|end|>",
    "<eos>",
    "<end_of_turn>",
];

/// Control tokens that are part of a model's reply syntax rather than of the chat around it:
/// kept as text, so that grammars can write them (as one token) and the reply's text shows
/// them. Mistral's tokenizers mark `[TOOL_CALLS]`, which opens a reply's tool calls, special
/// (and the newer ones `[ARGS]` and `[CALL_ID]` inside a call), as DeepSeek's may its call
/// markers, Granite's its `<|tool_call|>` and Nemotron's its `<TOOLCALL>`; Qwen's
/// `<tool_call>` is plain text already.
pub const REPLY_MARKERS: &[&str] = &[
    "[TOOL_CALLS]",
    "<|tool_call|>",
    "<TOOLCALL>",
    "</TOOLCALL>",
    "[ARGS]",
    "[CALL_ID]",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
];

/// The markers models write their reasoning between, start then end (see
/// `model::reasoning`): reply syntax too, so kept as text where a tokenizer marks them special
/// (Mistral's `[THINK]`).
pub const REASONING_MARKERS: &[(&str, &str)] = &[
    ("<think>", "</think>"),
    ("<seed:think>", "</seed:think>"),
    ("[THINK]", "[/THINK]"),
    ("<|inner_prefix|>", "<|inner_suffix|>"),
    ("<|channel>thought", "<channel|>"),
];

/// gpt-oss's harmony format, in a vocabulary that has `<|channel|>` and `<|constrain|>`: a
/// reply's messages are headed by `<|start|>`, `<|channel|>`, `<|constrain|>` and `<|message|>`
/// and ended by `<|end|>` (see `tools::harmony`), all reply syntax, so kept as text; `<|end|>`
/// ends a message, not the reply (there it is no EOS, as it is for Phi-3), and
/// [`HARMONY_EOS`] end the reply.
pub const HARMONY_MARKERS: &[&str] = &["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>"];

/// What ends a harmony reply: the final answer (`<|return|>`) or a tool call (`<|call|>`).
const HARMONY_EOS: &[&str] = &["<|return|>", "<|call|>"];

/// Whether a tokenizer.json is harmony's (an added `<|channel|>` and `<|constrain|>`).
fn is_harmony(json: &Value) -> bool {
    let added: Vec<&str> = json
        .get("added_tokens")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("content").and_then(Value::as_str))
        .collect();
    added.contains(&"<|channel|>") && added.contains(&"<|constrain|>")
}

/// Whether an added token is reply syntax ([`REPLY_MARKERS`], [`REASONING_MARKERS`], and in a
/// harmony vocabulary [`HARMONY_MARKERS`]).
fn is_reply_marker(name: &str, harmony: bool) -> bool {
    REPLY_MARKERS.contains(&name)
        || REASONING_MARKERS.iter().any(|&(s, e)| s == name || e == name)
        || (harmony && HARMONY_MARKERS.contains(&name))
}

pub(super) fn load(path: &Path) -> Result<Vocab> {
    let err = |msg: String| Error::Tokenizer { path: path.display().to_string(), msg };
    let text = std::fs::read(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let configs = Configs::read(path.parent().unwrap_or(Path::new(".")));
    load_bytes(&text, &path.display().to_string(), configs)
}

/// The embedded default vocabulary: the stories260K model's tokenizer (see assets/).
pub(super) fn embedded() -> Vocab {
    const TOKENIZER: &[u8] = include_bytes!("../../assets/stories260K/tokenizer.json");
    let configs = Configs { eos_ids: vec![2], bos: Some("<s>".into()), ..Configs::default() };
    load_bytes(TOKENIZER, "<embedded stories260K>", configs).expect("the embedded tokenizer loads")
}

fn load_bytes(text: &[u8], name: &str, configs: Configs) -> Result<Vocab> {
    let err = |msg: String| Error::Tokenizer { path: name.to_string(), msg };
    let text = std::str::from_utf8(text).map_err(|e| err(format!("not UTF-8: {e}")))?;
    let json: Value = serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
    load_value(json, name, configs)
}

/// A tokenizer.json built from a GGUF file's metadata (see `gguf`): its EOS ids and BOS token
/// come from the metadata instead of config files.
pub(super) fn load_synthesized(json: Value, name: &str, eos_ids: Vec<u32>, bos: Option<String>) -> Result<Vocab> {
    load_value(json, name, Configs { eos_ids, bos, ..Configs::default() })
}

fn load_value(json: Value, name: &str, configs: Configs) -> Result<Vocab> {
    let err = |msg: String| Error::Tokenizer { path: name.to_string(), msg };
    let model = json.get("model").filter(|m| m.is_object()).ok_or_else(|| err("no \"model\" object".into()))?;
    if !model.get("vocab").is_some_and(|v| v.is_object() || v.is_array()) {
        return Err(err("\"model\" has no \"vocab\"".into()));
    }
    let spelling = spelling_of(&json);
    let mut declared_special: Vec<&str> = configs.special_names();
    declared_special.extend(EOS_NAMES);

    let exact = byte_exact_tokenizer(json.clone(), &declared_special).map_err(err)?;
    let full: std::collections::HashMap<String, u32> = exact.get_vocab(true);
    let n = full.values().copied().max().map_or(0, |m| m as usize + 1);
    if n == 0 {
        return Err(err("empty vocabulary".into()));
    }
    if n > 1 << 24 {
        return Err(Error::limit(crate::error::LimitKind::Vocabulary, "vocabulary size", 1 << 24));
    }
    let mut names = vec![String::new(); n];
    for (s, &id) in &full {
        names[id as usize] = s.clone();
    }

    // Added tokens: literal text; `special` (or a name the configs declare special) kept apart.
    let harmony = is_harmony(&json);
    let mut added = std::collections::HashMap::new();
    for a in json.get("added_tokens").and_then(Value::as_array).into_iter().flatten() {
        let (Some(id), Some(content)) = (a.get("id").and_then(Value::as_u64), a.get("content").and_then(Value::as_str))
        else {
            continue;
        };
        let special = a.get("special").and_then(Value::as_bool).unwrap_or(false);
        if (id as usize) < n {
            added.insert(id as u32, (content.to_string(), special));
        }
    }

    let mut bytes = Vec::with_capacity(n);
    let mut kinds = Vec::with_capacity(n);
    for (id, name) in names.iter().enumerate() {
        if name.is_empty() && !full.contains_key("") {
            bytes.push(Vec::new());
            kinds.push(TokenKind::Unused);
            continue;
        }
        match added.get(&(id as u32)) {
            Some((content, special)) => {
                let special =
                    (*special || declared_special.contains(&content.as_str())) && !is_reply_marker(content, harmony);
                bytes.push(content.as_bytes().to_vec());
                kinds.push(if special { TokenKind::Special } else { TokenKind::Text });
            }
            None => {
                bytes.push(spell(spelling, name));
                kinds.push(TokenKind::Text);
            }
        }
    }

    let mut eos: Vec<TokenId> = configs.eos_ids(&full);
    let eos_names = EOS_NAMES.iter().chain(if harmony { HARMONY_EOS } else { &[] });
    for name in eos_names.filter(|&&n| !(harmony && HARMONY_MARKERS.contains(&n))) {
        if let Some(&id) = full.get(*name) {
            if added.contains_key(&id) && !eos.contains(&TokenId(id)) {
                eos.push(TokenId(id));
            }
        }
    }
    if harmony {
        // A message's end is no reply's end, whatever a config says.
        eos.retain(|t| !HARMONY_MARKERS.iter().any(|m| full.get(*m) == Some(&t.0)));
    }
    for &TokenId(e) in &eos {
        // An EOS token is a control token even if the file forgot to say so (Phi-3's `</s>`).
        if let Some(k) = kinds.get_mut(e as usize) {
            *k = TokenKind::Special;
        }
    }
    eos.retain(|t| (t.0 as usize) < n);
    eos.sort();
    eos.dedup();
    let bos = configs.bos.as_deref().and_then(|b| full.get(b)).map(|&i| TokenId(i));

    let mut vocab = Vocab::from_parts(bytes, kinds, eos, bos);
    vocab.names = names;
    vocab.encoder = Some(exact);
    Ok(vocab)
}

fn spelling_of(json: &Value) -> Spelling {
    let mut types = Vec::new();
    for key in ["decoder", "pre_tokenizer"] {
        collect_types(json.get(key), &mut types);
    }
    if types.iter().any(|t| t == "ByteLevel") {
        return Spelling::ByteLevel;
    }
    let byte_fallback = json["model"].get("byte_fallback").and_then(Value::as_bool).unwrap_or(false);
    let meta = types.iter().any(|t| t == "Metaspace")
        || json.get("decoder").is_some_and(|d| d.to_string().contains('\u{2581}'))
        || json.get("normalizer").is_some_and(|d| d.to_string().contains('\u{2581}'));
    if meta || byte_fallback {
        Spelling::Metaspace { byte_fallback }
    } else {
        Spelling::Plain
    }
}

fn collect_types(v: Option<&Value>, out: &mut Vec<String>) {
    let Some(v) = v else { return };
    if let Some(t) = v.get("type").and_then(Value::as_str) {
        out.push(t.to_string());
    }
    for key in ["decoders", "pretokenizers"] {
        for x in v.get(key).and_then(Value::as_array).into_iter().flatten() {
            collect_types(Some(x), out);
        }
    }
}

/// The bytes a model-vocabulary token string stands for.
fn spell(spelling: Spelling, name: &str) -> Vec<u8> {
    match spelling {
        Spelling::ByteLevel => {
            let table = unicode_to_byte();
            let mut out = Vec::with_capacity(name.len());
            for c in name.chars() {
                match table.get(&c) {
                    Some(&b) => out.push(b),
                    // Not in the byte alphabet: the token is plain text after all.
                    None => return name.as_bytes().to_vec(),
                }
            }
            out
        }
        Spelling::Metaspace { byte_fallback } => {
            if byte_fallback {
                if let Some(b) = byte_fallback_piece(name) {
                    return vec![b];
                }
            }
            name.replace('\u{2581}', " ").into_bytes()
        }
        Spelling::Plain => name.as_bytes().to_vec(),
    }
}

/// `<0xNN>` → the byte NN.
fn byte_fallback_piece(name: &str) -> Option<u8> {
    let hex = name.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's table: printable bytes stand for themselves, the others are shifted to U+0100.. .
fn unicode_to_byte() -> &'static std::collections::HashMap<char, u8> {
    static TABLE: std::sync::OnceLock<std::collections::HashMap<char, u8>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut map = std::collections::HashMap::new();
        let mut shift = 0u32;
        for b in 0..=255u8 {
            let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
            let c = if printable {
                char::from(b)
            } else {
                shift += 1;
                char::from_u32(255 + shift).unwrap()
            };
            map.insert(c, b);
        }
        map
    })
}

/// GPT-2's table the other way: byte → its printable character.
#[cfg(test)]
pub(super) fn byte_to_unicode_for_tests() -> Vec<char> {
    let mut out = vec!['\0'; 256];
    for (&c, &b) in unicode_to_byte() {
        out[b as usize] = c;
    }
    out
}

/// The tokenizer with prefix-space and normalization behaviours removed, so that the bytes of
/// `encode(text)` concatenate to exactly `text` (SentencePiece's `' '→'▁'` replacement stays:
/// the vocabulary needs it).
fn byte_exact_tokenizer(mut json: Value, special_names: &[&str]) -> Result<tokenizers::Tokenizer, String> {
    fn fix_normalizer(n: &mut Value) -> bool {
        // Returns false if this normalizer should be dropped.
        match n.get("type").and_then(Value::as_str) {
            Some("Prepend") | Some("NFC") | Some("NFD") | Some("NFKC") | Some("NFKD") | Some("Lowercase") => false,
            Some("Sequence") => {
                if let Some(list) = n.get_mut("normalizers").and_then(Value::as_array_mut) {
                    list.retain_mut(fix_normalizer);
                }
                true
            }
            _ => true,
        }
    }
    fn fix_pre(p: &mut Value) {
        if let Some(obj) = p.as_object_mut() {
            if obj.contains_key("add_prefix_space") {
                obj.insert("add_prefix_space".into(), Value::Bool(false));
            }
            if obj.contains_key("prepend_scheme") {
                obj.insert("prepend_scheme".into(), Value::String("never".into()));
            }
            if let Some(list) = obj.get_mut("pretokenizers").and_then(Value::as_array_mut) {
                list.iter_mut().for_each(fix_pre);
            }
        }
    }
    if let Some(n) = json.get_mut("normalizer") {
        if !fix_normalizer(n) {
            *n = Value::Null;
        }
    }
    if let Some(p) = json.get_mut("pre_tokenizer") {
        fix_pre(p);
    }
    // Added tokens: no whitespace stripping around them, and the ones we treat as control
    // tokens are marked special so that (below) their spelling in text stays text.
    let harmony = is_harmony(&json);
    for a in json.get_mut("added_tokens").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(obj) = a.as_object_mut() {
            obj.insert("lstrip".into(), Value::Bool(false));
            obj.insert("rstrip".into(), Value::Bool(false));
            let name = obj.get("content").and_then(Value::as_str).unwrap_or("");
            if is_reply_marker(name, harmony) {
                obj.insert("special".into(), Value::Bool(false));
            } else if special_names.contains(&name) {
                obj.insert("special".into(), Value::Bool(true));
            }
        }
    }
    // Post-processors add BOS/EOS; we never want them here.
    if let Some(obj) = json.as_object_mut() {
        obj.insert("post_processor".into(), Value::Null);
    }
    let text = serde_json::to_string(&json).map_err(|e| e.to_string())?;
    // The tokenizers library can panic on a malformed file (e.g. an arithmetic overflow in the
    // BPE builder for an odd `continuing_subword_prefix`): that is bad input, not a crash.
    let parsed = std::panic::catch_unwind(|| text.parse::<tokenizers::Tokenizer>())
        .map_err(|_| "cannot load: the tokenizers library failed on this file (malformed model section)".to_string())?;
    let mut tok = parsed.map_err(|e| format!("cannot load: {e}"))?;
    // Text that happens to spell a special token (`</s>`) stays text.
    tok.set_encode_special_tokens(true);
    Ok(tok)
}

/// What the config files beside `tokenizer.json` say about special tokens.
#[derive(Default)]
struct Configs {
    eos_names: Vec<String>,
    eos_ids: Vec<u32>,
    bos: Option<String>,
    other_special: Vec<String>,
}

impl Configs {
    fn read(dir: &Path) -> Configs {
        let read = |name: &str| -> Option<Value> {
            let text = std::fs::read_to_string(dir.join(name)).ok()?;
            serde_json::from_str(&text).ok()
        };
        let token_name = |v: &Value| -> Option<String> {
            v.as_str().map(str::to_string).or_else(|| v.get("content").and_then(Value::as_str).map(str::to_string))
        };
        let mut c = Configs::default();
        for file in ["tokenizer_config.json", "special_tokens_map.json"] {
            let Some(cfg) = read(file) else { continue };
            if let Some(e) = cfg.get("eos_token").and_then(token_name) {
                c.eos_names.push(e);
            }
            if c.bos.is_none() {
                c.bos = cfg.get("bos_token").and_then(token_name);
            }
            for key in ["unk_token", "pad_token", "bos_token"] {
                if let Some(name) = cfg.get(key).and_then(token_name) {
                    c.other_special.push(name);
                }
            }
        }
        for file in ["generation_config.json", "config.json"] {
            let Some(cfg) = read(file) else { continue };
            match cfg.get("eos_token_id") {
                Some(Value::Number(n)) => c.eos_ids.extend(n.as_u64().map(|x| x as u32)),
                Some(Value::Array(a)) => c.eos_ids.extend(a.iter().filter_map(Value::as_u64).map(|x| x as u32)),
                _ => {}
            }
        }
        c
    }

    fn special_names(&self) -> Vec<&str> {
        self.eos_names.iter().chain(&self.other_special).map(String::as_str).collect()
    }

    fn eos_ids(&self, vocab: &std::collections::HashMap<String, u32>) -> Vec<TokenId> {
        let mut out: Vec<TokenId> = self.eos_ids.iter().map(|&i| TokenId(i)).collect();
        out.extend(self.eos_names.iter().filter_map(|n| vocab.get(n)).map(|&i| TokenId(i)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_byte_table_round_trips() {
        let t = unicode_to_byte();
        assert_eq!(t.len(), 256);
        assert_eq!(t[&'Ġ'], b' ');
        assert_eq!(t[&'Ċ'], b'\n');
        assert_eq!(t[&'A'], b'A');
        assert_eq!(spell(Spelling::ByteLevel, "ĠHello"), b" Hello");
    }

    #[test]
    fn metaspace_and_byte_fallback() {
        let s = Spelling::Metaspace { byte_fallback: true };
        assert_eq!(spell(s, "▁the"), b" the");
        assert_eq!(spell(s, "<0x0A>"), b"\n");
        assert_eq!(spell(s, "<0xE2>"), vec![0xE2]);
        assert_eq!(spell(Spelling::Metaspace { byte_fallback: false }, "<0x0A>"), b"<0x0A>");
    }
}
