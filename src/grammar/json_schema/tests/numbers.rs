//! Numbers: bounds (integral and fractional, checked against `f64`), `multipleOf`, non-integers.

use super::*;

#[test]
fn numbers_and_ranges() {
    let s = json!({"type": "integer", "minimum": -15, "maximum": 120});
    for ok in ["-15", "-9", "0", "7", "99", "120"] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in ["-16", "121", "1000", "-100", "01"] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    let s = json!({"type": "number", "exclusiveMinimum": 0, "maximum": 10});
    for ok in ["0.5", "10", "10.0", "9.99", "3"] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in ["0", "0.0", "-1", "10.01", "11", "-0.5"] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    let s = json!({"type": "number", "multipleOf": 0.01});
    assert!(accepts(&s, "12.34") && !accepts(&s, "12.345"));
    let s = json!({"type": "integer", "multipleOf": 4});
    assert!(accepts(&s, "12") && accepts(&s, "1000") && !accepts(&s, "10") && !accepts(&s, "1002"));
}

#[test]
fn multiples_in_a_small_range_are_listed_for_any_divisor() {
    // Divisors with and without a divisibility automaton (11, 13 have none); ranges with
    // several multiples, one, none; negative bounds; exclusive ones.
    let schemas = [
        json!({"type": "integer", "multipleOf": 7, "minimum": 10000, "exclusiveMaximum": 10011}),
        json!({"type": "integer", "multipleOf": 11, "minimum": -50, "maximum": 50}),
        json!({"type": "integer", "multipleOf": 13, "exclusiveMinimum": -14, "maximum": 13}),
        json!({"type": "integer", "multipleOf": 1000, "minimum": 1, "maximum": 5000}),
    ];
    let instances: Vec<String> =
        (-60..=60).chain(9990..=10020).chain([1000, 4000, 5000, 6000]).map(|n| n.to_string()).collect();
    let instances: Vec<&str> = instances.iter().map(String::as_str).collect();
    agrees_with_validator(&schemas, &instances);
    // No multiple in range: nothing is valid.
    let none = json!({"type": "integer", "multipleOf": 7, "minimum": 1, "maximum": 6});
    assert!(compiled(&none, &JsonSchemaOptions::exact()).map_or(true, |c| c.is_empty_language()));
}

