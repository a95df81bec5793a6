/**
 * eSpeak NG 1.52 compiled to WebAssembly (the `espeak-ng` npm package, GPL-3.0-or-later), run
 * as a program: the part of the engine that runs in eSpeak's thread (a worker thread in the
 * server, src/speech/espeak-worker.ts). It imports nothing of the rest of Switchboard, so the
 * worker loads only this. src/speech/espeak.ts is the engine around it (checks, batches).
 *
 * The package is the espeak-ng command line, not a library. Starting it is the expensive part
 * (compiling 18 MB of WebAssembly, then instantiating it, which lays out 32 MB of memory and
 * the data files: about 0.3 s of CPU), so it happens once per thread, on first use, and is
 * measured (`espeakThreadStartup()`). Each run then reuses that one instance: its memory is put
 * back to the snapshot taken right after start-up (so the C program's globals, its heap and
 * getopt's position are as new), the text is written to a file in its in-memory file system,
 * and its `main` runs with the arguments given and `-w /out.wav`, a device of ours
 * (`outputDevice`). If the program ever fails in a way that leaves the instance in doubt (a
 * trap, an abort), the instance is dropped and the next run starts a fresh one from the
 * compiled module.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { SpeechLanguage } from './engine.ts';

/** The parts of the Emscripten module object this file uses. */
interface EspeakModule {
  FS: {
    writeFile(path: string, data: string | Uint8Array): void;
    readFile(path: string): Uint8Array;
    analyzePath(path: string): { exists: boolean };
    unlink(path: string): void;
    close(stream: object): void;
    streams: Array<{ fd: number } | null | undefined>;
    makedev(major: number, minor: number): number;
    registerDevice(dev: number, ops: DeviceOps): void;
    mkdev(path: string, dev: number): void;
  };
}

/** A character device's stream operations, as Emscripten's FS calls them. */
interface DeviceOps {
  open(stream: DeviceStream): void;
  close(stream: DeviceStream): void;
  write(stream: DeviceStream, heap: Uint8Array, offset: number, length: number, at: number): number;
  llseek(stream: DeviceStream, offset: number, whence: number): number;
}
interface DeviceStream {
  position: number;
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
      Memory: new (size: { initial: number }) => WasmMemory;
    };
  }
).WebAssembly;

type EspeakFactory = (options: EspeakOptions) => Promise<EspeakModule>;
type WasmMemory = { readonly buffer: ArrayBuffer; grow(pages: number): number };

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
  /**
   * how many worker threads `createEspeakEngine` (src/speech/espeak.ts) has started in this
   * process (one more each time it is needed after ESPEAK_IDLE_MS idle); the figures above
   * are the last one's
   */
  workers?: number;
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
  /** past this, the memory is still all zeros after the last run (see `lastNonZero`) */
  dirtyTo: number;
  stackPointer: number;
  out: string[];
  err: string[];
  /** what the program wrote to OUTPUT_DEVICE in its last run: `bytes` up to `length` */
  wav: { bytes: Uint8Array; length: number; opened: boolean };
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

const requireHere = createRequire(import.meta.url);

/** Where the package lives, found through Node's resolution so the built server finds it. */
export function espeakFiles(): { script: string; wasm: string; manifest: string } {
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

/** The start-up cost, once eSpeak NG has started in this thread (undefined before). */
export function espeakThreadStartup(): EspeakStartup | undefined {
  return startup && { ...startup };
}

/** Compiles and starts the module and asks it what it speaks: once per thread. */
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
  const wav = outputDevice(module);
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
    dirtyTo: zeroFrom,
    stackPointer: exports.stackSave(),
    out,
    err,
    wav,
    state,
  };
  return instance;
}

/** Where espeak-ng writes its WAV: a device of ours, not a file of its in-memory file system. */
const OUTPUT_DEVICE = '/out.wav';
/** A regular file of the in-memory file system, for `plain` output (tests). */
const PLAIN_OUTPUT = '/plain.wav';

/**
 * Memory tuning: a file of the in-memory file system grows by reallocating and copying (by an
 * eighth at a time past 1 MB), ~80 MB of garbage buffers for a 40-text run, which the C
 * allocator then keeps; the device writes into one WebAssembly memory (mapped and unmapped
 * whole, grown in place) kept for the next run. test/speech/espeak-worker.test.ts holds its
 * audio to a plain file's.
 */
