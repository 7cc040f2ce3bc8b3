//! Strings: canonical JSON encoding, `minLength`/`maxLength`, `pattern`, `format`, and the
//! key language for additional properties.
//!
//! Every string is produced in canonical encoding (what `serde_json` writes): any character but
//! `"`, `\` and U+0000–U+001F stands for itself; those are escaped as `\"`, `\\`, `\b \f \n \r
//! \t`, or `\u00xx` (lower-case hex). So each decoded string has exactly one encoding, and a
//! regex over *decoded* characters (a `pattern`, a format) maps onto the encoded text by
//! replacing every character class with the encodings of its members. Each encoded unit is one
//! code point, so `minLength`/`maxLength` count units.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition};
use serde_json::{Map, Value};

use super::keywords::{ALSO_FORMATS, EXCLUDE_STRINGS, NOT_STRING};
use super::{join, Compiler, MAX_COUNT};
use crate::error::Result;
use crate::grammar::Expr;
use crate::regular::Lexeme;

/// Strings whose `maxLength` is above [`MAX_COUNT`] are produced with at most this many
/// characters (a documented, stricter subset).
pub const LONG_STRING_CAP: u64 = 1000;

/// One encoded character (canonical), the escapes sharing their `\\` (see [`encode_class`]).
const UNIT: &str = r#"(?:[^"\\\x00-\x1F]|\\(?:["\\bfnrt]|u00(?:0[0-7be-f]|1[0-9a-f])))"#;

fn hir(re: &str) -> Hir {
    crate::regular::regex::builtin(re)
}

/// Any encoded string content (what a `pattern` that says nothing becomes).
fn any_units() -> Hir {
    Form::Json.any()
}

/// How a string is written: as JSON (quoted, in canonical encoding) or as its bare text (the
/// decoded characters, no quotes, no escapes: what formats that write string values as they
/// are need, such as Qwen's XML tool calls; see [`super::compile_parts`]). The keywords mean
/// the same in both; only the spelling of each character and the quotes differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    Json,
    Text,
}

impl Form {
    /// One character as written.
    fn unit(self) -> Hir {
        match self {
            Form::Json => hir(UNIT),
            Form::Text => hir("(?s:.)"),
        }
    }

    /// Any content.
    fn any(self) -> Hir {
        match self {
            Form::Json => hir(&format!("{UNIT}*")),
            Form::Text => hir("(?s:.*)"),
        }
    }

    /// Content (as written) → the whole string.
    fn wrap(self, content: Hir) -> Lexeme {
        match self {
            Form::Json => quoted(content),
            Form::Text => Lexeme::Regex(content),
        }
    }

    /// The quote around the content (none for bare text).
    fn quote(self) -> &'static [u8] {
        match self {
            Form::Json => b"\"",
            Form::Text => b"",
        }
    }

    /// A regex over decoded characters → over the content as written.
    fn encode(self, h: &Hir) -> std::result::Result<Hir, String> {
        match self {
            Form::Json => encode(h),
            Form::Text => Ok(h.clone()),
        }
    }

    /// A string's content as written.
    fn encode_str(self, s: &str) -> String {
        match self {
            Form::Json => encode_str(s),
            Form::Text => s.to_string(),
        }
    }
}

/// Any string, quotes included.
pub(super) fn any_string() -> Expr {
    // One copy per process: most string schemas are this one.
    static ANY: std::sync::OnceLock<std::sync::Arc<Hir>> = std::sync::OnceLock::new();
    Expr::Regex(ANY.get_or_init(|| crate::regular::regex::builtin_shared(&format!("\"{UNIT}*\""))).clone())
}

/// The keywords that constrain a string ([`string_lexeme_as`] reads no others).
const STRING_KEYWORDS: [&str; 7] =
    ["pattern", "format", "minLength", "maxLength", EXCLUDE_STRINGS, NOT_STRING, ALSO_FORMATS];