#[test]
fn fractional_bounds_against_f64() {
    let mut xs = Vec::new();
    for i in -12i32..=12 {
        for f in ["", ".0", ".5", ".05", ".25", ".2500", ".249", ".251", ".75", ".9", ".001", ".999", ".5001", ".0001"]
        {
            xs.push(format!("{i}{f}"));
        }
        if i == 0 {
            for f in [".5", ".25", ".05", ".001", ".75"] {
                xs.push(format!("-0{f}"));
            }
        }
    }
    for b in [0.5, -0.5, 2.25, -2.25, 0.05, -0.001, 1.75, -10.5, 0.999] {
        for kw in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            let s = json!({"type": "number", kw: b});
            let c = compiled(&s, &JsonSchemaOptions::default()).unwrap();
            let accepts = |_: &Value, text: &str| {
                let mut m = c.matcher();
                m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
            };
            for x in &xs {
                let v: f64 = x.parse().unwrap();
                let want = match kw {
                    "minimum" => v >= b,
                    "maximum" => v <= b,
                    "exclusiveMinimum" => v > b,
                    _ => v < b,
                };
                assert_eq!(accepts(&Value::Null, x), want, "{kw} {b}: {x}");
            }
        }
    }
    // Both sides, with a decimal multipleOf.
    let s = json!({"type": "number", "minimum": 0.5, "exclusiveMaximum": 2, "multipleOf": 0.01});
    for (t, ok) in [("0.5", true), ("0.49", false), ("1.99", true), ("2", false), ("1.995", false), ("1", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn non_integers_stay_non_integers_as_f64() {
    // A number that is not an integer keeps a fraction an `f64` can hold: with 17 significant
    // digits `8886914205066836.9` parses as 8886914205066837.0, which validators call an integer.
    let s = json!({"not": {"type": "integer"}, "type": "number"});
    for ok in ["1.5", "-0.25", "0.000123", "123456789012.125", "12345678901234.5", "0.100", "99999999999999.9"] {
        assert!(accepts(&s, ok), "{ok}");
        assert!(serde_json::from_str::<f64>(ok).unwrap().fract() != 0.0, "{ok} is whole as f64");
    }
    for bad in
        ["8886914205066836.9", "123456789012345.5", "1.0000000000000001", "0.99999999999999999", "2", "2.0", "1e3"]
    {
        assert!(!accepts(&s, bad), "{bad}");
    }
}

#[test]
fn bounds_past_f64s_whole_numbers_compile_exactly() {
    // JavaScript's safe integers (Zod's `z.int()`), `int64` and `uint64` bounds, whole bounds
    // written as floats: all were refused ("bounds beyond ±9e15"). Checked against the exact
    // decimal and against `f64` comparison, which must agree with the grammar's answer.
    let cases = [
        (
            json!({"type": "integer", "minimum": -9007199254740991i64, "maximum": 9007199254740991i64}),
            vec![
                ("9007199254740991", true),
                ("-9007199254740991", true),
                ("9007199254740992", false),
                ("-9007199254740992", false),
                ("0", true),
            ],
        ),
        (
            json!({"type": "integer", "minimum": 0, "maximum": 18446744073709551615u64}),
            vec![("18446744073709551615", true), ("18446744073709551616", false), ("99999999999999999999", false)],
        ),
        (
            json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX}),
            vec![("9223372036854775807", true), ("-9223372036854775808", true), ("9223372036854775808", false)],
        ),
        // A bound written as a float past 2^53 may have been any number that reads as its `f64`
        // (1e20 steps by 16,384 there): half a step in.
        (
            json!({"type": "number", "minimum": 0, "maximum": 1e20}),
            vec![
                ("99999999999999991808", true),
                ("99999999999999991807.5", true),
                ("99999999999999991809", false),
                ("100000000000000000001", false),
            ],
        ),
        (
            json!({"type": "integer", "maximum": 972783798187987123879878123.18878137f64}),
            vec![("972783798187987000000000000", true), ("972783798187987123879878124", false)],
        ),
        // Past ±1e38 (`float`'s maximum): numbers within ±1e38.
        (
            json!({"type": "number", "minimum": -3.4028234663852886e38, "maximum": 3.4028234663852886e38}),
            vec![
                ("0.5", true),
                ("-1234567.25", true),
                ("99999999999999999999999999999999999999", true),
                ("1000000000000000000000000000000000000000", false),
            ],
        ),
        // Past what the grammar writes: no bound at all.
        (json!({"type": "number", "maximum": 1.7976931348623157e308}), vec![("1e99", true), ("-5.5", true)]),
        // Exclusive past 2^53: 2^53 + 1 reads as 2^53, so the last whole number kept is 2^53 - 1.
        (
            json!({"type": "integer", "exclusiveMaximum": 9007199254740993u64}),
            vec![("9007199254740991", true), ("9007199254740992", false)],
        ),
        (
            json!({"type": "integer", "exclusiveMinimum": 1e16}),
            vec![("10000000000000001", false), ("10000000000000002", true)],
        ),
    ];
    for (s, texts) in cases {
        for (t, want) in texts {
            assert_eq!(accepts(&s, t), want, "{s}: {t}");
            if want {
                let v: Value = serde_json::from_str(t).unwrap();
                let judge = jsonschema::validator_for(&s).unwrap();
                assert!(judge.is_valid(&v), "{s}: {t} is not valid");
            }
        }
    }
    // Fractional bounds on integers round inward.
    let s = json!({"type": "integer", "minimum": 2.5, "exclusiveMaximum": 7.5});
    for (t, want) in [("2", false), ("3", true), ("7", true), ("8", false)] {
        assert_eq!(accepts(&s, t), want, "{s}: {t}");
    }
    // The sensible language keeps to `i64` past bounds beyond it.
    let s = json!({"type": "integer", "minimum": 0, "maximum": 1e30});
    assert!(accepts_with(&s, &JsonSchemaOptions::default(), "9223372036854775807"));
    assert!(!accepts_with(&s, &JsonSchemaOptions::default(), "9223372036854775808"));
    assert!(accepts(&s, "9223372036854775808"));
}

#[test]
fn near_an_exclusive_bound_numbers_read_as_f64_stay_within_it() {
    // `0.99999999999999999` is below 1, but reads as 1.0 as an `f64` (as most validators read
    // it): near an exclusive bound a fraction has at most 15 significant digits.
    let s = json!({"type": "number", "exclusiveMaximum": 1});
    for ok in ["0.5", "0.999999999999999", "-123456.789", "0", "-100"] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in ["0.99999999999999999", "0.9999999999999999999999", "1", "1.0"] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // Above 0: a fraction so small it reads as 0.0.
    let s = json!({"type": "number", "exclusiveMinimum": 0});
    let tiny = format!("0.{}1", "0".repeat(400));
    assert!(!accepts(&s, &tiny) && accepts(&s, "0.001") && accepts(&s, "12345678901234567890"));
    // An excluded value likewise: `5.00000000000000000001` reads as 5.
    let s = json!({"type": "number", "not": {"const": 5}});
    assert!(!accepts(&s, "5.00000000000000000001") && !accepts(&s, "5.0") && accepts(&s, "5.25"));
    // Every text accepted under an exclusive bound is within it as an `f64`.
    for (kw, b) in [("exclusiveMaximum", 1.0), ("exclusiveMinimum", 0.1), ("exclusiveMaximum", -2.5)] {
        let s = json!({"type": "number", kw: b});
        let c = compiled(&s, &JsonSchemaOptions::exact()).unwrap();
        for digits in 1..=22 {
            for text in [
                format!("0.{}", "9".repeat(digits)),
                format!("0.1{}1", "0".repeat(digits)),
                format!("-2.{}9", "4".repeat(digits)),
            ] {
                let mut m = c.matcher();
                if m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting() {
                    let v: f64 = text.parse().unwrap();
                    let within = if kw == "exclusiveMaximum" { v < b } else { v > b };
                    assert!(within, "{kw} {b}: {text} reads as {v}");
                }
            }
        }
    }
}
