// Turn latency as the user perceives it: from the end of the user's speech to the first agent
// audio the client hears. Pure (times in ms from any monotonic clock), so it is testable without a
// browser; the session feeds it from the microphone level, the server's markers and the level of
// the agent's track.
//
// "End of speech" is the last time the microphone was loud before the server's
// `user-stopped-speaking` (which comes a pause later, when the server's detector is sure), or the
// moment a text turn or `activity-end` was sent. "First agent audio" is the first loud frame of the
// agent's track after that; when the page cannot measure levels, the arrival of
// `bot-started-speaking` stands in (basis `marker`).

export interface TurnLatency {
  /** End of user speech to first agent audio, in ms. */
  ms: number;
  /** What "first agent audio" was measured by. */
  basis: 'audio' | 'marker';
  /** What ended the user's turn. */
  trigger: 'speech' | 'text' | 'activity-end';
}

/** How long before `user-stopped-speaking` the microphone's last loud moment may lie. */
const MAX_SPEECH_LOOKBACK_MS = 5_000;

export class TurnTimer {
  private lastMicVoiceAt: number | null = null;
  private userEndedAt: number | null = null;
  private trigger: TurnLatency['trigger'] = 'speech';
  private markerAt: number | null = null;
  private agentQuiet = false;

  /** The microphone was loud at `t` (call for every loud level sample). */
  micVoice(t: number): void {
    this.lastMicVoiceAt = t;
  }

  /** The server's `user-stopped-speaking` arrived at `t`. */
  userStopped(t: number): void {
    const spoke = this.lastMicVoiceAt !== null && t - this.lastMicVoiceAt <= MAX_SPEECH_LOOKBACK_MS;
    this.open(spoke ? (this.lastMicVoiceAt as number) : t, 'speech');
  }

  /** The client sent a text turn (`send-text`) or `activity-end` at `t`. */
  userSent(t: number, trigger: 'text' | 'activity-end'): void {
    this.open(t, trigger);
  }

  /** The server's `bot-started-speaking` arrived at `t`. */
  botStarted(t: number): void {
    if (this.userEndedAt !== null && this.markerAt === null) this.markerAt = t;
  }

  /**
   * A level sample of the agent's track at `t`. The reply is the first loud sample after the
   * agent was quiet since the user's turn ended (the tail of the previous response, still playing
   * when the user typed, is not the reply). Returns the turn's latency once per turn.
   */
  agentLevel(t: number, loud: boolean): TurnLatency | null {
    if (this.userEndedAt === null || t < this.userEndedAt) return null;
    if (!loud) {
      this.agentQuiet = true;
      return null;
    }
    return this.agentQuiet ? this.close(t, 'audio') : null;
  }

  /** The agent's turn completed; if no audio level was measured, the marker stands in. */
  agentTurnComplete(): TurnLatency | null {
    if (this.userEndedAt === null || this.markerAt === null) {
      this.userEndedAt = null;
      return null;
    }
    return this.close(this.markerAt, 'marker');
  }

  /** The user barged in or a new turn started: an open measurement is abandoned. */
  reset(): void {
    this.userEndedAt = null;
    this.markerAt = null;
  }

  private open(t: number, trigger: TurnLatency['trigger']): void {
    // A second end (speech after a typed turn) keeps the earlier start: the user waits since then.
    if (this.userEndedAt !== null) return;
    this.userEndedAt = t;
    this.trigger = trigger;
    this.markerAt = null;
    this.agentQuiet = false;
  }

  private close(t: number, basis: TurnLatency['basis']): TurnLatency {
    const latency = { ms: Math.max(0, Math.round(t - (this.userEndedAt as number))), basis, trigger: this.trigger };
    this.userEndedAt = null;
    this.markerAt = null;
    return latency;
  }
}
