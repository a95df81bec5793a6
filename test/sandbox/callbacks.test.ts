import { expect, test } from 'vitest';
import type { OutboundInit, OutboundSend } from '../../src/http/outbound.ts';
import {
  CallbackOptions,
  callbackRetryDelayMs,
  createCallbackSender,
} from '../../src/sandbox/callbacks.ts';
import { createManualClock, Scheduler } from '../../src/sandbox/clock.ts';
import { createRandom } from '../../src/sandbox/random.ts';

function sender(opts: Partial<CallbackOptions>, fetchImpl: OutboundSend) {
  const clock = createManualClock(0);
  const scheduler = new Scheduler(clock);
  const options = CallbackOptions.parse(opts);
  return {
    clock,
    scheduler,
    sender: createCallbackSender({
      scheduler,
      send: fetchImpl,
      options: () => options,
      random: createRandom(1),
    }),
  };
}

test('backoff doubles from retryBaseMs up to retryMaxDelayMs', () => {
  const o = CallbackOptions.parse({ retryBaseMs: 1000, retryMaxDelayMs: 5000 });
  expect([1, 2, 3, 4, 5].map((n) => callbackRetryDelayMs(n, o))).toEqual([
    1000, 2000, 4000, 5000, 5000,
  ]);
});

test("one message's callbacks go in order; different messages in parallel, at most maxConcurrent", async () => {
  let inFlight = 0;
  let most = 0;
  const order: string[] = [];
  const gates: (() => void)[] = [];
  let arrived = () => {};
  const fetchImpl = (async (_url: string, init: OutboundInit) => {
    inFlight++;
    most = Math.max(most, inFlight);
    await new Promise<void>((r) => {
      gates.push(r);
      arrived();
    });
    order.push(String(init.body));
    inFlight--;
    return new Response('ok');
  }) as unknown as OutboundSend;
  const { sender: s } = sender({ maxConcurrent: 2 }, fetchImpl);
  const sends = [
    s.send({ kind: 'delivery', url: 'http://x/', body: 'a1', messageId: 'a' }),
    s.send({ kind: 'delivery', url: 'http://x/', body: 'a2', messageId: 'a' }),
    s.send({ kind: 'delivery', url: 'http://x/', body: 'b1', messageId: 'b' }),
    s.send({ kind: 'delivery', url: 'http://x/', body: 'c1', messageId: 'c' }),
  ];
  /** Barrier: resolves once `n` requests wait at their gates (fails the test if they never do). */
  const atGates = (n: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${gates.length} requests at the provider, expected ${n}`)),
        5000,
      );
      arrived = () => {
        if (gates.length < n) return;
        clearTimeout(timer);
        resolve();
      };
      arrived();
    });
  // release requests one at a time, in arrival order; while more are to come, both slots are
  // taken before one is released
  for (let released = 0; released < 4; released++) {
    await atGates(Math.min(2, 4 - released));
    gates.shift()!();
  }
  await Promise.all(sends);
  expect(order).toHaveLength(4);
  expect(most).toBe(2);
  expect(order.indexOf('"a1"')).toBeLessThan(order.indexOf('"a2"'));
  expect(s.list().every((r) => r.state === 'delivered')).toBe(true);
});

test('reset forgets records and drops retries that were waiting', async () => {
  let calls = 0;
  const fetchImpl = (async () => {
    calls++;
    return new Response('no', { status: 500 });
  }) as unknown as OutboundSend;
  const { sender: s, clock, scheduler } = sender({}, fetchImpl);
  await s.send({ kind: 'viber', url: 'http://x/', body: {} });
  await clock.advance(1000);
  expect(calls).toBe(2);
  // what the sandbox's reset does
  scheduler.cancelAll();
  s.reset();
  expect(s.list()).toHaveLength(0);
  await clock.advance(600_000);
  expect(calls).toBe(2);
});
