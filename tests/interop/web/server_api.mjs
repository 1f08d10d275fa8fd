// LiveKit's server API against svc's room, driven by the official Node server SDK
// (npm `livekit-server-sdk`, which speaks Twirp with JSON bodies and posts to the origin's
// /twirp, whatever path the URL has). An in-process agent sits in the room `session-room`.
// Prints one JSON object for the Rust test (crates/svc-room/tests/server_api.rs) to judge.
import { DataPacket_Kind, RoomServiceClient, TrackSource } from 'livekit-server-sdk';

const [url, key, secret] = process.argv.slice(2);
const rooms = new RoomServiceClient(url, key, secret);
const out = {};
const errorOf = (error) => ({ code: error.code ?? error.name, status: error.status ?? null });

const created = await rooms.createRoom({ name: 'node-room', emptyTimeout: 60, metadata: 'from node' });
out.created = { name: created.name, metadata: created.metadata, emptyTimeout: created.emptyTimeout, sid: created.sid.startsWith('RM_') };
out.listed = (await rooms.listRooms()).map((room) => [room.name, room.numParticipants]).sort();
const agent = (await rooms.listParticipants('session-room')).map((p) => [p.identity, p.kind]);
out.participants = agent;
const updated = await rooms.updateParticipant('session-room', 'agent', { attributes: { 'from.node': 'yes' }, metadata: 'node meta' });
out.updated = { metadata: updated.metadata, attributes: updated.attributes };
await rooms.sendData('session-room', new TextEncoder().encode('node says hi'), DataPacket_Kind.RELIABLE, { topic: 'node.topic', destinationIdentities: ['agent'] });
const roomMeta = await rooms.updateRoomMetadata('session-room', 'node room meta');
out.roomMetadata = roomMeta.metadata;
const errors = {};
try {
  await rooms.getParticipant('session-room', 'nobody');
} catch (error) {
  errors.unknownIdentity = errorOf(error);
}
try {
  await rooms.deleteRoom('no-such-room');
} catch (error) {
  errors.deleteUnknownRoom = errorOf(error);
}
try {
  await new RoomServiceClient(url, key, 'a-different-secret-0123456789abcdef').listRooms();
} catch (error) {
  errors.wrongSecret = errorOf(error);
}
out.errors = errors;
await rooms.deleteRoom('node-room');
out.afterDelete = (await rooms.listRooms()).map((room) => room.name);
out.trackSourceKnown = TrackSource.MICROPHONE !== undefined;
console.log(JSON.stringify(out));
