// The REST side of svc, typed from docs/openapi.json (src/openapi.d.ts is generated from it by
// `npm run generate`; the test command regenerates it and fails on a difference, so the document
// and this client cannot drift).

import type { components, operations } from './openapi.js';
import { SDK_NAME, SDK_VERSION } from './version.js';

type Schemas = components['schemas'];
export type StartResponse = Schemas['StartResponse'];
export type StartTimings = Schemas['StartTimings'];
export type CredentialInfo = Schemas['CredentialInfo'];
export type SessionRecord = Schemas['SessionRecord'];
export type TranscriptTurn = Schemas['TranscriptTurn'];
export type UsageSummary = Schemas['UsageSummary'];
export type Timeline = Schemas['Timeline'];
export type TimelineEvent = Schemas['TimelineEvent'];
export type MintedToken = Schemas['MintedToken'];
export type ValidationIssue = Schemas['ValidationIssue'];
export type ListSessionsQuery = NonNullable<operations['list_sessions']['parameters']['query']>;

/**
 * The body of a session start, without the `sdk` stamp the SDK adds itself: `agent` (inline or
 * catalog) and `session` params, as the spec's session-config.
 */
export type SessionConfig = Omit<Schemas['SessionConfigDoc'], 'sdk' | 'type'>;

/**
 * An inline agent's `tool_response_policy`: whether the model waits for each tool's result
 * (`blocking`) or keeps talking (`non_blocking`), and when a non-blocking result reaches the
 * conversation (`when_idle`, the default; `silent`; `interrupt`), as a session default plus
 * per-tool overrides keyed by tool name. Problems are 422 `invalid_tool_config`.
 */
export type ToolResponsePolicy = Schemas['ToolResponsePolicyDoc'];
/** One rule of a {@link ToolResponsePolicy}. */
export type ToolResponseRule = Schemas['ToolResponseRuleDoc'];

/** `name/version`, the `X-Svc-SDK` header value. */
export const SDK_HEADER_VALUE = `${SDK_NAME}/${SDK_VERSION}`;

/**
 * The structured extras svc sends beside `message` in an error (spec, "Optional structured
 * extras, grouped by code"; `min_version` of `sdk_unsupported`). Extras a newer server adds are
 * kept under their own names too.
 */
export interface SvcErrorDetails {
  /** `concurrent_session_limit`: the workspace's limit of live sessions, and how many are live. */
  limit?: number;
  active?: number;
  /** `free_minutes_exhausted`: the free voice grant and what was used of it, in whole minutes. */
  granted_minutes?: number;
  used_minutes?: number;
  /** `insufficient_credits`: the balance, and where to top it up. */
  balance_cents?: number;
  top_up_path?: string;
  /** `quota_exceeded`: the meter, its allowance and use, and when it resets (epoch seconds). */
  meter?: string;
  included?: number;
  used?: number;
  reset_at?: number;
  /** `provider_not_entitled`: the provider refused, the plan's providers, and where to upgrade. */
  provider?: string;
  allowed_providers?: string[];
  plan?: string;
  upgrade_path?: string;
  /** `sdk_unsupported`: the oldest version the server accepts. */
  min_version?: string;
  [extra: string]: unknown;
}

/** The envelope's own fields; everything else in it is an extra. */
const ENVELOPE_FIELDS = new Set(['type', 'code', 'message', 'errors']);

/** A non-2xx answer from svc, with the envelope's fields. */
export class SvcApiError extends Error {
  constructor(
    /** HTTP status (0 when the request never got an answer). */
    readonly status: number,
    /** The envelope's `type` (`api_error`, `validation_error`, `internal_error`), or `network_error`. */
    readonly type: string,
    /** The envelope's `code` (`concurrent_session_limit`, `sdk_unsupported`, …), if any. */
    readonly code: string | null,
    message: string,
    /** Validation issues of a 422. */
    readonly errors: ValidationIssue[] = [],
    /** The response's `x-request-id`, for support requests. */
    readonly requestId: string | null = null,
    /** The code's structured extras (`limit`/`active`, `min_version`, …); empty when none came. */
    readonly details: SvcErrorDetails = {},
  ) {
    super(message);
    this.name = 'SvcApiError';
  }
}

/** Where and as whom to call svc. */
export interface ApiOptions {
  /** The server's base URL (`https://voice.example.com`); `/api/v1/external` is appended. */
  baseUrl: string;
  /** A Bearer credential: an API key, a minted end-user token, or a function that fetches one. */
  credential: string | (() => string | Promise<string>);
  /** The fetch to use (defaults to the global one). */
  fetch?: typeof fetch;
}

