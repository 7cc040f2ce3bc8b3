//! Distinct items (issue 23 items 5 and 9): `uniqueItems` over item sets too large to list, and
//! no tool call repeated in one reply. The matcher refuses the token that would finish a repeat,
//! steers away from a way that could only end in one, and says so clearly when the items have
//! run out of distinct values.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use strictly::automaton::{Compiled, Constraint, Matcher, VocabEnv};
use strictly::grammar::json_schema::JsonSchemaOptions;
use strictly::tools::xml::XmlDialect;
use strictly::tools::{arguments_grammar, calls_grammar, OutputParser, ToolFormat, ToolMode, ValueKinds};
use strictly::{TokenId, TokenSet, Vocab};

use crate::common::{random_sample, real_env, real_vocabs, walk_checking_masks};

/// Schemas whose `uniqueItems` the grammar cannot list (more than a handful of values, or
/// infinitely many), with enough items that random logits repeat themselves often.
fn sets() -> Vec<Value> {
    vec![
        json!({"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": true, "minItems": 3}),
        json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 30},
               "uniqueItems": true, "minItems": 20}),
        json!({"type": "array", "uniqueItems": true, "minItems": 6, "items": {
            "type": "object", "required": ["a", "b"],
            "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 3}, "b": {"type": "boolean"}}}}),
        // A set of sets: the inner arrays are distinct too, and compared as values.
        json!({"type": "array", "uniqueItems": true, "minItems": 5, "items": {
            "type": "array", "uniqueItems": true, "minItems": 1, "maxItems": 2,
            "items": {"type": "integer", "minimum": 0, "maximum": 3}}}),
    ]
}

fn compiled(env: &Arc<VocabEnv>, schema: &Value) -> Arc<Compiled> {
    Compiled::new(env, &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default())).unwrap()
}

/// Random samples of each schema on every real tokenizer, `seeds` per schema, each valid (by
/// the `jsonschema` crate); `also` sees each sample's text and value (and says where).
fn valid_samples(schemas: &[Value], seeds: u64, max_tokens: usize, also: impl Fn(&str, &Value, &str)) {
    for (name, vocab) in real_vocabs() {
        let env = real_env(vocab);
        for schema in schemas {
            let c = compiled(&env, schema);
            let validator = jsonschema::validator_for(schema).unwrap();
            for seed in 0..seeds {
                let at = format!("{name} seed {seed} {schema}");
                let out = random_sample(&c, seed, max_tokens).unwrap_or_else(|e| panic!("{at}: {e}"));
                let text = out.text();
                let v: Value = serde_json::from_str(&text).unwrap();
                assert!(validator.is_valid(&v), "{at}: {text} is not valid");
                also(&text, &v, &at);
            }
        }
    }
}

#[test]
fn random_samples_of_sets_are_valid_on_every_tokenizer() {
    valid_samples(&sets(), 6, 400, |_, _, _| {});
}

