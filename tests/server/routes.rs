//! Oneshot requests against the axum app: the routes, plain chat, schema-, regex- and
//! grammar-constrained outputs, logprobs and the completions endpoint.

use super::*;

// ---- oneshot: routes ------------------------------------------------------------------------

#[tokio::test]
async fn health_models_metrics_and_unknown_routes() {
    let app = app(state(ServerConfig::default()));
    let (s, v) = call(&app, "GET", "/health", None).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("ok")), "{v}");
    let (s, v) = call(&app, "GET", "/v1/models", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "stories260K");
    assert_eq!(v["data"][0]["object"], "model");
    assert_eq!(v["data"][0]["max_model_len"], 512);
    let (s, v) = call(&app, "GET", "/v1/models/stories260K", None).await;
    assert_eq!((s, v["id"].as_str()), (StatusCode::OK, Some("stories260K")));
    let (s, v) = call(&app, "GET", "/v1/models/gpt-4o", None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("model_not_found")), "{v}");
    let (s, v) = call(&app, "GET", "/v2/nothing", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert!(v["error"]["message"].is_string());
    let (s, v) = call(&app, "GET", "/v1/chat/completions", None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{v}");
    assert!(v["error"]["message"].is_string());

    chat_ok(&app, json!({"max_tokens": 5})).await;
    let (s, bytes) = call_raw(&app, "GET", "/metrics", Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("strictly_requests_total{route=\"chat\"} 1"), "{text}");
    assert!(text.contains("# TYPE strictly_completion_tokens_total counter"), "{text}");
    // An unconstrained request computes no mask; a constrained one does, and its time counts.
    assert_eq!(metric_value(&text, "strictly_masks_total"), 0.0, "{text}");
    assert_eq!(metric_value(&text, "strictly_mask_seconds_total"), 0.0, "{text}");
    chat_ok(&app, json!({"max_tokens": 20, "response_format": {"type": "json_object"}})).await;
    let (_, bytes) = call_raw(&app, "GET", "/metrics", Vec::new()).await;
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("# TYPE strictly_mask_seconds_total counter"), "{text}");
    assert!(metric_value(&text, "strictly_masks_total") >= 2.0, "{text}");
    assert!(metric_value(&text, "strictly_mask_seconds_total") > 0.0, "{text}");
}

#[tokio::test]
async fn chat_plain_text_usage_seed_and_n() {
    let app = app(state(ServerConfig::default()));
    let v = chat_ok(&app, json!({"model": "stories260K", "max_tokens": 20, "seed": 7})).await;
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    check_usage(&v);
    let c = v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((1..=20).contains(&c), "{v}");
    let reason = v["choices"][0]["finish_reason"].as_str().unwrap();
    assert!(reason == "stop" || (reason == "length" && c == 20), "{v}");
    // The same seed gives the same text; n choices get seeds seed, seed+1, ...
    let again = chat_ok(&app, json!({"max_tokens": 20, "seed": 7})).await;
    assert_eq!(content(&v, 0), content(&again, 0));
    let three = chat_ok(&app, json!({"max_tokens": 20, "seed": 7, "n": 3})).await;
    let choices = three["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3);
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c["index"], i);
    }
    assert_eq!(content(&three, 0), content(&v, 0));
    // "default" and no model at all are accepted too.
    chat_ok(&app, json!({"model": "default", "max_tokens": 3})).await;
    // Greedy with a stop string: the text ends before it.
    let v = chat_ok(&app, json!({"max_tokens": 60, "temperature": 0, "stop": ["."]})).await;
    let t = content(&v, 0);
    assert!(!t.contains('.'), "{t:?}");
    // "</s>" in a message is text (several tokens), unless a trusted caller opts in (one EOS).
    let prompt_tokens = |v: Value| v["usage"]["prompt_tokens"].as_u64().unwrap();
    let body = |trusted: bool| json!({"max_tokens": 1, "messages": msgs("The end.</s>Once"), "content_control_tokens": trusted});
    let (text, control) =
        (prompt_tokens(chat_ok(&app, body(false)).await), prompt_tokens(chat_ok(&app, body(true)).await));
    assert!(text > control, "{text} {control}");
}

