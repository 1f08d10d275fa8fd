// Runs the browser peer (app.js, bundled into dist/) in Debian's headless Chromium via
// playwright-core, with a WAV as the fake microphone. Same arguments and result file as
// ../py/lk_peer.py, plus --python (the venv interpreter that runs ../py/compare.py):
//
//   node drive.mjs --url ws://127.0.0.1:PORT/room --token JWT --peer IDENTITY --role caller|responder
//                  --publish-wav mine.wav --expect-wav theirs.wav --out result.json
//                  [--single-pc 0|1|default] [--timeout 40] [--python target/interop/venv/bin/python]
//
// `--self-check` instead (with --publish-wav, --expect-wav and --out only) needs no server: the page
// sends its fake microphone through a local RTCPeerConnection pair into the peer's recorder, and
// the recording must match --publish-wav and must not match --expect-wav. It proves the measuring
// instrument (fake mic, Opus, recorder, compare.py) before any room test relies on it.
//
// `--session` instead runs the svc session client (session.js, for crates/svc-server/tests/
// sessions_e2e.rs): the driver starts a session over REST (--base-url, --api-key, --config: the
// session-config fields beside `sdk`), and the page joins, talks (the fake microphone plays
// --publish-wav once, when the page turns it on) and types, and records the agent.
//
// Writes result.json and result.recorded.wav, exits 0 iff the peer's checks all passed. The browser
// is always closed: on success, on failure, on the driver's own overall timeout and on SIGTERM.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    peer: { type: 'string' },
    role: { type: 'string' },
    'publish-wav': { type: 'string' },
    'expect-wav': { type: 'string' },
    out: { type: 'string' },
    'single-pc': { type: 'string', default: 'default' },
    timeout: { type: 'string', default: '40' },
    python: { type: 'string', default: path.resolve(here, '../../../target/interop/venv/bin/python') },
    'self-check': { type: 'boolean', default: false },
    session: { type: 'boolean', default: false },
    'base-url': { type: 'string' },
    'api-key': { type: 'string' },
    config: { type: 'string', default: '{}' },
  },
});
const selfCheck = args['self-check'];
const sessionMode = args.session;
const required = selfCheck
  ? ['publish-wav', 'expect-wav', 'out']
  : sessionMode
    ? ['base-url', 'api-key', 'publish-wav', 'out']
    : ['url', 'token', 'peer', 'role', 'publish-wav', 'expect-wav', 'out'];
for (const name of required) {
  if (!args[name]) usage(`--${name} is required`);
}
if (selfCheck) args.role = 'self-check';
else if (sessionMode) {
  args.role = 'session';
  args['expect-wav'] ??= args['publish-wav'];
} else if (!['caller', 'responder'].includes(args.role)) usage('--role must be caller or responder');
if (!['0', '1', 'default'].includes(args['single-pc'])) usage('--single-pc must be 0, 1 or default');

const started = Date.now();
const timeoutSeconds = Number(args.timeout);
const out = path.resolve(args.out);
const recordingPath = out.replace(/\.json$/, '') + '.recorded.wav';
const publishWav = path.resolve(args['publish-wav']);
const expectWav = path.resolve(args['expect-wav']);
const compareScript = path.resolve(here, '../py/compare.py');
const dist = path.resolve(here, 'dist');
const say = (message) => console.error(`${new Date().toISOString().slice(11, 23)} ${args.role} drive ${message}`);

for (const [file, hint] of [
  [path.join(dist, 'bundle.js'), 'run scripts/interop-setup.sh'],
  [publishWav, 'run scripts/interop-setup.sh'],
  [expectWav, 'run scripts/interop-setup.sh'],
  [args.python, 'run scripts/interop-setup.sh (or pass --python)'],
  ['/usr/bin/chromium', 'apt-get install chromium (scripts/interop-setup.sh does)'],
]) {
  if (!fs.existsSync(file)) report({ ok: false, failures: [`driver: ${file} is missing: ${hint}`], observations: {} });
}

