//! What one token can finish, from its bytes alone: the filters that let the repeats filter
//! (`CfgRun::filter_repeats`) read only the tokens that may finish a repeat, as
//! [`DistinctTokens`](crate::automaton::cfg::DistinctTokens) over a whole vocabulary.
//!
//! Each one answers for the masks' guess (every `[` and `{` marked): a token it rules out never
//! finishes a repeat where it applies. Checked against the reader, token by token, in
//! `cfg_run::repeats`'s tests.

use super::is_space;

/// Can `bytes`, read where the reader watches nothing, open a list (every `[` and `{`, as the
/// masks' guess reads them) and finish two items of it: a non-empty item, a `,`, and something
/// after it?
pub(in crate::automaton) fn opens_two_items(bytes: &[u8]) -> bool {
    let Some(i) = bytes.iter().position(|&b| b == b'[' || b == b'{') else { return false };
    bytes.iter().enumerate().skip(i + 2).any(|(j, &b)| b == b',' && j + 1 < bytes.len())
}

/// What a token read inside a string's content (not just after a backslash) can finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::automaton) enum InString {
    /// Nothing: no `"` in it closes the string (none, or each one escaped).
    Nothing,
    /// The string only, closed by the `"` at `at`. `escaped`: backslashes come before it, each
    /// escaping a character that never stands unescaped in a JSON string (`"`, `\`, a control
    /// character), so the string differs from every item written without a backslash.
    Closes { at: usize, escaped: bool },
    /// Maybe more, or an escape before the close may stand for a character that can be
    /// written as itself (`\/`, `\u`): only the reader can tell.
    More,
}

/// The escapes before a string's close (see [`InString::Closes`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Escapes {
    None,
    NeverRaw,
    MaybeRaw,
}

/// Where `bytes`, read inside a string's content, close the string (their first `"` not
/// escaped), and the escapes before it.
fn closing_quote(bytes: &[u8]) -> Option<(usize, Escapes)> {
    let (mut after_backslash, mut escapes) = (false, Escapes::None);
    let q = bytes.iter().position(|&b| {
        if after_backslash {
            after_backslash = false;
            let raw = matches!(b, b'/' | b'u');
            escapes = escapes.max(if raw { Escapes::MaybeRaw } else { Escapes::NeverRaw });
            return false;
        }
        after_backslash = b == b'\\';
        b == b'"'
    })?;
    Some((q, escapes))
}

/// What `bytes`, read inside a string's content, can finish (see [`InString`]). `few`: no
/// list holds an array's item yet (see `Distinct::repeatable`), so what follows the close
/// matters only if it [`finishes_a_key_or_two`]; otherwise whatever may end a value or close
/// a string does (a `]`, `}` or `,`, or two more `"`).
pub(in crate::automaton) fn in_string(bytes: &[u8], few: bool) -> InString {
    let Some((q, escapes)) = closing_quote(bytes) else { return InString::Nothing };
    let rest = &bytes[q + 1..];
    let more = if few {
        finishes_a_key_or_two(rest)
    } else {
        rest.iter().filter(|&&b| b == b'"').count() > 1 || rest.iter().any(|b| b"]},".contains(b))
    };
    if more || escapes == Escapes::MaybeRaw {
        return InString::More;
    }
    InString::Closes { at: q, escaped: escapes == Escapes::NeverRaw }
}

/// Where no list holds an array's item yet (see `Distinct::repeatable`), can `bytes`, read
/// outside strings (after a value, or a string's close), finish a repeat? Only by finishing a
/// key of an object that has keys (a `"` first, the `,` before it written already, and
/// another `"`) or two items of one list: after a `,`, an item that may end (two `"`, a `]`
/// or `}`; the last letter of `true`/`false`/`null` or an exponent, which fixes a zero's
/// value; or a byte then a `,` or whitespace).
pub(in crate::automaton) fn finishes_a_key_or_two(bytes: &[u8]) -> bool {
    let quotes = |b: &[u8]| b.iter().filter(|&&b| b == b'"').count();
    if bytes.iter().find(|&&b| !is_space(b)) == Some(&b'"') && quotes(bytes) > 1 {
        return true;
    }
    let Some(c) = bytes.iter().position(|&b| b == b',') else { return false };
    let tail = &bytes[c + 1..];
    quotes(tail) > 1
        || tail.iter().any(|b| b"]}eEl".contains(b))
        || tail
            .iter()
            .position(|&b| !is_space(b))
            .is_some_and(|i| tail[i + 1..].iter().any(|&b| b == b',' || is_space(b)))
}

/// [`finishes_a_key_or_two`] for `bytes` read inside a string that is not an item: what comes
/// after the string's close.
pub(in crate::automaton) fn value_string_may_repeat(bytes: &[u8]) -> bool {
    closing_quote(bytes).is_some_and(|(q, _)| finishes_a_key_or_two(&bytes[q + 1..]))
}