/// Objects whose additional keys must be distinct for a count (`minProperties` above the named
/// keys, with `maxProperties` or not) or can run out: few keys (`^[ab]$`, written key by key),
/// keys that can run out part-way (`maxLength: 1` of 65 characters, 40 of them needed;
/// `"x` can only be `"xyz"`). Before, the first was a compile error and the others ended in an
/// empty mask at random ("no way on without repeating").
fn counted_keys() -> Vec<Value> {
    vec![
        json!({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9},
               "minProperties": 4, "maxProperties": 6}),
        json!({"type": "object", "propertyNames": {"pattern": "^[ab]$"}, "additionalProperties": {"type": "integer"}}),
        json!({"type": "object", "propertyNames": {"maxLength": 1, "pattern": "^[a-z0-9A-Z_.-]*$"},
               "additionalProperties": {"type": "boolean"}, "minProperties": 40}),
        json!({"type": "object", "propertyNames": {"pattern": "^(xyz|c+)$"},
               "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}, "minProperties": 3}),
    ]
}

#[test]
fn random_samples_of_counted_keys_are_valid_on_every_tokenizer() {
    valid_samples(&counted_keys(), 4, 800, |text, v, at| {
        // No key twice (serde_json keeps the last copy: count the members as written).
        assert_eq!(top_level_keys(text).len(), v.as_object().unwrap().len(), "{at}: {text}");
    });
}

/// `min_tokens` where items or keys must be distinct is a budget that fits (the grammar's own
/// count, blind to repeats, said 10 for three distinct strings on the embedded vocabulary,
/// where every output within 10 tokens repeats one): random samples under exactly that budget
/// are complete and valid, on every tokenizer; and it is the least budget the request check
/// takes (one fewer leaves an empty mask: `min_tokens` said 4 for three distinct strings on
/// Qwen 2.5 and Llama 3.2, where the mask found 3).
#[test]
fn min_tokens_with_distinct_items_is_a_budget_that_fits_on_every_tokenizer() {
    let schemas = [&sets()[..], &counted_keys()[..2], &counted_keys()[3..]].concat();
    for (name, vocab) in real_vocabs() {
        let env = real_env(vocab);
        for schema in &schemas {
            let c = compiled(&env, schema);
            let least = c.min_tokens().unwrap_or_else(|| panic!("{name} {schema}: no min_tokens")) as usize;
            let mut mask = TokenSet::new(vocab.len());
            c.matcher().fill_mask_within(&mut mask, least - 1);
            assert!(mask.is_empty(), "{name} {schema}: {least} tokens, but a mask lets a token through at one fewer");
            let validator = jsonschema::validator_for(schema).unwrap();
            for seed in 0..2 {
                let at = format!("{name} seed {seed} {schema}, {least} tokens");
                let out = random_sample(&c, seed, least).unwrap_or_else(|e| panic!("{at}: {e}"));
                let v: Value = serde_json::from_str(&out.text()).unwrap();
                assert!(validator.is_valid(&v), "{at}: {} is not valid", out.text());
            }
        }
    }
}

/// The keys of a JSON object as written, repeats included.
fn top_level_keys(text: &str) -> Vec<String> {
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
            let mut keys = Vec::new();
            while let Some((k, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                keys.push(k);
            }
            Ok(keys)
        }
    }
    use serde::Deserializer;
    serde_json::Deserializer::from_str(text).deserialize_map(Keys).unwrap()
}

/// A vocabulary of single bytes plus the multi-byte tokens `extra`, and EOS.
fn vocab(extra: &[&str]) -> Arc<Vocab> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    toks.extend(extra.iter().map(|t| t.as_bytes().to_vec()));
    toks.push(b"</s>".to_vec());
    let eos = toks.len() as u32 - 1;
    Arc::new(Vocab::from_byte_tokens(toks, &[eos]))
}

fn id(v: &Vocab, s: &str) -> TokenId {
    (0..v.len() as u32).map(TokenId).find(|&t| v.bytes(t) == s.as_bytes()).unwrap()
}

fn mask(m: &mut Matcher, width: usize) -> TokenSet {
    let mut mask = TokenSet::new(width);
    m.fill_mask(&mut mask);
    mask
}

