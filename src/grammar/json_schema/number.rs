//! Numbers and integers: ranges (`minimum`, `maximum`, `exclusive*`, draft-04 boolean
//! exclusives too) and `multipleOf`, as exact regexes.
//!
//! Integers are written without fraction or exponent (`1.0` is an integer to JSON Schema, but
//! we never produce it). Bounded numbers are written without exponent. Integer ranges become
//! digit-by-digit regexes; a number range with integer bounds splits on the integer part
//! (`I.F ≤ 5` ⇔ `I ≤ 4`, or `I = 5` with an all-zero fraction). A fractional bound splits at
//! the whole numbers around it (`x ≥ 2.25` ⇔ `x ≥ 3`, or `2.F` with `F ≥ 25` digit-wise), and
//! the two sides and the syntax intersect as a [`Lexeme`]. Integer `multipleOf` is regular too:
//! the last digits decide divisibility by `2^a·5^b`, and divisibility by 3 or 7 is the regex of
//! the remainder automaton; each intersects with the range. In the sensible language (the
//! default) integers stay within their `format`'s range or `i64`'s.

use serde_json::{Map, Value};

use super::keywords::{EXCLUDE_NUMBERS, NOT_INTEGER};
use super::{join, Compiler};
use crate::error::Result;
use crate::grammar::Expr;
use crate::regular::Lexeme;

/// At most [`MAX_INT_DIGITS`] integer digits and two exponent digits (stricter than JSON, and
/// documented): every number the grammar writes has a magnitude below 1e200, so it parses as
/// an `f64` in every client (`serde_json` refuses numbers out of the `f64` range).
const INT: &str = r"-?(?:0|[1-9][0-9]{0,99})";
pub(super) const MAX_INT_DIGITS: usize = 100;
const FRAC: &str = r"(?:\.[0-9]+)?";
const EXP: &str = r"(?:[eE][+-]?[0-9]{1,2})?";

fn re(s: &str) -> Expr {
    Expr::Regex(crate::regular::regex::builtin_shared(s))
}

pub(super) fn any_number() -> Expr {
    re(&format!("{INT}{FRAC}{EXP}"))
}

/// Bounds in a form we can use: inclusive/exclusive integer bounds, or "not representable".
struct Bounds {
    /// (value, exclusive)
    lo: Option<(f64, bool)>,
    hi: Option<(f64, bool)>,
}

fn bounds(c: &Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Bounds> {
    let num = |kw: &str| -> Result<Option<f64>> {
        match obj.get(kw) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(Value::Bool(_)) if kw.starts_with("exclusive") => Ok(None),
            Some(_) => Err(c.bad(&join(pointer, kw), format!("`{kw}` must be a number"))),
        }
    };
    // draft-04: exclusiveMinimum/Maximum are booleans modifying minimum/maximum.
    let draft4 = |kw: &str| obj.get(kw).and_then(Value::as_bool).unwrap_or(false);
    let mut lo = num("minimum")?.map(|v| (v, draft4("exclusiveMinimum")));
    let mut hi = num("maximum")?.map(|v| (v, draft4("exclusiveMaximum")));
    if let Some(x) = num("exclusiveMinimum")? {
        if lo.is_none_or(|(v, _)| x >= v) {
            lo = Some((x, true));
        }
    }
    if let Some(x) = num("exclusiveMaximum")? {
        if hi.is_none_or(|(v, _)| x <= v) {
            hi = Some((x, true));
        }
    }
    Ok(Bounds { lo, hi })
}

fn multiple_of(c: &Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<f64>> {
    match obj.get("multipleOf") {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(m) if m > 0.0 && m.is_finite() => Ok(Some(m)),
            _ => Err(c.bad(&join(pointer, "multipleOf"), "`multipleOf` must be a number greater than 0")),
        },
    }
}

