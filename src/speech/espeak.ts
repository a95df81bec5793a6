/**
 * The embedded speech engine: eSpeak NG 1.52 compiled to WebAssembly (the `espeak-ng` npm
 * package, GPL-3.0-or-later). Its 18 MB .wasm carries the program and every language's data,
 * so it speaks with no network and no system package.
 *
 * The package is the espeak-ng command line, not a library. Starting it is the expensive part
 * (compiling 18 MB of WebAssembly, then instantiating it, which lays out 32 MB of memory and
 * the data files: about 0.3 s of CPU), so it happens once per process, on first use, and is
 * measured (`espeakStartup()`). Each synthesis then reuses that one instance: its memory is put
 * back to the snapshot taken right after start-up (so the C program's globals, its heap and
 * getopt's position are as new), the text is written to a file in its in-memory file system,
 * and its `main` runs `espeak-ng -v <lang> -s <wpm> -b 1 -f /in.txt -w /out.wav`. The text goes
 * in as a file, never as an argument, so text that looks like an option is spoken, and `-m` is
 * not given, so markup in it is spoken too, not obeyed.
 *
 * A synthesis is synchronous WebAssembly: it holds the event loop for its length (measured on
 * one core: 30-60 ms of CPU for a ten-second prompt, about 0.15 s for a minute of speech; the
 * snapshot is 0.3 MB, so putting it back costs about a millisecond), so callers render ahead
 * of time, never while a provider waits. If the program ever fails in a way that leaves the
 * instance in doubt (a trap, an abort), the instance is dropped and the next synthesis starts
 * a fresh one from the compiled module.
 *
 * @example
 * const engine = createEspeakEngine();
 * const { samples, sampleRate } = await engine.synthesize('Добрий день', { lang: 'uk' });
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { decodeWav, SILENCE_THRESHOLD } from './audio.ts';
import {
  checkSpeechRequest,
  type SpeechEngine,
  SpeechError,
  type SpeechLanguage,
  type SpeechOptions,
  type SynthesizedSpeech,
} from './engine.ts';

/** The parts of the Emscripten module object this file uses. */
interface EspeakModule {
  FS: {
    writeFile(path: string, data: string | Uint8Array): void;
    readFile(path: string): Uint8Array;
    analyzePath(path: string): { exists: boolean };
    unlink(path: string): void;
    close(stream: object): void;
    streams: Array<{ fd: number } | null | undefined>;
  };
}

/** The WebAssembly exports this file calls (see `WebAssembly.Module.exports` of the .wasm). */
interface EspeakExports {
  memory: { readonly buffer: ArrayBuffer };
  __main_argc_argv(argc: number, argv: number): number;
  fflush(stream: number): number;
  stackSave(): number;
  stackRestore(pointer: number): void;
  stackAlloc(bytes: number): number;
  /** where the table of the files built into the memory starts */
  __emscripten_embedded_file_data: { readonly value: number };
}

interface EspeakOptions {
  arguments: string[];
  noInitialRun: boolean;
  print: (line: string) => void;
  printErr: (line: string) => void;
  // the default sets process.exitCode to the program's status, which would end a test run
  // or the server with espeak-ng's status; this one only unwinds
  quit: (status: number, toThrow: unknown) => never;
  onAbort: (what: unknown) => void;
  instantiateWasm: (imports: object, receive: (instance: WasmInstance) => unknown) => object;
}

// Node has WebAssembly, but this project's type library (ES2023, no DOM) does not declare it
type WasmModule = { readonly kind: 'compiled WebAssembly module' };
type WasmInstance = { readonly exports: EspeakExports };
const wasm = (
  globalThis as unknown as {
    WebAssembly: {
      compile(bytes: Uint8Array): Promise<WasmModule>;
      instantiate(module: WasmModule, imports: object): Promise<WasmInstance>;
    };
  }
).WebAssembly;

type EspeakFactory = (options: EspeakOptions) => Promise<EspeakModule>;

