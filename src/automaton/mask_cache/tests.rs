//! The slice searches checked against their definitions: reach tables against one search per
//! state, scans together against each alone, hazards against the bytes they name.

use super::content::PairKeys;
use super::hazards::{avoid_set, content_hazards, content_hazards_by, Depths};
use super::wholesale::{content_dead_all, content_reach, content_reach_by, reach_table, NEVER};
use crate::regular::{Dfa, StateId};
use crate::vocab::trie::ByteSet;

#[test]
fn reach_table_equals_the_search_from_each_state() {
    let lexemes = [
        r#""(?:[^"\\]|\\["\\/bfnrtu]){0,5}""#,
        r#""[a-z]{2,4}é""#,
        r#"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"#,
        r#"[ \t\n]{0,3}"x\\y" ?:"#,
    ];
    for re in lexemes {
        let dfa = Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), Default::default()).unwrap();
        let table = reach_table(&dfa).expect("small");
        for s in (1..dfa.state_count() as u32).map(StateId) {
            assert_eq!(Some(table[s.index()]), content_reach(&dfa, s, usize::MAX, false, usize::MAX), "{re} state {s}");
            // Stopped at the first event: the smaller distance, whatever the cut-off.
            for max in [1, 3, usize::MAX] {
                let (a, d) = content_reach(&dfa, s, max, false, usize::MAX).unwrap();
                let (fa, fd) = content_reach(&dfa, s, max, true, usize::MAX).unwrap();
                assert_eq!(a.min(d), fa.min(fd), "{re} state {s} max {max}");
            }
        }
    }
}

#[test]
fn scans_together_survive_what_each_alone_dies_on() {
    let dfa = |re: &str| Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), Default::default()).unwrap();
    let dead_all = |res: &[&str], max: usize| {
        let dfas: Vec<Dfa> = res.iter().map(|re| dfa(re)).collect();
        let refs: Vec<&Dfa> = dfas.iter().collect();
        let states: Vec<StateId> = dfas.iter().map(|d| d.start()).collect();
        content_dead_all(&refs, &states, max, usize::MAX)
    };
    // A name, names starting with `_`, and every other name: no content string kills all.
    let keys = [r#"name""#, r#"_[^"\\]*""#, r#"[^_"\\][^"\\]*""#];
    for &re in &keys {
        let alone = content_reach(&dfa(re), dfa(re).start(), 50, false, usize::MAX).unwrap().1;
        assert!(alone <= 1, "{re} alone dies at once on some byte: {alone}");
    }
    assert_eq!(dead_all(&keys, 50), NEVER);
    // Without the last: a string of one other byte kills both.
    assert_eq!(dead_all(&keys[..2], 50), 1);
    // Up to three other characters, or `_` then anything: "abcd" kills both after four bytes.
    let short = [r#"[^_"\\][^"\\]{0,2}"#, r#"_[^"\\]*"#];
    assert_eq!(dead_all(&short, 50), 4);
    assert_eq!(dead_all(&short, 3), NEVER);
    // Cut short, the search answers a lower bound: the length it was searching, every shorter
    // string searched. It never exceeds the exact answer and grows with the work allowed.
    let dfas: Vec<Dfa> = short.iter().map(|re| dfa(re)).collect();
    let refs: Vec<&Dfa> = dfas.iter().collect();
    let states: Vec<StateId> = dfas.iter().map(|d| d.start()).collect();
    let bounds: Vec<usize> = [0, 1, 10, 100, 1000, 10_000, usize::MAX]
        .into_iter()
        .map(|work| content_dead_all(&refs, &states, 50, work))
        .collect();
    assert_eq!(bounds[0], 1, "no step taken: every string of no bytes leaves a scan alive");
    assert!(bounds.windows(2).all(|w| w[0] <= w[1] && w[1] <= 4), "{bounds:?}");
    assert!(bounds[1..].contains(&2), "a cut inside the second level: {bounds:?}");
    assert_eq!(bounds.last(), Some(&4));
}

#[test]
fn hazards_are_the_bytes_that_kill_or_accept() {
    let dfa = |re: &str| Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), Default::default()).unwrap();
    let set = |bytes: &[u8]| {
        let mut s = ByteSet::default();
        bytes.iter().for_each(|&b| s.insert(b));
        s
    };
    let hz = |d: &Dfa| content_hazards(d, d.start(), 64);
    // Inside a string of anything but `/`, `a`-`c` and U+2029 (E2 80 A9): those kill it (a
    // class's representative stands for the whole class), and no content byte ends it.
    let h = hz(&dfa("[^/a-c\u{2029}\"\\\\]*\""));
    assert_eq!(h.survive.within(64), Some(set(b"/abc\xa9")));
    assert_eq!(h.survive.within(1), Some(set(b"/abc")), "U+2029 is three bytes");
    assert_eq!(h.accept.within(1000), Some(ByteSet::default()), "every pair was searched");
    // Free text accepts after any byte that ends a character, and dies on none.
    let free = dfa("[^\\n]*");
    let h = hz(&free);
    let accept = h.accept.within(64).expect("small");
    assert!(accept.contains(b'a') && accept.contains(0xa9) && !accept.contains(0xe2));
    // It could survive unfinished only avoiding all of those: not searched at all.
    assert_eq!(h.survive.within(1), None);
    // Past `:` only hex digits go on: the pair after it is cut, not explored, so `:` is
    // the one byte to avoid (exploring it would avoid every byte but the digits).
    let h = hz(&dfa("[^:\"\\\\]+:[0-9a-f]+\""));
    assert_eq!(h.survive.within(64), Some(set(b":")));
    // A length bound: every byte kills the string past it, none before.
    let bounded = dfa("[^<\"\\\\]{0,5}\"");
    let h = hz(&bounded);
    assert_eq!(h.survive.within(5), Some(set(b"<")));
    let sixth = h.survive.within(6).expect("searched");
    assert!(sixth.contains(b'a') && sixth.len() > 90, "a sixth character kills it");
    let h = content_hazards(&bounded, bounded.start(), 3);
    assert_eq!((h.survive.within(3), h.survive.within(4)), (Some(set(b"<")), None), "searched up to 3 bytes");
    // The survivor needing the fewest bytes avoided, and every other scan's accepting bytes.
    let (name, slash, word) = (hz(&dfa("x\"")), hz(&dfa("[^/\"\\\\]*\"")), hz(&dfa("[a-z]*")));
    let free = hz(&free);
    assert_eq!(avoid_set(&[&name, &slash], 64), Some((1, set(b"/"))));
    assert_eq!(avoid_set(&[&slash, &word], 64), Some((0, set(b"/abcdefghijklmnopqrstuvwxyz"))));
    assert_eq!(avoid_set(&[&slash, &free], 64), None, "free text ends on too many bytes");
}