function outputDevice(module: EspeakModule): EspeakInstance['wav'] {
  const PAGE = 65_536;
  const memory = new wasm.Memory({ initial: 16 });
  const wav = { bytes: new Uint8Array(memory.buffer), length: 0, opened: false };
  const fs = module.FS;
  const dev = fs.makedev(64, 0);
  fs.registerDevice(dev, {
    open(stream) {
      wav.length = 0;
      wav.opened = true;
      stream.position = 0;
    },
    close() {},
    write(_stream, heap, offset, length, at) {
      const end = at + length;
      if (end > wav.bytes.length) {
        memory.grow(Math.ceil((end - wav.bytes.length) / PAGE));
        wav.bytes = new Uint8Array(memory.buffer);
      }
      wav.bytes.set(heap.subarray(offset, offset + length), at);
      wav.length = Math.max(wav.length, end);
      return length;
    },
    // the WAV writer goes back to the header to write the sizes once it knows them
    llseek(stream, offset, whence) {
      const at = offset + (whence === 1 ? stream.position : whence === 2 ? wav.length : 0);
      if (at < 0) throw new Error('seek before the start of the output');
      return at;
    },
  });
  fs.mkdev(OUTPUT_DEVICE, dev);
  return wav;
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
  heap.fill(0, instance.zeroFrom, Math.max(instance.zeroFrom, instance.dirtyTo));
  exports.stackRestore(instance.stackPointer);
  for (const path of ['/in.txt', PLAIN_OUTPUT]) {
    if (fs.analyzePath(path).exists) fs.unlink(path);
  }
  instance.wav.opened = false;
  instance.wav.length = 0;
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
  instance.dirtyTo = lastNonZero(new Uint8Array(exports.memory.buffer), instance.zeroFrom);
  error ??= instance.state.failed;
  const run: ProgramRun = {
    out: [...instance.out],
    err: instance.err.filter((line) => !line.includes('keepRuntimeAlive')),
    status,
  };
  if (error !== undefined) run.error = error;
  if (fs.analyzePath(PLAIN_OUTPUT).exists) run.wav = fs.readFile(PLAIN_OUTPUT);
  // a view of the buffer the next run writes over: the samples are copied out of it
  else if (instance.wav.opened) run.wav = instance.wav.bytes.subarray(0, instance.wav.length);
  return run;
}

const ZEROS = new Uint8Array(1 << 16);

/**
 * Memory tuning: where the last non-zero byte of `memory` ends, looked for from the end down
 * to `from`. The program's heap never reaches the top ~14 MB of its 32 MB; zeroing only what
 * a run wrote keeps those pages untouched (not resident), and reading them costs less than
 * filling them. test/speech/espeak-worker.test.ts holds it to a plain scan.
 */
export function lastNonZero(memory: Uint8Array, from: number): number {
  const bytes = Buffer.from(memory.buffer, memory.byteOffset, memory.byteLength);
  let end = memory.length;
  while (end > from) {
    const start = Math.max(from, end - ZEROS.length);
    if (bytes.compare(ZEROS, 0, end - start, start, end) !== 0) break;
    end = start;
  }
  while (end > from && memory[end - 1] === 0) end--;
  return end;
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

/** What eSpeak NG speaks: its languages, and its voice variants (lower-case name, name). */
export interface EspeakVoices {
  languages: SpeechLanguage[];
  variants: Array<[string, string]>;
}

/** Starts the engine in this thread if it has not started; throws if it cannot. */
export async function espeakVoices(): Promise<EspeakVoices> {
  const loaded = await loadEspeak();
  return { languages: loaded.languages, variants: [...loaded.variants] };
}

/**
 * Runs espeak-ng once with `args` (the text in /in.txt) and answers its WAV: with `device`
 * output, a view of the buffer the next run writes over (copy what you keep). A failed run
 * answers `failure` and has the next run start a fresh instance; an engine that cannot be
 * loaded throws.
 */
export async function runEspeak(
  args: readonly string[],
  text: string,
  output: 'device' | 'plain' = 'device',
): Promise<{ wav: Uint8Array } | { failure: string }> {
  const loaded = await loadEspeak();
  if (loaded.instance.state.failed !== undefined) {
    try {
      await replaceInstance(loaded);
    } catch (e) {
      return {
        failure: `eSpeak NG could not be started again: ${e instanceof Error ? e.message : String(e)}`,
      };
    }
  }
  const path = output === 'plain' ? PLAIN_OUTPUT : OUTPUT_DEVICE;
  const run = runProgram(loaded.instance, [...args, '-w', path], text);
  if (startup) startup.runs += 1;
  if (run.error !== undefined || run.status !== 0 || !run.wav) {
    // the request was checked, so this is the instance failing: the next run gets a fresh
    // one (if that cannot start either, the next one tries again)
    await replaceInstance(loaded).catch(() => {
      loaded.instance.state.failed ??= 'it could not be replaced';
    });
    const said = run.error ?? (run.err.find((line) => line.startsWith('Error')) || 'no audio');
    return { failure: `eSpeak NG failed (status ${run.status}): ${said}` };
  }
  return { wav: run.wav };
}

async function replaceInstance(loaded: LoadedEspeak): Promise<void> {
  loaded.instance = await startInstance(loaded.factory, loaded.compiled);
  if (startup) startup.instances += 1;
}
