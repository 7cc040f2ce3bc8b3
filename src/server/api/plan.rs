//! The checks that turn a request body into a [`Plan`]: [`Common`]'s sampling, stops, limits
//! and constraint fields, then each route's own ([`ChatRequest`], [`CompletionRequest`]).

use super::*;

fn nonneg(name: &str, v: i64) -> Result<usize, ApiError> {
    usize::try_from(v).map_err(|_| ApiError::bad_request(format!("{name} must be >= 0, got {v}")).param(name))
}

impl Common {
    /// The sampling fields the request sets (`top_k` `-1` or `0`: off).
    pub fn sampling(&self) -> SamplingOverrides {
        SamplingOverrides {
            temperature: self.temperature,
            top_k: self.top_k.map(|k| usize::try_from(k).unwrap_or(0)),
            top_p: self.top_p,
            min_p: self.min_p,
            top_n_sigma: self.top_n_sigma,
            repetition_penalty: self.repetition_penalty,
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            dry_multiplier: self.dry_multiplier,
            dry_base: self.dry_base,
            dry_allowed_length: self.dry_allowed_length,
            dry_penalty_last_n: self.dry_penalty_last_n,
            dry_sequence_breakers: self.dry_sequence_breakers.clone(),
            seed: self.seed.map(Seed::value),
        }
    }

