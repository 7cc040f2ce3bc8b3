//! Numbers and integers: ranges (`minimum`, `maximum`, `exclusive*`, draft-04 boolean
//! exclusives too) and `multipleOf`, as exact regexes (the digit-by-digit range regexes are in
//! `ranges.rs`).
//!
//! A bound holds both ways a client may read a number: as the exact decimal and as the `f64`
//! nearest to it (most validators). Inclusive bounds agree (rounding keeps order); exclusive
//! ones do not near the bound (`0.99999999999999999` is 1.0 as an `f64`; 2^53 + 1 is 2^53), so
//! there fractions have at most 15 significant digits (which `f64`s tell apart) and, past 2^53,
//! an exclusive whole bound becomes inclusive at the last whole number below it both ways
//! ([`Bound::side`]). Whole bounds are exact up to ±1e38 (`uint64`'s maximum is no `f64`).
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
use super::ranges::{decimal_range, fractional_side, int_range};
use super::{join, Compiler};
use crate::error::Result;
use crate::grammar::Expr;
use crate::regular::Lexeme;

/// At most [`MAX_INT_DIGITS`] integer digits and two exponent digits (stricter than JSON, and
/// documented): every number the grammar writes has a magnitude below 1e200, so it parses as
/// an `f64` in every client (`serde_json` refuses numbers out of the `f64` range).
const INT: &str = r"-?(?:0|[1-9][0-9]{0,99})";
pub(super) const MAX_INT_DIGITS: usize = 100;
pub(super) const FRAC: &str = r"(?:\.[0-9]+)?";
const EXP: &str = r"(?:[eE][+-]?[0-9]{1,2})?";

fn re(s: &str) -> Expr {
    Expr::Regex(crate::regular::regex::builtin_shared(s))
}

pub(super) fn any_number() -> Expr {
    re(&format!("{INT}{FRAC}{EXP}"))
}

/// A bound of a range as the schema gives it: its value as an `f64` (what validators that
/// read JSON numbers as `f64`, most of them, compare with), whether it is exclusive, its
/// keyword, and its value where it is a whole number within ±1e38: exact where the schema
/// writes it as an integer of `i64` or `u64` (`literal`; 18446744073709551615 is no `f64`),
/// else the `f64`'s (past 2^53 the text may have said any number that reads as it).
#[derive(Clone, Copy, Debug)]
struct Bound {
    v: f64,
    ex: bool,
    whole: Option<i128>,
    literal: bool,
    kw: &'static str,
}

struct Bounds {
    lo: Option<Bound>,
    hi: Option<Bound>,
}

/// 2^53: from here on not every whole number is an `f64`.
const F64_EXACT: f64 = 9_007_199_254_740_992.0;
/// Every number the grammar writes is below this in magnitude ([`MAX_INT_DIGITS`] digits and a
/// two-digit exponent).
const WRITTEN_MAX: f64 = 1e200;

/// The widest whole bound kept as it is, 10^38 - 1: past it a bound is taken in to it (see
/// [`Bound::side`]).
const WIDEST: i128 = 10i128.pow(38) - 1;

/// A side of a range as the grammar writes it (see [`Bound::side`]).
enum Side {
    /// A whole number, exclusive or not.
    Whole(i128, bool),
    /// A fraction (below 2^52 in magnitude), exclusive or not.
    Frac(f64, bool),
    /// No bound: every number the grammar writes is within it.
    Free,
    /// A whole number past ±1e38 on the near side of zero (a minimum above 1e38).
    Beyond,
}

