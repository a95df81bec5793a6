/**
 * Who is asking, and over what: the socket peer of a request and, only when that peer is one
 * of TRUSTED_PROXIES, the client address (`X-Forwarded-For`) and scheme
 * (`X-Forwarded-Proto`) it forwards. A forwarding header from anyone else is ignored, so a
 * client cannot claim to be loopback or to have come over TLS.
 *
 * A request made in-process (`app.request`, the console asking the mounted sandbox) has no
 * socket: it never crossed a network, so it counts as local (`inProcess: true`).
 *
 * @example
 * const proxies = trustedProxies(config.trustedProxies);
 * const origin = requestOrigin(c, proxies);
 * if (origin.local) ...; if (origin.secure) ...
 */

import { BlockList, isIP } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Context } from 'hono';
import { header, nodeRequest } from './headers.ts';

/** A set of addresses and CIDR ranges (IPv4 and IPv6; IPv4-mapped IPv6 counts as IPv4). */
export interface AddressSet {
  has(address: string): boolean;
}

/** `::ffff:127.0.0.1` -> `127.0.0.1`; anything else unchanged. */
export function unmapped(address: string): string {
  return address.toLowerCase().startsWith('::ffff:') && isIP(address.slice(7)) === 4
    ? address.slice(7)
    : address;
}

/** Builds an AddressSet from entries like `10.0.0.0/8`, `192.168.1.10`, `::1`, `fd00::/8`. */
export function addressSet(entries: readonly string[]): AddressSet {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', bits] = entry.split('/');
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(bits), family);
  }
  return {
    has(address) {
      const plain = unmapped(address);
      const family = isIP(plain);
      if (family === 0) return false;
      return list.check(plain, family === 6 ? 'ipv6' : 'ipv4');
    },
  };
}

const LOOPBACK = addressSet(['127.0.0.0/8', '::1/128']);

/** True for 127.0.0.0/8, ::1 and their IPv4-mapped forms. */
export function isLoopback(address: string): boolean {
  return LOOPBACK.has(address);
}

/** TRUSTED_PROXIES as a set. */
export function trustedProxies(entries: readonly string[]): AddressSet {
  return addressSet(entries);
}

export interface RequestOrigin {
  /** the client's address: the socket peer, or what a trusted proxy forwarded; undefined in-process */
  address: string | undefined;
  /** no socket: the request was made in-process */
  inProcess: boolean;
  /**
   * in-process, or the client's address is loopback. A loopback peer that is not a trusted
   * proxy but sends forwarding headers is a proxy on this host passing someone else's request
   * on: not local.
   */
  local: boolean;
  /** TLS on the socket itself, or `X-Forwarded-Proto: https` from a trusted proxy */
  secure: boolean;
}

const FORWARDING = ['forwarded', 'x-forwarded-for', 'x-real-ip'];

/** The last entry of a comma-separated header (the one the nearest proxy wrote). */
function lastOf(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const parts = value.split(',');
  const last = parts[parts.length - 1]?.trim();
  return last === '' ? undefined : last;
}

/**
 * The client behind `X-Forwarded-For`: walking from the nearest hop back, the first address
 * that is not itself a trusted proxy. Undefined when the header holds nothing usable.
 */
function forwardedClient(value: string | undefined, proxies: AddressSet): string | undefined {
  if (value === undefined) return undefined;
  const hops = value
    .split(',')
    .map((h) => h.trim())
    .filter((h) => h !== '');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i] as string;
    if (isIP(hop) === 0) return undefined;
    if (!proxies.has(hop)) return hop;
  }
  return hops[0];
}

export function requestOrigin(c: Context, proxies: AddressSet): RequestOrigin {
  const incoming = nodeRequest(c);
  const socket = incoming?.socket;
  if (socket === undefined) {
    return {
      address: undefined,
      inProcess: true,
      local: true,
      secure: new URL(c.req.url).protocol === 'https:',
    };
  }
  const peer = socket.remoteAddress === undefined ? undefined : unmapped(socket.remoteAddress);
  const tls = (socket as Partial<TLSSocket>).encrypted === true;
  if (peer === undefined || !proxies.has(peer)) {
    const forwarded = FORWARDING.some((name) => header(c, name) !== undefined);
    return {
      address: peer,
      inProcess: false,
      local: peer !== undefined && isLoopback(peer) && !forwarded,
      secure: tls,
    };
  }
  const client = forwardedClient(header(c, 'x-forwarded-for'), proxies) ?? peer;
  const proto = lastOf(header(c, 'x-forwarded-proto'))?.toLowerCase();
  return {
    address: unmapped(client),
    inProcess: false,
    local: isLoopback(client),
    secure: tls || proto === 'https',
  };
}
