//! `$ref` resolution with real base URIs (RFC 3986), as JSON Schema 2020-12 defines it.
//!
//! Before compiling, [`prepare`] walks the root schema and every registered document
//! ([`super::JsonSchemaOptions::documents`]) once, tracking the base URI that `$id`s set
//! (`id` instead when the root declares draft-03/04), and
//! - indexes every resource (`$id`, and each document's own URI) and every `$anchor` /
//!   `$dynamicAnchor` (and draft-06/07 `$id: "#name"`) under its absolute URI;
//! - copies it with every `$ref` in its absolute form and documentation strings left out.
//!
//! So after preparation a `$ref` means the same wherever its schema is copied to (merged
//! `allOf` parts, inlined branches), and resolving it needs no context: absolute URI →
//! resource location, then the fragment (a JSON pointer or an anchor name).
//!
//! A *location* names a subschema: a JSON pointer into the root schema (`""`, `/$defs/a`), or
//! `URI#pointer` into a registered document. Each target compiles once into its own rule, so
//! recursive schemas become recursive rules (a cycle with no base case is caught by the
//! grammar's productivity check). Documents are never fetched: an unknown URI is an error.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{join, keywords, not, push_segment, Compiler};
use crate::error::{Error, Location, Result};
use crate::grammar::Expr;

/// The base URI of a root schema without an `$id` (shown to users as nothing).
pub(super) const ROOT_BASE: &str = "urn:strictly:root";

/// Marks a URI or anchor declared in more than one place.
const AMBIGUOUS: &str = "\u{0}ambiguous";

/// Deepest nesting [`prepare`] walks (the compiler's own limit is lower).
const MAX_WALK: usize = 512;

/// Resources and anchors by absolute URI (`uri` or `uri#anchor`) → location.
#[derive(Default)]
pub(super) struct Index {
    targets: HashMap<String, String>,
    /// The root declares draft-03/04: resources are identified by `id`, not `$id`.
    legacy_id: bool,
}

impl Index {
    fn record(&mut self, key: String, location: &str) {
        match self.targets.get(&key) {
            Some(p) if p != location => {
                self.targets.insert(key, AMBIGUOUS.into());
            }
            _ => {
                self.targets.insert(key, location.to_string());
            }
        }
    }
}

/// Prepares the root schema and the documents (URI → document): indexes them and returns
/// their copies with every `$ref` absolute and documentation strings left out (one pass: the
/// copy is made by the walk, so what it leaves out is never copied).
pub(super) fn prepare<'d>(
    root: &Value,
    docs: impl Iterator<Item = (&'d str, &'d Value)>,
) -> (Value, Vec<(String, Value)>, Index) {
    let schema_uri = root.get("$schema").and_then(Value::as_str).unwrap_or("");
    let mut index =
        Index { legacy_id: schema_uri.contains("draft-04") || schema_uri.contains("draft-03"), ..Index::default() };
    index.record(ROOT_BASE.to_string(), "");
    let root = walk(root, &mut String::new(), ROOT_BASE, &mut index, 0, false);
    let docs = docs
        .map(|(uri, doc)| {
            let mut location = format!("{uri}#");
            index.record(uri.to_string(), &location);
            (uri.to_string(), walk(doc, &mut location, uri, &mut index, 0, false))
        })
        .collect();
    (root, docs, index)
}

/// Keywords whose values are data, never schemas: nothing in them is touched.
const DATA_KEYWORDS: [&str; 12] = [
    "enum",
    "const",
    "default",
    "examples",
    "required",
    "type",
    "format",
    "pattern",
    "title",
    "description",
    "$comment",
    "dependentRequired",
];

/// Keywords whose string values are documentation for people (JSON Schema's, and the editors'
/// that JSON Schema Store's schemas carry).
const DOC_STRINGS: [&str; 6] =
    ["title", "description", "$comment", "markdownDescription", "deprecationMessage", "errorMessage"];