/** What starting eSpeak NG cost, measured once when it started. */
export interface EspeakStartup {
  /** reading and compiling the .wasm, in ms of this process's CPU */
  compileCpuMs: number;
  /** instantiating it and taking the snapshot, in ms of CPU */
  instantiateCpuMs: number;
  /** from the first call to ready, in ms of wall time */
  wallMs: number;
  /** the instance's memory, in bytes */
  memoryBytes: number;
  /** the part of it kept to put back before each run, in bytes */
  snapshotBytes: number;
  /** how many instances this process has started (1 unless one failed and was replaced) */
  instances: number;
  /** how many programs (syntheses and voice listings) ran in them */
  runs: number;
}

/**
 * One started instance of espeak-ng, run again and again from the same snapshot. The language
 * data files (17 MB) are built into its memory, and copied from there into its file system at
 * start-up; nothing reads those bytes again, so they are left out of the snapshot, as is the
 * all-zero end of the memory, which is zeroed again instead.
 */
interface EspeakInstance {
  module: EspeakModule;
  exports: EspeakExports;
  /** the memory as it was right after start-up, but for the data files and the zeros */
  snapshot: Array<{ at: number; bytes: Uint8Array }>;
  /** where the memory was all zeros after start-up, to its end */
  zeroFrom: number;
  stackPointer: number;
  out: string[];
  err: string[];
  /** `failed` is set by an abort (or a failed replacement): the instance is not run again */
  state: { failed?: string };
}

interface LoadedEspeak {
  factory: EspeakFactory;
  compiled: WasmModule;
  instance: EspeakInstance;
  languages: SpeechLanguage[];
  /** voice variants by lower-case name, to the name espeak-ng knows them by */
  variants: Map<string, string>;
}

/** espeak-ng's own pace (words per minute) for rate 1. */
const NORMAL_WPM = 175;
/** Bumped whenever this file changes how the same request sounds. */
const WRAPPER_REVISION = 1;
const DEFAULT_MAX_TEXT_LENGTH = 1000;

const requireHere = createRequire(import.meta.url);

/** Where the package lives, found through Node's resolution so the built server finds it. */
function espeakFiles(): { script: string; wasm: string; manifest: string } {
  const script = requireHere.resolve('espeak-ng');
  return {
    script,
    wasm: join(dirname(script), 'espeak-ng.wasm'),
    manifest: join(dirname(script), '..', 'package.json'),
  };
}

const cpuMs = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};

let loading: Promise<LoadedEspeak> | undefined;
let startup: EspeakStartup | undefined;

/** The start-up cost, once eSpeak NG has started in this process (undefined before). */
export function espeakStartup(): EspeakStartup | undefined {
  return startup && { ...startup };
}

/** Compiles and starts the module and asks it what it speaks: once per process. */
function loadEspeak(): Promise<LoadedEspeak> {
  loading ??= (async () => {
    const wallStart = performance.now();
    const files = espeakFiles();
    const imported = (await import(pathToFileURL(files.script).href)) as { default: EspeakFactory };
    const compileStart = process.cpuUsage();
    const compiled = await wasm.compile(await readFile(files.wasm));
    const compileCpuMs = cpuMs(compileStart);
    const instantiateStart = process.cpuUsage();
    const instance = await startInstance(imported.default, compiled);
    const instantiateCpuMs = cpuMs(instantiateStart);
    const languageLines = runProgram(instance, ['--voices'], '');
    const variantLines = runProgram(instance, ['--voices=variant'], '');
    startup = {
      compileCpuMs,
      instantiateCpuMs,
      wallMs: performance.now() - wallStart,
      memoryBytes: instance.exports.memory.buffer.byteLength,
      snapshotBytes: instance.snapshot.reduce((n, part) => n + part.bytes.length, 0),
      instances: 1,
      runs: 2,
    };
    return {
      factory: imported.default,
      compiled,
      instance,
      languages: parseLanguages(languageLines.out),
      variants: parseVariants(variantLines.out),
    };
  })();
  // a failed load (a missing file) is not remembered: the next call tries again
  loading.catch(() => {
    loading = undefined;
  });
  return loading;
}

