//! The canonical form of a JSON value ([`canon`]): equal exactly where JSON Schema calls two
//! values equal; and [`unescape_all`], the escapes of a text decoded as `canon` decodes them.

use super::MAX_CANON_DEPTH;

/// The canonical form of one JSON value: equal exactly when the values are equal as JSON
/// Schema compares them (numbers by mathematical value, `1` = `1.0` = `10e-1`; object members
/// in any order; strings after unescaping). Prefix-free, so forms concatenate unambiguously.
/// Text that is not one JSON value compares as its raw bytes.
pub(in crate::automaton) fn canon(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 8);
    let mut c = Canon { s: raw, i: 0 };
    if c.value(&mut out, 0).is_some() {
        c.ws();
        if c.i == raw.len() {
            return out;
        }
    }
    let mut out = vec![0xff];
    out.extend_from_slice(raw);
    out
}

struct Canon<'a> {
    s: &'a [u8],
    i: usize,
}

impl Canon<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek()? == b).then(|| self.i += 1)
    }

    fn value(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        if depth > MAX_CANON_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => {
                let s = self.string()?;
                out.push(b's');
                out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                out.extend_from_slice(&s);
            }
            b'{' => {
                self.i += 1;
                let mut members: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                if self.eat(b'}').is_none() {
                    loop {
                        self.ws();
                        let k = self.string()?;
                        self.eat(b':')?;
                        let mut v = Vec::new();
                        self.value(&mut v, depth + 1)?;
                        members.push((k, v));
                        if self.eat(b',').is_none() {
                            self.eat(b'}')?;
                            break;
                        }
                    }
                }
                members.sort();
                out.push(b'{');
                out.extend_from_slice(&(members.len() as u64).to_le_bytes());
                for (k, v) in members {
                    out.extend_from_slice(&(k.len() as u64).to_le_bytes());
                    out.extend_from_slice(&k);
                    out.extend_from_slice(&v);
                }
            }
            b'[' => {
                self.i += 1;
                out.push(b'[');
                if self.eat(b']').is_none() {
                    loop {
                        self.value(out, depth + 1)?;
                        if self.eat(b',').is_none() {
                            self.eat(b']')?;
                            break;
                        }
                    }
                }
                out.push(b']');
            }
            b't' | b'f' | b'n' => {
                for (word, code) in [(&b"true"[..], b't'), (b"false", b'f'), (b"null", b'z')] {
                    if self.s[self.i..].starts_with(word) {
                        self.i += word.len();
                        out.push(code);
                        return Some(());
                    }
                }
                return None;
            }
            _ => self.number(out)?,
        }
        Some(())
    }

    /// A string's content, unescaped (a lone surrogate as its 3-byte encoding).
    fn string(&mut self) -> Option<Vec<u8>> {
        (self.peek()? == b'"').then_some(())?;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let b = self.peek()?;
            self.i += 1;
            match b {
                b'"' => return Some(out),
                b'\\' => push_code_point(&mut out, escape(self.s, &mut self.i)?),
                _ => out.push(b),
            }
        }
    }

    /// `n`, the sign, the significant digits (no leading or trailing zeros) and the exponent
    /// of the last digit; zero is `n0` whatever its sign.
    fn number(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let neg = self.peek() == Some(b'-');
        if neg {
            self.i += 1;
        }
        let digits_of = |c: &mut Canon| {
            let start = c.i;
            while c.peek().is_some_and(|b| b.is_ascii_digit()) {
                c.i += 1;
            }
            c.s[start..c.i].to_vec()
        };
        let int = digits_of(self);
        if int.is_empty() {
            return None;
        }
        let frac = if self.peek() == Some(b'.') {
            self.i += 1;
            digits_of(self)
        } else {
            Vec::new()
        };
        let mut exp: i64 = 0;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            let eneg = match self.peek() {
                Some(b'-') => {
                    self.i += 1;
                    true
                }
                Some(b'+') => {
                    self.i += 1;
                    false
                }
                _ => false,
            };
            let e = digits_of(self);
            if e.is_empty() {
                return None;
            }
            exp = e.iter().fold(0i64, |a, &d| a.saturating_mul(10).saturating_add(i64::from(d - b'0')));
            if eneg {
                exp = -exp;
            }
        }
        let mut digits: Vec<u8> = int.iter().chain(&frac).copied().collect();
        exp = exp.saturating_sub(frac.len() as i64);
        let lead = digits.iter().take_while(|&&d| d == b'0').count();
        digits.drain(..lead);
        while digits.last() == Some(&b'0') {
            digits.pop();
            exp = exp.saturating_add(1);
        }
        if digits.is_empty() {
            out.extend_from_slice(b"n0");
            return Some(());
        }
        out.push(b'n');
        out.push(if neg { b'-' } else { b'+' });
        out.extend_from_slice(&digits);
        out.push(b'e');
        out.extend_from_slice(exp.to_string().as_bytes());
        out.push(b';');
        Some(())
    }
}

/// The code point of the escape at `s[*i..]` (after its backslash), moving `i` past it, as
/// JSON reads it: a surrogate pair as one code point, a lone surrogate as itself. `None`: not
/// an escape (or cut short).
fn escape(s: &[u8], i: &mut usize) -> Option<u32> {
    let hex4 = |i: &mut usize| -> Option<u32> {
        let v = u32::from_str_radix(std::str::from_utf8(s.get(*i..*i + 4)?).ok()?, 16).ok()?;
        *i += 4;
        Some(v)
    };
    let e = *s.get(*i)?;
    *i += 1;
    Some(match e {
        b'"' | b'\\' | b'/' => e as u32,
        b'b' => 8,
        b'f' => 12,
        b'n' => 10,
        b'r' => 13,
        b't' => 9,
        b'u' => {
            let hi = hex4(i)?;
            if (0xD800..0xDC00).contains(&hi) && s[*i..].starts_with(b"\\u") {
                let save = *i;
                *i += 2;
                match hex4(i) {
                    Some(lo) if (0xDC00..0xE000).contains(&lo) => 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00),
                    _ => {
                        *i = save;
                        hi
                    }
                }
            } else {
                hi
            }
        }
        _ => return None,
    })
}

/// `raw` with every escape decoded as [`canon`] decodes those in strings (a backslash that
/// starts none kept as it is): the content of each string of `raw` appears in it as `canon`
/// reads it, wherever the string starts.
pub(in crate::automaton) fn unescape_all(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        i += 1;
        if b == b'\\' {
            let mut j = i;
            if let Some(c) = escape(raw, &mut j) {
                push_code_point(&mut out, c);
                i = j;
                continue;
            }
        }
        out.push(b);
    }
    out
}

fn push_code_point(out: &mut Vec<u8>, c: u32) {
    match char::from_u32(c) {
        Some(ch) => out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
        // A lone surrogate: its generalized UTF-8 bytes (distinct per code unit).
        None => {
            out.extend_from_slice(&[0xE0 | (c >> 12) as u8, 0x80 | ((c >> 6) & 0x3F) as u8, 0x80 | (c & 0x3F) as u8])
        }
    }
}