pub(super) fn string(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Expr> {
    if !super::keywords::has_any(obj, &STRING_KEYWORDS) {
        // Any string (most string schemas), without building its regex to find that out.
        return Ok(any_string());
    }
    Ok(match string_lexeme(c, obj, pointer)? {
        None => {
            let (min, max) = (count(c, obj, pointer, "minLength")?, count(c, obj, pointer, "maxLength")?);
            let (min, max) = (min.unwrap_or(0), max.unwrap_or(0));
            c.nothing_because(pointer, format!("no string is at least {min} and at most {max} characters long"))
        }
        // The plain string (most string schemas): one shared copy.
        Some(Lexeme::Regex(h)) => match any_string() {
            Expr::Regex(any) if *any == h => Expr::Regex(any),
            _ => Expr::Regex(std::sync::Arc::new(h)),
        },
        Some(l) if c.explain && lexeme_is_empty(&l, c.limits)? => {
            let kws = ["pattern", "format", "minLength", "maxLength"];
            let named: Vec<String> = kws.iter().filter(|k| obj.contains_key(**k)).map(|k| format!("`{k}`")).collect();
            let why = match named.len() {
                0 | 1 => "no string satisfies every keyword here".to_string(),
                _ => format!("no string satisfies {} together", named.join(" and ")),
            };
            c.nothing_because(pointer, why)
        }
        Some(l) => Expr::Lexeme(std::sync::Arc::new(l)),
    })
}

/// `"` + content + `"`.
pub(super) fn quoted(content: Hir) -> Lexeme {
    Lexeme::Regex(Hir::concat(vec![Hir::literal(*b"\""), content, Hir::literal(*b"\"")]))
}

/// Every string (quoted, canonical), as a lexeme: a copy of one built per process, whose key
/// text is printed once (see [`Lexeme::share_text`]): every object that allows more keys than
/// it names has it in its key lexeme.
pub(super) fn any_string_lexeme() -> Lexeme {
    static ANY: std::sync::OnceLock<Lexeme> = std::sync::OnceLock::new();
    ANY.get_or_init(|| {
        let l = quoted(any_units());
        Lexeme::share_text(&l);
        l
    })
    .clone()
}

/// The quoted strings that a string schema's own keywords allow, as one lexeme: the
/// intersection of one quoted regex per keyword (`pattern`, `format`, `minLength`/`maxLength`)
/// minus the excluded values. A single keyword stays a plain regex. `None`: no string is valid.
pub(super) fn string_lexeme(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Lexeme>> {
    string_lexeme_as(c, obj, pointer, Form::Json)
}

/// [`string_lexeme`], with the strings written in `form`.
pub(super) fn string_lexeme_as(
    c: &mut Compiler,
    obj: &Map<String, Value>,
    pointer: &str,
    form: Form,
) -> Result<Option<Lexeme>> {
    let min = count(c, obj, pointer, "minLength")?.unwrap_or(0);
    let max = count(c, obj, pointer, "maxLength")?;
    if max.is_some_and(|m| m < min) {
        return Ok(None);
    }
    let mut parts: Vec<Lexeme> = Vec::new();
    if let Some(p) = super::keywords::get(obj, "pattern") {
        let p = p.as_str().ok_or_else(|| c.bad(&join(pointer, "pattern"), "`pattern` must be a string"))?;
        match pattern_lexeme_as(p, form) {
            // Every string matches: nothing to intersect with.
            Ok(Lexeme::Regex(h)) if matches!(form.wrap(form.any()), Lexeme::Regex(any) if any == h) => {}
            Ok(l) => parts.push(l),
            Err(why) => c.unenforced(pointer, "pattern", why)?,
        }
    }
    if super::keywords::get(obj, "format").is_some_and(|f| !f.is_string()) {
        return Err(c.bad(&join(pointer, "format"), "`format` must be a string"));
    }
    for f in super::keywords::formats(obj) {
        match format_regex(f) {
            Some(Ok(re)) => {
                parts.push(form.wrap(form.encode(&hir(re)).expect("built-in formats encode")));
                if let Some(narrower) = sensible_format(f).filter(|_| !c.opts.exact) {
                    parts.push(form.wrap(form.encode(&hir(narrower)).expect("built-in formats encode")));
                }
            }
            Some(Err(why)) => c.unenforced(pointer, "format", why)?,
            // Unknown formats are annotations for every validator: nothing to enforce.
            None => {}
        }
    }
    // `minLength: 1` beside a pattern or format without the empty string says nothing more:
    // no count to intersect with ("at most a hundred words", counted, in a product with a
    // count was tabled).
    let empty = [form.quote(), form.quote()].concat();
    let min = if min == 1 && max.is_none() && parts.iter().any(|p| refuses(p, &empty, c.limits)) { 0 } else { min };
    // The length bound; also the universe (every string) when nothing else is positive.
    if parts.is_empty() || min > 0 || max.is_some() {
        // A huge maxLength means "no practical limit": produce at most LONG_STRING_CAP
        // characters (stricter, so still exact). A huge minLength cannot be met that way.
        let max = max.map(|m| if m > MAX_COUNT && min <= LONG_STRING_CAP { LONG_STRING_CAP } else { m });
        if min > MAX_COUNT || max.is_some_and(|m| m > MAX_COUNT) {
            c.unenforced(pointer, "minLength", format!("length bounds above {MAX_COUNT} are not unrolled"))?;
            parts.push(form.wrap(form.any()));
        } else if min > 0 || max.is_some() {
            // A counter, not copies of the unit (and no determinization of them).
            parts.push(Lexeme::counted(form.quote(), form.unit(), min as u32, max.map(|m| m as u32), form.quote()));
        } else {
            parts.push(form.wrap(form.any()));
        }
    }
    if let Some(ex) = obj.get(EXCLUDE_STRINGS).and_then(Value::as_array) {
        let names: Vec<Hir> =
            ex.iter().filter_map(Value::as_str).map(|n| Hir::literal(form.encode_str(n).into_bytes())).collect();
        parts.push(Lexeme::Not(Box::new(form.wrap(Hir::alternation(names)))));
    }
    for not in obj.get(NOT_STRING).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object) {
        // A format's regex is a regular subset of it (and narrower still where sensible): its
        // complement would let values of the format through. Only exact ones are negated.
        if let Some(f) = not.get("format").and_then(Value::as_str) {
            let exact = matches!(f, "uuid" | "ipv4") || (f == "date" && c.opts.exact);
            if matches!(format_regex(f), Some(Ok(_))) && !exact {
                let why = format!("strictly writes a regular subset of `{f}`, whose complement would let some values of the format through");
                c.unenforced(&join(pointer, "not"), "format", why)?;
                continue;
            }
        }
        if let Some(excluded) = string_lexeme_as(c, not, &join(pointer, "not"), form)? {
            parts.push(Lexeme::Not(Box::new(excluded)));
        }
    }
    Ok(Some(Lexeme::and(parts)))
}

/// The lexeme of a compiled string-only expression (literals, regexes, lexemes, their
/// alternatives and concatenations, through rule references): `None` if it is anything else.
pub(super) fn expr_lexeme(c: &Compiler, e: &Expr, depth: usize) -> Option<Lexeme> {
    if depth > 64 {
        return None;
    }
    Some(match e {
        Expr::Empty => Lexeme::Regex(Hir::empty()),
        Expr::Literal(s) => Lexeme::Regex(Hir::literal(s.as_bytes())),
        // A mark is watched by the matcher: never folded into a lexeme.
        Expr::Mark(_) | Expr::Token(_) | Expr::TokensBut { .. } => return None,
        Expr::Regex(h) => Lexeme::Regex((**h).clone()),
        Expr::Lexeme(l) => (**l).clone(),
        Expr::Rule(r) => expr_lexeme(c, &c.rules[r.0 as usize].body, depth + 1)?,
        Expr::Alt(xs) => {
            let parts = xs.iter().map(|x| expr_lexeme(c, x, depth + 1)).collect::<Option<Vec<_>>>()?;
            if parts.iter().all(|p| matches!(p, Lexeme::Regex(_))) {
                Lexeme::Regex(Hir::alternation(
                    parts
                        .into_iter()
                        .map(|p| match p {
                            Lexeme::Regex(h) => h,
                            _ => unreachable!(),
                        })
                        .collect(),
                ))
            } else {
                // a ∨ b = ¬(¬a ∧ ¬b)
                Lexeme::Not(Box::new(Lexeme::And(parts.into_iter().map(|p| Lexeme::Not(Box::new(p))).collect())))
            }
        }
        Expr::Seq(xs) => {
            let parts = xs
                .iter()
                .map(|x| match expr_lexeme(c, x, depth + 1)? {
                    Lexeme::Regex(h) => Some(h),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            Lexeme::Regex(Hir::concat(parts))
        }
        Expr::Repeat { .. } => return None,
    })
}

/// Does `dfa` (a lexeme over quoted strings) accept the JSON string `s` (quoted, canonical)?
pub(super) fn accepts_str(dfa: &crate::regular::Dfa, s: &str) -> bool {
    dfa.is_accepting(dfa.run(dfa.start(), format!("\"{}\"", encode_str(s)).as_bytes()))
}

/// Does the lexeme's DFA (built under `limits`) refuse `bytes`? (`false` where it cannot be
/// built: nothing is known.)
fn refuses(lexeme: &Lexeme, bytes: &[u8], limits: crate::regular::DfaLimits) -> bool {
    crate::regular::Dfa::shared(lexeme, limits).is_ok_and(|d| !d.is_accepting(d.run(d.start(), bytes)))
}

/// Is the lexeme's language empty? (Its DFA is built under the compile's limits.)
pub(super) fn lexeme_is_empty(lexeme: &Lexeme, limits: crate::regular::DfaLimits) -> Result<bool> {
    Ok(crate::regular::Dfa::shared(lexeme, limits)?.start() == crate::regular::StateId::DEAD)
}

/// A non-negative integer keyword (`minLength`, `maxItems`, ...).
pub(super) fn count(c: &Compiler, obj: &Map<String, Value>, pointer: &str, kw: &str) -> Result<Option<u64>> {
    match super::keywords::get(obj, kw) {
        None => Ok(None),
        Some(v) => {
            match v.as_u64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64)) {
                Some(n) => Ok(Some(n)),
                None => Err(c.bad(&join(pointer, kw), format!("`{kw}` must be a non-negative integer"))),
            }
        }
    }
}

/// The encoded content (between the quotes) of strings that a JSON Schema `pattern` matches:
/// ECMA-262 syntax, "contains" semantics unless anchored.
pub(super) fn pattern_content(pattern: &str) -> std::result::Result<Hir, String> {
    pattern_content_as(pattern, Form::Json)
}

/// The quoted strings a JSON Schema `pattern` matches, as a lexeme: the intersection of its
/// [parts'](super::ecma::pattern_parts) strings and the complements of its negated parts' (one
/// regex for a pattern without lookaheads).
pub(super) fn pattern_lexeme(pattern: &str) -> std::result::Result<Lexeme, String> {
    pattern_lexeme_as(pattern, Form::Json)
}

/// [`pattern_lexeme`], the strings written in `form`.
fn pattern_lexeme_as(pattern: &str, form: Form) -> std::result::Result<Lexeme, String> {
    let mut out = Vec::new();
    for (negated, part) in super::ecma::pattern_parts(pattern) {
        let l = form.wrap(pattern_content_as(&part, form)?);
        out.push(if negated { Lexeme::Not(Box::new(l)) } else { l });
    }
    Ok(Lexeme::and(out))
}

/// [`pattern_content`], the content written in `form`.
fn pattern_content_as(pattern: &str, form: Form) -> std::result::Result<Hir, String> {
    let translated = super::ecma::ecma_to_rust(pattern)?;
    let h = crate::regular::regex::parse(&translated).map_err(|e| format!("pattern {pattern:?}: {e}"))?;
    anchored_branches(&h, form)
}

/// The pattern's language under "contains" semantics, with `^`/`$` wherever they occur outside
/// repetitions: the pattern becomes a union of anchored parts ([`anchor_parts`]), and each
/// part's unanchored ends are wrapped with "any units".
fn anchored_branches(h: &Hir, form: Form) -> std::result::Result<Hir, String> {
    let any = form.any();
    let parts = anchor_parts(h)?;
    // A part that matches the empty string and is not anchored at both ends matches in every
    // string (at its start or its end): the pattern says nothing (`([A-Z]+)?`, `^a*`). Kept
    // as a product with a length bound it would cost thousands of states for no constraint.
    if parts
        .iter()
        .any(|(start, core, end)| !(*start && *end) && core.iter().all(|x| x.properties().minimum_len() == Some(0)))
    {
        return Ok(any);
    }
    // Parts anchored alike share their "any units" ends: `.*(a|b).*`, not `.*a.*|.*b.*`. Kept
    // apart, the determinized union tracks which of the parts have matched so far: 2^k states
    // (`^list|date|time|…|number$`, ten parts: 24,000 states and most of a second).
    let mut alts = Vec::new();
    for anchoring in [(true, true), (true, false), (false, true), (false, false)] {
        let cores = parts
            .iter()
            .filter(|(start, _, end)| (*start, *end) == anchoring)
            .map(|(_, core, _)| {
                let mut h = Hir::concat(core.clone());
                for (anchored, front) in [(anchoring.0, true), (anchoring.1, false)] {
                    if !anchored {
                        h = trim_free_end(&h, front);
                    }
                }
                form.encode(&h)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if cores.is_empty() {
            continue;
        }
        let mut out = Vec::new();
        if !anchoring.0 {
            out.push(any.clone());
        }
        out.push(Hir::alternation(cores));
        if !anchoring.1 {
            out.push(any.clone());
        }
        alts.push(Hir::concat(out));
    }
    Ok(Hir::alternation(alts))
}

/// `h` (anchor-free) less what "any units" at one of its ends (the front, or else the back)
/// makes redundant: with them there, both match in the same strings. An optional part at that
/// end goes (`.*x?y` is `.*y`), a repetition keeps its least count (`.*x{2,5}` is `.*x{2}`),
/// alternatives are trimmed each. An unanchored URI pattern whose authority, path, query and
/// fragment may all be empty is "a scheme and a colon" anywhere: 4 DFA states where the full
/// pattern determinized for 0.3 s.
///
/// Invariant: the result is nullable only if `h` is (what is dropped is nullable; a kept edge
/// part is trimmed to a non-nullable one).
fn trim_free_end(h: &Hir, front: bool) -> Hir {
    let nullable = |x: &Hir| x.properties().minimum_len() == Some(0) && x.properties().look_set().is_empty();
    match h.kind() {
        HirKind::Capture(c) => trim_free_end(&c.sub, front),
        HirKind::Concat(xs) => {
            let mut xs = xs.clone();
            while let Some(x) = if front { xs.first() } else { xs.last() } {
                if !nullable(x) {
                    break;
                }
                if front {
                    xs.remove(0);
                } else {
                    xs.pop();
                }
            }
            if let Some(x) = if front { xs.first_mut() } else { xs.last_mut() } {
                *x = trim_free_end(x, front);
            }
            Hir::concat(xs)
        }
        HirKind::Alternation(xs) if !xs.iter().any(nullable) => {
            Hir::alternation(xs.iter().map(|x| trim_free_end(x, front)).collect())
        }
        // x{n,m} is x{0,m-n}x{n} (or the other way round): the optional copies go.
        HirKind::Repetition(r) if r.min == 1 => trim_free_end(&r.sub, front),
        HirKind::Repetition(r) if r.min > 1 => Hir::repetition(Repetition { max: Some(r.min), ..r.clone() }),
        _ if nullable(h) => Hir::empty(),
        _ => h.clone(),
    }
}

/// Most anchored parts a pattern may expand into.
const MAX_ANCHOR_PARTS: usize = 256;

/// `h` as a union of parts `(start, core, end)`: `core` (anchor-free) matched at a position
/// that must be the text's start when `start` and must end at the text's end when `end`.
/// Concatenation multiplies parts out: a `$` followed by something that consumes text, or a
/// `^` after something that did, leaves no match (those only keep their empty strings).
/// Anchors inside repetitions and other look-arounds are refused.
fn anchor_parts(h: &Hir) -> std::result::Result<Vec<(bool, Vec<Hir>, bool)>, String> {
    let has_look =
        |h: &Hir| h.properties().look_set().contains(Look::Start) || h.properties().look_set().contains(Look::End);
    if !has_look(h) {
        return match h.properties().look_set().is_empty() {
            true => Ok(vec![(false, vec![h.clone()], false)]),
            false => Err(format!(
                "anchors and word boundaries inside a pattern ({:?}) are not supported",
                h.properties().look_set()
            )),
        };
    }
    let empty_only = |core: &[Hir]| core.iter().all(|x| x.properties().minimum_len() == Some(0));
    Ok(match h.kind() {
        HirKind::Look(Look::Start) => vec![(true, Vec::new(), false)],
        HirKind::Look(Look::End) => vec![(false, Vec::new(), true)],
        HirKind::Capture(cap) => anchor_parts(&cap.sub)?,
        HirKind::Alternation(xs) => {
            let mut out = Vec::new();
            for x in xs {
                out.extend(anchor_parts(x)?);
            }
            out
        }
        HirKind::Concat(xs) => {
            let mut acc: Vec<(bool, Vec<Hir>, bool)> = vec![(false, Vec::new(), false)];
            for x in xs {
                let parts = anchor_parts(x)?;
                let mut next = Vec::new();
                for (s1, c1, e1) in &acc {
                    for (s2, c2, e2) in &parts {
                        // After `$` nothing may be consumed; before `^` nothing may have been.
                        if (*e1 && !empty_only(c2)) || (*s2 && !empty_only(c1)) {
                            continue;
                        }
                        let mut core = if *s2 { Vec::new() } else { c1.clone() };
                        if !*e1 {
                            core.extend(c2.iter().cloned());
                        }
                        next.push((*s1 || *s2, core, *e1 || *e2));
                    }
                }
                if next.len() > MAX_ANCHOR_PARTS {
                    return Err(format!("the pattern's anchors expand into more than {MAX_ANCHOR_PARTS} alternatives"));
                }
                acc = next;
            }
            acc
        }
        _ => return Err("anchors inside a repetition in a pattern are not supported".into()),
    })
}

/// Maps a regex over decoded characters onto canonical encoded text.
fn encode(h: &Hir) -> std::result::Result<Hir, String> {
    Ok(match h.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).map_err(|_| "a pattern literal is not UTF-8".to_string())?;
            Hir::literal(encode_str(s).into_bytes())
        }
        HirKind::Class(Class::Unicode(cls)) => encode_class(cls),
        HirKind::Class(Class::Bytes(_)) => return Err("byte-oriented classes are not supported in patterns".into()),
        HirKind::Look(l) => {
            return Err(format!("anchors and word boundaries inside a pattern ({l:?}) are not supported"))
        }
        HirKind::Repetition(r) => Hir::repetition(Repetition { sub: Box::new(encode(&r.sub)?), ..r.clone() }),
        HirKind::Capture(c) => encode(&c.sub)?,
        HirKind::Concat(xs) => Hir::concat(xs.iter().map(encode).collect::<std::result::Result<_, _>>()?),
        HirKind::Alternation(xs) => Hir::alternation(xs.iter().map(encode).collect::<std::result::Result<_, _>>()?),
    })
}

