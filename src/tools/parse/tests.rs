use super::*;
use crate::tools::ListDialect;

fn run(chunks: &[&str]) -> (String, Vec<(String, String)>, Result<(), String>) {
    run_as(ToolFormat::Hermes, chunks)
}

fn run_as(format: ToolFormat, chunks: &[&str]) -> (String, Vec<(String, String)>, Result<(), String>) {
    run_with(OutputParser::new(Some(format)), chunks)
}

/// The content, the calls (checked equal to what streamed) and the end of `p` fed `chunks`.
fn run_with(mut p: OutputParser, chunks: &[&str]) -> (String, Vec<(String, String)>, Result<(), String>) {
    let mut pieces = Vec::new();
    for c in chunks {
        pieces.extend(p.feed(c));
    }
    let end = p.finish().map(|rest| pieces.extend(rest));
    let mut joined = Joined::default();
    pieces.into_iter().for_each(|piece| joined.push(piece));
    assert!(joined.reasoning.is_empty(), "the calls parser wrote reasoning {:?}", joined.reasoning);
    let calls: Vec<(String, String)> = p.calls().iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
    assert_eq!(calls, joined.calls);
    (joined.content, calls, end)
}

#[test]
fn content_and_calls_in_any_chunking() {
    let text = concat!(
        "Let me see. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
        "{\"city\": \"P}a\\\"ris\", \"n\": [1, {\"x\": 2}]}}\n</tool_call>\n",
        "<tool_call>\n{\"name\":\"f-2\",\"arguments\":7}\n</tool_call>"
    );
    let whole = run(&[text]);
    assert_eq!(whole.0, "Let me see. ");
    assert_eq!(
        whole.1,
        vec![
            ("get_weather".to_string(), "{\"city\": \"P}a\\\"ris\", \"n\": [1, {\"x\": 2}]}".to_string()),
            ("f-2".to_string(), "7".to_string())
        ]
    );
    assert_eq!(whole.2, Ok(()));
    let chars: Vec<String> = text.chars().map(|c| c.to_string()).collect();
    let by_char = run(&chars.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(by_char, whole);
}

#[test]
fn marker_prefixes_are_held_back_then_released() {
    let mut p = OutputParser::new(Some(ToolFormat::Hermes));
    assert_eq!(p.feed("a <tool"), vec![Piece::Content("a ".into())]);
    assert_eq!(p.feed("_cal"), vec![]);
    assert_eq!(p.finish().unwrap(), vec![Piece::Content("<tool_cal".into())]);
    assert_eq!(run(&["x <tool_call>{\"name\": \"f\""]).2, Err("the output ends inside a tool call".into()));
    let (c, calls, ok) = run(&["no tools <tool_cal> here"]);
    assert_eq!((c.as_str(), calls.len(), ok), ("no tools <tool_cal> here", 0, Ok(())));
}

/// Every chunking of `text` reads the same as the whole.
fn same_in_chunks(format: ToolFormat, text: &str) -> (String, Vec<(String, String)>, Result<(), String>) {
    let whole = run_as(format, &[text]);
    let chars: Vec<String> = text.chars().map(|c| c.to_string()).collect();
    assert_eq!(run_as(format, &chars.iter().map(String::as_str).collect::<Vec<_>>()), whole, "{text:?}");
    whole
}

#[test]
fn llama3_calls_are_the_whole_reply() {
    let call = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
    let (c, calls, ok) = same_in_chunks(ToolFormat::Llama3, call);
    assert_eq!((c.as_str(), ok), ("", Ok(())));
    assert_eq!(calls, vec![("get_weather".to_string(), "{\"city\": \"Oslo\"}".to_string())]);
    // Text that does not begin with `{` is content, marker-like text and all.
    let (c, calls, ok) = same_in_chunks(ToolFormat::Llama3, "It is {cold}. <tool_call>");
    assert_eq!((c.as_str(), calls.len(), ok), ("It is {cold}. <tool_call>", 0, Ok(())));
    // An answer in a response format that begins with `{` but is no call: content.
    let (c, calls, ok) = same_in_chunks(ToolFormat::Llama3, "{\"answer\": 5}");
    assert_eq!((c.as_str(), calls.len(), ok), ("{\"answer\": 5}", 0, Ok(())));
    // The Hermes key is not Llama 3's.
    let hermes_shaped = "{\"name\": \"f\", \"arguments\": {}}";
    assert_eq!(run_as(ToolFormat::Llama3, &[hermes_shaped]), (hermes_shaped.to_string(), vec![], Ok(())));
    assert!(run_as(ToolFormat::Llama3, &["{\"name\": \"f\", \"parameters\": {}} x"]).2.is_err());
    assert!(run_as(ToolFormat::Llama3, &["{\"name\": \"f\", \"parameters\": {"]).2.is_err());
    assert_eq!(run_as(ToolFormat::Llama3, &[""]), (String::new(), vec![], Ok(())));
}

#[test]
fn mistral_calls_are_a_list_after_the_marker() {
    let text = "Sure. [TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": [1, \"]\"]}},\n {\"name\":\"b-2\",\"arguments\":{}}]";
    let (c, calls, ok) = same_in_chunks(ToolFormat::List(ListDialect::Mistral), text);
    assert_eq!((c.as_str(), ok), ("Sure. ", Ok(())));
    assert_eq!(
        calls,
        vec![("a".to_string(), "{\"x\": [1, \"]\"]}".to_string()), ("b-2".to_string(), "{}".to_string())]
    );
    let (_, calls, ok) =
        same_in_chunks(ToolFormat::List(ListDialect::Mistral), "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": 1}]");
    assert_eq!((calls.len(), ok), (1, Ok(())));
    let mut p = OutputParser::new(Some(ToolFormat::List(ListDialect::Mistral)));
    assert_eq!(p.feed("a [TOOL_CA"), vec![Piece::Content("a ".into())]);
    assert_eq!(p.finish().unwrap(), vec![Piece::Content("[TOOL_CA".into())]);
    assert!(run_as(ToolFormat::List(ListDialect::Mistral), &["[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}"])
        .2
        .is_err());
    assert!(run_as(ToolFormat::List(ListDialect::Mistral), &["[TOOL_CALLS] {\"name\": \"a\"}"]).2.is_err());
    // Mistral's ids are 9 letters and digits.
    let mut p = OutputParser::new(Some(ToolFormat::List(ListDialect::Mistral)));
    p.feed("[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}]");
    assert_eq!(p.calls()[0].id.len(), 9);
}

#[test]
fn granite_and_nemotron_calls_are_lists_between_their_markers() {
    let granite = ToolFormat::List(ListDialect::Granite);
    let text = "<|tool_call|>[{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]";
    let (c, calls, ok) = same_in_chunks(granite, text);
    assert_eq!((c.as_str(), ok), ("", Ok(())));
    assert_eq!(calls, vec![("a".to_string(), "{\"x\": 1}".to_string()), ("b".to_string(), "{}".to_string())]);
    let nemotron = ToolFormat::List(ListDialect::Nemotron);
    let text = "Let me look.\n<TOOLCALL>[{\"name\": \"a\", \"arguments\": {\"y\": \"]</TOOLCALL>\"}}]</TOOLCALL>";
    let (c, calls, ok) = same_in_chunks(nemotron, text);
    assert_eq!((c.as_str(), ok), ("Let me look.\n", Ok(())));
    assert_eq!(calls, vec![("a".to_string(), "{\"y\": \"]</TOOLCALL>\"}".to_string())]);
    // The list must be closed by its marker, and nothing but space may follow it.
    assert!(run_as(nemotron, &["<TOOLCALL>[{\"name\": \"a\", \"arguments\": {}}]"]).2.is_err());
    assert!(run_as(nemotron, &["<TOOLCALL>[{\"name\": \"a\", \"arguments\": {}}]</TOOLCALL> and"]).2.is_err());
    assert!(run_as(granite, &["<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}] and"]).2.is_err());
    // Their ids are the usual ones.
    let mut p = OutputParser::new(Some(granite));
    p.feed("<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}]");
    assert!(p.calls()[0].id.starts_with("call_"));
}

#[test]
fn xml_calls_become_json_arguments() {
    use crate::tools::xml::XmlDialect;
    let schema = serde_json::json!({"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "tags": {"type": "array"}
    }});
    let kinds = Arc::new(ValueKinds::new([("get_weather", &schema), ("ping", &serde_json::json!({}))]));
    let text = concat!(
        "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew \"York\"\n</param\\n",
        "\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=tags>\n[\"a\", \"</b>\"]\n</parameter>\n",
        "</function>\n</tool_call>\n<tool_call>\n<function=ping>\n</function>\n</tool_call>"
    );
    let read = |chunks: &[&str]| {
        run_with(OutputParser::new(Some(ToolFormat::Xml(XmlDialect::Qwen))).with_kinds(kinds.clone()), chunks)
    };
    let whole = read(&[text]);
    assert_eq!(whole.0, "Let me look.\n");
    assert_eq!(whole.2, Ok(()));
    let args: serde_json::Value = serde_json::from_str(&whole.1[0].1).unwrap();
    assert_eq!(args, serde_json::json!({"city": "New \"York\"\n</param\\n", "days": 3, "tags": ["a", "</b>"]}));
    assert_eq!(whole.1[1], ("ping".to_string(), "{}".to_string()));
    let chars: Vec<String> = text.chars().map(|c| c.to_string()).collect();
    assert_eq!(read(&chars.iter().map(String::as_str).collect::<Vec<_>>()), whole);
    // Cut inside a call, or broken: an error at the end.
    assert!(read(&["<tool_call>\n<function=ping>\n"]).2.is_err());
    assert!(read(&["<tool_call>\n<function=ping>\n<oops>"]).2.is_err());
    assert!(read(&["<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>x"]).2.is_err());
}

