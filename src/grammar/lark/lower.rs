//! The Lark syntax tree → the grammar IR.
//!
//! Terminals (UPPERCASE) become regex leaves: a terminal's body is inlined into one HIR
//! (terminals may use terminals, never rules, never themselves). Rules (lowercase) become IR
//! rules, lowered from the start rule on (unreachable ones are left out with a [`Warning`]);
//! template rules (`name{a, b}: ...`) get one IR rule per distinct use.
//!
//! Every place a rule uses a terminal (a named one, a literal, a regex, a `%json` value) is a
//! *token*; `%ignore` puts the ignored terminals (zero or more) after every token and before
//! the first, which is Lark's language: ignored text may come before, between and after the
//! tokens, never inside one. With the ignore regex concatenated to the token's own, most
//! tokens stay one regex leaf.
//!
//! A token whose regex has a lazy quantifier (`*?`, `+?`, `??`), or that llguidance marks
//! `lazy` or gives a `suffix`, matches what Lark's lexer reads: the shortest match, so its
//! strings are those with no proper prefix in the terminal (`L ∩ ¬(L·Σ⁺)`, a [`Lexeme`]).
//! Greediness never changes the language of a leaf, so every HIR handed on is made greedy.
//!
//! Invariants: every IR [`Expr::Rule`] names a rule in the output; nesting (definitions,
//! terminals inlined into terminals, template arguments) deeper than the depth limit is an
//! [`Error::Limit`], so no recursion here can overflow the stack.

use std::collections::HashMap;
use std::sync::Arc;

use regex_syntax::hir::Hir;

use super::common;
use super::hir::{greedy, has_lazy, hir_expr, line_comment, matches_newline, repeat, shortest, to_lexeme};
use super::parser::{self, is_terminal_name, AttrValue, Def, Item, Node};
use super::{LarkOptions, Source};
use crate::error::{Error, LimitKind, Location, Result};
use crate::grammar::ebnf::Warning;
use crate::grammar::ir::{Expr, Grammar, Rule, RuleId, Span};
use crate::grammar::json_schema;
use crate::regular::Lexeme;

/// Most distinct instantiations of template rules in one grammar (a template that calls
/// itself with ever larger arguments would otherwise never end).
pub const MAX_TEMPLATE_INSTANCES: usize = 1_000;
/// Longest text of one template use's arguments (a template that doubles its argument each
/// time would otherwise exhaust memory before the instance limit).
pub const MAX_TEMPLATE_KEY: usize = 10_000;

/// A terminal's language: a regex, or (llguidance's `&`, `~`, lazy tokens) a [`Lexeme`].
#[derive(Debug, Clone)]
pub(super) enum TermLang {
    Hir(Hir),
    Lexeme(Lexeme),
}

struct Entry {
    def: Def,
    /// For an imported terminal: its language, lowered in its library.
    imported: Option<TermLang>,
}

pub(super) struct Lowerer<'a> {
    src: &'a Source,
    opts: &'a LarkOptions,
    defs: HashMap<String, Entry>,
    /// Definition names in the order of the text.
    order: Vec<String>,
    declared: HashMap<String, usize>,
    ignores: Vec<(Node, usize)>,
    /// `%llguidance {...}` seen: llguidance's defaults (no ignored text before the first token).
    llguidance: bool,
    initial_skip: Option<bool>,
    skip_once: bool,
    /// Terminals lowered so far (before `lazy`/`suffix`), with their nesting depth.
    terms: HashMap<String, (TermLang, usize)>,
    /// Terminals as tokens (attributes and laziness applied).
    tokens: HashMap<String, TermLang>,
    visiting: Vec<String>,
    rules: Vec<Rule>,
    rule_ids: HashMap<String, RuleId>,
    /// Rules allocated but not lowered yet: (id, body, depth it starts at).
    queue: Vec<(RuleId, Node, usize)>,
    instances: usize,
    /// What `%ignore` adds after each token: a regex when it can be concatenated.
    ignore: Option<Ignore>,
    /// An ignored line comment allowed at the very end of the output (see `build_ignore`).
    final_comment: Option<Hir>,
    warnings: Vec<Warning>,
}

#[derive(Clone)]
enum Ignore {
    Regex(Hir),
    Expr(Expr),
}