/** Instantiates the compiled module without running `main`, and snapshots its memory. */
async function startInstance(
  factory: EspeakFactory,
  compiled: WasmModule,
): Promise<EspeakInstance> {
  let exports: EspeakExports | undefined;
  const out: string[] = [];
  const err: string[] = [];
  const state: { failed?: string } = {};
  // a failed instantiation never calls `receive`, so the factory would wait forever: this
  // settles it instead
  let notStarted: (e: Error) => void = () => undefined;
  const failedToStart = new Promise<never>((_, reject) => {
    notStarted = reject;
  });
  const starting = factory({
    arguments: [],
    noInitialRun: true,
    print: (line) => out.push(line),
    printErr: (line) => err.push(line),
    quit: (_status, toThrow) => {
      throw toThrow;
    },
    onAbort: (what) => {
      state.failed = String(what);
    },
    instantiateWasm: (imports, receive) => {
      wasm
        .instantiate(compiled, imports)
        .then((instance) => {
          exports = instance.exports;
          receive(instance);
        })
        .catch((e: unknown) => {
          state.failed ??= e instanceof Error ? e.message : String(e);
          notStarted(new Error(state.failed));
        });
      return {};
    },
  });
  const module = await Promise.race([starting, failedToStart]);
  if (!exports || state.failed !== undefined) {
    throw new Error(state.failed ?? 'the WebAssembly instance did not start');
  }
  const memory = new Uint8Array(exports.memory.buffer);
  const dataFiles = embeddedFiles(exports);
  let zeroFrom = memory.length;
  while (zeroFrom > 0 && memory[zeroFrom - 1] === 0) zeroFrom--;
  // the rest, in the gaps between the data files
  const snapshot: EspeakInstance['snapshot'] = [];
  let at = 0;
  for (const file of [...dataFiles].sort((a, b) => a.at - b.at)) {
    if (file.at > at) snapshot.push({ at, bytes: memory.slice(at, Math.min(file.at, zeroFrom)) });
    at = Math.max(at, file.at + file.length);
  }
  if (at < zeroFrom) snapshot.push({ at, bytes: memory.slice(at, zeroFrom) });
  const instance: EspeakInstance = {
    module,
    exports,
    snapshot,
    zeroFrom,
    stackPointer: exports.stackSave(),
    out,
    err,
    state,
  };
  return instance;
}

/**
 * Where the built-in files' bytes lie in the memory, from the table Emscripten leaves for
 * its start-up code: entries of (name, length, address), four bytes each, up to a zero name.
 */
function embeddedFiles(exports: EspeakExports): Array<{ at: number; length: number }> {
  const view = new DataView(exports.memory.buffer);
  const files: Array<{ at: number; length: number }> = [];
  let entry = exports.__emscripten_embedded_file_data.value;
  while (entry > 0 && entry + 12 <= view.byteLength && view.getUint32(entry, true) !== 0) {
    files.push({ at: view.getUint32(entry + 8, true), length: view.getUint32(entry + 4, true) });
    entry += 12;
  }
  return files;
}

interface ProgramRun {
  out: string[];
  err: string[];
  status: number;
  error?: string;
  wav?: Uint8Array;
}

/**
 * Runs espeak-ng's `main` once in the instance, from the start-up snapshot. Never throws for
 * the program's own failures: they come back as `status` and `error`.
 */
