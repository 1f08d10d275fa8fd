// The client-side session lifecycle (spec, States and transitions) as a pure state machine:
//
//   idle --start--> connecting --handshake ok--> connected <--drop/rotation--> reconnecting
//   connecting | connected | reconnecting --end (by either side) or failure--> disconnected
//
// `disconnected` latches: one session is one attempt, and nothing moves it again. The machine also
// derives the transport-state vocabulary, whose transitions the spec leaves open (see
// docs/API-DESIGN.md, "The client SDK").

export type SessionStateKind = 'idle' | 'connecting' | 'connected' | 'reconnecting' | 'disconnected';

export type DisconnectReason = 'client_ended' | 'client_closed' | 'handshake_failed' | 'server_ended' | 'transport_error';

export type TransportState =
  | 'disconnected'
  | 'requesting-permission'
  | 'connecting'
  | 'connected'
  | 'ready'
  | 'reconnecting'
  | 'disconnecting'
  | 'failed';

export type AgentState = 'idle' | 'listening' | 'thinking' | 'speaking';

/** What can happen to a session. */
export type LifecycleInput =
  | { kind: 'start' }
  | { kind: 'permission' } // asking for the microphone
  | { kind: 'room-connecting' }
  | { kind: 'room-connected' }
  | { kind: 'handshake-ok' } // `ready` latched
  | { kind: 'transport-drop' } // the room is reconnecting its transport
  | { kind: 'rotation' } // the server's `reconnecting`
  | { kind: 'recovered'; of: 'transport' | 'rotation' }
  | { kind: 'ending' } // the client asked to end; waiting for the room to close
  | { kind: 'ended'; reason: DisconnectReason; detail?: string };

/** The session's state as the SDK reports it. */
export interface SessionState {
  kind: SessionStateKind;
  transport: TransportState;
  /** Set once `kind` is `disconnected`. */
  reason: DisconnectReason | null;
  /** A human-readable detail of the reason (an HTTP error, the server's slug, …). */
  detail: string | null;
}

export class Lifecycle {
  private current: SessionState = { kind: 'idle', transport: 'disconnected', reason: null, detail: null };
  // Both kinds of trouble can overlap; the session is back only when neither lasts.
  private transportDown = false;
  private rotating = false;

  get state(): SessionState {
    return { ...this.current };
  }

  /** Applies `input`; returns the new state when anything changed, else null. */
  apply(input: LifecycleInput): SessionState | null {
    const before = this.current;
    const next = this.next(before, input);
    if (next === null) return null;
    if (next.kind === before.kind && next.transport === before.transport && next.reason === before.reason) return null;
    this.current = next;
    return { ...next };
  }

  private next(s: SessionState, input: LifecycleInput): SessionState | null {
    if (s.kind === 'disconnected') return null; // latched
    const at = (kind: SessionStateKind, transport: TransportState): SessionState => ({ ...s, kind, transport });
    switch (input.kind) {
      case 'start':
        return s.kind === 'idle' ? at('connecting', 'connecting') : null;
      case 'permission':
        return s.kind === 'connecting' ? at('connecting', 'requesting-permission') : null;
      case 'room-connecting':
        return s.kind === 'connecting' ? at('connecting', 'connecting') : null;
      case 'room-connected':
        return s.kind === 'connecting' ? at('connecting', 'connected') : null;
      case 'handshake-ok':
        return s.kind === 'connecting' ? at('connected', 'ready') : null;
      case 'transport-drop':
        if (s.kind !== 'connected' && s.kind !== 'reconnecting') return null;
        this.transportDown = true;
        return at('reconnecting', 'reconnecting');
      case 'rotation':
        if (s.kind !== 'connected' && s.kind !== 'reconnecting') return null;
        this.rotating = true;
        return at('reconnecting', this.transportDown ? 'reconnecting' : s.transport);
      case 'recovered':
        if (input.of === 'transport') this.transportDown = false;
        else this.rotating = false;
        if (s.kind !== 'reconnecting') return null;
        if (this.transportDown) return null;
        return at(this.rotating ? 'reconnecting' : 'connected', 'ready');
      case 'ending':
        return s.kind === 'idle' ? null : at(s.kind, 'disconnecting');
      case 'ended': {
        if (s.kind === 'idle') return null;
        const failed = input.reason === 'transport_error' || input.reason === 'handshake_failed';
        return { kind: 'disconnected', transport: failed ? 'failed' : 'disconnected', reason: input.reason, detail: input.detail ?? null };
      }
    }
  }
}

/** Reads LiveKit's `lk.agent.state` attribute into the spec's agent-state vocabulary. */
export function agentStateFromAttribute(value: string | undefined): AgentState {
  switch (value) {
    case 'listening':
    case 'thinking':
    case 'speaking':
      return value;
    default:
      return 'idle'; // `initializing`, absent, or a value this SDK does not know
  }
}
