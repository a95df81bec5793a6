/**
 * The outbound policy: every request Switchboard or its sandbox makes to an address someone
 * else chose (a speech menu's webhook actions, the sandbox's callbacks; later the user's event
 * endpoints and audio) goes through `send`, so that none of them can be turned against this
 * host or its network (request forgery, port scanning). The rule, in one place:
 * - http(s) only, and no credentials (`user:pass@`) in the URL;
 * - the host is resolved on every request and every address it resolves to is checked; the
 *   check is the connection's own DNS lookup, so the connection goes to the checked addresses
 *   and nothing can rebind the name in between; an IP-literal host is checked as written;
 * - private, loopback, link-local, carrier-grade NAT, unique-local, multicast, unspecified and
 *   reserved addresses (IPv4, IPv6, and IPv4 inside IPv6: mapped and NAT64) are refused, except
 *   for Switchboard's own origins (PUBLIC_URL: scheme, host and port), unless `allowPrivate`
 *   (OUTBOUND_ALLOW_PRIVATE=true: local development and tests), which lifts the address rule;
 * - redirects are not followed: a 3xx is the answer;
 * - of the headers a caller chose (`headers`), hop-by-hop, forwarding and secret-bearing ones
 *   (secret-headers.ts) are dropped; the headers Switchboard sets itself (`ownHeaders`) are
 *   sent as given.
 *
 * A refusal throws OutboundRefusedError before any connection is made; it is final, never worth
 * a retry. Any other failure throws OutboundUnreachableError with one generic message, so a
 * listing of attempts does not tell a closed port from a filtered one or a missing name.
 *
 * @example
 * const outbound = createOutboundPolicy({ allowPrivate: config.outboundAllowPrivate, ownOrigins: [config.publicUrl] });
 * await outbound.check('http://127.0.0.1:6379/') // { ok: false, reason: '127.0.0.1 is a loopback address' }
 * const res = await outbound.send(menuUrl, { method: 'POST', headers: menuHeaders, ownHeaders: { 'content-type': 'application/json' }, body });
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent, fetch as undiciFetch } from 'undici';
import { NOT_THE_DATABASE } from '../errors.ts';
import { isSecretHeader } from './secret-headers.ts';

/** One address a name resolves to. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses (default: the system resolver, `dns.lookup`). */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

export interface OutboundPolicyOptions {
  /** OUTBOUND_ALLOW_PRIVATE: lifts the address rule (local development and tests). */
  allowPrivate: boolean;
  /** URLs whose origin is Switchboard itself (PUBLIC_URL): allowed whatever they resolve to. */
  ownOrigins?: readonly (string | undefined)[];
  /** Replaces the system resolver (tests: names that resolve to chosen addresses). */
  lookup?: Resolver;
}

export interface OutboundInit {
  /** Default GET. */
  method?: string;
  /** Headers the caller chose (a menu's, a user's): hop-by-hop and secret ones are dropped. */
  headers?: Readonly<Record<string, string>>;
  /** Headers Switchboard sets itself (its own callback token): sent as given, after the caller's. */
  ownHeaders?: Readonly<Record<string, string>>;
  body?: string;
  signal?: AbortSignal;
}

export type OutboundSend = (url: string, init?: OutboundInit) => Promise<Response>;

export type OutboundCheck = { ok: true; url: URL } | { ok: false; reason: string };

export interface OutboundPolicy {
  /** Sends one request under the policy; throws OutboundRefusedError or OutboundUnreachableError. */
  send: OutboundSend;
  /** The policy's verdict on `url` now (resolving its host), for validating a URL up front. */
  check(url: string): Promise<OutboundCheck>;
  /** Closes the pooled connections. */
  close(): Promise<void>;
}

/** The request breaks the policy; nothing was sent and sending again will not help. */
export class OutboundRefusedError extends Error {
  readonly [NOT_THE_DATABASE] = true;
  constructor(readonly reason: string) {
    super(`refused by the outbound policy: ${reason}`);
    this.name = 'OutboundRefusedError';
  }
}

/** The request was allowed but got no answer (name, connection, TLS or timeout; which is not said). */
export class OutboundUnreachableError extends Error {
  readonly [NOT_THE_DATABASE] = true;
  constructor(options?: { cause?: unknown }) {
    super('no answer: the connection failed or timed out', options);
    this.name = 'OutboundUnreachableError';
  }
}

