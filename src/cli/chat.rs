//! `strictly chat`: an interactive chat in the terminal over any model (the embedded one by
//! default), through its chat template, the replies streamed to stdout.
//!
//! A line is a user turn, or a command: `/schema FILE` (replies are JSON of that schema),
//! `/regex RE` (replies match it), `/tools FILE` (a JSON array of OpenAI-style tools: the model
//! may call them; calls are printed, not run), any of them without an argument to switch it off,
//! `/reset` (forget the conversation, keep the settings), `/help`, `/exit` (or end of input).
//! The history is kept: each reply goes back into the next turn's prompt. Ctrl-C stops the reply
//! being written (what it wrote so far stays in the history); at the prompt it ends the program.
//! Prompts and notices go to stderr, replies to stdout, so a pipe gets the replies alone.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Context};
use clap::Args;
use serde_json::Value;
use strictly::automaton::{Compiled, Constraint};
use strictly::decode::{Event, GenerateOptions, Generation};
use strictly::model::{ChatMessage, ContentTokens, DeviceSpec, LoadOptions, LoadedModel, TemplateVars};
use strictly::{Engine, StreamEvent, ToolChoice, Tools};

use super::{ChatTemplateArgs, SamplingArgs};

#[derive(Args)]
pub struct ChatArgs {
    /// A GGUF file, a Hugging Face model directory, or a directory holding one .gguf file
    /// [default: the embedded stories260K model].
    #[arg(long)]
    model: Option<PathBuf>,
    #[command(flatten)]
    chat_template: ChatTemplateArgs,
    /// A system message at the start of the conversation.
    #[arg(long)]
    system: Option<String>,
    /// Most tokens per reply (a constrained reply cut here is still complete).
    #[arg(long, default_value_t = 512)]
    max_tokens: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// CPU threads for the forward pass.
    #[arg(long)]
    threads: Option<usize>,
}

const HELP: &str = "commands: /schema FILE, /regex RE, /tools FILE (no argument: off), /reset, /help, /exit";

/// What the next replies are held to.
#[derive(Default)]
struct Settings {
    /// `/schema` or `/regex`, and how it was given (for notices).
    constraint: Option<(Constraint, String)>,
    tools: Option<Tools>,
}

pub fn run(a: ChatArgs) -> anyhow::Result<()> {
    let device: DeviceSpec = a.device.parse()?;
    let mut loaded =
        LoadedModel::load(a.model.as_deref(), &LoadOptions { device, precision: None, threads: a.threads })?;
    a.chat_template.apply(&mut loaded)?;
    let sampling = a.sampling.overrides().over(loaded.defaults.sampling());
    sampling.validate()?;
    let opts = GenerateOptions {
        max_tokens: a.max_tokens,
        sampling,
        stop_token_ids: loaded.defaults.eos.clone(),
        ..GenerateOptions::default()
    };
    let engine = Engine::from_loaded(loaded);
    let interrupt = Interrupt::install();
    let start: Vec<ChatMessage> = a.system.iter().map(ChatMessage::system).collect();
    let mut history = start.clone();
    let mut settings = Settings::default();
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!("strictly chat with {} ({HELP}; Ctrl-C stops a reply)", engine.loaded().info.name);
    }
    let mut line = String::new();
    let mut input = std::io::stdin().lock();
    loop {
        if interactive {
            eprint!("> ");
            std::io::stderr().flush()?;
        }
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        let text = line.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        if let Some(cmd) = text.strip_prefix('/') {
            let (name, arg) = cmd.split_once(' ').map_or((cmd, ""), |(n, r)| (n, r.trim()));
            match name {
                "exit" | "quit" => break,
                "help" => eprintln!("strictly: {HELP}"),
                "reset" => {
                    history.clone_from(&start);
                    eprintln!("strictly: the conversation is forgotten");
                }
                "schema" | "regex" | "tools" => match set(&engine, &mut settings, name, arg) {
                    Ok(notice) => eprintln!("strictly: {notice}"),
                    Err(e) => eprintln!("strictly: error: {e:#}"),
                },
                _ => eprintln!("strictly: error: unknown command /{name} ({HELP})"),
            }
            continue;
        }
        history.push(ChatMessage::user(text));
        interrupt.busy(true);
        let replied = reply(&engine, &history, &settings, &opts, &interrupt);
        interrupt.busy(false);
        match replied {
            Ok(turn) => history.push(turn),
            Err(e) => {
                // The turn is taken back: the next one starts where this one did.
                history.pop();
                eprintln!("strictly: error: {e:#}");
            }
        }
    }
    Ok(())
}