#[test]
fn a_repeat_is_refused_by_the_token_that_would_finish_it() {
    let v = vocab(&["a\"", "\",\"", "ab"]);
    let env = VocabEnv::new(v.clone());
    let c = compiled(&env, &json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}));
    let mut m = c.matcher();
    m.commit_bytes(b"[\"a\",\"").unwrap();
    // `a"` would finish a second "a"; `a` and `ab` may still become something else.
    for (t, ok) in [("a\"", false), ("a", true), ("ab", true), ("\"", true)] {
        assert_eq!(m.allows(id(&v, t)), ok, "{t}");
        assert_eq!(mask(&mut m, v.len()).contains(id(&v, t)), ok, "{t} in the mask");
    }
    m.commit(id(&v, "a")).unwrap();
    assert!(!m.allows(id(&v, "\"")) && !mask(&mut m, v.len()).contains(id(&v, "\"")));
    assert!(m.commit(id(&v, "\"")).is_err(), "the commit refuses it too");
    assert!(m.commit(id(&v, "\\")).is_ok(), "an escape may still make it different");
    // Equal as JSON, not as text: `1.0` repeats `1`.
    let c = compiled(&env, &json!({"type": "array", "items": {"type": "number"}, "uniqueItems": true}));
    let mut m = c.matcher();
    m.commit_bytes(b"[1,1.0").unwrap();
    assert!(!m.allows(id(&v, ",")) && !m.allows(id(&v, "]")) && m.allows(id(&v, "1")));
}

#[test]
fn fast_and_reference_masks_agree_with_marks() {
    let v = vocab(&["a\"", "\",\"", "[\"", "\"]", "1,", ",1", "12", "true", "[[", "]]", "],["]);
    let env = VocabEnv::new(v.clone());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for schema in sets() {
        let c = compiled(&env, &schema);
        for walk in 0..4 {
            walk_checking_masks(&c, &mut rng, 60, &format!("{schema} walk {walk}"));
        }
    }
}

/// Every short token over JSON's punctuation, a few letters and digits, a space and a
/// backslash (up to three bytes), and longer ones that finish several items at once.
fn dense_vocab() -> Arc<Vocab> {
    let alphabet = b"\",:[]{}ab10el \\";
    let mut toks: Vec<Vec<u8>> = alphabet.iter().map(|&b| vec![b]).collect();
    for _ in 0..2 {
        let longer: Vec<Vec<u8>> = toks
            .iter()
            .filter(|t| t.len() == toks.last().unwrap().len())
            .flat_map(|t| alphabet.iter().map(move |&b| [t.as_slice(), &[b]].concat()))
            .collect();
        toks.extend(longer);
    }
    for t in [
        "\",\"a\":1,\"a\"",
        "\"a\":1,\"a\":",
        "},{},{}",
        ",1,1,",
        ",1,1 ",
        ",0e1",
        ",null",
        ",true]",
        "\":\"a\",\"b\":\"",
        "\\\"\",\"a\":",
        "\"},{\"a\":1},",
        "\",\"\",\"",
        "[1,1]",
        "{\"a\":1,\"a\"",
        "\"a\":",
        "\"b\":",
        ",\"a\"",
    ] {
        toks.push(t.as_bytes().to_vec());
    }
    toks.push(b"</s>".to_vec());
    let eos = toks.len() as u32 - 1;
    Arc::new(Vocab::from_byte_tokens(toks, &[eos]))
}

