// Runs the SDK and the playground in Debian's headless Chromium (playwright-core), with a WAV as
// the fake microphone, against a running `svc serve` (crates/svc-server/tests/playground_e2e.rs
// starts one with a fake provider and judges what this reports):
//
//   node drive.mjs --scenario playground --url http://127.0.0.1:PORT/ --mic speech.wav --out r.json
//                  [--screenshot shot.png]
//   node drive.mjs --scenario sdk --base-url http://127.0.0.1:PORT --api-key KEY --mic speech.wav --out r.json
//   node drive.mjs --scenario sdk-unready --base-url … --api-key KEY --mic speech.wav --out r.json
//
// `playground` uses the page at --url as a person would (the development credential it signs in
// with, the agent form, Talk, the transcript, a typed turn, End, history). `sdk` serves
// sdk-scenario.ts (bundled here with esbuild) from another origin, so the SDK's REST calls cross
// origins as they do in a customer's web app, and runs it; `sdk-unready` runs the SDK with a
// microphone against an agent that never gets ready. Every console error of the page is reported
// (`console_errors`): a page that works logs none. Writes --out and exits 0 iff the
// scenario finished; the Rust test decides whether what it saw is right.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as esbuild from 'esbuild';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    scenario: { type: 'string' },
    url: { type: 'string' },
    'base-url': { type: 'string' },
    'api-key': { type: 'string' },
    mic: { type: 'string' },
    out: { type: 'string' },
    screenshot: { type: 'string' },
    timeout: { type: 'string', default: '120' },
  },
});
const say = (message) => console.error(`${new Date().toISOString().slice(11, 23)} drive ${message}`);
const result = { ok: false, steps: [], observations: { console_errors: [] } };
const step = (name) => {
  say(name);
  result.steps.push(name);
};
function report(exitCode) {
  fs.writeFileSync(args.out, JSON.stringify(result, null, 2));
  process.exit(exitCode);
}

