/**
 * The embedded speech engine: eSpeak NG 1.52 compiled to WebAssembly (the `espeak-ng` npm
 * package, GPL-3.0-or-later). Its 18 MB .wasm carries the program and every language's data,
 * so it speaks with no network and no system package. src/speech/espeak-core.ts runs the
 * program; this file is the engine around it: the same checks as every engine, voices, and
 * several texts said in one run.
 *
 * The text goes in as a file, never as an argument, so text that looks like an option is
 * spoken, and markup in it is spoken too, not obeyed (a batch's SSML escapes every text).
 *
 * A synthesis is synchronous WebAssembly: it holds its thread for its length (measured on one
 * core: 30-60 ms of CPU for a ten-second prompt, about 0.15 s for a minute of speech), so
 * callers render ahead of time, never while a provider waits. The server's engine
 * (`createEspeakEngine`) runs it in a worker thread (src/speech/espeak-worker.ts) that ends
 * when idle, so neither the event loop nor an idle server's memory carries it;
 * `createEspeakInProcess` is the same engine in the calling thread.
 *
 * @example
 * const engine = createEspeakEngine();
 * const { samples, sampleRate } = await engine.synthesize('Добрий день', { lang: 'uk' });
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { threadId, Worker } from 'node:worker_threads';
import { decodeWav, SILENCE_THRESHOLD } from './audio.ts';
import {
  checkSpeechRequest,
  type SpeechEngine,
  SpeechError,
  type SpeechLanguage,
  type SpeechOptions,
  type SynthesizedSpeech,
} from './engine.ts';
import {
  type EspeakStartup,
  type EspeakVoices,
  espeakFiles,
  espeakThreadStartup,
  espeakVoices,
  runEspeak,
} from './espeak-core.ts';

export type { EspeakStartup } from './espeak-core.ts';
export { lastNonZero } from './espeak-core.ts';

/** espeak-ng's own pace (words per minute) for rate 1. */
const NORMAL_WPM = 175;
/** Bumped whenever this file changes how the same request sounds. */
const WRAPPER_REVISION = 1;
const DEFAULT_MAX_TEXT_LENGTH = 1000;

const requireHere = createRequire(import.meta.url);

/** Where eSpeak NG runs: in this thread, or in the worker. */
interface EspeakRunner {
  voices(): Promise<EspeakVoices>;
  /** the run's WAV (it may be a view the next run overwrites: decode it at once) */
  run(args: string[], text: string): Promise<Uint8Array>;
  /** SpeechEngine.idle: end what runs the engine now, if nothing is asked of it */
  idle?(): void;
}

/** The start-up cost of the engine that last ran (the worker's, else this thread's). */
export function espeakStartup(): EspeakStartup | undefined {
  return workerStartup ? { ...workerStartup } : espeakThreadStartup();
}

/** The engine's name and version (read from the package), the same in and out of a worker. */
function espeakIdentity(): { name: string; version: string } {
  const manifest = JSON.parse(readFileSync(espeakFiles().manifest, 'utf8')) as { version: string };
  return { name: 'espeak-ng', version: `${manifest.version}+${WRAPPER_REVISION}` };
}

const loadFailure = (e: unknown) =>
  new SpeechError(
    'ENGINE_FAILED',
    `eSpeak NG could not be loaded: ${e instanceof Error ? e.message : String(e)}`,
  );

/**
 * eSpeak NG in this thread; every engine this returns shares the thread's one instance. The
 * server uses `createEspeakEngine` (the same engine in a worker thread); tests hold the
 * worker's answers to this one's. `plainOutput`: the WAV goes to a file of the in-memory file
 * system, as espeak-ng writes it unless told otherwise (tests hold the device to it).
 */
export function createEspeakInProcess(
  options: { maxTextLength?: number; plainOutput?: boolean } = {},
): SpeechEngine {
  const output = options.plainOutput ? 'plain' : 'device';
  return engineOver(
    {
      voices: () => espeakVoices().catch((e: unknown) => Promise.reject(loadFailure(e))),
      async run(args, text) {
        const done = await runEspeak(args, text, output).catch((e: unknown) =>
          Promise.reject(loadFailure(e)),
        );
        if ('failure' in done) throw new SpeechError('ENGINE_FAILED', done.failure);
        return done.wav;
      },
    },
    options.maxTextLength ?? DEFAULT_MAX_TEXT_LENGTH,
  );
}