/**
 * Caller headers never passed on: hop-by-hop ones (the connection is ours), the ones that say
 * whom a request is from (a caller could make a receiver believe it came from elsewhere), and,
 * through `isSecretHeader`, anything that may carry a credential.
 */
const DROPPED_CALLER_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'expect',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_VALUE = /[\0\r\n]/;

/** True for a caller-chosen header the policy drops (also `proxy-*` and invalid ones). */
export function isDroppedCallerHeader(name: string): boolean {
  const n = name.toLowerCase();
  return DROPPED_CALLER_HEADERS.has(n) || n.startsWith('proxy-') || isSecretHeader(n);
}

/** The caller-chosen headers the policy passes on, names in lower case. */
export function callerHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name) || typeof value !== 'string' || BAD_VALUE.test(value)) continue;
    if (!isDroppedCallerHeader(name)) out[name.toLowerCase()] = value;
  }
  return out;
}

/** Address ranges refused, most specific first (RFC 6890 and the IANA special-purpose registries). */
const REFUSED_RANGES: readonly [cidr: string, what: string][] = [
  ['0.0.0.0/8', 'an unspecified ("this network") address'],
  ['10.0.0.0/8', 'a private address'],
  ['100.64.0.0/10', 'a carrier-grade NAT address'],
  ['127.0.0.0/8', 'a loopback address'],
  ['169.254.0.0/16', 'a link-local address'],
  ['172.16.0.0/12', 'a private address'],
  ['192.0.0.0/24', 'a reserved address'],
  ['192.0.2.0/24', 'a reserved (documentation) address'],
  ['192.88.99.0/24', 'a reserved address'],
  ['192.168.0.0/16', 'a private address'],
  ['198.18.0.0/15', 'a reserved (benchmarking) address'],
  ['198.51.100.0/24', 'a reserved (documentation) address'],
  ['203.0.113.0/24', 'a reserved (documentation) address'],
  ['224.0.0.0/4', 'a multicast address'],
  ['240.0.0.0/4', 'a reserved address'],
  ['::/128', 'the unspecified address'],
  ['::1/128', 'a loopback address'],
  ['::/96', 'a reserved (IPv4-compatible) address'],
  ['64:ff9b:1::/48', 'a reserved (local NAT64) address'],
  ['100::/64', 'a reserved (discard) address'],
  ['2001:db8::/32', 'a reserved (documentation) address'],
  ['2001::/23', 'a reserved address'],
  ['2002::/16', 'a reserved (6to4) address'],
  ['3fff::/20', 'a reserved (documentation) address'],
  ['fc00::/7', 'a unique-local address'],
  ['fe80::/10', 'a link-local address'],
  ['fec0::/10', 'a reserved (site-local) address'],
  ['ff00::/8', 'a multicast address'],
];

const RANGES = REFUSED_RANGES.map(([cidr, what]) => {
  const [base = '', bits] = cidr.split('/');
  const family = isIP(base) === 6 ? 'ipv6' : 'ipv4';
  const list = new BlockList();
  list.addSubnet(base, Number(bits), family);
  return { list, family, what };
});

/** The eight 16-bit groups of an IPv6 address. */
function groups6(address: string): number[] {
  // the URL parser writes IPv6 canonically, dotted tails as hex
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const [head = '', tail] = canonical.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...fill, ...right].map((g) => Number.parseInt(g, 16));
}

/** The IPv4 address inside an IPv4-mapped (`::ffff:0:0/96`) or NAT64 (`64:ff9b::/96`) one. */
function embeddedIpv4(address: string): string | undefined {
  const g = groups6(address);
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const mapped = zero(0, 5) && g[5] === 0xffff;
  const nat64 = g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6);
  if (!mapped && !nat64) return undefined;
  const [hi = 0, lo = 0] = [g[6], g[7]];
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

/**
 * What makes `address` refused ("a loopback address"), or undefined when it is a public one.
 *
 * @example
 * refusedAddressKind('::ffff:10.1.2.3') // 'a private address'
 * refusedAddressKind('93.184.215.14')   // undefined
 */
export function refusedAddressKind(address: string): string | undefined {
  const plain = address.split('%')[0] ?? ''; // an IPv6 zone (fe80::1%eth0) is no part of the address
  const family = isIP(plain);
  if (family === 0) return 'not an IP address';
  if (family === 6) {
    const inner = embeddedIpv4(plain);
    if (inner !== undefined) return refusedAddressKind(inner);
  }
  const type = family === 6 ? 'ipv6' : 'ipv4';
  return RANGES.find((r) => r.family === type && r.list.check(plain, type))?.what;
}

