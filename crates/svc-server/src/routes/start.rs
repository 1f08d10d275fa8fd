//! `POST /realtime/session/start`: the front door. Parse (every problem at once), gate (SDK floor,
//! billing, resume), resolve (agent, tools, model), check the provider (entitlement, voice
//! availability), insert under the concurrency gate, mint room credentials, dispatch. Each phase
//! is timed and reported in `timings`.

use std::time::Instant;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use serde_json::{Value, json};
use svc_domain::Scope;
use svc_domain::builtin::builtin_agent;
use svc_domain::model::ModelError;
use svc_domain::session_config::{AgentRequest, Sdk, StartParseError, parse_start};
use svc_domain::start::{CatalogLookup, ResolvedSession, StartContext, StartRejection, resolve_start};
use svc_store::{Admission, NewSession, NewTimelineEvent};
use svc_wire::ErrorCode;
use svc_wire::rest::{SessionConfigDoc, StartResponse, StartTimings};

use crate::app::{App, now_us};
use crate::auth::{Caller, Principal, RealtimeCredential};
use crate::dispatch::DispatchRequest;
use crate::error::{ApiError, ApiResult};
use crate::metrics::RequestStarted;

/// Lifetime of the user's room join token. Short: it is for joining now, not for caching.
pub(crate) const ROOM_TOKEN_TTL_SECONDS: i64 = 15 * 60;
/// Where a workspace tops up credit, reported with `insufficient_credits`.
pub(crate) const TOP_UP_PATH: &str = "/billing/credits";
/// Where a workspace changes plan, reported with `provider_not_entitled`.
pub(crate) const UPGRADE_PATH: &str = "/billing/plans";

