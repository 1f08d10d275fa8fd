// Readiness (spec, Events > Readiness): the server announces it with a `ready` frame and with the
// agent's `svc.ready` attribute; the client latches on whichever it sees first. The attribute may
// be degraded (session id and duration cap only), in which case a later frame still fills in the
// agent and rejected tools.

import { parseServerEvent, type ReadyEvent } from './protocol.js';

export interface Readiness {
  event: ReadyEvent;
  /** Which announcement latched. */
  source: 'frame' | 'attribute';
  /** False while only a degraded attribute has been seen (agent and rejected_tools unknown). */
  complete: boolean;
}

export class ReadyLatch {
  private latched: Readiness | null = null;

  get value(): Readiness | null {
    return this.latched;
  }

  /**
   * Offers a `ready` frame; returns the readiness when this latched it or completed it, else null.
   */
  offerFrame(event: ReadyEvent): Readiness | null {
    if (this.latched === null) {
      this.latched = { event, source: 'frame', complete: true };
      return this.latched;
    }
    if (!this.latched.complete && event.session_id === this.latched.event.session_id) {
      this.latched = { event, source: this.latched.source, complete: true };
      return this.latched;
    }
    return null;
  }

  /** Offers the `svc.ready` attribute's raw value; returns the readiness when this latched it. */
  offerAttribute(raw: string | undefined): Readiness | null {
    if (this.latched !== null || raw === undefined || raw === '') return null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return null;
    }
    const object = typeof parsed === 'object' && parsed !== null ? { type: 'ready', ...parsed } : parsed;
    const event = parseServerEvent(object);
    if (event.type !== 'ready') return null;
    // The degraded form carries only the session id and the cap.
    const complete = typeof parsed === 'object' && parsed !== null && 'rejected_tools' in parsed;
    this.latched = { event, source: 'attribute', complete };
    return this.latched;
  }
}