/// `/schema`, `/regex` or `/tools` with its argument (empty: off); the notice to print.
fn set(engine: &Engine, s: &mut Settings, name: &str, arg: &str) -> anyhow::Result<String> {
    if arg.is_empty() {
        match name {
            "tools" => s.tools = None,
            _ => s.constraint = None,
        }
        return Ok(format!("/{name} is off"));
    }
    match name {
        "schema" => {
            let schema = read_json(arg)?;
            let c = Constraint::JsonSchema(schema, Default::default());
            Compiled::new(engine.env(), &c)?;
            s.constraint = Some((c, format!("the schema in {arg}")));
            Ok(format!("replies follow the schema in {arg}"))
        }
        "regex" => {
            let c = Constraint::Regex(arg.to_string());
            Compiled::new(engine.env(), &c)?;
            s.constraint = Some((c, format!("the regex {arg}")));
            Ok(format!("replies match {arg}"))
        }
        _ => {
            let Value::Array(list) = read_json(arg)? else {
                return Err(anyhow!("{arg}: expected a JSON array of tools"));
            };
            let mut tools = Tools::new();
            for (i, t) in list.iter().enumerate() {
                let f = t.get("function").unwrap_or(t);
                let name = f["name"].as_str().ok_or_else(|| anyhow!("{arg}: tool {i} has no \"name\""))?;
                let desc = f["description"].as_str().unwrap_or("");
                let params = f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({"type": "object"}));
                tools = tools.function_schema(name, desc, params).with_context(|| format!("{arg}: tool {name}"))?;
            }
            let names = tools.names().join(", ");
            s.tools = Some(tools);
            Ok(format!("the model may call {names}"))
        }
    }
}

fn read_json(path: &str) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    serde_json::from_str(&text).with_context(|| format!("{path} is not valid JSON"))
}

/// One reply, streamed to stdout; the assistant turn it makes.
fn reply(
    engine: &Engine,
    history: &[ChatMessage],
    s: &Settings,
    opts: &GenerateOptions,
    interrupt: &Interrupt,
) -> anyhow::Result<ChatMessage> {
    let mut out = std::io::stdout().lock();
    if let Some(tools) = &s.tools {
        if s.constraint.is_some() {
            eprintln!("strictly: note: with /tools on, /schema and /regex wait until /tools is off");
        }
        let mut stream = engine.choose_stream(history, tools, &ToolChoice::Auto, opts)?;
        let mut done = None;
        for ev in &mut stream {
            match ev? {
                StreamEvent::Reasoning(_) => {}
                StreamEvent::Text(t) => write!(out, "{t}")?,
                StreamEvent::CallStart { name, .. } => write!(out, "\n[call {name} ")?,
                StreamEvent::CallArgs { text, .. } => write!(out, "{text}")?,
                StreamEvent::Done(r) => done = Some(r),
            }
            out.flush()?;
            if interrupt.stopped() {
                break;
            }
        }
        writeln!(out, "{}", if done.as_ref().is_some_and(|r| !r.calls.is_empty()) { "]" } else { "" })?;
        return match done {
            Some(r) => Ok(r.message()),
            None => {
                stream.cancel();
                Ok(ChatMessage::assistant(""))
            }
        };
    }
    let loaded = engine.loaded();
    let p = &loaded.prompt;
    let rendered = p.render_chat_prompt_with_vars(history, &[], true, ContentTokens::Text, &TemplateVars::new())?;
    let prompt = p.encode_prompt(&rendered)?;
    let constraint = s.constraint.as_ref().map(|(c, _)| match p.reasoning_after(&rendered.text()) {
        Some(r) => r.constrain(c.clone()),
        None => c.clone(),
    });
    let compiled = constraint.map(|c| Compiled::new(engine.env(), &c)).transpose()?;
    let mut matcher = compiled.map(|c| c.matcher());
    let mut model = loaded.model.restart();
    let mut text = String::new();
    let g = Generation::new(&mut model, loaded.vocab(), matcher.as_mut(), &prompt, opts)?;
    for ev in g {
        if let Event::Text(t) = ev? {
            write!(out, "{t}")?;
            out.flush()?;
            text.push_str(&t);
        }
        if interrupt.stopped() {
            break;
        }
    }
    writeln!(out)?;
    Ok(ChatMessage::assistant(text))
}

/// Ctrl-C: while a reply is written it asks the reply to stop; at the prompt it ends the
/// program (exit status 130). Without the `server` feature (no signal handling) Ctrl-C ends the
/// program as usual.
struct Interrupt {
    stop: Arc<AtomicBool>,
    busy: Arc<AtomicBool>,
}

impl Interrupt {
    fn install() -> Interrupt {
        let (stop, busy) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        #[cfg(feature = "server")]
        {
            let (stop, busy) = (stop.clone(), busy.clone());
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(rt) = rt {
                std::thread::spawn(move || {
                    rt.block_on(async {
                        while tokio::signal::ctrl_c().await.is_ok() {
                            if !busy.load(Ordering::SeqCst) {
                                eprintln!();
                                std::process::exit(130);
                            }
                            stop.store(true, Ordering::SeqCst);
                        }
                    })
                });
            }
        }
        Interrupt { stop, busy }
    }

    fn busy(&self, on: bool) {
        self.stop.store(false, Ordering::SeqCst);
        self.busy.store(on, Ordering::SeqCst);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}
