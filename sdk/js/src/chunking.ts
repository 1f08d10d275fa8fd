// Chunking both ways (spec, Events > Chunking): a message whose JSON passes 12,000 bytes travels as
// chunks of 8,000 bytes of its UTF-8, base64 in `data`; the client sends `envelope-chunk`s and
// reassembles the server's `server-envelope-chunk`s. The reassembler is bounded like the server's
// own (docs/API-DESIGN.md, "Bounds of client messages"), so a misbehaving peer cannot make the page
// buffer without limit.

import { base64ToBytes, bytesToBase64 } from './base64.js';

/** Messages whose JSON is longer than this many bytes are chunked. */
export const ENVELOPE_THRESHOLD_BYTES = 12_000;
/** Bytes of the inner message per chunk. */
export const CHUNK_BYTES = 8_000;
/** At most this many envelopes are being reassembled at once; a new one evicts the oldest. */
export const MAX_OPEN_ENVELOPES = 4;
/** At most this many chunks per envelope (1.5 MiB of message). */
export const MAX_CHUNKS_PER_ENVELOPE = 197;
/** An envelope still incomplete after this long is dropped. */
export const ENVELOPE_TIMEOUT_MS = 30_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

let envelopeCounter = 0;
function newEnvelopeId(): string {
  envelopeCounter += 1;
  const random = Math.random().toString(36).slice(2, 10);
  return `cli_${Date.now().toString(36)}_${random}_${envelopeCounter}`;
}

/**
 * The data-channel payloads that carry `message`: the message itself when its JSON is at most
 * 12,000 bytes, otherwise `envelope-chunk`s in `seq` order.
 */
export function encodeMessage(message: object, envelopeId: () => string = newEnvelopeId): Uint8Array[] {
  const bytes = encoder.encode(JSON.stringify(message));
  if (bytes.length <= ENVELOPE_THRESHOLD_BYTES) return [bytes];
  const id = envelopeId();
  const total = Math.ceil(bytes.length / CHUNK_BYTES);
  const chunks: Uint8Array[] = [];
  for (let seq = 0; seq < total; seq++) {
    const data = bytesToBase64(bytes.subarray(seq * CHUNK_BYTES, (seq + 1) * CHUNK_BYTES));
    chunks.push(encoder.encode(JSON.stringify({ type: 'envelope-chunk', envelope_id: id, seq, total, data })));
  }
  return chunks;
}

/** Why a chunk was dropped. */
export type ChunkProblem =
  | 'malformed'
  | 'too_many_chunks'
  | 'total_mismatch'
  | 'chunk_too_large'
  | 'bad_base64'
  | 'duplicate'
  | 'evicted'
  | 'expired'
  | 'bad_message';

interface Open {
  total: number;
  parts: (Uint8Array | undefined)[];
  received: number;
  openedAt: number;
}

/** What one chunk did. */
export type ChunkOutcome =
  | { kind: 'pending' }
  | { kind: 'message'; message: unknown }
  | { kind: 'dropped'; problem: ChunkProblem };

/** Reassembles `server-envelope-chunk`s into the messages they carry. */
export class Reassembler {
  private open = new Map<string, Open>();
  /** Chunks and envelopes dropped, by reason. */
  readonly dropped: Partial<Record<ChunkProblem, number>> = {};

  constructor(private readonly now: () => number = () => Date.now()) {}

  /** Envelopes being reassembled. */
  get openEnvelopes(): number {
    return this.open.size;
  }

  /** Feeds one chunk message (already JSON-decoded). */
  accept(chunk: Record<string, unknown>): ChunkOutcome {
    this.expire();
    const { envelope_id: id, seq, total, data } = chunk;
    if (
      typeof id !== 'string' || id.length === 0 || id.length > 128 ||
      !Number.isInteger(seq) || !Number.isInteger(total) || typeof data !== 'string' ||
      (total as number) < 1 || (seq as number) < 0 || (seq as number) >= (total as number)
    ) {
      return this.drop('malformed');
    }
    if ((total as number) > MAX_CHUNKS_PER_ENVELOPE) return this.drop('too_many_chunks');
    const bytes = base64ToBytes(data);
    if (bytes === null) return this.drop('bad_base64');
    if (bytes.length > CHUNK_BYTES) return this.drop('chunk_too_large');
    let envelope = this.open.get(id);
    if (envelope === undefined) {
      if (this.open.size >= MAX_OPEN_ENVELOPES) {
        const oldest = this.open.keys().next().value as string;
        this.open.delete(oldest);
        this.count('evicted');
      }
      envelope = { total: total as number, parts: new Array(total as number), received: 0, openedAt: this.now() };
      this.open.set(id, envelope);
    }
    if (envelope.total !== total) return this.drop('total_mismatch');
    if (envelope.parts[seq as number] !== undefined) return this.drop('duplicate');
    envelope.parts[seq as number] = bytes;
    envelope.received += 1;
    if (envelope.received < envelope.total) return { kind: 'pending' };
    this.open.delete(id);
    const whole = new Uint8Array(envelope.parts.reduce((sum, part) => sum + (part as Uint8Array).length, 0));
    let offset = 0;
    for (const part of envelope.parts as Uint8Array[]) {
      whole.set(part, offset);
      offset += part.length;
    }
    try {
      return { kind: 'message', message: JSON.parse(decoder.decode(whole)) };
    } catch {
      return this.drop('bad_message');
    }
  }

  private expire(): void {
    const now = this.now();
    for (const [id, envelope] of this.open) {
      if (now - envelope.openedAt > ENVELOPE_TIMEOUT_MS) {
        this.open.delete(id);
        this.count('expired');
      }
    }
  }

  private drop(problem: ChunkProblem): ChunkOutcome {
    this.count(problem);
    return { kind: 'dropped', problem };
  }

  private count(problem: ChunkProblem): void {
    this.dropped[problem] = (this.dropped[problem] ?? 0) + 1;
  }
}
