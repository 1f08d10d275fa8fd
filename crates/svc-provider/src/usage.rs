//! Provider usage reports mapped onto the spec's nine token fields, and the per-session meter.
//!
//! Why: the runtime emits `svc.usage` (cumulative token counters, each event superseding the
//! previous) on the data channel and stores the `tokens` object of the REST usage summary
//! (`GET /sessions/{id}/usage`). Every provider reports usage in its own shape and at its own
//! granularity, and one of our sessions may span several upstream sessions (Gemini rotation,
//! reconnects). This module is the single, pure place where:
//!
//! - each provider's documented usage JSON, exactly as it appears on the wire, becomes a
//!   [`UsageTokens`] ([`from_openai_realtime`], [`from_gemini`], [`from_gpt_live_responses`],
//!   [`from_xai`]), following the usage mapping summary (providers.md §6) field by field;
//! - per-response / per-turn reports are summed into session totals ([`UsageMeter`]), across
//!   upstream session rotations (each upstream session restarts from zero, so the meter only
//!   ever adds — providers.md §6, last paragraph);
//! - the non-token meters live (GPT-Live `usage.seconds`, providers.md §4.8; xAI audio seconds,
//!   §5.4).
//!
//! Robustness: usage arrives from outside, so nothing here panics. A missing field is 0; a value
//! that is not a JSON integer (string, float, bool, null, object) is 0; a negative integer is
//! clamped to 0; an integer above `i64::MAX` saturates to `i64::MAX`; every sum saturates.
//! A numeric literal too large for `u64` (e.g. `1e30`) is a float to `serde_json` and thus 0.
//!
//! No IO, no clock, no logging: the caller decides when a report is committed (e.g. Gemini:
//! keep the latest `usageMetadata` of a turn and commit it at `turnComplete`, §2.9; OpenAI:
//! every `response.done`, cancelled ones included, §3.7).

use serde_json::Value;
use svc_wire::rest::UsageTokens;

/// Reads a token count: non-negative JSON integers only, saturating at `i64::MAX`; anything else is 0.
fn count(value: Option<&Value>) -> i64 {
    match value {
        Some(Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                i64::try_from(u).unwrap_or(i64::MAX)
            } else {
                // Negative integers clamp to 0; floats are not token counts.
                0
            }
        }
        _ => 0,
    }
}

/// `count` of `value[key]`.
fn field(value: &Value, key: &str) -> i64 {
    count(value.get(key))
}

/// `count` of `value[outer][inner]`.
fn nested(value: &Value, outer: &str, inner: &str) -> i64 {
    value.get(outer).map_or(0, |o| field(o, inner))
}

/// Maps OpenAI Realtime `response.done.response.usage` (providers.md §3.7, §6 column 1).
///
/// One call per `response.done` (per response, not cumulative; cancelled responses are billed
/// and must be included). Field by field:
///
/// | ours | OpenAI |
/// |---|---|
/// | input/output/total_tokens | `input_tokens` / `output_tokens` / `total_tokens` |
/// | input_text/audio/image_tokens | `input_token_details.text_tokens/audio_tokens/image_tokens` |
/// | input_cached_tokens | `input_token_details.cached_tokens` (a subset of input, not additive) |
/// | output_text/audio_tokens | `output_token_details.text_tokens/audio_tokens` |
///
/// Returns `None` when `usage` is not a JSON object (the response carried no usage report).
pub fn from_openai_realtime(usage: &Value) -> Option<UsageTokens> {
    if !usage.is_object() {
        return None;
    }
    Some(UsageTokens {
        input_tokens: field(usage, "input_tokens"),
        output_tokens: field(usage, "output_tokens"),
        total_tokens: field(usage, "total_tokens"),
        input_audio_tokens: nested(usage, "input_token_details", "audio_tokens"),
        input_text_tokens: nested(usage, "input_token_details", "text_tokens"),
        input_image_tokens: nested(usage, "input_token_details", "image_tokens"),
        input_cached_tokens: nested(usage, "input_token_details", "cached_tokens"),
        output_audio_tokens: nested(usage, "output_token_details", "audio_tokens"),
        output_text_tokens: nested(usage, "output_token_details", "text_tokens"),
    })
}