/** The engine over a runner: checks, arguments, batches cut at their breaks. */
function engineOver(runner: EspeakRunner, maxTextLength: number): SpeechEngine {
  let voices: { languages: SpeechLanguage[]; variants: Map<string, string> } | undefined;
  const known = async () => {
    if (!voices) {
      const v = await runner.voices();
      voices = { languages: v.languages, variants: new Map(v.variants) };
    }
    return voices;
  };
  const say = async (job: { text: string; args: string[] }, view = false) =>
    decodeWav(await runner.run(job.args, job.text), { view });

  const engine: SpeechEngine = {
    ...espeakIdentity(),
    maxTextLength,
    ...(runner.idle && { idle: runner.idle }),
    async voices() {
      return (await known()).languages;
    },
    async synthesize(text, request) {
      return say(checkedArgs(await known(), text, request));
    },
    async synthesizeMany(texts, request) {
      const v = await known();
      const jobs = texts.map((text) => checkedArgs(v, text, request));
      if (jobs.length <= 1) return Promise.all(jobs.map((job) => say(job)));
      // one run says them all, a long break apart, and its audio is cut at the breaks: a
      // run's start costs far more than a short text (docs/performance.md, part (i))
      const joined = {
        // SSML (-m), so the breaks are obeyed; each text is escaped, so nothing in it is
        text: `<speak>${jobs.map((j) => escapeXml(j.text)).join(`<break time="${BATCH_BREAK_MS}ms"/>`)}</speak>`,
        args: ['-m', ...jobs[0]!.args],
      };
      // a view of the run's output: the pieces cut from it are copies
      const all = await say(joined, true);
      const pieces = splitAtBreaks(all.samples, all.sampleRate, jobs.length);
      // a text with a pause as long as the break in it (it cannot be cut right): one by one
      if (!pieces) {
        const each: SynthesizedSpeech[] = [];
        for (const job of jobs) each.push(await say(job));
        return each;
      }
      return pieces.map((samples) => ({ samples, sampleRate: all.sampleRate }));
    },
  };

  function checkedArgs(
    v: { languages: SpeechLanguage[]; variants: Map<string, string> },
    text: string,
    request: SpeechOptions,
  ) {
    const checked = checkSpeechRequest(text, request, engine, v.languages);
    let voice = checked.lang;
    if (checked.voice !== undefined) {
      const variant = v.variants.get(checked.voice.trim().toLowerCase());
      if (!variant) {
        throw new SpeechError(
          'UNKNOWN_VOICE',
          `eSpeak NG has no voice ${JSON.stringify(checked.voice)}`,
          { path: 'voice', code: 'INVALID_VALUE' },
        );
      }
      voice = `${checked.lang}+${variant}`;
    }
    const wpm = String(Math.round(NORMAL_WPM * checked.rate));
    return { text: checked.text, args: ['-v', voice, '-s', wpm, '-b', '1', '-f', '/in.txt'] };
  }

  return engine;
}

/** The break between texts said in one run, and the shortest silence taken for one. */
const BATCH_BREAK_MS = 1200;
const BATCH_SPLIT_MS = 900;
/** Silence kept around each piece cut out (trimSilence evens the edges later). */
const BATCH_EDGE_MS = 80;

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The audio cut at its silences of at least BATCH_SPLIT_MS, into exactly `count` pieces;
 * undefined when it does not cut into that many (the caller then says each text alone).
 */
export function splitAtBreaks(
  samples: Int16Array,
  sampleRate: number,
  count: number,
): Int16Array[] | undefined {
  const minGap = Math.round((BATCH_SPLIT_MS / 1000) * sampleRate);
  const edge = Math.round((BATCH_EDGE_MS / 1000) * sampleRate);
  const pieces: Int16Array[] = [];
  let start = 0;
  let quietFrom = -1;
  for (let i = 0; i < samples.length; i++) {
    if (Math.abs(samples[i]!) >= SILENCE_THRESHOLD) {
      if (quietFrom >= 0 && i - quietFrom >= minGap && quietFrom > start) {
        pieces.push(samples.slice(start, quietFrom + edge));
        start = i - edge;
      }
      quietFrom = -1;
    } else if (quietFrom < 0) quietFrom = i;
  }
  pieces.push(samples.slice(start, quietFrom >= 0 ? quietFrom : samples.length));
  return pieces.length === count ? pieces : undefined;
}

