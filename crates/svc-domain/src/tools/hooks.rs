//! Server hooks (`agent.hooks`, spec "Server hooks (SilenceTimeout)"): every problem is a
//! validation issue with its exact `loc`, as hooks have no typed code of their own.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use svc_wire::Loc;

use crate::limits::HOOKS_MAX;
use crate::parse::{Fields, Issues, index};

/// The only hook trigger: the user stayed silent after the assistant finished speaking.
pub const HOOK_TRIGGER: &str = "user.speech.timeout";
/// Shortest hook timeout, in seconds: the minimum of Vapi's `timeoutSeconds` schema.
pub const HOOK_TIMEOUT_MIN_SECONDS: f64 = 1.0;
/// Longest hook timeout, in seconds: Vapi's `silenceTimeoutSeconds` ceiling (one hour); longer
/// silences are better bounded by `max_session_seconds`.
pub const HOOK_TIMEOUT_MAX_SECONDS: f64 = 3600.0;
/// Largest `max_count`: Vapi's `triggerMaxCount` ceiling. More reminders are staggered hooks.
pub const HOOK_MAX_COUNT_MAX: u32 = 10;
/// Firings of a hook when `max_count` is absent: Vapi's `triggerMaxCount` default.
pub const HOOK_MAX_COUNT_DEFAULT: u32 = 3;
/// Longest `say` text or prompt and `end_call` farewell, in characters (the spec's farewell bound).
pub const HOOK_TEXT_MAX_CHARS: usize = 4096;
/// Longest hook `name`, in characters (same as a client tool name).
pub const HOOK_NAME_MAX_CHARS: usize = 64;

/// A parsed SilenceTimeout hook: when the user stays silent for `timeout_seconds` after the
/// assistant finished speaking, the server performs `action`, at most `max_count` times.
/// Serializes in the wire spelling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SilenceHook {
    /// Always `user.speech.timeout`, the one trigger.
    pub trigger: HookTrigger,
    /// A label for logs and the caller's own bookkeeping, 1 to 64 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Silence before the action, in seconds: 1 to 3600, fractions allowed.
    pub timeout_seconds: f64,
    /// What the server does.
    pub action: HookAction,
    /// Most firings, 1 to 10; absent means [`HOOK_MAX_COUNT_DEFAULT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_count: Option<u32>,
    /// When the firing counter starts over.
    #[serde(default)]
    pub reset_mode: ResetMode,
}

impl SilenceHook {
    /// `max_count`, or [`HOOK_MAX_COUNT_DEFAULT`] when absent (the `user-speech-timeout` event
    /// always carries a number).
    pub fn effective_max_count(&self) -> u32 {
        self.max_count.unwrap_or(HOOK_MAX_COUNT_DEFAULT)
    }
}

/// What starts a hook's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HookTrigger {
    /// `user.speech.timeout`: the clock starts when the assistant finishes speaking and stops when
    /// the user speaks.
    #[serde(rename = "user.speech.timeout")]
    UserSpeechTimeout,
}

/// What a hook does when it fires. Also the `action` of the `user-speech-timeout` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HookAction {
    /// Speak: `text` as written (it wins when both are given), else a line the model phrases
    /// from `prompt`, else one it phrases to check the user is still there (the spec makes both
    /// fields optional).
    Say {
        /// Exact words to speak, 1 to 4096 characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// An instruction from which the model phrases the line itself, 1 to 4096 characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
    },
    /// End the call, after speaking `farewell` (1 to 4096 characters) if present.
    EndCall {
        /// Parting line; absent ends the call without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        farewell: Option<String>,
    },
}

/// When a hook's firing counter (`trigger_count`) starts over. The silence clock itself always
/// re-arms after every assistant turn; only the counter is governed here. Values and meaning follow
/// Vapi's `triggerResetMode` (`never`, `onUserSpeech`), in this API's snake_case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetMode {
    /// `never` (default): firings count over the whole session; after `max_count` the hook is
    /// spent.
    #[default]
    Never,
    /// `on_user_speech`: the counter returns to 0 whenever the user speaks, so the hook may fire
    /// `max_count` times per stretch of silence.
    OnUserSpeech,
}

impl ResetMode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetMode::Never => "never",
            ResetMode::OnUserSpeech => "on_user_speech",
        }
    }
}