pub(super) fn integer(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Expr> {
    if obj.get(NOT_INTEGER) == Some(&Value::Bool(true)) {
        return Ok(c.nothing_because(pointer, "an integer is asked for where integers are excluded (`not`)"));
    }
    let e = integer_inner(c, obj, pointer)?;
    excluding(c, obj, pointer, e)
}

pub(super) fn number(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Expr> {
    let e = number_inner(c, obj, pointer)?;
    let e = excluding(c, obj, pointer, e)?;
    if obj.get(NOT_INTEGER) != Some(&Value::Bool(true)) {
        return Ok(e);
    }
    let Some(lexeme) = super::string::expr_lexeme(c, &e, 0) else {
        c.unenforced(pointer, "not", "excluding integers from this number schema is not supported")?;
        return Ok(e);
    };
    Ok(Expr::Lexeme(std::sync::Arc::new(Lexeme::and(vec![
        lexeme,
        Lexeme::Regex(crate::regular::regex::builtin(&not_integer_regex())),
    ]))))
}

/// Most significant digits of a number written as a non-integer: with at most 15, the `f64`
/// nearest to it is never a whole number (the nearest whole number is at least one unit of its
/// last digit away; the `f64` error is under a tenth of that), so every client that parses
/// numbers as `f64` (most validators do) agrees it is not an integer. `8886914205066836.9`
/// parses as `8886914205066837.0`.
const NOT_INTEGER_DIGITS: usize = 15;

/// Non-integers ([`NOT_INTEGER`]): no exponent, a non-zero digit in the fraction, at most
/// [`NOT_INTEGER_DIGITS`] significant digits (up to the last non-zero one), at most 99 zeros
/// after the point before the first (smaller numbers parse as 0).
fn not_integer_regex() -> String {
    let n = NOT_INTEGER_DIGITS;
    // An integer part of k digits leaves the fraction n - k, the last of them non-zero.
    let whole: Vec<String> =
        (1..n).map(|k| format!(r"[1-9][0-9]{{{}}}\.[0-9]{{0,{}}}[1-9]", k - 1, n - k - 1)).collect();
    format!(r"-?(?:0\.0{{0,99}}[1-9](?:[0-9]{{0,{}}}[1-9])?|{})0*", n - 2, whole.join("|"))
}

/// `e` without the numbers listed in [`EXCLUDE_NUMBERS`]: every spelling of an excluded value
/// without exponent (`5`, `5.0`, `-0`) is removed, and the rest is written without exponent
/// (stricter), so no spelling slips through.
fn excluding(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str, e: Expr) -> Result<Expr> {
    let Some(ex) = obj.get(EXCLUDE_NUMBERS).and_then(Value::as_array) else { return Ok(e) };
    let mut spellings = Vec::new();
    for v in ex.iter().filter_map(Value::as_f64) {
        if !v.is_finite() || v.abs() >= 9.0e15 {
            c.unenforced(pointer, "not", format!("excluding {v} is not supported"))?;
            continue;
        }
        spellings.push(if v == 0.0 {
            r"-?0(?:\.0+)?".to_string()
        } else if v.fract() == 0.0 {
            format!(r"{}(?:\.0+)?", v as i64)
        } else {
            let sign = if v < 0.0 { "-" } else { "" };
            format!(r"{sign}{}0*", format!("{}", v.abs()).replace('.', r"\."))
        });
    }
    let Some(lexeme) = super::string::expr_lexeme(c, &e, 0) else {
        c.unenforced(pointer, "not", "excluding numbers from this number schema is not supported")?;
        return Ok(e);
    };
    let parse = |r: &str| Lexeme::Regex(crate::regular::regex::builtin(r));
    let excluded = Lexeme::Not(Box::new(parse(&format!("(?:{})", spellings.join("|")))));
    Ok(Expr::Lexeme(std::sync::Arc::new(Lexeme::and(vec![lexeme, parse(&format!("{INT}{FRAC}")), excluded]))))
}

fn integer_inner(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Expr> {
    let b = bounds(c, obj, pointer)?;
    // Integer bounds: tighten fractional and exclusive bounds to inclusive integers.
    let lo = b.lo.map(|(v, ex)| if ex { (v + 1.0).floor().max(v.floor() + 1.0) } else { v.ceil() });
    let hi = b.hi.map(|(v, ex)| if ex { (v - 1.0).ceil().min(v.ceil() - 1.0) } else { v.floor() });
    let fits = |v: f64| v.abs() < 9.0e15;
    if lo.is_some_and(|v| !fits(v)) || hi.is_some_and(|v| !fits(v)) {
        c.unenforced(pointer, "minimum", "bounds beyond ±9e15 are not supported")?;
        return Ok(re(INT));
    }
    let (mut lo, mut hi) = (lo.map(|v| v as i64), hi.map(|v| v as i64));
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            let (lo, hi) = (b.lo.expect("a lower bound"), b.hi.expect("an upper bound"));
            return Ok(c.nothing_because(pointer, format!("no integer is {}", between(lo, hi))));
        }
    }
    if !c.opts.exact {
        // The sensible language: the range of the `format`, else of `i64`.
        let (flo, fhi) = sensible_int_range(obj);
        lo = Some(lo.map_or(flo, |l| l.max(flo)));
        hi = Some(hi.map_or(fhi, |h| h.min(fhi)));
    }
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            let range = match obj.get("format").and_then(Value::as_str) {
                Some(f) if sensible_int_range(obj) != sensible_int_range(&Map::new()) => format!("`format: {f}`"),
                _ => "`i64`".into(),
            };
            return Ok(c.nothing_because(
                pointer,
                format!(
                    "no integer within the bounds fits the range of {range}, which the sensible language keeps to \
                     (the exact language does not)"
                ),
            ));
        }
    }
    let range = || if lo.is_none() && hi.is_none() { INT.to_string() } else { int_range(lo, hi) };
    if let Some(m) = multiple_of(c, obj, pointer)? {
        let inv = 1.0 / m;
        if m == 1.0 || (m < 1.0 && (inv - inv.round()).abs() < 1e-9) {
            // Every integer is a multiple of 1, 0.5, 0.25, 0.1, ...
        } else if m.fract() != 0.0 {
            c.unenforced(pointer, "multipleOf", format!("`multipleOf: {m}` on integers is not supported yet"))?;
        } else {
            if let Some(listed) = listed_multiples(m, lo, hi) {
                if c.is_nothing(&listed) {
                    let (lo, hi) = (lo.unwrap_or_default(), hi.unwrap_or_default());
                    return Ok(
                        c.nothing_because(pointer, format!("no multiple of {m} is at least {lo} and at most {hi}"))
                    );
                }
                return Ok(listed);
            }
            let Some(mut parts) = divisible(m) else {
                c.unenforced(pointer, "multipleOf", format!("divisibility by {m} is not supported yet"))?;
                return Ok(re(&range()));
            };
            if let (None, None, Some(r)) = (lo, hi, divisible_regex(m)) {
                return Ok(re(&r));
            }
            // Divisibility is regular (a DFA over the digits): it intersects with the range (or
            // the syntax, which bounds the digits).
            parts.push(range());
            let parse = |r: &String| Lexeme::Regex(crate::regular::regex::builtin(r));
            return Ok(Expr::Lexeme(std::sync::Arc::new(Lexeme::and(parts.iter().map(parse).collect()))));
        }
    }
    Ok(re(&range()))
}

