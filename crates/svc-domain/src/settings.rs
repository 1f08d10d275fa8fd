//! Per-workspace settings the contract relies on (limits, grants, consents, phone options).
//!
//! Stored as one JSON document per workspace so a new setting needs no migration; every field has
//! a serde default, so documents written by older versions keep loading.

use serde::{Deserialize, Serialize};

/// Settings of one workspace. Defaults are documented in docs/API-DESIGN.md ("Known quirks").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceSettings {
    /// Most live sessions at once; `None` means unlimited.
    pub max_concurrent_sessions: Option<u32>,
    /// Free voice minutes granted; `None` means the workspace is not on a free grant.
    pub free_minutes_granted: Option<u64>,
    /// Prepaid credit in cents; `None` means credit is not metered.
    pub credit_balance_cents: Option<i64>,
    /// Voice minutes included per calendar month (UTC); `None` means no quota.
    pub monthly_quota_minutes: Option<u64>,
    /// Provider aliases the workspace may use; `None` means every configured provider.
    pub entitled_providers: Option<Vec<String>>,
    /// Plan name reported in entitlement errors.
    pub plan: String,
    /// Whether `experimental.avatar` is honoured.
    pub avatar_enabled: bool,
    /// Recording consents: what sessions of this workspace may store at most.
    pub consents: RecordingConsents,
    /// Whether outbound phone dial is enabled.
    pub phone_calls_enabled: bool,
    /// Most dialled minutes per calendar month (UTC); `None` means no limit.
    pub dial_minute_limit: Option<u64>,
    /// Server tools gated off for this workspace: a start that asks for one runs without it and
    /// lists it in `ready.rejected_tools` with reason `gated_off` (spec: "gated off for the
    /// workspace"). Empty: every tool the deployment runs.
    pub disabled_server_tools: Vec<crate::tools::ServerTool>,
}

impl Default for WorkspaceSettings {
    fn default() -> Self {
        WorkspaceSettings {
            max_concurrent_sessions: Some(DEFAULT_MAX_CONCURRENT_SESSIONS),
            free_minutes_granted: None,
            credit_balance_cents: None,
            monthly_quota_minutes: None,
            entitled_providers: None,
            plan: "self-hosted".to_owned(),
            avatar_enabled: false,
            consents: RecordingConsents::default(),
            phone_calls_enabled: false,
            dial_minute_limit: None,
            disabled_server_tools: Vec::new(),
        }
    }
}

/// Default concurrent-session limit of a new workspace.
pub const DEFAULT_MAX_CONCURRENT_SESSIONS: u32 = 100;

/// What a workspace's sessions may record. Session store flags narrow these, never widen them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecordingConsents {
    /// Session audio.
    pub audio: bool,
    /// Transcripts and tool events.
    pub transcript: bool,
    /// Screen-share video and screenshots.
    pub video: bool,
}

impl Default for RecordingConsents {
    fn default() -> Self {
        RecordingConsents { audio: true, transcript: true, video: false }
    }
}

/// Whether `number` is E.164 as the contract bounds it: `+` then 8 to 15 digits, at most 20 chars.
pub fn is_e164(number: &str) -> bool {
    number
        .strip_prefix('+')
        .is_some_and(|digits| (8..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_documents_keep_loading_with_defaults() {
        let settings: WorkspaceSettings = serde_json::from_str(r#"{"avatar_enabled":true}"#).expect("partial document");
        assert!(settings.avatar_enabled);
        assert_eq!(settings.max_concurrent_sessions, Some(DEFAULT_MAX_CONCURRENT_SESSIONS));
        assert!(settings.consents.audio && !settings.consents.video);
        assert!(settings.disabled_server_tools.is_empty());
        let gated: WorkspaceSettings =
            serde_json::from_str(r#"{"disabled_server_tools":["web_search"]}"#).expect("a gated tool");
        assert_eq!(gated.disabled_server_tools, [crate::tools::ServerTool::WebSearch]);
        assert!(serde_json::from_str::<WorkspaceSettings>(r#"{"disabled_server_tools":["teleport"]}"#).is_err());
    }

    #[test]
    fn e164_bounds() {
        assert!(is_e164("+14155550123"));
        assert!(is_e164("+12345678"));
        assert!(!is_e164("+1234567"));
        assert!(!is_e164("+1234567890123456"));
        assert!(!is_e164("14155550123"));
        assert!(!is_e164("+1415555012a"));
    }
}
