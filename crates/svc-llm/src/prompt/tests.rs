//! ChatML rendering and the budget, with a toy encoder of one token per character.

use super::*;
use crate::types::ToolCall;

/// One token per character (id = code point + 100); ids 1 and 2 are the turn markers.
struct Chars;

impl Encode for Chars {
    fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        Ok(text.chars().map(|c| c as u32 + 100).collect())
    }
}

const CHATML: ChatMl = ChatMl { im_start: 1, im_end: 2 };

/// The prompt as text, markers spelled out.
fn show(ids: &[u32]) -> String {
    ids.iter()
        .map(|&id| match id {
            1 => "<|im_start|>".to_owned(),
            2 => "<|im_end|>".to_owned(),
            id => char::from_u32(id - 100).expect("a character").to_string(),
        })
        .collect()
}

#[test]
fn messages_render_as_chatml() {
    let messages = [
        ChatMessage::system("Be brief."),
        ChatMessage::user("Hi <|im_end|> there"),
        ChatMessage::assistant("Hello."),
        ChatMessage::user("Bye"),
    ];
    let prompt = build(&Chars, CHATML, &messages, 10_000).expect("prompt");
    assert_eq!(
        show(&prompt.ids),
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi <|im_end|> there<|im_end|>\n\
         <|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"
    );
    // The marker typed by the user is characters, not the marker token.
    assert_eq!(prompt.ids.iter().filter(|&&id| id == CHATML.im_end).count(), 4);
    assert_eq!(prompt.dropped, 0);
}

#[test]
fn tool_calls_and_results_render_as_smollm2_expects() {
    let call = ToolCall { id: "c1".into(), name: "get_weather".into(), arguments: r#"{"city": "Paris"}"#.into() };
    let messages = [
        ChatMessage::user("Weather?"),
        ChatMessage::assistant_with_tool_calls("", vec![call]),
        ChatMessage::tool_result("c1", "sunny"),
    ];
    let prompt = build(&Chars, CHATML, &messages, 10_000).expect("prompt");
    assert_eq!(
        show(&prompt.ids),
        "<|im_start|>user\nWeather?<|im_end|>\n\
         <|im_start|>assistant\n<tool_call>[\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n]</tool_call><|im_end|>\n\
         <|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    );
    // Arguments that are not JSON are passed as a string rather than breaking the markup.
    let odd = ToolCall { id: "c".into(), name: "f".into(), arguments: "not json".into() };
    let (_, text) = render(&ChatMessage::assistant_with_tool_calls("Sure.", vec![odd]));
    assert_eq!(text, "Sure.\n<tool_call>[\n{\"name\": \"f\", \"arguments\": \"not json\"}\n]</tool_call>");
}

fn conversation(turns: usize) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::system("SYSTEM")];
    for i in 0..turns {
        messages.push(ChatMessage::user(format!("question {i:03}")));
        messages.push(ChatMessage::assistant(format!("answer {i:03}")));
    }
    messages.push(ChatMessage::user("last question"));
    messages
}

#[test]
fn the_oldest_turns_go_first_and_the_system_prompt_stays() {
    let messages = conversation(50);
    let full = build(&Chars, CHATML, &messages, usize::MAX).expect("prompt").ids.len();
    let budget = 300;
    assert!(full > budget);
    let prompt = build(&Chars, CHATML, &messages, budget).expect("prompt");
    let text = show(&prompt.ids);
    assert!(prompt.ids.len() <= budget, "{} tokens", prompt.ids.len());
    assert!(text.starts_with("<|im_start|>system\nSYSTEM<|im_end|>\n<|im_start|>user\nquestion "), "{text}");
    assert!(text.ends_with("<|im_start|>user\nlast question<|im_end|>\n<|im_start|>assistant\n"));
    assert!(text.contains("answer 049"));
    assert!(!text.contains("question 000"));
    // Whole turns were dropped, the newest kept: what remains is a suffix of the conversation.
    let kept = messages.len() - prompt.dropped as usize;
    let tail = build(&Chars, CHATML, &[&messages[..1], &messages[messages.len() + 1 - kept..]].concat(), usize::MAX)
        .expect("prompt");
    assert_eq!(tail.ids, prompt.ids);
    // Dropped in steps of DROP_STEP, no more than needed: DROP_STEP messages fewer would not fit.
    assert_eq!(prompt.dropped as usize % DROP_STEP, 0);
    let fewer = kept - 1 + DROP_STEP;
    let one_step_less =
        build(&Chars, CHATML, &[&messages[..1], &messages[messages.len() - fewer..]].concat(), usize::MAX)
            .expect("prompt");
    assert!(one_step_less.ids.len() > budget);
}

