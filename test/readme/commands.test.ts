/**
 * Every command README.md prints runs here as printed, so the README cannot drift from the
 * code: each ```sh block is read from README.md (never copied here), run with `bash -e` (any
 * command that fails fails the block) in the repository, and what it prints is checked where
 * the README says what it prints. A block this file does not know fails the test: each is
 * either run (RUN, by its first line) or listed by its exact text with the reason it is not
 * (NOT_RUN), and the same holds for commands quoted inline in the prose (INLINE_NOT_RUN).
 *
 * Where the blocks run, and the one way each is pointed at a server this file started:
 * - the walk-through and the command-line call: a server started as `npm start` starts it
 *   (test/support/process.ts: the built dist/main.js, the built-in sandbox), on a free port P
 *   rather than 3000 (which may be taken on a shared machine). The README's address
 *   `localhost:3000` is rewritten to `localhost:P` in the block's text, and the command line's
 *   default address, the same `localhost:3000`, is pointed there the documented way:
 *   `SWITCHBOARD_URL=http://localhost:P` in the block's environment. Nothing else changes.
 * - the flow commands: no server (they read `flows/`).
 * - "Running against the real provider": its blocks run in one bash session, as a user runs
 *   them one after another in one terminal, against the provider sandbox alone
 *   (`npm run sandbox`), with the addresses substituted by PROVIDER_SUBSTITUTIONS below; then
 *   the API section's `switchboard tokens` block, which needs a server guarded by API_TOKEN
 *   and API_TOKEN in the shell, as that session has.
 *
 * The databases, as the README's commands have them: the walk-through's server, as `npm start`
 * with no DATABASE_URL, the embedded engine (in a temporary DATA_DIR); the real-provider block's
 * DATABASE_URL, a real Postgres database of this file's own when TEST_DATABASE_URL is set, else
 * (the one substitution that is not an address) the embedded engine in a temporary DATA_DIR.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { type ServerProcess, startServerProcess } from '../support/process.ts';
import {
  type BashRun,
  type FencedBlock,
  fencedBlocks,
  freePort,
  inlineCommands,
  missingTools,
  printedValues,
  readReadme,
  runBash,
  toolsReason,
} from '../support/readme.ts';
import { onlyIf } from '../support/skip.ts';

const README = readReadme();
const BLOCKS = fencedBlocks(README);
const SH = BLOCKS.filter((b) => b.lang === 'sh');

/** The blocks run here, each named by its first line. */
const RUN = {
  walkThrough:
    '# 1. Script the callee: the sandbox will press 1 when the next call to this number plays.',
  cliCall:
    "curl -s -X POST localhost:3000/sandbox/_control/scripts -H 'content-type: application/json' \\",
  flows:
    'npx switchboard flows validate                     # exit 1 with file:line:column and the rule',
  providerStart: 'export PUBLIC_URL=https://switchboard.example.com',
  providerFirstMessage:
    'curl -s -X POST $PUBLIC_URL/v1/messages -H "authorization: Bearer $API_TOKEN" \\',
  tokens:
    'npx switchboard tokens create --name reports --scope read   # prints the token once (its id on stderr)',
} as const;

/** Blocks that cannot run in a test, by their exact text: each is what CI itself runs. */
const NOT_RUN: Record<string, string> = {
  'npm install && npm start':
    'installs the packages (.ci/run does, with `npm ci`) and serves on port 3000 until stopped; `npm start` runs here in the real-provider block, and test/e2e/process.test.ts starts the built server as it does',
  'npm test': 'the whole suite: .ci/run runs it; this file is part of it',
  'TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm test\nnpm run check   # format, lint (Biome) and type check':
    'the whole suite on real Postgres, then the checks: .ci/run runs exactly these two',
};

/** Commands quoted inline in the prose, not run here, by their text (whitespace collapsed). */
const INLINE_NOT_RUN: Record<string, string> = {
  'npx switchboard migrate':
    'the same migrations `npm start` applies at start (run here by every server start), alone',
  'npx switchboard tokens create --name crm --scope send':
    "the API section's `tokens create` block, which runs here, with another name and scope",
};