/**
 * How long the worker thread of `createEspeakEngine` may sit idle before it is ended. Ended,
 * its WebAssembly memory, compiled code and heap go back to the operating system (about 70 MB
 * of RSS, docs/performance.md); started again, it costs about 0.3 s of CPU, so a server that
 * renders now and then spends at most 3% of a core on restarts.
 */
export const ESPEAK_IDLE_MS = 10_000;

/** What the worker is asked (src/speech/espeak-worker.ts answers). */
export type EspeakWorkerRequest = { id: number } & (
  | { kind: 'voices' }
  | { kind: 'run'; args: string[]; text: string }
);

/** The worker's answer to one request, with its start-up figures. */
export type EspeakWorkerReply = { id: number; startup?: EspeakStartup } & (
  | { ok: true; voices?: EspeakVoices; wav?: Uint8Array }
  | { ok: false; failure: string; loading?: boolean }
);

/**
 * How long a request may wait for the worker thread's answer, its start and the requests
 * ahead of it included (a 40-text batch takes about 2 s, a start under 1 s). A thread that
 * has not answered by then is taken for stuck: it is ended, every request waiting on it fails
 * with TIMEOUT, and the next request starts a new one, so a stuck thread never holds the
 * renders (and the dispatcher's wait for them) for good.
 */
export const ESPEAK_ANSWER_MS = 60_000;

interface EngineThread {
  worker: Worker;
  pending: Map<
    number,
    {
      resolve: (r: EspeakWorkerReply) => void;
      reject: (e: Error) => void;
      timer: NodeJS.Timeout;
    }
  >;
  idle?: NodeJS.Timeout;
  idleMs: number;
}

let thread: EngineThread | undefined;
let nextRequest = 1;
let workersStarted = 0;
let workerStartup: EspeakStartup | undefined;
/** The voices, from the first worker that listed them (the same engine lists the same). */
let voicesSeen: EspeakVoices | undefined;

/** The script of the worker thread run from the TypeScript sources, once built (workerScript). */
let sourceWorker: URL | undefined;

/**
 * The worker thread's script. Built (dist/), it is espeak-worker.js beside this file. Run from
 * the TypeScript sources (tests, `npm run dev`, the bench process), it is espeak-worker.ts and
 * espeak-core.ts bundled by esbuild into one plain module, once per process, kept under
 * node_modules/.cache by its content's hash (so that `espeak-ng` resolves from it): a worker
 * that loaded the sources through tsx would run on Node's module hooks, a loader thread of its
 * own per worker, whose start and end under load are what Node's hooks have deadlocked on.
 */
function workerScript(): URL {
  if (!fileURLToPath(import.meta.url).endsWith('.ts'))
    return new URL('./espeak-worker.js', import.meta.url);
  if (sourceWorker) return sourceWorker;
  const { buildSync } = requireHere('esbuild') as typeof import('esbuild');
  const [built] = buildSync({
    entryPoints: [fileURLToPath(new URL('./espeak-worker.ts', import.meta.url))],
    bundle: true,
    packages: 'external',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    write: false,
    logLevel: 'warning',
  }).outputFiles;
  const dir = fileURLToPath(new URL('../../node_modules/.cache/switchboard/', import.meta.url));
  const hash = createHash('sha256').update(built!.contents).digest('hex').slice(0, 16);
  const file = join(dir, `espeak-worker-${hash}.mjs`);
  if (!existsSync(file)) {
    // written whole under another name first: a process starting meanwhile never reads half
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${process.pid}.${threadId}.tmp`;
    writeFileSync(partial, built!.contents);
    renameSync(partial, file);
  }
  sourceWorker = pathToFileURL(file);
  return sourceWorker;
}

/** The worker thread, started on demand (its script: workerScript). */
function startThread(idleMs: number): EngineThread {
  const worker = new Worker(workerScript());
  workersStarted += 1;
  const t: EngineThread = { worker, pending: new Map(), idleMs };
  worker.on('message', (reply: EspeakWorkerReply) => {
    if (reply.startup) workerStartup = { ...reply.startup, workers: workersStarted };
    const waiting = t.pending.get(reply.id);
    if (!waiting) return;
    clearTimeout(waiting.timer);
    t.pending.delete(reply.id);
    if (reply.ok) waiting.resolve(reply);
    else {
      waiting.reject(
        reply.loading
          ? loadFailure(reply.failure)
          : new SpeechError('ENGINE_FAILED', reply.failure),
      );
    }
    if (t.pending.size === 0) idleThread(t);
  });
  worker.on('error', (e) => failThread(t, 'ENGINE_FAILED', `failed: ${e.message}`));
  worker.on('exit', (code) => failThread(t, 'ENGINE_FAILED', `stopped (exit code ${code})`));
  return t;
}

/** The thread is lost (or taken for stuck): what waits on it fails, and the next ask starts another. */
function failThread(t: EngineThread, reason: 'ENGINE_FAILED' | 'TIMEOUT', why: string): void {
  clearTimeout(t.idle);
  if (thread === t) thread = undefined;
  for (const waiting of t.pending.values()) {
    clearTimeout(waiting.timer);
    waiting.reject(new SpeechError(reason, `eSpeak NG's worker thread ${why}`));
  }
  t.pending.clear();
}

