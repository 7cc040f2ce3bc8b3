use super::*;

#[test]
fn canonical_forms_are_json_equality() {
    let same = [
        ("1", "1.0"),
        ("1", "10e-1"),
        ("100", "1e2"),
        ("-0", "0"),
        ("0.5", "5E-1"),
        ("\"a\"", "\"\\u0061\""),
        ("\"\\ud83d\\ude00\"", "\"😀\""),
        (r#"{"a":1,"b":[true,null]}"#, r#"{ "b" : [ true , null ] , "a" : 1.0 }"#),
        ("[1,2]", "[ 1 , 2.00 ]"),
    ];
    for (a, b) in same {
        assert_eq!(canon(a.as_bytes()), canon(b.as_bytes()), "{a} = {b}");
    }
    let different = [
        ("1", "2"),
        ("9007199254740992", "9007199254740993"),
        ("\"a\"", "\"b\""),
        ("\"1\"", "1"),
        ("[1,2]", "[2,1]"),
        ("[[1],2]", "[[1,2]]"),
        (r#"{"a":1}"#, r#"{"a":1,"b":1}"#),
        ("true", "false"),
        ("null", "\"null\""),
        ("\"\\ud800\"", "\"\\ud801\""),
    ];
    for (a, b) in different {
        assert_ne!(canon(a.as_bytes()), canon(b.as_bytes()), "{a} ≠ {b}");
    }
}

/// Reads `text` byte by byte from an array marked at its first byte (as a commit would).
fn read_all(text: &str) -> Result<Distinct, Repeated> {
    let mut d = Distinct::new(0);
    let t = text.as_bytes();
    for i in 0..t.len() {
        let marks: &[(u32, MarkAt)] = if i == 0 { &[(0, MarkAt::Array)] } else { &[] };
        d.read(&t[..=i], i, Marks::Exact(marks))?;
    }
    Ok(d)
}

#[test]
fn a_repeat_is_refused_where_the_item_ends() {
    assert!(read_all(r#"["a","b","c"]"#).is_ok());
    // The closing quote of the second "a" is the byte that repeats.
    let t = r#"["a","a"#;
    assert!(read_all(t).is_ok());
    assert_eq!(read_all(&format!("{t}\"")).err(), Some(Repeated));
    // Numbers end at the byte after them: `1` may still become `12`.
    assert!(read_all("[1,1").is_ok());
    assert!(read_all("[1,12]").is_ok());
    assert_eq!(read_all("[1,1]").err(), Some(Repeated));
    assert_eq!(read_all("[1,1.0,").err(), Some(Repeated));
    // Literals end at their last letter; containers at their bracket.
    assert_eq!(read_all("[true,true").err(), Some(Repeated));
    assert_eq!(read_all(r#"[{"a":1,"b":2},{"b":2,"a":1}"#).err(), Some(Repeated));
    assert!(read_all(r#"[{"a":1,"b":2},{"b":2,"a":1,"c":3}]"#).is_ok());
    // Strings with brackets and escaped quotes inside are one item each.
    assert!(read_all(r#"["[\"]", "]\"["]"#).is_ok());
}

#[test]
fn unmarked_arrays_inside_items_are_not_distinct_but_marked_ones_are() {
    // An item that is itself an array may repeat its own items unless that array is marked.
    assert!(read_all("[[1,1],[1,2]]").is_ok());
    assert_eq!(read_all("[[1,2],[1,2]]").err(), Some(Repeated));
    let mut d = Distinct::new(0);
    let t = b"[[1,1]";
    let marks = [(0, MarkAt::Array), (1, MarkAt::Array)];
    assert_eq!(d.read(t, 0, Marks::Exact(&marks)), Err(Repeated));
}

#[test]
fn items_after_a_marked_literal_form_one_list_for_the_whole_output() {
    let lit: Vec<Arc<str>> = vec![Arc::from("<c>")];
    let mut d = Distinct::new(1);
    let text = b"<c>{\"f\":1}</c>\n<c>{\"f\":2}</c>\n<c> {\"f\" : 1.0}";
    // The guess finds the literals in the text, as a mask would.
    assert_eq!(d.clone().read(text, 0, Marks::Guess(&lit)), Err(Repeated));
    let ok = b"<c>{\"f\":1}</c>\n<c>{\"f\":2}</c>";
    assert!(d.read(ok, 0, Marks::Guess(&lit)).is_ok());
    assert!(d.is_idle() && d.has_after_items());
    // Outside items nothing is read: a `{` of free text is not an item.
    let mut free = Distinct::new(1);
    assert!(free.read(b"{\"f\":1} {\"f\":1}", 0, Marks::Guess(&lit)).is_ok());
}

#[test]
fn the_guess_refuses_at_least_what_the_parser_reports() {
    // A token that opens an array and repeats an item in it: refused by the guess even when
    // the parser would not mark that `[` (the only difference between the two).
    let t = b"[7,7]";
    assert_eq!(Distinct::new(0).read(t, 0, Marks::Guess(&[])), Err(Repeated));
    assert!(Distinct::new(0).read(t, 0, Marks::Exact(&[])).is_ok());
}

#[test]
fn unescaping_all_of_a_text_shows_each_strings_content_as_canon_reads_it() {
    // Every string's content appears whole in it, escapes decoded as `canon` decodes them.
    let raw = br#"["\/a\u0062", "\ud83d\ude00", "x\\"]"#;
    let all = unescape_all(raw);
    for s in [&br#""\/a\u0062""#[..], br#""\ud83d\ude00""#, br#""x\\""#] {
        let c = canon(s);
        let content = &c[9..]; // `s`, the length (8 bytes), the content
        assert!(
            all.windows(content.len()).any(|w| w == content),
            "{:?} in {:?}",
            String::from_utf8_lossy(content),
            String::from_utf8_lossy(&all)
        );
    }
    // A backslash that starts no escape stays.
    assert_eq!(unescape_all(br"a\qb\"), br"a\qb\".to_vec());
}

#[test]
fn keys_are_equal_exactly_where_what_is_read_next_is_read_alike() {
    let base = r#"["x","#;
    let d0 = read_all(base).unwrap();
    let old = key::Old::of(&d0);
    let key = |more: &str| {
        let text = format!("{base}{more}");
        let mut d = d0.clone();
        d.read(text.as_bytes(), base.len(), Marks::Exact(&[])).unwrap();
        let mut k = Vec::new();
        d.key(text.as_bytes(), &old, &mut k);
        k
    };
    // Whitespace before an item, or between items, is not read again.
    assert_eq!(key(r#" "ab"#), key(r#""ab"#));
    assert_eq!(key(r#" "y" , "ab"#), key(r#""y","ab"#));
    assert_eq!(key(r#""y",1"#), key(r#""y", 1"#));
    // The text of the item being read, and the items finished, are.
    assert_ne!(key(r#""ab"#), key(r#""ac"#));
    assert_ne!(key(r#""y","ab"#), key(r#""z","ab"#));
    assert_ne!(key(r#""y",12"#), key(r#""y",1"#));
    assert_ne!(key(r#""y",{"#), key(r#""y",["#));
}

#[test]
fn a_marked_objects_keys_are_its_items() {
    let obj = [(0, MarkAt::Object)];
    assert!(read_marked(r#"{"a":1,"b":"a","c":{"a":1,"a":2},"d":["a","a"]}"#, &obj).is_ok());
    // The closing quote of the repeated key is the byte refused; values never count.
    let t = r#"{"a":1,"b":{"x":"a"},"a"#;
    assert!(read_marked(t, &obj).is_ok());
    assert_eq!(read_marked(&format!("{t}\""), &obj).err(), Some(Repeated));
    assert_eq!(read_marked(r#"{"a\"":1 , "a\u0022":2"#, &obj).err(), Some(Repeated));
    // A marked object inside: its own keys.
    let inner = [(0, MarkAt::Object), (5, MarkAt::Object)];
    assert!(read_marked(r#"{"a":{"a":1,"b":2},"b":1}"#, &inner).is_ok());
    assert_eq!(read_marked(r#"{"a":{"b":1,"b""#, &inner).err(), Some(Repeated));
    // Objects as items of a marked array: their keys are not items unless marked.
    assert!(read_all(r#"[{"a":1,"a":2},{"a":1}]"#).is_ok());
    // The guess marks every `{`: a token with two equal keys in it is refused.
    assert_eq!(Distinct::new(0).read(br#"{"k":1,"k""#, 0, Marks::Guess(&[])), Err(Repeated));
}