// --- What the page hears, accumulated here so that it can be written and judged ----------------
const recorded = [];
let recordedBytes = 0;
function writeRecording() {
  const pcm = Buffer.concat(recorded, recordedBytes);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + pcm.length, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(48000, 24);
  header.writeUInt32LE(96000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(pcm.length, 40);
  fs.writeFileSync(recordingPath, Buffer.concat([header, pcm]));
}
function judgeAudio(tailSeconds, reference = expectWav) {
  writeRecording();
  const argv = [compareScript, recordingPath, reference, '--json', '--tail', String(tailSeconds)];
  return new Promise((resolve) => {
    execFile(args.python, argv, { timeout: 20000 }, (error, stdout, stderr) => {
      try {
        resolve(JSON.parse(stdout));
      } catch {
        resolve({ ok: false, reason: `compare.py failed: ${error?.message ?? ''} ${stderr}`.trim() });
      }
    });
  });
}

// --- The page, served from dist/ on a free loopback port ----------------------------------------
const indexPage = sessionMode ? '/session.html' : '/index.html';
const server = http.createServer((request, response) => {
  const name = new URL(request.url, 'http://page').pathname.replace(/^\/$/, indexPage);
  const file = path.join(dist, path.normalize(name));
  if (!file.startsWith(dist + path.sep) || !fs.existsSync(file)) {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, { 'content-type': file.endsWith('.js') ? 'text/javascript' : 'text/html' }).end(fs.readFileSync(file));
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const pageUrl = `http://127.0.0.1:${server.address().port}/`;

// A fresh profile every run: nothing (permissions, cached v0/v1 choice) leaks between runs.
const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-interop-chromium-'));
let context = null;
let page = null;
let finished = false;
const signalUrls = [];

async function closeBrowser() {
  const closing = context;
  context = null;
  if (closing) await Promise.race([closing.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  server.close();
  try {
    // A browser killed along with us may still be writing its profile: retry, never fail on it.
    fs.rmSync(userDataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  } catch (error) {
    say(`could not remove ${userDataDir}: ${error.message}`);
  }
}

async function finish(result) {
  if (finished) return;
  finished = true;
  await closeBrowser();
  if (recordedBytes) {
    writeRecording();
    result.observations.recording = recordingPath;
    result.observations.agent_recording = recordingPath;
  }
  report(result);
}

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, async () => {
    say(`${signal}: closing the browser`);
    const reason = `driver: stopped by ${signal} after ${(Date.now() - started) / 1000} s`;
    // What the page had seen so far is the most useful part of a killed run.
    const partial = await Promise.race([
      page?.evaluate((r) => window.partialResult?.(r), reason).catch(() => null),
      new Promise((resolve) => setTimeout(resolve, 2000)),
    ]);
    finish(partial ?? { ok: false, failures: [reason], observations: {} });
  });
}

try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    // Our own signal handlers close the browser, after asking the page what it has seen.
    handleSIGTERM: false,
    handleSIGINT: false,
    args: [
      '--headless',
      '--no-sandbox', // runs as root in CI
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--use-fake-ui-for-media-stream', // grant getUserMedia without a prompt
      '--use-fake-device-for-media-stream',
      // The microphone plays (and loops) the WAV; a session client speaks it once.
      `--use-file-for-fake-audio-capture=${publishWav}${sessionMode ? '%noloop' : ''}`,
      '--autoplay-policy=no-user-gesture-required', // the peer's audio element and AudioContext may play
      ...(process.env.INTEROP_CHROMIUM_FLAGS ?? '').split(' ').filter(Boolean),
    ],
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (message) => say(`console.${message.type()}: ${redact(message.text()).slice(0, 400)}`));
  page.on('pageerror', (error) => say(`pageerror: ${error.message}`));
  page.on('websocket', (socket) => {
    const url = redact(socket.url()).replace(/join_request=[^&]+/, 'join_request=<b64>');
    signalUrls.push(url.split('?')[0]);
    say(`websocket: ${url.slice(0, 200)}`);
  });
  page.on('requestfailed', (request) => {
    if (!request.url().startsWith(pageUrl)) say(`request failed: ${request.url().split('?')[0]} -> ${request.failure()?.errorText}`);
  });
  await page.exposeFunction('interopAudioChunk', (b64) => {
    const chunk = Buffer.from(b64, 'base64');
    recorded.push(chunk);
    recordedBytes += chunk.length;
  });
  await page.exposeFunction('interopJudgeAudio', judgeAudio);
  await page.goto(pageUrl);
  const entry = sessionMode ? 'runSession' : 'runPeer';
  await page.waitForFunction((name) => typeof window[name] === 'function', entry, { timeout: 10000 });
  say(`chromium ready in ${Date.now() - started} ms`);
  if (sessionMode) await finish(await runSession(page));

  const wavSeconds = (file) => (fs.statSync(file).size - 44) / 2 / 48000;
  if (selfCheck) await finish(await runSelfCheck(page, wavSeconds(publishWav) + 1.5));
  const expectSeconds = wavSeconds(expectWav);
  const config = {
    url: args.url,
    token: args.token,
    peer: args.peer,
    role: args.role,
    singlePeerConnection: args['single-pc'] === 'default' ? null : args['single-pc'] === '1',
    timeoutSeconds,
    expectSeconds,
  };
  // The page keeps its own deadline; this one only catches a page that stopped answering.
  const overall = (timeoutSeconds + 10) * 1000;
  const result = await Promise.race([
    page.evaluate((c) => window.runPeer(c), config),
    new Promise((resolve) => setTimeout(() => resolve(null), overall)),
  ]);
  const final =
    result ??
    (await Promise.race([
      page.evaluate((reason) => window.partialResult(reason), `driver: the page did not finish within ${overall / 1000} s`),
      new Promise((resolve) => setTimeout(() => resolve({ ok: false, failures: ['driver: the page stopped answering'], observations: {} }), 3000)),
    ]));
  final.observations.signal_urls = signalUrls;
  if (final.failures[0]?.includes('waiting for connect()') && signalUrls.length > 1) {
    final.failures[0] += ` (livekit-client made ${signalUrls.length} signalling attempts, last ${signalUrls.at(-1)};` +
      ' it retries without end when /rtc/validate answers a bare 404)';
  }
  final.observations.signal_v1_fallback = signalUrls.some((u) => u.endsWith('/rtc/v1')) && signalUrls.some((u) => u.endsWith('/rtc'));
  await finish(final);
} catch (error) {
  await finish({ ok: false, failures: [`driver: ${error?.message?.split('\n')[0] ?? error}`], observations: { signal_urls: signalUrls } });
}

// Starts the session over REST, then lets the page run it.
async function runSession(page) {
  const body = { sdk: { name: 'e2e-browser', version: '1.0.0' }, ...JSON.parse(args.config) };
  const response = await fetch(`${args['base-url'].replace(/\/$/, '')}/api/v1/external/realtime/session/start`, {
    method: 'POST',
    headers: { authorization: `Bearer ${args['api-key']}`, 'content-type': 'application/json', 'x-svc-sdk': 'e2e-browser/1.0.0' },
    body: JSON.stringify(body),
  });
  const start = await response.json();
  if (response.status !== 200) return { ok: false, failures: [`session start answered ${response.status}: ${JSON.stringify(start)}`], observations: {} };
  const overall = (timeoutSeconds + 10) * 1000;
  const result = await Promise.race([
    page.evaluate((c) => window.runSession(c), { start, timeoutSeconds }),
    new Promise((resolve) => setTimeout(() => resolve(null), overall)),
  ]);
  const final = result ?? (await page.evaluate((reason) => window.sessionResult(reason), 'driver: the page did not finish in time'));
  final.observations.session_id = start.session_id;
  return final;
}

// Judged like a peer judges: every second, the last sentence-plus-1.5 s must match, within the
// run's timeout. The same stretch must not match the other sentence.
async function runSelfCheck(page, need) {
  await page.evaluate(() => window.selfCheckStart());
  let own = { ok: false, reason: 'nothing recorded' };
  while (!own.ok && Date.now() - started < timeoutSeconds * 1000) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    if (recordedBytes / 2 / 48000 >= need) own = await judgeAudio(need, publishWav);
  }
  const other = await judgeAudio(need, expectWav);
  const observations = { ...(await page.evaluate(() => window.selfCheckStop())), own, other };
  const failures = [];
  if (!own.ok) failures.push(`the loopback recording never matched ${publishWav} within ${timeoutSeconds} s: ${own.reason}`);
  if (other.ok) failures.push(`the loopback recording also matches ${expectWav}: the judge cannot tell the sentences apart`);
  return { ok: failures.length === 0, failures, observations };
}

// Tokens stay out of logs (Chromium prints failed WebSocket URLs in full).
function redact(text) {
  return text.replace(/access_token=[^&\s'"]+/g, 'access_token=<jwt>');
}

function report(result) {
  result.observations.driver_elapsed = (Date.now() - started) / 1000;
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
  console.log(JSON.stringify({ ok: result.ok, failures: result.failures }));
  process.exit(result.ok ? 0 : 1);
}

function usage(message) {
  console.error(`drive.mjs: ${message}\nsee the header of tests/interop/web/drive.mjs`);
  process.exit(2);
}