/// Per-modality sums of a Gemini `*TokensDetails` array (`[{modality, tokenCount}]`).
#[derive(Default)]
struct Modalities {
    text: i64,
    audio: i64,
    /// IMAGE + VIDEO (§6: video frames are images to us).
    image: i64,
}

fn modalities(details: Option<&Value>) -> Modalities {
    let mut out = Modalities::default();
    let Some(Value::Array(entries)) = details else {
        return out;
    };
    for entry in entries {
        let tokens = field(entry, "tokenCount");
        let Some(modality) = entry.get("modality").and_then(Value::as_str) else {
            continue;
        };
        let slot = if modality.eq_ignore_ascii_case("TEXT") {
            &mut out.text
        } else if modality.eq_ignore_ascii_case("AUDIO") {
            &mut out.audio
        } else if modality.eq_ignore_ascii_case("IMAGE") || modality.eq_ignore_ascii_case("VIDEO") {
            &mut out.image
        } else {
            // DOCUMENT, MODALITY_UNSPECIFIED, future modalities: counted in the totals only.
            continue;
        };
        *slot = slot.saturating_add(tokens);
    }
    out
}

/// Maps a Gemini Live `usageMetadata` object (wire camelCase; providers.md §2.9, §6 column 2).
///
/// One call per committed turn (keep the latest `usageMetadata` within a turn and commit it at
/// `turnComplete`). Field by field:
///
/// | ours | Gemini |
/// |---|---|
/// | input_tokens | `promptTokenCount` + `toolUsePromptTokenCount` |
/// | output_tokens | `responseTokenCount` + `thoughtsTokenCount` |
/// | total_tokens | `totalTokenCount` (as reported, not recomputed) |
/// | input_audio/text_tokens | `promptTokensDetails` AUDIO / TEXT |
/// | input_image_tokens | `promptTokensDetails` IMAGE + VIDEO |
/// | input_cached_tokens | `cachedContentTokenCount` |
/// | output_audio_tokens | `responseTokensDetails` AUDIO |
/// | output_text_tokens | `responseTokensDetails` TEXT + `thoughtsTokenCount` |
///
/// Modalities are omitted by Gemini when zero, so an absent entry is 0; several entries of the
/// same modality are summed; modality names are matched case-insensitively.
/// Returns `None` when `usage_metadata` is not a JSON object.
pub fn from_gemini(usage_metadata: &Value) -> Option<UsageTokens> {
    if !usage_metadata.is_object() {
        return None;
    }
    let m = usage_metadata;
    let thoughts = field(m, "thoughtsTokenCount");
    let prompt = modalities(m.get("promptTokensDetails"));
    let response = modalities(m.get("responseTokensDetails"));
    Some(UsageTokens {
        input_tokens: field(m, "promptTokenCount").saturating_add(field(m, "toolUsePromptTokenCount")),
        output_tokens: field(m, "responseTokenCount").saturating_add(thoughts),
        total_tokens: field(m, "totalTokenCount"),
        input_audio_tokens: prompt.audio,
        input_text_tokens: prompt.text,
        input_image_tokens: prompt.image,
        input_cached_tokens: field(m, "cachedContentTokenCount"),
        output_audio_tokens: response.audio,
        output_text_tokens: response.text.saturating_add(thoughts),
    })
}