/// The prepared copy of `v` (see [`prepare`]); `location` is its location, extended while its
/// members are walked and restored after (one buffer for the whole walk, not a string per
/// subschema). `in_data`: under a keyword JSON Schema does not know. Such values are schemas
/// only when a `$ref` points into them: their `$ref`s are made absolute, but their `$id`s and
/// anchors identify nothing.
fn walk(v: &Value, location: &mut String, base: &str, index: &mut Index, depth: usize, in_data: bool) -> Value {
    if depth > MAX_WALK {
        return v.clone();
    }
    let below = depth + 1;
    let o = match v {
        Value::Object(o) => o,
        Value::Array(a) if in_data => {
            return Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| walk_under(&i.to_string(), x, location, base, index, below, true))
                    .collect(),
            );
        }
        other => return other.clone(),
    };
    let mut base = std::borrow::Cow::Borrowed(base);
    // Draft-03/04 spell it `id` (and `$id` means nothing there); later drafts `$id`.
    let id_key = if index.legacy_id { "id" } else { "$id" };
    let id = if in_data { None } else { super::keywords::get(o, id_key).and_then(Value::as_str) };
    if let Some(id) = id {
        match id.strip_prefix('#') {
            // draft-06/07: `"$id": "#name"` is an anchor.
            Some(name) if !name.is_empty() => index.record(format!("{base}#{name}"), location),
            _ => {
                base = resolve(&base, id.trim_end_matches('#')).into();
                index.record(base.to_string(), location);
            }
        }
    }
    for key in ["$anchor", "$dynamicAnchor"].into_iter().filter(|_| !in_data) {
        if let Some(a) = super::keywords::get(o, key).and_then(Value::as_str) {
            index.record(format!("{base}#{a}"), location);
        }
    }
    let mut out = Map::with_capacity(o.len());
    for (k, x) in o {
        // Documentation only (no text of it can be a schema): left out, so that merges, which
        // copy schemas, do not copy it too (JSON Schema Store schemas are mostly descriptions).
        if DOC_STRINGS.contains(&k.as_str()) && x.is_string() {
            continue;
        }
        // Only keywords that hold subschemas: an `$id` or `$ref` inside an unknown keyword is
        // data.
        let copy = match k.as_str() {
            "$ref" if x.is_string() => Value::String(resolve(&base, x.as_str().unwrap_or_default())),
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" | "dependencies"
                if x.is_object() =>
            {
                let len = location.len();
                push_segment(location, k);
                let subs = x.as_object().into_iter().flatten();
                let copy = subs
                    .map(|(name, sub)| (name.clone(), walk_under(name, sub, location, &base, index, below, in_data)))
                    .collect();
                location.truncate(len);
                Value::Object(copy)
            }
            "allOf" | "anyOf" | "oneOf" | "prefixItems" | "items" if x.is_array() => {
                let len = location.len();
                push_segment(location, k);
                let subs = x.as_array().into_iter().flatten().enumerate();
                let copy = subs
                    .map(|(i, sub)| walk_under(&i.to_string(), sub, location, &base, index, below, in_data))
                    .collect();
                location.truncate(len);
                Value::Array(copy)
            }
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" | "dependencies" => {
                x.clone()
            }
            "items"
            | "additionalItems"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties"
            | "contentSchema" => walk_under(k, x, location, &base, index, below, in_data),
            k if DATA_KEYWORDS.contains(&k) => x.clone(),
            _ => walk_under(k, x, location, &base, index, below, true),
        };
        out.insert(k.clone(), copy);
    }
    Value::Object(out)
}

/// [`walk`] of `x` at `location/key` (`location` restored after).
fn walk_under(
    key: &str,
    x: &Value,
    location: &mut String,
    base: &str,
    index: &mut Index,
    depth: usize,
    in_data: bool,
) -> Value {
    let len = location.len();
    push_segment(location, key);
    let copy = walk(x, location, base, index, depth, in_data);
    location.truncate(len);
    copy
}