/// Lowers a parsed grammar (the whole pipeline after parsing).
pub(super) fn lower(src: &Source, items: Vec<Item>, opts: &LarkOptions) -> Result<(Grammar, Vec<Warning>)> {
    let mut l = Lowerer::new(src, opts);
    l.collect(items)?;
    l.check_references()?;
    l.check_terminals()?;
    l.build_ignore()?;
    l.build_rules()
}

impl<'a> Lowerer<'a> {
    fn new(src: &'a Source, opts: &'a LarkOptions) -> Lowerer<'a> {
        Lowerer {
            src,
            opts,
            defs: HashMap::new(),
            order: Vec::new(),
            declared: HashMap::new(),
            ignores: Vec::new(),
            llguidance: false,
            initial_skip: None,
            skip_once: false,
            terms: HashMap::new(),
            tokens: HashMap::new(),
            visiting: Vec::new(),
            rules: Vec::new(),
            rule_ids: HashMap::new(),
            queue: Vec::new(),
            instances: 0,
            ignore: None,
            final_comment: None,
            warnings: Vec::new(),
        }
    }

    fn err(&self, at: usize, msg: impl Into<String>) -> Error {
        self.src.err(at, msg)
    }

    fn pos(&self, at: usize) -> String {
        let (l, c) = self.src.line_col(at);
        format!("{l}:{c}")
    }

    fn depth_limit(&self, depth: usize, at: usize) -> Result<()> {
        if depth > self.opts.limits.max_depth {
            return Err(Error::Limit {
                kind: LimitKind::GrammarNesting,
                what: format!("nesting depth (terminals inside terminals, template arguments) at {}", self.pos(at)),
                limit: self.opts.limits.max_depth,
                hint: Some("raise ebnf::Limits::max_depth (LarkOptions::limits) or flatten the grammar".into()),
            });
        }
        Ok(())
    }

    // ---- definitions and directives -------------------------------------------------------

    fn collect(&mut self, items: Vec<Item>) -> Result<()> {
        for item in items {
            match item {
                Item::Def(d) => self.define(d, None)?,
                Item::Override(d) => {
                    let Some(e) = self.defs.get_mut(&d.name) else {
                        return Err(self.err(d.at, format!("%override of `{}`, which is not defined", d.name)));
                    };
                    e.imported = None;
                    e.def = d;
                }
                Item::Extend(d) => {
                    let at = d.at;
                    let Some(e) = self.defs.get_mut(&d.name) else {
                        return Err(self.err(at, format!("%extend of `{}`, which is not defined", d.name)));
                    };
                    if e.imported.is_some() {
                        return Err(self
                            .src
                            .err(at, format!("%extend of the imported `{}`: define it instead", d.name)));
                    }
                    let old = std::mem::replace(&mut e.def.body, Node::Empty);
                    e.def.body = Node::Alt(vec![old, d.body]);
                }
                Item::Ignore { body, at } => self.ignores.push((body, at)),
                Item::Import { module, module_at, names } => {
                    let Some(text) = common::library(&module) else {
                        return Err(self.err(
                            module_at,
                            format!(
                                "unknown import `{module}`: only Lark's `common` and `unicode` libraries are built in \
                                 (imports of other grammars are not supported)"
                            ),
                        ));
                    };
                    for (name, alias, at) in names {
                        let lang = import(&text, &module, &name).map_err(|e| match e {
                            Error::Grammar { msg, .. } => self.err(at, msg),
                            e => e,
                        })?;
                        if !is_terminal_name(&alias) {
                            return Err(self.err(
                                at,
                                format!("`{name}` is a terminal: import it under an UPPERCASE name, not `{alias}`"),
                            ));
                        }
                        let def = Def { name: alias, at, params: vec![], attrs: vec![], body: Node::Empty };
                        self.define(def, Some(lang))?;
                    }
                }
                Item::Declare { names } => {
                    for (n, at) in names {
                        self.declared.entry(n).or_insert(at);
                    }
                }
                Item::Llguidance { value, at } => self.llguidance_options(&value, at)?,
            }
        }
        Ok(())
    }

    fn define(&mut self, def: Def, imported: Option<TermLang>) -> Result<()> {
        if let Some(prev) = self.defs.get(&def.name) {
            let how = if prev.imported.is_some() { "imported" } else { "defined" };
            return Err(self.err(
                def.at,
                format!("`{}` is already {how} at {} (use %override to replace it)", def.name, self.pos(prev.def.at)),
            ));
        }
        if !def.params.is_empty() && def.is_terminal() {
            return Err(self.err(def.at, format!("terminal `{}` has template parameters: only rules can", def.name)));
        }
        self.order.push(def.name.clone());
        self.defs.insert(def.name.clone(), Entry { def, imported });
        Ok(())
    }

    /// `%llguidance {...}`: options that keep the language are accepted, others refused.
    fn llguidance_options(&mut self, value: &serde_json::Value, at: usize) -> Result<()> {
        self.llguidance = true;
        let Some(obj) = value.as_object() else {
            return Err(self.err(at, "%llguidance needs a JSON object"));
        };
        for (k, v) in obj {
            match (k.as_str(), v) {
                ("no_forcing", serde_json::Value::Bool(_)) => {}
                ("allow_initial_skip", serde_json::Value::Bool(b)) => self.initial_skip = Some(*b),
                ("allow_invalid_utf8", serde_json::Value::Bool(false)) => {}
                ("allow_invalid_utf8", serde_json::Value::Bool(true)) => {
                    return Err(
                        self.err(at, "%llguidance option `allow_invalid_utf8` is not supported: outputs are UTF-8")
                    )
                }
                ("skip_repetition", serde_json::Value::String(s)) if s == "once" => self.skip_once = true,
                ("skip_repetition", serde_json::Value::String(s)) if s == "many" => self.skip_once = false,
                _ => return Err(self.err(at, format!("unsupported %llguidance option `{k}`: {v}"))),
            }
        }
        Ok(())
    }

    // ---- checks ---------------------------------------------------------------------------

    /// Declared names used, undefined names, template arity: the earliest problem first.
    fn check_references(&self) -> Result<()> {
        let mut problems: Vec<(usize, String)> = Vec::new();
        let mut used_declared: Vec<(usize, String)> = Vec::new();
        let mut visit = |node: &Node, params: &[String], problems: &mut Vec<(usize, String)>| {
            walk_invalid(node, &mut |at, msg| problems.push((at, msg.to_string())));
            walk_names(node, &mut |name, args, at| {
                if params.iter().any(|p| p == name) {
                    return;
                }
                match self.defs.get(name) {
                    None if self.declared.contains_key(name) => used_declared.push((at, name.to_string())),
                    None => {
                        let what = if is_terminal_name(name) { "terminal" } else { "rule" };
                        problems.push((at, format!("undefined {what} `{name}`")));
                    }
                    Some(e) if e.def.params.len() != args => {
                        let msg = if e.def.params.is_empty() {
                            format!("`{name}` is not a template: it takes no arguments `{{...}}`")
                        } else {
                            format!("template `{name}` takes {} argument(s), given {args}", e.def.params.len())
                        };
                        problems.push((at, msg));
                    }
                    Some(_) => {}
                }
            });
        };
        for name in &self.order {
            let e = &self.defs[name];
            if e.imported.is_none() {
                visit(&e.def.body, &e.def.params, &mut problems);
            }
        }
        for (node, _) in &self.ignores {
            visit(node, &[], &mut problems);
        }
        if let Some((use_at, name)) = used_declared.iter().min().cloned() {
            let decl = self.declared[&name];
            let why = if name.contains("INDENT") || name.contains("DEDENT") {
                "its tokens come from a postlexer (Lark's `Indenter` for indentation-based grammars such as Python's), \
                 which a context-free recognizer cannot run: indentation-based grammars are not supported"
            } else {
                "its tokens come from a postlexer or a lexer callback, which strictly cannot run"
            };
            return Err(
                self.err(decl, format!("`{name}` is declared with %declare and used at {}: {why}", self.pos(use_at)))
            );
        }
        if let Some((at, msg)) = problems.into_iter().min() {
            return Err(self.err(at, msg));
        }
        Ok(())
    }

    /// Lowers every terminal the grammar defines (used or not), so each is checked.
    fn check_terminals(&mut self) -> Result<()> {
        for name in self.order.clone() {
            if is_terminal_name(&name) {
                self.term(&name, 0)?;
                self.token_lang_of(&name)?;
            }
        }
        Ok(())
    }

    // ---- terminals ------------------------------------------------------------------------

    /// The language of terminal `name` before its attributes, and its nesting depth.
    fn term(&mut self, name: &str, depth: usize) -> Result<(TermLang, usize)> {
        if let Some(t) = self.terms.get(name) {
            return Ok(t.clone());
        }
        let e = &self.defs[name];
        if let Some(lang) = &e.imported {
            let t = (lang.clone(), 1);
            self.terms.insert(name.to_string(), t.clone());
            return Ok(t);
        }
        let at = e.def.at;
        if let Some(i) = self.visiting.iter().position(|v| v == name) {
            let mut cycle = self.visiting[i..].to_vec();
            cycle.push(name.to_string());
            return Err(self.err(
                at,
                format!(
                    "terminal `{name}` is recursive ({}): terminals are regular; use a rule (lowercase name) to recurse",
                    cycle.join(" → ")
                ),
            ));
        }
        self.depth_limit(depth, at)?;
        let body = e.def.body.clone();
        self.visiting.push(name.to_string());
        let t = self.node_lang(&body, name, depth + 1);
        self.visiting.pop();
        let t = t?;
        self.terms.insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// A terminal body: `&`/`~` (llguidance) make a [`Lexeme`]; anything else one HIR.
    fn node_lang(&mut self, node: &Node, owner: &str, depth: usize) -> Result<(TermLang, usize)> {
        match node {
            Node::And { parts, .. } => {
                let mut ls = Vec::new();
                let mut d = 0;
                for p in parts {
                    let (l, pd) = self.node_lang(p, owner, depth + 1)?;
                    d = d.max(pd);
                    ls.push(to_lexeme(l));
                }
                Ok((TermLang::Lexeme(Lexeme::and(ls)), d + 1))
            }
            Node::Not { body, .. } => {
                let (l, d) = self.node_lang(body, owner, depth + 1)?;
                Ok((TermLang::Lexeme(Lexeme::Not(Box::new(to_lexeme(l)))), d + 1))
            }
            Node::Name { name, .. } if is_terminal_name(name) => self.term(name, depth + 1),
            _ => {
                let (h, d) = self.node_hir(node, owner, depth)?;
                Ok((TermLang::Hir(h), d))
            }
        }
    }

    fn node_hir(&mut self, node: &Node, owner: &str, depth: usize) -> Result<(Hir, usize)> {
        let at = node_at(node).unwrap_or(0);
        self.depth_limit(depth, at)?;
        Ok(match node {
            Node::Empty => (Hir::empty(), 1),
            Node::Term { hir, .. } => ((**hir).clone(), 1),
            Node::Name { name, at, .. } => {
                if !is_terminal_name(name) {
                    return Err(self.err(
                        *at,
                        format!("terminal `{owner}` uses rule `{name}`: a terminal's body must be regular (terminals, strings, regexes)"),
                    ));
                }
                if self.defs.get(name).is_some_and(|e| has_token_attrs(&e.def)) {
                    return Err(self.err(
                        *at,
                        format!("terminal `{name}` has `lazy`/`suffix`: it cannot be part of another terminal"),
                    ));
                }
                match self.term(name, depth + 1)? {
                    (TermLang::Hir(h), d) => (h, d + 1),
                    (TermLang::Lexeme(_), _) => {
                        return Err(self.err(
                            *at,
                            format!("terminal `{name}` uses `&` or `~`: it cannot be part of another terminal"),
                        ))
                    }
                }
            }
            Node::Json { at, .. } => return Err(self.err(*at, format!("%json cannot be part of terminal `{owner}`"))),
            Node::Token { at, .. } => {
                return Err(
                    self.err(*at, format!("a special token cannot be part of terminal `{owner}`: use it in a rule"))
                )
            }
            Node::Invalid { at, msg } => return Err(self.err(*at, msg.clone())),
            Node::And { at, .. } | Node::Not { at, .. } => {
                return Err(self.err(*at, "`&` and `~` must make a whole terminal (as in `A: X & ~Y`)"))
            }
            Node::Seq(xs) | Node::Alt(xs) => {
                let mut hs = Vec::with_capacity(xs.len());
                let mut d = 0;
                for x in xs {
                    let (h, xd) = self.node_hir(x, owner, depth + 1)?;
                    d = d.max(xd);
                    hs.push(h);
                }
                let h = if matches!(node, Node::Seq(_)) { Hir::concat(hs) } else { Hir::alternation(hs) };
                (h, d + 1)
            }
            Node::Repeat { body, min, max } => {
                let (h, d) = self.node_hir(body, owner, depth + 1)?;
                (repeat(h, *min, *max), d + 1)
            }
        })
    }

    /// The language of terminal `name` where a rule uses it: attributes and laziness applied.
    fn token_lang_of(&mut self, name: &str) -> Result<TermLang> {
        if let Some(t) = self.tokens.get(name) {
            return Ok(t.clone());
        }
        let (lang, _) = self.term(name, 0)?;
        let def = self.defs[name].def.clone();
        let t = self.apply_attrs(lang, &def)?;
        self.tokens.insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// llguidance's attributes on a terminal or a rule whose body is a terminal.
    fn apply_attrs(&mut self, lang: TermLang, def: &Def) -> Result<TermLang> {
        let mut lazy = false;
        let mut suffix: Option<Hir> = None;
        for a in &def.attrs {
            match (a.key.as_str(), &a.value) {
                ("capture" | "stop_capture", _) => {}
                ("lazy", None) => lazy = true,
                ("suffix", Some(AttrValue::Str(s))) => suffix = Some(Hir::literal(s.as_bytes())),
                ("suffix", Some(AttrValue::Name(n))) if is_terminal_name(n) && self.defs.contains_key(n) => {
                    match self.term(n, 1)? {
                        (TermLang::Hir(h), _) => suffix = Some(h),
                        _ => return Err(self.err(a.at, format!("`suffix={n}`: the terminal uses `&` or `~`"))),
                    }
                }
                ("stop", _) => {
                    return Err(self.err(
                        a.at,
                        "`stop=` is not supported: it hides the stop text from the output, which needs backtracking \
                         strictly does not do; use `suffix=` (the text stays in the output) or `lazy`",
                    ))
                }
                ("max_tokens", _) => {
                    return Err(self.err(
                        a.at,
                        "`max_tokens=` is not supported: it counts model tokens inside one terminal, which is not a \
                         property of the text; bound the length in the regex instead (`{m,n}`)",
                    ))
                }
                ("temperature", Some(_)) => {
                    let (line, col) = self.src.line_col(a.at);
                    self.warnings.push(Warning {
                        at: Location::LineCol { line, col },
                        msg: "`temperature=` changes sampling, not the language: ignored".into(),
                    });
                }
                _ => return Err(self.err(a.at, format!("unsupported attribute `{}`", a.key))),
            }
        }
        Ok(match lang {
            TermLang::Hir(h) => {
                let h = match suffix.take() {
                    Some(s) => Hir::concat(vec![h, s]),
                    None => h,
                };
                if lazy || has_lazy(&h) {
                    TermLang::Lexeme(shortest(&h))
                } else {
                    TermLang::Hir(greedy(&h))
                }
            }
            TermLang::Lexeme(_) if lazy || suffix.is_some() => {
                return Err(self.err(def.at, "`lazy`/`suffix` cannot apply to a terminal built with `&` or `~`"))
            }
            l => l,
        })
    }

    // ---- %ignore --------------------------------------------------------------------------

    fn build_ignore(&mut self) -> Result<()> {
        if self.ignores.is_empty() {
            return Ok(());
        }
        let mut hirs = Vec::new();
        let mut exprs = Vec::new();
        for (node, at) in self.ignores.clone() {
            let lang = match &node {
                Node::Name { name, .. } if is_terminal_name(name) => self.token_lang_of(name)?,
                Node::Name { name, .. } => {
                    return Err(self.err(at, format!("%ignore takes terminals, not the rule `{name}`")));
                }
                _ => {
                    let (lang, _) = self.node_lang(&node, "%ignore", 1)?;
                    let def = Def { name: "%ignore".into(), at, params: vec![], attrs: vec![], body: Node::Empty };
                    self.apply_attrs(lang, &def)?
                }
            };
            match lang {
                TermLang::Hir(h) => hirs.push(h),
                TermLang::Lexeme(l) => exprs.push(Expr::Lexeme(Arc::new(l))),
            }
        }
        let max = if self.skip_once { Some(1) } else { None };
        self.ignore = Some(if exprs.is_empty() {
            // Lark skips an ignored terminal's longest match: a line comment runs to the end
            // of its line. So a line comment is followed by a newline that is itself ignored,
            // or ends the output (`final_comment`); never by a token on its line.
            let (comments, others): (Vec<Hir>, Vec<Hir>) = hirs.into_iter().partition(line_comment);
            if comments.is_empty() || self.skip_once {
                Ignore::Regex(repeat(Hir::alternation(others.into_iter().chain(comments).collect()), 0, max))
            } else {
                let others = Hir::alternation(others);
                let comment = Hir::alternation(comments);
                let mut units = vec![others.clone()];
                if matches_newline(&others) {
                    units.push(Hir::concat(vec![comment.clone(), Hir::literal(*b"\n")]));
                }
                self.final_comment = Some(repeat(comment, 0, Some(1)));
                Ignore::Regex(repeat(Hir::alternation(units), 0, None))
            }
        } else {
            exprs.extend(hirs.into_iter().map(|h| Expr::Regex(Arc::new(h))));
            Ignore::Expr(Expr::Repeat { body: Box::new(Expr::Alt(exprs)), min: 0, max })
        });
        Ok(())
    }

    /// A token of `lang`, with what `%ignore` allows after it.
    fn token(&self, lang: TermLang) -> Expr {
        match (lang, &self.ignore) {
            (TermLang::Hir(h), None) => hir_expr(h),
            (TermLang::Hir(h), Some(Ignore::Regex(ig))) => Expr::Regex(Arc::new(Hir::concat(vec![h, ig.clone()]))),
            (TermLang::Hir(h), Some(Ignore::Expr(ig))) => Expr::Seq(vec![hir_expr(h), ig.clone()]),
            (TermLang::Lexeme(l), ig) => self.after(Expr::Lexeme(Arc::new(l)), ig),
        }
    }

    fn after(&self, e: Expr, ig: &Option<Ignore>) -> Expr {
        match ig {
            None => e,
            Some(Ignore::Regex(h)) => Expr::Seq(vec![e, Expr::Regex(Arc::new(h.clone()))]),
            Some(Ignore::Expr(x)) => Expr::Seq(vec![e, x.clone()]),
        }
    }

    // ---- rules ----------------------------------------------------------------------------

    fn build_rules(mut self) -> Result<(Grammar, Vec<Warning>)> {
        let start = self.opts.start.clone().unwrap_or_else(|| "start".to_string());
        match self.defs.get(&start) {
            None => {
                return Err(self.err(
                    0,
                    format!("no rule `{start}`: the start rule (`start` unless LarkOptions::start names another)"),
                ))
            }
            Some(e) if e.def.is_terminal() => {
                return Err(
                    self.err(e.def.at, format!("the start `{start}` must be a rule (lowercase name), not a terminal"))
                )
            }
            Some(e) if !e.def.params.is_empty() => {
                return Err(self.err(e.def.at, format!("the start rule `{start}` cannot be a template")))
            }
            Some(_) => {}
        }
        let start_id = self.rule_id(&start, 0);
        while let Some((id, body, depth)) = self.queue.pop() {
            let name = self.rules[id.0 as usize].name.clone();
            let def = self.defs.get(&name).map(|e| e.def.clone());
            let expr = match def.filter(|d| !d.attrs.is_empty()) {
                // `name[lazy]: /.../`: a rule whose body is one terminal, with attributes.
                Some(d) => {
                    let (lang, _) = self.node_lang(&body, &name, depth)?;
                    let lang = self.apply_attrs(lang, &d)?;
                    self.token(lang)
                }
                None => self.rule_expr(&body, depth)?,
            };
            self.rules[id.0 as usize].body = expr;
        }
        for name in &self.order {
            let e = &self.defs[name];
            if !e.def.is_terminal() && e.def.params.is_empty() && !self.rule_ids.contains_key(name) {
                let (line, col) = self.src.line_col(e.def.at);
                self.warnings.push(Warning {
                    at: Location::LineCol { line, col },
                    msg: format!("rule `{name}` is not reachable from `{start}` (ignored)"),
                });
            }
        }
        let initial = self.initial_skip.unwrap_or(!self.llguidance);
        let lead = match (&self.ignore, initial) {
            (Some(Ignore::Regex(h)), true) => Some(Expr::Regex(Arc::new(h.clone()))),
            (Some(Ignore::Expr(e)), true) => Some(e.clone()),
            _ => None,
        };
        let tail = self.final_comment.take().map(|h| Expr::Regex(Arc::new(h)));
        let start = if lead.is_some() || tail.is_some() {
            let parts = lead.into_iter().chain([Expr::Rule(start_id)]).chain(tail).collect();
            self.rules.push(Rule {
                name: format!("{start}+ignored"),
                body: Expr::Seq(parts),
                span: self.rules[start_id.0 as usize].span,
            });
            RuleId(self.rules.len() as u32 - 1)
        } else {
            start_id
        };
        Ok((Grammar { rules: self.rules, start }, self.warnings))
    }

    /// The IR rule of a (non-template) rule, allocated and queued on first use.
    fn rule_id(&mut self, name: &str, depth: usize) -> RuleId {
        if let Some(&id) = self.rule_ids.get(name) {
            return id;
        }
        let def = &self.defs[name].def;
        let (line, col) = self.src.line_col(def.at);
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule { name: name.to_string(), body: Expr::Empty, span: Some(Span { line, col }) });
        self.rule_ids.insert(name.to_string(), id);
        self.queue.push((id, def.body.clone(), depth));
        id
    }

    /// The IR rule of template `name` applied to `args`, one per distinct use.
    fn instance(&mut self, name: &str, args: &[Node], at: usize, depth: usize) -> Result<RuleId> {
        let key = format!("{name}{{{}}}", args.iter().map(node_key).collect::<Vec<_>>().join(", "));
        if let Some(&id) = self.rule_ids.get(&key) {
            return Ok(id);
        }
        if key.len() > MAX_TEMPLATE_KEY {
            return Err(self.err(
                at,
                format!("template `{name}` used with arguments over {MAX_TEMPLATE_KEY} characters long (does it call itself with growing arguments?)"),
            ));
        }
        self.instances += 1;
        if self.instances > MAX_TEMPLATE_INSTANCES {
            return Err(self.err(
                at,
                format!("more than {MAX_TEMPLATE_INSTANCES} template instances (does a template call itself with growing arguments?)"),
            ));
        }
        let def = self.defs[name].def.clone();
        let body = substitute(&def.body, &def.params, args);
        let (line, col) = self.src.line_col(def.at);
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule { name: key.clone(), body: Expr::Empty, span: Some(Span { line, col }) });
        self.rule_ids.insert(key, id);
        self.queue.push((id, body, depth + 1));
        Ok(id)
    }

    fn rule_expr(&mut self, node: &Node, depth: usize) -> Result<Expr> {
        self.depth_limit(depth, node_at(node).unwrap_or(0))?;
        Ok(match node {
            Node::Empty => Expr::Empty,
            Node::Term { hir, .. } => {
                let def = Def { name: String::new(), at: 0, params: vec![], attrs: vec![], body: Node::Empty };
                let lang = self.apply_attrs(TermLang::Hir((**hir).clone()), &def)?;
                self.token(lang)
            }
            Node::Name { name, args, at } => {
                if is_terminal_name(name) {
                    let lang = self.token_lang_of(name)?;
                    self.token(lang)
                } else if !args.is_empty() {
                    Expr::Rule(self.instance(name, args, *at, depth)?)
                } else {
                    Expr::Rule(self.rule_id(name, depth))
                }
            }
            Node::Json { value, at } => {
                let g = json_schema::compile(value, &self.opts.json)
                    .map_err(|e| self.err(*at, format!("in the %json schema: {e}")))?
                    .grammar;
                let id = g.append_to(&mut self.rules);
                self.after(Expr::Rule(id), &self.ignore)
            }
            Node::Token { token, .. } => Expr::Token(token.clone()),
            Node::Seq(xs) => Expr::Seq(xs.iter().map(|x| self.rule_expr(x, depth + 1)).collect::<Result<_>>()?),
            Node::Alt(xs) => Expr::Alt(xs.iter().map(|x| self.rule_expr(x, depth + 1)).collect::<Result<_>>()?),
            Node::Repeat { body, min, max } => {
                Expr::Repeat { body: Box::new(self.rule_expr(body, depth + 1)?), min: *min, max: *max }
            }
            Node::And { at, .. } | Node::Not { at, .. } => {
                return Err(
                    self.err(*at, "`&` and `~` combine terminals: use them in an UPPERCASE terminal's definition")
                )
            }
            Node::Invalid { at, msg } => return Err(self.err(*at, msg.clone())),
        })
    }
}

