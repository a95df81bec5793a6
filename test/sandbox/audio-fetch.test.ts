/**
 * The sandbox fetches a speech call's audio as the provider would when it places the call
 * (src/flows/audio-check.ts through the outbound policy): a call whose intro does not answer
 * with audio fails as an unanswered call does; provider audio ids pass through; a URL the
 * policy refuses, or whose name does not resolve, is reported on the call as not checked.
 *
 * The provider's speech-call page (https://smsbat.com/help/api/smsbat/speechcall/, published
 * site only: not in smsbat/help's docs/api/) shows `introUrl` only as an audio id
 * (`ivr_XXXXX`); docs/provider.md, "Audio in speech-call menus", says what that leaves open.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createOutboundPolicy, type OutboundPolicy } from '../../src/http/outbound.ts';
import { encodeWav } from '../../src/speech/audio.ts';
import { API_KEY, type Json, json, type Served, serveSandbox } from './helpers.ts';

const TO = '+380501234567';
const tone = new Int16Array(4000).map((_, i) => Math.round(8000 * Math.sin(i / 3)));
const WAV = encodeWav(tone, 8000);

/** Serves a WAV at /prompts/*.wav, an HTML page at /page.html, 404 elsewhere; counts requests. */
interface AudioHost {
  url: string;
  requests: { method: string; path: string }[];
  close(): Promise<void>;
}

async function startAudioHost(): Promise<AudioHost> {
  const requests: AudioHost['requests'] = [];
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    requests.push({ method: req.method ?? '', path });
    if (path === '/slow.wav') return; // never answers (closeAllConnections ends it)
    const head = req.method === 'HEAD';
    if (req.method === 'POST') {
      req.resume(); // the sandbox's delivery callbacks, when this host is its PUBLIC_URL
      res.statusCode = 200;
      return res.end('{}');
    }
    if (/^\/prompts\/[a-z0-9-]+\.wav$/.test(path)) {
      res.setHeader('content-type', 'audio/wav');
      res.setHeader('content-length', String(WAV.length));
      return res.end(head ? undefined : WAV);
    }
    if (path === '/page.html') {
      res.setHeader('content-type', 'text/html');
      return res.end(head ? undefined : '<p>hello</p>');
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

function speechcall(intros: string[], webhook: string) {
  return {
    from: 'Acme',
    to: TO,
    type: 'speechcall',
    text: 'ivr',
    menu: intros.map((introUrl, i) => ({
      introUrl,
      dtmfActions: {
        d1: [{ action: 'webhook', url: `${webhook}/ivr/${i}`, body: { menu: i } }],
        wrong: [{ action: 'hangup' }],
        ...(i + 1 < intros.length && { d2: [{ action: 'gotoMenu', menu: i + 1 }] }),
      },
    })),
  };
}

let host: AudioHost;
let s: Served;
let policy: OutboundPolicy | undefined;

beforeEach(async () => {
  host = await startAudioHost();
});
afterEach(async () => {
  await s?.close();
  await policy?.close();
  policy = undefined;
  await host.close();
});

async function placeCall(intros: string[], keys: string[] = ['2', '1']) {
  await fetch(`${s.baseUrl}/_control/scripts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ to: TO, keys }),
  });
  const sent = await json(
    fetch(`${s.baseUrl}/bat/messagelist`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...API_KEY },
      body: JSON.stringify({ messages: [speechcall(intros, s.receiver.url)] }),
    }),
  );
  const mid: string = sent.messages[0].messageId;
  await s.clock.advance(30_000);
  const message: Json = await json(fetch(`${s.baseUrl}/_control/messages/${mid}`));
  const calls: Json[] = await json(
    fetch(`${s.baseUrl}/_control/calls?to=${encodeURIComponent(TO)}`),
  );
  return { message, call: calls.find((c) => c.messageId === mid) };
}

describe('a speech call fetches its audio (OUTBOUND_ALLOW_PRIVATE: the host is on 127.0.0.1)', () => {
  beforeEach(async () => {
    policy = createOutboundPolicy({ allowPrivate: true });
    s = await serveSandbox({ outbound: policy });
  });

  test('audio URLs that answer with audio, and ids, let the call play; each URL is fetched once', async () => {
    const intro = `${host.url}/prompts/main.wav`;
    const { message, call } = await placeCall([intro, 'ivr_651854', intro]);
    expect(message.status).toBe('delivered');
    expect(call.state).toBe('ended');
    expect(call.path.map((p: Json) => p.menu)).toEqual([0, 1]);
    expect(call.audio).toEqual([
      { url: intro, result: 'audio', detail: 'audio/wav' },
      {
        url: 'ivr_651854',
        result: 'provider-id',
        detail: 'a provider audio id: played from the provider library',
      },
    ]);
    expect(host.requests).toEqual([{ method: 'HEAD', path: '/prompts/main.wav' }]);
  });

  test('an intro that answers 404 or with an HTML page fails the call, as the provider reports a failed call', async () => {
    const { message, call } = await placeCall([
      `${host.url}/prompts/main.wav`,
      `${host.url}/page.html`,
      `${host.url}/prompts/gone.mp3`,
    ]);
    expect(message.status).toBe('failed');
    expect(message.error).toEqual({
      code: 'DELIVERY_FAILED',
      message: `the call's audio ${host.url}/page.html did not answer with audio: answered 200 with text/html, not audio`,
    });
    expect(call.state).toBe('not-answered');
    expect(call.path).toEqual([]);
    expect(call.audio.map((a: Json) => [a.url.replace(host.url, ''), a.result])).toEqual([
      ['/prompts/main.wav', 'audio'],
      ['/page.html', 'not-audio'],
      ['/prompts/gone.mp3', 'not-audio'],
    ]);
    // the failure is the one reported for any failed call: no menu, no webhook
    expect(s.receiver.received.filter((r) => r.path.startsWith('/ivr/'))).toEqual([]);
    expect(
      s.receiver.received
        .filter((r) => r.path === '/hooks/delivery')
        .map((r) => (r.body as Json).status),
    ).toEqual(['sent', 'failed']);
  });
});

