//! A two-tool agent loop over the embedded model: `cargo run --example agent`.
//!
//! The model is offered a calculator and a clock. Its calls come back typed; the loop runs
//! them for real (the calculator evaluates the expression the model wrote, the clock reads the
//! system time), feeds the results back as `tool` turns, and asks again until the model answers
//! in text. The embedded stories260K model is tiny, so it is steered with `ToolChoice::Named`
//! for the first two turns; a real chat model would be left on `Auto`.

use std::time::{SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::Deserialize;
use strictly::{ChatMessage, Engine, GenerateOptions, ToolChoice, Tools};

/// Arguments of the calculator.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Calculate {
    /// Whole numbers joined by `+`, `-` or `*`, e.g. `12 + 7 * 3`.
    #[schemars(regex(pattern = r"^[1-9][0-9]{0,3}( [-+*] [1-9][0-9]{0,3}){1,3}$"))]
    expression: String,
}

/// Arguments of the clock: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Clock {}

// The calculator: the evaluator of `grammars/arithmetic.gbnf` shared with the tests (the
// expressions the schema above allows are a subset of that grammar's language).
#[path = "shared/arithmetic.rs"]
mod arithmetic;

/// Evaluates an expression the calculator's schema allows (`*` before `+` and `-`).
fn calculate(expr: &str) -> anyhow::Result<f64> {
    arithmetic::eval(expr).ok_or_else(|| anyhow::anyhow!("{expr:?} is not an arithmetic expression"))
}

/// The time of day in UTC.
fn clock() -> String {
    let s = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

fn main() -> anyhow::Result<()> {
    assert_eq!(calculate("2 + 3 * 4 - 5")?, 9.0);
    let engine = Engine::embedded()?;
    let tools = Tools::new()
        .function::<Calculate>("calculator", "Evaluates an arithmetic expression")?
        .function::<Clock>("clock", "Tells the current time")?;
    let mut messages = vec![
        ChatMessage::system("You are a helpful assistant."),
        ChatMessage::user("What is 12 + 30, and what time is it?"),
    ];
    let mut executed = (0, 0); // calculator, clock
    for turn in 0..6 {
        let choice = match turn {
            0 => ToolChoice::Named("calculator".into()),
            1 => ToolChoice::Named("clock".into()),
            5 => ToolChoice::None,
            _ => ToolChoice::Auto,
        };
        let budget = if turn < 2 { 160 } else { 48 }; // calls need room; text is cut short
        let opts = GenerateOptions::default().with_seed(turn).with_max_tokens(budget);
        let reply = engine.choose(&messages, &tools, &choice, &opts)?;
        messages.push(reply.message());
        if reply.calls.is_empty() {
            println!("turn {turn} ({choice:?}): the model answers {:?}", reply.text);
            break;
        }
        for call in &reply.calls {
            let result = match call.name.as_str() {
                "calculator" => {
                    let args: Calculate = call.args()?;
                    executed.0 += 1;
                    format!("{} = {}", args.expression, calculate(&args.expression)?)
                }
                "clock" => {
                    let _: Clock = call.args()?;
                    executed.1 += 1;
                    clock()
                }
                other => anyhow::bail!("the model called an unknown tool {other:?}"),
            };
            println!("turn {turn} ({choice:?}): {}({}) -> {result}", call.name, call.arguments);
            messages.push(call.result(result));
        }
    }
    assert!(executed.0 >= 1 && executed.1 >= 1, "both tools ran: {executed:?}");
    // Every result went back to the model: the next prompt holds each tool turn.
    let prompt = engine.chat_prompt(&messages, &tools, &ToolChoice::Auto)?;
    for m in messages.iter().filter(|m| m.role == "tool") {
        assert!(prompt.contains(&m.content), "the prompt lacks the result {:?}", m.content);
    }
    println!("agent: ok ({} calculator and {} clock calls executed)", executed.0, executed.1);
    Ok(())
}
