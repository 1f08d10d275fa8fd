// Verifies webhooks svc's room sent with the official Node server SDK's receiver
// (npm `livekit-server-sdk` `WebhookReceiver`), as a LiveKit user's backend would.
//
// Usage: node webhook_verify.mjs <api key> <api secret> < hooks.jsonl
// Reads JSON lines {"auth", "content_type", "body"}; prints one JSON object: the events the
// receiver accepted and what it said of a copy of the first webhook with its body changed. The Rust
// test (crates/svc-room/tests/webhooks.rs) judges.
import { WebhookReceiver } from 'livekit-server-sdk';

const [key, secret] = process.argv.slice(2);
let input = '';
for await (const chunk of process.stdin) input += chunk;
const hooks = input.split('\n').filter((line) => line.trim()).map((line) => JSON.parse(line));
const receiver = new WebhookReceiver(key, secret);
const out = { accepted: [], refused: [] };
for (const hook of hooks) {
  try {
    const event = await receiver.receive(hook.body, hook.auth);
    out.accepted.push({
      event: event.event,
      room: event.room?.name ?? '',
      identity: event.participant?.identity ?? '',
      track: event.track?.sid ?? '',
      id: event.id,
      createdAt: Number(event.createdAt),
      numDropped: event.numDropped,
    });
  } catch (error) {
    out.refused.push(String(error?.message ?? error));
  }
}
if (hooks.length > 0) {
  const tampered = hooks[0].body.replace('"event"', '"event" ');
  try {
    await receiver.receive(tampered, hooks[0].auth);
    out.tampered = 'accepted';
  } catch (error) {
    out.tampered = String(error?.message ?? error);
  }
}
console.log(JSON.stringify(out));