/// Starts a session.
#[utoipa::path(
    post,
    path = "/realtime/session/start",
    tag = "sessions",
    security(("bearer" = [])),
    request_body = SessionConfigDoc,
    params(("X-Svc-SDK" = Option<String>, Header, description = "`name/version` of the calling SDK, used when the body has no `sdk`")),
    responses(
        (status = 200, body = StartResponse),
        (status = 400, body = svc_wire::ErrorEnvelope, description = "`sdk_unsupported`; or `api_error` without code: text-only output on a speech-to-speech-only model"),
        (status = 401, body = svc_wire::error::AuthErrorBody, description = "Credential absent, invalid, or not served on this host"),
        (status = 402, body = svc_wire::ErrorEnvelope, description = "`free_minutes_exhausted` (granted_minutes, used_minutes) or `insufficient_credits` (balance_cents, top_up_path)"),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "Missing realtime:start; `svc_delegation_scope_required`; `provider_not_entitled` (provider, allowed_providers, plan, upgrade_path)"),
        (status = 404, body = svc_wire::ErrorEnvelope, description = "`session.experimental.resume_session_id` names no session of the caller's project"),
        (status = 422, body = svc_wire::ErrorEnvelope, description = "`validation_error`, `invalid_tool_config`, `unknown_agent`, `agent_config_unavailable`, `greeting_too_long`, `model_unavailable`, `instructions_too_long`, `delegation_tools_unsupported`, `turn_detection_knob_mismatch`, `turn_detection_unsupported`, `thinking_level_unsupported`"),
        (status = 429, body = svc_wire::ErrorEnvelope, description = "`concurrent_session_limit` (limit, active) or `quota_exceeded` (meter, included, used, reset_at)"),
        (status = 503, body = svc_wire::ErrorEnvelope, description = "Realtime backend, the provider's voice or the database unavailable (no code); retry with backoff"),
    )
)]
pub(crate) async fn start_session(
    State(app): State<App>,
    principal: Principal,
    started: Option<Extension<RequestStarted>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<StartResponse>> {
    let request_started = started.map_or_else(Instant::now, |Extension(RequestStarted(at))| at);
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeStart])?;
    // Draining, or out of file descriptors: refused before anything is stored, and the retry
    // goes to another node (a draining one's `/healthz` says so) or comes back later.
    app.dispatcher.can_start().map_err(|message| ApiError::status(StatusCode::SERVICE_UNAVAILABLE, message))?;
    let value = super::json_body(&headers, body, false)?;
    let sdk_header = headers.get("x-svc-sdk").and_then(|value| value.to_str().ok());
    let request = parse_start(&value, sdk_header).map_err(parse_error)?;
    let mut timings = StartTimings::default();

    let phase = Instant::now();
    check_sdk_floor(&app, &request.sdk)?;
    timings.version_check_ms = elapsed_ms(phase);

    let phase = Instant::now();
    let now = now_us();
    check_billing(&app, &caller, now).await?;
    if let Some(resume) = &request.session.resume_session_id
        && app.store.session_in_project(&caller.project_id, resume).await?.is_none()
    {
        // A missing resource, like a support request's unknown `session_id`: 404, so a typo never
        // silently starts an unrelated conversation and clients can tell it from a bad body.
        return Err(ApiError::not_found(
            "experimental.resume_session_id: no session with this id in the credential's project",
        ));
    }
    timings.project_check_ms = elapsed_ms(phase);

    let phase = Instant::now();
    let stored_config = match &request.agent {
        AgentRequest::Catalog(catalog) => Some(catalog_config(&app, &caller, &catalog.name).await?),
        AgentRequest::Inline(_) => None,
    };
    let lookup = match &stored_config {
        None => CatalogLookup::NotApplicable,
        Some(None) => CatalogLookup::NotFound,
        Some(Some(config)) => CatalogLookup::Found(config),
    };
    // The deployment's tools minus those the workspace gated off (`disabled_server_tools`).
    let server_tools = app.server_tools.gated_for_workspace(&caller.workspace.settings.disabled_server_tools);
    let context = StartContext {
        catalog: &app.config.model_catalog,
        server_tools: &server_tools,
        caller_has_resources_read: caller.scopes.as_ref().is_some_and(|s| s.contains(Scope::ResourcesRead)),
        consents: caller.workspace.settings.consents,
        avatar_enabled: caller.workspace.settings.avatar_enabled,
        server_max_session_seconds: app.config.max_session_seconds,
    };
    let resolved = resolve_start(request, lookup, &context).map_err(rejection)?;
    timings.resolve_ms = elapsed_ms(phase);

    let phase = Instant::now();
    // A `provider_local` start takes its slot here, before the session row exists: a start
    // refused for capacity leaves nothing behind, and one accepted cannot lose the slot later.
    let local_slot = check_provider(&app, &caller, &resolved)?;
    timings.provider_resolve_ms = elapsed_ms(phase);

    let phase = Instant::now();
    let session_id = uuid::Uuid::new_v4().to_string();
    let credential_id = caller.credential.id();
    let room_name = match app.store.consume_room_reservation(&credential_id, now).await? {
        Some(reservation) => reservation.room_name,
        None => svc_store::new_room_name(),
    };
    let config = serde_json::to_value(&resolved).map_err(|error| ApiError::Internal(error.into()))?;
    let limit = caller.workspace.settings.max_concurrent_sessions;
    let opened = NewTimelineEvent {
        ts_us: now,
        kind: "session.started".to_owned(),
        data: json!({
            "provider": resolved.model.alias.as_str(),
            "model": resolved.model.model_id,
            "room_name": room_name,
            "agent": {"kind": resolved.agent.kind, "name": resolved.agent.name},
            "sdk": resolved.sdk,
            "credential": credential_id,
            "rejected_tools": resolved.rejected_tools,
            "max_session_seconds": resolved.max_session_seconds,
        }),
    };
    let admission = app
        .store
        .insert_session_within_limit(
            &NewSession {
                id: &session_id,
                workspace_id: &caller.workspace.id,
                project_id: &caller.project_id,
                source: "live",
                status: "active",
                usage_status: "pending",
                started_us: now,
                ended_us: None,
                provider: Some(resolved.model.alias.as_str()),
                model: Some(&resolved.model.model_id),
                title: None,
                room_name: Some(&room_name),
                config: Some(&config),
                now_us: now,
            },
            limit,
            std::slice::from_ref(&opened),
        )
        .await?;
    if let Admission::LimitReached { active } = admission {
        let mut extras = serde_json::Map::new();
        extras.insert("limit".into(), json!(limit));
        extras.insert("active".into(), json!(active));
        return Err(ApiError::Coded {
            code: ErrorCode::ConcurrentSessionLimit,
            message: format!("The workspace already has {active} live sessions (limit {})", limit.unwrap_or_default()),
            extras,
        });
    }
    timings.db_insert_ms = elapsed_ms(phase);

    let phase = Instant::now();
    let identity = match &caller.credential {
        RealtimeCredential::EndUser { external_user_id, .. } => external_user_id.clone(),
        RealtimeCredential::ApiKey { .. } => "user".to_owned(),
    };
    let (livekit_url, room_credentials) = app.session_room();
    let token = room_credentials
        .participant_token(&room_name, &identity, None, now / 1_000_000 + ROOM_TOKEN_TTL_SECONDS)
        .map_err(|error| ApiError::Internal(error.into()))?;
    timings.mint_tokens_ms = elapsed_ms(phase);

    let phase = Instant::now();
    // On a LiveKit server of its own the room is created there first (the embedded room opens
    // it as the agent joins); in worker mode with a dispatch of svc's agent, which LiveKit gives
    // to the least loaded node (the session id is the job's metadata: the node reads it from
    // the shared store), and nothing runs here.
    let worker = app.config.livekit.as_ref().and_then(|livekit| livekit.worker.as_ref());
    if let Some(external) = &app.livekit {
        let agents = worker.map(|worker| svc_room::proto::RoomAgentDispatch {
            agent_name: worker.agent_name.clone(),
            metadata: session_id.clone(),
            ..Default::default()
        });
        let create = svc_room::proto::CreateRoomRequest {
            name: room_name.clone(),
            agents: agents.into_iter().collect(),
            ..Default::default()
        };
        if let Err(error) = external.api().create_room(create).await {
            tracing::error!(session.id = %session_id, %error, "the LiveKit server did not create the room");
            return Err(end_unstarted(&app, &session_id, "The media server is unavailable; retry with backoff").await);
        }
    }
    if worker.is_none() {
        let dispatch = DispatchRequest {
            session_id: session_id.clone(),
            workspace_id: caller.workspace.id.clone(),
            room_name: room_name.clone(),
            session: std::sync::Arc::new(resolved),
            local_slot,
        };
        if let Err(error) = app.dispatcher.dispatch(dispatch).await {
            tracing::error!(session.id = %session_id, error = %error, "session dispatch failed");
            return Err(
                end_unstarted(&app, &session_id, "The realtime backend is unavailable; retry with backoff").await
            );
        }
    }
    timings.dispatch_ms = elapsed_ms(phase);
    timings.total_ms = elapsed_ms(request_started);
    tracing::info!(session.id = %session_id, room = %room_name, total_ms = timings.total_ms, "session started");
    let livekit_url = livekit_url.to_owned();
    Ok(Json(StartResponse { livekit_url, token, room_name, session_id, timings }))
}

