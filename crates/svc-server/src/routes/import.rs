//! `POST /sessions/import`: seeds a completed call (transcript and optional mono WAV) into the
//! workspace's default project.
//!
//! The body may be 256 MB, almost all of it one base64 string, so it is never buffered: the
//! `svc-import` parser streams the audio to a spool file while it validates the WAV header, and
//! the spool file is renamed into the recordings directory once the rows are about to be stored.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use svc_import::{ImportError, ImportLimits};
use svc_store::{ArtifactRecord, NewSession, NewTimelineEvent, NewTurn};
use svc_wire::LocSegment;
use svc_wire::rest::{ImportSessionRequest, SessionRecord, TranscriptRole};

use crate::app::{App, now_us, seconds_to_us};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};

/// Capability a user needs to import.
pub(crate) const RECORDINGS_CAPABILITY: &str = "recordings";
/// Role a user needs to import.
pub(crate) const RECORDINGS_ADMIN_ROLE: &str = "recordings-admin";

/// Imports a completed call.
#[utoipa::path(
    post,
    path = "/sessions/import",
    tag = "sessions",
    security(("bearer" = [])),
    request_body = ImportSessionRequest,
    responses(
        (status = 201, body = SessionRecord),
        (status = 400, body = svc_wire::ErrorEnvelope, description = "Over 100,000 turns, or audio not valid base64 of a mono WAV"),
        (status = 401, body = svc_wire::error::AuthErrorBody),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "Lacking the recordings capability or the recordings-admin role"),
        (status = 413, body = svc_wire::ErrorEnvelope, description = "Body over 256 MB or decoded audio over 200 MB"),
        (status = 422, body = svc_wire::ErrorEnvelope),
    )
)]
pub(crate) async fn import_session(
    State(app): State<App>,
    principal: Principal,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<SessionRecord>)> {
    let caller = principal.user()?;
    if !caller.has_capability(RECORDINGS_CAPABILITY) || !caller.has_role(RECORDINGS_ADMIN_ROLE) {
        return Err(ApiError::forbidden(format!(
            "Importing sessions requires the capability '{RECORDINGS_CAPABILITY}' and the role '{RECORDINGS_ADMIN_ROLE}'"
        )));
    }
    let limits = ImportLimits::default();
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
    if !content_type.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json") {
        return Err(ApiError::invalid(
            vec![LocSegment::Key("header".into()), LocSegment::Key("content-type".into())],
            "content_type",
            "Expected a request with Content-Type: application/json",
        ));
    }
    let declared_length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared_length.is_some_and(|length| length > limits.max_body_bytes) {
        return Err(body_too_large(&limits));
    }
    let parsed = svc_import::read_import_body(body.into_data_stream(), &app.config.spool_dir(), &limits)
        .await
        .map_err(|error| import_error(error, &limits))?;

    let project = app.store.default_project(&caller.workspace.id).await?;
    let session_id = uuid::Uuid::new_v4().to_string();
    let metadata = &parsed.metadata;
    let turns: Vec<NewTurn> = metadata
        .transcript
        .iter()
        .map(|turn| NewTurn {
            ts_us: seconds_to_us(turn.ts),
            role: match turn.role {
                TranscriptRole::User => "user",
                TranscriptRole::Assistant => "assistant",
            },
            text: turn.text.clone(),
        })
        .collect();
    let now = now_us();
    let started_us = seconds_to_us(metadata.started_at);
    let mut artifact = None;
    if let Some(audio) = parsed.audio {
        let relative = format!("recordings/{session_id}.wav");
        let path = app.config.artifact_path(&relative);
        if let Err(error) = audio.file.persist(&path) {
            // The spool and a shared recordings directory (`--recordings-dir`) may be on
            // different filesystems, where a rename cannot go: the file is copied instead (the
            // spooled one is removed as `error.file` drops).
            tokio::fs::copy(error.file.path(), &path).await.map_err(|copy| {
                ApiError::Internal(anyhow::anyhow!("storing imported audio: {}; {copy}", error.error))
            })?;
        }
        artifact = Some(ArtifactRecord {
            kind: "audio".to_owned(),
            path: relative,
            content_type: "audio/wav".to_owned(),
            bytes: i64::try_from(audio.bytes).unwrap_or(i64::MAX),
        });
    }
    let event = NewTimelineEvent {
        ts_us: now,
        kind: "session.imported".to_owned(),
        data: serde_json::json!({
            "turns": turns.len(),
            "audio_bytes": artifact.as_ref().map(|a| a.bytes),
            "imported_by": caller.user.id,
        }),
    };
    let session = NewSession {
        id: &session_id,
        workspace_id: &caller.workspace.id,
        project_id: &project.id,
        source: "import",
        status: "completed",
        usage_status: "unavailable",
        started_us,
        ended_us: metadata.ended_at.map(seconds_to_us),
        provider: metadata.provider.as_deref(),
        model: None,
        title: metadata.title.as_deref(),
        room_name: None,
        config: None,
        now_us: now,
    };
    if let Err(error) = app.store.insert_imported_session(&session, &turns, &[event], artifact.as_ref()).await {
        if let Some(artifact) = &artifact {
            let spooled = app.config.artifact_path(&artifact.path);
            if let Err(cleanup) = tokio::fs::remove_file(&spooled).await {
                tracing::warn!(path = %spooled.display(), error = %cleanup, "could not remove the audio of an import that failed");
            }
        }
        return Err(error.into());
    }
    tracing::info!(session.id = %session_id, turns = turns.len(), audio = artifact.is_some(), "imported session");
    let row = app
        .store
        .session_in_project(&project.id, &session_id)
        .await?
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("imported session {session_id} vanished")))?;
    Ok((StatusCode::CREATED, Json(super::sessions::session_record(&row)?)))
}

fn body_too_large(limits: &ImportLimits) -> ApiError {
    ApiError::status(StatusCode::PAYLOAD_TOO_LARGE, format!("Request body exceeds {} bytes", limits.max_body_bytes))
}

fn import_error(error: ImportError, limits: &ImportLimits) -> ApiError {
    match error {
        ImportError::BodyTooLarge => body_too_large(limits),
        ImportError::AudioTooLarge => ApiError::status(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Decoded audio exceeds {} bytes", limits.max_audio_bytes),
        ),
        ImportError::InvalidBase64 => ApiError::bad_request("audio_wav_base64 is not valid base64"),
        ImportError::InvalidWav(reason) => {
            ApiError::bad_request(format!("audio_wav_base64 is not a mono WAV file: {reason}"))
        }
        ImportError::TooManyTurns { max } => ApiError::bad_request(format!("transcript has more than {max} turns")),
        ImportError::InvalidJson { line, column, category } => ApiError::invalid(
            vec![LocSegment::Key("body".into())],
            "json_invalid",
            format!("Invalid JSON: {category} at line {line} column {column}"),
        ),
        ImportError::Validation(issues) => ApiError::Validation(issues),
        ImportError::Body(_) => ApiError::bad_request("The request body could not be read"),
        ImportError::Io(error) => ApiError::Internal(error.into()),
    }
}
