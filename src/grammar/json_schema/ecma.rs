//! ECMA-262 regular expressions (JSON Schema `pattern`, `patternProperties`) translated to
//! `regex-syntax` syntax, meaning what ECMA-262 means: [`ecma_to_rust`].
//!
//! JSON Schema patterns are ECMA-262 regexes, and validators compile them with the `u` flag
//! (Ajv does). Where the two syntaxes read the same text differently, the translation writes
//! the ECMA meaning out explicitly:
//! - `\d \w` are ASCII (`[0-9]`, `[A-Za-z0-9_]`), `\s` is ECMA's white space and line
//!   terminators (it has U+FEFF, Rust's has not); `.` is any character but a line terminator;
//! - `\cJ` (a control character: the letter's code mod 32), `\0` (NUL), `\xHH`, `\uHHHH`
//!   (surrogate pairs joined), `\u{H…}`, `\b` inside a class (backspace);
//! - `\/`, `\-` and every other escaped punctuation character are the character itself;
//! - `[` inside a class is a plain character (`[[]`, `[a[]`), as are `&&`, `--`, `~~` there
//!   (set operations in `regex-syntax`);
//! - `{` and `}` that do not make a quantifier `{n}`, `{n,}`, `{n,m}` are plain characters;
//! - `[^]` is any character.
//!
//! What has no regular meaning is refused with a reason: backreferences (`\1`, `\k<name>`),
//! word boundaries, legacy octal escapes (`\01`), unknown letter escapes (`\q`, a syntax error
//! under the `u` flag), lookaround anywhere but at the start. Anchors pass through (`string.rs`
//! reads them).
//!
//! Lookaheads right after a leading `^` (`^(?!@@)[\w@]+$`, `^(?=.{1,255}$)(?!.*//).*`, the
//! form real schemas use to exclude names) and tempered tokens (`^((?!clyde).)*$`: "no
//! `clyde` anywhere") have a regular meaning: [`lookahead_parts`] writes such a pattern as a
//! conjunction of patterns without lookaround, some negated (`string.rs` builds the lexeme:
//! an intersection of automata and complements; `validate.rs` runs each part).

/// ECMA's `\s`: white space and line terminators.
const ECMA_SPACE: &str = r"\t\n\x0B\x0C\r \u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF";