/// Maps GPT-Live `responses` delegation usage: `response.event` → `response.completed.response.usage`
/// (providers.md §4.8, §6 column 3).
///
/// The backend is a text model, so text = totals and audio/image = 0:
///
/// | ours | GPT-Live backend |
/// |---|---|
/// | input_tokens, input_text_tokens | `input_tokens` |
/// | output_tokens, output_text_tokens | `output_tokens` (reasoning is already inside) |
/// | total_tokens | `total_tokens` |
/// | input_cached_tokens | `input_tokens_details.cached_tokens` |
///
/// The voice model itself reports seconds only (see [`gpt_live_voice_seconds`]); `client`
/// delegation reports no tokens at all (`tokens: null`, no `svc.usage`).
/// Returns `None` when `usage` is not a JSON object.
pub fn from_gpt_live_responses(usage: &Value) -> Option<UsageTokens> {
    if !usage.is_object() {
        return None;
    }
    let input = field(usage, "input_tokens");
    let output = field(usage, "output_tokens");
    Some(UsageTokens {
        input_tokens: input,
        output_tokens: output,
        total_tokens: field(usage, "total_tokens"),
        input_audio_tokens: 0,
        input_text_tokens: input,
        input_image_tokens: 0,
        input_cached_tokens: nested(usage, "input_tokens_details", "cached_tokens"),
        output_audio_tokens: 0,
        output_text_tokens: output,
    })
}

/// Reads GPT-Live voice-model `usage.seconds` (providers.md §4.8): cumulative within one upstream
/// session (do not sum successive values), restarting per session. Feed it to
/// [`UsageMeter::record_session_audio_seconds`].
///
/// `usage` is the `usage` object. Returns `None` unless `seconds` is a finite, non-negative number.
pub fn gpt_live_voice_seconds(usage: &Value) -> Option<f64> {
    usage.get("seconds").and_then(Value::as_f64).filter(|s| s.is_finite() && *s >= 0.0)
}

/// Maps xAI Grok `response.done` usage (providers.md §5.4, §6 column 4).
///
/// xAI bills audio minutes; `usage` is `{input_tokens, output_tokens, total_tokens}` when present
/// and often empty. Only those three are mapped (the detail fields stay 0). Returns `None` when
/// `usage` is not an object or all three are 0, so a session that never gets a non-zero report
/// emits no `svc.usage` and stores `tokens: null`.
pub fn from_xai(usage: &Value) -> Option<UsageTokens> {
    if !usage.is_object() {
        return None;
    }
    let tokens = UsageTokens {
        input_tokens: field(usage, "input_tokens"),
        output_tokens: field(usage, "output_tokens"),
        total_tokens: field(usage, "total_tokens"),
        ..UsageTokens::default()
    };
    (tokens != UsageTokens::default()).then_some(tokens)
}

/// Session-wide usage accumulator: sums per-response / per-turn token reports and keeps the
/// non-token audio-seconds meter.
///
/// Rules (providers.md §6): reports are summed (OpenAI Σ `response.done`, Gemini Σ per-turn
/// `usageMetadata`, GPT-Live Σ backend responses); summing continues across upstream session
/// rotations and reconnects because each upstream session restarts from zero — the meter never
/// subtracts (negative fields are ignored) and saturates at `i64::MAX`. A meter that has recorded
/// nothing reports [`has_reports`](Self::has_reports) `== false`: the runtime then emits no
/// `svc.usage` and stores `tokens: null`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageMeter {
    totals: UsageTokens,
    reports: u64,
    /// Audio seconds committed: deltas plus finished upstream sessions' cumulative values.
    audio_seconds: f64,
    /// Latest cumulative seconds of the current upstream session (GPT-Live `usage.seconds`).
    session_audio_seconds: f64,
}

impl UsageMeter {
    /// An empty meter (no reports, zero seconds).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one report (saturating per field; negative fields count as 0).
    pub fn record(&mut self, report: &UsageTokens) {
        self.totals = self.totals.plus(report);
        self.reports = self.reports.saturating_add(1);
    }

    /// Cumulative totals over every recorded report (the payload of the next `svc.usage`).
    pub fn totals(&self) -> UsageTokens {
        self.totals.clone()
    }

