//! Token terminals (issue 25 item 5): GBNF's `<[id]>` / `<name>` and Lark's `<|name|>` match
//! one token of the vocabulary, by id, never its text spelled by other tokens; text tokens
//! that hold the bytes named tokens stand for are barred; fast == reference masks, budgets
//! counted with the named token as one.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strictly::automaton::{Compiled, Constraint};
use strictly::grammar::{ebnf, lark, Expr, Grammar, TokenRef};
use strictly::vocab::TokenKind;
use strictly::{TokenId, TokenSet, Vocab};

use crate::common::{real_env, real_vocabs};

fn vocab(name: &str) -> Option<&'static Arc<Vocab>> {
    let v = real_vocabs().iter().find(|(n, _)| n == name).map(|(_, v)| v);
    assert!(v.is_some() || crate::common::shared_data().is_none(), "{name} is one of the shared tokenizers");
    v
}

/// The one token whose text is `name`.
fn id_of(v: &Vocab, name: &str) -> TokenId {
    (0..v.len() as u32).map(TokenId).find(|&t| v.bytes(t) == name.as_bytes()).unwrap_or_else(|| panic!("{name}"))
}

fn compile(v: &Arc<Vocab>, g: Grammar) -> strictly::Result<Arc<Compiled>> {
    Compiled::new(&real_env(v), &Constraint::Grammar(g))
}

fn ids(m: &TokenSet) -> Vec<TokenId> {
    m.iter().collect()
}

/// Random walks: fast == reference, plain and budgeted, and every allowed token commits.
fn walk(v: &Arc<Vocab>, c: &Arc<Compiled>, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut m = c.matcher();
    let (mut fast, mut slow) = (TokenSet::new(v.len()), TokenSet::new(v.len()));
    for step in 0..12 {
        m.fill_mask(&mut fast);
        m.reference_mask(&mut slow);
        assert_eq!(fast, slow, "seed {seed} step {step}");
        // A budget the output can meet, or just not.
        let least = m.min_tokens_to_finish().expect("finishable") as usize;
        let budget = (least + rng.random_range(0..3)).max(1);
        m.fill_mask_within(&mut fast, budget);
        m.reference_mask_within(&mut slow, budget);
        assert_eq!(fast, slow, "budget {budget} seed {seed} step {step}");
        let allowed: Vec<TokenId> = fast.iter().filter(|&t| !v.is_eos(t)).collect();
        if allowed.is_empty() {
            assert!(m.is_accepting() || budget <= least, "seed {seed} step {step}: a feasible budget refused all");
            break;
        }
        let t = allowed[rng.random_range(0..allowed.len())];
        assert!(m.allows(t));
        m.commit(t).unwrap();
        // The budget held: the rest fits in what was left.
        assert!(m.can_finish_within(budget - 1), "seed {seed} step {step}: {:?}", v.name(t));
    }
}

/// Llama 3's `<|python_tag|>` opens a tool call: only the token itself does, never the text
/// `<|python_tag|>` spelled by text tokens; by name or by id alike, in GBNF and Lark.
#[test]
fn a_special_token_is_allowed_where_the_grammar_names_it() {
    let Some(v) = vocab("llama-3.2") else { return };
    let tag = id_of(v, "<|python_tag|>");
    assert_eq!(v.kind(tag), TokenKind::Special);
    for src in [
        "root ::= <|python_tag|> \"{\" [a-z]+ \"}\"".to_string(),
        format!("root ::= <[{}]> \"{{\" [a-z]+ \"}}\"", tag.0),
    ] {
        let c = compile(v, ebnf::parse(&src).unwrap()).unwrap();
        assert_eq!(c.named_tokens(), vec![tag]);
        let mut m = c.matcher();
        let mut mask = TokenSet::new(v.len());
        m.fill_mask(&mut mask);
        assert_eq!(ids(&mask), vec![tag], "{src}: only the token opens the output");
        assert!(!m.allows(id_of(v, "<")), "its text is not the token");
        let least = m.min_tokens_to_finish().unwrap() as usize;
        assert!((2..=4).contains(&least), "the tag, then `{{`, a letter, `}}` in one to three tokens: {least}");
        m.fill_mask_within(&mut mask, least);
        assert_eq!(ids(&mask), vec![tag], "the tag counts as one token under a budget");
        m.commit(tag).unwrap();
        assert!(m.commit_bytes(b"{ab}").is_ok() && m.is_accepting());
        for seed in 0..6 {
            walk(v, &c, seed);
        }
    }
    let g = lark::parse("start: <|python_tag|> NAME\nNAME: /[a-z]+/", &Default::default()).unwrap();
    let c = compile(v, g).unwrap();
    let mut m = c.matcher();
    m.commit(tag).unwrap();
    m.commit_bytes(b"abc").unwrap();
    assert!(m.is_accepting());
}