/// Translates an ECMA-262 regex to `regex-syntax`, keeping its ECMA meaning (see the module
/// docs); `Err` says why a pattern cannot be translated.
pub(super) fn ecma_to_rust(p: &str) -> Result<String, String> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 16);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '\\' => i = escape(&chars, i, in_class, &mut out)?,
            '[' if !in_class => {
                in_class = true;
                let negated = chars.get(i) == Some(&'^');
                if negated {
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    if !negated {
                        return Err("the empty class `[]` matches nothing".into());
                    }
                    i += 1;
                    in_class = false;
                    out.push_str(r"[\x{0}-\x{10FFFF}]");
                    continue;
                }
                out.push_str(if negated { "[^" } else { "[" });
            }
            '[' => out.push_str(r"\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '.' if !in_class => out.push_str(r"[^\n\r\u2028\u2029]"),
            '&' | '~' | '-' if in_class && chars.get(i) == Some(&c) => {
                // regex-syntax reads `&&`, `~~`, `--` in classes as set operations.
                out.push('\\');
                out.push(c);
            }
            '{' if !in_class => match quantifier(&chars, i) {
                Some(end) => {
                    out.push('{');
                    out.extend(&chars[i..end]);
                    i = end;
                }
                None => out.push_str(r"\{"),
            },
            // A `}` that closes a quantifier was copied with it.
            '}' if !in_class => out.push_str(r"\}"),
            '(' if !in_class && chars.get(i) == Some(&'?') => {
                let next = (chars.get(i + 1), chars.get(i + 2));
                if matches!(next, (Some('<'), Some('=' | '!'))) {
                    return Err("lookbehind is not supported".into());
                }
                if matches!(next, (Some('=' | '!'), _)) {
                    return Err("lookahead is supported only right after a leading `^` (`^(?!…)…`, with no `|` \
                                outside groups after it) and as a tempered token (`^((?!…).)*$`)"
                        .into());
                }
                out.push('(');
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// `p` as the patterns (JSON Schema semantics, no lookaround) whose conjunction it is:
/// `(negated, pattern)`, the string matching `pattern` or, when `negated`, not matching it.
/// A pattern with lookaheads where they are regular is split ([`lookahead_parts`]); any other
/// is its one part (lookarounds in it are then refused by [`ecma_to_rust`]).
pub(super) fn pattern_parts(p: &str) -> Vec<(bool, String)> {
    lookahead_parts(p).unwrap_or_else(|| vec![(false, p.to_string())])
}

/// A pattern with lookaheads in one of the two shapes that have a regular meaning, as the
/// patterns (JSON Schema semantics, no lookaround) whose conjunction it is: `(negated,
/// pattern)`, the string matching `pattern` or, when `negated`, not matching it. `None` for
/// any other pattern (with lookarounds, [`ecma_to_rust`] then refuses it).
///
/// - `^(?=B)…(?!C)…R`: lookaheads right after a leading `^` (`^`s between them allowed), then
///   the rest `R` with no `|` outside its groups (else the lookaheads would bind to its first
///   branch only: `^(?!a)b|c`). A lookahead at the start sees the whole string, so this matches
///   exactly the strings `^R` matches whose prefix `^(?:B)` matches and `^(?:C)` does not.
/// - `^((?!X)c)*$` (or `(?:…)`, or `+`), "a tempered token", with `c` one character (a
///   class, `.`, a literal character) and `X` matching no empty string: every position checks
///   that no `X` starts there, so this matches the strings of `c`s that contain no `X` (an
///   `X` that matched the empty string would fail at every position: refused).
fn lookahead_parts(p: &str) -> Option<Vec<(bool, String)>> {
    let chars: Vec<char> = p.chars().collect();
    if chars.first() != Some(&'^') {
        return None;
    }
    if let Some(parts) = tempered(&chars) {
        return Some(parts);
    }
    let mut i = 1;
    let mut parts = vec![(false, String::new())];
    loop {
        match chars.get(i..i + 3) {
            Some(['(', '?', c @ ('=' | '!')]) => {
                let end = group_end(&chars, i)?;
                let body: String = chars[i + 3..end].iter().collect();
                parts.push((*c == '!', format!("^(?:{body})")));
                i = end + 1;
            }
            _ if chars.get(i) == Some(&'^') => i += 1,
            _ => break,
        }
    }
    if parts.len() == 1 || has_top_level_bar(&chars[i..]) {
        return None;
    }
    parts[0].1 = std::iter::once('^').chain(chars[i..].iter().copied()).collect();
    Some(parts)
}

/// The tempered-token shape of [`lookahead_parts`] (`chars` starts with `^`).
fn tempered(chars: &[char]) -> Option<Vec<(bool, String)>> {
    let (open, close) = (1, group_end(chars, 1)?);
    let mut i = open + 1;
    if chars.get(i..i + 2) == Some(&['?', ':']) {
        i += 2;
    }
    if chars.get(i..i + 3) != Some(&['(', '?', '!']) {
        return None;
    }
    let look_end = group_end(chars, i)?;
    let avoided: String = chars[i + 3..look_end].iter().collect();
    let unit: String = chars[look_end + 1..close].iter().collect();
    let repeat = *chars.get(close + 1)?;
    if !matches!(repeat, '*' | '+') || chars.get(close + 2..) != Some(&['$']) {
        return None;
    }
    use regex_syntax::hir::HirKind;
    let parse = |p: &str| crate::regular::regex::parse(&ecma_to_rust(p).ok()?).ok();
    let one_char = match parse(&unit)?.kind() {
        HirKind::Class(_) => true,
        HirKind::Literal(l) => std::str::from_utf8(&l.0).is_ok_and(|s| s.chars().count() == 1),
        _ => false,
    };
    let nullable = parse(&avoided)?.properties().minimum_len() == Some(0);
    if !one_char || nullable {
        return None;
    }
    Some(vec![(false, format!("^(?:{unit}){repeat}$")), (true, format!("(?:{avoided})"))])
}

/// The index of the `)` that closes the group opened at `chars[open]` (escapes and classes
/// skipped), or `None` if it is not closed.
fn group_end(chars: &[char], open: usize) -> Option<usize> {
    if chars.get(open) != Some(&'(') {
        return None;
    }
    structure(&chars[open..])
        .find(|&(_, c, depth, in_class)| c == ')' && !in_class && depth == 1)
        .map(|(i, ..)| open + i)
}

/// Whether `chars` has a `|` outside every group and class.
fn has_top_level_bar(chars: &[char]) -> bool {
    structure(chars).any(|(_, c, depth, in_class)| c == '|' && !in_class && depth == 0)
}

/// The characters of `chars` that are not escaped, each with its index, the group depth
/// before it and whether it is inside a class.
fn structure(chars: &[char]) -> impl Iterator<Item = (usize, char, usize, bool)> + '_ {
    let (mut depth, mut in_class, mut i) = (0usize, false, 0usize);
    std::iter::from_fn(move || {
        while i < chars.len() {
            let (at, c) = (i, chars[i]);
            i += 1;
            if c == '\\' {
                i += 1;
                continue;
            }
            let seen = (at, c, depth, in_class);
            match c {
                '[' if !in_class => in_class = true,
                ']' if in_class => in_class = false,
                '(' if !in_class => depth += 1,
                ')' if !in_class => depth = depth.saturating_sub(1),
                _ => {}
            }
            return Some(seen);
        }
        None
    })
}

/// If `{` (just before `chars[i]`) starts a quantifier `{n}`, `{n,}` or `{n,m}`, the index
/// just past its `}`.
fn quantifier(chars: &[char], mut i: usize) -> Option<usize> {
    let digits = |i: &mut usize| {
        let start = *i;
        while chars.get(*i).is_some_and(|c| c.is_ascii_digit()) {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return None;
    }
    if chars.get(i) == Some(&',') {
        i += 1;
        digits(&mut i);
    }
    (chars.get(i) == Some(&'}')).then_some(i + 1)
}

/// `n` hex digits at `chars[i..]`, as a number.
fn hex(chars: &[char], i: usize, n: usize) -> Option<u32> {
    let digits = chars.get(i..i + n)?;
    digits.iter().try_fold(0u32, |v, c| Some(v * 16 + c.to_digit(16)?))
}

/// One character, written so that `regex-syntax` reads it as that character in a class or
/// out of one.
fn literal(out: &mut String, c: char) {
    out.push_str(&format!(r"\x{{{:X}}}", c as u32));
}

/// The escape whose letter is at `chars[i]` (just after the backslash), written to `out`;
/// returns the index after it.
fn escape(chars: &[char], i: usize, in_class: bool, out: &mut String) -> Result<usize, String> {
    let Some(&e) = chars.get(i) else { return Err("pattern ends with a lone backslash".into()) };
    let next = i + 1;
    let set = match e {
        'd' => Some(("0-9", false)),
        'D' => Some(("0-9", true)),
        'w' => Some(("A-Za-z0-9_", false)),
        'W' => Some(("A-Za-z0-9_", true)),
        's' => Some((ECMA_SPACE, false)),
        'S' => Some((ECMA_SPACE, true)),
        _ => None,
    };
    if let Some((body, negated)) = set {
        if in_class && !negated {
            out.push_str(body);
        } else {
            out.push_str(if negated { "[^" } else { "[" });
            out.push_str(body);
            out.push(']');
        }
        return Ok(next);
    }
    match e {
        'b' if in_class => literal(out, '\u{8}'),
        'b' => return Err(r"word boundaries (\b) are not supported".into()),
        'B' => return Err(r"\B is not supported".into()),
        'c' => match chars.get(next) {
            Some(&l) if l.is_ascii_alphabetic() => {
                literal(out, char::from(l as u8 % 32));
                return Ok(next + 1);
            }
            _ => return Err(r"`\c` must be followed by a letter (a control escape such as `\cJ`)".into()),
        },
        '0' if chars.get(next).is_some_and(|c| c.is_ascii_digit()) => {
            return Err(r"octal escapes (`\0` followed by a digit) are not supported".into())
        }
        '0' => literal(out, '\0'),
        '1'..='9' => return Err(format!(r"backreferences (`\{e}`) are not supported")),
        'k' => return Err(r"named backreferences (`\k<name>`) are not supported".into()),
        'f' | 'n' | 'r' | 't' | 'v' => {
            out.push('\\');
            out.push(e);
        }
        'x' => {
            let v = hex(chars, next, 2).ok_or(r"`\x` needs two hex digits")?;
            literal(out, char::from(v as u8));
            return Ok(next + 2);
        }
        'u' => return unicode_escape(chars, next, out),
        'p' | 'P' => {
            // Unicode properties: `\p{L}`, `\p{Script=Greek}` read the same in both (copied
            // with their braces, which are no quantifier).
            out.push('\\');
            out.push(e);
            if chars.get(next) == Some(&'{') {
                let end = (next..chars.len()).find(|&k| chars[k] == '}').ok_or(r"`\p{` needs its `}`")?;
                out.extend(&chars[next..=end]);
                return Ok(end + 1);
            }
        }
        e if e.is_ascii_alphanumeric() => return Err(format!(r"unknown escape `\{e}` in the pattern")),
        // `\/`, `\-`, `\.`, `\[`, ...: the character itself.
        e => literal(out, e),
    }
    Ok(next)
}

/// `\uHHHH` (a UTF-16 unit: a surrogate pair `\uD83D\uDE00` is one character) or `\u{H…}`,
/// with `chars[i]` just after the `u`; returns the index after it.
fn unicode_escape(chars: &[char], i: usize, out: &mut String) -> Result<usize, String> {
    let bad = || r"`\u` needs four hex digits or `{…}` with a code point".to_string();
    if chars.get(i) == Some(&'{') {
        let end = (i + 1..chars.len()).find(|&k| chars[k] == '}').ok_or_else(bad)?;
        let digits: String = chars[i + 1..end].iter().collect();
        let v = u32::from_str_radix(&digits, 16).map_err(|_| bad())?;
        let c = char::from_u32(v).ok_or_else(|| format!(r"`\u{{{digits}}}` is not a Unicode scalar value"))?;
        literal(out, c);
        return Ok(end + 1);
    }
    let hi = hex(chars, i, 4).ok_or_else(bad)?;
    let mut end = i + 4;
    let v = if (0xD800..0xDC00).contains(&hi)
        && chars.get(end) == Some(&'\\')
        && chars.get(end + 1) == Some(&'u')
        && hex(chars, end + 2, 4).is_some_and(|lo| (0xDC00..0xE000).contains(&lo))
    {
        let lo = hex(chars, end + 2, 4).unwrap_or(0xDC00);
        end += 6;
        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
    } else {
        hi
    };
    let c = char::from_u32(v).ok_or_else(|| format!(r"a lone surrogate `\u{hi:04X}` cannot be matched"))?;
    literal(out, c);
    Ok(end)
}