/// The repeats filter reads only the tokens that can finish a repeat, by where the reader is
/// (see `DistinctTokens`): no mask lets through a token that the reader, reading it whole,
/// finds to finish a repeat (what `allows` and a commit judge). Checked for every token of
/// every mask along random walks over open objects (keys distinct in the default language),
/// sets, and objects inside sets, with the walk drawn toward earlier keys and items.
#[test]
fn no_mask_lets_through_a_token_that_finishes_a_repeat() {
    let v = dense_vocab();
    let env = VocabEnv::new(v.clone());
    let schemas = [
        json!({"type": "object", "additionalProperties": {"type": "integer"}}),
        json!({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1}),
        json!({"type": "object", "additionalProperties": true}),
        json!({"type": "array", "items": {"type": "object", "additionalProperties": {"type": "integer"}}}),
        json!({"type": "array", "uniqueItems": true, "items": {"type": "object", "additionalProperties": true}}),
        json!({"type": "array", "uniqueItems": true, "items": {}}),
        json!({"type": "object", "properties": {"s": {"type": "array", "uniqueItems": true,
            "items": {"type": "string", "maxLength": 3}}}, "additionalProperties": {"type": "array",
            "items": {"type": "integer"}, "uniqueItems": true}}),
    ];
    let likely: Vec<TokenId> =
        ["\"a\"", "\"b\"", ",\"a\"", "\"a\":", "\"b\":", "1,", ",1", "1", "a\"", "\"", ",", "{}", "},{"]
            .iter()
            .filter_map(|t| (0..v.len() as u32).map(TokenId).find(|&id| v.bytes(id) == t.as_bytes()))
            .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let mut checked = 0usize;
    for schema in &schemas {
        let c = compiled(&env, schema);
        for walk in 0..3 {
            let mut m = c.matcher();
            let mut text = Vec::new();
            for step in 0..40 {
                let mask = mask(&mut m, v.len());
                for t in mask.iter().filter(|&t| !v.is_eos(t)) {
                    checked += 1;
                    assert!(
                        m.allows(t),
                        "{schema} walk {walk} step {step}: the mask lets `{}` through after `{}`, which finishes a repeat",
                        String::from_utf8_lossy(v.bytes(t)),
                        String::from_utf8_lossy(&text)
                    );
                }
                let near: Vec<TokenId> = likely.iter().copied().filter(|&t| mask.contains(t)).collect();
                let all: Vec<TokenId> = mask.iter().filter(|&t| !v.is_eos(t)).collect();
                let pick = match (near.is_empty(), all.is_empty()) {
                    (_, true) => break,
                    (false, _) if rng.random_bool(0.7) => near[rng.random_range(0..near.len())],
                    _ => all[rng.random_range(0..all.len())],
                };
                m.commit(pick).unwrap();
                text.extend_from_slice(v.bytes(pick));
            }
        }
    }
    assert!(checked > 100_000, "only {checked} tokens checked");
}

/// Too few distinct values for `minItems` where the items' values are not counted when the
/// schema is compiled (objects): the mask runs out and the error says why.
#[test]
fn too_few_distinct_values_is_a_clear_error() {
    // Two values ({"a":1}, {"a":2}) for three distinct items.
    let schema = json!({"type": "array", "uniqueItems": true, "minItems": 3, "items": {"type": "object",
        "properties": {"a": {"enum": [1, 2]}}, "required": ["a"], "additionalProperties": false}});
    let (_, vocab) = &real_vocabs()[0];
    let c = compiled(&real_env(vocab), &schema);
    for seed in 0..3 {
        let e = random_sample(&c, seed, 100).unwrap_err().to_string();
        assert!(e.contains("must be distinct") && e.contains("uniqueItems"), "{e}");
    }
}

/// A minimum of distinct items or keys above how many values there are, where the values are
/// a finite language too large to list in the grammar: no output at all, known when the schema
/// is compiled (before, `check` gave a `min_tokens` and a sample ran out part-way, for 71 keys
/// of 70 with "an engine fault"). One fewer, the language is not empty.
#[test]
fn too_few_distinct_values_or_keys_is_an_empty_language() {
    let keys: Vec<String> = (0..70).map(|i| format!("k{i}")).collect();
    let cases = |n: u64| {
        vec![
            json!({"type": "array", "items": {"type": "string", "pattern": "^[ab]?$"}, "uniqueItems": true, "minItems": n - 97}),
            json!({"type": "array", "items": {"type": "string", "pattern": "^[0-9]{2}$"}, "uniqueItems": true, "minItems": n}),
            json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "uniqueItems": true,
                   "minItems": n}),
            json!({"type": "array", "items": {"enum": (0..12).collect::<Vec<_>>()}, "uniqueItems": true, "minItems": n - 88}),
            json!({"type": "array", "prefixItems": [{"type": "null"}], "items": {"type": "boolean"}, "uniqueItems": true,
                   "minItems": n - 97}),
            json!({"type": "object", "propertyNames": {"enum": keys}, "minProperties": n - 30}),
            json!({"type": "object", "patternProperties": {"^k[0-9]{2}$": {"type": "integer"}}, "properties": {"a": {}},
                   "additionalProperties": false, "minProperties": n + 1}),
        ]
    };
    let v = Arc::new(Vocab::embedded());
    let env = VocabEnv::new(v);
    for (too_many, fits) in cases(101).iter().zip(cases(100)) {
        assert!(compiled(&env, too_many).is_empty_language(), "{too_many}: not empty");
        assert!(!compiled(&env, &fits).is_empty_language(), "{fits}: empty");
    }
}

