//! Numeric limits of the contract, in one place so every boundary enforces the same values.

/// Minted token lifetime bounds and default, in seconds.
pub const TOKEN_TTL_MIN_SECONDS: i64 = 60;
/// Upper bound of a minted token's lifetime.
pub const TOKEN_TTL_MAX_SECONDS: i64 = 86_400;
/// Lifetime of a minted token when the mint call names none (24 hours).
pub const TOKEN_TTL_DEFAULT_SECONDS: i64 = 86_400;

/// `GET /sessions` page size bounds and default.
pub const LIST_LIMIT_MIN: u32 = 1;
/// Largest page `GET /sessions` returns.
pub const LIST_LIMIT_MAX: u32 = 100;
/// Page size when the query names none.
pub const LIST_LIMIT_DEFAULT: u32 = 20;

/// Most transcript turns an import may carry.
pub const IMPORT_MAX_TURNS: usize = 100_000;
/// Largest decoded import audio, in bytes (200 MB).
pub const IMPORT_MAX_AUDIO_BYTES: u64 = 200 * 1_000_000;
/// Largest import request body, in bytes (256 MB).
pub const IMPORT_MAX_BODY_BYTES: u64 = 256 * 1_000_000;

/// Inline agent instructions, in characters.
pub const INSTRUCTIONS_MAX_CHARS: usize = 131_072;
/// Greeting, in characters (inline, and catalog after substitution).
pub const GREETING_MAX_CHARS: usize = 4000;
/// Voice speaking style, in characters.
pub const SPEAKING_STYLE_MAX_CHARS: usize = 8192;
/// Catalog agent handle, in characters.
pub const AGENT_NAME_MAX_CHARS: usize = 100;
/// Tools a catalog start (and a stored catalog agent) may carry.
pub const CATALOG_TOOLS_MAX: usize = 10_000;
/// Server hooks per agent.
pub const HOOKS_MAX: usize = 16;

/// `external_user_id` length bound (not in the spec; see docs/API-DESIGN.md, Known quirks).
pub const EXTERNAL_USER_ID_MAX_CHARS: usize = 256;

/// Largest JSON body accepted by any route other than import (not in the spec; see Known quirks).
pub const JSON_BODY_MAX_BYTES: usize = 8 * 1024 * 1024;

/// Support request message, in characters (not in the spec; see Known quirks).
pub const SUPPORT_MESSAGE_MAX_CHARS: usize = 20_000;
/// Support request subject, in characters.
pub const SUPPORT_SUBJECT_MAX_CHARS: usize = 200;

/// `phone_number` and `caller_number` of a dial, in characters (E.164: `+` then 8 to 15 digits).
pub const PHONE_NUMBER_MAX_CHARS: usize = 20;
/// The pattern both numbers of a dial follow.
pub const E164_PATTERN: &str = r"^\+[0-9]{8,15}$";

/// Counts characters the way the spec counts them: Unicode scalar values, not bytes.
pub fn char_len(text: &str) -> usize {
    text.chars().count()
}
