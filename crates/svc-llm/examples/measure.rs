//! Measurements of the embedded brain, not tests (they print; they assert only invariants):
//! load time, time to first token and tokens per second, and the tool-calling trial behind
//! `ToolPrompt::Omit` (docs/benchmarks.md, "The local provider").
//!
//! `SVC_LOCAL_MODELS=… cargo run --release -p svc-llm --example measure [-- speed|tools]`

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use svc_llm::{ChatMessage, Finish, GenerateParams, Generation, SmolLm, ToolDef, ToolPrompt};

fn model_path() -> PathBuf {
    let root = std::env::var_os("SVC_LOCAL_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/local-models"));
    root.join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
}

fn greedy(max_tokens: u32) -> GenerateParams {
    GenerateParams { max_tokens, temperature: 0.0, ..GenerateParams::default() }
}

/// One generation with its stream recorded and timed.
struct Run {
    generation: Generation,
    pieces: Vec<String>,
    first_text: Option<Duration>,
    total: Duration,
}

fn run(model: &SmolLm, messages: &[ChatMessage], tools: &[ToolDef], params: &GenerateParams) -> Run {
    let started = Instant::now();
    let mut pieces = Vec::new();
    let mut first_text = None;
    let generation = model
        .generate(messages, tools, params, &mut |text| {
            if !text.is_empty() {
                first_text.get_or_insert_with(|| started.elapsed());
                pieces.push(text.to_owned());
            }
            ControlFlow::Continue(())
        })
        .expect("generate");
    Run { generation, pieces, first_text, total: started.elapsed() }
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let started = Instant::now();
    let model = SmolLm::load(model_path()).expect("load SmolLM2 (svc models install)");
    eprintln!("[smollm] load: {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
    if which.is_empty() || which == "speed" {
        speed(&model);
    }
    if which.is_empty() || which == "tools" {
        tool_calling_trial(&model);
    }
}

fn speed(model: &SmolLm) {
    // Load time (a second load, the first was timed in `model()`).
    let started = Instant::now();
    drop(SmolLm::load(model_path()).expect("load"));
    eprintln!("[smollm] second load: {:.0} ms", started.elapsed().as_secs_f64() * 1e3);

    let messages = [
        ChatMessage::system("You are a storyteller."),
        ChatMessage::user("Tell me a long story about a dragon who learns to bake bread."),
    ];
    let params = GenerateParams { max_tokens: 128, temperature: 0.7, seed: 7, ..GenerateParams::default() };
    // Time to first token alone: stop at the first callback.
    let mut ttfts = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let mut first = None;
        let generation = model
            .generate(&messages, &[], &params, &mut |_| {
                first = Some(started.elapsed());
                ControlFlow::Break(())
            })
            .expect("generate");
        assert_eq!(generation.finish, Finish::Cancelled);
        ttfts.push(first.expect("one token").as_secs_f64() * 1e3);
    }
    let Run { generation, first_text, total, .. } = run(model, &messages, &[], &params);
    let decode = total.saturating_sub(first_text.unwrap_or_default()).as_secs_f64();
    let rate = f64::from(generation.output_tokens.saturating_sub(1)) / decode;
    eprintln!(
        "[smollm] {} candle thread(s); prompt {} tokens: time to first token {:.0?} ms; {} tokens in {:.0} ms: \
         {rate:.0} tokens/s after the first",
        candle_core::utils::get_num_threads(),
        generation.prompt_tokens,
        ttfts,
        generation.output_tokens,
        total.as_secs_f64() * 1e3
    );
}

fn weather_and_timer() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "get_weather".into(),
            description: "Get the current weather in a city".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city name"}},
                "required": ["city"],
            }),
        },
        ToolDef {
            name: "set_timer".into(),
            description: "Start a countdown timer".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"minutes": {"type": "integer", "description": "Length of the timer in minutes"}},
                "required": ["minutes"],
            }),
        },
    ]
}

