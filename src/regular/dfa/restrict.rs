//! The bytes an intersection can use: what every positive part of a [`Lexeme::And`] can spell,
//! and its parts restricted to them before they are determinized.
//!
//! A pattern's `.{4,8}` reads any character, so alone its DFA tracks UTF-8 sequences at every
//! count (`((c1d3g3).{4,8}){6}` unanchored: 6,510 states, 200 ms); beside `^([a-z][0-9])+$`
//! only ASCII letters and digits can ever be read, and the same pattern over those is 2,003
//! states built in 22 ms. So before the parts of an intersection are built, each part's regex
//! has the characters taken out whose bytes no positive part can spell ([`restrict_lexeme`]).
//!
//! Why the product is unchanged: let `A` be the bytes every positive part can use
//! ([`usable_bytes`], an over-approximation per part), so every string of the intersection is
//! in `A*`. A restricted part `p'` keeps every string of `p` in `A*` and adds none:
//! `L(p) ∩ A* ⊆ L(p') ⊆ L(p)`. For the positive parts, `∩ L(p') = ∩ L(p)`; for a negated
//! part, a string of the positive parts is in `L(n')` exactly when it is in `L(n)`. Counted
//! parts keep their shape (their unit and full regex restricted alike).

use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind};

use crate::regular::Lexeme;

/// A set of bytes.
pub(super) type Bytes = [bool; 256];

/// The bytes some string of `lexeme` may hold (more where it cannot tell: a negated part's,
/// all of them).
pub(super) fn usable_bytes(lexeme: &Lexeme) -> Bytes {
    match lexeme {
        Lexeme::Regex(h) => hir_bytes(h),
        Lexeme::Counted { full, .. } => hir_bytes(full),
        Lexeme::And(xs) => xs.iter().map(usable_bytes).fold([true; 256], |a, b| std::array::from_fn(|i| a[i] && b[i])),
        Lexeme::Not(_) => [true; 256],
    }
}

fn hir_bytes(h: &Hir) -> Bytes {
    let mut out = [false; 256];
    add_bytes(h, &mut out);
    out
}

fn add_bytes(h: &Hir, out: &mut Bytes) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => l.0.iter().for_each(|&b| out[b as usize] = true),
        HirKind::Class(Class::Bytes(c)) => {
            c.ranges().iter().for_each(|r| (r.start()..=r.end()).for_each(|b| out[b as usize] = true))
        }
        HirKind::Class(Class::Unicode(c)) => {
            for r in c.ranges() {
                let (lo, hi) = (r.start() as u32, r.end() as u32);
                (lo..=hi.min(0x7f)).for_each(|b| out[b as usize] = true);
                // A character past ASCII: its lead and continuation bytes, all of them counted.
                if hi >= 0x80 {
                    out[0x80..].iter_mut().for_each(|b| *b = true);
                }
            }
        }
        HirKind::Repetition(r) => add_bytes(&r.sub, out),
        HirKind::Capture(c) => add_bytes(&c.sub, out),
        HirKind::Concat(xs) | HirKind::Alternation(xs) => xs.iter().for_each(|x| add_bytes(x, out)),
    }
}

/// `lexeme` with the characters taken out that hold a byte outside `allowed`; `None` where
/// nothing would change. Keeps every string of `lexeme` within `allowed` and adds none (see
/// the module doc).
pub(super) fn restrict_lexeme(lexeme: &Lexeme, allowed: &Bytes) -> Option<Lexeme> {
    let within = |b: &Bytes| (0..256).all(|i| !b[i] || allowed[i]);
    match lexeme {
        Lexeme::Regex(h) => (!within(&hir_bytes(h))).then(|| Lexeme::Regex(restrict(h, allowed))),
        Lexeme::Counted { open, unit, min, max, close, full } => (!within(&hir_bytes(full))).then(|| Lexeme::Counted {
            open: open.clone(),
            unit: restrict(unit, allowed),
            min: *min,
            max: *max,
            close: close.clone(),
            full: Box::new(restrict(full, allowed)),
        }),
        Lexeme::And(xs) => {
            let parts: Vec<Option<Lexeme>> = xs.iter().map(|x| restrict_lexeme(x, allowed)).collect();
            parts
                .iter()
                .any(Option::is_some)
                .then(|| Lexeme::And(parts.into_iter().zip(xs).map(|(p, x)| p.unwrap_or_else(|| x.clone())).collect()))
        }
        Lexeme::Not(x) => restrict_lexeme(x, allowed).map(|x| Lexeme::Not(Box::new(x))),
    }
}