#[tokio::test]
async fn json_schema_and_json_object_outputs_validate() {
    let app = app(state(ServerConfig::default()));
    for seed in 0..4 {
        let mut rf = schema_format("person", person_schema());
        rf["json_schema"]["strict"] = json!(true);
        let v = chat_ok(&app, json!({"seed": seed, "response_format": rf})).await;
        let text = content(&v, 0);
        let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        check_person(&parsed);
        assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
        check_usage(&v);
    }
    // A tight budget: still complete (the budget closes the structure), finish "stop".
    let rf = schema_format("p", person_schema());
    let v = chat_ok(&app, json!({"seed": 1, "max_tokens": 60, "response_format": rf})).await;
    check_person(&serde_json::from_str(&content(&v, 0)).unwrap());
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() <= 60);
    // json_object: any object.
    for seed in 0..3 {
        let v = chat_ok(
            &app,
            json!({"seed": seed, "max_completion_tokens": 100, "response_format": {"type": "json_object"}}),
        )
        .await;
        let parsed: Value = serde_json::from_str(&content(&v, 0)).unwrap();
        assert!(parsed.is_object(), "{parsed}");
    }
    // A stop string the structure needs (every person has a ","): no stop there, whatever the
    // seed; the output is the whole object.
    for seed in 0..6 {
        let rf = schema_format("person", person_schema());
        let v = chat_ok(&app, json!({"seed": seed, "stop": [",", "\n"], "response_format": rf})).await;
        check_person(&serde_json::from_str(&content(&v, 0)).unwrap_or_else(|e| panic!("{e}: {v}")));
    }
    // response_format text is no constraint.
    chat_ok(&app, json!({"max_tokens": 5, "response_format": {"type": "text"}})).await;
}

#[tokio::test]
async fn regex_grammar_and_choice_extensions() {
    let app = app(state(ServerConfig::default()));
    let re = regex::Regex::new(r"^[A-Z][a-z]{2,8}-[0-9]{3}$").unwrap();
    let arith = regex::Regex::new(r"^\([0-9]{1,3}( [+*] [0-9]{1,3})*\)$").unwrap();
    for seed in 0..3 {
        let v = chat_ok(&app, json!({"seed": seed, "regex": "[A-Z][a-z]{2,8}-[0-9]{3}"})).await;
        assert!(re.is_match(&content(&v, 0)), "{v}");
        let v = chat_ok(&app, json!({"seed": seed, "choice": ["yes", "no", "not sure"]})).await;
        assert!(["yes", "no", "not sure"].contains(&content(&v, 0).as_str()), "{v}");
        // An unused rule (as llama.cpp's own json_schema_to_grammar writes them) is a warning.
        let g = "root ::= \"(\" num (op num)* \")\"\nnum ::= [0-9]{1,3}\nop ::= \" + \" | \" * \"\nspare ::= \"x\"";
        let v = chat_ok(&app, json!({"seed": seed, "max_tokens": 40, "grammar": g})).await;
        assert!(arith.is_match(&content(&v, 0)), "{v}");
        // vLLM's spellings.
        let v = chat_ok(&app, json!({"seed": seed, "guided_choice": ["up", "down"]})).await;
        assert!(["up", "down"].contains(&content(&v, 0).as_str()), "{v}");
    }
}

