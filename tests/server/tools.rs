//! Oneshot requests with tools: required, named, auto and none; each chat template's call
//! format; the plain template's tool list.

use super::*;

#[tokio::test]
async fn tool_calls_required_named_auto_and_none() {
    let app = app(state(ServerConfig::default()));
    let tools = json!([weather_tool(), time_tool()]);
    for seed in 0..3 {
        let v = chat_ok(
            &app,
            json!({"seed": seed, "messages": msgs("Weather in Paris?"), "tools": tools, "tool_choice": "required"}),
        )
        .await;
        let c = &v["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{v}");
        let calls = c["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("{v}"));
        assert!(!calls.is_empty() && calls.len() <= 8, "{v}");
        for call in calls {
            check_call(call);
        }
        // Named, one call.
        let v = chat_ok(
            &app,
            json!({"seed": seed, "messages": msgs("Time?"), "tools": tools, "parallel_tool_calls": false,
            "tool_choice": {"type": "function", "function": {"name": "get_time"}}}),
        )
        .await;
        let calls = v["choices"][0]["message"]["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1, "{v}");
        assert_eq!(check_call(&calls[0]), "get_time");
        assert!(v["choices"][0]["message"]["content"].is_null(), "{v}");
        // Auto: text or calls, each call valid.
        let v = chat_ok(&app, json!({"seed": seed, "max_tokens": 40, "tools": tools})).await;
        let m = &v["choices"][0]["message"];
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            check_call(call);
        }
        // None: plain text, never parsed for calls.
        let v = chat_ok(&app, json!({"seed": seed, "max_tokens": 10, "tools": tools, "tool_choice": "none"})).await;
        assert!(v["choices"][0]["message"].get("tool_calls").is_none(), "{v}");
    }
    // A tool without parameters takes none: the arguments are exactly {}.
    let bare = json!([{"type": "function", "function": {"name": "ping"}}]);
    let v = chat_ok(&app, json!({"tools": bare, "tool_choice": "required", "parallel_tool_calls": false})).await;
    let call = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "ping");
    assert_eq!(serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(), json!({}));
    // The history may hold calls and their results.
    let history = json!([
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"c\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"},
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}
    ]);
    chat_ok(&app, json!({"messages": history, "tools": tools, "max_tokens": 10})).await;
}

/// The server follows the chat template's tool-call format too: with a Llama 3-shaped
/// template the calls are constrained and read as bare `{"name", "parameters"}` objects (one
/// per reply), with a Mistral-shaped one as `[TOOL_CALLS] [...]`, with a Qwen3-Coder-shaped
/// one as XML parameter elements (a string value bare, an integer as JSON), with a pythonic one
/// as `[move_to(x=3, label="a")]`; either way they
/// come out as OpenAI `tool_calls` whose arguments are JSON, blocking and streamed.
#[tokio::test]
async fn tool_calls_follow_the_templates_format() {
    use crate::tool_formats::{
        HARMONY_STYLE_TEMPLATE, LLAMA3_STYLE_TEMPLATE, MISTRAL_STYLE_TEMPLATE, PYTHONIC_STYLE_TEMPLATE,
        XML_STYLE_TEMPLATE,
    };
    use strictly::model::{embedded, ChatTemplate, PromptFormat};
    let tools = json!([{"type": "function", "function": {"name": "move_to", "parameters":
        {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9},
                                          "label": {"type": "string", "maxLength": 6}}, "required": ["x"]}}}]);
    let templates = [
        (LLAMA3_STYLE_TEMPLATE, 1),
        (MISTRAL_STYLE_TEMPLATE, 8),
        (XML_STYLE_TEMPLATE, 8),
        (PYTHONIC_STYLE_TEMPLATE, 8),
        (HARMONY_STYLE_TEMPLATE, 1),
    ];
    for (template, most) in templates {
        let mut loaded = LoadedModel::embedded(&LoadOptions::default()).unwrap();
        let tok = tokenizers::Tokenizer::from_bytes(embedded::TOKENIZER).unwrap();
        let config = json!({"bos_token": "<s>", "eos_token": "</s>"});
        loaded.prompt =
            PromptFormat::new(tok, Some(&config), None, Some(ChatTemplate::new(template, "t").unwrap())).unwrap();
        let app = app(AppState::new(loaded, ServerConfig::default()));
        for seed in 0..3 {
            let body = json!({"seed": seed, "max_tokens": 160, "messages": [{"role": "user", "content": "Go"}],
                              "tools": tools, "tool_choice": "required"});
            let v = chat_ok(&app, body.clone()).await;
            let c = &v["choices"][0];
            assert_eq!(c["finish_reason"], "tool_calls", "{v}");
            assert!(c["message"]["content"].is_null(), "{v}");
            let calls = c["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("{v}"));
            assert!(!calls.is_empty() && calls.len() <= most, "{v}");
            for call in calls {
                assert_eq!(call["function"]["name"], "move_to", "{v}");
                let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                assert!(args["x"].as_u64().is_some_and(|x| x <= 9), "{v}");
                assert!(args.get("label").is_none_or(|l| l.as_str().is_some_and(|l| l.chars().count() <= 6)), "{v}");
            }
            // Streamed: the same calls, in OpenAI's chunks.
            let mut stream = body.clone();
            stream["stream"] = json!(true);
            let (s, bytes) = call_raw(&app, "POST", "/v1/chat/completions", stream.to_string().into_bytes()).await;
            assert_eq!(s, StatusCode::OK);
            let text = String::from_utf8(bytes).unwrap();
            let mut args = vec![String::new(); calls.len()];
            for line in text.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|l| *l != "[DONE]") {
                let chunk: Value = serde_json::from_str(line).unwrap();
                for d in chunk["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten() {
                    args[d["index"].as_u64().unwrap() as usize]
                        .push_str(d["function"]["arguments"].as_str().unwrap_or(""));
                }
            }
            let blocking: Vec<&str> = calls.iter().map(|c| c["function"]["arguments"].as_str().unwrap()).collect();
            assert_eq!(args, blocking, "{text}");
        }
    }
}