#[test]
fn mistral_args_calls_follow_each_other() {
    let plain = ToolFormat::MistralArgs { call_id: false };
    let text = "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"[ARGS]\"}[TOOL_CALLS]f-2[ARGS]7";
    let (c, calls, ok) = same_in_chunks(plain, text);
    assert_eq!((c.as_str(), ok), ("Sure.", Ok(())));
    assert_eq!(
        calls,
        vec![("get_weather".to_string(), "{\"city\": \"[ARGS]\"}".to_string()), ("f-2".to_string(), "7".to_string())]
    );
    // With ids: the model's id is the call's.
    let ids = ToolFormat::MistralArgs { call_id: true };
    let text = "[TOOL_CALLS]a[CALL_ID]abc123XYZ[ARGS]{}[TOOL_CALLS]b[CALL_ID]Q1w2E3r4T[ARGS]{\"x\": []}";
    let (_, calls, ok) = same_in_chunks(ids, text);
    assert_eq!((calls.len(), ok), (2, Ok(())));
    let mut p = OutputParser::new(Some(ids));
    p.feed(text);
    assert_eq!(p.calls()[1].id, "Q1w2E3r4T");
    assert!(run_as(ids, &["[TOOL_CALLS]a[ARGS]{}"]).2.is_err());
    assert!(run_as(plain, &["[TOOL_CALLS]a[ARGS]{\"x\": 1"]).2.is_err());
    assert!(run_as(plain, &["[TOOL_CALLS]a[ARGS]{} trailing"]).2.is_err());
}

