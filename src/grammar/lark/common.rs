//! The libraries `%import` can name: Lark's `common` and `unicode`, as tables of terminal
//! definitions in Lark syntax (compiled by this front end when imported, each in its own
//! namespace, so an imported `NUMBER` brings its `INT` along without clashing with the
//! grammar's own names).
//!
//! The definitions are written for strictly: they match the same tokens Lark's lexer reads
//! with the original ones, without lookarounds or lazy quantifiers, which a terminal's
//! language cannot carry. `ESCAPED_STRING` is a double-quoted string on one line whose `"`
//! and `\` are escaped by a `\` (Lark's reads up to the first `"` not escaped, the same
//! tokens); `C_COMMENT` ends at the first `*/`.

/// `(name, body)` of Lark's `common` library.
const COMMON: &[(&str, &str)] = &[
    ("DIGIT", r#""0".."9""#),
    ("HEXDIGIT", r#""a".."f"|"A".."F"|DIGIT"#),
    ("INT", "DIGIT+"),
    ("SIGNED_INT", r#"["+"|"-"] INT"#),
    ("DECIMAL", r#"INT "." INT? | "." INT"#),
    ("_EXP", r#"("e"|"E") SIGNED_INT"#),
    ("FLOAT", "INT _EXP | DECIMAL _EXP?"),
    ("SIGNED_FLOAT", r#"["+"|"-"] FLOAT"#),
    ("NUMBER", "FLOAT | INT"),
    ("SIGNED_NUMBER", r#"["+"|"-"] NUMBER"#),
    // Alone, Lark's lazy `.*?` matches only the empty string; kept for what imports it.
    ("_STRING_INNER", "/.*?/"),
    ("_STRING_ESC_INNER", r"/(?:[^\\\n]|\\[^\n])*/"),
    ("ESCAPED_STRING", r#""\"" /(?:[^"\\\n]|\\[^\n])*/ "\"""#),
    ("LCASE_LETTER", r#""a".."z""#),
    ("UCASE_LETTER", r#""A".."Z""#),
    ("LETTER", "UCASE_LETTER | LCASE_LETTER"),
    ("WORD", "LETTER+"),
    ("CNAME", r#"("_"|LETTER) ("_"|LETTER|DIGIT)*"#),
    ("WS_INLINE", r#"(" "|/\t/)+"#),
    ("WS", r"/[ \t\f\r\n]/+"),
    ("CR", r"/\r/"),
    ("LF", r"/\n/"),
    ("NEWLINE", "(CR? LF)+"),
    ("SH_COMMENT", r"/#[^\n]*/"),
    ("CPP_COMMENT", r"/\/\/[^\n]*/"),
    ("C_COMMENT", r"/\/\*([^*]|\*+[^*\/])*\*+\//"),
    ("SQL_COMMENT", r"/--[^\n]*/"),
];

/// `(name, body)` of Lark's `unicode` library (whitespace with the no-break space).
const UNICODE: &[(&str, &str)] = &[("WS_INLINE", r"/[ \t\xa0]/+"), ("WS", r"/[ \t\xa0\f\r\n]/+")];

/// The library `module` names, as Lark text (one definition a line), if there is one.
pub(super) fn library(module: &str) -> Option<String> {
    let table = match module {
        "common" => COMMON,
        "unicode" => UNICODE,
        _ => return None,
    };
    Some(table.iter().map(|(name, body)| format!("{name}: {body}\n")).collect())
}

/// The names a library defines (for error messages).
pub(super) fn names(module: &str) -> Vec<&'static str> {
    match module {
        "common" => COMMON.iter().map(|d| d.0).collect(),
        "unicode" => UNICODE.iter().map(|d| d.0).collect(),
        _ => Vec::new(),
    }
}
