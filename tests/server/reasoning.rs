//! Reasoning models through the server: the embedded model under a template written here in
//! the shape of Qwen3's and QwQ's (the generation prompt opens `<think>`, or with
//! `enable_thinking: false` pre-fills an empty `<think>\n\n</think>\n\n`). The reply is free
//! text up to `</think>`, then the constraint; the text before the marker comes back as
//! `reasoning_content`, blocking and streamed alike; `max_reasoning_tokens` forces the marker.

use super::*;

pub(crate) const THINKING_TEMPLATE: &str = "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n\
{% endfor %}{% if add_generation_prompt %}assistant: {% if enable_thinking is defined and not enable_thinking %}\
<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}{% endif %}";

fn thinking_app() -> Router {
    use strictly::model::{embedded, ChatTemplate, PromptFormat};
    let mut loaded = LoadedModel::embedded(&LoadOptions::default()).unwrap();
    let tok = tokenizers::Tokenizer::from_bytes(embedded::TOKENIZER).unwrap();
    let config = json!({"bos_token": "<s>", "eos_token": "</s>"});
    let template = ChatTemplate::new(THINKING_TEMPLATE, "thinking").unwrap();
    loaded.prompt = PromptFormat::new(tok, Some(&config), None, Some(template)).unwrap();
    app(AppState::new(loaded, ServerConfig::default()))
}

fn schema_body(seed: u64) -> Value {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
                        "required": ["n"], "additionalProperties": false});
    json!({"seed": seed, "max_tokens": 60, "max_reasoning_tokens": 12, "messages": msgs("Pick a number."),
           "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}})
}

fn number(content: &str) -> u64 {
    let v: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{content:?}: {e}"));
    let n = v["n"].as_u64().unwrap_or_else(|| panic!("{content:?}"));
    assert!(n <= 9 && v.as_object().unwrap().len() == 1, "{content:?}");
    n
}

#[tokio::test]
async fn reasoning_then_the_schema_with_the_reasoning_apart() {
    let app = thinking_app();
    for seed in 0..4 {
        let v = chat_ok(&app, schema_body(seed)).await;
        let m = &v["choices"][0]["message"];
        let reasoning = m["reasoning_content"].as_str().unwrap_or_else(|| panic!("no reasoning_content: {v}"));
        assert!(!reasoning.contains("</think>") && !reasoning.is_empty(), "{v}");
        number(m["content"].as_str().unwrap());
        assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
        // The reasoning took at most 12 tokens before the marker was forced: fewer than the
        // tokens the reply has in all (12 + the marker + the JSON).
        assert!(v["usage"]["completion_tokens"].as_u64().unwrap() < 60, "{v}");

        // Streamed: the same reasoning and content, in that order.
        let mut body = schema_body(seed);
        body["stream"] = json!(true);
        let (s, bytes) = call_raw(&app, "POST", "/v1/chat/completions", body.to_string().into_bytes()).await;
        assert_eq!(s, StatusCode::OK);
        let (mut r, mut c) = (String::new(), String::new());
        for line in String::from_utf8(bytes).unwrap().lines().filter_map(|l| l.strip_prefix("data: ")) {
            if line == "[DONE]" {
                continue;
            }
            let chunk: Value = serde_json::from_str(line).unwrap();
            let d = &chunk["choices"][0]["delta"];
            if let Some(t) = d["reasoning_content"].as_str() {
                assert!(c.is_empty(), "reasoning after content: {line}");
                r.push_str(t);
            }
            c.push_str(d["content"].as_str().unwrap_or(""));
        }
        assert_eq!((r.trim(), c.as_str()), (reasoning, m["content"].as_str().unwrap()), "seed {seed}");
    }
}

#[tokio::test]
async fn thinking_turned_off_is_the_answer_alone() {
    let app = thinking_app();
    for seed in 0..3 {
        let mut body = schema_body(seed);
        body["chat_template_kwargs"] = json!({"enable_thinking": false});
        let v = chat_ok(&app, body).await;
        let m = &v["choices"][0]["message"];
        assert!(m.get("reasoning_content").is_none(), "{v}");
        number(m["content"].as_str().unwrap());
    }
}

#[tokio::test]
async fn a_free_reply_is_split_too_and_bad_kwargs_are_named() {
    let app = thinking_app();
    let v = chat_ok(&app, json!({"seed": 1, "max_tokens": 30, "max_reasoning_tokens": 5})).await;
    let m = &v["choices"][0]["message"];
    // Five tokens of reasoning, then the forced marker, then the story goes on as content.
    assert!(m["reasoning_content"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
    assert!(m["content"].as_str().is_some_and(|c| !c.is_empty()), "{v}");
    for (kwargs, param) in
        [(json!([1]), "chat_template_kwargs"), (json!({"messages": []}), "chat_template_kwargs.messages")]
    {
        let (s, e) =
            post(&app, "/v1/chat/completions", json!({"messages": msgs("hi"), "chat_template_kwargs": kwargs})).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
        assert_eq!(e["error"]["param"], param, "{e}");
    }
    let (s, e) = post(&app, "/v1/chat/completions", json!({"messages": msgs("hi"), "max_reasoning_tokens": -1})).await;
    assert_eq!((s, e["error"]["param"].as_str()), (StatusCode::BAD_REQUEST, Some("max_reasoning_tokens")), "{e}");
}
