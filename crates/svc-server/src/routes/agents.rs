//! Workspace catalog agents (`/agents`), managed with user access tokens. A catalog session start
//! runs an agent's stored configuration verbatim.
//!
//! Any user of the workspace may read; writing needs the role `agents-admin` (or `admin`).

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use svc_domain::requests::AgentParams;
use svc_store::{StoreError, StoredAgent};
use svc_wire::rest::{AgentCreate, AgentRecord, AgentUpdate};

use crate::app::{App, now_us, us_to_seconds};
use crate::auth::{Principal, UserCaller};
use crate::error::{ApiError, ApiResult};

/// Role that may create, change and delete agents.
pub(crate) const AGENTS_ADMIN_ROLE: &str = "agents-admin";

/// Lists the workspace's agents by name.
#[utoipa::path(
    get,
    path = "/agents",
    tag = "agents",
    security(("bearer" = [])),
    responses((status = 200, body = Vec<AgentRecord>), (status = 401, body = svc_wire::error::AuthErrorBody), (status = 403, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn list_agents(State(app): State<App>, principal: Principal) -> ApiResult<Json<Vec<AgentRecord>>> {
    let caller = principal.user()?;
    let agents = app.store.list_agents(&caller.workspace.id).await?;
    Ok(Json(agents.iter().map(agent_record).collect()))
}

/// Creates an agent. The handle is unique in the workspace and cannot be changed later.
#[utoipa::path(
    post,
    path = "/agents",
    tag = "agents",
    security(("bearer" = [])),
    request_body = AgentCreate,
    responses(
        (status = 201, body = AgentRecord),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "Not an agents-admin"),
        (status = 409, body = svc_wire::ErrorEnvelope, description = "Handle taken"),
        (status = 422, body = svc_wire::ErrorEnvelope),
    )
)]
pub(crate) async fn create_agent(
    State(app): State<App>,
    principal: Principal,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<AgentRecord>)> {
    let caller = principal.user()?;
    require_agents_admin(&caller)?;
    let params = AgentParams::parse_create(&super::json_body(&headers, body, false)?).map_err(ApiError::Validation)?;
    let (Some(name), Some(config)) = (params.name, params.config) else {
        return Err(ApiError::Internal(anyhow::anyhow!("agent create parsed without name or config")));
    };
    let description = params.description.flatten();
    let agent =
        app.store.create_agent(&caller.workspace.id, &name, description.as_deref(), &config, now_us()).await.map_err(
            |error| match error {
                StoreError::Conflict(_) => {
                    ApiError::status(StatusCode::CONFLICT, format!("An agent named '{name}' already exists"))
                }
                other => other.into(),
            },
        )?;
    tracing::info!(agent.name = %name, workspace.slug = %caller.workspace.slug, "agent created");
    Ok((StatusCode::CREATED, Json(agent_record(&agent))))
}

/// One agent.
#[utoipa::path(
    get,
    path = "/agents/{name}",
    tag = "agents",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "Agent handle")),
    responses((status = 200, body = AgentRecord), (status = 404, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn get_agent(
    State(app): State<App>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<AgentRecord>> {
    let caller = principal.user()?;
    Ok(Json(agent_record(&find_agent(&app, &caller, &name).await?)))
}

/// Changes an agent: present fields replace the stored ones (`config` as a whole).
#[utoipa::path(
    patch,
    path = "/agents/{name}",
    tag = "agents",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "Agent handle")),
    request_body = AgentUpdate,
    responses((status = 200, body = AgentRecord), (status = 403, body = svc_wire::ErrorEnvelope), (status = 404, body = svc_wire::ErrorEnvelope), (status = 422, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn update_agent(
    State(app): State<App>,
    principal: Principal,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<AgentRecord>> {
    let caller = principal.user()?;
    require_agents_admin(&caller)?;
    let params = AgentParams::parse_update(&super::json_body(&headers, body, false)?).map_err(ApiError::Validation)?;
    let current = find_agent(&app, &caller, &name).await?;
    let description = params.description.unwrap_or(current.description.clone());
    let config = match params.config {
        Some(config) => config,
        // A stored document that no longer decodes can be replaced, not patched around.
        None => current.config().map_err(|_| {
            ApiError::status(
                StatusCode::CONFLICT,
                "The stored configuration cannot be loaded; send a whole new `config`",
            )
        })?,
    };
    app.store.update_agent(&caller.workspace.id, &name, description.as_deref(), &config, now_us()).await?;
    Ok(Json(agent_record(&find_agent(&app, &caller, &name).await?)))
}

/// Deletes an agent.
#[utoipa::path(
    delete,
    path = "/agents/{name}",
    tag = "agents",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "Agent handle")),
    responses((status = 204, description = "Deleted"), (status = 403, body = svc_wire::ErrorEnvelope), (status = 404, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn delete_agent(
    State(app): State<App>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let caller = principal.user()?;
    require_agents_admin(&caller)?;
    if app.store.delete_agent(&caller.workspace.id, &name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("No agent named '{name}' in this workspace")))
    }
}

fn require_agents_admin(caller: &UserCaller) -> ApiResult<()> {
    if caller.has_role(AGENTS_ADMIN_ROLE) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("Managing agents requires the role '{AGENTS_ADMIN_ROLE}' or 'admin'")))
    }
}

async fn find_agent(app: &App, caller: &UserCaller, name: &str) -> ApiResult<StoredAgent> {
    app.store
        .agent_by_name(&caller.workspace.id, name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("No agent named '{name}' in this workspace")))
}

fn agent_record(agent: &StoredAgent) -> AgentRecord {
    AgentRecord {
        id: agent.id.clone(),
        name: agent.name.clone(),
        description: agent.description.clone(),
        // A document that does not decode is shown empty here; a start reports it as
        // `agent_config_unavailable`, and a PATCH with a new `config` repairs it.
        config: agent.config().unwrap_or_default(),
        created_at: us_to_seconds(agent.created_us),
        updated_at: us_to_seconds(agent.updated_us),
    }
}