/// `at least 5 and below 3`: a lower and an upper bound (value, exclusive), as an error says
/// them.
fn between((lo, lex): (f64, bool), (hi, hex): (f64, bool)) -> String {
    let above = if lex { "above" } else { "at least" };
    let below = if hex { "below" } else { "at most" };
    format!("{above} {lo} and {below} {hi}")
}

/// Most multiples of a whole `multipleOf` that [`listed_multiples`] lists.
const MAX_LISTED_MULTIPLES: i64 = 1024;

/// The integers in `lo..=hi` that are multiples of the whole number `m`, listed (a set of
/// strings needs no divisibility automaton, and any divisor works), where both bounds are
/// known and they are at most [`MAX_LISTED_MULTIPLES`]; the empty language where there are
/// none. `None` otherwise.
fn listed_multiples(m: f64, lo: Option<i64>, hi: Option<i64>) -> Option<Expr> {
    let (lo, hi) = (lo?, hi?);
    if !(1.0..=1e15).contains(&m) {
        return None;
    }
    let m = m as i64;
    // The least multiple at or above `lo`.
    let first = match lo.rem_euclid(m) {
        0 => lo,
        r => lo.checked_add(m - r)?,
    };
    if first > hi {
        return Some(super::nothing());
    }
    let count = hi.checked_sub(first)? / m + 1;
    if count > MAX_LISTED_MULTIPLES {
        return None;
    }
    let values = (0..count).map(|i| regex_syntax::hir::Hir::literal((first + i * m).to_string().into_bytes()));
    Some(Expr::Regex(std::sync::Arc::new(regex_syntax::hir::Hir::alternation(values.collect()))))
}