/** `[::1]` -> `::1`: a URL's hostname as an address or name. */
function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** The checks that need no resolving: a URL, http(s), no credentials. */
function parseTarget(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundRefusedError('not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new OutboundRefusedError(
      `${url.protocol.slice(0, -1)} URLs are not allowed (http and https only)`,
    );
  }
  if (url.username !== '' || url.password !== '') {
    throw new OutboundRefusedError('credentials in the URL are not allowed');
  }
  return url;
}

const systemResolver: Resolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/** The refusal (our own error) somewhere in `error`'s chain of causes. */
function refusalIn(error: unknown): OutboundRefusedError | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof OutboundRefusedError) return e;
  }
  return undefined;
}

/** `resolve` as the `lookup` option of a socket, which asks for one address or all of them. */
function asLookup(resolve: Resolver): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (all) => {
        const wanted =
          options.family === 4 || options.family === 6
            ? all.filter((a) => a.family === options.family)
            : all;
        const first = wanted[0];
        if (first === undefined) {
          callback(
            Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }),
            '',
          );
        } else if (options.all) {
          callback(
            null,
            wanted.map((a) => ({ ...a })),
          );
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}

export function createOutboundPolicy(opts: OutboundPolicyOptions): OutboundPolicy {
  const resolve = opts.lookup ?? systemResolver;
  const own = new Set(
    (opts.ownOrigins ?? []).flatMap((u) => (u === undefined ? [] : [new URL(u).origin])),
  );

  /** Resolves `hostname` and checks every address; the connection uses what this returns. */
  async function resolveChecked(hostname: string): Promise<readonly ResolvedAddress[]> {
    const all = await resolve(hostname);
    for (const a of all) {
      const kind = refusedAddressKind(a.address);
      if (kind !== undefined) {
        throw new OutboundRefusedError(`${hostname} resolves to ${a.address}, ${kind}`);
      }
    }
    return all;
  }

  // Own origins and allowPrivate: pooled connections, no address rule.
  const open = new Agent(opts.lookup ? { connect: { lookup: asLookup(resolve) } } : {});
  // Everything else: a fresh connection per request (pipelining 0: no keep-alive), so every
  // request, retries included, resolves and checks its host again.
  const guarded = new Agent({ pipelining: 0, connect: { lookup: asLookup(resolveChecked) } });
  let closing: Promise<void> | undefined;

  /** Whether `url` is under the address rule; checks an IP-literal host at once. */
  function guardedTarget(url: URL): boolean {
    if (opts.allowPrivate || own.has(url.origin)) return false;
    const host = bareHost(url);
    if (isIP(host) !== 0) {
      const kind = refusedAddressKind(host);
      if (kind !== undefined) throw new OutboundRefusedError(`${host} is ${kind}`);
    }
    return true;
  }

  return {
    async send(raw, init = {}) {
      const url = parseTarget(raw);
      const dispatcher = guardedTarget(url) ? guarded : open;
      const headers = callerHeaders(init.headers ?? {});
      for (const [name, value] of Object.entries(init.ownHeaders ?? {})) {
        headers[name.toLowerCase()] = value;
      }
      try {
        const response = await undiciFetch(url, {
          method: init.method ?? 'GET',
          headers,
          ...(init.body !== undefined && { body: init.body }),
          ...(init.signal !== undefined && { signal: init.signal }),
          redirect: 'manual',
          dispatcher,
        });
        // undici's own Response: the global one's interface, from another copy of undici
        return response as unknown as Response;
      } catch (error) {
        throw refusalIn(error) ?? new OutboundUnreachableError({ cause: error });
      }
    },

    async check(raw) {
      try {
        const url = parseTarget(raw);
        if (guardedTarget(url) && isIP(bareHost(url)) === 0) {
          await resolveChecked(bareHost(url)).catch((error: unknown) => {
            throw refusalIn(error) ?? new OutboundUnreachableError({ cause: error });
          });
        }
        return { ok: true, url };
      } catch (error) {
        if (error instanceof OutboundRefusedError) return { ok: false, reason: error.reason };
        throw error;
      }
    },

    close() {
      closing ??= Promise.all([open.close(), guarded.close()]).then(() => undefined);
      return closing;
    },
  };
}
