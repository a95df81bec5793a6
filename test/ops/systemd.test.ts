/**
 * deploy/switchboard.service: `systemd-analyze verify` (syntax, known keys, an executable
 * ExecStart) and `systemd-analyze security --offline` (its hardening), plus the rules the
 * runbook states about it. Needs systemd-analyze (Debian package `systemd`); skipped, saying
 * so, when it is missing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startFlags } from '../../scripts/start-flags.ts';
import { loadConfig } from '../../src/config.ts';
import { noTool, onlyIf } from '../support/skip.ts';
import { ROOT, requireTool } from './support.ts';

const UNIT = readFileSync(`${ROOT}/deploy/switchboard.service`, 'utf8');
const ANALYZE = requireTool('systemd-analyze', 'systemd', 'systemd unit');

/** The value of `key=` in the unit (the last one, as systemd reads single-valued keys). */
function setting(key: string): string | undefined {
  const all = [...UNIT.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))];
  return all.at(-1)?.[1]?.trim();
}

describe('the systemd unit', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-unit-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The unit with ExecStart's binary replaced by this machine's node (verify checks it exists). */
  function unitHere(): string {
    const file = join(dir, 'switchboard.service');
    writeFileSync(file, UNIT.replace(/^ExecStart=\S+/m, `ExecStart=${process.execPath}`));
    return file;
  }

  const noAnalyze = noTool('systemd-analyze', 'systemd');
  const verify = 'passes systemd-analyze verify with nothing to say';
  it.skipIf(!ANALYZE)(onlyIf(!!ANALYZE, verify, noAnalyze), () => {
    const run = spawnSync(ANALYZE!, ['verify', unitHere()], { encoding: 'utf8' });
    // verify exits 0 on unknown keys and bad values, printing them: both must be empty
    expect(run.stderr + run.stdout).toBe('');
    expect(run.status).toBe(0);
  });

  it.skipIf(!ANALYZE)(
    onlyIf(
      !!ANALYZE,
      'is hardened: systemd-analyze security rates its exposure OK (2.0 or less)',
      noAnalyze,
    ),
    () => {
      const run = spawnSync(
        ANALYZE!,
        ['security', '--offline=yes', '--threshold=20', '--no-pager', unitHere()],
        { encoding: 'utf8' },
      );
      expect(run.status, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toMatch(/Overall exposure level for switchboard\.service: [0-2]\.\d OK/);
    },
  );

  it('runs what npm start runs, stops with SIGTERM above the shutdown timeout, and keeps secrets in a file', () => {
    const exec = setting('ExecStart')!.split(/\s+/);
    expect(exec.at(-1)).toBe('dist/main.js');
    expect(exec.slice(1, -1)).toEqual(expect.arrayContaining(startFlags()));
    expect(setting('KillSignal')).toBe('SIGTERM');
    const stopSeconds = Number(setting('TimeoutStopSec'));
    expect(stopSeconds * 1000).toBeGreaterThan(loadConfig({}).shutdownTimeoutMs);
    expect(setting('Restart')).toBe('on-failure');
    expect(setting('EnvironmentFile')).toBe('/etc/switchboard/switchboard.env');
    expect(setting('User')).toBe('switchboard');
    // the unit's own variables, read as Switchboard reads them
    const env = Object.fromEntries(
      setting('Environment')!
        .split(/\s+/)
        .map((kv) => kv.split('=') as [string, string]),
    );
    expect(Object.keys(env)).toEqual(expect.arrayContaining(['DATA_DIR', 'HOST']));
    const config = loadConfig(env);
    expect(config.host).toBe('127.0.0.1');
    expect(config.dataDir).toBe(`/var/lib/${setting('StateDirectory')}`);
  });
});
