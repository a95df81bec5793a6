/**
 * deploy/Caddyfile: `caddy validate` (Debian package `caddy`; skipped, saying so, without it),
 * and it forwards to where the systemd unit makes Switchboard listen.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { noTool, onlyIf } from '../support/skip.ts';
import { ROOT, requireTool } from './support.ts';

const CADDY = requireTool('caddy', 'caddy', 'reverse proxy example');
const CADDYFILE = `${ROOT}/deploy/Caddyfile`;

describe('the reverse proxy example', () => {
  it.skipIf(!CADDY)(onlyIf(!!CADDY, 'passes caddy validate', noTool('caddy', 'caddy')), () => {
    const run = spawnSync(CADDY!, ['validate', '--config', CADDYFILE, '--adapter', 'caddyfile'], {
      encoding: 'utf8',
      env: { ...process.env, HOME: process.env.HOME ?? '/root' },
    });
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout + run.stderr).toContain('Valid configuration');
  });

  it("proxies to the address the systemd unit listens on, which is in TRUSTED_PROXIES' example", () => {
    const unit = readFileSync(`${ROOT}/deploy/switchboard.service`, 'utf8');
    const env = Object.fromEntries(
      (unit.match(/^Environment=(.*)$/m)?.[1] ?? '').split(/\s+/).map((kv) => kv.split('=')),
    ) as Record<string, string>;
    const caddy = readFileSync(CADDYFILE, 'utf8');
    expect(caddy).toMatch(new RegExp(`reverse_proxy ${env.HOST}:${env.PORT}\\b`));
    const example = readFileSync(`${ROOT}/deploy/switchboard.env.example`, 'utf8');
    expect(example).toMatch(/^TRUSTED_PROXIES=127\.0\.0\.1,::1$/m);
  });
});