/// A stored session that cannot get going: it ends as `error`, and the caller is told to retry
/// (`message`, a 503), unless storing the end fails, which is then the answer.
async fn end_unstarted(app: &App, session_id: &str, message: &'static str) -> ApiError {
    match app.store.finish_session(session_id, "error", now_us(), None).await {
        Ok(_) => ApiError::status(StatusCode::SERVICE_UNAVAILABLE, message),
        Err(error) => error.into(),
    }
}

fn elapsed_ms(since: Instant) -> f64 {
    (since.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

fn parse_error(error: StartParseError) -> ApiError {
    match error {
        StartParseError::Validation(issues) => ApiError::Validation(issues),
        StartParseError::InvalidToolConfig(problems) => {
            ApiError::code(ErrorCode::InvalidToolConfig, problems.join("; "))
        }
        StartParseError::InstructionsTooLong => ApiError::code(
            ErrorCode::InstructionsTooLong,
            format!("instructions exceed {} characters", svc_domain::limits::INSTRUCTIONS_MAX_CHARS),
        ),
    }
}

fn rejection(rejection: StartRejection) -> ApiError {
    match rejection {
        // The requested name is payload and is not echoed; the client knows what it sent.
        StartRejection::UnknownAgent(_) => {
            ApiError::code(ErrorCode::UnknownAgent, "No catalog agent by that name in this workspace")
        }
        StartRejection::AgentConfigUnavailable(_) => ApiError::code(
            ErrorCode::AgentConfigUnavailable,
            "The catalog agent's stored configuration could not be loaded",
        ),
        StartRejection::GreetingTooLong => ApiError::code(
            ErrorCode::GreetingTooLong,
            format!(
                "The agent's greeting exceeds {} characters after inputs substitution",
                svc_domain::limits::GREETING_MAX_CHARS
            ),
        ),
        StartRejection::InstructionsTooLong => ApiError::code(
            ErrorCode::InstructionsTooLong,
            format!("instructions exceed {} characters", svc_domain::limits::INSTRUCTIONS_MAX_CHARS),
        ),
        StartRejection::Model(ModelError::Unavailable(message)) => ApiError::code(ErrorCode::ModelUnavailable, message),
        StartRejection::Model(ModelError::KnobMismatch(message)) => {
            ApiError::code(ErrorCode::TurnDetectionKnobMismatch, message)
        }
        StartRejection::Model(ModelError::TurnDetectionUnsupported(message)) => {
            ApiError::code(ErrorCode::TurnDetectionUnsupported, message)
        }
        StartRejection::Model(ModelError::ThinkingLevelUnsupported(message)) => {
            ApiError::code(ErrorCode::ThinkingLevelUnsupported, message)
        }
        StartRejection::TextOnlyUnsupported(model) => ApiError::bad_request(format!(
            "audio.output: false is not supported by {model}, which is speech-to-speech only"
        )),
        StartRejection::DelegationToolsUnsupported => ApiError::code(
            ErrorCode::DelegationToolsUnsupported,
            "Tools cannot be declared with provider_b_live delegation `client` or `svc`",
        ),
        StartRejection::SvcDelegationScopeRequired => ApiError::code(
            ErrorCode::SvcDelegationScopeRequired,
            "Delegation `svc` requires a credential with the scope resources:read",
        ),
    }
}

fn check_sdk_floor(app: &App, sdk: &Sdk) -> ApiResult<()> {
    let Some(floor) = app.config.sdk_floors.iter().find(|floor| floor.name == sdk.name) else {
        return Ok(());
    };
    let sent = crate::config::parse_version(&sdk.version);
    if sent.is_some_and(|version| version >= floor.min_version) {
        return Ok(());
    }
    let (major, minor, patch) = floor.min_version;
    let minimum = format!("{major}.{minor}.{patch}");
    let mut extras = serde_json::Map::new();
    extras.insert("min_version".into(), json!(minimum));
    Err(ApiError::Coded {
        code: ErrorCode::SdkUnsupported,
        message: format!(
            "{} {} is no longer supported; the minimum version is {minimum}. Upgrade with: {}",
            sdk.name,
            sdk.version,
            upgrade_command(&sdk.name, &minimum)
        ),
        extras,
    })
}

/// The npm package of the TypeScript SDK (`sdk/js`), which is also the `sdk.name` it stamps.
const JS_SDK_PACKAGE: &str = "svc-js";

/// The upgrade command of the SDK this repository ships, else advice that names the client: svc
/// publishes no other package, so it names none (a command for a package that does not exist
/// sends people nowhere).
fn upgrade_command(sdk: &str, minimum: &str) -> String {
    match sdk {
        JS_SDK_PACKAGE => format!("npm install {JS_SDK_PACKAGE}@{minimum}"),
        other => format!("upgrade {other} to {minimum} or later"),
    }
}

/// Free grant, credit and monthly quota, in that order.
async fn check_billing(app: &App, caller: &Caller, now: i64) -> ApiResult<()> {
    let settings = &caller.workspace.settings;
    if let Some(granted) = settings.free_minutes_granted {
        let used = app.store.voice_seconds_used(&caller.workspace.id, None).await? / 60.0;
        if used >= granted as f64 {
            let mut extras = serde_json::Map::new();
            extras.insert("granted_minutes".into(), json!(granted));
            extras.insert("used_minutes".into(), json!(used.floor() as u64));
            return Err(ApiError::Coded {
                code: ErrorCode::FreeMinutesExhausted,
                message: format!("The workspace's {granted} free voice minutes are used up"),
                extras,
            });
        }
    }
    if let Some(balance) = settings.credit_balance_cents
        && balance <= 0
    {
        let mut extras = serde_json::Map::new();
        extras.insert("balance_cents".into(), json!(balance));
        extras.insert("top_up_path".into(), json!(TOP_UP_PATH));
        return Err(ApiError::Coded {
            code: ErrorCode::InsufficientCredits,
            message: "The workspace has no credit left".to_owned(),
            extras,
        });
    }
    if let Some(included) = settings.monthly_quota_minutes {
        let (month_start, next_month_start) = utc_month_bounds(now);
        let used = app.store.voice_seconds_used(&caller.workspace.id, Some(month_start)).await? / 60.0;
        if used >= included as f64 {
            let mut extras = serde_json::Map::new();
            extras.insert("meter".into(), json!("voice_minutes"));
            extras.insert("included".into(), json!(included));
            extras.insert("used".into(), json!(used.floor() as u64));
            extras.insert("reset_at".into(), json!(crate::app::us_to_seconds(next_month_start)));
            return Err(ApiError::Coded {
                code: ErrorCode::QuotaExceeded,
                message: format!("The workspace used its {included} voice minutes for this month"),
                extras,
            });
        }
    }
    Ok(())
}

/// Entitlement, then whether this server has the provider's credentials; for `provider_local`,
/// the models and a slot, which is taken and returned.
fn check_provider(app: &App, caller: &Caller, resolved: &ResolvedSession) -> ApiResult<Option<svc_local::Permit>> {
    let alias = resolved.model.alias.as_str();
    let settings = &caller.workspace.settings;
    if let Some(allowed) = &settings.entitled_providers
        && !allowed.iter().any(|entitled| entitled == alias)
    {
        let mut extras = serde_json::Map::new();
        extras.insert("provider".into(), json!(alias));
        extras.insert("allowed_providers".into(), json!(allowed));
        extras.insert("plan".into(), json!(settings.plan));
        extras.insert("upgrade_path".into(), json!(UPGRADE_PATH));
        return Err(ApiError::Coded {
            code: ErrorCode::ProviderNotEntitled,
            message: format!("The workspace's plan does not include {alias}"),
            extras,
        });
    }
    if resolved.model.family == svc_local::FAMILY {
        // Missing models or a full machine: the spec's 503 (no code) with a message that names
        // the reason, capacity or the install command; the client may retry later.
        return match app.config.local.acquire() {
            Ok(permit) => Ok(Some(permit)),
            Err(reason) => Err(ApiError::status(StatusCode::SERVICE_UNAVAILABLE, format!("{alias}: {reason}"))),
        };
    }
    if !app.config.provider_keys.has_family(&resolved.model.family) {
        return Err(ApiError::status(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Realtime voice for {alias} is not available on this server; retry with backoff"),
        ));
    }
    Ok(None)
}

/// The stored configuration of catalog agent `name`: the workspace's own agent, else a built-in
/// one. `Some(None)` means no such agent; a stored document that is not JSON is passed on as
/// `null`, which the resolver reports as `agent_config_unavailable`.
async fn catalog_config(app: &App, caller: &Caller, name: &str) -> ApiResult<Option<Value>> {
    if let Some(agent) = app.store.agent_by_name(&caller.workspace.id, name).await? {
        return Ok(Some(serde_json::from_str(&agent.config_json).unwrap_or(Value::Null)));
    }
    Ok(builtin_agent(name).map(|agent| agent.config.clone()))
}

/// Start of the UTC calendar month containing `now_us`, and of the next one, in microseconds.
pub(crate) fn utc_month_bounds(now_us: i64) -> (i64, i64) {
    let days = now_us.div_euclid(86_400_000_000);
    let (year, month, _) = civil_from_days(days);
    let start = days_from_civil(year, month, 1);
    let (next_year, next_month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
    let next = days_from_civil(next_year, next_month, 1);
    (start * 86_400_000_000, next * 86_400_000_000)
}

// Howard Hinnant's civil calendar algorithms (public domain), days since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn month_bounds() {
        // 2026-11-22T05:00:00Z
        let now = 1_795_323_600_000_000;
        let (start, next) = utc_month_bounds(now);
        assert_eq!(start, 1_793_491_200_000_000, "2026-11-01T00:00:00Z");
        assert_eq!(next, 1_796_083_200_000_000, "2026-12-01T00:00:00Z");
        let (start, next) = utc_month_bounds(1_796_083_200_000_000 - 1);
        assert_eq!((start, next), (1_793_491_200_000_000, 1_796_083_200_000_000));
        // December rolls into January.
        let (start, next) = utc_month_bounds(1_798_675_200_000_000 - 1);
        assert_eq!((start, next), (1_796_083_200_000_000, 1_798_761_600_000_000));
    }
}