#[tokio::test]
async fn logprobs_chat_and_completions() {
    let app = app(state(ServerConfig::default()));
    let v = chat_ok(&app, json!({"max_tokens": 12, "seed": 3, "logprobs": true, "top_logprobs": 3})).await;
    let entries = v["choices"][0]["logprobs"]["content"].as_array().unwrap();
    assert_eq!(entries.len() as u64, v["usage"]["completion_tokens"].as_u64().unwrap(), "{v}");
    let mut text = Vec::new();
    for e in entries {
        assert!(e["logprob"].as_f64().unwrap() <= 0.0, "{e}");
        let tops = e["top_logprobs"].as_array().unwrap();
        assert!(!tops.is_empty() && tops.len() <= 3, "{e}");
        let lps: Vec<f64> = tops.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
        assert!(lps.windows(2).all(|w| w[0] >= w[1]), "{e}");
        text.extend(e["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8));
    }
    assert_eq!(String::from_utf8_lossy(&text), content(&v, 0));
    // Without logprobs: null.
    let v = chat_ok(&app, json!({"max_tokens": 3})).await;
    assert!(v["choices"][0]["logprobs"].is_null());
    // Legacy completions logprobs.
    let (s, v) =
        post(&app, "/v1/completions", json!({"prompt": "Once upon a time", "max_tokens": 8, "logprobs": 2, "seed": 1}))
            .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let lp = &v["choices"][0]["logprobs"];
    let n = lp["tokens"].as_array().unwrap().len();
    assert_eq!(n as u64, v["usage"]["completion_tokens"].as_u64().unwrap());
    assert_eq!(lp["token_logprobs"].as_array().unwrap().len(), n);
    assert_eq!(lp["top_logprobs"].as_array().unwrap().len(), n);
    assert_eq!(lp["text_offset"][0], 0);
}

#[tokio::test]
async fn completions_prompts_n_echo_and_constraints() {
    let app = app(state(ServerConfig::default()));
    let (s, v) = post(
        &app,
        "/v1/completions",
        json!({"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 10, "seed": 1}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["object"], "text_completion");
    assert!(v["choices"][0]["text"].is_string());
    check_usage(&v);
    // Two prompts × n = 2: four choices, indexed prompt · n + j.
    let (s, v) =
        post(&app, "/v1/completions", json!({"prompt": ["A cat", "A dog"], "n": 2, "max_tokens": 5, "seed": 4})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let idx: Vec<u64> = v["choices"].as_array().unwrap().iter().map(|c| c["index"].as_u64().unwrap()).collect();
    assert_eq!(idx, [0, 1, 2, 3]);
    // Token ids, echo: the prompt's tokens' text comes first, and they are the prompt.
    let (s, v) = post(&app, "/v1/completions", json!({"prompt": [1, 403, 261], "max_tokens": 5, "echo": true})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let ids = [TokenId(1), TokenId(403), TokenId(261)];
    let echoed = String::from_utf8(strictly::Vocab::embedded().decode(&ids)).unwrap();
    assert!(!echoed.is_empty());
    assert!(v["choices"][0]["text"].as_str().unwrap().starts_with(&echoed), "{echoed:?}: {v}");
    assert_eq!(v["usage"]["prompt_tokens"], 3, "{v}");
    let (s, v2) = post(&app, "/v1/completions", json!({"prompt": "Lily", "max_tokens": 4, "echo": true})).await;
    assert_eq!(s, StatusCode::OK, "{v2}");
    assert!(v2["choices"][0]["text"].as_str().unwrap().starts_with("Lily"), "{v2}");
    // A constraint.
    let (s, v) = post(&app, "/v1/completions", json!({"prompt": "Pick:", "regex": "(red|green) [0-9]{2}"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let re = regex::Regex::new(r"^(red|green) [0-9]{2}$").unwrap();
    assert!(re.is_match(v["choices"][0]["text"].as_str().unwrap()), "{v}");
    let rf = schema_format("p", person_schema());
    let (s, v) = post(&app, "/v1/completions", json!({"prompt": "{", "response_format": rf, "seed": 2})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    check_person(&serde_json::from_str(v["choices"][0]["text"].as_str().unwrap()).unwrap());
}