/// The embedded model has no chat template: the plain one lists the offered tools (names and
/// parameter names), so the prompt is longer with tools than with `tool_choice: none`.
#[tokio::test]
async fn the_plain_template_lists_the_tools() {
    let app = app(state(ServerConfig::default()));
    let tools = json!([weather_tool(), time_tool()]);
    let prompt_tokens = |v: &Value| v["usage"]["prompt_tokens"].as_u64().unwrap();
    let none = chat_ok(&app, json!({"max_tokens": 1, "tools": tools, "tool_choice": "none"})).await;
    let auto = chat_ok(&app, json!({"max_tokens": 1, "tools": tools})).await;
    let listed = "tools: get_weather(city, unit), get_time(zone); to call one, write \
                  <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>\n\n";
    let loaded = LoadedModel::embedded(&LoadOptions::default()).unwrap();
    let extra = loaded.prompt.encode_raw(listed).unwrap().len() as u64;
    assert!(prompt_tokens(&auto) >= prompt_tokens(&none) + extra - 2, "{auto} vs {none}");
}

/// `tool_choice: {"type": "allowed_tools", ...}`: the prompt describes every tool (the same
/// prompt as without it), the calls are of the allowed ones only; a name not among the tools,
/// an empty list or another mode is a 400 naming the field.
#[tokio::test]
async fn allowed_tools_restrict_the_calls_not_the_prompt() {
    let app = app(state(ServerConfig::default()));
    let tools = json!([weather_tool(), time_tool()]);
    let allowed = |mode: &str, names: &[&str]| {
        let list: Vec<Value> = names.iter().map(|n| json!({"type": "function", "function": {"name": n}})).collect();
        json!({"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": list}})
    };
    let prompt_tokens = |v: &Value| v["usage"]["prompt_tokens"].as_u64().unwrap();
    let plain = chat_ok(&app, json!({"max_tokens": 60, "tools": tools, "tool_choice": "auto"})).await;
    let only_time =
        chat_ok(&app, json!({"max_tokens": 60, "tools": tools, "tool_choice": allowed("auto", &["get_time"])})).await;
    assert_eq!(prompt_tokens(&only_time), prompt_tokens(&plain), "every tool is still described");
    for seed in 0..4 {
        let body = json!({"seed": seed, "messages": msgs("Weather in Paris?"), "tools": tools,
                          "tool_choice": allowed("required", &["get_time"])});
        let v = chat_ok(&app, body).await;
        let calls = v["choices"][0]["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("{v}"));
        assert!(!calls.is_empty(), "{v}");
        for call in calls {
            assert_eq!(check_call(call), "get_time", "{v}");
        }
    }
    for (choice, param) in [
        (allowed("required", &["nope"]), "tool_choice.allowed_tools.tools[0]"),
        (allowed("required", &[]), "tool_choice.allowed_tools.tools"),
        (allowed("none", &["get_time"]), "tool_choice.allowed_tools.mode"),
    ] {
        let (s, e) =
            post(&app, "/v1/chat/completions", json!({"messages": msgs("hi"), "tools": tools, "tool_choice": choice}))
                .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
        assert_eq!(e["error"]["param"], param, "{e}");
    }
}