/// Lowers terminal `name` of library `module` (its text) in the library's own namespace.
fn import(text: &str, module: &str, name: &str) -> Result<TermLang> {
    let src = Source::new(text);
    let items = parser::parse(&src, super::lexer::tokens(&src)?, Default::default())?;
    let opts = LarkOptions::default();
    let mut l = Lowerer::new(&src, &opts);
    l.collect(items)?;
    if !l.defs.contains_key(name) {
        return Err(Error::Grammar {
            at: Location::LineCol { line: 1, col: 1 },
            msg: format!("`{module}` has no `{name}` (it has {})", common::names(module).join(", ")),
        });
    }
    Ok(l.term(name, 0)?.0)
}

fn has_token_attrs(d: &Def) -> bool {
    d.attrs.iter().any(|a| a.key == "lazy" || a.key == "suffix")
}

/// Calls `f(name, number of arguments, at)` for every name in `node`, template arguments too.
fn walk_names(node: &Node, f: &mut impl FnMut(&str, usize, usize)) {
    match node {
        Node::Empty | Node::Term { .. } | Node::Json { .. } | Node::Token { .. } | Node::Invalid { .. } => {}
        Node::Name { name, args, at } => {
            f(name, args.len(), *at);
            args.iter().for_each(|a| walk_names(a, f));
        }
        Node::Seq(xs) | Node::Alt(xs) | Node::And { parts: xs, .. } => xs.iter().for_each(|x| walk_names(x, f)),
        Node::Repeat { body, .. } | Node::Not { body, .. } => walk_names(body, f),
    }
}