/** Languages a command block must not use: commands go in ```sh, the one kind run here. */
const SHELL_LANGS = ['bash', 'shell', 'console', 'zsh', 'shell-session', 'sh-session'];

function block(firstLine: string): FencedBlock {
  const found = SH.filter((b) => b.text.split('\n')[0] === firstLine);
  expect(found, `one sh block starting "${firstLine}"`).toHaveLength(1);
  return found[0]!;
}

/**
 * `text` with each [from, to] replaced: each `from` must occur in it (else the README drifted),
 * and once unless `all` says to replace every occurrence.
 */
function substitute(text: string, pairs: [string, string][], all = false): string {
  let out = text;
  for (const [from, to] of pairs) {
    const count = out.split(from).length - 1;
    if (all) expect(count, `the block contains "${from}"`).toBeGreaterThan(0);
    else expect(count, `the block contains "${from}" once`).toBe(1);
    out = out.replaceAll(from, to);
  }
  return out;
}

/** The environment of a block: nothing of the test's own beyond PATH and HOME. */
function blockEnv(extra: Record<string, string>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? tmpdir(),
    NO_COLOR: '1',
    ...extra,
  };
}

/** `run` exited 0; else the failure shows what it printed, and `logs` (the server's, say). */
function expectSuccess(run: BashRun, what: string, logs = ''): void {
  expect(
    run.code,
    `${what} exited ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}${logs}`,
  ).toBe(0);
}

/** Debian tools the blocks call (besides bash and node): curl everywhere, openssl for tokens. */
const NO_CURL = missingTools('curl');
const NO_CURL_OPENSSL = missingTools('curl', 'openssl');

const engine = availableEngines().includes('postgres') ? 'postgres' : 'pglite';