/// The sensible language's integer range: that of `format` (`int32`, `uint32`; `int64` and
/// `uint64` as ±`i64::MAX` and `0..=i64::MAX`), else `-i64::MAX..=i64::MAX` (so every integer
/// fits an `i64`, and the grammar never writes 100-digit numbers).
fn sensible_int_range(obj: &Map<String, Value>) -> (i64, i64) {
    match obj.get("format").and_then(Value::as_str) {
        Some("int8") => (i8::MIN as i64, i8::MAX as i64),
        Some("uint8") => (0, u8::MAX as i64),
        Some("int16") => (i16::MIN as i64, i16::MAX as i64),
        Some("uint16") => (0, u16::MAX as i64),
        Some("int32") => (i32::MIN as i64, i32::MAX as i64),
        Some("uint32") => (0, u32::MAX as i64),
        Some("uint64" | "uint" | "uint128") => (0, i64::MAX),
        _ => (-i64::MAX, i64::MAX),
    }
}

fn number_inner(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Expr> {
    let b = bounds(c, obj, pointer)?;
    let mult = multiple_of(c, obj, pointer)?;
    let frac = match mult {
        None => FRAC.to_string(),
        Some(m) => match decimal_places(m) {
            // multipleOf 10^-k: at most k decimals (then only zeros).
            Some(k) if k > 0 && (m * 10f64.powi(k as i32) - 1.0).abs() < 1e-9 => format!(r"(?:\.[0-9]{{1,{k}}}0*)?"),
            _ if m.fract() == 0.0 => {
                // An integer multiple: the value is an integer.
                let mut o = obj.clone();
                o.remove("type");
                return integer_inner(c, &o, pointer);
            }
            _ => {
                c.unenforced(pointer, "multipleOf", format!("`multipleOf: {m}` on numbers is not supported yet"))?;
                FRAC.to_string()
            }
        },
    };
    if b.lo.is_none() && b.hi.is_none() {
        let exp = if mult.is_some() { "" } else { EXP };
        return Ok(re(&format!("{INT}{frac}{exp}")));
    }
    let integral = |v: f64| v.fract() == 0.0 && v.abs() < 9.0e15;
    if b.lo.is_some_and(|(v, _)| !integral(v)) || b.hi.is_some_and(|(v, _)| !integral(v)) {
        // Fractional bounds: the intersection of one regex per side (and the syntax).
        let mut parts = vec![Lexeme::Regex(crate::regular::regex::builtin(&format!("{INT}{frac}")))];
        for (bound, upper) in [(b.lo, false), (b.hi, true)] {
            let Some((v, ex)) = bound else { continue };
            let side = if integral(v) {
                let v = v as i64;
                Some(if upper {
                    decimal_range(None, Some((v, ex)), FRAC)
                } else {
                    decimal_range(Some((v, ex)), None, FRAC)
                })
            } else {
                fractional_side(v, ex, upper)
            };
            match side {
                Some(r) => parts.push(Lexeme::Regex(crate::regular::regex::builtin(&r))),
                None => c.unenforced(
                    pointer,
                    if upper { "maximum" } else { "minimum" },
                    format!("the bound {v} is out of the supported range"),
                )?,
            }
        }
        return Ok(Expr::Lexeme(std::sync::Arc::new(Lexeme::and(parts))));
    }
    let lo = b.lo.map(|(v, ex)| (v as i64, ex));
    let hi = b.hi.map(|(v, ex)| (v as i64, ex));
    if let (Some((l, lex)), Some((h, hex))) = (lo, hi) {
        if l > h || (l == h && (lex || hex)) {
            let (lo, hi) = (b.lo.expect("a lower bound"), b.hi.expect("an upper bound"));
            return Ok(c.nothing_because(pointer, format!("no number is {}", between(lo, hi))));
        }
    }
    Ok(re(&decimal_range(lo, hi, &frac)))
}

/// Numbers (no exponent) on one side of the fractional bound `b`: `x ≥ b` (`x ≤ b` when
/// `upper`), strict when `exclusive`. The whole numbers past the bound, plus the numbers that
/// share its integer part, compared digit by digit on the fraction.
fn fractional_side(b: f64, exclusive: bool, upper: bool) -> Option<String> {
    if !b.is_finite() || b.abs() >= 9.0e15 {
        return None;
    }
    let text = format!("{}", b.abs());
    let (int, digits) = text.split_once('.')?;
    let whole = if upper {
        decimal_range(None, Some((b.floor() as i64, false)), FRAC)
    } else {
        decimal_range(Some((b.ceil() as i64, false)), None, FRAC)
    };
    let sign = if b < 0.0 { "-" } else { "" };
    // Away from zero on the bound's integer part the fraction must grow (`ge`), toward zero
    // it must shrink but stay nonzero (`le_nonzero`, as `I.0` is the whole number `I`).
    let edge = if upper == (b < 0.0) { frac_ge(digits, exclusive) } else { frac_le_nonzero(digits, exclusive) };
    Some(format!("(?:{whole}|{sign}{int}\\.(?:{edge}))"))
}

/// Fraction digit strings (after the point) whose value is ≥ `.d` (> when `strict`).
fn frac_ge(d: &str, strict: bool) -> String {
    let d = d.as_bytes();
    let mut alts = Vec::new();
    for i in 0..d.len() {
        if d[i] < b'9' {
            alts.push(format!("{}[{}-9][0-9]*", std::str::from_utf8(&d[..i]).unwrap(), (d[i] + 1) as char));
        }
    }
    let d = std::str::from_utf8(d).unwrap();
    alts.push(if strict { format!("{d}[0-9]*[1-9][0-9]*") } else { format!("{d}[0-9]*") });
    alts.join("|")
}

/// Fraction digit strings with a nonzero value ≤ `.d` (< when `strict`); `d` has a nonzero digit.
fn frac_le_nonzero(d: &str, strict: bool) -> String {
    let b = d.as_bytes();
    let mut alts = Vec::new();
    for i in 0..b.len() {
        let prefix = &d[..i];
        let nonzero_prefix = prefix.bytes().any(|c| c != b'0');
        if b[i] > b'0' {
            if nonzero_prefix {
                alts.push(format!("{prefix}[0-{}][0-9]*", (b[i] - 1) as char));
            } else {
                if b[i] > b'1' {
                    alts.push(format!("{prefix}[1-{}][0-9]*", (b[i] - 1) as char));
                }
                alts.push(format!("{prefix}0[0-9]*[1-9][0-9]*"));
            }
        }
        if i > 0 && nonzero_prefix {
            alts.push(prefix.to_string());
        }
    }
    if !strict {
        alts.push(format!("{d}0*"));
    }
    alts.join("|")
}

fn decimal_places(m: f64) -> Option<u32> {
    (0..=12u32).find(|&k| {
        let x = m * 10f64.powi(k as i32);
        (x - x.round()).abs() < 1e-9
    })
}

/// Numbers in [lo, hi] (each bound integer, maybe exclusive), fraction syntax `frac` (optional
/// `.digits`), no exponent. Splits on sign and on the integer part.
fn decimal_range(lo: Option<(i64, bool)>, hi: Option<(i64, bool)>, frac: &str) -> String {
    let nonzero_frac = r"\.[0-9]*[1-9][0-9]*";
    let zero_frac = r"(?:\.0+)?";
    let mut alts: Vec<String> = Vec::new();
    // Non-negative values I.F (I ≥ 0).
    let pos_ok = hi.is_none_or(|(h, ex)| h > 0 || (h == 0 && !ex));
    if pos_ok {
        // Integer parts with any fraction: I ≥ lo_i, I ≤ hi - 1 (any F), plus I == hi with zero F.
        let lo_i = match lo {
            Some((l, ex)) if l >= 0 => {
                // I == l: F nonzero if exclusive; any F otherwise. I > l: any F.
                if ex {
                    alts.push(format!("{}{nonzero_frac}", int_lit(l)));
                    Some(l + 1)
                } else {
                    Some(l)
                }
            }
            _ => Some(0),
        };
        let hi_i = hi.map(|(h, _)| h - 1);
        if lo_i.zip(hi_i).is_none_or(|(a, b)| a <= b) {
            alts.push(format!("{}{frac}", nonneg_range(lo_i.unwrap_or(0), hi_i)));
        }
        if let Some((h, false)) = hi {
            if h >= 0 && lo.is_none_or(|(l, ex)| h > l || (h == l && !ex)) {
                alts.push(format!("{}{zero_frac}", int_lit(h)));
            }
        }
    }
    // Negative values -I.F (I.F > 0).
    // With lo ≥ 0 no negative value qualifies (we never write "-0").
    let neg_ok = lo.is_none_or(|(l, _)| l < 0);
    if neg_ok {
        // -I.F ≥ lo ⇔ I.F ≤ |lo|; -I.F ≤ hi (hi < 0) ⇔ I.F ≥ |hi|.
        let max_mag = lo.map(|(l, ex)| (-l, ex)); // I.F ≤ m (or < m)
        let min_mag = match hi {
            Some((h, ex)) if h < 0 => Some((-h, ex)), // I.F ≥ m (or > m)
            _ => None,
        };
        // Magnitude ranges: I in [a, b] with any F, plus edge cases.
        let a = match min_mag {
            Some((m, ex)) => {
                if ex {
                    alts.push(format!("-{}{nonzero_frac}", int_lit(m)));
                    m + 1
                } else {
                    m
                }
            }
            None => 0,
        };
        let b = max_mag.map(|(m, _)| m - 1);
        if b.is_none_or(|b| a <= b) {
            // I.F > 0: for I = 0 the fraction must be nonzero.
            if a == 0 {
                alts.push(format!("-0{nonzero_frac}"));
                if b.is_none_or(|b| b >= 1) {
                    alts.push(format!("-{}{frac}", nonneg_range(1, b)));
                }
            } else {
                alts.push(format!("-{}{frac}", nonneg_range(a, b)));
            }
        }
        if let Some((m, false)) = max_mag {
            if m > 0 && min_mag.is_none_or(|(n, ex)| m > n || (m == n && !ex)) {
                alts.push(format!("-{}{zero_frac}", int_lit(m)));
            }
        }
    }
    if alts.is_empty() {
        return "[^\\s\\S]".into();
    }
    format!("(?:{})", alts.join("|"))
}

fn int_lit(v: i64) -> String {
    v.to_string()
}

/// Integers in [lo, hi] (inclusive, unbounded where `None`).
pub(super) fn int_range(lo: Option<i64>, hi: Option<i64>) -> String {
    // Memoized per thread: most integers of a schema share a range (the sensible default's
    // `i64`, a format's), and writing one out is most of compiling such a property.
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static MEMO: RefCell<HashMap<IntBounds, String>> = RefCell::new(HashMap::new());
    }
    MEMO.with_borrow_mut(|m| {
        if let Some(r) = m.get(&(lo, hi)) {
            return r.clone();
        }
        let r = int_range_uncached(lo, hi);
        if m.len() >= INT_RANGE_MEMO {
            m.clear();
        }
        m.insert((lo, hi), r.clone());
        r
    })
}

