//! Oneshot requests that must fail the OpenAI way (status, type, param, code), oversized
//! bodies, a full queue and timeouts, and parallel oneshot requests.

use super::*;

// ---- oneshot: errors ------------------------------------------------------------------------

#[tokio::test]
async fn bad_requests_are_openai_errors() {
    let app = app(state(ServerConfig::default()));
    let chat = "/v1/chat/completions";
    let m = msgs("hi");
    // Malformed JSON and wrong types.
    let (s, bytes) = call_raw(&app, "POST", chat, b"{\"messages\": [".to_vec()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["code"], "invalid_json", "{v}");
    let (s, _) = call_raw(&app, "POST", chat, Vec::new()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let e = expect_error(&app, chat, json!({"messages": m, "temperature": "hot"}), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("invalid type"), "{e}");
    // A field of the wrong shape is named by its path (`param`, as OpenAI does), also among
    // the knobs both endpoints share (read flattened, where serde loses the path), and with
    // no line and column.
    for (body, param) in [
        (json!({"messages": m, "temperature": "hot"}), "temperature"),
        (json!({"messages": m, "seed": "abc"}), "seed"),
        (json!({"messages": m, "stream_options": {"include_usage": 3}}), "stream_options.include_usage"),
        (json!({"messages": [{"role": "user", "content": 5}]}), "messages[0].content"),
        (json!({"messages": "hi"}), "messages"),
    ] {
        let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
        assert_eq!(e["param"].as_str(), Some(param), "{e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(&format!("at {param}:")) && !msg.contains("column"), "{e}");
    }
    let e = expect_error(&app, "/v1/completions", json!({"prompt": "a", "top_p": [1]}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"].as_str(), Some("top_p"), "{e}");
    let e = expect_error(&app, chat, json!([1]), StatusCode::BAD_REQUEST).await;
    assert!(e["param"].is_null() && e["message"].as_str().unwrap().contains("expected struct"), "{e}");
    expect_error(&app, chat, json!({"model": "stories260K"}), StatusCode::BAD_REQUEST).await;
    // Unknown model.
    let e = expect_error(&app, chat, json!({"model": "gpt-4o", "messages": m}), StatusCode::NOT_FOUND).await;
    assert_eq!((e["param"].as_str(), e["code"].as_str()), (Some("model"), Some("model_not_found")));
    // Knobs out of range name the knob.
    for (k, bad) in [
        ("temperature", json!(2.5)),
        ("temperature", json!(-1)),
        ("top_p", json!(0)),
        ("top_p", json!(1.5)),
        ("min_p", json!(2)),
        ("frequency_penalty", json!(3)),
        ("presence_penalty", json!(-3)),
        ("repetition_penalty", json!(0)),
        ("n", json!(0)),
        ("n", json!(100)),
        ("max_tokens", json!(0)),
        ("top_logprobs", json!(50)),
        ("dry_multiplier", json!(-1)),
        ("dry_base", json!(1)),
        ("dry_allowed_length", json!(0)),
    ] {
        let mut body = json!({"messages": m, "logprobs": true});
        body[k] = bad.clone();
        let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
        assert_eq!(e["param"].as_str(), Some(k), "{k}={bad}: {e}");
        assert!(e["message"].as_str().unwrap().contains(k), "{e}");
    }
    // Schemas: the message names the keyword and the JSON pointer.
    let bad = |schema: Value| json!({"messages": m, "response_format": schema_format("x", schema)});
    let e = expect_error(
        &app,
        chat,
        bad(json!({"type": "object", "properties": {"a": {"type": "strnig"}}})),
        StatusCode::BAD_REQUEST,
    )
    .await;
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("/properties/a") && msg.contains("strnig"), "{e}");
    assert_eq!(e["code"], "invalid_schema");
    let e = expect_error(&app, chat, bad(json!({"type": "string", "pattern": "(?=x)"})), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("pattern"), "{e}");
    expect_error(&app, chat, bad(json!({"$ref": "#/$defs/missing"})), StatusCode::BAD_REQUEST).await;
    // A schema no value validates: which subschema accepts nothing and why (a regular
    // language and a context-free one, refused at different stages, say it alike).
    for (schema, needle) in [
        (
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 3}}, "required": ["n"]}),
            "/properties/n: no integer is at least 5 and at most 3",
        ),
        (
            json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "^[0-9]+$", "maxLength": 0}},
                "required": ["s"]}),
            "/properties/s: no string satisfies `pattern` and `maxLength` together",
        ),
        // A `$ref` cycle without a way out: no subschema alone accepts nothing, so the schema
        // as a whole is named, in the schema's terms (not the grammar's "rule `root`").
        (json!({"$ref": "#"}), "no JSON value validates against this schema"),
    ] {
        let e = expect_error(&app, chat, bad(schema), StatusCode::BAD_REQUEST).await;
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(needle) && msg.starts_with("invalid JSON Schema") && !msg.contains("rule `root`"), "{e}");
        assert!(e["param"].as_str().unwrap().starts_with("response_format"), "{e}");
    }
    expect_error(&app, chat, bad(json!(42)), StatusCode::BAD_REQUEST).await;
    let body = json!({"messages": m, "response_format": schema_format("bad name!", json!({}))});
    let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
    assert!(e["param"].as_str().unwrap().contains("name"), "{e}");
    expect_error(&app, chat, json!({"messages": m, "response_format": {"type": "xml"}}), StatusCode::BAD_REQUEST).await;
    // Grammars and regexes say where.
    let e =
        expect_error(&app, chat, json!({"messages": m, "grammar": "root ::= item\n"}), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("1:10"), "{e}");
    assert_eq!((e["param"].as_str(), e["code"].as_str()), (Some("grammar"), Some("invalid_grammar")));
    let e = expect_error(&app, chat, json!({"messages": m, "regex": "a(b"}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "regex");
    expect_error(&app, chat, json!({"messages": m, "choice": []}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"messages": m, "regex": "a", "choice": ["a"]}), StatusCode::BAD_REQUEST).await;
    // A tool parameter schema that does not compile names the tool.
    let params = json!({"type": "object", "properties": {"x": {"type": 5}}});
    let tool = json!([{"type": "function", "function": {"name": "f", "parameters": params}}]);
    let e = expect_error(
        &app,
        chat,
        json!({"messages": m, "tools": tool, "tool_choice": "required"}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("tools[0].function.parameters"), "{e}");
    // So does one no arguments validate against (`false`, a contradiction), beside a good tool
    // too (it could never be called), in the schema's terms.
    for params in [
        json!(false),
        json!({"type": "object", "properties": {"n": {"minimum": 3, "maximum": 1, "type": "integer"}}, "required": ["n"]}),
    ] {
        let tools = json!([weather_tool(), {"type": "function", "function": {"name": "f", "parameters": params}}]);
        let body = json!({"messages": m, "tools": tools, "tool_choice": "auto"});
        let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
        let msg = e["message"].as_str().unwrap();
        assert_eq!(e["param"], "tools[1].function.parameters", "{e}");
        assert!(msg.contains("invalid JSON Schema") && !msg.contains("rule `root`"), "{e}");
    }
    // Tools misuse.
    let tools = json!([weather_tool()]);
    expect_error(&app, chat, json!({"messages": m, "tool_choice": "required"}), StatusCode::BAD_REQUEST).await;
    expect_error(
        &app,
        chat,
        json!({"messages": m, "tools": tools, "tool_choice": "sometimes"}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    expect_error(
        &app,
        chat,
        json!({"messages": m, "tools": tools, "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    expect_error(
        &app,
        chat,
        json!({"messages": m, "tools": [weather_tool(), weather_tool()]}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    expect_error(&app, chat, json!({"messages": m, "functions": [{"name": "f"}]}), StatusCode::BAD_REQUEST).await;
    // Messages.
    expect_error(&app, chat, json!({"messages": []}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"messages": [{"role": "wizard", "content": "x"}]}), StatusCode::BAD_REQUEST).await;
    let img = json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]);
    expect_error(&app, chat, json!({"messages": img}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"messages": m, "logit_bias": {"5": 10}}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"messages": m, "stop": ["a", "b", "c", "d", "e"]}), StatusCode::BAD_REQUEST).await;
    expect_error(
        &app,
        chat,
        json!({"messages": m, "stream_options": {"include_usage": true}}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    // Budgets: a constraint that cannot fit, a prompt past the context.
    let body = json!({"messages": m, "max_tokens": 2, "response_format": schema_format("p", person_schema())});
    let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "max_tokens", "{e}");
    let e = expect_error(&app, chat, json!({"messages": m, "max_tokens": 600}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["code"], "context_length_exceeded", "{e}");
    let long = "word ".repeat(2000);
    let e = expect_error(&app, chat, json!({"messages": msgs(&long)}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["code"], "context_length_exceeded", "{e}");
    // A stop string inside a structured output is text there: no error, a whole object.
    let body = json!({"messages": m, "stop": ["\""], "response_format": schema_format("p", person_schema())});
    check_person(&serde_json::from_str(&content(&chat_ok(&app, body).await, 0)).unwrap());
    // Completions.
    let c = "/v1/completions";
    expect_error(&app, c, json!({"prompt": []}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, c, json!({"prompt": [99999]}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, c, json!({"prompt": "x", "suffix": "y"}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, c, json!({"prompt": "x", "best_of": 3}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, c, json!({"prompt": "x", "model": "davinci"}), StatusCode::NOT_FOUND).await;
    // Still healthy after all that.
    chat_ok(&app, json!({"max_tokens": 3})).await;
}

/// What OpenAI refuses is refused here too, naming the field, in words (no serde internals).
#[tokio::test]
async fn openai_request_parity() {
    let app = app(state(ServerConfig::default()));
    let chat = "/v1/chat/completions";
    let tool_call = json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}});
    let history = |tool: Value| json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [tool_call]}, tool]);
    let bad = |body: Value, param: &'static str| {
        let app = app.clone();
        async move {
            let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
            if !param.is_empty() {
                assert_eq!(e["param"], param, "{e}");
            }
            let msg = e["message"].as_str().unwrap().to_string();
            assert!(!msg.contains("untagged") && !msg.contains("enum") && !msg.contains("`"), "{msg}");
            msg
        }
    };
    // A tool message answers a call of an earlier assistant message, by id.
    let ok = history(json!({"role": "tool", "tool_call_id": "c1", "content": "3"}));
    chat_ok(&app, json!({"max_tokens": 3, "messages": ok})).await;
    bad(json!({"messages": history(json!({"role": "tool", "content": "3"}))}), "messages[2].tool_call_id").await;
    let unknown = history(json!({"role": "tool", "tool_call_id": "c9", "content": "3"}));
    bad(json!({"messages": unknown}), "messages[2].tool_call_id").await;
    // Content is required (an assistant's that calls tools excepted).
    bad(json!({"messages": [{"role": "user", "content": null}]}), "messages[0].content").await;
    bad(json!({"messages": [{"role": "user"}]}), "messages[0].content").await;
    // History calls' arguments are JSON.
    let mut broken = history(json!({"role": "tool", "tool_call_id": "c1", "content": "3"}));
    broken[1]["tool_calls"][0]["function"]["arguments"] = json!("{x: 1");
    bad(json!({"messages": broken}), "messages[1].tool_calls[0].function.arguments").await;
    // Shapes: said in words.
    let m = msgs("hi");
    let msg = bad(json!({"messages": [{"role": "user", "content": 5}]}), "").await;
    assert!(msg.contains("content must be a string or an array"), "{msg}");
    let msg = bad(json!({"messages": m, "seed": "x"}), "").await;
    assert!(msg.contains("seed must be an integer"), "{msg}");
    let msg = bad(json!({"messages": m, "stop": 3}), "").await;
    assert!(msg.contains("stop must be a string or an array of strings"), "{msg}");
    let msg = bad(json!({"messages": m, "tool_choice": 3}), "").await;
    assert!(msg.contains("tool_choice must be"), "{msg}");
    let msg = bad(json!({"messages": m, "tools": [{"type": "web_search"}]}), "tools[0].type").await;
    assert!(msg.contains("must be \"function\""), "{msg}");
    // A schema no value satisfies names its field.
    let body = json!({"messages": m, "response_format": schema_format("never", json!(false))});
    bad(body, "response_format.json_schema.schema").await;
    // Unknown routes list the real ones.
    let (s, v) = call(&app, "GET", "/v2/nothing", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("POST /v1/chat/completions") && msg.contains("GET /v1/models"), "{msg}");
}

#[tokio::test]
async fn oversized_body_is_413() {
    let config = ServerConfig { max_body_bytes: 4096, ..ServerConfig::default() };
    let app = app(state(config));
    let body = json!({"messages": msgs(&"x".repeat(5000))}).to_string().into_bytes();
    let (s, bytes) = call_raw(&app, "POST", "/v1/chat/completions", body).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["code"], "request_too_large", "{v}");
    // Just under the limit is read (and then refused for its length in tokens, not bytes).
    let body = json!({"messages": msgs(&"x".repeat(3000))}).to_string().into_bytes();
    let (s, _) = call_raw(&app, "POST", "/v1/chat/completions", body).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_is_429_and_timeouts_are_errors() {
    let config = ServerConfig { max_concurrent: 1, max_queue: 0, ..ServerConfig::default() };
    let (st, _) = slow_state(Duration::from_millis(20), config);
    let app = app(st.clone());
    let busy = {
        let app = app.clone();
        tokio::spawn(async move {
            post(&app, "/v1/chat/completions", json!({"messages": msgs("hi"), "max_tokens": 40})).await
        })
    };
    wait_until("the first request to take the only slot", || st.running() > 0).await;
    let e = expect_error(
        &app,
        "/v1/chat/completions",
        json!({"messages": msgs("hi"), "max_tokens": 5}),
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert_eq!(e["type"], "rate_limit_error", "{e}");
    let (s, v) = busy.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{v}");
    // Now free again.
    chat_ok(&app, json!({"max_tokens": 3})).await;

    // A request that runs past its timeout is a 504, and frees its slot.
    let config = ServerConfig { request_timeout: Duration::from_millis(300), ..ServerConfig::default() };
    let (st, calls) = slow_state(Duration::from_millis(50), config);
    let app = app_of(st.clone());
    let e = expect_error(
        &app,
        "/v1/chat/completions",
        json!({"messages": msgs("hi"), "max_tokens": 100}),
        StatusCode::GATEWAY_TIMEOUT,
    )
    .await;
    assert_eq!(e["code"], "timeout", "{e}");
    wait_until("the timed-out generation to free its slot", || st.running() == 0).await;
    // It stopped at the timeout, well before its 100 tokens (a pass takes 50 ms, the limit is 300 ms).
    let passes = calls.load(Ordering::SeqCst);
    assert!(passes < 100, "{passes} forward passes: the timed-out generation ran to max_tokens");
    let (_, text) = call_raw(&app, "GET", "/metrics", Vec::new()).await;
    let text = String::from_utf8(text).unwrap();
    assert_eq!(metric_value(&text, "strictly_request_errors_total"), 1.0, "the 504 is counted as an error");
    assert_eq!(metric_value(&text, "strictly_generations_running"), 0.0);
    // Reported (its count is the model's `kv_cache_cpu_bytes`, tested there; other tests' caches
    // in this process come and go, so no exact figure here).
    assert!(metric_value(&text, "strictly_kv_cache_bytes") >= 0.0);
}

fn app_of(st: AppState) -> Router {
    app(st)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_oneshot_requests_all_succeed() {
    let app = app(state(ServerConfig { max_concurrent: 3, ..ServerConfig::default() }));
    let mut tasks = Vec::new();
    for i in 0..12u64 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let rf = schema_format("p", person_schema());
            chat_ok(&app, json!({"seed": i, "max_tokens": 200, "response_format": rf})).await
        }));
    }
    for t in tasks {
        let v = t.await.unwrap();
        check_person(&serde_json::from_str(&content(&v, 0)).unwrap());
    }
}

#[tokio::test]
async fn deep_but_valid_bodies_parse() {
    let app = app(state(ServerConfig::default()));
    let chat = "/v1/chat/completions";
    // 60 levels of schema are 120 of JSON, past serde_json's default recursion limit of 128
    // once wrapped in the request.
    let mut schema = json!({"type": "integer"});
    for _ in 0..60 {
        schema = json!({"type": "object", "properties": {"a": schema}});
    }
    let body = json!({"messages": msgs("hi"), "max_tokens": 400, "response_format": schema_format("deep", schema)});
    let (s, v) = call(&app, "POST", chat, Some(body)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    <serde::de::IgnoredAny as serde::Deserialize>::deserialize(&mut de)
        .unwrap_or_else(|e| panic!("{text:?} is not JSON: {e}"));
    // Deeper than any schema may be: refused before parsing, naming the limit.
    let deep = format!("{{\"messages\": {}{}}}", "[".repeat(600), "]".repeat(600));
    let (s, bytes) = call_raw(&app, "POST", chat, deep.into_bytes()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("nests deeper than"), "{v}");
}
