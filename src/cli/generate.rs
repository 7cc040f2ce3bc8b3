//! `strictly generate`: text from a real model (a Hugging Face directory, a GGUF file, or the
//! embedded stories260K), constrained by `--regex`/`--grammar`/`--schema`/`--choice` or free.
//! stdout gets the generated text only (a newline after it on a terminal); `--verbose` adds
//! timings on stderr.
//!
//! The steps, in order (bad input fails before the model loads where it can):
//!
//! ```text
//! device, dtype, constraint flags ─▶ load the model ─▶ the prompt's tokens (--chat: through the
//! chat template) ─▶ compile the constraint ─▶ GenerateOptions (generation_config.json's knobs,
//! then the flags over them) ─▶ decode (beam search | streamed | whole) ─▶ --verbose report
//! ```

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use clap::Args;
use strictly::automaton::{Compiled, Matcher};
use strictly::decode::{self, BeamOptions, Event, GenerateOptions, LanguageModel, Output};
use strictly::model::reasoning::PromptReasoning;
use strictly::model::{
    ChatMessage, ContentTokens, DeviceSpec, GenerationDefaults, LoadOptions, LoadedModel, Precision, TemplateVars,
};
use strictly::sample::SamplingOverrides;
use strictly::TokenId;

use super::{ChatTemplateArgs, ConstraintArgs, SamplingArgs, SchemaArgs, TriggerArgs};

#[derive(Args)]
pub struct GenerateArgs {
    /// A GGUF file (weights, tokenizer and chat template in one), a Hugging Face model
    /// directory (config.json, *.safetensors, tokenizer.json, ...), or a directory holding one
    /// .gguf file [default: the embedded stories260K model].
    #[arg(long)]
    model: Option<PathBuf>,
    #[command(flatten)]
    constraint: ConstraintArgs,
    #[command(flatten)]
    schema: SchemaArgs,
    #[command(flatten)]
    trigger: TriggerArgs,
    #[command(flatten)]
    chat_template: ChatTemplateArgs,
    /// The prompt: BOS (where the model wants one) + the prompt's tokens; with --chat, the
    /// user message of a chat.
    #[arg(long)]
    prompt: String,
    /// Render the prompt with the model's chat template (or, for a model without one, the
    /// plain `role: content` template) and generate the assistant's reply.
    #[arg(long)]
    chat: bool,
    /// A system message (with --chat).
    #[arg(long, requires = "chat")]
    system: Option<String>,
    /// More variables for the chat template, as a JSON object (with --chat), e.g.
    /// '{"enable_thinking": false}' to turn Qwen3's thinking off.
    #[arg(long, requires = "chat", value_name = "JSON")]
    chat_template_kwargs: Option<String>,
    /// With --chat and a model that reasons (`<think>`…`</think>`): the most tokens its
    /// reasoning may take before the end marker is appended and the answer follows. The
    /// constraint, if any, applies after the reasoning.
    #[arg(long, requires = "chat")]
    max_reasoning_tokens: Option<usize>,
    /// Most tokens to generate; a constrained output cut here is still complete.
    #[arg(long, default_value_t = strictly::decode::DEFAULT_MAX_TOKENS)]
    max_tokens: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// A stop string (repeatable); the output ends just before it.
    #[arg(long = "stop")]
    stop: Vec<String>,
    /// Beam search with this many beams (deterministic; prints the best output).
    #[arg(long)]
    beam_width: Option<usize>,
    /// Print text as it is generated.
    #[arg(long)]
    stream: bool,
    /// cpu, cuda or cuda:N (cuda needs a binary built with the `cuda` feature).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// f32, bf16 or f16 [default: f32 on cpu, bf16 on cuda; GGUF models: f32].
    #[arg(long)]
    dtype: Option<String>,
    /// CPU threads for the forward pass [default: RAYON_NUM_THREADS, else the physical cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Timing on stderr: load, prefill, tokens/s, forward passes saved by fast-forward, mask time.
    #[arg(long)]
    verbose: bool,
    /// When to compute the mask during the forward pass, on a second thread: off, on, or auto
    /// (when the previous mask took 100 µs or more). The output is the same either way.
    #[arg(long, default_value = "auto")]
    overlap: decode::Overlap,
    /// Speculative decoding: off, or prompt-lookup (drafts taken from the prompt and the output
    /// so far, verified in one forward pass; the output is the same, in fewer passes where it
    /// copies its context). Turns --overlap off.
    #[arg(long, default_value = "off")]
    speculate: Speculate,
    /// The most tokens a draft holds (prompt lookup or a draft model).
    #[arg(long, default_value_t = 8)]
    draft_tokens: usize,
    /// Speculative decoding with drafts from this smaller model (a GGUF file or a model
    /// directory) of the same vocabulary: its greedy tokens under the constraint, verified in one
    /// pass of the model; the output is the same, in fewer passes where the drafts are right.
    /// Turns --overlap off.
    #[arg(long, value_name = "PATH", conflicts_with = "speculate")]
    draft_model: Option<std::path::PathBuf>,
}