/// The canonical JSON encoding of a string's content (no quotes).
pub(super) fn encode_str(s: &str) -> String {
    let quoted = serde_json::to_string(s).expect("strings serialize");
    quoted[1..quoted.len() - 1].to_string()
}

/// A class of decoded characters → the alternation of their encodings: the plain members as
/// one class, the escaped ones (all `\\`-led) as one trie (`\\(?:[bt]|u00(?:0[0-7]|1f))`),
/// not an alternative per escape: a regex engine's automaton states then hold one pending
/// escape, not thirty (a pattern's `.` cost 25 µs per determinized state with them apart).
fn encode_class(cls: &ClassUnicode) -> Hir {
    let specials: Vec<char> = ('\0'..='\x1f').chain(['"', '\\']).collect();
    let mut plain = cls.clone();
    let mut special = ClassUnicode::new(specials.iter().map(|&c| ClassUnicodeRange::new(c, c)));
    plain.difference(&special);
    special.intersect(cls);
    let mut alts = Vec::new();
    if !plain.ranges().is_empty() {
        alts.push(Hir::class(Class::Unicode(plain)));
    }
    let mut escapes: Vec<Vec<u8>> =
        special.iter().flat_map(|r| r.start()..=r.end()).map(|c| encode_str(&c.to_string()).into_bytes()).collect();
    escapes.sort_unstable();
    if !escapes.is_empty() {
        alts.push(ascii_trie(&escapes));
    }
    Hir::alternation(alts)
}