/// A minimum of keys from a finite set too large to spell out key by key (70 keys, 40 of them
/// needed: 10 of one digit, the others longer): keeping them distinct costs more tokens than
/// the count says, more than any fixed slack. `min_tokens` counts it (a way the matcher
/// committed), and random walks under a budget just above it end complete and valid (before:
/// `min_tokens` said 305 on the embedded vocabulary, the witness search ran out of work on
/// every subset of the one-digit keys, and every walk within 309 tokens ended in an empty
/// mask, "an engine fault").
#[test]
fn many_distinct_keys_of_a_finite_set_fit_a_binding_budget() {
    let keys: Vec<String> = (0..70).map(|i| format!("k{i}")).collect();
    let schema = json!({"type": "object", "propertyNames": {"enum": keys}, "minProperties": 40,
                        "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}});
    let env = VocabEnv::new(Arc::new(Vocab::embedded()));
    let c = compiled(&env, &schema);
    let least = c.min_tokens().expect("a min_tokens") as usize;
    let validator = jsonschema::validator_for(&schema).unwrap();
    for seed in 0..2 {
        let at = format!("seed {seed}, {} tokens", least + 4);
        let out = random_sample(&c, seed, least + 4).unwrap_or_else(|e| panic!("{at}: {e}"));
        let text = out.text();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(validator.is_valid(&v), "{at}: {text} is not valid");
        assert_eq!(top_level_keys(&text).len(), v.as_object().unwrap().len(), "{at}: {text}");
    }
}

/// Two distinct items where only one value exists (`{}`: an object with no properties): after
/// the first, the mask is empty and says why (the reliability fuzzer found it; the reference
/// recognizer, which does not keep items distinct, still calls `[{}` a prefix).
#[test]
fn an_empty_mask_from_running_out_of_distinct_items_says_so() {
    let v = vocab(&["{}", "},{"]);
    let env = VocabEnv::new(v.clone());
    let schema = json!({"type": "array", "minItems": 2, "maxItems": 2, "uniqueItems": true,
        "items": {"type": "object", "properties": {}, "additionalProperties": false}});
    let c = compiled(&env, &schema);
    let mut m = c.matcher();
    m.commit_bytes(b"[{}").unwrap();
    assert!(mask(&mut m, v.len()).is_empty());
    assert!(m.refused_repeats());
}

/// The calls of a reply in `format` under `tool_choice: required` with parallel calls on.
fn calls(c: &Arc<Compiled>, seed: u64, format: ToolFormat, tools: &[(&str, Value)]) -> Vec<(String, Value)> {
    let out = random_sample(c, seed, 300).unwrap_or_else(|e| panic!("{format:?} seed {seed}: {e}"));
    let kinds = Arc::new(ValueKinds::new(tools.iter().map(|(n, s)| (*n, s))));
    let mut p = OutputParser::new(Some(format)).with_kinds(kinds);
    p.feed(&out.text());
    p.finish().unwrap();
    p.calls().iter().map(|c| (c.name.clone(), serde_json::from_str(&c.arguments).unwrap())).collect()
}

fn tools_compiled(env: &Arc<VocabEnv>, tools: &[(&str, Value)], format: ToolFormat) -> Arc<Compiled> {
    let tools = tools.iter().map(|(n, s)| (n.to_string(), arguments_grammar(s, format).unwrap())).collect();
    let g = calls_grammar(tools, &ToolMode::Required, 8, format, None);
    Compiled::new(env, &Constraint::Grammar(g)).unwrap()
}

/// In the JSON formats (Hermes here) calls are compared as JSON values; in the XML dialects and
/// the pythonic format as the calls' texts (the grammar writes one per call).
#[test]
fn no_tool_call_repeats_an_earlier_one_of_the_reply() {
    let formats =
        [ToolFormat::Hermes, ToolFormat::Xml(XmlDialect::Qwen), ToolFormat::Xml(XmlDialect::Glm), ToolFormat::Pythonic];
    for (name, vocab) in real_vocabs() {
        let env = real_env(vocab);
        for format in formats {
            // One tool without arguments: one call, then the reply must end (a second call
            // could only repeat it, so it is never begun).
            let now = [("now", json!({"type": "object", "properties": {}}))];
            let c = tools_compiled(&env, &now, format);
            for seed in 0..6 {
                let got = calls(&c, seed, format, &now);
                assert_eq!(got.len(), 1, "{name} {format:?} seed {seed}: {got:?}");
            }
            // Arguments from a small set: every call differs.
            let city = json!({"type": "object", "required": ["city"],
                              "properties": {"city": {"enum": ["Paris", "Oslo", "Rome"]}}});
            let tools = [("weather", city.clone()), ("time", city)];
            let c = tools_compiled(&env, &tools, format);
            for seed in 0..6 {
                let got = calls(&c, seed, format, &tools);
                for (i, a) in got.iter().enumerate() {
                    assert!(!got[..i].contains(a), "{name} {format:?} seed {seed}: {a:?} repeated in {got:?}");
                }
            }
        }
    }
}

/// The fast mask equals the reference mask with XML and pythonic calls' text marks too.
#[test]
fn fast_and_reference_masks_agree_with_text_marks() {
    let v = vocab(&["<tool_call>", "<tool_call>\n<function=f>\n", "</function>\n</tool_call>", "\n<", "Oslo", "Paris"]);
    let env = VocabEnv::new(v.clone());
    let city = json!({"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}, "n": {"type": "integer"}}});
    let c = tools_compiled(&env, &[("f", city.clone()), ("g", city)], ToolFormat::Xml(XmlDialect::Qwen));
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for walk in 0..12 {
        walk_checking_masks(&c, &mut rng, 120, &format!("walk {walk}"));
    }
    let v = vocab(&["f(", "g(", "city=\"", "Oslo\"", ")\"", "), ", "(", ")", ")]"]);
    let env = VocabEnv::new(v.clone());
    let text =
        json!({"type": "object", "properties": {"city": {"type": "string", "maxLength": 6}, "n": {"type": "integer"}}});
    let c = tools_compiled(&env, &[("f", text.clone()), ("g", text)], ToolFormat::Pythonic);
    for walk in 0..12 {
        walk_checking_masks(&c, &mut rng, 120, &format!("pythonic walk {walk}"));
    }
}

/// A whole text (an output checked after decoding, as the server does) is judged by the
/// parser's exact marks: an unmarked array with equal items inside a tool call's arguments is
/// valid (the masks' guess, which reads every `[` of a token as marked, refused it: a 500 from
/// the server's final check), and a repeated call is still refused.
#[test]
fn a_whole_text_is_judged_by_its_exact_marks() {
    let (_, vocab) = &real_vocabs()[0];
    let env = real_env(vocab);
    let tags = json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                      "required": ["tags"]});
    let c = tools_compiled(&env, &[("f", tags)], ToolFormat::Hermes);
    let call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"tags\":[\"a\",\"a\"]}}\n</tool_call>";
    let mut m = c.matcher();
    assert!(m.commit_bytes(call.as_bytes()).is_ok() && m.is_accepting());
    let mut m = c.matcher();
    assert!(m.commit_bytes(format!("{call}\n{call}").as_bytes()).is_err());
    // Pythonic calls: `[` opens the list, not a marked array.
    let x = json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]});
    let c = tools_compiled(&env, &[("move_to", x)], ToolFormat::Pythonic);
    let mut m = c.matcher();
    assert!(m.commit_bytes(b"[move_to(x=0), move_to(x=8)]").is_ok() && m.is_accepting());
    let mut m = c.matcher();
    assert!(m.commit_bytes(b"[move_to(x=0), move_to(x=0)]").is_err());
}