describe("the README's commands", () => {
  it('every sh block is run here or listed with the reason it is not, and none is stale', () => {
    const known = new Set<string>(Object.values(RUN));
    const unknown = SH.filter(
      (b) => !(b.text in NOT_RUN) && !known.has(b.text.split('\n')[0]!),
    ).map((b) => `README.md:${b.line} (${b.section}):\n${b.text}`);
    expect(
      unknown,
      'README sh blocks this test does not know: add each to RUN (and run it) or NOT_RUN with a reason',
    ).toEqual([]);
    for (const first of known) block(first);
    for (const text of Object.keys(NOT_RUN)) {
      expect(
        SH.map((b) => b.text),
        `NOT_RUN lists a block the README no longer has`,
      ).toContain(text);
    }
  });

  it('commands are in ```sh blocks, not in other shell fences', () => {
    const misfenced = BLOCKS.filter((b) => SHELL_LANGS.includes(b.lang)).map(
      (b) => `README.md:${b.line}: \`\`\`${b.lang}`,
    );
    expect(misfenced).toEqual([]);
    // a fence without a language (a diagram, a tree) holds no command either
    const hidden = BLOCKS.filter(
      (b) => b.lang === '' && /^\s*(npx|npm|curl|node) /m.test(b.text),
    ).map((b) => `README.md:${b.line}`);
    expect(hidden).toEqual([]);
  });

  it('every command quoted in the prose runs in a block here or is listed with a reason', () => {
    const run = SH.filter((b) => !(b.text in NOT_RUN))
      .map((b) => b.text.replace(/\\\n\s*/g, '').replace(/\s+/g, ' '))
      .join('\n');
    const inline = inlineCommands(README, ['npx switchboard', 'curl ']);
    const loose = inline.filter((c) => !(c in INLINE_NOT_RUN) && !run.includes(c));
    expect(loose, 'move each into a ```sh block, or list it in INLINE_NOT_RUN').toEqual([]);
    for (const c of Object.keys(INLINE_NOT_RUN)) expect(inline).toContain(c);
  });

  it('no block waits with a fixed sleep: a sleep only paces a poll (until/while ... do ... done)', () => {
    for (const b of SH) {
      for (const line of b.text.split('\n')) {
        if (!/\bsleep\b/.test(line)) continue;
        expect(line, `README.md:${b.line}`).toMatch(
          /^\s*(until|while) .+; do sleep [\d.]+; done\s*$/,
        );
      }
    }
  });

  describe.runIf(NO_CURL.length === 0)(
    onlyIf(
      NO_CURL.length === 0,
      'against a server as npm start starts it [pglite]',
      toolsReason(NO_CURL),
    ),
    () => {
      let server: ServerProcess;
      const dirs: string[] = [];
      let flowsRun: Promise<BashRun>;

      /** a block's text, pointed at this file's server (see the header) */
      const atServer = (text: string) =>
        substitute(text, [['localhost:3000', `localhost:${server.port}`]], true);
      /** the last of the server's log, for a failure's message */
      const serverLog = () =>
        `\n--- server (last lines)\n${server.output().split('\n').slice(-40).join('\n')}`;
      const serverEnv = () => blockEnv({ SWITCHBOARD_URL: `http://localhost:${server.port}` });

      beforeAll(async () => {
        // the flow commands need no server: they run while it starts
        flowsRun = runBash(block(RUN.flows).text, { env: blockEnv({}), timeoutMs: 90_000 }).done;
        flowsRun.catch(() => {});
        // the embedded database in a DATA_DIR of its own, as `npm start` with no DATABASE_URL
        const dir = mkdtempSync(join(tmpdir(), 'switchboard-readme-'));
        dirs.push(dir);
        server = await startServerProcess({ DATA_DIR: dir });
      }, 120_000);
      afterAll(async () => {
        await server?.stop();
        for (const d of dirs) rmSync(d, { recursive: true, force: true });
      });

      it('the walk-through: a call ends confirmed, its follow-up SMS is delivered', async () => {
        const run = await runBash(atServer(block(RUN.walkThrough).text), {
          env: serverEnv(),
          timeoutMs: 45_000,
        }).done;
        expectSuccess(run, 'the walk-through', serverLog());
        const [scripted, id, call, followUp, stats, ...rest] = printedValues(run.stdout) as [
          { queued: number },
          string,
          Call,
          Message,
          Stats,
        ];
        expect(rest).toEqual([]);
        // 1. the callee scripted
        expect(scripted.queued).toBe(1);
        // 2. the call's id, echoed
        expect(call.id).toBe(id);
        // 3. path main / key 1, outcome confirmed, the call's message and the follow-up SMS
        expect(call.state).toBe('ended');
        expect(call.outcome).toBe('confirmed');
        expect(call.path.map((p) => [p.menu, p.key])).toEqual([['main', '1']]);
        expect(call.messages.map((m) => [m.role, m.type])).toEqual([
          ['call', 'speechcall'],
          ['follow-up', 'sms'],
        ]);
        // 4. what was sent, and its timeline: queued, accepted, sent, delivered
        expect(followUp.callId).toBe(id);
        expect(followUp.sent.text).toBe('Thanks Ann, see you on Monday 10:00.');
        expect(followUp.timeline.map((t) => t.status)).toEqual([
          'queued',
          'accepted',
          'sent',
          'delivered',
        ]);
        // 5. the flow's stats count this call
        expect(stats.outcomes.confirmed).toBeGreaterThanOrEqual(1);
        expect(stats.nodes.main?.keys['1']).toBeGreaterThanOrEqual(1);
      }, 60_000);

      it('the same from the command line: --wait prints state ended, outcome confirmed, path main:1', async () => {
        const run = await runBash(atServer(block(RUN.cliCall).text), {
          env: serverEnv(),
          timeoutMs: 45_000,
        }).done;
        expectSuccess(run, 'the command-line call', serverLog());
        const [scripted, ...lines] = printedValues(run.stdout);
        expect(scripted).toMatchObject({ queued: 1 });
        expect(lines).toEqual([
          expect.stringMatching(/^call \S+ queued \(appointment-reminder@\w+\)$/),
          'state ended, outcome confirmed',
          'path main:1',
          expect.stringMatching(/^follow-ups sms \w+$/),
        ]);
      }, 60_000);

      it('the flow commands: validate, compile, graph, simulate', async () => {
        const run = await flowsRun;
        expectSuccess(run, 'the flow commands');
        expect(run.stdout).toMatch(/^\d+ flows, 0 errors/m);
        // compile: the provider's menu JSON, in Ukrainian (--lang uk)
        // a spoken prompt, without a server to serve it: the words the call would hear
        expect(run.stdout).toMatch(/"introUrl": "say: Добрий день, [^"]+"/);
        // graph: Mermaid
        expect(run.stdout).toMatch(/^flowchart TD$/m);
        // simulate: silence, a retry, 9 for a second round, then 1: confirmed and its SMS
        expect(run.stdout).toMatch(/^outcome: confirmed$/m);
        expect(run.stdout).toContain('sms: "Thanks Ann, see you on Mon."');
        expect(run.stdout).toContain('machine and menu JSON agree');
      }, 90_000);
    },
  );

  describe(`running against the real provider, with the sandbox in its place [${engine}]`, () => {
    let db: TestDatabase | undefined;
    let dir: string;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'switchboard-readme-provider-'));
      if (engine === 'postgres') db = await createTestDatabase('postgres');
    });
    afterAll(async () => {
      await db?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    const tools = NO_CURL_OPENSSL.length === 0;
    it.runIf(tools)(
      onlyIf(
        tools,
        'starts with its configuration, talks to the provider, and the first message is delivered by callback',
        toolsReason(NO_CURL_OPENSSL),
      ),
      async () => {
        const port = await freePort();
        const sandboxPort = await freePort();
        const sandbox = `http://127.0.0.1:${sandboxPort}`;
        /**
         * The real-provider block's addresses, and only those, each replaced by one this test
         * started (each must occur in the block, once):
         */
        const PROVIDER_SUBSTITUTIONS: [string, string][] = [
          // PUBLIC_URL: the server `npm start` starts here, on PORT (set in the environment)
          ['https://switchboard.example.com', `http://localhost:${port}`],
          // PROVIDER_BASE_URL: the provider sandbox alone (`npm run sandbox`, started below)
          ['https://restapi.smsbat.com', sandbox],
          // the API key from your dashboard: the sandbox's (src/sandbox/README.md, "Credentials")
          ['PROVIDER_API_KEY=...', 'PROVIDER_API_KEY=sandbox-key'],
          // the database: one of this file's own on Postgres, else an embedded one in a temp dir
          [
            'DATABASE_URL=postgres://switchboard@db/switchboard',
            db ? `DATABASE_URL=${db.url}` : `DATA_DIR=${join(dir, 'data')}`,
          ],
        ];
        const start = substitute(block(RUN.providerStart).text, PROVIDER_SUBSTITUTIONS);
        // step 3: the addresses the provider is given, as the README prints them
        const statusHook = README.match(/status webhooks: `([^`]+)`/)?.[1];
        const viberHook = README.match(/incoming Viber messages: `([^`]+)`/)?.[1];
        expect(statusHook).toBe('$PUBLIC_URL/hooks/delivery?token=$CALLBACK_TOKEN');
        expect(viberHook).toBe('$PUBLIC_URL/hooks/viber?token=$CALLBACK_TOKEN');
        // on a line of its own: a `curl -s` before it ends its output without a newline
        const marker = (name: string) => `printf '\\n@@ %s\\n' '${name}'`;
        const script = [
          // step 2, its `npm start` in the background, its output to a file (a second terminal)
          `${substitute(start, [['\nnpm start', `\nnpm start > ${join(dir, 'server.log')} 2>&1 &`]])}`,
          // step 3: the provider (here the sandbox) calls back the addresses it was given
          `SANDBOX_PORT=${sandboxPort} SANDBOX_CALLBACK_URL="${statusHook}" SANDBOX_VIBER_CALLBACK_URL="${viberHook}" npm run sandbox > ${join(dir, 'sandbox.log')} 2>&1 &`,
          `until curl -sf "$PUBLIC_URL/readyz" >/dev/null; do sleep 0.2; done`,
          `until curl -sf ${sandbox}/_control >/dev/null; do sleep 0.2; done`,
          marker('first message'),
          block(RUN.providerFirstMessage).text,
          marker('tokens'),
          block(RUN.tokens).text,
          // the timeline the README promises: sent and delivered with source callback
          marker('delivered'),
          `until curl -s "$PUBLIC_URL/v1/messages/first-day-1" -H "authorization: Bearer $API_TOKEN" | grep -q '"status":"delivered"'; do sleep 0.2; done`,
          `curl -s "$PUBLIC_URL/v1/messages/first-day-1" -H "authorization: Bearer $API_TOKEN"`,
          // what the provider received
          marker('at the provider'),
          `curl -s "${sandbox}/_control/messages?customerMessageId=first-day-1"`,
        ].join('\n');
        // in the repository, as every block (npm start, npm run sandbox, npx); logs in `dir`
        const session = runBash(script, {
          env: blockEnv({ PORT: String(port), HOST: '127.0.0.1' }),
          timeoutMs: 150_000,
        });
        let run: BashRun;
        try {
          run = await session.done;
        } finally {
          await session.stop();
        }
        const log = (name: string) => {
          try {
            return readFileSync(join(dir, name), 'utf8');
          } catch {
            return '';
          }
        };
        expectSuccess(
          run,
          'the real-provider blocks',
          `\n--- server.log\n${log('server.log')}\n--- sandbox.log\n${log('sandbox.log')}`,
        );
        const parts = sections(run.stdout);
        expect(Object.keys(parts), run.stdout).toEqual([
          'first message',
          'tokens',
          'delivered',
          'at the provider',
        ]);
        // step 2: the banner names the provider it talks to, the sandbox
        expect(log('server.log')).toContain(sandbox);
        // step 4: queued, then read back
        const [posted, read] = printedValues(parts['first message']!) as [
          { messages: { status: string; customerMessageId: string }[] },
          Message,
        ];
        expect(posted.messages).toMatchObject([
          { status: 'queued', customerMessageId: 'first-day-1' },
        ]);
        expect(read.customerMessageId).toBe('first-day-1');
        // the timeline: queued (api), accepted (dispatch), then sent and delivered by callback
        const [delivered] = printedValues(parts.delivered!) as [Message];
        expect(delivered.timeline.map((t) => [t.status, t.source])).toEqual([
          ['queued', 'api'],
          ['accepted', 'dispatch'],
          ['sent', 'callback'],
          ['delivered', 'callback'],
        ]);
        // the sandbox received it, with the key substituted for PROVIDER_API_KEY=...
        const [atProvider] = printedValues(parts['at the provider']!) as [unknown[]];
        expect(atProvider).toHaveLength(1);
        expect(delivered.providerMessageId).toBeTruthy();
        expect(JSON.stringify(atProvider[0])).toContain(delivered.providerMessageId!);
        // the tokens block: made, listed, revoked through the API with API_TOKEN
        const tokens = parts.tokens!;
        expect(tokens).toMatch(/^ID\s+NAME\s+SCOPES/m);
        expect(tokens).toMatch(/^tok_\S+\s+reports\s+read\b/m);
        expect(tokens).toMatch(/^revoked tok_\S+ "reports" \(since \S+\)$/m);
      },
      180_000,
    );
  });
});

/** What each `@@ name` marker of a session's script was followed by. */
function sections(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  const parts = stdout.split(/^@@ (.+)$/m);
  for (let i = 1; i < parts.length; i += 2) out[parts[i]!] = parts[i + 1]!;
  return out;
}

interface Call {
  id: string;
  state: string;
  outcome: string | null;
  path: { menu: string; key: string }[];
  messages: { role: string; type: string; status: string }[];
}

interface Message {
  id: string;
  customerMessageId: string;
  providerMessageId: string | null;
  callId: string | null;
  sent: { text?: string };
  timeline: { status: string; source: string }[];
}

interface Stats {
  outcomes: Record<string, number>;
  nodes: Record<string, { keys: Record<string, number> }>;
}