impl Bound {
    /// This bound as a side of the range, such that a number within it is within the bound both
    /// as the decimal it is and as the `f64` a client reads it as. For an inclusive bound the two
    /// agree (reading as `f64` keeps the order, ties included), and below 2^53 every whole number
    /// is an `f64`; but `x < B` does not make `f64(x) < f64(B)` past 2^53 (2^53 + 1 reads as
    /// 2^53), so there an exclusive bound becomes inclusive at the whole number within it both
    /// ways.
    ///
    /// An inclusive bound past 2^53 that the schema did not write as an integer literal (`1e20`,
    /// a 30-digit one) was read as the `f64` nearest to its text, which may lie half an `f64`
    /// step either way: it moves half a step in, so that the text's own number holds too.
    fn side(self, upper: bool) -> Side {
        match self.whole {
            Some(b) if self.v.abs() >= F64_EXACT && (self.ex || !self.literal) => {
                let (below, above) = (f64_below(self.v) as i128, f64_above(self.v) as i128);
                Side::Whole(
                    match (upper, self.ex) {
                        (true, true) => (b - 1).min(below),
                        (false, true) => (b + 1).max(above),
                        (true, false) => b - (b - below + 1) / 2,
                        (false, false) => b + (above - b + 1) / 2,
                    },
                    false,
                )
            }
            Some(b) => Side::Whole(b, self.ex),
            None if self.v.fract() != 0.0 => Side::Frac(self.v, self.ex),
            None if (upper && self.v >= WRITTEN_MAX) || (!upper && self.v <= -WRITTEN_MAX) => Side::Free,
            // Past ±1e38 on the far side of zero (`float`'s 3.4028234663852886e38): every
            // number within ±1e38 is within it (stricter, and exact both ways).
            None if upper && self.v > 0.0 => Side::Whole(WIDEST, false),
            None if !upper && self.v < 0.0 => Side::Whole(-WIDEST, false),
            None => Side::Beyond,
        }
    }

    /// The bound as the schema writes it (a whole number in full).
    fn shown(self) -> String {
        self.whole.map_or_else(|| self.v.to_string(), |w| w.to_string())
    }
}

/// The next `f64` above the finite `v`.
fn f64_above(v: f64) -> f64 {
    match v {
        0.0 => f64::from_bits(1),
        v if v > 0.0 => f64::from_bits(v.to_bits() + 1),
        v => f64::from_bits(v.to_bits() - 1),
    }
}

/// The next `f64` below the finite `v`.
fn f64_below(v: f64) -> f64 {
    -f64_above(-v)
}

/// The whole number a JSON number is, where it is one within ±1e38, and whether that is the
/// integer literal the schema wrote (rather than the `f64` its text reads as).
fn whole(n: &serde_json::Number, v: f64) -> (Option<i128>, bool) {
    match n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)) {
        Some(w) => (Some(w), true),
        None => ((v.fract() == 0.0 && v.abs() < 1e38).then_some(v as i128), false),
    }
}

fn bounds(c: &Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Bounds> {
    let num = |kw: &'static str, ex: bool| -> Result<Option<Bound>> {
        match super::keywords::get(obj, kw) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64().map(|v| {
                let (whole, literal) = whole(n, v);
                Bound { v, ex, whole, literal, kw }
            })),
            Some(Value::Bool(_)) if kw.starts_with("exclusive") => Ok(None),
            Some(_) => Err(c.bad(&join(pointer, kw), format!("`{kw}` must be a number"))),
        }
    };
    // draft-04: exclusiveMinimum/Maximum are booleans modifying minimum/maximum.
    let draft4 = |kw: &str| super::keywords::get(obj, kw).and_then(Value::as_bool).unwrap_or(false);
    let mut lo = num("minimum", draft4("exclusiveMinimum"))?;
    let mut hi = num("maximum", draft4("exclusiveMaximum"))?;
    if let Some(x) = num("exclusiveMinimum", true)? {
        if lo.is_none_or(|b| x.v >= b.v) {
            lo = Some(x);
        }
    }
    if let Some(x) = num("exclusiveMaximum", true)? {
        if hi.is_none_or(|b| x.v <= b.v) {
            hi = Some(x);
        }
    }
    Ok(Bounds { lo, hi })
}