/// An item can become equal to an earlier one before it ends: a number whose digits are zeros
/// once its exponent starts (`0e46` and `0E87` are both 0), a string whose rest is forced
/// (`"\u0061` under `maxLength: 1` can only be `"a"`). The token that fixes the value is
/// refused, not the one after it (which would leave no way on: the fuzzer found `[32.52,[0e46,0E87`
/// with an empty mask).
#[test]
fn a_value_fixed_before_its_end_is_refused_where_it_becomes_fixed() {
    let v = vocab(&["0E", "e4", ",0e", "\\u0061"]);
    let env = VocabEnv::new(v.clone());
    for opts in [JsonSchemaOptions::default(), JsonSchemaOptions::exact()] {
        let c = Compiled::new(
            &env,
            &Constraint::JsonSchema(json!({"type": "array", "items": {}, "uniqueItems": true}), opts.clone()),
        )
        .unwrap();
        for (prefix, refused) in [
            ("[0e46,0", &["e", "E", "e4"][..]),
            ("[0e46,", &["0E"][..]),
            ("[0e46", &[",0e"][..]),
            ("[0,-0.0", &["e", "E"][..]),
            ("[0.0,", &["0E"][..]),
        ] {
            let mut m = c.matcher();
            if m.commit_bytes(prefix.as_bytes()).is_err() {
                continue; // a spelling this mode does not write
            }
            let got = mask(&mut m, v.len());
            for t in refused {
                assert!(!got.contains(id(&v, t)), "{prefix} then {t:?} ({opts:?})");
                assert!(!m.allows(id(&v, t)), "{prefix} then {t:?} allowed ({opts:?})");
            }
            assert!(!got.is_empty(), "{prefix}: an empty mask");
        }
        let c = Compiled::new(
            &env,
            &Constraint::JsonSchema(
                json!({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": true}),
                opts.clone(),
            ),
        )
        .unwrap();
        let mut m = c.matcher();
        m.commit_bytes(b"[\"a\",\"").unwrap();
        let got = mask(&mut m, v.len());
        assert!(!got.contains(id(&v, "\\u0061")), "{opts:?}");
    }
}

/// Found by `fuzz_json_schema_structured` (minutes for one schema): near a budget's end inside
/// a string item, a token that ends inside a UTF-8 character (a byte-fallback lead byte) is
/// judged by a witness after it, and the search for one went through every continuation byte
/// (64 a byte, to the end of each way) where the cheapest way repeated an item: it ran out of
/// work and the token was refused though a way fits. The character's rest is now tried as a few
/// whole characters. Every lead byte the budget leaves room for is let through.
#[test]
fn a_token_inside_a_character_is_judged_by_a_way_that_fits() {
    let env = VocabEnv::new(Arc::new(Vocab::embedded()));
    let v = env.vocab().clone();
    let schema = json!({"type": "array", "items": {"type": "array", "items": {"type": ["string", "null"]},
        "minItems": 2, "maxItems": 2, "uniqueItems": true}, "minItems": 2, "maxItems": 2});
    let c = compiled(&env, &schema);
    let mut m = c.matcher();
    m.commit_bytes(b"[[null,\" was a little boy").unwrap();
    // The way on after the lead byte: the character's rest, then the cheapest close, whose next
    // array cannot hold `""` twice.
    let rest = v.encode(b"\"],[\"\",\" \"]]").unwrap().len();
    for (lead, continuation) in [(0xC3u8, 1), (0xE2, 2), (0xF0, 3)] {
        let t = (0..v.len() as u32).map(TokenId).find(|&t| v.bytes(t) == [lead]).unwrap();
        let mut got = TokenSet::new(v.len());
        m.fill_mask_within(&mut got, 1 + continuation + rest);
        assert!(got.contains(t), "lead byte {lead:#x} with a way of {} tokens after it", continuation + rest);
    }
}

/// Found by `fuzz_json_schema_structured` (98 s for one schema): the first key of an open
/// object, then distinct arrays of nested arrays. The witness after a lead byte needs a few
/// bytes more than the cheapest way (`[null,null]` repeats), and the search spent them on the
/// key's content: every byte a string reads, at every point of the way, ~95 ways per extra
/// byte, until its work ran out and the token was refused (1-1.5 s a mask). Of the bytes that
/// reach the same parse state from one point, a few are now followed.
#[test]
fn a_witness_that_needs_more_bytes_is_not_lost_in_a_string() {
    let env = VocabEnv::new(Arc::new(Vocab::embedded()));
    let v = env.vocab().clone();
    let schema = json!({"type": "object", "properties": {"c": {}}, "required": ["c"],
        "additionalProperties": {"type": "array", "items": {"$ref": "#/$defs/d"}, "minItems": 2, "maxItems": 4,
            "uniqueItems": true},
        "maxProperties": 4,
        "$defs": {"d": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/d"}, "maxItems": 2}]}}});
    let c = compiled(&env, &schema);
    let mut m = c.matcher();
    m.commit_bytes(b"{\" Tom and Sam. They liked to play together, but there was a girandrild coming").unwrap();
    // A way after any character: `":[[],[[]]],"c":0}` is 18 bytes, the embedded vocabulary
    // spells it in fewer tokens than this leaves.
    let mut got = TokenSet::new(v.len());
    m.fill_mask_within(&mut got, 32);
    for lead in [0xC3u8, 0xE2, 0xF0] {
        let t = (0..v.len() as u32).map(TokenId).find(|&t| v.bytes(t) == [lead]).unwrap();
        assert!(got.contains(t), "lead byte {lead:#x}");
    }
}

/// An open object with a required set of three strings, 38 tokens of the embedded vocabulary
/// left after `{"`: a key of its own first fits (shown below), but the witness search after
/// such a token raised its length a byte at a round, each round searching every way within it
/// (three distinct strings need two bytes more than the cheapest `["","",""]`), and ran out of
/// work: only the declared key was let through. Its second round now allows a few bytes more.
#[test]
fn a_key_of_its_own_is_let_through_where_a_way_after_it_fits() {
    let env = VocabEnv::new(Arc::new(Vocab::embedded()));
    let v = env.vocab().clone();
    let schema = json!({"type": "object", "properties": {"title": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 5, "uniqueItems": true}},
        "required": ["title", "tags"], "additionalProperties": true});
    let c = compiled(&env, &schema);
    let way = br#"x":0,"title":"","tags":["","a","b"]}"#;
    let tokens = v.encode(way).unwrap();
    let mut m = c.matcher();
    m.commit_bytes(b"{\"").unwrap();
    let mut check = c.matcher();
    check.commit_bytes(b"{\"").unwrap();
    for &t in &tokens {
        check.commit(t).unwrap();
    }
    assert!(check.is_accepting() && tokens.len() < 38, "the way fits: {} tokens", tokens.len());
    let mut got = TokenSet::new(v.len());
    m.fill_mask_within(&mut got, 38);
    assert!(got.contains(tokens[0]), "{:?} is the first token of a way that fits", v.name(tokens[0]));
}