let context = null;
let server = null;
const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-sdk-chromium-'));
async function close() {
  const closing = context;
  context = null;
  if (closing) await Promise.race([closing.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  server?.close();
  fs.rmSync(userDataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, async () => {
    result.failure = `stopped by ${signal}`;
    await close();
    report(1);
  });
}
setTimeout(async () => {
  result.failure = `the driver's own timeout (${args.timeout} s) at step ${result.steps.at(-1)}`;
  await snapshot();
  await close();
  report(1);
}, Number(args.timeout) * 1000).unref();

let page = null;
/** What the page shows, for the report (also on failure). */
async function snapshot() {
  if (!page) return;
  try {
    result.observations.page = await page.evaluate(() => {
      const text = (id) => document.getElementById(id)?.textContent ?? null;
      const turns = (id) =>
        [...document.querySelectorAll(`#${id} li`)].map((li) => ({
          role: li.getAttribute('data-role'),
          final: li.getAttribute('data-final'),
          text: li.querySelector('.text')?.textContent ?? li.textContent,
        }));
      return {
        state: text('state'),
        state_failed: document.getElementById('state')?.dataset.failed ?? null,
        transport: text('transport'),
        agent: text('agent-state'),
        banner: document.getElementById('banner')?.hidden ? '' : text('banner'),
        transcript: turns('transcript'),
        figures: Object.fromEntries(['session', 'connect', 'server', 'turns', 'ping', 'usage'].map((f) => [f, text(`fig-${f}`)])),
        log: [...document.querySelectorAll('#log li')].map((li) => li.textContent),
        history: [...document.querySelectorAll('#history li')].map((li) => li.getAttribute('data-session')),
        history_text: [...document.querySelectorAll('#history li')].map((li) => li.textContent),
        history_current: [...document.querySelectorAll('#history li')].map((li) => li.getAttribute('aria-current')),
        detail_transcript: turns('detail-transcript'),
        detail_usage: text('detail-usage'),
        detail_recording: !document.getElementById('detail-recording')?.hidden,
        detail_timeline: document.querySelectorAll('#detail-timeline li').length,
      };
    });
  } catch (error) {
    result.observations.page_error = error.message;
  }
}

async function launch() {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1440, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${path.resolve(args.mic)}%noloop`,
      '--autoplay-policy=no-user-gesture-required',
    ],
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (message) => {
    say(`page ${message.type()}: ${message.text()}`);
    if (message.type() === 'error') result.observations.console_errors.push(message.text());
  });
  page.on('pageerror', (error) => {
    say(`page error: ${error.message}`);
    result.observations.console_errors.push(error.message);
  });
}

async function playground() {
  step('open the playground');
  await page.goto(args.url);
  await page.waitForFunction(() => document.getElementById('credential').value.startsWith('svc_sk_'), null, { timeout: 10_000 });
  result.observations.credential_source = await page.textContent('#credential-source');
  result.observations.models = await page.$$eval('#model option', (options) => options.map((o) => o.textContent));
  step('fill in the agent');
  await page.selectOption('#model', 'provider_b');
  await page.fill('#greeting', 'Hello from the agent.');
  await page.fill('#instructions', 'You are a test agent.');
  await page.fill(
    '#tools',
    JSON.stringify([
      {
        name: 'lookup_order',
        description: 'Look up an order by id.',
        parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] },
        result: { status: 'shipped', eta: 'Friday' },
      },
    ]),
  );
  step('talk');
  await page.click('#talk-button');
  await page.waitForFunction(() => document.getElementById('state').dataset.kind === 'connected', null, { timeout: 20_000 });
  const finals = (n) => page.waitForFunction((n) => document.querySelectorAll('#transcript li[data-role="ASSISTANT"][data-final="true"]').length >= n, n, { timeout: 45_000 });
  step('hear the greeting and the reply to the spoken turn');
  await finals(2);
  step('type a turn that calls the client tool');
  await page.fill('#text-input', 'Where is my order 42?');
  await page.click('#text-send');
  await finals(3);
  await page.waitForFunction(() => /median/.test(document.getElementById('fig-turns').textContent), null, { timeout: 10_000 });
  await page.waitForFunction(() => document.getElementById('mic-level') !== null);
  step('mute and unmute');
  await page.click('#mute-button');
  await page.waitForTimeout(300);
  await page.click('#mute-button');
  if (args.screenshot) {
    step('screenshot');
    await page.screenshot({ path: args.screenshot, fullPage: true });
  }
  step('end');
  await page.click('#end-button');
  await page.waitForFunction(() => document.getElementById('state').dataset.kind === 'disconnected', null, { timeout: 15_000 });
  step('final usage');
  await page.waitForFunction(() => /recorded|unavailable/.test(document.getElementById('fig-usage').textContent), null, { timeout: 20_000 });
  result.observations.after_end = await page.evaluate(() => ({
    agent: document.getElementById('agent-state').textContent,
    history: [...document.querySelectorAll('#history li')].map((li) => li.textContent),
  }));
  step('browse history');
  await page.waitForSelector('#history li[data-session]', { timeout: 10_000 });
  await page.click('#history li[data-session]');
  await page.waitForFunction(() => document.querySelectorAll('#detail-transcript li').length > 0, null, { timeout: 10_000 });
  await page.waitForFunction(() => !document.getElementById('detail-recording').hidden, null, { timeout: 10_000 });
  await snapshot();
}

async function sdk(entry = 'runScenario') {
  step('bundle the SDK scenario');
  const bundle = await esbuild.build({
    entryPoints: [path.join(here, 'sdk-scenario.ts')],
    bundle: true,
    format: 'esm',
    target: 'es2020',
    write: false,
    logLevel: 'warning',
  });
  const script = bundle.outputFiles[0].contents;
  server = http.createServer((request, response) => {
    if (request.url === '/scenario.js') {
      response.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
    } else {
      response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>svc-js scenario</title><script type="module" src="/scenario.js"></script>');
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  step('run it');
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForFunction((entry) => typeof window[entry] === 'function', entry);
  result.observations.sdk = await page.evaluate(([entry, baseUrl, apiKey]) => window[entry](baseUrl, apiKey), [entry, args['base-url'], args['api-key']]);
}

try {
  await launch();
  if (args.scenario === 'playground') await playground();
  else if (args.scenario === 'sdk') await sdk();
  else if (args.scenario === 'sdk-unready') await sdk('runUnreadyScenario');
  else throw new Error('--scenario must be playground, sdk or sdk-unready');
  result.ok = true;
} catch (error) {
  result.failure = `${result.steps.at(-1)}: ${error.message}`;
  await snapshot();
}
await close();
report(result.ok ? 0 : 1);