/** Requests the worker thread of `createEspeakEngine` has not answered yet (0 with no thread). */
export function espeakPendingRequests(): number {
  return thread?.pending.size ?? 0;
}

/** Whether the worker thread of `createEspeakEngine` is running now (it ends when idle). */
export function espeakWorkerRunning(): boolean {
  return thread !== undefined;
}

/** Nothing asked: the thread no longer holds the process open, and ends after idleMs. */
function idleThread(t: EngineThread): void {
  t.worker.unref();
  clearTimeout(t.idle);
  t.idle = setTimeout(() => endThread(t), t.idleMs);
  t.idle.unref();
}

/** Ends the thread (its WebAssembly memory goes with it) unless a request is waiting on it. */
function endThread(t: EngineThread): void {
  if (t.pending.size > 0) return;
  clearTimeout(t.idle);
  if (thread === t) thread = undefined;
  void t.worker.terminate();
}

type Asked = EspeakWorkerRequest extends infer R
  ? R extends unknown
    ? Omit<R, 'id'>
    : never
  : never;

function ask(
  request: Asked,
  idleMs: number,
  answerMs: number,
): Promise<EspeakWorkerReply & { ok: true }> {
  thread ??= startThread(idleMs);
  const t = thread;
  t.idleMs = idleMs;
  const id = nextRequest++;
  return new Promise((resolve, reject) => {
    // unanswered this long: the thread is stuck (ESPEAK_ANSWER_MS), ended with all it holds
    const timer = setTimeout(() => {
      failThread(t, 'TIMEOUT', `did not answer within ${answerMs} ms, and was ended`);
      void t.worker.terminate();
    }, answerMs);
    t.pending.set(id, { resolve: resolve as (r: EspeakWorkerReply) => void, reject, timer });
    clearTimeout(t.idle);
    t.worker.ref();
    t.worker.postMessage({ ...request, id });
  });
}

/**
 * eSpeak NG in a worker thread, the server's engine: synthesis leaves the event loop, and the
 * thread (with the WebAssembly instance in it) ends after `idleMs` without a request, so an
 * idle server does not keep the engine's memory; the next request starts it again. Every
 * engine this returns shares the process's one thread.
 */
export function createEspeakEngine(
  options: { maxTextLength?: number; idleMs?: number; answerMs?: number } = {},
): SpeechEngine {
  const idleMs = options.idleMs ?? ESPEAK_IDLE_MS;
  const answerMs = options.answerMs ?? ESPEAK_ANSWER_MS;
  return engineOver(
    {
      async voices() {
        voicesSeen ??= (await ask({ kind: 'voices' }, idleMs, answerMs)).voices;
        if (!voicesSeen) throw new SpeechError('ENGINE_FAILED', 'eSpeak NG listed no voices');
        return voicesSeen;
      },
      async run(args, text) {
        const reply = await ask({ kind: 'run', args, text }, idleMs, answerMs);
        if (!reply.wav) throw new SpeechError('ENGINE_FAILED', 'eSpeak NG answered no audio');
        return reply.wav;
      },
      idle() {
        if (thread) endThread(thread);
      },
    },
    options.maxTextLength ?? DEFAULT_MAX_TEXT_LENGTH,
  );
}