    /// Whether at least one token report was recorded (otherwise: no `svc.usage`, `tokens: null`).
    pub fn has_reports(&self) -> bool {
        self.reports > 0
    }

    /// Number of token reports recorded.
    pub fn report_count(&self) -> u64 {
        self.reports
    }

    /// Adds a delta of metered audio seconds (xAI: audio sent + received, §5.4).
    ///
    /// Only finite, non-negative values are accepted; returns whether `seconds` was added.
    pub fn record_audio_seconds(&mut self, seconds: f64) -> bool {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return false;
        }
        self.audio_seconds += seconds;
        true
    }

    /// Records the current upstream session's *cumulative* seconds (GPT-Live `usage.seconds`,
    /// §4.8: cumulative, do not sum). The latest value within a session wins; a smaller value
    /// never lowers it. Call [`begin_upstream_session`](Self::begin_upstream_session) when a new
    /// upstream session starts (its counter restarts at zero).
    ///
    /// Only finite, non-negative values are accepted; returns whether `seconds` was taken.
    pub fn record_session_audio_seconds(&mut self, seconds: f64) -> bool {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return false;
        }
        self.session_audio_seconds = self.session_audio_seconds.max(seconds);
        true
    }

    /// Commits the current upstream session's cumulative seconds and starts counting a new one
    /// (rotation / reconnect). Token totals are unaffected: they always keep summing.
    pub fn begin_upstream_session(&mut self) {
        self.audio_seconds += self.session_audio_seconds;
        self.session_audio_seconds = 0.0;
    }

    /// Total metered audio seconds: every delta plus every upstream session's cumulative value.
    pub fn audio_seconds(&self) -> f64 {
        self.audio_seconds + self.session_audio_seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tokens(values: [i64; 9]) -> UsageTokens {
        let [input, output, total, in_audio, in_text, in_image, in_cached, out_audio, out_text] = values;
        UsageTokens {
            input_tokens: input,
            output_tokens: output,
            total_tokens: total,
            input_audio_tokens: in_audio,
            input_text_tokens: in_text,
            input_image_tokens: in_image,
            input_cached_tokens: in_cached,
            output_audio_tokens: out_audio,
            output_text_tokens: out_text,
        }
    }

    #[test]
    fn openai_realtime_example_from_providers_md() {
        let usage = json!({"total_tokens": 1711, "input_tokens": 1509, "output_tokens": 202,
          "input_token_details": {"text_tokens": 1134, "audio_tokens": 375, "image_tokens": 0,
            "cached_tokens": 1088,
            "cached_tokens_details": {"text_tokens": 1088, "audio_tokens": 0, "image_tokens": 0}},
          "output_token_details": {"text_tokens": 52, "audio_tokens": 150}});
        let got = from_openai_realtime(&usage).expect("object");
        assert_eq!(got, tokens([1509, 202, 1711, 375, 1134, 0, 1088, 150, 52]));
    }

    #[test]
    fn openai_realtime_missing_details_and_non_object() {
        let got = from_openai_realtime(&json!({"input_tokens": 10})).expect("object");
        assert_eq!(got, tokens([10, 0, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(from_openai_realtime(&json!({})), Some(UsageTokens::default()));
        assert_eq!(from_openai_realtime(&Value::Null), None);
        assert_eq!(from_openai_realtime(&json!([1, 2])), None);
        assert_eq!(from_openai_realtime(&json!("usage")), None);
    }

    #[test]
    fn gemini_example_from_providers_md() {
        let msg = json!({"usageMetadata": {
          "promptTokenCount": 413, "responseTokenCount": 22, "totalTokenCount": 435,
          "thoughtsTokenCount": 0, "toolUsePromptTokenCount": 0, "cachedContentTokenCount": 0,
          "promptTokensDetails":   [{"modality": "TEXT", "tokenCount": 340}, {"modality": "AUDIO", "tokenCount": 73}],
          "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 22}],
          "cacheTokensDetails": []
        }});
        let got = from_gemini(&msg["usageMetadata"]).expect("object");
        assert_eq!(got, tokens([413, 22, 435, 73, 340, 0, 0, 22, 0]));
    }

    #[test]
    fn gemini_sums_tool_use_thoughts_and_all_modalities() {
        let meta = json!({
          "promptTokenCount": 1000, "toolUsePromptTokenCount": 50,
          "responseTokenCount": 120, "thoughtsTokenCount": 30, "totalTokenCount": 1200,
          "cachedContentTokenCount": 256,
          "promptTokensDetails": [
            {"modality": "AUDIO", "tokenCount": 300},
            {"modality": "TEXT", "tokenCount": 200},
            {"modality": "IMAGE", "tokenCount": 258},
            {"modality": "VIDEO", "tokenCount": 242},
            {"modality": "DOCUMENT", "tokenCount": 7},
            {"modality": "audio", "tokenCount": 1},
            {"tokenCount": 99},
            {"modality": "TEXT"}
          ],
          "responseTokensDetails": [
            {"modality": "AUDIO", "tokenCount": 100},
            {"modality": "TEXT", "tokenCount": 20}
          ]
        });
        let got = from_gemini(&meta).expect("object");
        // input = 1000 + 50; output = 120 + 30; image = 258 + 242; output text = 20 + 30.
        assert_eq!(got, tokens([1050, 150, 1200, 301, 200, 500, 256, 100, 50]));
    }

    #[test]
    fn gemini_absent_modalities_are_zero() {
        let got = from_gemini(&json!({"promptTokenCount": 5, "thoughtsTokenCount": 3})).expect("object");
        assert_eq!(got, tokens([5, 3, 0, 0, 0, 0, 0, 0, 3]));
        let got = from_gemini(&json!({"promptTokensDetails": "oops", "responseTokensDetails": {"a": 1}}));
        assert_eq!(got, Some(UsageTokens::default()));
        assert_eq!(from_gemini(&Value::Null), None);
    }

    #[test]
    fn gpt_live_responses_delegation_text_equals_totals() {
        let event = json!({"type": "response.completed", "response": {"usage": {
          "input_tokens": 812, "input_tokens_details": {"cached_tokens": 640},
          "output_tokens": 95, "output_tokens_details": {"reasoning_tokens": 64},
          "total_tokens": 907}}});
        let got = from_gpt_live_responses(&event["response"]["usage"]).expect("object");
        assert_eq!(got, tokens([812, 95, 907, 0, 812, 0, 640, 0, 95]));
        assert_eq!(from_gpt_live_responses(&Value::Null), None);
    }

    #[test]
    fn gpt_live_voice_seconds_reads_only_sane_numbers() {
        assert_eq!(gpt_live_voice_seconds(&json!({"seconds": 12.5})), Some(12.5));
        assert_eq!(gpt_live_voice_seconds(&json!({"seconds": 3})), Some(3.0));
        assert_eq!(gpt_live_voice_seconds(&json!({"seconds": -1.0})), None);
        assert_eq!(gpt_live_voice_seconds(&json!({"seconds": "12"})), None);
        assert_eq!(gpt_live_voice_seconds(&json!({})), None);
        assert_eq!(gpt_live_voice_seconds(&Value::Null), None);
    }

    #[test]
    fn xai_maps_three_fields_or_reports_nothing() {
        let got = from_xai(&json!({"input_tokens": 40, "output_tokens": 12, "total_tokens": 52}));
        assert_eq!(got, Some(tokens([40, 12, 52, 0, 0, 0, 0, 0, 0])));
        assert_eq!(from_xai(&json!({})), None);
        assert_eq!(from_xai(&json!({"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})), None);
        assert_eq!(from_xai(&json!({"input_tokens": "40"})), None);
        assert_eq!(from_xai(&Value::Null), None);
    }

    #[test]
    fn malformed_values_are_zero_and_huge_values_saturate() {
        let usage = json!({
          "input_tokens": "1509", "output_tokens": -5, "total_tokens": 12.0,
          "input_token_details": {"text_tokens": u64::MAX, "audio_tokens": true, "image_tokens": null,
            "cached_tokens": 1e30},
          "output_token_details": [1, 2]
        });
        let got = from_openai_realtime(&usage).expect("object");
        assert_eq!(got, tokens([0, 0, 0, 0, i64::MAX, 0, 0, 0, 0]));

        let meta = json!({"promptTokenCount": i64::MAX, "toolUsePromptTokenCount": 10,
          "responseTokenCount": -1, "thoughtsTokenCount": 2.5,
          "promptTokensDetails": [{"modality": "TEXT", "tokenCount": i64::MAX}, {"modality": "TEXT", "tokenCount": 1},
            {"modality": 7, "tokenCount": 1}]});
        let got = from_gemini(&meta).expect("object");
        assert_eq!(got, tokens([i64::MAX, 0, 0, 0, i64::MAX, 0, 0, 0, 0]));
    }

    #[test]
    fn meter_without_reports_has_none() {
        let meter = UsageMeter::new();
        assert!(!meter.has_reports());
        assert_eq!(meter.report_count(), 0);
        assert_eq!(meter.totals(), UsageTokens::default());
        assert_eq!(meter.audio_seconds(), 0.0);
    }

    #[test]
    fn meter_sums_across_two_rotations() {
        // Upstream session 1: two turns; session 2 (after rotation) restarts from zero.
        let mut meter = UsageMeter::new();
        let turn = |prompt: i64, response: i64| {
            from_gemini(&json!({"promptTokenCount": prompt, "responseTokenCount": response,
              "totalTokenCount": prompt + response,
              "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": prompt}],
              "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": response}]}))
            .expect("object")
        };
        meter.record(&turn(100, 10));
        meter.record(&turn(150, 20));
        meter.record(&turn(40, 5)); // first turn of the rotated session: smaller, still added
        assert!(meter.has_reports());
        assert_eq!(meter.report_count(), 3);
        assert_eq!(meter.totals(), tokens([290, 35, 325, 290, 0, 0, 0, 35, 0]));
    }

    #[test]
    fn meter_saturates_and_ignores_negatives() {
        let mut meter = UsageMeter::new();
        meter.record(&tokens([i64::MAX - 1, 1, 1, 1, 1, 1, 1, 1, 1]));
        meter.record(&tokens([5, -3, 1, 1, 1, 1, 1, 1, 1]));
        let got = meter.totals();
        assert_eq!(got.input_tokens, i64::MAX);
        assert_eq!(got.output_tokens, 1);
        assert_eq!(got.total_tokens, 2);
        meter.record(&tokens([i64::MAX; 9]));
        assert_eq!(meter.totals(), tokens([i64::MAX; 9]));
    }

    #[test]
    fn meter_audio_seconds_deltas_and_cumulative_sessions() {
        let mut meter = UsageMeter::new();
        assert!(meter.record_audio_seconds(1.5));
        assert!(!meter.record_audio_seconds(-1.0));
        assert!(!meter.record_audio_seconds(f64::NAN));
        assert!(!meter.record_audio_seconds(f64::INFINITY));
        assert_eq!(meter.audio_seconds(), 1.5);

        // GPT-Live: cumulative within a session, restarting after rotation.
        assert!(meter.record_session_audio_seconds(10.0));
        assert!(meter.record_session_audio_seconds(12.0));
        assert!(meter.record_session_audio_seconds(11.0)); // never lowers
        assert_eq!(meter.audio_seconds(), 13.5);
        meter.begin_upstream_session();
        assert!(meter.record_session_audio_seconds(2.0));
        assert!(!meter.record_session_audio_seconds(f64::NEG_INFINITY));
        assert_eq!(meter.audio_seconds(), 15.5);
        assert!(!meter.has_reports(), "seconds are not token reports");
    }
}
