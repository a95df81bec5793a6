/**
 * What the "try a flow" page asks of the built-in sandbox, through its control API (the same
 * requests a test or `curl` would send to `/sandbox/_control/...`), in-process.
 *
 * @example
 * const sandbox = sandboxControl(sandboxApp);
 * await sandbox.armLiveCall('+380501234567');
 * await sandbox.pressKeys('call-customer-message-id', ['1']);
 */
import type { Hono } from 'hono';
import { AppError } from '../errors.ts';

export type PressOutcome =
  | { ok: true }
  | { ok: false; status: number; code: string; message: string };

export interface SandboxControl {
  /** The next call to `to` takes its keys live, from `pressKeys`. */
  armLiveCall(to: string): Promise<void>;
  /** Takes back what `armLiveCall` queued for `to` (the call did not start). */
  disarm(to: string): Promise<void>;
  /** Presses keys on the live call of a message (its customerMessageId or messageId). */
  pressKeys(ref: string, keys: readonly string[]): Promise<PressOutcome>;
}

export function sandboxControl(sandbox: Hono): SandboxControl {
  const post = (path: string, body: unknown) =>
    sandbox.request(`/_control${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const clear = async (to: string) => {
    await sandbox.request(`/_control/scripts?to=${encodeURIComponent(to)}`, { method: 'DELETE' });
  };
  return {
    async armLiveCall(to) {
      // a script left over from an abandoned try would be taken first: start clean
      await clear(to);
      const res = await post('/scripts', { to, live: true });
      if (!res.ok) {
        // what the sandbox refuses is the number given in the form: the form's error
        const { message } = (await res.json().catch(() => ({}))) as { message?: string };
        const why = message ?? `the sandbox answered ${res.status}`;
        throw new AppError('VALIDATION_ERROR', `the sandbox refused the number: ${why}`, [
          { path: 'to', code: 'INVALID_RECIPIENT', message: why },
        ]);
      }
    },
    disarm: clear,
    async pressKeys(ref, keys) {
      const res = await post(`/calls/${encodeURIComponent(ref)}/keys`, { keys });
      if (res.ok) return { ok: true };
      const body = (await res.json().catch(() => ({}))) as { error?: string; message?: string };
      return {
        ok: false,
        status: res.status,
        code: body.error ?? 'ERROR',
        message: body.message ?? `the sandbox answered ${res.status}`,
      };
    },
  };
}
