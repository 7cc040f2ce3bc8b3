//! Conditionals: `if`/`then`/`else`, `dependentRequired`, `dependentSchemas` and draft-07
//! `dependencies`, rewritten into `allOf` parts of `anyOf`s ([`rewrite_conditionals`]).
//!
//! Each dependency on key `k` becomes "`k` absent, or `k` present and the dependency holds";
//! `if I then T else E` becomes `(I ∧ T) ∨ (not I ∧ E)`, with `not I` rewritten at once where
//! it can be ([`super::not::with_not`]), else left as a `not` for the compiler, which rewrites
//! it level by level or reports it. Exact. The rewritten schema has none of these keywords
//! left, so compiling it again does not come back here.

use serde_json::{Map, Value};

use super::keywords::add_to_all_of;
use super::not::with_not;
use super::{join, Compiler};
use crate::error::Result;

/// Rewrites the conditional keywords into `allOf` parts, exactly:
/// - `dependentRequired {k: [a, b]}` (and `dependencies` with an array): `k` absent, or `k`,
///   `a` and `b` all present;
/// - `dependentSchemas {k: S}` (and `dependencies` with a schema): `k` absent, or present and
///   `S` holds;
/// - `if I then T else E`: `(I ∧ T) ∨ (not I ∧ E)`, where `not I` must rewrite exactly
///   ([`super::not::rewrite_not`]); otherwise `if` is reported.
///
/// `None` when the schema has none of them.
pub(super) fn rewrite_conditionals(
    c: &mut Compiler,
    obj: &Map<String, Value>,
    pointer: &str,
) -> Result<Option<Map<String, Value>>> {
    const KEYWORDS: [&str; 6] = ["dependentRequired", "dependentSchemas", "dependencies", "if", "then", "else"];
    if !super::keywords::has_any(obj, &KEYWORDS) {
        return Ok(None);
    }
    let mut out = obj.clone();
    let mut parts: Vec<Value> = Vec::new();
    for kw in ["dependentRequired", "dependentSchemas", "dependencies"] {
        let Some(v) = out.remove(kw) else { continue };
        let deps = v.as_object().ok_or_else(|| c.bad(&join(pointer, kw), format!("`{kw}` must be an object")))?;
        for (k, dep) in deps {
            let absent = serde_json::json!({"properties": {k: false}});
            let present = match dep {
                Value::Array(names) => {
                    // The dependencies first: undeclared required keys are generated in this
                    // order, and instances tend to name what `k` depends on before `k`.
                    let mut req: Vec<Value> = names.to_vec();
                    req.push(Value::String(k.clone()));
                    serde_json::json!({ "required": req })
                }
                schema => serde_json::json!({"allOf": [{"required": [k]}, schema]}),
            };
            parts.push(serde_json::json!({"anyOf": [absent, present]}));
        }
    }
    let (then, els) = (out.remove("then"), out.remove("else"));
    if let Some(cond) = out.remove("if") {
        let then = then.unwrap_or(Value::Bool(true));
        let els = els.unwrap_or(Value::Bool(true));
        match with_not(&Value::Bool(true), &c.resolve_shallow(&cond)) {
            Some((not_cond, _)) => {
                parts.push(serde_json::json!({"anyOf": [{"allOf": [cond, then]}, {"allOf": [not_cond, els]}]}))
            }
            None => c.unenforced(pointer, "if", "the negation of this `if` schema cannot be written exactly")?,
        }
    }
    add_to_all_of(&mut out, parts);
    Ok(Some(out))
}