export class SvcApi {
  private readonly base: string;
  private readonly fetcher: typeof fetch;

  constructor(private readonly options: ApiOptions) {
    this.base = `${options.baseUrl.replace(/\/+$/, '')}/api/v1/external`;
    this.fetcher = options.fetch ?? ((...args) => globalThis.fetch(...args));
  }

  /** `POST /realtime/session/start`, stamped with this SDK's identity. */
  startSession(config: SessionConfig): Promise<StartResponse> {
    const body = { ...config, type: 'session-config', sdk: { name: SDK_NAME, version: SDK_VERSION } };
    return this.json('POST', '/realtime/session/start', body, { 'X-Svc-SDK': SDK_HEADER_VALUE });
  }

  /** `GET /realtime/verify`: what the credential is and may do. */
  verify(): Promise<CredentialInfo> {
    return this.json('GET', '/realtime/verify');
  }

  /** `GET /sessions` (newest first). */
  listSessions(query: ListSessionsQuery = {}): Promise<SessionRecord[]> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
    const suffix = params.size > 0 ? `?${params}` : '';
    return this.json('GET', `/sessions${suffix}`);
  }

  getSession(id: string): Promise<SessionRecord> {
    return this.json('GET', `/sessions/${encodeURIComponent(id)}`);
  }

  getTranscript(id: string): Promise<TranscriptTurn[]> {
    return this.json('GET', `/sessions/${encodeURIComponent(id)}/transcript`);
  }

  getUsage(id: string): Promise<UsageSummary> {
    return this.json('GET', `/sessions/${encodeURIComponent(id)}/usage`);
  }

  getTimeline(id: string): Promise<Timeline> {
    return this.json('GET', `/sessions/${encodeURIComponent(id)}/timeline`);
  }

  /** The recording (a WAV), as a Blob. */
  async getRecording(id: string): Promise<Blob> {
    const response = await this.send('GET', `/sessions/${encodeURIComponent(id)}/recording`);
    return response.blob();
  }

  /** Polls usage while it is `pending` (spec, States), every `intervalMs`, for at most `timeoutMs`. */
  async finalUsage(id: string, intervalMs = 500, timeoutMs = 30_000): Promise<UsageSummary> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const usage = await this.getUsage(id);
      if (usage.usage_status !== 'pending' || Date.now() >= deadline) return usage;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }

  private async json<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const response = await this.send(method, path, body, headers);
    return (await response.json()) as T;
  }

  private async send(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    const credential = typeof this.options.credential === 'function' ? await this.options.credential() : this.options.credential;
    const init: RequestInit = { method, headers: { Authorization: `Bearer ${credential}`, ...headers } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)['Content-Type'] = 'application/json';
    }
    let response: Response;
    try {
      response = await this.fetcher(`${this.base}${path}`, init);
    } catch (error) {
      throw new SvcApiError(0, 'network_error', null, `${method} ${path}: ${(error as Error).message}`);
    }
    if (!response.ok) throw await errorFrom(response);
    return response;
  }
}

/** Reads svc's error envelope (`{error: {type, code?, message, errors?}}`, or `{detail}` on a 401). */
export async function errorFrom(response: Response): Promise<SvcApiError> {
  const requestId = response.headers.get('x-request-id');
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: keep the status line
  }
  const envelope = (body as { error?: Record<string, unknown> } | null)?.error;
  if (envelope && typeof envelope === 'object') {
    const details: SvcErrorDetails = {};
    for (const [name, value] of Object.entries(envelope)) if (!ENVELOPE_FIELDS.has(name)) details[name] = value;
    return new SvcApiError(
      response.status,
      typeof envelope.type === 'string' ? envelope.type : 'api_error',
      typeof envelope.code === 'string' ? envelope.code : null,
      typeof envelope.message === 'string' ? envelope.message : `HTTP ${response.status}`,
      Array.isArray(envelope.errors) ? (envelope.errors as ValidationIssue[]) : [],
      requestId,
      details,
    );
  }
  const detail = (body as { detail?: unknown } | null)?.detail;
  return new SvcApiError(
    response.status,
    'api_error',
    null,
    typeof detail === 'string' ? detail : `HTTP ${response.status} ${response.statusText}`.trim(),
    [],
    requestId,
  );
}
