/**
 * The Dockerfile, replayed without Docker (no image registry is reachable here, so `docker
 * build` cannot pull node:20-slim): each stage gets a fresh directory standing for its root
 * filesystem, COPY copies from the working tree (less .dockerignore) or an earlier stage,
 * RUN runs its command there with the stage's ENV (paths under the directories the file
 * declares, /app and /data, mapped into the stage's directory), and then the final stage's
 * CMD runs as its USER with its ENV until its HEALTHCHECK command answers healthy. What this
 * cannot check: the base image itself (this machine's Node 20 and npm stand in for it).
 *
 * npm ci runs with prefer-offline, reading the local npm cache as `docker build` would read its
 * layer cache (~10 s instead of ~40 s). Needs root (the recipe's chown, and running as uid
 * 1000); skipped, saying so, otherwise.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startFlags } from '../../scripts/start-flags.ts';
import { onlyIf } from '../support/skip.ts';
import { ROOT } from './support.ts';

const IS_ROOT = process.getuid?.() === 0;
if (!IS_ROOT) {
  console.warn('container recipe: skipped, replaying the Dockerfile (chown, USER 1000) needs root');
}

interface Instruction {
  op: string;
  args: string;
}

/** The Dockerfile's instructions, continuation lines joined, comments dropped. */
function instructions(text: string): Instruction[] {
  const joined = text
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      const m = l.match(/^(\w+)\s+(.*)$/);
      if (!m) throw new Error(`cannot read Dockerfile line: ${l}`);
      return { op: (m[1] as string).toUpperCase(), args: (m[2] as string).trim() };
    });
}

/** `KEY=value KEY2=value2` (values without spaces, as this Dockerfile writes them). */
function envPairs(args: string): [string, string][] {
  return args.split(/\s+/).map((kv) => {
    const [k, ...v] = kv.split('=');
    return [k as string, v.join('=')];
  });
}

/** A .dockerignore pattern as a regular expression (`**` any depth, `*` and `?` within a name). */
function globRegExp(pattern: string): RegExp {
  const parts = pattern
    .replace(/^\/+|\/+$/g, '')
    .split('**')
    .map((part) =>
      part
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '[^/]*')
        .replace(/\?/g, '[^/]'),
    );
  return new RegExp(`^${parts.join('.*')}(/.*)?$`);
}

