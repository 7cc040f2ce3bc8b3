//! A key for the reader's state as far as what it reads next is concerned: two readers with
//! equal keys (over the same grammar) accept and refuse the same bytes from here on, though
//! the outputs behind them differ. The matcher keys the positions after different tokens with
//! it (beside the parse state) to judge them once.
//!
//! What the future reads of the state: the lists' finished items (array items, object keys) (compared by canonical form;
//! looked ahead from by raw form), the open frames, the lexical state, and the text of every
//! item, text item or scalar being read since it began (its canonical form and raw form are
//! taken from there when it ends). Positions themselves are not read, only the bytes between
//! them and the end, so the key spells those bytes instead.
//!
//! Invariant: items are keyed by their address only when they are in `Old`: items of a state
//! kept alive while the keys are compared (a freed item's address may be reused by another
//! with other bytes); all others by their bytes.

use std::collections::HashSet;

use super::{Distinct, Frame, Lex, List};

/// The addresses of the items of a reader that stays alive while keys are compared: an item
/// met again by address is the same item.
#[derive(Default)]
pub struct Old(HashSet<usize>);

impl Old {
    /// The items of `d`'s lists, those of marked literals and of the arrays and objects it is in.
    pub(in crate::automaton) fn of(d: &Distinct) -> Old {
        let arrays = d.stack.iter().filter_map(|f| match f {
            Frame::Array(Some(l)) | Frame::Object { keys: Some(l), .. } => Some(l),
            _ => None,
        });
        let items = d.after.iter().chain(arrays).flat_map(|l| l.keys.iter().chain(&l.raws));
        Old(items.map(addr).collect())
    }
}

fn addr(item: &std::sync::Arc<[u8]>) -> usize {
    item.as_ptr() as usize
}

impl Distinct {
    /// Appends the key of this reader after the output `text` to `out` (see the module doc).
    pub(in crate::automaton) fn key(&self, text: &[u8], old: &Old, out: &mut Vec<u32>) {
        let list = |out: &mut Vec<u32>, l: &List| {
            out.push(l.keys.len() as u32);
            for item in l.keys.iter().chain(&l.raws) {
                if old.0.contains(&addr(item)) {
                    out.extend([u32::MAX, addr(item) as u32, (addr(item) as u64 >> 32) as u32]);
                } else {
                    bytes(out, item);
                }
            }
        };
        self.key_with(text, out, list);
    }

    /// A key for what the reader accepts and refuses from here, blind to the order of each
    /// list's finished items: their canonical forms, sorted. Two readers with equal keys
    /// refuse the same repeats, though the look-ahead that steers masks away from one (the raw
    /// forms) may differ; what the witness search remembers its dead ends by (an order of
    /// distinct items found unable to finish is not tried again in another order).
    pub(in crate::automaton) fn unordered_key(&self, text: &[u8], out: &mut Vec<u32>) {
        let list = |out: &mut Vec<u32>, l: &List| {
            let mut keys: Vec<&[u8]> = l.keys.iter().map(|k| &k[..]).collect();
            keys.sort_unstable();
            out.push(keys.len() as u32);
            keys.iter().for_each(|k| bytes(out, k));
        };
        self.key_with(text, out, list);
    }

    /// The key, each list written by `list`.
    fn key_with(&self, text: &[u8], out: &mut Vec<u32>, list: impl Fn(&mut Vec<u32>, &List)) {
        let since = |start: u32| &text[(start as usize).min(text.len())..];
        for l in &self.after {
            list(out, l);
        }
        for f in &self.stack {
            match f {
                Frame::Object { keys: None, at } => out.extend([1, *at as u32]),
                Frame::Object { keys: Some(l), at } => {
                    out.extend([11, *at as u32]);
                    list(out, l);
                }
                Frame::Array(None) => out.push(2),
                Frame::Array(Some(l)) => {
                    out.push(3);
                    list(out, l);
                }
                Frame::Item { start, after } => {
                    out.extend([4, after.map_or(u32::MAX, u32::from)]);
                    bytes(out, since(*start));
                }
                Frame::Pending(k) => out.extend([5, u32::from(*k)]),
                Frame::Text { start, k, in_str, esc } => {
                    out.extend([6, u32::from(*k), u32::from(*in_str), u32::from(*esc)]);
                    bytes(out, since(*start));
                }
            }
        }
        match self.lex {
            Lex::Normal => out.push(7),
            Lex::Str => out.push(8),
            Lex::StrEscape => out.push(9),
            Lex::Scalar(start) => {
                out.push(10);
                bytes(out, since(start));
            }
        }
    }
}

/// Appends `b` to a key: its length, then its bytes.
fn bytes(out: &mut Vec<u32>, b: &[u8]) {
    out.push(b.len() as u32);
    out.extend(b.iter().map(|&b| u32::from(b)));
}
