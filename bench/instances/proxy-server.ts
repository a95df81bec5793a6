/**
 * The round-robin proxy (bench/lib/round-robin.ts) as a child process of its own for
 * `npm run bench:instances`, so that its CPU is not counted as the servers'. Env: PORT (0: a
 * free one; printed as the server prints it), UPSTREAMS (the instances' base URLs, separated
 * by commas). On SIGTERM it prints how many requests each upstream got.
 *
 * @example
 * PORT=8080 UPSTREAMS=http://127.0.0.1:3001,http://127.0.0.1:3002 node proxy-server.mjs
 */
import type { AddressInfo } from 'node:net';
import { createRoundRobin } from '../lib/round-robin.ts';

const upstreams = (process.env.UPSTREAMS ?? '').split(',').filter(Boolean);
const proxy = createRoundRobin(upstreams);
proxy.server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const { port } = proxy.server.address() as AddressInfo;
  // the port last, just before msg: the bench's ready pattern reads it there
  console.log(JSON.stringify({ upstreams, port, msg: 'listening' }));
});
process.once('SIGTERM', () => {
  console.log(JSON.stringify({ counts: proxy.counts, msg: 'stopping' }));
  void proxy.close().then(() => process.exit(0));
});