describe('the default policy: private addresses refused, except Switchboard own PUBLIC_URL', () => {
  test('PUBLIC_URL /prompts/ is fetched; a private address and an unresolvable name are "not checked" and the call plays', async () => {
    // the sandbox's callbacks go to PUBLIC_URL, so its origin is the policy's own
    s = await serveSandbox({ callbackUrl: `${host.url}/hooks/delivery` });
    const own = `${host.url}/prompts/hello.wav`;
    const { message, call } = await placeCall([
      own,
      'http://10.0.0.7/intro.wav',
      'https://cdn.example.com/main.mp3',
    ]);
    expect(message.status).toBe('delivered');
    expect(call.state).toBe('ended');
    expect(call.audio).toEqual([
      { url: own, result: 'audio', detail: 'audio/wav' },
      {
        url: 'http://10.0.0.7/intro.wav',
        result: 'not-checked',
        detail: 'refused by the outbound policy: 10.0.0.7 is a private address',
      },
      {
        url: 'https://cdn.example.com/main.mp3',
        result: 'not-checked',
        detail: expect.stringMatching(/does not resolve|refused by the outbound policy/),
      },
    ]);
    expect(host.requests.filter((r) => r.method !== 'POST')).toEqual([
      { method: 'HEAD', path: '/prompts/hello.wav' },
    ]);
  });

  test('own PUBLIC_URL audio that is missing fails the call', async () => {
    s = await serveSandbox({ callbackUrl: `${host.url}/hooks/delivery` });
    const { message, call } = await placeCall([`${host.url}/prompts/missing.txt`]);
    expect(message.status).toBe('failed');
    expect(message.error.message).toContain('answered 404');
    expect(call.audio).toEqual([
      { url: `${host.url}/prompts/missing.txt`, result: 'not-audio', detail: 'answered 404' },
    ]);
  });
});

describe('closing', () => {
  test('closing the sandbox stops an audio check under way instead of waiting for its timeout', async () => {
    policy = createOutboundPolicy({ allowPrivate: true });
    s = await serveSandbox({ outbound: policy, audioCheck: { timeoutMs: 20_000 } });
    const sent = await json(
      fetch(`${s.baseUrl}/bat/messagelist`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...API_KEY },
        body: JSON.stringify({ messages: [speechcall([`${host.url}/slow.wav`], s.receiver.url)] }),
      }),
    );
    expect(sent.messages[0].status).toBe('accepted');
    // the request has reached the host: the check is under way
    while (!host.requests.some((r) => r.path === '/slow.wav')) {
      await new Promise((done) => setImmediate(done));
    }
    const started = performance.now();
    await s.close();
    expect(performance.now() - started).toBeLessThan(5000);
  });
});
