/**
 * The "is this URL audio" rule (src/flows/audio-check.ts) against a real HTTP server on
 * 127.0.0.1: a real WAV and MP3, an HTML page, a 404, a redirect, a slow answer, a body that
 * never ends, HEAD refused; and `switchboard flows validate --check-audio` over flow files.
 *
 * What the provider accepts in a menu's `introUrl` comes from its speech-call page,
 * https://smsbat.com/help/api/smsbat/speechcall/ (published site only: the repository
 * smsbat/help has no docs/api/smsbat/speechcall.md), whose examples show only audio ids
 * (`ivr_XXXXX`, `ivr_651854`); docs/provider.md, "Audio in speech-call menus".
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runFlows } from '../../src/cli/flows.ts';
import {
  audioSignature,
  checkAudioRefs,
  createAudioChecker,
  flowAudioRefs,
} from '../../src/flows/audio-check.ts';
import { createOutboundPolicy, type OutboundPolicy } from '../../src/http/outbound.ts';
import { encodeMp3, encodeWav } from '../../src/speech/audio.ts';

/** Half a second of a 440 Hz tone: real audio, not a header alone. */
function tone(rate: number): Int16Array {
  const out = new Int16Array(rate / 2);
  for (let i = 0; i < out.length; i++)
    out[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate));
  return out;
}
const WAV = encodeWav(tone(8000), 8000);
const MP3 = encodeMp3(tone(16_000), 16_000);

interface Seen {
  method: string;
  path: string;
  range: string | undefined;
}