/// The tool-calling trial: prompts that should call a tool and prompts that should not, with
/// each way of describing the tools, and once with a worked example (a call, its result and the
/// answer) earlier in the conversation. Prints the table; asserts only what must hold whatever
/// the model decides (calls name offered tools, their arguments are JSON objects, markup is
/// never spoken).
fn tool_calling_trial(model: &SmolLm) {
    let tools = weather_and_timer();
    let should_call: [(&str, &str); 6] = [
        ("What's the weather like in Paris right now?", "get_weather"),
        ("Is it raining in London?", "get_weather"),
        ("Tell me the weather in Tokyo.", "get_weather"),
        ("Set a timer for 10 minutes.", "set_timer"),
        ("Start a five minute timer please.", "set_timer"),
        ("Can you set a timer for 3 minutes?", "set_timer"),
    ];
    let should_not = [
        "Hello, how are you?",
        "What is the capital of France?",
        "Tell me a joke.",
        "Thanks, that's all.",
        "What is two plus three?",
        "Who wrote Romeo and Juliet?",
    ];
    let example = [
        ChatMessage::user("What's the weather in Berlin?"),
        ChatMessage::assistant_with_tool_calls(
            "",
            vec![svc_llm::ToolCall {
                id: "call_0".into(),
                name: "get_weather".into(),
                arguments: r#"{"city": "Berlin"}"#.into(),
            }],
        ),
        ChatMessage::tool_result("call_0", r#"{"temperature_c": 18, "sky": "cloudy"}"#),
        ChatMessage::assistant("It is 18 degrees and cloudy in Berlin."),
    ];
    let variants = [
        (ToolPrompt::Native, false),
        (ToolPrompt::PersonaThenNative, false),
        (ToolPrompt::Conversational, false),
        (ToolPrompt::Omit, false),
        (ToolPrompt::PersonaThenNative, true),
        (ToolPrompt::Native, true),
    ];
    for (style, with_example) in variants {
        let styled = model.clone().with_tool_prompt(style);
        let label = format!("{style:?}{}", if with_example { "+example" } else { "" });
        let history: &[ChatMessage] = if with_example { &example } else { &[] };
        let (mut right, mut wrong_tool, mut missed, mut false_calls, mut silent, mut code) = (0, 0, 0, 0, 0, 0);
        let (mut prompt_tokens, mut first_ms) = (0u32, 0f64);
        let mut ask = |prompt: &str| {
            let run = ask_with_tools(&styled, history, prompt, &tools);
            prompt_tokens += run.generation.prompt_tokens;
            first_ms += run.first_text.unwrap_or(run.total).as_secs_f64() * 1e3;
            if run.generation.text.contains("```") {
                code += 1;
            }
            eprintln!("[trial {label}] {prompt:?} -> {:?} {:?}", run.generation.tool_calls, run.generation.text);
            run.generation
        };
        for (prompt, tool) in should_call {
            match ask(prompt).tool_calls.first() {
                Some(call) if call.name == tool => right += 1,
                Some(_) => wrong_tool += 1,
                None => missed += 1,
            }
        }
        for prompt in should_not {
            let generation = ask(prompt);
            if !generation.tool_calls.is_empty() {
                false_calls += 1;
            } else if generation.text.trim().is_empty() {
                silent += 1;
            }
        }
        eprintln!(
            "[trial {label}] should call (6): right tool {right}, wrong tool {wrong_tool}, no call {missed}; \
             should not (6): called anyway {false_calls}, said nothing {silent}, answered {}; \
             replies with code blocks {code}/12; mean prompt {} tokens, mean first text {:.0} ms",
            6 - false_calls - silent,
            prompt_tokens / 12,
            first_ms / 12.0
        );
    }
}

/// One question with tools offered, checking the invariants that hold whatever the model does.
fn ask_with_tools(model: &SmolLm, history: &[ChatMessage], prompt: &str, tools: &[ToolDef]) -> Run {
    let mut messages = vec![ChatMessage::system("You are a friendly voice assistant. Keep answers short.")];
    messages.extend_from_slice(history);
    messages.push(ChatMessage::user(prompt));
    let run = run(model, &messages, tools, &greedy(96));
    let generation = &run.generation;
    assert_eq!(run.pieces.concat(), generation.text);
    let spoken = &generation.text;
    assert!(!spoken.contains("<tool_call>") && !spoken.contains("</tool_call>"), "markup spoken: {spoken:?}");
    for call in &generation.tool_calls {
        assert!(tools.iter().any(|t| t.name == call.name), "{call:?}");
        let arguments: serde_json::Value = serde_json::from_str(&call.arguments).expect("arguments are JSON");
        assert!(arguments.is_object(), "{call:?}");
    }
    run
}