#[test]
fn consecutive_turns_mostly_share_their_beginning() {
    // A conversation growing by one exchange per turn, past the budget: the prompt of a turn is
    // the start of the next one's (so the model state can be reused) in most turns.
    let budget = 300;
    let prompts: Vec<Vec<u32>> = (20..40)
        .map(|turns| {
            let ids = build(&Chars, CHATML, &conversation(turns), budget).expect("prompt").ids;
            assert!(ids.len() <= budget);
            ids
        })
        .collect();
    // The previous prompt without its last user turn and the assistant header is a prefix of
    // the next (whose last turns are new).
    let shared = prompts
        .windows(2)
        .filter(|pair| {
            let header = pair[0].iter().rposition(|&id| id == CHATML.im_start).expect("header");
            let last_user = pair[0][..header].iter().rposition(|&id| id == CHATML.im_start).expect("turn");
            pair[1].starts_with(&pair[0][..last_user])
        })
        .count();
    let turns = prompts.len() - 1;
    // A cut moves by DROP_STEP messages (four exchanges): about one turn in four starts anew.
    assert!(shared * 3 >= turns * 2, "only {shared} of {turns} turns share their beginning");
}

#[test]
fn after_a_cut_the_history_opens_with_a_user_turn() {
    let mut messages = vec![ChatMessage::system("S"), ChatMessage::user("u1 long long long long long")];
    messages.push(ChatMessage::assistant("a1"));
    messages.push(ChatMessage::tool_result("c", "r1"));
    messages.push(ChatMessage::user("u2"));
    // Room for everything but the first user turn: the reply and the result that followed it
    // go too.
    let without_u1 = build(&Chars, CHATML, &[&messages[..1], &messages[2..]].concat(), usize::MAX).expect("prompt");
    let prompt = build(&Chars, CHATML, &messages, without_u1.ids.len()).expect("prompt");
    assert_eq!(prompt.dropped, 3);
    assert_eq!(
        show(&prompt.ids),
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nu2<|im_end|>\n<|im_start|>assistant\n"
    );
    // Without a cut an assistant may speak first (a greeting).
    let greeting = [ChatMessage::system("S"), ChatMessage::assistant("Hello!"), ChatMessage::user("Hi")];
    assert_eq!(build(&Chars, CHATML, &greeting, 10_000).expect("prompt").dropped, 0);
}

#[test]
fn a_last_message_too_long_keeps_its_end() {
    let long = format!("{}THE END", "x".repeat(500));
    let messages = [ChatMessage::system("S"), ChatMessage::user("old"), ChatMessage::user(long)];
    let prompt = build(&Chars, CHATML, &messages, 100).expect("prompt");
    let text = show(&prompt.ids);
    assert_eq!(prompt.ids.len(), 100);
    assert_eq!(prompt.dropped, 1);
    assert!(text.starts_with("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nxxx"), "{text}");
    assert!(text.ends_with("xxTHE END<|im_end|>\n<|im_start|>assistant\n"), "{text}");
}

#[test]
fn a_system_prompt_over_the_budget_is_an_error() {
    let messages = [ChatMessage::system("s".repeat(200)), ChatMessage::user("hi")];
    match build(&Chars, CHATML, &messages, 100) {
        Err(LlmError::PromptTooLong { needed, budget: 100 }) => assert!(needed > 100),
        other => panic!("{other:?}"),
    }
}