/// `r` as users wrote it (the root's synthetic base left out).
fn shown(r: &str) -> &str {
    r.strip_prefix(ROOT_BASE).unwrap_or(r)
}

impl<'s> Compiler<'s> {
    /// The location a (prepared, absolute) `$ref` names.
    fn ref_target(&self, r: &str, pointer: &str) -> Result<String> {
        let err = |msg: String| Error::Schema { at: Location::Pointer(join(pointer, "$ref")), msg };
        let (uri, frag) = r.split_once('#').unwrap_or((r, ""));
        let resource = match self.index.targets.get(uri) {
            Some(p) if p == AMBIGUOUS => {
                return Err(err(format!("$ref {:?}: that URI is declared by several schemas", shown(r))))
            }
            Some(p) => p,
            None => {
                return Err(err(format!(
                    "cannot resolve $ref {:?}: no schema has that URI (remote documents are not fetched; \
                     register them with JsonSchemaOptions::documents)",
                    shown(r)
                )))
            }
        };
        if frag.is_empty() {
            Ok(resource.clone())
        } else if frag.starts_with('/') {
            Ok(format!("{resource}{}", percent_decode(frag)))
        } else {
            match self.index.targets.get(&format!("{uri}#{frag}")) {
                Some(p) if p == AMBIGUOUS => {
                    Err(err(format!("$anchor {frag:?} is defined several times in one resource")))
                }
                Some(p) => Ok(p.clone()),
                None => Err(err(format!("no $anchor named {frag:?} in {:?}", shown(uri)))),
            }
        }
    }

