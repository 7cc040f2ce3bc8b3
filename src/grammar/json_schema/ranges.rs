//! Ranges of numbers as regexes over their decimal digits: integers in `[lo, hi]` (digit by
//! digit, per length), numbers with whole-number bounds (split on the integer part: `I.F ≤ 5`
//! ⇔ `I ≤ 4`, or `I = 5` with an all-zero fraction), one side of a fractional bound (`x ≥ 2.25`
//! ⇔ `x ≥ 3`, or `2.F` with `F ≥ 25` digit-wise). Bounds are exact whole numbers (`i128`):
//! `number.rs` decides what they are.

use super::number::{FRAC, MAX_INT_DIGITS};

/// Numbers (no exponent) on one side of the fractional bound `b`: `x ≥ b` (`x ≤ b` when
/// `upper`), strict when `exclusive`. The whole numbers past the bound, plus the numbers that
/// share its integer part, compared digit by digit on the fraction.
pub(super) fn fractional_side(b: f64, exclusive: bool, upper: bool) -> Option<String> {
    if !b.is_finite() || b.abs() >= 9.0e15 {
        return None;
    }
    let text = format!("{}", b.abs());
    let (int, digits) = text.split_once('.')?;
    let whole = if upper {
        decimal_range(None, Some((b.floor() as i128, false)), FRAC)
    } else {
        decimal_range(Some((b.ceil() as i128, false)), None, FRAC)
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

/// Numbers in [lo, hi] (each bound integer, maybe exclusive), fraction syntax `frac` (optional
/// `.digits`), no exponent. Splits on sign and on the integer part.
pub(super) fn decimal_range(lo: Option<(i128, bool)>, hi: Option<(i128, bool)>, frac: &str) -> String {
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

fn int_lit(v: i128) -> String {
    v.to_string()
}

/// Integers in [lo, hi] (inclusive, unbounded where `None`).
pub(super) fn int_range(lo: Option<i128>, hi: Option<i128>) -> String {
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
type IntBounds = (Option<i128>, Option<i128>);

/// Most memoized integer ranges per thread (see [`int_range`]).
const INT_RANGE_MEMO: usize = 256;

fn int_range_uncached(lo: Option<i128>, hi: Option<i128>) -> String {
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
fn nonneg_range(lo: i128, hi: Option<i128>) -> String {
    debug_assert!(lo >= 0);
    let mut alts = Vec::new();
    let lo_digits = lo.to_string().len();
    match hi {
        Some(h) => {
            let hi_digits = h.to_string().len();
            for d in lo_digits..=hi_digits {
                let a = if d == lo_digits { lo } else { 10i128.pow(d as u32 - 1) };
                let b = if d == hi_digits { h } else { 10i128.pow(d as u32) - 1 };
                if a <= b {
                    alts.push(same_len_range(&a.to_string(), &b.to_string()));
                }
            }
        }
        None => {
            let b = 10i128.saturating_pow(lo_digits as u32) - 1;
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