/// Calls `f(at, msg)` for every regex that did not compile.
fn walk_invalid(node: &Node, f: &mut impl FnMut(usize, &str)) {
    match node {
        Node::Invalid { at, msg } => f(*at, msg),
        Node::Empty | Node::Term { .. } | Node::Json { .. } | Node::Token { .. } => {}
        Node::Name { args, .. } => args.iter().for_each(|a| walk_invalid(a, f)),
        Node::Seq(xs) | Node::Alt(xs) | Node::And { parts: xs, .. } => xs.iter().for_each(|x| walk_invalid(x, f)),
        Node::Repeat { body, .. } | Node::Not { body, .. } => walk_invalid(body, f),
    }
}

fn node_at(node: &Node) -> Option<usize> {
    match node {
        Node::Term { at, .. } | Node::Name { at, .. } | Node::Json { at, .. } | Node::Invalid { at, .. } => Some(*at),
        Node::Token { at, .. } => Some(*at),
        Node::And { at, .. } | Node::Not { at, .. } => Some(*at),
        Node::Seq(xs) | Node::Alt(xs) => xs.iter().find_map(node_at),
        Node::Repeat { body, .. } => node_at(body),
        Node::Empty => None,
    }
}

/// A text naming a template argument exactly (equal texts, equal expressions).
fn node_key(node: &Node) -> String {
    match node {
        Node::Empty => "()".into(),
        Node::Term { hir, .. } => format!("/{hir}/"),
        Node::Name { name, args, .. } if args.is_empty() => name.clone(),
        Node::Name { name, args, .. } => {
            format!("{name}{{{}}}", args.iter().map(node_key).collect::<Vec<_>>().join(", "))
        }
        Node::Json { value, .. } => format!("%json {value}"),
        Node::Token { token, .. } => token.text(),
        Node::Seq(xs) => format!("({})", xs.iter().map(node_key).collect::<Vec<_>>().join(" ")),
        Node::Alt(xs) => format!("({})", xs.iter().map(node_key).collect::<Vec<_>>().join(" | ")),
        Node::And { parts, .. } => format!("({})", parts.iter().map(node_key).collect::<Vec<_>>().join(" & ")),
        Node::Not { body, .. } => format!("~{}", node_key(body)),
        Node::Invalid { msg, .. } => format!("<{msg}>"),
        Node::Repeat { body, min, max } => match max {
            Some(m) => format!("{}~{min}..{m}", node_key(body)),
            None => format!("{}~{min}..", node_key(body)),
        },
    }
}

/// `node` with each parameter name replaced by its argument.
fn substitute(node: &Node, params: &[String], args: &[Node]) -> Node {
    match node {
        Node::Name { name, args: a, at } => {
            if a.is_empty() {
                if let Some(i) = params.iter().position(|p| p == name) {
                    return args[i].clone();
                }
            }
            Node::Name { name: name.clone(), args: a.iter().map(|x| substitute(x, params, args)).collect(), at: *at }
        }
        Node::Seq(xs) => Node::Seq(xs.iter().map(|x| substitute(x, params, args)).collect()),
        Node::Alt(xs) => Node::Alt(xs.iter().map(|x| substitute(x, params, args)).collect()),
        Node::And { parts, at } => {
            Node::And { parts: parts.iter().map(|x| substitute(x, params, args)).collect(), at: *at }
        }
        Node::Not { body, at } => Node::Not { body: Box::new(substitute(body, params, args)), at: *at },
        Node::Repeat { body, min, max } => {
            Node::Repeat { body: Box::new(substitute(body, params, args)), min: *min, max: *max }
        }
        other => other.clone(),
    }
}