#[test]
fn deepseek_calls_sit_between_their_markers() {
    let text = "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"<｜tool▁sep｜>\"}<｜tool▁call▁end｜>\
                <｜tool▁call▁begin｜>f-2<｜tool▁sep｜>7<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    let (c, calls, ok) = same_in_chunks(ToolFormat::DeepSeek, text);
    assert_eq!((c.as_str(), ok), ("Checking.", Ok(())));
    assert_eq!(
        calls,
        vec![
            ("get_weather".to_string(), "{\"city\": \"<｜tool▁sep｜>\"}".to_string()),
            ("f-2".to_string(), "7".to_string())
        ]
    );
    let unfinished = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{}<｜tool▁call▁end｜>";
    assert!(run_as(ToolFormat::DeepSeek, &[unfinished]).2.is_err());
    assert!(run_as(ToolFormat::DeepSeek, &["<｜tool▁calls▁begin｜>a<｜tool▁sep｜>{}"]).2.is_err());
}

#[test]
fn pythonic_calls_are_the_whole_reply() {
    let text = r#"[get_weather(city="P(a)r, \"is\"", n=[1, {"x": None}]), ping(), f(ok=True,x=-1.5e3)]"#;
    let (c, calls, ok) = same_in_chunks(ToolFormat::Pythonic, text);
    assert_eq!((c.as_str(), ok), ("", Ok(())));
    let args: Vec<(String, serde_json::Value)> = calls
        .iter()
        .map(|(n, a)| (n.clone(), serde_json::from_str(a).unwrap_or_else(|e| panic!("{a}: {e}"))))
        .collect();
    use serde_json::json;
    assert_eq!(
        args,
        vec![
            ("get_weather".to_string(), json!({"city": "P(a)r, \"is\"", "n": [1, {"x": null}]})),
            ("ping".to_string(), json!({})),
            ("f".to_string(), json!({"ok": true, "x": -1500.0})),
        ]
    );
    // Text (or an answer) that begins otherwise, or with a `[` that is no list of calls:
    // content.
    assert_eq!(same_in_chunks(ToolFormat::Pythonic, "It is [cold]."), ("It is [cold].".to_string(), vec![], Ok(())));
    assert_eq!(same_in_chunks(ToolFormat::Pythonic, "[1, 2]"), ("[1, 2]".to_string(), vec![], Ok(())));
    assert!(run_as(ToolFormat::Pythonic, &["[f(x=1)"]).2.is_err());
    assert!(run_as(ToolFormat::Pythonic, &["[f(x=1)] and more"]).2.is_err());
}

#[test]
fn no_tools_is_all_content() {
    let mut p = OutputParser::new(None);
    assert_eq!(p.feed("<tool_call>{"), vec![Piece::Content("<tool_call>{".into())]);
    assert_eq!(p.finish(), Ok(vec![]));
}