/** .dockerignore's patterns as a test on a path relative to the context. */
function dockerignore(): (rel: string) => boolean {
  const patterns = readFileSync(`${ROOT}/.dockerignore`, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map(globRegExp);
  return (rel) => patterns.some((re) => re.test(rel));
}

interface Stage {
  name: string | undefined;
  root: string;
  workdir: string;
  env: Record<string, string>;
  user: string | undefined;
  cmd: string[] | undefined;
  healthcheck: string[] | undefined;
}

/** Replays every stage; returns the last. */
function replay(file: string, into: string): Stage {
  const stages: Stage[] = [];
  const ignored = dockerignore();
  // the directories the recipe declares: RUN's absolute paths under them are the stage's
  const declared = new Set<string>();
  let stage: Stage | undefined;
  const at = (s: Stage, path: string) =>
    join(s.root, path.startsWith('/') ? path : join(s.workdir, path));
  for (const { op, args } of instructions(readFileSync(file, 'utf8'))) {
    if (op === 'FROM') {
      const m = args.match(/^(\S+)(?:\s+AS\s+(\S+))?$/i);
      const root = join(into, `stage-${stages.length}`);
      mkdirSync(root, { recursive: true });
      chmodSync(root, 0o755);
      stage = {
        name: m?.[2],
        root,
        workdir: '/',
        env: {},
        user: undefined,
        cmd: undefined,
        healthcheck: undefined,
      };
      stages.push(stage);
      continue;
    }
    if (!stage) throw new Error(`${op} before FROM`);
    const s = stage;
    switch (op) {
      case 'WORKDIR':
        s.workdir = args;
        declared.add(args);
        mkdirSync(at(s, args), { recursive: true, mode: 0o755 });
        break;
      case 'ENV':
        for (const [k, v] of envPairs(args)) {
          s.env[k] = v;
          if (v.startsWith('/')) declared.add(v);
        }
        break;
      case 'VOLUME':
        declared.add(args);
        break;
      case 'USER':
        s.user = args;
        break;
      case 'EXPOSE':
        break;
      case 'CMD':
        s.cmd = JSON.parse(args) as string[];
        break;
      case 'HEALTHCHECK':
        s.healthcheck = JSON.parse(args.replace(/^(--\S+\s+)*CMD\s+/, '')) as string[];
        break;
      case 'COPY': {
        const words = args.split(/\s+/);
        const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
        const paths = words.filter((w) => !w.startsWith('--'));
        const dest = paths.pop() as string;
        const source = from === undefined ? undefined : stages.find((x) => x.name === from);
        if (from !== undefined && !source) throw new Error(`COPY --from=${from}: no such stage`);
        for (const p of paths) {
          const src = source ? at(source, p) : join(ROOT, p);
          const target = dest.endsWith('/') ? join(at(s, dest), basename(p)) : at(s, dest);
          mkdirSync(dirname(target), { recursive: true });
          if (source) {
            // between stages: hard links, the same files without copying 300 MB again
            execFileSync('cp', ['-al', src, target]);
          } else {
            // a directory's contents go to dest, as COPY does
            cpSync(src, target, { recursive: true, filter: (f) => !ignored(relative(ROOT, f)) });
          }
        }
        break;
      }
      case 'RUN': {
        let command = args;
        for (const dir of declared) {
          command = command.replace(
            new RegExp(`(^|[\\s=:'"])${dir.replace(/[/.]/g, '\\$&')}(?=/|\\s|$|'|")`, 'g'),
            `$1${s.root}${dir}`,
          );
        }
        const run = spawnSync('sh', ['-c', command], {
          cwd: at(s, '.'),
          env: {
            PATH: process.env.PATH ?? '',
            HOME: process.env.HOME ?? '/root',
            npm_config_prefer_offline: 'true',
            ...s.env,
          },
          encoding: 'utf8',
        });
        if (run.status !== 0) throw new Error(`RUN ${args} failed:\n${run.stdout}${run.stderr}`);
        break;
      }
      default:
        throw new Error(`the recipe test does not know ${op}: teach test/ops/container.test.ts`);
    }
  }
  return stages.at(-1) as Stage;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

describe.skipIf(!IS_ROOT)(
  onlyIf(
    IS_ROOT,
    'the container recipe (Dockerfile), replayed in a fresh directory',
    'not root: replaying the Dockerfile (chown, USER 1000) needs root',
  ),
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchboard-image-'));
    let child: ChildProcess | undefined;
    afterAll(async () => {
      child?.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }, 120_000);

    it('builds, starts with its CMD as a non-root user, answers its HEALTHCHECK and stops on SIGTERM', async () => {
      chmodSync(dir, 0o755);
      const started = Date.now();
      const image = replay(`${ROOT}/Dockerfile`, dir);
      console.info(`container recipe: built in ${Date.now() - started} ms`);
      expect(image.user).toMatch(/^[1-9]\d*(:[1-9]\d*)?$/);
      expect(image.cmd?.slice(0, -1)).toEqual(expect.arrayContaining(['node', ...startFlags()]));
      expect(image.healthcheck).toBeDefined();
      // what the image holds: the build, not the sources or the dev tools
      const app = join(image.root, image.workdir);
      expect(statSync(join(app, 'dist/main.js')).isFile()).toBe(true);
      expect(() => statSync(join(app, 'src'))).toThrow();
      expect(() => statSync(join(app, 'node_modules/vitest'))).toThrow();

      const [uid, gid = uid] = (image.user as string).split(':').map(Number) as [number, number?];
      const port = await freePort();
      const env = {
        PATH: process.env.PATH ?? '',
        ...image.env,
        DATA_DIR: join(image.root, image.env.DATA_DIR as string),
        PORT: String(port),
      };
      const [cmd, ...cmdArgs] = image.cmd as [string, ...string[]];
      let out = '';
      child = spawn(cmd, cmdArgs, { cwd: app, env, uid, gid, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      const [hc, ...hcArgs] = image.healthcheck as [string, ...string[]];
      const healthy = () => spawnSync(hc, hcArgs, { cwd: app, env, uid, gid }).status === 0;

      // the HEALTHCHECK's start period: 60 s
      const deadline = Date.now() + 60_000;
      while (!healthy()) {
        if (child.exitCode !== null || Date.now() > deadline)
          throw new Error(`never healthy:\n${out}`);
        await new Promise((r) => setTimeout(r, 250));
      }
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(await ready.json()).toMatchObject({ status: 'ok', engine: 'pglite' });
      // the embedded database was written where the volume is, by the image's user
      expect(statSync(join(env.DATA_DIR, 'pgdata')).uid).toBe(uid);

      const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      // and the same check says unhealthy once nothing answers
      expect(healthy()).toBe(false);
    }, 180_000);
  },
);