interface AudioServer {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

function send(
  res: ServerResponse,
  status: number,
  type: string | undefined,
  body: Uint8Array | string,
  head: boolean,
) {
  res.statusCode = status;
  if (type !== undefined) res.setHeader('content-type', type);
  res.setHeader(
    'content-length',
    String(typeof body === 'string' ? Buffer.byteLength(body) : body.length),
  );
  res.end(head ? undefined : body);
}

/** The routes every test here uses. */
async function startAudioServer(): Promise<AudioServer> {
  const seen: Seen[] = [];
  const slow = new Set<ServerResponse>();
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const head = req.method === 'HEAD';
    seen.push({ method: req.method ?? '', path, range: req.headers.range });
    switch (path) {
      case '/prompts/ok.wav':
        return send(res, 200, 'audio/wav', WAV, head);
      case '/octet.mp3':
        // a store that labels everything octet-stream: the first bytes say what it is
        return send(res, 200, 'application/octet-stream', MP3, head);
      case '/no-head.wav':
        if (head) return send(res, 405, 'text/plain', 'no HEAD here', true);
        return send(res, 200, undefined, WAV, false);
      case '/page.html':
        return send(
          res,
          200,
          'text/html; charset=utf-8',
          '<!doctype html><p>Not found (soft)</p>',
          head,
        );
      case '/moved.wav':
        res.statusCode = 302;
        res.setHeader('location', '/prompts/ok.wav');
        return res.end();
      case '/slow.wav':
        slow.add(res); // answers only when the server closes
        return;
      case '/endless': {
        // a body that never ends: only a capped read finishes
        res.statusCode = 200;
        res.setHeader('content-type', 'application/octet-stream');
        if (head) return res.end(); // a HEAD answer has no body (writes to it are dropped)
        const stream = new PassThrough();
        stream.pipe(res);
        const chunk = Buffer.alloc(16_384, 0x41);
        const pump = () => {
          while (!res.destroyed && stream.write(chunk)) {}
          if (!res.destroyed) stream.once('drain', pump);
        };
        res.on('close', () => stream.destroy());
        pump();
        return;
      }
      default:
        return send(res, 404, 'text/plain', 'not found', head);
    }
  };
  const server: Server = createServer(handle);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((done) => {
        for (const res of slow) res.destroy();
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

let audio: AudioServer;
let open: OutboundPolicy; // OUTBOUND_ALLOW_PRIVATE=true: the test server is on 127.0.0.1
let strict: OutboundPolicy; // the default: no private addresses, except its own origin

beforeAll(async () => {
  audio = await startAudioServer();
  open = createOutboundPolicy({ allowPrivate: true });
  strict = createOutboundPolicy({ allowPrivate: false, ownOrigins: [audio.url] });
});
afterAll(async () => {
  await open.close();
  await strict.close();
  await audio.close();
});

describe('audioSignature', () => {
  test('knows WAV, MP3 (an encoder frame, an ID3 tag) and Ogg by their first bytes, and nothing else', () => {
    expect(audioSignature(WAV)).toBe('wav');
    expect(audioSignature(MP3)).toBe('mp3');
    expect(audioSignature(new TextEncoder().encode('ID3\u0004\u0000rest'))).toBe('mp3');
    expect(audioSignature(new TextEncoder().encode('OggS\u0000\u0002'))).toBe('ogg');
    expect(audioSignature(new TextEncoder().encode('<!doctype html>'))).toBeUndefined();
    expect(
      audioSignature(new TextEncoder().encode('RIFF\u0000\u0000\u0000\u0000AVI ')),
    ).toBeUndefined();
    expect(audioSignature(new Uint8Array([0xff, 0xf9]))).toBeUndefined(); // layer bits 00: reserved
    expect(audioSignature(new Uint8Array([0xff, 0xfb]))).toBe('mp3'); // MPEG-1 layer III
    expect(audioSignature(new Uint8Array())).toBeUndefined();
  });
});

describe('createAudioChecker', () => {
  test('a WAV served as audio/wav is audio after one HEAD', async () => {
    const check = createAudioChecker({ outbound: open });
    const before = audio.seen.length;
    const r = await check(`${audio.url}/prompts/ok.wav`);
    expect(r).toEqual({ url: `${audio.url}/prompts/ok.wav`, result: 'audio', detail: 'audio/wav' });
    expect(audio.seen.slice(before).map((s) => s.method)).toEqual(['HEAD']);
  });

  test('audio labelled octet-stream, or a server refusing HEAD, is read by a ranged GET', async () => {
    const check = createAudioChecker({ outbound: open, maxBytes: 512 });
    const before = audio.seen.length;
    expect(await check(`${audio.url}/octet.mp3`)).toMatchObject({
      result: 'audio',
      detail: 'mp3 data served as application/octet-stream',
    });
    expect(await check(`${audio.url}/no-head.wav`)).toMatchObject({
      result: 'audio',
      detail: 'wav data',
    });
    expect(audio.seen.slice(before)).toEqual([
      { method: 'HEAD', path: '/octet.mp3', range: undefined },
      { method: 'GET', path: '/octet.mp3', range: 'bytes=0-511' },
      { method: 'HEAD', path: '/no-head.wav', range: undefined },
      { method: 'GET', path: '/no-head.wav', range: 'bytes=0-511' },
    ]);
  });

  test('an HTML page and a 404 are not audio, and say what came', async () => {
    const check = createAudioChecker({ outbound: open });
    expect(await check(`${audio.url}/page.html`)).toMatchObject({
      result: 'not-audio',
      detail: 'answered 200 with text/html, not audio',
    });
    expect(await check(`${audio.url}/gone.wav`)).toMatchObject({
      result: 'not-audio',
      detail: 'answered 404',
    });
  });

  test('a slow answer is not audio once the timeout passes', async () => {
    const check = createAudioChecker({ outbound: open, timeoutMs: 300 });
    const started = performance.now();
    expect(await check(`${audio.url}/slow.wav`)).toMatchObject({
      result: 'not-audio',
      detail: 'no answer within 300 ms',
    });
    expect(performance.now() - started).toBeLessThan(5000);
  });

  test('a body that never ends is read only up to the cap', async () => {
    // without the cap the read would run into the timeout and say "no answer"
    const check = createAudioChecker({ outbound: open, timeoutMs: 10_000, maxBytes: 1024 });
    expect(await check(`${audio.url}/endless`)).toMatchObject({
      result: 'not-audio',
      detail: 'answered 200 with application/octet-stream, not audio',
    });
  });

  test('a redirect is not followed: not checked', async () => {
    const check = createAudioChecker({ outbound: open });
    expect(await check(`${audio.url}/moved.wav`)).toMatchObject({
      result: 'not-checked',
      detail: 'redirects (302 to /prompts/ok.wav), and redirects are not followed',
    });
  });

  test('what the policy refuses, and a name that does not resolve, are not checked; ids pass', async () => {
    const check = createAudioChecker({
      outbound: strict,
      resolveName: async (host) => {
        throw Object.assign(new Error(`${host} not found`), { code: 'ENOTFOUND' });
      },
    });
    const before = audio.seen.length;
    expect(await check('http://10.1.2.3/intro.wav')).toMatchObject({
      result: 'not-checked',
      detail: 'refused by the outbound policy: 10.1.2.3 is a private address',
    });
    expect(await check('http://localhost:9/intro.wav')).toMatchObject({ result: 'not-checked' });
    expect(await check('https://cdn.invalid/intro.wav')).toMatchObject({
      result: 'not-checked',
      detail: 'its host name does not resolve from here',
    });
    expect(await check('ivr_651854')).toMatchObject({ result: 'provider-id' });
    expect(audio.seen.length).toBe(before);
    // the policy's own origins are always allowed (Switchboard's PUBLIC_URL /prompts/)
    expect(await check(`${audio.url}/prompts/ok.wav`)).toMatchObject({ result: 'audio' });
  });

  test('a refused connection is not audio', async () => {
    const closed = await startAudioServer();
    const url = `${closed.url}/prompts/ok.wav`;
    await closed.close();
    const check = createAudioChecker({ outbound: open, timeoutMs: 2000 });
    expect(await check(url)).toMatchObject({
      result: 'not-audio',
      detail: 'no answer: the connection failed',
    });
  });

  test('checkAudioRefs fetches each distinct URL once, in order of first appearance', async () => {
    const check = createAudioChecker({ outbound: open });
    const before = audio.seen.length;
    const url = `${audio.url}/prompts/ok.wav`;
    const results = await checkAudioRefs(check, [url, 'ivr_1', url, 'ivr_1']);
    expect(results.map((r) => [r.url, r.result])).toEqual([
      [url, 'audio'],
      ['ivr_1', 'provider-id'],
    ]);
    expect(audio.seen.slice(before)).toHaveLength(1);
  });
});

describe('flowAudioRefs', () => {
  test('lists every prompt of every menu, per language, with its kind', () => {
    const refs = flowAudioRefs({
      menus: {
        main: {
          intro: { en: 'https://a.test/en.wav', uk: 'ivr_2' },
          reprompt: 'https://a.test/{{name}}.wav',
        },
        spoken: { intro: { say: 'Hello {{name}}' }, reprompt: { en: { say: 'Again' } } },
      },
    });
    expect(refs).toEqual([
      { path: ['menus', 'main', 'intro', 'en'], kind: 'url', value: 'https://a.test/en.wav' },
      { path: ['menus', 'main', 'intro', 'uk'], kind: 'id', value: 'ivr_2' },
      {
        path: ['menus', 'main', 'reprompt'],
        kind: 'template',
        value: 'https://a.test/{{name}}.wav',
      },
      { path: ['menus', 'spoken', 'intro'], kind: 'say', value: 'Hello {{name}}' },
      { path: ['menus', 'spoken', 'reprompt', 'en'], kind: 'say', value: 'Again' },
    ]);
    expect(flowAudioRefs(null)).toEqual([]);
  });
});

describe('switchboard flows validate --check-audio', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'audio-check-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function run(
    files: Record<string, string>,
    env: Record<string, string> = { OUTBOUND_ALLOW_PRIVATE: 'true' },
  ) {
    const sub = await mkdtemp(join(dir, 'flows-'));
    for (const [name, text] of Object.entries(files)) await writeFile(join(sub, name), text);
    let stdout = '';
    let stderr = '';
    const sink = (add: (s: string) => void) =>
      ({
        write: (chunk: string) => {
          add(String(chunk));
          return true;
        },
      }) as unknown as NodeJS.WritableStream;
    const code = await runFlows(['validate', '--check-audio', '--dir', sub], {
      stdout: sink((s) => (stdout += s)),
      stderr: sink((s) => (stderr += s)),
      cwd: sub,
      env,
    });
    return { code, stdout, stderr };
  }

  const flow = (intro: string, reprompt?: string) =>
    [
      'params:',
      '  name: string',
      'menus:',
      '  main:',
      `    intro: ${intro}`,
      ...(reprompt === undefined ? [] : [`    reprompt: ${reprompt}`]),
      '    keys:',
      '      "1": [hangup]',
      'assert: { outcomeOnEveryPath: false }',
      '',
    ].join('\n');

  test('every static URL answers with audio: exit 0; ids and templates are skipped with a note', async () => {
    const r = await run({
      'good.yaml': flow(`${audio.url}/prompts/ok.wav`, 'ivr_651854'),
      'templated.yaml': flow(`"${audio.url}/prompts/{{name}}.wav"`),
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`audio ok: ${audio.url}/prompts/ok.wav (audio/wav)`);
    expect(r.stdout).toContain(
      'good.yaml:6:15: note: ivr_651854 is a provider audio id: not fetched',
    );
    expect(r.stdout).toMatch(
      /templated\.yaml:5:12: note: .*\{\{name\}\}.* a template: not fetched/,
    );
  });

  test('a URL that is not audio: file:line:column, exit 1', async () => {
    const r = await run({
      'broken.yaml': flow(
        `{ en: "${audio.url}/prompts/ok.wav", uk: "${audio.url}/page.html" }`,
        `${audio.url}/gone.wav`,
      ),
    });
    expect(r.code).toBe(1);
    const line = r.stdout.split('\n').filter((l) => l.includes('error [AUDIO_NOT_AUDIO]'));
    expect(line).toEqual([
      expect.stringMatching(
        new RegExp(
          `^broken\\.yaml:5:\\d+: error \\[AUDIO_NOT_AUDIO\\] ${audio.url}/page\\.html answered 200 with text/html, not audio \\(at menus\\.main\\.intro\\.uk\\)$`,
        ),
      ),
      `broken.yaml:6:15: error [AUDIO_NOT_AUDIO] ${audio.url}/gone.wav answered 404 (at menus.main.reprompt)`,
    ]);
    expect(r.stdout).toContain('audio: 3 URLs: 1 audio, 2 not audio, 0 not checked');
  });

  test('without OUTBOUND_ALLOW_PRIVATE a private address is not checked (a note), not a failure', async () => {
    const r = await run({ 'private.yaml': flow(`${audio.url}/page.html`) }, {});
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      `private.yaml:5:12: note: ${audio.url}/page.html not checked: refused by the outbound policy`,
    );
  });
});