/// Parses `agent.hooks` (the value at `loc`; null means no hooks), recording every problem in
/// `issues` with its exact `loc`. The hooks are the session's only if no issue was recorded.
pub fn parse_hooks(value: &Value, loc: &Loc, issues: &mut Issues) -> Vec<SilenceHook> {
    let items = match value {
        Value::Null => return Vec::new(),
        Value::Array(items) => items,
        _ => {
            issues.push(loc, "list_type", "Input should be a valid array");
            return Vec::new();
        }
    };
    if items.len() > HOOKS_MAX {
        issues.push(loc, "too_long", format!("List should have at most {HOOKS_MAX} items"));
    }
    items.iter().enumerate().filter_map(|(position, item)| parse_hook(item, &index(loc, position), issues)).collect()
}

fn parse_hook(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<SilenceHook> {
    let mut fields = Fields::of(value, loc, issues)?;
    let trigger = match fields.raw("trigger") {
        None => {
            issues.push(&fields.loc_of("trigger"), "missing", "Field required");
            None
        }
        Some(Value::String(text)) if text == HOOK_TRIGGER => Some(HookTrigger::UserSpeechTimeout),
        Some(Value::String(_)) => {
            issues.push(&fields.loc_of("trigger"), "enum", "Input should be 'user.speech.timeout'");
            None
        }
        Some(_) => {
            issues.push(&fields.loc_of("trigger"), "string_type", "Input should be a valid string");
            None
        }
    };
    let timeout_loc = fields.loc_of("timeout_seconds");
    let timeout_seconds = match fields.raw("timeout_seconds") {
        None => {
            issues.push(&timeout_loc, "missing", "Field required");
            None
        }
        Some(Value::Number(number)) => match number.as_f64() {
            Some(seconds) if (HOOK_TIMEOUT_MIN_SECONDS..=HOOK_TIMEOUT_MAX_SECONDS).contains(&seconds) => Some(seconds),
            _ => {
                issues.push(
                    &timeout_loc,
                    "range",
                    format!("Input should be between {HOOK_TIMEOUT_MIN_SECONDS} and {HOOK_TIMEOUT_MAX_SECONDS}"),
                );
                None
            }
        },
        Some(_) => {
            issues.push(&timeout_loc, "float_type", "Input should be a valid number");
            None
        }
    };
    let action = match fields.raw("action") {
        None => {
            issues.push(&fields.loc_of("action"), "missing", "Field required");
            None
        }
        Some(action) => parse_action(action, &fields.loc_of("action"), issues),
    };
    let max_count = fields
        .optional_integer("max_count", 1, i64::from(HOOK_MAX_COUNT_MAX), issues)
        .and_then(|count| u32::try_from(count).ok());
    let reset_mode = match fields.raw("reset_mode") {
        None | Some(Value::Null) => ResetMode::default(),
        Some(Value::String(text)) if text == "never" => ResetMode::Never,
        Some(Value::String(text)) if text == "on_user_speech" => ResetMode::OnUserSpeech,
        Some(_) => {
            issues.push(&fields.loc_of("reset_mode"), "enum", "Input should be 'never' or 'on_user_speech'");
            ResetMode::default()
        }
    };
    let name = fields.optional_string("name", HOOK_NAME_MAX_CHARS, issues).map(str::to_owned);
    fields.deny_unknown(issues);
    Some(SilenceHook {
        trigger: trigger?,
        name,
        timeout_seconds: timeout_seconds?,
        action: action?,
        max_count,
        reset_mode,
    })
}

fn parse_action(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<HookAction> {
    let mut fields = Fields::of(value, loc, issues)?;
    let action = match fields.raw("type") {
        None => {
            issues.push(&fields.loc_of("type"), "missing", "Field required");
            return None;
        }
        Some(Value::String(kind)) if kind == "say" => {
            let text = fields.optional_string("text", HOOK_TEXT_MAX_CHARS, issues).map(str::to_owned);
            let prompt = fields.optional_string("prompt", HOOK_TEXT_MAX_CHARS, issues).map(str::to_owned);
            HookAction::Say { text, prompt }
        }
        Some(Value::String(kind)) if kind == "end_call" => HookAction::EndCall {
            farewell: fields.optional_string("farewell", HOOK_TEXT_MAX_CHARS, issues).map(str::to_owned),
        },
        Some(_) => {
            issues.push(&fields.loc_of("type"), "union_tag_invalid", "Input tag should be 'say' or 'end_call'");
            return None;
        }
    };
    fields.deny_unknown(issues);
    Some(action)
}