/// The alternation of `strings` (sorted, distinct, ASCII) with common prefixes shared: each
/// first byte once, followed by the trie of what follows it; bytes that end a string and lead
/// nowhere else as one class.
pub(super) fn ascii_trie(strings: &[Vec<u8>]) -> Hir {
    let mut ends = Vec::new();
    let mut alts = Vec::new();
    let mut rest = strings;
    if rest.first().is_some_and(|s| s.is_empty()) {
        rest = &rest[1..];
    }
    while let Some(first) = rest.first() {
        let b = first[0];
        debug_assert!(b.is_ascii(), "escapes are ASCII");
        let n = rest.iter().take_while(|s| s[0] == b).count();
        let (group, tail) = rest.split_at(n);
        if n == 1 && group[0].len() == 1 {
            ends.push(ClassUnicodeRange::new(b as char, b as char));
        } else {
            let suffixes: Vec<Vec<u8>> = group.iter().map(|s| s[1..].to_vec()).collect();
            alts.push(Hir::concat(vec![Hir::literal([b]), ascii_trie(&suffixes)]));
        }
        rest = tail;
    }
    if !ends.is_empty() {
        alts.insert(0, Hir::class(Class::Unicode(ClassUnicode::new(ends))));
    }
    if strings.first().is_some_and(|s| s.is_empty()) {
        alts.push(Hir::empty());
    }
    Hir::alternation(alts)
}