fn multiple_of(c: &Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<f64>> {
    match super::keywords::get(obj, "multipleOf") {
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

/// Whole numbers, and fractions with at most [`NOT_INTEGER_DIGITS`] significant digits: an
/// `f64` tells each of these apart from every other (so a number written so is not read as a
/// bound it must differ from, or as a value it must not be).
fn f64_distinct_regex() -> String {
    format!(r"(?:-?(?:0|[1-9][0-9]*)(?:\.0+)?|{})", not_integer_regex())
}

/// `e` without the numbers listed in [`EXCLUDE_NUMBERS`]: every spelling of an excluded value
/// without exponent (`5`, `5.0`, `-0`) is removed, and the rest is written without exponent
/// (stricter), so no spelling slips through.
fn excluding(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str, e: Expr) -> Result<Expr> {
    let Some(ex) = obj.get(EXCLUDE_NUMBERS).and_then(Value::as_array) else { return Ok(e) };
    let mut spellings = Vec::new();
    for (x, v) in ex.iter().filter_map(|x| Some((x, x.as_f64()?))) {
        if !v.is_finite() || v.abs() >= 9.0e15 {
            // (The value as the schema writes it: 90071992547409930 is no `f64`.)
            c.unenforced(pointer, "not", format!("excluding {x} (past ±9e15) is not supported"))?;
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
    // (Fractions an `f64` tells apart: `5.00000000000000000001` reads as 5.)
    let distinct = parse(&f64_distinct_regex());
    Ok(Expr::Lexeme(std::sync::Arc::new(Lexeme::and(vec![lexeme, parse(&format!("{INT}{FRAC}")), excluded, distinct]))))
}

fn integer_inner(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Expr> {
    let b = bounds(c, obj, pointer)?;
    // Integer bounds: fractional and exclusive bounds tightened to inclusive whole numbers.
    let (mut lo, mut hi) = (None, None);
    for (bound, upper) in [(b.lo, false), (b.hi, true)] {
        let Some(bound) = bound else { continue };
        let side = match bound.side(upper) {
            // (The sensible range, within `i64`, decides: a saturated bound is as good.)
            Side::Beyond if !c.opts.exact => Side::Whole(bound.v as i128, false),
            side => side,
        };
        let v = match side {
            Side::Whole(w, ex) => Some(if !ex {
                w
            } else if upper {
                w - 1
            } else {
                w + 1
            }),
            Side::Frac(v, _) => {
                let w = if upper { v.floor() } else { v.ceil() };
                Some(w as i128)
            }
            Side::Free => None,
            Side::Beyond => {
                c.unenforced(
                    pointer,
                    bound.kw,
                    format!("the bound {} is out of the supported range (±1e38)", bound.v),
                )?;
                return Ok(re(INT));
            }
        };
        if upper {
            hi = v;
        } else {
            lo = v;
        }
    }
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            let (lo, hi) = (b.lo.expect("a lower bound"), b.hi.expect("an upper bound"));
            return Ok(c.nothing_because(pointer, format!("no integer is {}", between(lo, hi))));
        }
    }
    if !c.opts.exact {
        // The sensible language: the range of the `format`, else of `i64`.
        let (flo, fhi) = sensible_int_range(obj);
        let (flo, fhi) = (i128::from(flo), i128::from(fhi));
        lo = Some(lo.map_or(flo, |l| l.max(flo)));
        hi = Some(hi.map_or(fhi, |h| h.min(fhi)));
    }
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            let range = match super::keywords::get(obj, "format").and_then(Value::as_str) {
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
fn between(lo: Bound, hi: Bound) -> String {
    let above = if lo.ex { "above" } else { "at least" };
    let below = if hi.ex { "below" } else { "at most" };
    format!("{above} {} and {below} {}", lo.shown(), hi.shown())
}

/// Most multiples of a whole `multipleOf` that [`listed_multiples`] lists.
const MAX_LISTED_MULTIPLES: i128 = 1024;

/// The integers in `lo..=hi` that are multiples of the whole number `m`, listed (a set of
/// strings needs no divisibility automaton, and any divisor works), where both bounds are
/// known and they are at most [`MAX_LISTED_MULTIPLES`]; the empty language where there are
/// none. `None` otherwise.
fn listed_multiples(m: f64, lo: Option<i128>, hi: Option<i128>) -> Option<Expr> {
    let (lo, hi) = (lo?, hi?);
    if !(1.0..=1e15).contains(&m) {
        return None;
    }
    let m = m as i128;
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
    // Merged formats (`allOf`) must all hold: the ranges intersect.
    super::keywords::formats(obj)
        .map(format_int_range)
        .fold((-i64::MAX, i64::MAX), |(l, h), (fl, fh)| (l.max(fl), h.min(fh)))
}

/// One format's integer range (see [`sensible_int_range`]).
fn format_int_range(f: &str) -> (i64, i64) {
    match f {
        "int8" => (i8::MIN as i64, i8::MAX as i64),
        "uint8" => (0, u8::MAX as i64),
        "int16" => (i16::MIN as i64, i16::MAX as i64),
        "uint16" => (0, u16::MAX as i64),
        "int32" => (i32::MIN as i64, i32::MAX as i64),
        "uint32" => (0, u32::MAX as i64),
        "uint64" | "uint" | "uint128" => (0, i64::MAX),
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
    let mut sides = [None, None];
    for (i, (bound, upper)) in [(b.lo, false), (b.hi, true)].into_iter().enumerate() {
        let Some(bound) = bound else { continue };
        sides[i] = match bound.side(upper) {
            Side::Free => None,
            Side::Beyond => {
                c.unenforced(pointer, bound.kw, format!("the bound {} is out of the supported range", bound.v))?;
                None
            }
            side => Some(side),
        };
    }
    let [lo, hi] = sides;
    if lo.is_none() && hi.is_none() {
        let exp = if mult.is_some() { "" } else { EXP };
        return Ok(re(&format!("{INT}{frac}{exp}")));
    }
    // Near an exclusive bound a long fraction may read as the bound itself (0.99999999999999999
    // is 1.0 as an `f64`): numbers there are whole or have at most 15 significant digits, which
    // an `f64` tells apart from every other such number (see `Bound::side` for whole bounds).
    let exclusive = [&lo, &hi].iter().any(|s| matches!(s, Some(Side::Whole(_, true) | Side::Frac(_, true))));
    let parse = |r: &str| Lexeme::Regex(crate::regular::regex::builtin(r));
    let distinct = || parse(&f64_distinct_regex());
    let whole = |s: &Option<Side>| match s {
        Some(Side::Whole(w, ex)) => Some((*w, *ex)),
        _ => None,
    };
    if matches!(lo, Some(Side::Frac(..))) || matches!(hi, Some(Side::Frac(..))) {
        // Fractional bounds: the intersection of one regex per side (and the syntax).
        let mut parts = vec![parse(&format!("{INT}{frac}"))];
        for (side, upper) in [(&lo, false), (&hi, true)] {
            let r = match side {
                None => continue,
                Some(Side::Whole(w, ex)) if upper => decimal_range(None, Some((*w, *ex)), FRAC),
                Some(Side::Whole(w, ex)) => decimal_range(Some((*w, *ex)), None, FRAC),
                Some(Side::Frac(v, ex)) => match fractional_side(*v, *ex, upper) {
                    Some(r) => r,
                    None => {
                        let kw = if upper { "maximum" } else { "minimum" };
                        c.unenforced(pointer, kw, format!("the bound {v} is out of the supported range"))?;
                        continue;
                    }
                },
                Some(Side::Free | Side::Beyond) => unreachable!("left out above"),
            };
            parts.push(parse(&r));
        }
        if exclusive {
            parts.push(distinct());
        }
        return Ok(Expr::Lexeme(std::sync::Arc::new(Lexeme::and(parts))));
    }
    let (lo, hi) = (whole(&lo), whole(&hi));
    if let (Some((l, lex)), Some((h, hex))) = (lo, hi) {
        if l > h || (l == h && (lex || hex)) {
            let (lo, hi) = (b.lo.expect("a lower bound"), b.hi.expect("an upper bound"));
            return Ok(c.nothing_because(pointer, format!("no number is {}", between(lo, hi))));
        }
    }
    let range = decimal_range(lo, hi, &frac);
    if exclusive {
        return Ok(Expr::Lexeme(std::sync::Arc::new(Lexeme::and(vec![parse(&range), distinct()]))));
    }
    Ok(re(&range))
}

fn decimal_places(m: f64) -> Option<u32> {
    (0..=12u32).find(|&k| {
        let x = m * 10f64.powi(k as i32);
        (x - x.round()).abs() < 1e-9
    })
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