    /// The sampling knobs over the model's defaults, checked (OpenAI's ranges where OpenAI
    /// has the knob: temperature in [0, 2]).
    /// `draft`: the server's draft model and its most tokens per draft, if it has one.
    pub fn plan(
        &self,
        defaults: &GenerationDefaults,
        max_tokens: Option<i64>,
        (logprobs, top_logprobs): (bool, usize),
        draft: Option<(&crate::decode::DraftModel, usize)>,
    ) -> Result<Plan, ApiError> {
        if let Some(b) = &self.logit_bias {
            if !b.is_empty() {
                return Err(ApiError::bad_request("logit_bias is not supported").param("logit_bias"));
            }
        }
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) {
                return Err(
                    ApiError::bad_request(format!("temperature must be in [0, 2], got {t}")).param("temperature")
                );
            }
        }
        let mut s = self.sampling().over(defaults.sampling());
        s.top_logprobs = top_logprobs;
        if let Err(e) = s.validate() {
            let msg = e.to_string();
            let param = msg.split_whitespace().next().unwrap_or("").to_string();
            return Err(ApiError::bad_request(msg).param(param));
        }
        let n = match self.n {
            None => 1,
            Some(n) if n >= 1 && n as usize <= MAX_N => n as usize,
            Some(n) => return Err(ApiError::bad_request(format!("n must be in [1, {MAX_N}], got {n}")).param("n")),
        };
        let max_tokens = match max_tokens.or(self.max_tokens) {
            None => None,
            Some(m) if m < 1 => {
                return Err(ApiError::bad_request(format!("max_tokens must be at least 1, got {m}")).param("max_tokens"))
            }
            Some(m) => Some(nonneg("max_tokens", m)?),
        };
        let stop = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        if stop.len() > MAX_STOP {
            return Err(
                ApiError::bad_request(format!("at most {MAX_STOP} stop strings, got {}", stop.len())).param("stop")
            );
        }
        if stop.iter().any(String::is_empty) {
            return Err(ApiError::bad_request("stop strings must not be empty").param("stop"));
        }
        let stream = self.stream.unwrap_or(false);
        let include_usage = self.stream_options.as_ref().and_then(|o| o.include_usage).unwrap_or(false);
        if self.stream_options.is_some() && !stream {
            return Err(
                ApiError::bad_request("stream_options is only allowed with stream: true").param("stream_options")
            );
        }
        // With a draft model, drafts come from it unless the request says otherwise.
        let lookup = |max_draft| Some(crate::decode::PromptLookup { max_draft, ..Default::default() });
        let (speculate, draft_model) = match (self.speculate.as_deref(), draft) {
            (Some("off"), _) | (None, None) => (None, None),
            (Some("prompt-lookup"), _) => (Some(crate::decode::PromptLookup::default()), None),
            (None | Some("draft-model"), Some((d, max_draft))) => (lookup(max_draft), Some(d.clone())),
            (Some("draft-model"), None) => {
                return Err(ApiError::bad_request(
                    "speculate: this server has no draft model (start it with --draft-model)",
                )
                .param("speculate"))
            }
            (Some(other), _) => {
                return Err(ApiError::bad_request(format!(
                    "speculate must be \"prompt-lookup\", \"draft-model\" or \"off\", got {other:?}"
                ))
                .param("speculate"))
            }
        };
        let opts = GenerateOptions {
            max_tokens: max_tokens.unwrap_or(0),
            sampling: s,
            stop,
            stop_token_ids: defaults.eos.clone(),
            speculate,
            draft_model,
            ..GenerateOptions::default()
        };
        Ok(Plan { n, stream, include_usage, max_tokens, opts, logprobs })
    }

    /// The user's own constraint, if any: at most one of `response_format` (json_object or
    /// json_schema), `regex`, `grammar`, `choice`, `guided_json`; started by `trigger` when one
    /// is given.
    pub fn user_constraint(&self) -> Result<Option<(UserConstraint, &'static str)>, ApiError> {
        let mut found: Vec<(UserConstraint, &'static str)> = Vec::new();
        let json = self.x_strictly.as_ref().map(StrictlyExtension::options).unwrap_or_default();
        match &self.response_format {
            None | Some(ResponseFormat::Text) => {}
            Some(ResponseFormat::JsonObject) => {
                // Any object: keys the model chooses, in the sensible language too.
                let schema = serde_json::json!({"type": "object", "additionalProperties": true});
                found.push((UserConstraint::JsonSchema(schema, json.clone()), "response_format"))
            }
            Some(ResponseFormat::JsonSchema { json_schema }) => {
                if let Some(name) = &json_schema.name {
                    check_name(name, "response_format.json_schema.name")?;
                }
                let schema = json_schema.schema.clone().unwrap_or(Value::Bool(true));
                if json_schema.strict == Some(true) {
                    if let Some((at, why)) = json_schema::strict_violation(&schema) {
                        let at = if at.is_empty() { "the root".to_string() } else { at };
                        return Err(ApiError::bad_request(format!("invalid schema for strict mode at {at}: {why}"))
                            .param("response_format.json_schema.schema"));
                    }
                }
                found.push((UserConstraint::JsonSchema(schema, json.clone()), "response_format.json_schema.schema"));
            }
        }
        if let Some(r) = &self.regex {
            found.push((UserConstraint::Regex(r.clone()), "regex"));
        }
        if let Some(g) = &self.grammar {
            let lark = match self.grammar_syntax.as_deref() {
                None => crate::grammar::lark::looks_like_lark(g),
                Some("lark") => true,
                Some("gbnf" | "ebnf") => false,
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "grammar_syntax must be \"gbnf\" or \"lark\", not {other:?}"
                    ))
                    .param("grammar_syntax"))
                }
            };
            let u = if lark { UserConstraint::Lark(g.clone()) } else { UserConstraint::Grammar(g.clone()) };
            found.push((u, "grammar"));
        } else if self.grammar_syntax.is_some() {
            return Err(ApiError::bad_request("grammar_syntax needs a grammar").param("grammar_syntax"));
        }
        if let Some(c) = &self.choice {
            if c.is_empty() {
                return Err(ApiError::bad_request("choice needs at least one option").param("choice"));
            }
            found.push((UserConstraint::Choice(c.clone()), "choice"));
        }
        if let Some(s) = &self.guided_json {
            let schema = match s {
                Value::String(text) => serde_json::from_str(text).map_err(|e| {
                    ApiError::bad_request(format!("guided_json is not valid JSON: {e}")).param("guided_json")
                })?,
                v => v.clone(),
            };
            found.push((UserConstraint::JsonSchema(schema, json.clone()), "guided_json"));
        }
        if found.len() > 1 {
            let names: Vec<&str> = found.iter().map(|f| f.1.split('.').next().unwrap_or(f.1)).collect();
            return Err(ApiError::bad_request(format!(
                "at most one constraint per request; got {}",
                names.join(" and ")
            )));
        }
        match (found.pop(), &self.trigger) {
            (_, Some(t))
                if t.0
                    .iter()
                    .any(|t| matches!(t, Trigger::Text(s) | Trigger::Token(TokenRef::Name(s)) if s.is_empty())) =>
            {
                Err(ApiError::bad_request("trigger must not be empty").param("trigger"))
            }
            (None, Some(_)) => Err(ApiError::bad_request(
                "trigger needs a constraint to start: response_format, regex, grammar, choice or guided_json",
            )
            .param("trigger")),
            (Some((u, param)), Some(t)) => {
                Ok(Some((UserConstraint::Triggered { triggers: t.0.clone(), then: Box::new(u) }, param)))
            }
            (found, None) => Ok(found),
        }
    }
}