/// The sensible language's narrowing of a date or time format (intersected with
/// [`format_regex`]'s): years 0001 to 9999 and at most six fraction digits, which Python's
/// `datetime` and Pydantic read (the year 0000 and nanoseconds are
/// valid RFC 3339 that they refuse).
fn sensible_format(f: &str) -> Option<&'static str> {
    Some(match f {
        "date" => r"(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-[0-9]{2}-[0-9]{2}",
        "time" => r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})",
        "date-time" => {
            r"(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
        }
        _ => return None,
    })
}

/// Regexes over decoded characters for the formats we enforce (a regular subset of each).
/// `None` for formats no validator knows (annotations only); `Some(Err)` for known formats we
/// cannot enforce.
fn format_regex(f: &str) -> Option<std::result::Result<&'static str, String>> {
    const DATE: &str = r"(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)";
    const TIME: &str =
        r"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))";
    Some(Ok(match f {
        "date" => DATE,
        "time" => TIME,
        "date-time" => {
            const DT: &str = concat!(
                r"(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)",
                "T",
                r"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"
            );
            DT
        }
        "duration" => {
            r"P(?:(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)"
        }
        // Host labels: letters/digits, single hyphens inside (never `--`, so no `xn--` A-labels
        // whose punycode would need checking), at most 29 characters.
        "email" => {
            r"[A-Za-z0-9_+-]{1,20}(?:\.[A-Za-z0-9_+-]{1,20}){0,2}@[A-Za-z0-9](?:-?[A-Za-z0-9]){0,18}(?:\.[A-Za-z0-9](?:-?[A-Za-z0-9]){0,18}){0,2}\.[A-Za-z]{2,6}"
        }
        "hostname" => r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,28}(?:\.[A-Za-z0-9](?:-?[A-Za-z0-9]){0,28}){0,4}",
        "ipv4" => {
            r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}"
        }
        "ipv6" => concat!(
            r"(?:(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|(?:[0-9a-fA-F]{1,4}:){1,7}:|(?:[0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}",
            r"|(?:[0-9a-fA-F]{1,4}:){1,5}(?::[0-9a-fA-F]{1,4}){1,2}|(?:[0-9a-fA-F]{1,4}:){1,4}(?::[0-9a-fA-F]{1,4}){1,3}",
            r"|(?:[0-9a-fA-F]{1,4}:){1,3}(?::[0-9a-fA-F]{1,4}){1,4}|(?:[0-9a-fA-F]{1,4}:){1,2}(?::[0-9a-fA-F]{1,4}){1,5}",
            r"|[0-9a-fA-F]{1,4}:(?::[0-9a-fA-F]{1,4}){1,6}|:(?:(?::[0-9a-fA-F]{1,4}){1,7}|:))"
        ),
        "uuid" => r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        // RFC 3986 with its character classes as they are (unreserved, sub-delims, `:`/`@`,
        // percent escapes): user info, a port, an empty host (`file:///x`), paths without an
        // authority (`urn:a:b`, `mailto:x@y`), queries and fragments. Schemes, user info and
        // host labels of any length, as the RFC has them (counted, they multiplied the
        // automaton's states: 476 states with a 16-character scheme and 32-character user, 49
        // without, and a product with `maxLength` scales with them).
        "uri" | "iri" => concat!(
            r"[A-Za-z][A-Za-z0-9+.-]*:",
            r"(?://(?:(?:[A-Za-z0-9._~!$&'()*+,;=:-]|%[0-9A-Fa-f]{2})+@)?(?:[A-Za-z0-9](?:-?[A-Za-z0-9])*(?:\.[A-Za-z0-9](?:-?[A-Za-z0-9])*)*)?(?::[0-9]{1,5})?(?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*)*",
            r"|/?(?:(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})+(?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*)*)?)",
            r"(?:\?(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?(?:#(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?"
        ),
        // A URI, or a relative reference: a network path, an absolute path, or a relative path
        // whose first segment has no `:` (else it would read as a scheme).
        "uri-reference" | "iri-reference" => concat!(
            r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?",
            r"(?://(?:(?:[A-Za-z0-9._~!$&'()*+,;=:-]|%[0-9A-Fa-f]{2})+@)?(?:[A-Za-z0-9](?:-?[A-Za-z0-9])*(?:\.[A-Za-z0-9](?:-?[A-Za-z0-9])*)*)?(?::[0-9]{1,5})?(?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*)*",
            r"|/?(?:(?:[A-Za-z0-9._~!$&'()*+,;=@-]|%[0-9A-Fa-f]{2})+(?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*)*)?)",
            r"(?:\?(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?(?:#(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?"
        ),
        "json-pointer" => r"(?:/(?:[^/~]|~[01])*)*",
        "relative-json-pointer" => r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^/~]|~[01])*)*)",
        // Regular subsets of formats that are not regular (or not worth it), each a subset of
        // what the format allows: ASCII hostnames and addresses are valid IDN ones; URI
        // references without expressions are valid URI templates; plain words are valid
        // regular expressions (ECMA-262: none of these characters is special outside a class).
        "idn-hostname" => return format_regex("hostname"),
        "idn-email" => return format_regex("email"),
        "uri-template" => return format_regex("uri-reference"),
        "regex" => r"[A-Za-z0-9 _-]{0,64}",
        _ => return None,
    }))
}
