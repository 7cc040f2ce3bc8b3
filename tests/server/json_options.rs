//! The JSON Schema options a request can set: `x-strictly` (whitespace, exact language) and
//! `response_format.json_schema.strict` (OpenAI's strict-mode rules, checked).

use super::*;

fn junk_free_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
        "required": ["name", "age"]
    })
}

#[tokio::test]
async fn default_output_is_compact_with_only_named_keys() {
    let app = app(state(ServerConfig::default()));
    for seed in 0..4 {
        let v = chat_ok(&app, json!({"seed": seed, "response_format": schema_format("p", junk_free_schema())})).await;
        let text = content(&v, 0);
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        // Compact: exactly as serde_json writes it; only the two named keys.
        assert_eq!(serde_json::to_string(&value).unwrap(), text);
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "age"], "{text}");
        assert!(value["age"].as_i64().is_some(), "{text}");
    }
}

#[tokio::test]
async fn x_strictly_pretty_lays_out_one_way() {
    let app = app(state(ServerConfig::default()));
    let body = json!({
        "seed": 3,
        "response_format": schema_format("p", junk_free_schema()),
        "x-strictly": {"whitespace": "pretty"}
    });
    let text = content(&chat_ok(&app, body).await, 0);
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(serde_json::to_string_pretty(&value).unwrap(), text);
    // Unknown fields in the extension are an error, not silently ignored.
    let bad = json!({"messages": msgs("hi"), "x-strictly": {"whitespaces": "pretty"}});
    expect_error(&app, "/v1/chat/completions", bad, StatusCode::BAD_REQUEST).await;
}

#[tokio::test]
async fn strict_schemas_must_keep_openai_rules() {
    let app = app(state(ServerConfig::default()));
    let strict = |schema: Value| {
        json!({"messages": msgs("hi"), "response_format":
            {"type": "json_schema", "json_schema": {"name": "x", "strict": true, "schema": schema}}})
    };
    let chat = "/v1/chat/completions";
    let e = expect_error(&app, chat, strict(junk_free_schema()), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("/additionalProperties"), "{e}");
    let nested = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}},
        "additionalProperties": false}}, "required": ["a"], "additionalProperties": false});
    let e = expect_error(&app, chat, strict(nested), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("/properties/a/required"), "{e}");
    let e = expect_error(&app, chat, strict(json!({"type": "string"})), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("root"), "{e}");
    // A schema that keeps the rules is served; so is a non-strict one that breaks them.
    let ok = json!({"type": "object", "properties": {"a": {"type": ["integer", "null"]}}, "required": ["a"],
        "additionalProperties": false});
    let (s, v) = post(&app, chat, strict(ok)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// `trigger` (a strictly extension): free text until the trigger, then the request's
/// constraint (issue 25 item 2). With the embedded story model and a trigger it writes often
/// (" the"), what follows it is the constraint's.
#[tokio::test]
async fn trigger_starts_the_constraint_where_the_text_writes_it() {
    let app = app(state(ServerConfig::default()));
    let re = regex::Regex::new(r"^(?s)(.*?) the[0-9]{3}\.$").unwrap();
    let mut started = 0;
    for seed in 0..6 {
        let v = chat_ok(&app, json!({"seed": seed, "max_tokens": 48, "trigger": " the", "regex": "[0-9]{3}\\."})).await;
        let text = content(&v, 0);
        match text.find(" the") {
            Some(_) => {
                let c = re.captures(&text).unwrap_or_else(|| panic!("seed {seed}: {text:?}"));
                assert!(!c[1].contains(" the"), "the first copy starts the constraint: {text:?}");
                started += 1;
            }
            None => assert!(!text.is_empty(), "free text"),
        }
    }
    assert!(started > 0, "the story model writes \" the\"");
    let m = json!([{"role": "user", "content": "hi"}]);
    let chat = "/v1/chat/completions";
    let e = expect_error(&app, chat, json!({"messages": m, "trigger": "<x>"}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "trigger");
    let e =
        expect_error(&app, chat, json!({"messages": m, "trigger": "", "regex": "a"}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "trigger");
    // Several triggers: the first the text writes starts the constraint.
    let re = regex::Regex::new(r"^(?s)(.*?)( the| a)[0-9]{3}\.$").unwrap();
    let mut started = 0;
    for seed in 0..4 {
        let v =
            chat_ok(&app, json!({"seed": seed, "max_tokens": 48, "trigger": [" the", " a"], "regex": "[0-9]{3}\\."}))
                .await;
        let text = content(&v, 0);
        if let Some(c) = re.captures(&text) {
            assert!(!c[1].contains(" the") && !c[1].contains(" a"), "{text:?}");
            started += 1;
        } else {
            assert!(!text.contains(" the") && !text.contains(" a"), "{text:?}");
        }
    }
    assert!(started > 0);
    // A token trigger (the embedded vocabulary's control token `<unk>`), by name or id, beside
    // a text one: served; a token the vocabulary lacks is a 400 naming `trigger`.
    for t in [json!({"token": "<unk>"}), json!([" the", {"token": 0}]), json!({"token": "<[0]>"})] {
        let v = chat_ok(&app, json!({"seed": 1, "max_tokens": 24, "trigger": t, "regex": "[0-9]{3}\\."})).await;
        assert!(!content(&v, 0).is_empty(), "{v}");
    }
    let body = json!({"messages": m, "trigger": {"token": "<|nope|>"}, "regex": "a"});
    let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "trigger", "{e}");
    assert!(e["message"].as_str().unwrap().contains("<|nope|>"), "{e}");
    for bad in [json!([]), json!([1]), json!(["x", ""]), json!({"token": []}), json!({"token": "a", "x": 1})] {
        let body = json!({"messages": m, "trigger": bad, "regex": "a"});
        let (s, v) = post(&app, chat, body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("trigger"), "{v}");
    }
}