function runProgram(instance: EspeakInstance, args: readonly string[], text: string): ProgramRun {
  const { exports, module } = instance;
  const fs = module.FS;
  instance.out.length = 0;
  instance.err.length = 0;
  // back to the memory as it was after start-up; what was zero is zeroed again, including
  // anything the last run grew (fresh memory is zero, and malloc counts on it)
  const heap = new Uint8Array(exports.memory.buffer);
  for (const part of instance.snapshot) heap.set(part.bytes, part.at);
  heap.fill(0, instance.zeroFrom);
  exports.stackRestore(instance.stackPointer);
  for (const path of ['/in.txt', '/out.wav']) {
    if (fs.analyzePath(path).exists) fs.unlink(path);
  }
  fs.writeFile('/in.txt', text);

  // argv on the program's stack, as the C runtime would lay it out
  const argv = ['espeak-ng', ...args].map((arg) => {
    const bytes = new TextEncoder().encode(`${arg}\0`);
    const at = exports.stackAlloc(bytes.length);
    new Uint8Array(exports.memory.buffer).set(bytes, at);
    return at;
  });
  const table = exports.stackAlloc(4 * (argv.length + 1));
  const pointers = new DataView(exports.memory.buffer);
  for (const [i, at] of argv.entries()) pointers.setUint32(table + 4 * i, at, true);
  pointers.setUint32(table + 4 * argv.length, 0, true);

  let status = 0;
  let error: string | undefined;
  try {
    status = exports.__main_argc_argv(argv.length, table);
  } catch (e) {
    // exit(n) unwinds as an ExitStatus carrying n; anything else is a trap
    const exit = (e as { name?: unknown; status?: unknown } | null) ?? {};
    if (exit.name === 'ExitStatus' && typeof exit.status === 'number') status = exit.status;
    else error = e instanceof Error ? e.message : String(e);
  }
  try {
    exports.fflush(0);
  } catch (e) {
    error ??= e instanceof Error ? e.message : String(e);
  }
  // files the program left open (a failed run) are closed, so descriptors do not pile up
  for (const stream of [...fs.streams]) {
    if (stream && stream.fd > 2) fs.close(stream);
  }
  error ??= instance.state.failed;
  const run: ProgramRun = {
    out: [...instance.out],
    err: instance.err.filter((line) => !line.includes('keepRuntimeAlive')),
    status,
  };
  if (error !== undefined) run.error = error;
  if (fs.analyzePath('/out.wav').exists) run.wav = fs.readFile('/out.wav');
  return run;
}

// `--voices` prints a table: Pty Language Age/Gender VoiceName File Other-languages, e.g.
//  5  en-gb-x-rp      --/M      English_(Received_Pronunciation) gmw/en-GB-x-rp   (en-gb 4)(en 5)
const VOICE_LINE = /^\s*(\d+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)\s*(.*)$/;

/**
 * Every language code the table names, in either the Language column or the other-languages
 * column (plain `en` only appears there), each with the name of its highest-priority voice.
 */
function parseLanguages(lines: readonly string[]): SpeechLanguage[] {
  const best = new Map<string, { priority: number; name: string }>();
  const offer = (lang: string, priority: number, name: string) => {
    const key = lang.toLowerCase();
    const seen = best.get(key);
    if (!seen || priority < seen.priority) best.set(key, { priority, name });
  };
  for (const line of lines) {
    const m = VOICE_LINE.exec(line);
    if (!m || m[2] === 'Language') continue;
    const name = m[3]!.replaceAll('_', ' ');
    offer(m[2]!, Number(m[1]), name);
    for (const other of m[5]!.matchAll(/\((\S+)\s+(\d+)\)/g))
      offer(other[1]!, Number(other[2]), name);
  }
  return [...best]
    .map(([lang, { name }]) => ({ lang, name }))
    .sort((a, b) => a.lang.localeCompare(b.lang));
}

/** The variants (`!v/belinda`) by lower-case name. */
function parseVariants(lines: readonly string[]): Map<string, string> {
  const variants = new Map<string, string>();
  for (const line of lines) {
    const file = VOICE_LINE.exec(line)?.[4];
    if (file?.startsWith('!v/')) variants.set(file.slice(3).toLowerCase(), file.slice(3));
  }
  return variants;
}