/// `--speculate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Speculate {
    Off,
    PromptLookup,
}

impl GenerateArgs {
    /// The sampling flags given (`--greedy` wins over `--temperature`).
    fn sampling(&self) -> SamplingOverrides {
        self.sampling.overrides()
    }
}

pub fn run(a: GenerateArgs) -> anyhow::Result<()> {
    let device: DeviceSpec = a.device.parse()?;
    let precision = a.dtype.as_deref().map(str::parse::<Precision>).transpose()?;
    // Read the constraint before loading, so bad input fails fast.
    let constraint = a.trigger.wrap_optional(a.constraint.optional(&a.schema)?)?;
    let vars = template_vars(&a)?;
    let (mut loaded, load_time) = load(&a, &LoadOptions { device, precision, threads: a.threads })?;
    a.chat_template.apply(&mut loaded)?;
    let (prompt, reasoning) = prompt_tokens(&a, &loaded, &vars)?;
    // A reasoning model reasons first; the constraint applies to the answer after it.
    let constraint = match (constraint, &reasoning) {
        (Some(c), Some(r)) => Some(r.constrain(c)),
        (c, _) => c,
    };
    let t_compile = Instant::now();
    let compiled = constraint.map(|c| Compiled::new(&loaded.env, &c)).transpose()?;
    let compile_time = t_compile.elapsed();
    let mut opts = options(&a, &loaded.defaults)?;
    if let (Some(max_tokens), Some(r)) = (a.max_reasoning_tokens, &reasoning) {
        opts.reasoning = r.budget(max_tokens);
    }
    let mut matcher = compiled.as_ref().map(|c| c.matcher());
    let vocab = loaded.vocab().clone();
    if let Some(path) = &a.draft_model {
        opts.draft_model =
            Some(super::draft_model(path, &vocab, &LoadOptions { device, precision, threads: a.threads })?);
        opts.speculate = Some(decode::PromptLookup { max_draft: a.draft_tokens, ..Default::default() });
    }
    let mut model = loaded.model;
    if opts.speculate.is_some() && !model.can_truncate() {
        // Drafts are verified on strictly's batched network (one pass, a cache that forgets
        // its end); without one the output is the same, in as many passes.
        match model.on_batch_net() {
            Ok(m) => model = m,
            Err(e) => eprintln!("strictly: warning: --speculate has no effect on this model: {e}"),
        }
    }
    let t_gen = Instant::now();
    let out = decode_to_stdout(&a, &mut model, &vocab, matcher.as_mut(), &prompt, &opts)?;
    let gen_time = t_gen.elapsed();
    if a.verbose {
        let times = Times { load: load_time, compile: compiled.is_some().then_some(compile_time), generate: gen_time };
        report(&a, &loaded.info, &model.stats(), &prompt, &out, &times);
    }
    Ok(())
}

/// The model, with a spinner on stderr while a model file loads, and how long it took.
fn load(a: &GenerateArgs, opts: &LoadOptions) -> anyhow::Result<(LoadedModel, Duration)> {
    let t_load = Instant::now();
    let spinner = a.model.as_ref().map(|dir| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_message(format!("loading {}", dir.display()));
        pb.enable_steady_tick(Duration::from_millis(100));
        pb
    });
    let loaded = LoadedModel::load(a.model.as_deref(), opts);
    if let Some(pb) = spinner {
        pb.finish_and_clear();
    }
    Ok((loaded?, t_load.elapsed()))
}

/// `--prompt` as the model's input: with `--chat`, a (system and) user turn through the chat
/// template, ready for the assistant's reply; else BOS (where the model wants one) + the text.
/// With `--chat`, the template's reasoning markers and where the prompt leaves them.
fn prompt_tokens(
    a: &GenerateArgs,
    loaded: &LoadedModel,
    vars: &TemplateVars,
) -> anyhow::Result<(Vec<TokenId>, Option<PromptReasoning>)> {
    if !a.chat {
        return Ok((loaded.prompt.encode(&a.prompt)?, None));
    }
    let mut messages = Vec::new();
    if let Some(s) = &a.system {
        messages.push(ChatMessage::new("system", s.as_str()));
    }
    messages.push(ChatMessage::new("user", a.prompt.as_str()));
    let p = &loaded.prompt;
    let rendered = p.render_chat_prompt_with_vars(&messages, &[], true, ContentTokens::Text, vars)?;
    Ok((p.encode_prompt(&rendered)?, p.reasoning_after(&rendered.text())))
}