/// An integer range's bounds (see [`int_range`]).
type IntBounds = (Option<i64>, Option<i64>);

/// Most memoized integer ranges per thread (see [`int_range`]).
const INT_RANGE_MEMO: usize = 256;

fn int_range_uncached(lo: Option<i64>, hi: Option<i64>) -> String {
    let mut alts = Vec::new();
    // Negative part: -m for m in [max(1, -hi), -lo].
    let neg_hi = lo.map(|l| -l); // largest magnitude
    let neg_lo = match hi {
        Some(h) if h < 0 => -h,
        _ => 1,
    };
    if lo.is_none_or(|l| l < 0) && neg_hi.is_none_or(|m| m >= neg_lo) {
        alts.push(format!("-{}", nonneg_range(neg_lo, neg_hi)));
    }
    // Non-negative part.
    let pos_lo = lo.map_or(0, |l| l.max(0));
    if hi.is_none_or(|h| h >= pos_lo) {
        alts.push(nonneg_range(pos_lo, hi));
    }
    if alts.is_empty() {
        return "[^\\s\\S]".into();
    }
    format!("(?:{})", alts.join("|"))
}

/// Non-negative integers in [lo, hi] without leading zeros (`hi = None`: unbounded).
fn nonneg_range(lo: i64, hi: Option<i64>) -> String {
    debug_assert!(lo >= 0);
    let mut alts = Vec::new();
    let lo_digits = lo.to_string().len();
    match hi {
        Some(h) => {
            let hi_digits = h.to_string().len();
            for d in lo_digits..=hi_digits {
                let a = if d == lo_digits { lo } else { 10i64.pow(d as u32 - 1) };
                let b = if d == hi_digits { h } else { 10i64.pow(d as u32) - 1 };
                if a <= b {
                    alts.push(same_len_range(&a.to_string(), &b.to_string()));
                }
            }
        }
        None => {
            let b = 10i64.saturating_pow(lo_digits as u32) - 1;
            alts.push(same_len_range(&lo.to_string(), &b.to_string()));
            if lo_digits < MAX_INT_DIGITS {
                alts.push(format!("[1-9][0-9]{{{lo_digits},{}}}", MAX_INT_DIGITS - 1));
            }
        }
    }
    format!("(?:{})", alts.join("|"))
}

