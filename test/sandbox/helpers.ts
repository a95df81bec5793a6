/**
 * Test helpers: a sandbox served over real HTTP on an ephemeral port, and a receiver that
 * records the callbacks the sandbox sends.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { type CreateSandboxOptions, createSandbox, type Sandbox } from '../../src/sandbox/app.ts';
import { createManualClock, type ManualClock } from '../../src/sandbox/clock.ts';

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: unknown;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Answers with `status` for requests to `path` (default 200), in order; then 200. */
  respondWith(path: string, statuses: number[]): void;
  close(): Promise<void>;
}

function listen(app: Hono): Promise<{ url: string; close: () => Promise<void> }> {
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
      const { port } = info as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            // Keep-alive sockets of fetch would otherwise hold close() open.
            (server as { closeAllConnections?: () => void }).closeAllConnections?.();
          }),
      });
    });
  });
}

/** A server that records every POST and answers 200 (or what `respondWith` queued). */
export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const queued = new Map<string, number[]>();
  const app = new Hono();
  app.post('*', async (c) => {
    const text = await c.req.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    const status = queued.get(c.req.path)?.shift() ?? 200;
    if (status < 300) {
      received.push({ path: c.req.path, headers: c.req.header(), body });
    }
    return c.json({ ok: status < 300 }, status as 200);
  });
  const server = await listen(app);
  return {
    url: server.url,
    received,
    respondWith: (path, statuses) => queued.set(path, [...statuses]),
    close: server.close,
  };
}

export interface Served {
  sandbox: Sandbox;
  clock: ManualClock;
  receiver: Receiver;
  /** The sandbox's {base_url}. */
  baseUrl: string;
  close(): Promise<void>;
}

/**
 * A sandbox on a manual clock, served on 127.0.0.1:0, calling back a fresh receiver. It speaks
 * the compact dialect (the condensed interface) unless `options` names another: the tests
 * that describe the docs dialect say so.
 */
export async function serveSandbox(
  options: CreateSandboxOptions | ((receiver: Receiver) => CreateSandboxOptions) = {},
): Promise<Served> {
  const receiver = await startReceiver();
  const opts = typeof options === 'function' ? options(receiver) : options;
  const clock = createManualClock(Date.parse('2030-01-01T00:00:00.000Z'));
  const sandbox = createSandbox({
    dialect: 'compact',
    clock,
    callbackUrl: `${receiver.url}/hooks/delivery`,
    seed: 7,
    ...opts,
  });
  const server = await listen(sandbox.app);
  return {
    sandbox,
    clock,
    receiver,
    baseUrl: server.url,
    async close() {
      await sandbox.close();
      await server.close();
      await receiver.close();
    },
  };
}

export const API_KEY = { 'X-Authorization-Key': 'sandbox-key' };

export function basic(user: string, pass: string): Record<string, string> {
  return { Authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` };
}

/** JSON POST to an in-process app. */
export function post(
  app: Hono,
  path: string,
  body: unknown,
  headers: Record<string, string> = API_KEY,
): Promise<Response> {
  return Promise.resolve(
    app.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    }),
  );
}

export const sms = (to: string, extra: Record<string, unknown> = {}) => ({
  from: 'Acme',
  to,
  type: 'sms',
  text: 'hello',
  ...extra,
});

// biome-ignore lint/suspicious/noExplicitAny: a response body in a test; the assertions check its shape
export type Json = any;

/** The JSON body of a response (or of a pending one). */
export async function json(res: Response | Promise<Response>): Promise<Json> {
  return (await res).json();
}