/// `--chat-template-kwargs`: a JSON object.
fn template_vars(a: &GenerateArgs) -> anyhow::Result<TemplateVars> {
    let Some(text) = &a.chat_template_kwargs else { return Ok(TemplateVars::new()) };
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err(anyhow!("--chat-template-kwargs must be a JSON object")),
        Err(e) => Err(anyhow!("--chat-template-kwargs is not valid JSON: {e}")),
    }
}

/// The model's generation defaults with the flags over them, checked; the model's EOS ids stop.
fn options(a: &GenerateArgs, defaults: &GenerationDefaults) -> anyhow::Result<GenerateOptions> {
    let sampling = a.sampling().over(defaults.sampling());
    sampling.validate()?;
    Ok(GenerateOptions {
        max_tokens: a.max_tokens,
        sampling,
        stop: a.stop.clone(),
        stop_token_ids: defaults.eos.clone(),
        overlap: a.overlap,
        reasoning: None,
        speculate: (a.speculate == Speculate::PromptLookup)
            .then(|| decode::PromptLookup { max_draft: a.draft_tokens, ..Default::default() }),
        draft_model: None,
    })
}

/// Generates (the best beam, streamed, or whole) and writes the text to stdout.
fn decode_to_stdout(
    a: &GenerateArgs,
    model: &mut strictly::model::CandleModel,
    vocab: &strictly::Vocab,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    opts: &GenerateOptions,
) -> anyhow::Result<Output> {
    let mut stdout = std::io::stdout().lock();
    let out = if let Some(width) = a.beam_width {
        let beam = BeamOptions { width, ..BeamOptions::default() };
        let hyps = decode::beam_search(&*model, vocab, matcher, prompt, opts, &beam)?;
        let best = hyps.into_iter().next().ok_or_else(|| anyhow!("beam search finished no output"))?;
        stdout.write_all(best.output.text().as_bytes())?;
        best.output
    } else if a.stream {
        let mut werr = None;
        let out = decode::generate_stream(model, vocab, matcher, prompt, opts, |ev| {
            if let (Event::Text(t), None) = (ev, &werr) {
                if let Err(e) = stdout.write_all(t.as_bytes()).and_then(|_| stdout.flush()) {
                    werr = Some(e);
                }
            }
        })?;
        if let Some(e) = werr {
            return Err(e.into());
        }
        out
    } else {
        let out = decode::generate(model, vocab, matcher, prompt, opts)?;
        stdout.write_all(out.text().as_bytes())?;
        out
    };
    if std::io::stdout().is_terminal() {
        writeln!(stdout)?;
    }
    stdout.flush()?;
    Ok(out)
}

/// How long each step took (`compile`: only with a constraint).
struct Times {
    load: Duration,
    compile: Option<Duration>,
    generate: Duration,
}

