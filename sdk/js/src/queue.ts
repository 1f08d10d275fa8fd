// The SDK's event stream: a bounded queue (spec, Limits: 1,024 events, overflow drops). Events are
// buffered from the moment a session starts, so a consumer that begins iterating late misses
// nothing until the queue is full; after that, new events are dropped (the oldest are the ones a
// reader is about to see) and counted in `dropped`.

/** Capacity of the event queue. */
export const EVENT_QUEUE_CAPACITY = 1024;

export class EventQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private head = 0;
  private waiters: ((item: IteratorResult<T>) => void)[] = [];
  private closed = false;
  /** Events dropped because the queue was full. */
  dropped = 0;

  constructor(readonly capacity: number = EVENT_QUEUE_CAPACITY) {}

  /** Events waiting to be read. */
  get length(): number {
    return this.items.length - this.head;
  }

  /** Queues `item`; false (and counted) when the queue is full or closed. */
  push(item: T): boolean {
    if (this.closed) return false;
    const waiter = this.waiters.shift();
    if (waiter) {
      waiter({ value: item, done: false });
      return true;
    }
    if (this.length >= this.capacity) {
      this.dropped += 1;
      return false;
    }
    this.items.push(item);
    return true;
  }

  /** The next event, waiting for one; `undefined` once the queue is closed and drained. */
  async next(): Promise<T | undefined> {
    const result = await this.nextResult();
    return result.done ? undefined : result.value;
  }

  private nextResult(): Promise<IteratorResult<T>> {
    if (this.length > 0) {
      const value = this.items[this.head] as T;
      this.head += 1;
      if (this.head > 512 && this.head * 2 > this.items.length) {
        this.items = this.items.slice(this.head);
        this.head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** No more events: readers drain what is queued, then see the end. */
  close(): void {
    this.closed = true;
    for (const waiter of this.waiters.splice(0)) waiter({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return { next: () => this.nextResult() };
  }
}