/// `h` without the characters that hold a byte outside `allowed` (see [`restrict_lexeme`]).
fn restrict(h: &Hir, allowed: &Bytes) -> Hir {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => h.clone(),
        HirKind::Literal(l) => {
            if l.0.iter().all(|&b| allowed[b as usize]) {
                h.clone()
            } else {
                Hir::fail()
            }
        }
        HirKind::Class(Class::Bytes(c)) => {
            let mut keep = ClassBytes::new(byte_ranges(allowed));
            keep.intersect(c);
            Hir::class(Class::Bytes(keep))
        }
        HirKind::Class(Class::Unicode(c)) => {
            // ASCII characters by their byte; the others stay where any byte past ASCII is
            // allowed (a superset of those spelled within `allowed`), else go.
            let mut ranges: Vec<ClassUnicodeRange> = byte_ranges(allowed)
                .into_iter()
                .filter(|r| r.start() < 0x80)
                .map(|r| ClassUnicodeRange::new(r.start() as char, r.end().min(0x7f) as char))
                .collect();
            if allowed[0x80..].iter().any(|&b| b) {
                ranges.push(ClassUnicodeRange::new('\u{80}', char::MAX));
            }
            let mut keep = ClassUnicode::new(ranges);
            keep.intersect(c);
            Hir::class(Class::Unicode(keep))
        }
        HirKind::Repetition(r) => {
            let mut r = r.clone();
            r.sub = Box::new(restrict(&r.sub, allowed));
            Hir::repetition(r)
        }
        HirKind::Capture(c) => {
            let mut c = c.clone();
            c.sub = Box::new(restrict(&c.sub, allowed));
            Hir::capture(c)
        }
        HirKind::Concat(xs) => Hir::concat(xs.iter().map(|x| restrict(x, allowed)).collect()),
        HirKind::Alternation(xs) => Hir::alternation(xs.iter().map(|x| restrict(x, allowed)).collect()),
    }
}

/// The runs of `allowed` as byte ranges.
fn byte_ranges(allowed: &Bytes) -> Vec<ClassBytesRange> {
    let mut out = Vec::new();
    let mut b = 0usize;
    while b < 256 {
        if !allowed[b] {
            b += 1;
            continue;
        }
        let start = b;
        while b < 256 && allowed[b] {
            b += 1;
        }
        out.push(ClassBytesRange::new(start as u8, (b - 1) as u8));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regular::{Dfa, DfaLimits};

    fn hir(re: &str) -> Hir {
        regex_syntax::ParserBuilder::new().utf8(false).build().parse(re).unwrap()
    }

    fn accepts(d: &Dfa, s: &[u8]) -> bool {
        let t = d.run(d.start(), s);
        t != crate::regular::StateId::DEAD && d.is_accepting(t)
    }

    /// Products built from restricted parts accept exactly what the unrestricted ones do, on
    /// strings over the parts' bytes and others (the Unicode `.` against ASCII-only parts).
    #[test]
    fn restricted_products_keep_their_language() {
        let cases: &[&[(&str, bool)]] = &[
            &[("([a-z][0-9])+", false), ("(.*)c1(.{2,3})", false), ("(t|8){2}", false)],
            &[("[a-c]+", false), (".*b.*", true)],
            &[("(?s:.){2,4}", false), ("[ab]*", false), ("a.", true)],
            &[("[a-zé]+", false), ("(?s:.)*é(?s:.)*", false)],
            &[("\"[a-z0-9]*\"", false), ("\"(?s:.)*(1|é)(?s:.)*\"", false), ("\"a(?s:.)*\"", true)],
        ];
        let limits = DfaLimits::default();
        let probes: Vec<Vec<u8>> = {
            let alphabet: Vec<&[u8]> =
                vec![b"a", b"b", b"c", b"1", b"t", b"8", b"z", b"\"", "é".as_bytes(), b"\xc3", b"-"];
            let mut out = vec![Vec::new()];
            let mut layer = vec![Vec::new()];
            for _ in 0..5 {
                layer =
                    layer.iter().flat_map(|p: &Vec<u8>| alphabet.iter().map(move |a| [&p[..], a].concat())).collect();
                out.extend(layer.iter().cloned());
            }
            out
        };
        for case in cases {
            let lexemes: Vec<Lexeme> = case
                .iter()
                .map(|&(re, neg)| {
                    let l = Lexeme::Regex(hir(re));
                    if neg {
                        Lexeme::Not(Box::new(l))
                    } else {
                        l
                    }
                })
                .collect();
            let whole = Lexeme::And(lexemes.clone());
            let allowed = usable_bytes(&whole);
            let restricted = restrict_lexeme(&whole, &allowed).expect("something to restrict");
            let (Lexeme::And(a), Lexeme::And(b)) = (&whole, &restricted) else { unreachable!() };
            let build = |xs: &[Lexeme]| {
                let parts: Vec<(Dfa, bool)> = xs
                    .iter()
                    .map(|x| match x {
                        Lexeme::Not(y) => (Dfa::build_lexeme(y, limits).unwrap(), true),
                        _ => (Dfa::build_lexeme(x, limits).unwrap(), false),
                    })
                    .collect();
                let refs: Vec<(&Dfa, bool)> = parts.iter().map(|(d, n)| (d, *n)).collect();
                Dfa::product(&refs, limits).unwrap()
            };
            let (before, after) = (build(a), build(b));
            for p in &probes {
                assert_eq!(accepts(&before, p), accepts(&after, p), "{case:?} on {:?}", String::from_utf8_lossy(p));
            }
        }
    }

    #[test]
    fn usable_bytes_cover_what_a_regex_spells() {
        let b = usable_bytes(&Lexeme::Regex(hir("a[0-2]é")));
        let on: Vec<usize> = (0..256).filter(|&i| b[i]).collect();
        assert!(on.contains(&(b'a' as usize)) && on.contains(&(b'1' as usize)) && on.contains(&0xc3));
        assert!(!b[b'b' as usize] && !b[b'3' as usize]);
        assert!(restrict_lexeme(&Lexeme::Regex(hir("[a-c]")), &b).is_some());
        assert!(restrict_lexeme(&Lexeme::Regex(hir("a")), &b).is_none());
    }
}
