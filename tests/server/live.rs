//! A real server on 127.0.0.1: streaming equals non-streaming, streamed tool calls and
//! completions, a client that leaves mid-stream, parallel requests over TCP.

use super::*;

// ---- a real server on 127.0.0.1 -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_chat_matches_non_streaming() {
    let addr = serve(state(ServerConfig::default())).await;
    for (seed, extra) in [
        (1u64, json!({})),
        (2, json!({"response_format": {"type": "json_object"}, "max_tokens": 80})),
        (3, json!({"temperature": 0.7, "top_k": 40, "top_p": 0.9})),
    ] {
        let mut body =
            json!({"model": "stories260K", "messages": msgs("Tell me a story."), "seed": seed, "max_tokens": 50});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (s, whole) = http_json(addr, "POST", "/v1/chat/completions", body.clone()).await;
        assert_eq!(s, 200, "{whole}");
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let chunks = sse(addr, "/v1/chat/completions", body).await;
        // The sequence: role chunk, content deltas, one finish chunk, the usage chunk.
        let first = &chunks[0];
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant", "{first}");
        let id = first["id"].as_str().unwrap();
        let (last, body_chunks) = chunks.split_last().unwrap();
        assert_eq!(last["choices"], json!([]), "{last}");
        assert_eq!(last["usage"], whole["usage"], "{last}");
        let mut text = String::new();
        let mut finishes = Vec::new();
        for c in body_chunks {
            assert_eq!(c["id"], id);
            assert!(c["usage"].is_null(), "{c}");
            let ch = &c["choices"][0];
            if let Some(t) = ch["delta"]["content"].as_str() {
                text.push_str(t);
            }
            if let Some(f) = ch["finish_reason"].as_str() {
                finishes.push(f.to_string());
                assert_eq!(ch["delta"], json!({}), "{c}");
            }
        }
        assert_eq!(finishes, [whole["choices"][0]["finish_reason"].as_str().unwrap()]);
        assert_eq!(body_chunks.last().unwrap()["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
        assert_eq!(text, content(&whole, 0), "seed {seed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_tool_calls_and_completions() {
    let addr = serve(state(ServerConfig::default())).await;
    let tools = json!([weather_tool(), time_tool()]);
    let body = json!({"messages": msgs("Weather?"), "seed": 5, "tools": tools, "tool_choice": "required"});
    let (_, whole) = http_json(addr, "POST", "/v1/chat/completions", body.clone()).await;
    let want = whole["choices"][0]["message"]["tool_calls"].as_array().unwrap().clone();
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let chunks = sse(addr, "/v1/chat/completions", streamed).await;
    let mut calls: Vec<(String, String, String)> = Vec::new(); // id, name, arguments
    let mut finish = None;
    for c in &chunks {
        let ch = &c["choices"][0];
        for d in ch["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let i = d["index"].as_u64().unwrap() as usize;
            if let Some(id) = d["id"].as_str() {
                assert_eq!(i, calls.len(), "{d}");
                assert_eq!(d["type"], "function");
                calls.push((id.to_string(), d["function"]["name"].as_str().unwrap().to_string(), String::new()));
            }
            calls[i].2.push_str(d["function"]["arguments"].as_str().unwrap_or(""));
        }
        if let Some(f) = ch["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert_eq!(calls.len(), want.len(), "{chunks:?}");
    for ((id, name, args), w) in calls.iter().zip(&want) {
        assert!(id.starts_with("call_"));
        assert_eq!(name, w["function"]["name"].as_str().unwrap());
        assert_eq!(args, w["function"]["arguments"].as_str().unwrap());
        check_call(&json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}));
    }
    // Completions stream: text chunks, a finish chunk, [DONE].
    let body = json!({"prompt": "Once upon a time", "max_tokens": 30, "seed": 9});
    let (_, whole) = http_json(addr, "POST", "/v1/completions", body.clone()).await;
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let chunks = sse(addr, "/v1/completions", streamed).await;
    let text: String = chunks.iter().map(|c| c["choices"][0]["text"].as_str().unwrap_or("")).collect();
    assert_eq!(text, whole["choices"][0]["text"].as_str().unwrap());
    assert!(chunks.iter().all(|c| c["object"] == "text_completion"));
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
    // An error before the stream starts is a plain JSON error, not a stream.
    let (s, v) =
        http_json(addr, "POST", "/v1/chat/completions", json!({"messages": msgs("x"), "stream": true, "regex": "("}))
            .await;
    assert_eq!(s, 400, "{v}");
    assert!(v["error"]["message"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_stops_the_generation_and_frees_the_slot() {
    let config = ServerConfig { max_concurrent: 1, max_queue: 0, ..ServerConfig::default() };
    let (st, calls) = slow_state(Duration::from_millis(25), config);
    let addr = serve(st.clone()).await;
    // 400 tokens at 25 ms each would take 10 s.
    let body = json!({"messages": msgs("Tell me a long story."), "max_tokens": 400, "stream": true, "seed": 1,
        "regex": "[a-z ]{400}"});
    let mut c = Conn::open(addr, "POST", "/v1/chat/completions", &body.to_string()).await;
    assert_eq!(c.status, 200);
    for _ in 0..3 {
        c.next_event().await.expect("an event");
    }
    assert_eq!(st.running(), 1);
    drop(c);
    wait_until("the generation to free its slot after its client left", || st.running() == 0).await;
    let stopped_at = calls.load(Ordering::SeqCst);
    assert!(stopped_at < 100, "{stopped_at} forward passes: the generation was not stopped early");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(calls.load(Ordering::SeqCst), stopped_at, "forward passes went on after the slot was freed");
    // The only slot is free: a new request succeeds (the queue is 0, so it would be a 429 otherwise).
    let (s, v) =
        http_json(addr, "POST", "/v1/chat/completions", json!({"messages": msgs("hi"), "max_tokens": 3})).await;
    assert_eq!(s, 200, "{v}");
    let (s, h) = http_json(addr, "GET", "/health", Value::Null).await;
    assert_eq!((s, h["running"].as_u64(), h["queued"].as_u64()), (200, Some(0), Some(0)), "{h}");
    // The server saw the disconnect as a cancellation (and the second request as none).
    let (_, text) = Conn::open(addr, "GET", "/metrics", "").await.whole_body().await;
    assert_eq!(metric_value(&text, "strictly_generations_cancelled_total"), 1.0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_requests_over_tcp_all_succeed() {
    let addr = serve(state(ServerConfig { max_concurrent: 2, ..ServerConfig::default() })).await;
    let mut tasks = Vec::new();
    for i in 0..10u64 {
        tasks.push(tokio::spawn(async move {
            let tools = json!([weather_tool()]);
            let body = if i % 2 == 0 {
                json!({"messages": msgs("Weather?"), "seed": i, "tools": tools, "tool_choice": "required"})
            } else {
                json!({"messages": msgs("Hi"), "seed": i, "stream": true, "max_tokens": 20})
            };
            if i % 2 == 0 {
                let (s, v) = http_json(addr, "POST", "/v1/chat/completions", body).await;
                assert_eq!(s, 200, "{v}");
                for call in v["choices"][0]["message"]["tool_calls"].as_array().unwrap() {
                    check_call(call);
                }
            } else {
                let chunks = sse(addr, "/v1/chat/completions", body).await;
                assert!(chunks.len() >= 2);
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(crate::common::WATCHDOG, t).await.expect("hung: a request never finished").unwrap();
    }
    // Over TCP, too, an oversized body is a 413 with a JSON body.
    let addr = serve(state(ServerConfig { max_body_bytes: 1000, ..ServerConfig::default() })).await;
    let (s, v) = http_json(addr, "POST", "/v1/chat/completions", json!({"messages": msgs(&"y".repeat(2000))})).await;
    assert_eq!(s, 413, "{v}");
    assert_eq!(v["error"]["code"], "request_too_large");
}
