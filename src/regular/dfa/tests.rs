use super::counted::Repeat;
use super::finite::{finite_strings, prefix_free, FINITE_BYTES};
use super::*;
use crate::error::Error;
use crate::regular::Lexeme;

fn dfa(re: &str) -> Dfa {
    Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), DfaLimits::default()).unwrap()
}

#[test]
fn full_match_and_prefixes() {
    let d = dfa("a|ab|abc");
    let s = d.run(d.start(), b"ab");
    assert!(d.is_accepting(s));
    assert!(d.is_accepting(d.run(d.start(), b"abc")));
    assert_eq!(d.run(d.start(), b"abcd"), StateId::DEAD);
    assert_eq!(d.run(d.start(), b"b"), StateId::DEAD);
}

#[test]
fn unreachable_acceptance_is_dead() {
    // `a` followed by a class with no members can never complete.
    let d = dfa(r"x|a[^\s\S]");
    assert_eq!(d.next(d.start(), b'a'), StateId::DEAD);
    assert_eq!(d.only_byte(d.start()), Some(b'x'));
}

#[test]
fn distances() {
    let d = dfa(r#"\{"a":[0-9]+\}"#);
    assert_eq!(d.dist(d.start()), 7);
    assert_eq!(d.only_byte(d.start()), Some(b'{'));
}

fn lexeme(parts: &[(&str, bool)]) -> Dfa {
    let parts = parts
        .iter()
        .map(|(re, neg)| {
            let l = Lexeme::Regex(crate::regular::regex::parse(re).unwrap());
            if *neg {
                Lexeme::Not(Box::new(l))
            } else {
                l
            }
        })
        .collect();
    Dfa::from_lexeme(&Lexeme::And(parts), DfaLimits::default()).unwrap()
}

fn accepts(d: &Dfa, s: &str) -> bool {
    d.is_accepting(d.run(d.start(), s.as_bytes()))
}

#[test]
fn intersection_and_complement() {
    // Contains "ab", at most 4 letters, not exactly "abab".
    let d = lexeme(&[("[a-z]*ab[a-z]*", false), ("[a-z]{0,4}", false), ("abab", true)]);
    for (s, ok) in
        [("ab", true), ("xaby", true), ("abab", false), ("aabb", true), ("xyz", false), ("abcde", false), ("", false)]
    {
        assert_eq!(accepts(&d, s), ok, "{s:?}");
    }
    // Dead as soon as no completion exists: after 4 letters without "ab".
    assert_eq!(d.run(d.start(), b"xyzw"), StateId::DEAD);
    assert_eq!(d.dist(d.start()), 2);
    assert_eq!(d.dist(d.run(d.start(), b"x")), 2);
    // "abab" itself is rejected but "abab" + nothing else cannot grow (max 4): dead.
    assert_eq!(d.run(d.start(), b"abab"), StateId::DEAD);
    // An empty intersection has a dead start.
    assert_eq!(lexeme(&[("a+", false), ("b+", false)]).start(), StateId::DEAD);
    // A complement alone accepts everything else, including what extends the excluded word.
    let d = lexeme(&[("abc", true)]);
    assert!(accepts(&d, "") && accepts(&d, "ab") && accepts(&d, "abcd") && !accepts(&d, "abc"));
}

#[test]
fn products_numbered_by_slot_or_by_hash_are_the_same_table() {
    let cases: &[&[(&str, bool)]] = &[
        &[("[a-z]*ab[a-z]*", false), ("[a-z]{0,4}", false), ("abab", true)],
        &[("(?:a|bc)*c?", false), ("[abc]{1,5}", false), ("(?:ab)+", true), ("[abc]*cc[abc]*", true)],
        &[("[^\"]{0,40}", false), ("(?:https?|ftp)://[a-z.]+(?:/[a-z0-9]*)*", false)],
        &[("abc", true)],
    ];
    for parts in cases {
        let dfas: Vec<(Arc<Dfa>, Option<u32>)> =
            parts.iter().enumerate().map(|(i, (re, neg))| (Arc::new(dfa(re)), neg.then_some(i as u32))).collect();
        let by_slot =
            Dfa::product_numbered(&dfas, DfaLimits::default(), usize::MAX, super::product::Combine::All).unwrap();
        let by_hash = Dfa::product_numbered(&dfas, DfaLimits::default(), 0, super::product::Combine::All).unwrap();
        assert!(by_slot.state_count() > 1, "{parts:?}");
        assert_eq!(
            (&by_slot.trans, &by_slot.accept, by_slot.start),
            (&by_hash.trans, &by_hash.accept, by_hash.start),
            "{parts:?}"
        );
        assert_eq!(by_slot.classes, by_hash.classes);
    }
}

#[test]
fn product_agrees_with_the_regexes() {
    // Every string over a small alphabet up to length 6, against the `regex` crate. `d`
    // is refused everywhere by a positive part in the first set (one dead byte class), and
    // only by the negated part in the second (where it must stay alive).
    let sets: [&[(&str, bool)]; 2] = [
        &[("(?:a|bc)*c?", false), ("[abc]{1,5}", false), ("(?:ab)+", true), ("[abc]*cc[abc]*", true)],
        &[("[a-d]*", false), ("[abc]*cc[abc]*", true)],
    ];
    let mut words = vec![Vec::new()];
    for _ in 0..6 {
        words = words
            .iter()
            .flat_map(|w: &Vec<u8>| b"abcd".iter().map(move |&c| [w.clone(), vec![c]].concat()))
            .chain(words.clone())
            .collect();
        words.sort();
        words.dedup();
    }
    for parts in sets {
        let d = lexeme(parts);
        let res: Vec<(regex::bytes::Regex, bool)> =
            parts.iter().map(|(re, neg)| (regex::bytes::Regex::new(&format!("^(?:{re})$")).unwrap(), *neg)).collect();
        for w in &words {
            let want = res.iter().all(|(r, neg)| r.is_match(w) != *neg);
            assert_eq!(d.is_accepting(d.run(d.start(), w)), want, "{parts:?} {:?}", String::from_utf8_lossy(w));
        }
    }
}

/// `a ∧ ¬(b ∧ c)` is one product with `b` and `c` as one negated clause: the language the
/// regexes say (every word over a small alphabet), and the same language and distances as the
/// clause's conjunction built in full first and complemented.
#[test]
fn a_negated_conjunction_is_one_clause_of_the_product() {
    let regex = |re: &str| Lexeme::Regex(crate::regular::regex::parse(re).unwrap());
    let cases: [(&str, &[&[&str]]); 5] = [
        ("[abc]{0,5}", &[&["[abc]*ab[abc]*", "[abc]{2,3}"]]),
        ("(?:a|bc)*c?", &[&["a[abc]*", "[abc]*c"], &["[abc]*cc[abc]*"]]),
        ("[a-d]*", &[&["(?:ab)+", "[ab]{0,4}", "a[abc]*"], &["d[a-d]*", "[a-d]*d"]]),
        // A clause's part that is the positive part too leaves the clause; a clause left
        // empty empties the product.
        ("[abc]{0,5}", &[&["[abc]{0,5}", "[abc]*c"]]),
        ("(?:a|bc)*c?", &[&["[abc]*cc[abc]*"], &["(?:a|bc)*c?"]]),
    ];
    let words = words(b"abcd", 6);
    for (positive, clauses) in cases {
        let not = |c: &[&str]| {
            let parts: Vec<Lexeme> = c.iter().map(|re| regex(re)).collect();
            Lexeme::Not(Box::new(if parts.len() == 1 { parts.into_iter().next().unwrap() } else { Lexeme::And(parts) }))
        };
        let mut xs = vec![regex(positive)];
        xs.extend(clauses.iter().map(|c| not(c)));
        let fast = Dfa::build_lexeme(&Lexeme::And(xs), DfaLimits::default()).unwrap();
        // The clauses built in full first, then complemented.
        let mut parts: Vec<(Arc<Dfa>, bool)> = vec![(Arc::new(dfa(positive)), false)];
        for c in clauses {
            let inner = Lexeme::And(c.iter().map(|re| regex(re)).collect());
            parts.push((Arc::new(Dfa::build_lexeme(&inner, DfaLimits::default()).unwrap()), true));
        }
        let slow = Dfa::product(&parts, DfaLimits::default()).unwrap();
        same_language(&fast, &slow, b"abcd", 6, positive);
        if clauses.iter().any(|c| c == &[positive]) {
            assert_eq!(fast.start(), StateId::DEAD, "{positive} ∧ ¬{positive}: empty before any tuple");
        }
        let re = |r: &str| regex::bytes::Regex::new(&format!("^(?:{r})$")).unwrap();
        let (pos, negs) =
            (re(positive), clauses.iter().map(|c| c.iter().map(|r| re(r)).collect()).collect::<Vec<Vec<_>>>());
        for w in &words {
            let want = pos.is_match(w) && negs.iter().all(|c| !c.iter().all(|r| r.is_match(w)));
            assert_eq!(
                fast.is_accepting(fast.run(fast.start(), w)),
                want,
                "{positive} {:?}",
                String::from_utf8_lossy(w)
            );
        }
    }
}

/// Byte classes that every state reads alike are one class (a regex's classes are ranges:
/// `[a-z]*c[a-z]*` had `[ab]` and `[d-z]` apart), exactly: two bytes share a class iff every
/// state goes to the same state on both; and a product of such tables has no more classes
/// than its parts tell apart.
#[test]
fn a_products_classes_merge_columns_read_alike() {
    for re in ["[a-z]*c[a-z]*", "(?:ab|[a-f]x)+", "[^\"\\\\]*(?:\\\\.[^\"\\\\]*)*", "\\d{2}-[a-c]?"] {
        let d = dfa(re);
        let alike = d.alike_classes();
        for a in 0..256 {
            for b in 0..256 {
                let same = (0..d.state_count() as u32).map(StateId).all(|s| d.next(s, a as u8) == d.next(s, b as u8));
                assert_eq!(alike[a] == alike[b], same, "{re}: bytes {a} and {b}");
            }
        }
    }
    let parts = [(Arc::new(dfa("[a-z]*c[a-z]*")), false), (Arc::new(dfa("[a-z]{0,5}")), false)];
    let product = Dfa::product(&parts, DfaLimits::default()).unwrap();
    assert_eq!(product.stride, 3, "the dead bytes, `c`, and every other letter");
    for w in words(b"abcdz", 6) {
        let want = w.contains(&b'c') && w.len() <= 5;
        assert_eq!(product.is_accepting(product.run(product.start(), &w)), want, "{:?}", String::from_utf8_lossy(&w));
    }
}

/// Every string over `alphabet` up to `len` bytes.
fn words(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
    let mut words: Vec<Vec<u8>> = vec![Vec::new()];
    for n in 0..len {
        let next: Vec<Vec<u8>> = words
            .iter()
            .filter(|w| w.len() == n)
            .flat_map(|w| alphabet.iter().map(move |&c| [w.clone(), vec![c]].concat()))
            .collect();
        words.extend(next);
    }
    words
}

fn same_language(fast: &Dfa, slow: &Dfa, alphabet: &[u8], len: usize, what: &str) {
    same_on(fast, slow, words(alphabet, len), what);
}

/// `fast` and `slow` agree on each of `words`: acceptance, liveness, distance to acceptance.
fn same_on(fast: &Dfa, slow: &Dfa, words: impl IntoIterator<Item = Vec<u8>>, what: &str) {
    for w in words {
        let (a, b) = (fast.run(fast.start(), &w), slow.run(slow.start(), &w));
        assert_eq!(fast.is_accepting(a), slow.is_accepting(b), "{what}: {:?}", String::from_utf8_lossy(&w));
        assert_eq!(a == StateId::DEAD, b == StateId::DEAD, "{what}: {:?}", String::from_utf8_lossy(&w));
        assert_eq!(fast.dist(a), slow.dist(b), "{what}: {:?}", String::from_utf8_lossy(&w));
    }
}

#[test]
fn finite_languages_and_spliced_sequences_equal_the_nfa_path() {
    let hir = |re: &str| crate::regular::regex::parse(re).unwrap();
    let finite = [
        r#""name""#,
        r#"(?:"a"|"ab"|"b"|"")"#,
        "[ab]{0,3}c?",
        "a(?:b|)(?:c|ab){1,2}",
        "(?:)",
        r"[^\x00-\x{10FFFF}]",
        "é|e\u{301}|[xy]{2}",
    ];
    for re in finite {
        let h = hir(re);
        assert!(finite_strings(&h).is_some(), "{re} is finite and small");
        let (fast, slow) =
            (Dfa::from_hir(&h, DfaLimits::default()).unwrap(), Dfa::from_hir_nfa(&h, DfaLimits::default()).unwrap());
        same_language(&fast, &slow, "abcé\"xy\u{301}".as_bytes(), 6, re);
    }
    assert!(
        finite_strings(&hir("a*")).is_none()
            && finite_strings(&hir("[a-z]{0,5}")).is_none()
            && finite_strings(&hir(r"(?-u:\b)a")).is_none()
    );
    // A quoted name spliced onto a shared rest, and shapes the splice must refuse.
    for re in [
        r#""ab"[ \t]{0,9}:"#,
        r#"(?:"a"|"bc")x*"#,
        r#""a"(?:b|c)*d"#,
        "(?:a|ab)c*",
        r#""a(?:b|bc)x*"#,
        r#""(?:a|ab)(?:x|y)x*"#,
        "(?:|a)b*",
        "ab^c*d",
        r"a(?-u:\b)x*",
    ] {
        let h = hir(re);
        let fast = Dfa::from_regex_lexeme(&h, DfaLimits::default()).unwrap();
        let slow = Dfa::from_hir_nfa(&h, DfaLimits::default()).unwrap();
        same_language(&fast, &slow, b"abcdx \t:\"", 6, re);
    }
    // The head is the longest prefix of finite parts that is prefix-free (`"a` of `"ab`/`"abc`).
    let strings = |xs: &[&str]| xs.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
    assert!(prefix_free(&strings(&["\"ab", "\"ac", "b"])) && prefix_free(&strings(&["a", "a"])));
    assert!(!prefix_free(&strings(&["\"deb", "\"deb-src"])) && !prefix_free(&strings(&["", "a"])));
    // An infinite prefix-free head (a string's body and its closing quote) spliced onto a
    // shared rest, and shapes where no head is prefix-free.
    for re in [
        r#"[^"]*"x*"#,
        r#"(?:[^"\\]|\\.)*",[a-c]*:"#,
        r#"a*b(?:cd|e)*"#,
        "a*ab",
        r#"[ab]*:"c"x*"#,
        "a*(?:b|bc)d*",
        "a*b*c",
        "(?:ab)*a*c",
    ] {
        let h = hir(re);
        let fast = Dfa::from_regex_lexeme(&h, DfaLimits::default()).unwrap();
        let slow = Dfa::from_hir_nfa(&h, DfaLimits::default()).unwrap();
        same_language(&fast, &slow, b"abcdx\\\",:", 6, re);
    }
    let spliced = |re: &str| match hir(re).kind() {
        regex_syntax::hir::HirKind::Concat(parts) => {
            Dfa::splice_infinite_head(parts, DfaLimits::default()).unwrap().is_some()
        }
        _ => false,
    };
    assert!(spliced(r#"[^"]*","a":"#) && spliced(r#"[^"]*"x*"#) && spliced("a*b(?:cd|e)*"));
    assert!(!spliced("a*b*c") && !spliced("(?:ab)*a*c") && !spliced("a*ab"));
    // A name longer than the listing budget: the regex path, same language.
    let long = format!("\"{}\" *:", "n".repeat(FINITE_BYTES + 1));
    let d = Dfa::from_regex_lexeme(&hir(&long), DfaLimits::default()).unwrap();
    assert!(d.is_accepting(d.run(d.start(), long.replace(" *", "  ").as_bytes())));
    let name = Dfa::from_strings(vec![b"\"ab\"".to_vec()], DfaLimits::default()).unwrap();
    let rest = Dfa::from_hir_nfa(&hir(" *:"), DfaLimits::default()).unwrap();
    assert!(Dfa::splice(&name, &rest, DfaLimits::default()).unwrap().is_some());
    let not_prefix_free = Dfa::from_strings(vec![b"a".to_vec(), b"ab".to_vec()], DfaLimits::default()).unwrap();
    assert!(Dfa::splice(&not_prefix_free, &rest, DfaLimits::default()).unwrap().is_none());
}

fn usable_of(bytes: &[u8]) -> [bool; 256] {
    let mut u = [false; 256];
    bytes.iter().for_each(|&b| u[b as usize] = true);
    u
}

/// Random regexes (literals, classes, alternations with an empty branch, sequences, stars,
/// counted repetitions past the counting threshold) through the lexeme shortcuts (sets of
/// strings, splices, counts, unions) against the regex path: the same acceptance, liveness and
/// distances on every short word. Seeded: the same 400 regexes every run.
#[test]
fn the_lexeme_shortcuts_equal_the_regex_path_on_random_regexes() {
    use rand::{Rng, SeedableRng};
    fn gen(rng: &mut rand_chacha::ChaCha8Rng, depth: u32) -> String {
        let atoms = ["a", "b", "\"", ":", "ab", "[ab]", "[^a]", "(?:)", "\"a\":"];
        if depth == 0 || rng.random_range(0..3) == 0 {
            return atoms[rng.random_range(0..atoms.len())].to_string();
        }
        match rng.random_range(0..5) {
            0 => {
                let n = rng.random_range(2..5);
                let mut branches: Vec<String> = (0..n).map(|_| gen(rng, depth - 1)).collect();
                if rng.random_range(0..3) == 0 {
                    branches.push(String::new());
                }
                format!("(?:{})", branches.join("|"))
            }
            1 => (0..rng.random_range(2..4)).map(|_| gen(rng, depth - 1)).collect(),
            2 => format!("(?:{})*", gen(rng, depth - 1)),
            3 => {
                let min = rng.random_range(0..3);
                format!("(?:{}){{{min},{}}}", gen(rng, depth - 1), rng.random_range(32..48))
            }
            _ => format!("\"{}\"", gen(rng, depth - 1)),
        }
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(26);
    let limits = DfaLimits { states: 20_000, ..DfaLimits::default() };
    let (mut compared, mut marked_too) = (0, 0);
    for _ in 0..400 {
        let re = gen(&mut rng, 3);
        let h = crate::regular::regex::parse(&re).unwrap();
        // Where the regex path refuses (a limit), there is nothing to compare.
        let Ok(slow) = Dfa::from_hir_nfa(&h, limits) else { continue };
        let fast = Dfa::from_regex_lexeme(&h, limits).unwrap_or_else(|e| panic!("{re}: {e}"));
        same_language(&fast, &slow, b"ab\":x", 5, &re);
        compared += 1;
        // Counted through a marker whatever its weight, tabled and on the fly.
        for max_tabled in [usize::MAX, 0] {
            if let Some(marked) = Dfa::counted_by_marker(&h, limits, 0, max_tabled) {
                same_language(&marked, &slow, b"ab\":x", 5, &re);
                marked_too += 1;
            }
        }
    }
    assert!(compared > 300, "{compared} of 400 compared");
    assert!(marked_too >= 30, "{marked_too} counted through a marker");
}

/// An alternation that is not a set of strings is the union of its branches' DFAs (each built
/// by the lexeme shortcuts): the same language and distances as the regex path, the empty
/// branch (an optional member) and branches with common prefixes included.
#[test]
fn alternations_are_unions_of_their_branches() {
    let hir = |re: &str| crate::regular::regex::parse(re).unwrap();
    for re in [
        r#"(?:,"a":"[^"]*")|"#,
        "(?:ab|a)c*|x",
        "a*|b*",
        "(?:a|b)*c|ab*",
        r#"(?:"x"[ab]*"(?:,"y":b*|))|(?:"y"a*)"#,
        "[^a]*b|a{0,40}",
        "(?:)|a+|ba*",
    ] {
        let h = hir(re);
        assert!(matches!(h.kind(), regex_syntax::hir::HirKind::Alternation(_)), "{re}");
        let fast = Dfa::from_regex_lexeme(&h, DfaLimits::default()).unwrap();
        let slow = Dfa::from_hir_nfa(&h, DfaLimits::default()).unwrap();
        same_language(&fast, &slow, b"abcxy\",:", 6, re);
    }
    let parts = [Dfa::from_hir(&hir("a+"), DfaLimits::default()).unwrap()];
    let none: [&Dfa; 0] = [];
    assert_eq!(Dfa::union(&none, DfaLimits::default()).unwrap().start(), StateId::DEAD);
    let one = Dfa::union(&parts.iter().collect::<Vec<_>>(), DfaLimits::default()).unwrap();
    same_language(&one, &parts[0], b"ab", 4, "a+");
}

/// A pattern's long bounded repetition of a countable unit, alone or between literals, is
/// counted, not determinized: the same language and distances as the regex path; shapes it
/// cannot count (a unit that is not prefix-free, a close that starts a unit, few copies, more
/// parts) go the regex path.
#[test]
fn long_repetitions_in_patterns_are_counted() {
    let hir = |re: &str| crate::regular::regex::parse(re).unwrap();
    let counted = |re: &str| Dfa::counted_regex(&hir(re), DfaLimits::default()).unwrap();
    for re in [
        r#""(?:[^"\\\n]|\\[n"]){0,1000}""#,
        "[a-c]{1,255}",
        r#"x(?:ab|c){3,40}"#,
        r#"(?:ab|c){2,64}"y"#,
        "[^a]{0,5000}",
    ] {
        let fast = counted(re).unwrap_or_else(|| panic!("{re} is counted"));
        let slow = Dfa::from_hir_nfa(&hir(re), DfaLimits::default()).unwrap();
        same_language(&fast, &slow, b"\"\\nabcxy", 6, re);
        let lexeme = Dfa::from_regex_lexeme(&hir(re), DfaLimits::default()).unwrap();
        same_language(&lexeme, &slow, b"\"\\nabcxy", 6, re);
    }
    for re in ["(?:a|ab){0,40}", "[ab]{0,40}a", "[a-c]{1,31}", "x[a-c]{0,40}yz*"] {
        assert!(counted(re).is_none(), "{re}");
    }
}

#[test]
fn counted_equals_the_regex() {
    let unit = r#"(?:[^"\\]|\\["\\n]|\\u00[0-9a-f]{2})"#;
    let hir = |re: &str| crate::regular::regex::parse(re).unwrap();
    let unit_dfa = Dfa::from_hir(&hir(unit), DfaLimits::default()).unwrap();
    // Every string over a small alphabet up to length 6.
    let alphabet: &[u8] = b"\"\\anu0b";
    let words = words(alphabet, 6);
    let usables = [usable_of(alphabet), usable_of(b"\"a"), usable_of(b"a\\n"), usable_of(b"ab\"")];
    for (open, close) in [(&b"\""[..], &b"\""[..]), (b"", b""), (b"ab", b"\"b")] {
        for (min, max) in [(0, Some(3)), (2, Some(2)), (1, None), (0, None), (2, Some(4))] {
            let l = Lexeme::counted(open, hir(unit), min, max, close);
            let Lexeme::Counted { full, .. } = &l else { unreachable!() };
            let slow = Dfa::from_hir(full, DfaLimits::default()).unwrap();
            let slow_using: Vec<Distances> = usables.iter().map(|u| slow.dist_using(u)).collect();
            // Tabled, and computed on the fly: same acceptance, liveness, distances.
            for max_tabled in [usize::MAX, 0] {
                let r = Repeat { open, unit: &unit_dfa, min, max, close };
                let fast = Dfa::counted_with(r, DfaLimits::default(), max_tabled).unwrap().expect("prefix-free unit");
                assert_eq!(fast.counter.is_some(), max_tabled == 0);
                let fast_using: Vec<Distances> = usables.iter().map(|u| fast.dist_using(u)).collect();
                // What a product reads: the counter as a table.
                let tabled = fast.counter.as_ref().map(|c| fast.tabled(c));
                for w in &words {
                    if let Some(t) = &tabled {
                        assert_eq!(
                            t.run(t.start(), w),
                            fast.run(fast.start(), w),
                            "tabled counter {:?}",
                            String::from_utf8_lossy(w)
                        );
                    }
                    let (a, b) = (fast.run(fast.start(), w), slow.run(slow.start(), w));
                    let at = format!("{open:?} {close:?} {min} {max:?} {max_tabled} {:?}", String::from_utf8_lossy(w));
                    assert_eq!(fast.is_accepting(a), slow.is_accepting(b), "{at}");
                    assert_eq!(a == StateId::DEAD, b == StateId::DEAD, "{at}");
                    assert_eq!(fast.dist(a), slow.dist(b), "{at}");
                    assert_eq!(fast.can_continue(a), slow.can_continue(b), "{at}");
                    assert_eq!(fast.only_byte(a), slow.only_byte(b), "{at}");
                    for (fu, su) in fast_using.iter().zip(&slow_using) {
                        assert_eq!(fu.at(a), su.at(b), "{at}");
                    }
                    // A state on the way to `a` bounds its distance (`farthest_from`).
                    let half = fast.run(fast.start(), &w[..w.len() / 2]);
                    for fu in fast_using.iter().filter(|fu| fu.at(a) != UNREACHABLE) {
                        assert!(fu.farthest_from(half) >= fu.at(a), "{at}: from the half");
                        assert!(fu.farthest_from(fast.start()) >= fu.at(a), "{at}: from the start");
                        assert!(fu.farthest() >= fu.farthest_from(half), "{at}");
                    }
                }
            }
        }
    }
    // A unit that is not prefix-free is refused (the caller falls back to the regex).
    let unit_dfa = Dfa::from_hir(&hir("a|ab"), DfaLimits::default()).unwrap();
    let r = Repeat { open: b"", unit: &unit_dfa, min: 0, max: Some(3), close: b"" };
    assert!(Dfa::counted(r, DfaLimits::default()).unwrap().is_none());
}

#[test]
fn a_count_over_a_product_equals_the_product_with_the_count() {
    let hir = |re: &str| crate::regular::regex::parse(re).unwrap();
    let unit = r#"(?:[^"\\]|\\["\\n])"#;
    let unit_dfa = Dfa::from_hir(&hir(unit), DfaLimits::default()).unwrap();
    let limits = DfaLimits::default();
    let alphabet: &[u8] = b"\"\\anb@";
    let words = words(alphabet, 6);
    let usables = [usable_of(alphabet), usable_of(b"\"a@"), usable_of(b"ab\"\\")];
    // Patterns (over the quoted string's bytes) whose lengths in units are intervals, single
    // counts, gapped sets; with a negated part; unanchored.
    let patterns: [&[(&str, bool)]; 6] = [
        &[(r#""[a-z]+@[a-z]+""#, false)],
        &[(r#""(?:ab|abab)*""#, false)],
        &[(r#""a{3}""#, false)],
        &[(r#""(?:[^"\\]|\\n)*b""#, false), (r#""a.*""#, true)],
        &[(r#""(?:[^"\\]|\\.)*@(?:[^"\\]|\\.)*""#, false)],
        &[(r#""(?:a|\\n)(?:b|\\n)*""#, false), (r#""(?:[^"\\]|\\.)*""#, false)],
    ];
    for pattern in patterns {
        let parts: Vec<(Dfa, Option<u32>)> = pattern
            .iter()
            .enumerate()
            .map(|(i, &(re, neg))| (Dfa::from_hir(&hir(re), limits).unwrap(), neg.then_some(i as u32)))
            .collect();
        for (min, max) in [(0, Some(3)), (2, Some(4)), (1, None), (0, None), (3, Some(3)), (0, Some(7)), (5, None)] {
            let what = format!("{pattern:?} {min} {max:?}");
            let l = Lexeme::counted(b"\"", hir(unit), min, max, b"\"");
            let Lexeme::Counted { full, .. } = &l else { unreachable!() };
            let parts: Vec<(&Dfa, Option<u32>)> = parts.iter().map(|(d, c)| (d, *c)).collect();
            let count = Dfa::from_hir(full, limits).unwrap();
            let slow = Dfa::product_of_clauses(&[&parts[..], &[(&count, None)]].concat(), limits).unwrap();
            let r = Repeat { open: b"\"", unit: &unit_dfa, min, max, close: b"\"" };
            let Some(fast) = Dfa::counted_product(&parts, r, limits, 0).unwrap() else {
                assert_eq!(slow.start(), StateId::DEAD, "{what}: only an empty language is left uncounted");
                continue;
            };
            assert!(fast.is_counter(), "{what}");
            let (fast_using, slow_using): (Vec<Distances>, Vec<Distances>) =
                usables.iter().map(|u| (fast.dist_using(u), slow.dist_using(u))).unzip();
            let tabled = fast.counter.as_ref().map(|c| fast.tabled(c)).unwrap();
            for w in &words {
                let (a, b) = (fast.run(fast.start(), w), slow.run(slow.start(), w));
                let at = format!("{what} {:?}", String::from_utf8_lossy(w));
                assert_eq!(tabled.run(tabled.start(), w), a, "{at}: tabled");
                assert_eq!(a == StateId::DEAD, b == StateId::DEAD, "{at}");
                assert_eq!(fast.is_accepting(a), slow.is_accepting(b), "{at}");
                assert_eq!(fast.dist(a), slow.dist(b), "{at}");
                assert_eq!(fast.can_continue(a), slow.can_continue(b), "{at}");
                assert_eq!(fast.only_byte(a), slow.only_byte(b), "{at}");
                for (fu, su) in fast_using.iter().zip(&slow_using) {
                    assert_eq!(fu.at(a), su.at(b), "{at}");
                }
            }
            for horizon in [1, 3] {
                canonical_reads_alike(&fast, &words[..words.len().min(400)], horizon, &usables, &what);
            }
        }
    }
}

#[test]
fn division_by_multiplication_is_division() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(28);
    let divisors = (1..=300).chain([641, 1 << 16, 65_537, 1 << 31, u32::MAX - 1, u32::MAX]);
    for d in divisors {
        let by = super::rows::Divisor::new(d);
        let edges = [0, 1, d - 1, d, d.saturating_add(1), u32::MAX - 1, u32::MAX];
        for n in edges.into_iter().chain((0..2000).map(|_| rng.random::<u32>())) {
            assert_eq!(by.div_rem(n), (n / d, n % d), "{n} / {d}");
        }
    }
}

#[test]
fn canonical_states_read_every_short_string_alike() {
    let hir = |re: &str| crate::regular::regex::parse(re).unwrap();
    let unit = Dfa::from_hir(&hir(r#"(?:[^"\\]|\\["\\n])"#), DfaLimits::default()).unwrap();
    let alphabet: &[u8] = b"\"\\an";
    let words = words(alphabet, 4);
    for (min, max) in [(0, Some(12)), (9, Some(20)), (7, None), (0, None), (5, Some(5))] {
        let r = Repeat { open: b"\"", unit: &unit, min, max, close: b"\"" };
        let dfa = Dfa::counted_with(r, DfaLimits::default(), 0).unwrap().expect("prefix-free unit");
        for horizon in [1, 2, 3] {
            let what = format!("{min} {max:?} h{horizon}");
            let distinct =
                canonical_reads_alike(&dfa, &words, horizon, &[usable_of(alphabet), usable_of(b"\"a")], &what);
            // Counts far from both bounds share states: fewer canonical states than states.
            if max.unwrap_or(min) > horizon + 1 {
                assert!(distinct < dfa.state_count() - 1, "{what}");
            }
        }
    }
}

#[test]
fn shared_readings_read_every_short_string_alike() {
    let hir = |re: &str| crate::regular::regex::parse(re).unwrap();
    let unit = Dfa::from_hir(&hir(r#"(?:[^"\\]|\\["\\n])"#), DfaLimits::default()).unwrap();
    let words = words(b"\"\\an", 5);
    for (min, max) in [(0, Some(12)), (9, Some(20)), (7, None), (0, None), (5, Some(5))] {
        let r = Repeat { open: b"\"", unit: &unit, min, max, close: b"\"" };
        let dfa = Dfa::counted_with(r, DfaLimits::default(), 0).unwrap().expect("prefix-free unit");
        for horizon in [1, 2, 3, 5] {
            let what = format!("{min} {max:?} h{horizon}");
            let (mut shared, mut distinct) = (0, std::collections::HashSet::new());
            for s in (1..dfa.state_count() as u32).map(StateId) {
                let (c, depth) = dfa.shared_reading(s, horizon);
                assert!(depth <= horizon, "{what}: state {s}");
                shared += usize::from(c != s);
                distinct.insert(c);
                for w in words.iter().filter(|w| w.len() <= depth as usize) {
                    let at = format!("{what}: state {s} → {c} within {depth} {:?}", String::from_utf8_lossy(w));
                    same_fate(&dfa, s, c, w, &at);
                }
            }
            // Near a maximum the rows within the horizon of it share states.
            if max.is_some_and(|m| m > min + horizon + 1) {
                assert!(shared > 0 && distinct.len() < dfa.state_count() - 1, "{what}: nothing shared");
            }
        }
    }
}

/// For every state of `dfa` and each usable set: its canonical state reads every word of at
/// most `horizon` bytes alike (deaths, acceptances, ends), with distances (by that set) no
/// smaller, there and after each word. The number of distinct canonical states (first set).
fn canonical_reads_alike(dfa: &Dfa, words: &[Vec<u8>], horizon: u32, usables: &[[bool; 256]], what: &str) -> usize {
    let mut distinct = std::collections::HashSet::new();
    for (i, usable) in usables.iter().enumerate() {
        let dist = dfa.dist_using(usable);
        for s in (1..dfa.state_count() as u32).map(StateId) {
            let c = dfa.canonical(s, horizon, &dist);
            if i == 0 {
                distinct.insert(c);
            }
            assert!(dist.at(c) >= dist.at(s), "{what} usable #{i}: state {s} → {c}");
            // Every prefix of every word of at most `horizon` bytes: the same fate.
            for w in words.iter().filter(|w| w.len() <= horizon as usize) {
                let at = format!("{what} usable #{i}: state {s} → {c} {:?}", String::from_utf8_lossy(w));
                let (a, b) = same_fate(dfa, s, c, w, &at);
                assert!(dist.at(b) >= dist.at(a), "{at}");
            }
        }
    }
    distinct.len()
}

/// `w` leaves `s` and `c` alike: dead, accepting, able to go on (`at` names the case). The
/// states it leaves them in.
fn same_fate(dfa: &Dfa, s: StateId, c: StateId, w: &[u8], at: &str) -> (StateId, StateId) {
    let (a, b) = (dfa.run(s, w), dfa.run(c, w));
    assert_eq!(a == StateId::DEAD, b == StateId::DEAD, "{at}");
    assert_eq!(dfa.is_accepting(a), dfa.is_accepting(b), "{at}");
    assert_eq!(dfa.can_continue(a), dfa.can_continue(b), "{at}");
    (a, b)
}

#[test]
fn shared_dfas_are_built_once_per_lexeme_and_limits() {
    let l = Lexeme::Regex(crate::regular::regex::parse("shared-[a-z]{2}").unwrap());
    let a = Dfa::shared(&l, DfaLimits::default()).unwrap();
    let b = Dfa::shared(&l, DfaLimits::default()).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "the second compile reuses the table");
    // Other limits are another key: a limit error is never masked by a cached success.
    let tight = DfaLimits { states: 3, ..DfaLimits::default() };
    assert!(matches!(Dfa::shared(&l, tight), Err(Error::Limit { .. })));
    // Distances per usable-byte set are memoized and follow the set.
    let all = [true; 256];
    let mut no_z = all;
    no_z[b'z' as usize] = false;
    assert!(a.dist_using(&all).is(&a.dist_using(&all)));
    assert_eq!(a.dist_using(&all).at(a.start()), 9);
    let d = a.dist_using(&no_z);
    assert_eq!(d.at(a.run(a.start(), b"shared-z")), 1);
    assert_eq!(a.dist_using(&all).at(a.start()), 9);
}

#[test]
fn product_of_no_parts_accepts_everything() {
    let d = Dfa::product::<Arc<Dfa>>(&[], DfaLimits::default()).unwrap();
    assert!(d.is_accepting(d.start()) && d.is_accepting(d.run(d.start(), b"anything")));
}

#[test]
fn exponential_regex_is_a_limit_error() {
    let hir = crate::regular::regex::parse("(a|b)*a(a|b){40}").unwrap();
    // Determinizing it needs 2^41 states: the byte limit stops it (a deterministic amount of
    // work, whatever the machine).
    let e = Dfa::from_hir(&hir, DfaLimits::default()).err().expect("must hit a limit");
    assert_eq!(e.limit_kind(), Some(crate::error::LimitKind::DfaBytes), "{e}");
    // A state limit is a limit of another kind, which a caller can tell apart.
    let tight = DfaLimits { states: 10, ..DfaLimits::default() };
    let e = Dfa::from_hir(&crate::regular::regex::parse("[a-z]{20}").unwrap(), tight).err().expect("a limit");
    assert_eq!(e.limit_kind(), Some(crate::error::LimitKind::DfaStates), "{e}");
}

/// An enum of thousands of names (time zones, languages) is listed and built as a set of
/// strings: the same language, the same distances, the same number of states as the regex
/// path's table; on the strings, their prefixes and near misses.
#[test]
fn a_large_enum_is_a_set_of_strings_with_the_regex_paths_language() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let names: Vec<String> = (0..3000)
        .map(|_| {
            let word = |rng: &mut rand_chacha::ChaCha8Rng| -> String {
                (0..rng.random_range(1..9)).map(|_| b"aeinorstuzAB_/"[rng.random_range(0..14)] as char).collect()
            };
            format!("\"{}/{}\"", word(&mut rng), word(&mut rng))
        })
        .collect();
    let re = format!("(?:{})", names.iter().map(|n| regex_syntax::escape(n)).collect::<Vec<_>>().join("|"));
    let h = crate::regular::regex::parse(&re).unwrap();
    assert!(finite_strings(&h).is_some(), "3,000 names are listed");
    let (fast, slow) =
        (Dfa::from_hir(&h, DfaLimits::default()).unwrap(), Dfa::from_hir_nfa(&h, DfaLimits::default()).unwrap());
    assert!(fast.state_count() <= slow.state_count(), "{} > {}", fast.state_count(), slow.state_count());
    let mut probes: Vec<Vec<u8>> = Vec::new();
    for n in names.iter().take(500) {
        let b = n.as_bytes();
        for k in 0..=b.len() {
            probes.push(b[..k].to_vec());
            let mut miss = b[..k].to_vec();
            miss.push(b"aZ/\"_"[k % 4]);
            probes.push(miss);
        }
        probes.push([b, b"x"].concat());
    }
    same_on(&fast, &slow, probes, "3,000 names");
}

/// A set of strings' automaton accepts exactly those strings and their prefixes lead somewhere;
/// it is minimal: one state per distinct set of continuations of a prefix (and the dead
/// state), past the state limit an error.
#[test]
fn a_set_of_strings_is_its_minimal_automaton() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for _ in 0..200 {
        let n = rng.random_range(0..12);
        let strings: Vec<Vec<u8>> =
            (0..n).map(|_| (0..rng.random_range(0..5)).map(|_| b"abc\xff"[rng.random_range(0..4)]).collect()).collect();
        let d = Dfa::from_strings(strings.clone(), DfaLimits::default()).unwrap();
        let prefixes: std::collections::HashSet<&[u8]> =
            strings.iter().flat_map(|s| (0..=s.len()).map(move |k| &s[..k])).collect();
        let continuations: std::collections::HashSet<Vec<&[u8]>> = prefixes
            .iter()
            .map(|p| {
                let mut c: Vec<&[u8]> = strings.iter().filter_map(|s| s.strip_prefix(*p)).collect();
                c.sort();
                c.dedup();
                c
            })
            .collect();
        assert_eq!(d.accept.len(), continuations.len() + 1, "{strings:?}");
        for len in 0..5 {
            for code in 0..4usize.pow(len) {
                let w: Vec<u8> = (0..len).map(|i| b"abc\xff"[code / 4usize.pow(i) % 4]).collect();
                let s = d.run(d.start(), &w);
                assert_eq!(s != StateId::DEAD, prefixes.contains(&w[..]), "{strings:?} {w:?}");
                assert_eq!(s != StateId::DEAD && d.is_accepting(s), strings.contains(&w), "{strings:?} {w:?}");
            }
        }
        let tight = DfaLimits { states: continuations.len(), ..DfaLimits::default() };
        assert!(n == 0 || Dfa::from_strings(strings.clone(), tight).is_err(), "{strings:?}");
        let enough = DfaLimits { states: continuations.len() + 1, ..DfaLimits::default() };
        assert!(Dfa::from_strings(strings, enough).is_ok());
    }
}

/// A table of a few MB (a format with a length, here an email-like pattern of at most 254
/// characters: thousands of states) is kept by the process-wide cache, so the schemas that share
/// it pay for it once: the second request is the same table, not a second build of 10-20 ms.
#[test]
fn large_common_tables_are_kept_by_the_shared_cache() {
    let parse = |re: &str| Lexeme::Regex(crate::regular::regex::parse(re).unwrap());
    let lexeme = Lexeme::and(vec![
        parse(r"[a-z0-9_.+-]{1,40}@[a-z0-9](?:-?[a-z0-9]){0,40}(?:\.[a-z0-9](?:-?[a-z0-9]){0,40}){0,2}\.[a-z]{2,6}"),
        parse(r"[\x00-\x{10FFFF}]{0,254}"),
    ]);
    let first = Dfa::shared(&lexeme, DfaLimits::default()).unwrap();
    assert!(
        first.heap_bytes() > SHARED_DFA_BYTES / 64 && first.heap_bytes() <= SHARED_DFA_BYTES / 16,
        "a table between 1/64 and 1/16 of the cache: {} bytes",
        first.heap_bytes()
    );
    let second = Dfa::shared(&lexeme, DfaLimits::default()).unwrap();
    assert!(Arc::ptr_eq(&first, &second), "built twice");
}

/// A bounded repetition anywhere in a regex whose unit is not prefix-free ("at most N words")
/// is counted through a marker: the same language and distances as the regex path, tabled and
/// on the fly, bounds reached within the words compared; where the marker's place is in doubt
/// (a unit that may go on or start again, a string that may end just after a unit, a minimum
/// inside an alternative) the shortcut refuses.
#[test]
fn repetitions_counted_through_a_marker_equal_the_regex() {
    let hir = |re: &str| crate::regular::regex::parse(re).unwrap();
    let limits = DfaLimits::default();
    for re in [
        "(?:[a-z]+ +){0,3}[a-z]+",
        r#""(?:|(?:[a-z]+ +){0,2}[a-z]+)""#,
        "(?:ab|a){2,4}c",
        "x(?:[ab]+,){0,3}y|z",
        "(?:[ab]+ ){3,}b",
    ] {
        let slow = Dfa::from_hir_nfa(&hir(re), limits).unwrap();
        for max_tabled in [usize::MAX, 0] {
            let fast =
                Dfa::counted_by_marker(&hir(re), limits, 0, max_tabled).unwrap_or_else(|| panic!("{re} is counted"));
            assert_eq!(fast.is_counter(), max_tabled == 0, "{re}");
            same_language(&fast, &slow, b"ab ,\"cxyz", 7, re);
        }
    }
    for re in [
        "(?:a|aa){0,40}b",
        "[ab]*(?:ab){0,40}[ab]*",
        "(?:a+){0,40}b",
        "(?:ab){0,40}",
        "c|x(?:ab){3,40}",
        "(?:a{2,40})*",
    ] {
        assert!(Dfa::counted_by_marker(&hir(re), limits, 0, usize::MAX).is_none(), "{re}");
    }
    // At most a hundred words of a JSON string: a few dozen places, not a hundred copies.
    let words = r#""(?:\S+\s+){0,99}\S+""#;
    let fast =
        Dfa::counted_by_marker(&hir(words), limits, super::marked::MIN_MARKED_WEIGHT, 0).expect("words are counted");
    same_language(&fast, &Dfa::from_hir_nfa(&hir(words), limits).unwrap(), b"\"a \t\xc3\xa9", 6, words);
    let from_lexeme = Dfa::from_regex_lexeme(&hir(words), limits).unwrap();
    assert!(from_lexeme.is_counter(), "the lexeme path counts it");
}

/// The common refinement of byte classes: two bytes share a class iff every DFA puts them in
/// one class (or both are dead), classes numbered by their least byte, a representative each.
#[test]
fn common_classes_refine_every_dfa() {
    let dfas = [dfa("[a-c]x|\\d"), dfa("[b-f]+"), dfa("[^a]"), dfa("y")];
    let mut dead = [false; 256];
    dead[b'z' as usize] = true;
    dead[b'0' as usize] = true;
    for n in 0..=dfas.len() {
        let (classes, reps) = super::product::common_classes(dfas[..n].iter(), &dead);
        // The tuple of each byte's classes, numbered in order of first byte.
        let key =
            |b: usize| -> Option<Vec<u8>> { (!dead[b]).then(|| dfas[..n].iter().map(|d| d.classes[b]).collect()) };
        let mut seen: Vec<Option<Vec<u8>>> = Vec::new();
        for (b, &class) in classes.iter().enumerate() {
            let k = key(b);
            let id = seen.iter().position(|s| *s == k).unwrap_or_else(|| {
                seen.push(k.clone());
                seen.len() - 1
            });
            assert_eq!(class as usize, id, "byte {b} with {n} DFAs");
        }
        assert_eq!(reps.len(), seen.len());
        for (c, &r) in reps.iter().enumerate() {
            assert_eq!(classes[r as usize] as usize, c);
            assert!((0..r).all(|b| classes[b as usize] as usize != c), "the least byte of class {c}");
        }
    }
}

#[test]
fn the_strings_of_a_small_finite_language() {
    let strings = |re: &str, max: usize| dfa(re).strings(max, 16);
    let v = |xs: &[&str]| Some(xs.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>());
    assert_eq!(strings("b|a|ab|", 8), v(&["", "a", "ab", "b"]));
    assert_eq!(strings("[ab]", 2), v(&["a", "b"]));
    assert_eq!(strings("[ab]", 1), None);
    assert_eq!(strings("x[ab]{2}", 4), v(&["xaa", "xab", "xba", "xbb"]));
    assert_eq!(strings("a+", 64), None, "infinite");
    assert_eq!(strings("b|(xa)*", 64), None, "infinite past a branch");
    assert_eq!(strings("a{17}", 64), None, "longer than allowed");
    assert_eq!(strings(r"[^\s\S]", 4), v(&[]));
    // Against brute force over short words of the alphabet.
    for re in ["(ab|a)(c|)", "a?b?c?", "(xy|x)(yz|z)"] {
        let d = dfa(re);
        let mut brute: Vec<Vec<u8>> =
            words(b"abcxyz", 4).into_iter().filter(|w| d.is_accepting(d.run(d.start(), w))).collect();
        brute.sort();
        assert_eq!(d.strings(64, 16), Some(brute), "{re}");
    }
}

#[test]
fn a_finite_tail_is_a_prefix_with_few_completions() {
    for (re, tail) in [
        ("a+", false),
        ("[ab]*", false),
        ("a", true),
        ("(xyz|c+)", true),
        ("(xy|c)+", false),
        ("c+(xyz)?", true),
        ("c*x", false),
        ("", false),
    ] {
        assert_eq!(dfa(re).has_finite_tail(), tail, "{re}");
    }
    let quoted = |l: Lexeme| Dfa::from_lexeme(&l, DfaLimits::default()).unwrap();
    let any_key = Lexeme::Regex(crate::regular::regex::parse(r#""[a-z]*""#).unwrap());
    assert!(!quoted(any_key).has_finite_tail(), "only the closing quote ends, and it reads nothing more");
}

/// `live_bytes` (a step per byte class) holds exactly the bytes `next` leads to a live state
/// on, from every state (the dead one too), for tables with few and many classes.
#[test]
fn live_bytes_are_the_bytes_next_lives_on() {
    for re in [r#""(?:[^"\\]|\\.)*""#, "a|ab|abc", r"[0-9]{1,3}(?:\.[0-9]+)?", r"(?s).{0,3}", "é|ü[a-z]", r"\w+"] {
        let d = dfa(re);
        for s in (0..d.state_count()).map(|s| StateId(s as u32)) {
            let live = d.live_bytes(s);
            for b in 0..=255u8 {
                let bit = live[b as usize / 64] >> (b % 64) & 1 == 1;
                assert_eq!(bit, d.next(s, b) != StateId::DEAD, "{re}: state {s:?} byte {b}");
            }
        }
    }
}