/// OpenAI's rule for function and schema names: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn check_name(name: &str, param: &str) -> Result<(), ApiError> {
    if crate::tools::is_valid_name(name) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "invalid name {name:?}: names must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -"
        ))
        .param(param))
    }
}

impl ChatRequest {
    /// The tools part of the constraint: `None` when no tool may be called.
    pub fn tool_spec(&self) -> Result<Option<ToolSpec>, ApiError> {
        if self.functions.as_ref().is_some_and(|v| !v.is_null())
            || self.function_call.as_ref().is_some_and(|v| !v.is_null())
        {
            return Err(ApiError::bad_request(
                "`functions` and `function_call` are deprecated and not supported; use `tools` and `tool_choice`",
            )
            .param("functions"));
        }
        let tools = self.tools.as_deref().unwrap_or(&[]);
        let mut functions = Vec::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            if t.kind != "function" {
                return Err(ApiError::bad_request(format!("tools[{i}].type must be \"function\", got {:?}", t.kind))
                    .param(format!("tools[{i}].type")));
            }
            let Some(f) = &t.function else {
                return Err(ApiError::bad_request(format!("tools[{i}].function is required"))
                    .param(format!("tools[{i}].function")));
            };
            functions.push(f);
        }
        let choice = match &self.tool_choice {
            // OpenAI's default: `auto` when there are tools, else `none`.
            None if tools.is_empty() => ToolChoice::None,
            None => ToolChoice::Auto,
            Some(param) => param.choice()?,
        };
        let Some(mode) = choice.mode() else { return Ok(None) };
        if tools.is_empty() {
            return Err(ApiError::bad_request("tool_choice needs tools").param("tool_choice"));
        }
        let mut out = Vec::new();
        for (i, f) in functions.into_iter().enumerate() {
            check_name(&f.name, &format!("tools[{i}].function.name"))?;
            if out.iter().any(|o: &Tool| o.name == f.name) {
                return Err(ApiError::bad_request(format!("two tools are named {:?}", f.name))
                    .param(format!("tools[{i}].function.name")));
            }
            // No parameters: a function with an empty parameter list (OpenAI's rule).
            let parameters = f.parameters.clone().unwrap_or_else(
                || serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
            );
            out.push(Tool { name: f.name.clone(), parameters });
        }
        if let ToolMode::Named(name) = &mode {
            if !out.iter().any(|t| &t.name == name) {
                return Err(ApiError::bad_request(format!("tool_choice names {name:?}, which is not in tools"))
                    .param("tool_choice"));
            }
        }
        // `allowed_tools`: the prompt still lists every tool (see `chat`); the calls' grammar
        // takes only the allowed ones.
        if let Some(allowed) = self.tool_choice.as_ref().and_then(ToolChoiceParam::allowed) {
            for (i, name) in allowed.iter().enumerate() {
                if !out.iter().any(|t| &t.name == name) {
                    let p = format!("tool_choice.allowed_tools.tools[{i}]");
                    return Err(ApiError::bad_request(format!("{p} names {name:?}, which is not in tools")).param(p));
                }
            }
            out.retain(|t| allowed.contains(&t.name));
        }
        let max_calls = if self.parallel_tool_calls == Some(false) { 1 } else { MAX_PARALLEL_TOOL_CALLS };
        Ok(Some(ToolSpec { tools: out, mode, max_calls, format: ToolFormat::default() }))
    }

    /// The whole constraint of a chat request.
    pub fn spec(&self) -> Result<Option<Spec>, ApiError> {
        let user = self.common.user_constraint()?;
        let tools = self.tool_spec()?;
        Ok(match (user, tools) {
            (None, None) => None,
            (user, tools) => {
                let param = user.as_ref().map(|u| u.1);
                Some(Spec { user: user.map(|u| u.0), user_param: param.map(str::to_string), tools, reasoning: None })
            }
        })
    }

    /// The chat template's extra variables: `chat_template_kwargs`, and `reasoning_effort`.
    /// They may not name the variables the chat itself sets.
    pub fn template_vars(&self) -> Result<TemplateVars, ApiError> {
        const RESERVED: [&str; 5] = ["messages", "tools", "add_generation_prompt", "bos_token", "eos_token"];
        let mut vars = match &self.chat_template_kwargs {
            None | Some(Value::Null) => TemplateVars::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Err(
                    ApiError::bad_request("chat_template_kwargs must be an object").param("chat_template_kwargs")
                )
            }
        };
        if let Some(k) = RESERVED.iter().find(|k| vars.contains_key(**k)) {
            let p = format!("chat_template_kwargs.{k}");
            return Err(ApiError::bad_request(format!("{p} cannot be set: the request's chat sets it")).param(p));
        }
        if let Some(e) = &self.reasoning_effort {
            vars.insert("reasoning_effort".into(), Value::String(e.clone()));
        }
        Ok(vars)
    }

    /// `max_reasoning_tokens`, checked.
    pub fn max_reasoning_tokens(&self) -> Result<Option<usize>, ApiError> {
        self.max_reasoning_tokens.map(|n| nonneg("max_reasoning_tokens", n)).transpose()
    }

    /// `top_logprobs` when `logprobs` is on; errors for the combinations OpenAI refuses.
    pub fn top_logprobs(&self) -> Result<(bool, usize), ApiError> {
        let on = self.logprobs.unwrap_or(false);
        let k = match self.top_logprobs {
            None => 0,
            Some(k) => nonneg("top_logprobs", k)?,
        };
        if k > MAX_TOP_LOGPROBS {
            return Err(ApiError::bad_request(format!("top_logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {k}"))
                .param("top_logprobs"));
        }
        if k > 0 && !on {
            return Err(ApiError::bad_request("top_logprobs needs logprobs: true").param("top_logprobs"));
        }
        Ok((on, k))
    }
}

