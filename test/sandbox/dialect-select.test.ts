/**
 * Choosing the sandbox's dialect: the createSandbox option, SANDBOX_DIALECT for Switchboard
 * (src/config.ts) and for `npm run sandbox` (src/sandbox/main.ts); and what the compact
 * dialect keeps of the condensed interface whichever form the request used.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { createSandbox } from '../../src/sandbox/app.ts';
import { json, type Served, serveSandbox } from './helpers.ts';

const TO = '+380501234567';

describe('SANDBOX_DIALECT in the configuration', () => {
  test('docs by default; compact when asked; anything else is an error naming the variable', () => {
    expect(loadConfig({}).sandboxDialect).toBe('docs');
    expect(loadConfig({ SANDBOX_DIALECT: '' }).sandboxDialect).toBe('docs');
    expect(loadConfig({ SANDBOX_DIALECT: 'compact' }).sandboxDialect).toBe('compact');
    expect(loadConfig({ SANDBOX_DIALECT: ' docs ' }).sandboxDialect).toBe('docs');
    let error: unknown;
    try {
      loadConfig({ SANDBOX_DIALECT: 'seed' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      { variable: 'SANDBOX_DIALECT', message: 'must be "docs" or "compact", got "seed"' },
    ]);
  });
});

describe('createSandbox({ dialect })', () => {
  test('compact when asked, reported by GET /_control; an unknown dialect is refused', async () => {
    const sandbox = createSandbox({ dialect: 'compact' });
    expect(await json(sandbox.app.request('/_control'))).toMatchObject({ dialect: 'compact' });
    await sandbox.close();
    // a caller without types can pass anything
    expect(() => createSandbox({ dialect: 'loud' as 'docs' })).toThrow(/docs.*compact/);
  });
});

describe('the compact dialect', () => {
  let s: Served | undefined;
  afterEach(async () => {
    await s?.close();
  });

  test('names the transactional Viber type viber_service, sent as viber_trans or viber_service', async () => {
    s = await serveSandbox({ dialect: 'compact' });
    const res = await fetch(`${s.baseUrl}/bat/messagelist`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-Authorization-Key': 'sandbox-key' },
      body: JSON.stringify({
        messages: [
          { from: 'Acme', to: TO, type: 'viber_trans', text: 'a' },
          { from: 'Acme', to: TO, type: 'viber_service', text: 'b' },
        ],
      }),
    });
    const ids = (await json(res)).messages.map((m: { messageId: string }) => m.messageId);
    await s.clock.advance(10_000);
    const served = s;
    const types = served.receiver.received.map((r) => (r.body as { type: string }).type);
    expect(types).toEqual(Array(6).fill('viber_service'));
    for (const id of ids) {
      const record = await json(
        fetch(`${served.baseUrl}/bat/message/${id}`, {
          headers: { 'X-Authorization-Key': 'sandbox-key' },
        }),
      );
      expect(record).toMatchObject({ type: 'viber_service', status: 'read' });
    }
    const listed = await json(fetch(`${served.baseUrl}/_control/messages?type=viber_service`));
    expect(listed).toHaveLength(2);
  });
});

describe('npm run sandbox (src/sandbox/main.ts)', () => {
  /** Runs the entry with `env`; resolves with its exit code and output, or its first line. */
  function run(env: Record<string, string>, untilListening: boolean) {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/sandbox/main.ts'], {
      env: { ...process.env, SANDBOX_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    return new Promise<{ code: number | null; out: string; err: string }>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (untilListening && /dialect: +\w+/.test(out)) {
          child.once('exit', (code) => resolve({ code, out, err }));
          child.kill('SIGTERM');
        }
      });
      child.stderr.on('data', (chunk: Buffer) => {
        err += chunk.toString();
      });
      child.once('error', reject);
      if (!untilListening) child.once('exit', (code) => resolve({ code, out, err }));
    });
  }

  test('SANDBOX_DIALECT chooses the dialect; a bad value stops it with a message naming it', async () => {
    const compact = await run({ SANDBOX_DIALECT: 'compact' }, true);
    expect(compact.out).toMatch(/dialect: +compact/);
    const plain = await run({ SANDBOX_DIALECT: '' }, true);
    expect(plain.out).toMatch(/dialect: +docs/);
    const bad = await run({ SANDBOX_DIALECT: 'loud' }, false);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('SANDBOX_DIALECT: must be "docs" or "compact", got "loud"');
  }, 60_000);
});