    /// The subschema a (prepared, absolute) `$ref` names, borrowed; `None` where it does not
    /// resolve.
    pub(super) fn ref_value(&self, r: &str) -> Option<&'s Value> {
        self.value_at(&self.ref_target(r, "").ok()?)
    }

    /// The subschema at a location (root pointer or `URI#pointer`).
    fn value_at(&self, location: &str) -> Option<&'s Value> {
        if location.is_empty() || location.starts_with('/') {
            return self.root.pointer(location);
        }
        let (uri, pointer) = location.split_once('#')?;
        let (_, doc) = self.docs.iter().find(|(u, _)| u == uri)?;
        doc.pointer(pointer)
    }

    /// The rule for a `$ref` (compiled on first use).
    pub(super) fn reference(&mut self, r: &str, pointer: &str) -> Result<Expr> {
        let target = self.ref_target(r, pointer)?;
        // (Under `Whitespace::Pretty` a target's rule differs by nesting level.)
        let key = format!("{target}#{}", self.indent_key());
        if let Some(&rule) = self.ref_rules.get(&key) {
            if self.is_nothing(&Expr::Rule(rule)) {
                self.nothing_because(&join(pointer, "$ref"), format!("its target, {target}, accepts no value"));
            }
            return Ok(Expr::Rule(rule));
        }
        let value = self.value_at(&target).ok_or_else(|| Error::Schema {
            at: Location::Pointer(join(pointer, "$ref")),
            msg: format!("$ref {:?} points nowhere (no {target:?} in the schema)", shown(r)),
        })?;
        let rule = self.new_rule(&format!("ref:{target}"));
        self.ref_rules.insert(key, rule);
        let body = self.schema(value, &target)?;
        self.set_body(rule, body);
        Ok(Expr::Rule(rule))
    }

    /// `obj` (with `not: {"$ref": r, ...}`): alone, the negation of the target is a rule of its
    /// own, built once per target (so `not` of a recursive schema recurses through the rule
    /// instead of unfolding without end); with other keywords beside it, the target is inlined
    /// into the `not` and rewritten with them.
    pub(super) fn not_ref(&mut self, obj: &Map<String, Value>, r: &str, pointer: &str) -> Result<Expr> {
        let not = &obj["not"];
        let target = self.ref_target(r, &join(pointer, "not"))?;
        let alone =
            |o: &Map<String, Value>, keep: &str| o.keys().all(|k| k == keep || !keywords::is_validation_keyword(k));
        let inlined = self.resolve_shallow(not);
        if inlined.get("$ref").is_some() {
            // Siblings beside the `$ref` that clash with its target's (see `resolve_shallow`).
            let mut rest = obj.clone();
            rest.remove("not");
            rest.insert("not".into(), serde_json::json!({"allOf": [{"$ref": r}, not_without_ref(not)]}));
            return match not::rewrite_not(&rest) {
                Some(rw) => self.schema(&Value::Object(rw), pointer),
                None => Err(self.bad(&join(pointer, "not"), "`not` of this `$ref` cannot be rewritten")),
            };
        }
        if alone(obj, "not") && not.as_object().is_some_and(|o| alone(o, "$ref")) {
            let key = format!("not:{target}#{}", self.indent_key());
            if let Some(&rule) = self.ref_rules.get(&key) {
                return Ok(Expr::Rule(rule));
            }
            let rule = self.new_rule(&key);
            self.ref_rules.insert(key, rule);
            let body = self.schema(&keywords::keyword("not", inlined), pointer)?;
            self.set_body(rule, body);
            return Ok(Expr::Rule(rule));
        }
        let mut rest = obj.clone();
        rest.insert("not".into(), inlined);
        self.schema(&Value::Object(rest), pointer)
    }

    /// `s` with a top-level `$ref` replaced by its target (one level), for merging and for
    /// disjointness checks. Unresolvable references are left as they are. (Prepared refs are
    /// absolute, so the inlined target's own refs keep their meaning.)
    pub(super) fn resolve_shallow(&self, s: &Value) -> Value {
        self.resolve_shallow_owned(s.clone())
    }

    /// [`resolve_shallow`](Compiler::resolve_shallow) of a value the caller owns (no copy when
    /// there is no `$ref` to follow).
    pub(super) fn resolve_shallow_owned(&self, s: Value) -> Value {
        let mut cur = s;
        for _ in 0..16 {
            let Some(r) = cur.get("$ref").and_then(Value::as_str) else { return cur };
            let Ok(t) = self.ref_target(r, "") else { return cur };
            let Some(v) = self.value_at(&t) else { return cur };
            let mut next = v.clone();
            if let (Value::Object(n), Value::Object(c)) = (&mut next, &cur) {
                // A sibling that the target also has would overwrite it: both must hold, so
                // stop here (the caller merges `$ref` and siblings as an `allOf`).
                if c.iter().any(|(k, x)| k != "$ref" && n.get(k).is_some_and(|y| y != x)) {
                    return cur;
                }
                for (k, x) in c {
                    if k != "$ref" {
                        n.insert(k.clone(), x.clone());
                    }
                }
            } else if cur.as_object().is_some_and(|c| c.len() > 1) {
                // A boolean target with siblings: not one object.
                return cur;
            }
            cur = next;
        }
        cur
    }
}

/// RFC 3986 §5.2: the reference `r` resolved against the absolute URI `base`.
pub(super) fn resolve(base: &str, r: &str) -> String {
    let rp = UriParts::parse(r);
    if rp.scheme.is_some() {
        return rp.compose(&remove_dot_segments(rp.path));
    }
    let bp = UriParts::parse(base);
    let mut out = UriParts { scheme: bp.scheme, ..UriParts::default() };
    let path;
    if rp.authority.is_some() {
        out.authority = rp.authority;
        path = remove_dot_segments(rp.path);
        out.query = rp.query;
    } else {
        out.authority = bp.authority;
        if rp.path.is_empty() {
            path = bp.path.to_string();
            out.query = rp.query.or(bp.query);
        } else {
            let merged = if rp.path.starts_with('/') {
                rp.path.to_string()
            } else if bp.authority.is_some() && bp.path.is_empty() {
                format!("/{}", rp.path)
            } else {
                match bp.path.rfind('/') {
                    Some(i) => format!("{}{}", &bp.path[..=i], rp.path),
                    None => rp.path.to_string(),
                }
            };
            path = remove_dot_segments(&merged);
            out.query = rp.query;
        }
    }
    out.fragment = rp.fragment;
    out.compose(&path)
}