/// Digit strings of equal length in [a, b] (a ≤ b, no leading zeros unless the number is 0).
fn same_len_range(a: &str, b: &str) -> String {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    debug_assert_eq!(a.len(), b.len());
    fn go(a: &[u8], b: &[u8]) -> String {
        if a.is_empty() {
            return String::new();
        }
        if a[0] == b[0] {
            return format!("{}{}", a[0] as char, go(&a[1..], &b[1..]));
        }
        let rest = a.len() - 1;
        let all_zero = a[1..].iter().all(|&c| c == b'0');
        let all_nine = b[1..].iter().all(|&c| c == b'9');
        let mut alts = Vec::new();
        let (mut lo_d, mut hi_d) = (a[0], b[0]);
        if !all_zero {
            // a[0] followed by ≥ a[1..]
            let nines: Vec<u8> = vec![b'9'; rest];
            alts.push(format!("{}{}", a[0] as char, go(&a[1..], &nines)));
            lo_d += 1;
        }
        if !all_nine {
            let zeros: Vec<u8> = vec![b'0'; rest];
            alts.push(format!("{}{}", b[0] as char, go(&zeros, &b[1..])));
            hi_d -= 1;
        }
        if lo_d <= hi_d {
            let class =
                if lo_d == hi_d { (lo_d as char).to_string() } else { format!("[{}-{}]", lo_d as char, hi_d as char) };
            alts.push(format!("{class}{}", if rest > 0 { format!("[0-9]{{{rest}}}") } else { String::new() }));
        }
        format!("(?:{})", alts.join("|"))
    }
    go(a, b)
}