impl CompletionRequest {
    /// The prompts: texts (encoded with the model's BOS rule) or token ids, checked against
    /// the vocabulary width.
    pub fn prompts(
        &self,
        encode: impl Fn(&str) -> Result<Vec<TokenId>, ApiError>,
        width: usize,
    ) -> Result<Vec<(String, Vec<TokenId>)>, ApiError> {
        let ids = |v: &[u32]| -> Result<Vec<TokenId>, ApiError> {
            if let Some(t) = v.iter().find(|&&t| t as usize >= width) {
                return Err(
                    ApiError::bad_request(format!("token id {t} is outside the vocabulary ({width})")).param("prompt")
                );
            }
            Ok(v.iter().map(|&t| TokenId(t)).collect())
        };
        let out: Vec<(String, Vec<TokenId>)> = match &self.prompt {
            PromptIn::Text(t) => vec![(t.clone(), encode(t)?)],
            PromptIn::Texts(ts) => ts.iter().map(|t| Ok((t.clone(), encode(t)?))).collect::<Result<_, ApiError>>()?,
            PromptIn::Ids(v) => vec![(String::new(), ids(v)?)],
            PromptIn::IdLists(vs) => {
                vs.iter().map(|v| Ok((String::new(), ids(v)?))).collect::<Result<_, ApiError>>()?
            }
        };
        if out.is_empty() {
            return Err(ApiError::bad_request("prompt must not be an empty list").param("prompt"));
        }
        if out.iter().any(|p| p.1.is_empty()) {
            return Err(ApiError::bad_request(
                "the prompt is empty (and the model adds no BOS): give it at least one token",
            )
            .param("prompt"));
        }
        Ok(out)
    }

    pub fn spec(&self) -> Result<Option<Spec>, ApiError> {
        Ok(self.common.user_constraint()?.map(|(u, p)| Spec {
            user: Some(u),
            user_param: Some(p.to_string()),
            tools: None,
            reasoning: None,
        }))
    }

    pub fn top_logprobs(&self) -> Result<(bool, usize), ApiError> {
        match self.logprobs {
            None => Ok((false, 0)),
            Some(k) => {
                let k = nonneg("logprobs", k)?;
                if k > MAX_TOP_LOGPROBS {
                    return Err(ApiError::bad_request(format!("logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {k}"))
                        .param("logprobs"));
                }
                Ok((true, k))
            }
        }
    }
}