#[derive(Default)]
struct UriParts<'a> {
    scheme: Option<&'a str>,
    authority: Option<&'a str>,
    path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

impl<'a> UriParts<'a> {
    fn parse(s: &'a str) -> UriParts<'a> {
        let mut p = UriParts::default();
        let mut rest = s;
        if let Some((r, f)) = rest.split_once('#') {
            rest = r;
            p.fragment = Some(f);
        }
        if let Some((r, q)) = rest.split_once('?') {
            rest = r;
            p.query = Some(q);
        }
        if let Some(i) = rest.find(':') {
            let scheme = &rest[..i];
            let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if valid {
                p.scheme = Some(scheme);
                rest = &rest[i + 1..];
            }
        }
        if let Some(after) = rest.strip_prefix("//") {
            let end = after.find('/').unwrap_or(after.len());
            p.authority = Some(&after[..end]);
            rest = &after[end..];
        }
        p.path = rest;
        p
    }

    fn compose(&self, path: &str) -> String {
        let mut s = String::new();
        if let Some(x) = self.scheme {
            s += x;
            s.push(':');
        }
        if let Some(x) = self.authority {
            s += "//";
            s += x;
        }
        s += path;
        if let Some(x) = self.query {
            s.push('?');
            s += x;
        }
        if let Some(x) = self.fragment {
            s.push('#');
            s += x;
        }
        s
    }
}

/// RFC 3986 §5.2.4.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let absolute = path.starts_with('/');
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len() - 1;
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." | ".." if i == last => {
                if *seg == ".." && out.len() > usize::from(absolute) {
                    out.pop();
                }
                out.push("");
            }
            "." => {}
            ".." => {
                if out.len() > usize::from(absolute) {
                    out.pop();
                }
            }
            s => out.push(s),
        }
    }
    out.join("/")
}

fn percent_decode(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('%') {
        return s.into();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned().into()
}

/// A schema object without its `$ref`.
fn not_without_ref(s: &Value) -> Value {
    let mut s = s.clone();
    if let Value::Object(o) = &mut s {
        o.remove("$ref");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::resolve;

    /// RFC 3986 §5.4's examples (normal and abnormal).
    #[test]
    fn resolves_like_rfc_3986() {
        let base = "http://a/b/c/d;p?q";
        for (r, want) in [
            ("g:h", "g:h"),
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("#s", "http://a/b/c/d;p?q#s"),
            ("g#s", "http://a/b/c/g#s"),
            (";x", "http://a/b/c/;x"),
            ("", "http://a/b/c/d;p?q"),
            (".", "http://a/b/c/"),
            ("./", "http://a/b/c/"),
            ("..", "http://a/b/"),
            ("../", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../g", "http://a/g"),
            ("../../../g", "http://a/g"),
            ("/./g", "http://a/g"),
            ("/../g", "http://a/g"),
            ("g.", "http://a/b/c/g."),
            ("..g", "http://a/b/c/..g"),
            ("./../g", "http://a/b/g"),
            ("g/./h", "http://a/b/c/g/h"),
            ("g/../h", "http://a/b/c/h"),
        ] {
            assert_eq!(resolve(base, r), want, "{r}");
        }
        assert_eq!(resolve("urn:uuid:deadbeef-1234", "#/$defs/x"), "urn:uuid:deadbeef-1234#/$defs/x");
        assert_eq!(resolve("urn:strictly:root", "#foo"), "urn:strictly:root#foo");
        assert_eq!(
            resolve("http://localhost:1234/draft2020-12/", "baseUriChange/"),
            "http://localhost:1234/draft2020-12/baseUriChange/"
        );
    }
}