/// A named text token (Qwen's `<tool_call>`, plain text in its vocabulary) is used only where
/// the grammar names it; its text elsewhere is spelled by other tokens.
#[test]
fn a_named_text_token_is_used_only_where_named() {
    let Some(v) = vocab("qwen2.5") else { return };
    let open = id_of(v, "<tool_call>");
    assert_eq!(v.kind(open), TokenKind::Text);
    let c = compile(v, ebnf::parse("root ::= <tool_call> [<a-z_>]+").unwrap()).unwrap();
    let mut m = c.matcher();
    let mut mask = TokenSet::new(v.len());
    m.fill_mask(&mut mask);
    assert_eq!(ids(&mask), vec![open]);
    m.commit(open).unwrap();
    m.fill_mask(&mut mask);
    assert!(!mask.contains(open), "not as text");
    assert!(mask.contains(id_of(v, "<")) && mask.contains(id_of(v, "tool")));
    assert!(m.commit(open).is_err());
    for seed in 0..4 {
        walk(v, &c, seed);
    }
}

/// Bytes above 0xF7 stand for named tokens: a text token holding one (GPT-2's lone byte 0xFF)
/// is barred, and a grammar that reads such bytes itself is refused.
#[test]
fn text_tokens_never_spell_a_named_token() {
    let Some(v) = vocab("gpt2") else { return };
    let ff = (0..v.len() as u32).map(TokenId).find(|&t| v.bytes(t) == [0xFF]).expect("GPT-2 has every byte");
    let eot = id_of(v, "<|endoftext|>");
    assert!(v.is_eos(eot));
    // GPT-2 has no other special token: name a text token.
    let hello = id_of(v, "hello");
    let c = compile(v, ebnf::parse(&format!("root ::= <[{}]> | [a-z]+", hello.0)).unwrap()).unwrap();
    let mut m = c.matcher();
    assert!(!m.allows(ff));
    let mut mask = TokenSet::new(v.len());
    m.fill_mask(&mut mask);
    assert!(!mask.contains(ff) && mask.contains(hello));
    // No multi-byte text token of any shared tokenizer holds such a byte (so a named token's
    // bytes are spelled by single bytes at best: the counts stay upper bounds).
    for (name, v) in real_vocabs() {
        let n = (0..v.len() as u32)
            .map(TokenId)
            .filter(|&t| v.kind(t) == TokenKind::Text && v.bytes(t).len() > 1 && v.bytes(t).iter().any(|&b| b >= 0xF8))
            .count();
        assert_eq!(n, 0, "{name}");
    }
    let mut reads = ebnf::parse(&format!("root ::= <[{}]> x\nx ::= \"a\"", hello.0)).unwrap();
    reads.rules[1].body = Expr::Regex(Arc::new(regex_syntax::hir::Hir::literal(vec![0xFF_u8]))); // a byte-level regex
    let e = compile(v, reads).err().expect("refused").to_string();
    assert!(e.contains("rule `x` reads bytes above 0xF7"), "{e}");
}