/// Integers divisible by the whole number `m`, as regexes to intersect: `m = t·k` with `t` a
/// divisor of 10^3 (the last three digits decide: [`divisible_regex`]) and `k` coprime to 10
/// and small ([`divisible_by_elimination`]). `None` for other divisors.
fn divisible(m: f64) -> Option<Vec<String>> {
    if m.fract() != 0.0 || !(1.0..=1e15).contains(&m) {
        return None;
    }
    let m = m as u64;
    let (mut t, mut k) = (1u64, m);
    for p in [2, 5] {
        while k % p == 0 {
            k /= p;
            t *= p;
        }
    }
    let mut out = Vec::new();
    if t > 1 {
        out.push(divisible_regex(t as f64)?);
    }
    if k > 1 {
        out.push(divisible_by_elimination(k as f64)?);
    }
    Some(out)
}

/// Most divisor [`divisible_by_elimination`] builds a regex for, and the longest regex it
/// keeps (its size grows fast with the divisor).
const MAX_ELIMINATED_DIVISOR: u64 = 7;
const MAX_ELIMINATED_REGEX: usize = 200_000;

/// Integers divisible by the whole number `m` (up to [`MAX_ELIMINATED_DIVISOR`]), as the regex
/// of the remainder automaton (state `r`, digit `d` → `(10r + d) mod m`) by state elimination:
/// `0`, or an optional `-` and digits from `[1-9]` that end in remainder 0. `None` past the
/// limits.
fn divisible_by_elimination(m: f64) -> Option<String> {
    if m.fract() != 0.0 || !(2.0..=MAX_ELIMINATED_DIVISOR as f64).contains(&m) {
        return None;
    }
    let m = m as usize;
    let class = |ds: Vec<u8>| -> Option<String> {
        match ds.as_slice() {
            [] => None,
            [d] => Some(format!("{d}")),
            _ => Some(format!("[{}]", ds.iter().map(|d| d.to_string()).collect::<String>())),
        }
    };
    // edges[p][q]: the regex from state p to q; state m is the start (no digit read yet).
    let n = m + 1;
    let mut edges: Vec<Vec<Option<String>>> = vec![vec![None; n]; n];
    for (p, row) in edges.iter_mut().enumerate() {
        for (q, edge) in row.iter_mut().enumerate().take(m) {
            let digits: Vec<u8> = if p == m {
                (1..=9u8).filter(|&d| d as usize % m == q).collect()
            } else {
                (0..=9u8).filter(|&d| (10 * p + d as usize) % m == q).collect()
            };
            *edge = class(digits);
        }
    }
    let union = |a: Option<String>, b: String| match a {
        None => b,
        Some(a) => format!("(?:{a}|{b})"),
    };
    // Eliminate the remainders 1..m (keeping the start and remainder 0).
    for k in 1..m {
        let star = edges[k][k].take().map(|l| format!("(?:{l})*")).unwrap_or_default();
        for p in (0..n).filter(|&p| p != k) {
            let Some(into) = edges[p][k].take() else { continue };
            for q in (0..m).filter(|&q| q != k) {
                if let Some(out) = &edges[k][q] {
                    let path = format!("{into}{star}{out}");
                    edges[p][q] = Some(union(edges[p][q].take(), path));
                }
            }
            if edges[p].iter().flatten().map(String::len).sum::<usize>() > MAX_ELIMINATED_REGEX {
                return None;
            }
        }
        edges[k].iter_mut().for_each(|e| *e = None);
    }
    // From the start to remainder 0, then any loops on 0.
    let first = edges[m][0].take()?;
    let loops = edges[0][0].take().map(|l| format!("(?:{l})*")).unwrap_or_default();
    let r = format!("(?:0|-?{first}{loops})");
    (r.len() <= MAX_ELIMINATED_REGEX).then_some(r)
}

/// Integers divisible by `m` when that depends on the last few digits only (m divides 10^k,
/// k ≤ 3); `None` otherwise.
fn divisible_regex(m: f64) -> Option<String> {
    if m.fract() != 0.0 || !(1.0..=1000.0).contains(&m) {
        return None;
    }
    let m = m as i64;
    let k = (1..=3).find(|&k| 10i64.pow(k) % m == 0)?;
    let modulus = 10i64.pow(k);
    let tails: Vec<String> =
        (0..modulus).step_by(m as usize).map(|t| format!("{t:0width$}", width = k as usize)).collect();
    // Multiples below 10^k written without padding, or longer numbers ending in a tail.
    let small: Vec<String> = (0..modulus).step_by(m as usize).map(|t| t.to_string()).collect();
    Some(format!(
        "-?(?:{}|[1-9][0-9]{{0,{}}}(?:{}))",
        small.join("|"),
        MAX_INT_DIGITS - 1 - k as usize,
        tails.join("|")
    ))
}