/// `--verbose`: the model, the compile, prefill and decode speed, forced tokens, mask time.
fn report(
    a: &GenerateArgs,
    i: &strictly::model::ModelInfo,
    st: &strictly::model::ForwardStats,
    prompt: &[TokenId],
    out: &Output,
    times: &Times,
) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let weights =
        i.quantization.as_deref().map_or_else(|| i.precision.to_string(), |q| format!("{q}, f32 activations"));
    let threads = match i.device {
        DeviceSpec::Cpu => format!(", {} threads", strictly::model::cpu_threads()),
        DeviceSpec::Cuda(_) => String::new(),
    };
    eprintln!(
        "strictly: model {} ({}, {:.2}M parameters, {weights} on {}{threads}) loaded in {:.1} ms",
        i.name,
        i.arch,
        i.parameters as f64 / 1e6,
        i.device,
        ms(times.load)
    );
    if let Some(compile) = times.compile {
        eprintln!("strictly: constraint compiled in {:.1} ms", ms(compile));
    }
    let gen_s = times.generate.as_secs_f64();
    let n = out.tokens.len();
    if a.beam_width.is_none() {
        let decode_s = gen_s - st.prefill.as_secs_f64();
        eprintln!(
            "strictly: prompt {} tokens, prefill {:.1} ms; {n} tokens in {:.1} ms: {:.1} tokens/s after the prefill",
            prompt.len(),
            st.prefill.as_secs_f64() * 1e3,
            gen_s * 1e3,
            if decode_s > 0.0 { n.saturating_sub(1) as f64 / decode_s } else { 0.0 },
        );
    } else {
        eprintln!("strictly: prompt {} tokens; best beam {n} tokens in {:.1} ms", prompt.len(), gen_s * 1e3);
    }
    eprintln!(
        "strictly: {} forward passes, {} tokens forced (forward passes saved by fast-forward); finish: {:?}",
        out.forward_passes, out.forced, out.finish_reason
    );
    let s = &out.speculation;
    if s.passes > 0 {
        eprintln!(
            "strictly: speculation: {} passes carried drafts, {} draft tokens run, {} kept ({:.2} tokens per forward pass)",
            s.passes,
            s.drafted,
            s.accepted,
            n as f64 / out.forward_passes.max(1) as f64
        );
    }
    if times.compile.is_some() {
        let m = &out.masks;
        eprintln!(
            "strictly: {} masks in {:.1} ms ({:.1} us each); {} overlapped with a forward pass, {} passes rewound",
            m.count,
            m.time.as_secs_f64() * 1e3,
            m.time.as_secs_f64() * 1e6 / m.count.max(1) as f64,
            m.overlapped,
            m.rewound
        );
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;
    use strictly::sample::{SamplingOverrides, SamplingParams};

    use super::*;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: GenerateArgs,
    }

    fn flags(extra: &[&str]) -> SamplingParams {
        let defaults = defaults();
        let argv = ["strictly-generate", "--prompt", "p"].iter().chain(extra);
        options(&Cmd::try_parse_from(argv).unwrap().args, &defaults).unwrap().sampling
    }

    fn request(fields: serde_json::Value) -> SamplingParams {
        let common: strictly::server::api::Common = serde_json::from_value(fields).unwrap();
        common.plan(&defaults(), None, (false, 0), None).unwrap().opts.sampling
    }

    fn defaults() -> GenerationDefaults {
        GenerationDefaults::from_json(
            &json!({"temperature": 0.6, "top_k": 40, "top_p": 0.95, "repetition_penalty": 1.1}),
        )
    }

    /// The knobs written once ([`SamplingOverrides`]) mean the same from the three places that
    /// set them: `generation_config.json`, the `generate` flags, and a request's fields.
    #[test]
    fn flags_request_fields_and_generation_config_set_the_same_knobs() {
        // Nothing given: the model's defaults, everywhere.
        assert_eq!(flags(&[]), defaults().sampling());
        assert_eq!(request(json!({})), defaults().sampling());
        // Every knob given.
        let from_flags = flags(&[
            "--temperature",
            "0.7",
            "--top-k",
            "5",
            "--top-p",
            "0.9",
            "--min-p",
            "0.05",
            "--top-n-sigma",
            "1.5",
            "--repetition-penalty",
            "1.2",
            "--frequency-penalty",
            "0.3",
            "--presence-penalty",
            "-0.4",
            "--dry-multiplier",
            "0.8",
            "--dry-allowed-length",
            "3",
            "--dry-penalty-last-n",
            "-1",
            "--dry-sequence-breaker",
            "\n",
            "--seed",
            "7",
        ]);
        let from_request = request(json!({
            "temperature": 0.7, "top_k": 5, "top_p": 0.9, "min_p": 0.05, "top_n_sigma": 1.5,
            "repetition_penalty": 1.2, "frequency_penalty": 0.3, "presence_penalty": -0.4, "seed": 7,
            "dry_multiplier": 0.8, "dry_allowed_length": 3, "dry_penalty_last_n": -1, "dry_sequence_breakers": ["\n"]
        }));
        let expected = SamplingParams {
            temperature: 0.7,
            top_k: Some(5),
            top_p: 0.9,
            min_p: 0.05,
            top_n_sigma: Some(1.5),
            repetition_penalty: 1.2,
            frequency_penalty: 0.3,
            presence_penalty: -0.4,
            dry_multiplier: 0.8,
            dry_allowed_length: 3,
            dry_sequence_breakers: vec!["\n".into()],
            seed: Some(7),
            ..SamplingParams::default()
        };
        assert_eq!(from_flags, expected);
        assert_eq!(from_request, expected);
        // generation_config.json's knobs, laid over the plain defaults the same way.
        let config =
            GenerationDefaults::from_json(&json!({"temperature": 0.7, "top_k": 5, "top_p": 0.9, "min_p": 0.05}));
        let five = SamplingOverrides {
            temperature: Some(0.7),
            top_k: Some(5),
            top_p: Some(0.9),
            min_p: Some(0.05),
            ..Default::default()
        };
        assert_eq!(config.sampling(), five.over(SamplingParams::default()));
        // Top-k off: `--top-k 0`, `"top_k": 0` and vLLM's `-1` all switch off the default's 40.
        assert_eq!(flags(&["--top-k", "0"]).top_k, None);
        assert_eq!(request(json!({"top_k": 0})).top_k, None);
        assert_eq!(request(json!({"top_k": -1})).top_k, None);
        // Greedy: `--greedy` is temperature 0, as a request's `"temperature": 0`.
        assert_eq!(flags(&["--greedy", "--temperature", "0.9"]), request(json!({"temperature": 0})));
    }
}