#[test]
fn unknown_and_end_tokens_are_named_errors() {
    let Some(v) = vocab("llama-3.2") else { return };
    for (src, want) in [
        (
            "root ::= \"a\" | x\nx ::= <|no_such_token|>",
            "rule `x`: no single token of the vocabulary is `<|no_such_token|>`",
        ),
        ("root ::= <[999999]>", "rule `root`: token id 999999 is not in the vocabulary (128256 ids)"),
        ("root ::= \"a\" <|eot_id|>", "rule `root`: `<|eot_id|>` is an end-of-sequence token"),
    ] {
        let g = ebnf::parse_with_warnings(src, &Default::default()).unwrap().0;
        let e = compile(v, g).err().expect(src).to_string();
        assert!(e.contains(want), "{src}: {e}");
    }
    // Without a vocabulary (the fuzzer, the reference), a token is its name.
    let g = Grammar::single(Expr::Token(TokenRef::Name("<|python_tag|>".into())));
    let r = strictly::grammar::reference::Reference::new(&g);
    assert!(r.accepts(b"<|python_tag|>"));
}

/// A run of tokens but one (`(!<X>)*`, llama.cpp's negated token terminal repeated) is any
/// text written without `X`: a control `X` ends it where the grammar names it, a text `X`
/// (Qwen's `<tool_call>`) is never used inside it while its text stays writable by other
/// tokens; with EOS as `X` it is free text. Fast == reference on random walks.
#[test]
fn a_run_of_tokens_but_one_is_any_text_without_it() {
    if let Some(v) = vocab("llama-3.2") {
        let tag = id_of(v, "<|python_tag|>");
        let src = "root ::= <|python_tag|> (!<|python_tag|>)+ <|python_tag|>";
        let c = compile(v, ebnf::parse(src).unwrap()).unwrap();
        let mut m = c.matcher();
        m.commit(tag).unwrap();
        let mut mask = TokenSet::new(v.len());
        m.fill_mask(&mut mask);
        assert!(!mask.contains(tag), "at least one character first");
        assert!(mask.contains(id_of(v, "Hello")) && mask.contains(id_of(v, "<")));
        m.commit_bytes("any text, even <|python_tag|> spelled out ✓".as_bytes()).unwrap();
        assert!(m.allows(tag) && !m.is_accepting());
        m.commit(tag).unwrap();
        assert!(m.is_accepting());
        // Reference masks over free text check nearly every token in full: one walk.
        walk(v, &c, 1);
        // EOS as the token kept out: free text that ends with EOS.
        let c = compile(v, ebnf::parse("root ::= \"Sure: \" (!<|eot_id|>)*").unwrap()).unwrap();
        let mut m = c.matcher();
        m.commit_bytes(b"Sure: ok").unwrap();
        assert!(m.is_accepting());
    }
    if let Some(v) = vocab("qwen2.5") {
        let open = id_of(v, "<tool_call>");
        let c = compile(v, ebnf::parse("root ::= \"a\" (!<tool_call>)* \"z\"").unwrap()).unwrap();
        let mut m = c.matcher();
        m.commit_bytes(b"a").unwrap();
        let mut mask = TokenSet::new(v.len());
        m.fill_mask(&mut mask);
        assert!(!mask.contains(open), "the token kept out is never used");
        assert!(mask.contains(id_of(v, "<")) && mask.contains(id_of(v, "tool")));
        assert!(m.commit(open).is_err());
        m.commit_bytes(b"<tool_call>z").unwrap();
        assert!(m.is_accepting(), "its text, spelled by other tokens");
        // Reference masks over free text check nearly every token in full: one walk.
        walk(v, &c, 1);
    }
    let Some(v) = vocab("llama-3.2") else { return };
    // An unknown token kept out is named; so is a run counted otherwise (built by hand: the
    // GBNF front end refuses it first, at its position).
    let e = compile(v, ebnf::parse("root ::= (!<|nope|>)*").unwrap()).err().expect("refused").to_string();
    assert!(e.contains("no single token of the vocabulary is `<|nope|>`"), "{e}");
    let g = Grammar::single(Expr::tokens_but(TokenRef::Name("<|python_tag|>".into()), 2, Some(3)));
    let e = compile(v, g).err().expect("refused").to_string();
    assert!(e.contains("`!<|python_tag|>` counted {2,3}: only `(!<...>)*` and `(!<...>)+`"), "{e}");
}
