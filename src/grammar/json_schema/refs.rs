//! `$ref` resolution: JSON pointers (`#/$defs/x`, `#/definitions/x`, percent- and
//! `~`-escaped), `#` (the root), `$anchor`s (`#name`), and `$id`s of subschemas (absolute or
//! relative to the root's `$id`). Each target compiles once into its own rule, so recursive
//! schemas become recursive rules (a cycle with no base case is caught by the grammar's
//! productivity check). Remote documents are never fetched: such a `$ref` is an error.

use std::collections::HashMap;

use serde_json::Value;

use super::{join, Compiler};
use crate::error::{Error, Location, Result};
use crate::grammar::Expr;

/// Records `$anchor`s and `$id`s with the pointers of their schemas.
/// Marks an anchor defined in more than one place.
const AMBIGUOUS: &str = "\u{0}ambiguous";

pub(super) fn collect_anchors(v: &Value, pointer: &str, out: &mut HashMap<String, String>, depth: usize) {
    if depth > 256 {
        return;
    }
    let Value::Object(o) = v else { return };
    let mut record = |key: String| match out.get(&key) {
        Some(p) if p != pointer => {
            out.insert(key, AMBIGUOUS.into());
        }
        _ => {
            out.insert(key, pointer.to_string());
        }
    };
    if let Some(a) = o.get("$anchor").and_then(Value::as_str) {
        // The same anchor in two resources would need base-URI tracking to tell them apart:
        // it is marked ambiguous, which `ref_target` refuses.
        record(format!("#{a}"));
    }
    for key in ["$id", "id"] {
        if let Some(id) = o.get(key).and_then(Value::as_str) {
            record(id.trim_end_matches('#').to_string());
        }
    }
    // Only keywords that hold subschemas: an `$id` inside an unknown keyword is data.
    for (k, x) in o {
        let here = join(pointer, k);
        match k.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" | "dependencies" => {
                for (name, sub) in x.as_object().into_iter().flatten() {
                    collect_anchors(sub, &join(&here, name), out, depth + 1);
                }
            }
            "allOf" | "anyOf" | "oneOf" | "prefixItems" | "items" if x.is_array() => {
                for (i, sub) in x.as_array().into_iter().flatten().enumerate() {
                    collect_anchors(sub, &join(&here, &i.to_string()), out, depth + 1);
                }
            }
            "items" | "additionalItems" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains"
            | "propertyNames" | "unevaluatedItems" | "unevaluatedProperties" | "contentSchema" => {
                collect_anchors(x, &here, out, depth + 1);
            }
            _ => {}
        }
    }
}

impl<'s> Compiler<'s> {
    /// The JSON pointer a `$ref` names.
    fn ref_target(&self, r: &str, pointer: &str) -> Result<String> {
        let err = |msg: String| Error::Schema { at: Location::Pointer(join(pointer, "$ref")), msg };
        let root_id = self.root.get("$id").and_then(Value::as_str).map(|s| s.trim_end_matches('#'));
        let (base, frag) = match r.split_once('#') {
            Some((b, f)) => (b, Some(f)),
            None => (r, None),
        };
        let base_pointer = if base.is_empty() || Some(base) == root_id {
            String::new()
        } else if let Some(p) = self.anchors.get(base).or_else(|| root_id.and_then(|id| self.anchors.get(&resolve_relative(id, base)))) {
            if p == AMBIGUOUS {
                return Err(err(format!("$ref {r:?}: that $id is declared in several places; such references are not supported")));
            }
            p.clone()
        } else {
            return Err(err(format!("cannot resolve $ref {r:?}: remote references are not fetched")));
        };
        match frag {
            None | Some("") => Ok(base_pointer),
            Some(f) if f.starts_with('/') => {
                let decoded = percent_decode(f);
                Ok(format!("{base_pointer}{decoded}"))
            }
            Some(name) => match self.anchors.get(&format!("#{name}")) {
                Some(p) if p == AMBIGUOUS => Err(err(format!("$anchor {name:?} is defined in several resources; such references are not supported"))),
                Some(p) => Ok(p.clone()),
                None => Err(err(format!("no $anchor named {name:?}"))),
            },
        }
    }

    /// The rule for a `$ref` (compiled on first use).
    pub(super) fn reference(&mut self, r: &str, pointer: &str) -> Result<Expr> {
        let target = self.ref_target(r, pointer)?;
        if let Some(&rule) = self.ref_rules.get(&target) {
            return Ok(Expr::Rule(rule));
        }
        let root: &'s Value = self.root;
        let value = root.pointer(&target).ok_or_else(|| Error::Schema {
            at: Location::Pointer(join(pointer, "$ref")),
            msg: format!("$ref {r:?} points nowhere (no {target:?} in the schema)"),
        })?;
        let rule = self.new_rule(&format!("ref:{target}"));
        self.ref_rules.insert(target.clone(), rule);
        let body = self.schema(value, &target)?;
        self.rules[rule.0 as usize].body = body;
        Ok(Expr::Rule(rule))
    }

    /// `s` with a top-level `$ref` replaced by its target (one level), for merging and for
    /// disjointness checks. Unresolvable references are left as they are.
    pub(super) fn resolve_shallow(&self, s: &Value) -> Value {
        let mut cur = s.clone();
        for _ in 0..16 {
            let Some(r) = cur.get("$ref").and_then(Value::as_str) else { return cur };
            let Ok(t) = self.ref_target(r, "") else { return cur };
            let Some(v) = self.root.pointer(&t) else { return cur };
            let mut next = v.clone();
            if let (Value::Object(n), Value::Object(c)) = (&mut next, &cur) {
                for (k, x) in c {
                    if k != "$ref" {
                        n.insert(k.clone(), x.clone());
                    }
                }
            }
            cur = next;
        }
        cur
    }
}

fn resolve_relative(base: &str, rel: &str) -> String {
    if rel.contains("://") {
        return rel.to_string();
    }
    match base.rfind('/') {
        Some(i) => format!("{}/{}", &base[..i], rel),
        None => rel.to_string(),
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() + 0 && i + 2 <= b.len() - 1 {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