/** eSpeak NG, in process; every engine this returns shares the process's one instance. */
export function createEspeakEngine(options: { maxTextLength?: number } = {}): SpeechEngine {
  const manifest = JSON.parse(readFileSync(espeakFiles().manifest, 'utf8')) as { version: string };

  const engine: SpeechEngine = {
    name: 'espeak-ng',
    version: `${manifest.version}+${WRAPPER_REVISION}`,
    maxTextLength: options.maxTextLength ?? DEFAULT_MAX_TEXT_LENGTH,
    async voices() {
      return (await loadEspeakOrFail()).languages;
    },
    async synthesize(text, request) {
      const loaded = await loadEspeakOrFail();
      return synthesizeNow(loaded, checkedArgs(loaded, text, request));
    },
    async synthesizeMany(texts, request) {
      const loaded = await loadEspeakOrFail();
      const jobs = texts.map((text) => checkedArgs(loaded, text, request));
      if (jobs.length <= 1) return Promise.all(jobs.map((job) => synthesizeNow(loaded, job)));
      // one run says them all, a long break apart, and its audio is cut at the breaks: a
      // run's start costs far more than a short text (docs/performance.md, part (i))
      const joined = {
        // SSML (-m), so the breaks are obeyed; each text is escaped, so nothing in it is
        text: `<speak>${jobs.map((j) => escapeXml(j.text)).join(`<break time="${BATCH_BREAK_MS}ms"/>`)}</speak>`,
        args: ['-m', ...jobs[0]!.args],
      };
      const all = await synthesizeNow(loaded, joined);
      const pieces = splitAtBreaks(all.samples, all.sampleRate, jobs.length);
      // a text with a pause as long as the break in it (it cannot be cut right): one by one
      if (!pieces) return Promise.all(jobs.map((job) => synthesizeNow(loaded, job)));
      return pieces.map((samples) => ({ samples, sampleRate: all.sampleRate }));
    },
  };

  function checkedArgs(loaded: LoadedEspeak, text: string, request: SpeechOptions) {
    const checked = checkSpeechRequest(text, request, engine, loaded.languages);
    let voice = checked.lang;
    if (checked.voice !== undefined) {
      const variant = loaded.variants.get(checked.voice.trim().toLowerCase());
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
    return {
      text: checked.text,
      args: ['-v', voice, '-s', wpm, '-b', '1', '-f', '/in.txt', '-w', '/out.wav'],
    };
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

async function synthesizeNow(
  loaded: LoadedEspeak,
  job: { text: string; args: string[] },
): Promise<SynthesizedSpeech> {
  if (loaded.instance.state.failed !== undefined) {
    await replaceInstance(loaded).catch((e: unknown) => {
      throw new SpeechError(
        'ENGINE_FAILED',
        `eSpeak NG could not be started again: ${e instanceof Error ? e.message : String(e)}`,
      );
    });
  }
  const run = runProgram(loaded.instance, job.args, job.text);
  if (startup) startup.runs += 1;
  if (run.error !== undefined || run.status !== 0 || !run.wav) {
    // the request was checked, so this is the instance failing: the next synthesis gets a
    // fresh one (if that cannot start either, the next one tries again)
    await replaceInstance(loaded).catch(() => {
      loaded.instance.state.failed ??= 'it could not be replaced';
    });
    const said = run.error ?? (run.err.find((line) => line.startsWith('Error')) || 'no audio');
    throw new SpeechError('ENGINE_FAILED', `eSpeak NG failed (status ${run.status}): ${said}`);
  }
  return decodeWav(run.wav);
}

async function replaceInstance(loaded: LoadedEspeak): Promise<void> {
  loaded.instance = await startInstance(loaded.factory, loaded.compiled);
  if (startup) startup.instances += 1;
}

async function loadEspeakOrFail(): Promise<LoadedEspeak> {
  try {
    return await loadEspeak();
  } catch (e) {
    throw new SpeechError(
      'ENGINE_FAILED',
      `eSpeak NG could not be loaded: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
}