#[test]
fn hazards_of_a_count_by_place_are_those_by_state() {
    // Strings counted on the fly (a table would have about 45,000 states): each byte is a new
    // row, so by state the searches run to their work bound; by place, far from the bound,
    // they end. Wherever both know, they agree.
    let unit = crate::regular::regex::parse(r#"[^<"\\]|\\["\\n]"#).unwrap();
    let lexeme = crate::regular::Lexeme::counted(b"\"", unit, 0, Some(5000), b"\"");
    let dfa = Dfa::shared(&lexeme, Default::default()).unwrap();
    assert!(dfa.is_counter(), "a count computed on the fly ({} states)", dfa.state_count());
    let agree = |a: &Depths, b: &Depths, what: &str| {
        for hi in 1..=20 {
            if let (Some(x), Some(y)) = (a.within(hi), b.within(hi)) {
                assert_eq!(x, y, "{what} within {hi}");
            }
        }
    };
    let tails: [&[u8]; 5] = [b"", b"<", b"\\", &[0xc3], &[0xe2, 0x80]];
    let mut by_place = 0;
    for row in [0, 1, 2, 2500, 4975, 4985, 4995, 4999] {
        for tail in tails {
            let prefix = [b"\"".as_slice(), &b"a".repeat(row), tail].concat();
            let s = dfa.run(dfa.start(), &prefix);
            if s == StateId::DEAD {
                continue;
            }
            let keys = PairKeys::new(&dfa, s, 20);
            by_place += usize::from(keys.by_place());
            let fast = content_hazards_by(&dfa, s, 20, keys);
            let slow = content_hazards_by(&dfa, s, 20, PairKeys::by_state(&dfa));
            let what = format!("row {row} tail {tail:?}");
            agree(&fast.survive, &slow.survive, &format!("{what} survive"));
            agree(&fast.accept, &slow.accept, &format!("{what} accept"));
            // By place a state far from the bound, between characters, is searched to the
            // end (inside an escape or a character most bytes end it: no survivor search).
            if row < 4900 && tail.is_empty() {
                assert!(fast.survive.within(20).is_some() && fast.accept.within(20).is_some(), "{what}");
            }
        }
    }
    assert!(by_place > 0 && by_place < 40, "{by_place} states searched by place");
}

#[test]
fn reach_of_a_count_by_place_is_that_by_state() {
    // Counted on the fly, each byte of content a new row: by state a search meets every (place,
    // row) pair within reach; by place, far from the bound, each place once. Both agree, cut
    // off anywhere, for the first event or both. Two strings of at most 3,000 characters: any
    // content (a search by place near the bound would stop before the 3,001st character kills
    // it), and words (at most 21) in it.
    let parse = |re: &str| crate::regular::regex::parse(re).unwrap();
    let counted = || crate::regular::Lexeme::counted(b"\"", parse(r#"[^"\\]|\\["\\n]"#), 1, Some(3000), b"\"");
    let words = crate::regular::Lexeme::Regex(parse(r#""(?:[^ "\\]+ +){0,20}[^ "\\]*""#));
    let mut by_place = 0;
    for lexeme in [counted(), crate::regular::Lexeme::and(vec![words, counted()])] {
        let dfa = Dfa::shared(&lexeme, Default::default()).unwrap();
        assert!(dfa.is_counter(), "a count computed on the fly ({} states)", dfa.state_count());
        for row in [0, 1, 3, 40, 1500, 2970, 2985, 2995, 2999] {
            for tail in [&b""[..], b" ", b"  ", &[0xc3], &[0xe2, 0x80]] {
                let text = "ab ".repeat(row / 3) + &"a".repeat(row % 3);
                let s = dfa.run(dfa.start(), &[b"\"".as_slice(), text.as_bytes(), tail].concat());
                if s == StateId::DEAD {
                    continue;
                }
                for max in [1, 4, 16, 40] {
                    for first in [false, true] {
                        let keys = PairKeys::new(&dfa, s, max);
                        by_place += usize::from(keys.by_place());
                        let fast = content_reach_by(&dfa, s, max, first, usize::MAX, keys);
                        let slow = content_reach_by(&dfa, s, max, first, usize::MAX, PairKeys::by_state(&dfa));
                        assert_eq!(fast, slow, "row {row} tail {tail:?} within {max} first {first}");
                    }
                }
            }
        }
    }
    assert!(by_place > 100, "{by_place} searches by place");
}
