/**
 * Speech webhooks checked before anything of them is stored: the signed token (naming the
 * call, the node and the key), and that the webhook's own fields agree with that call.
 */
import { AppError } from '../errors.ts';
import { verifyNodeToken } from '../flows/index.ts';
import type { RawCallback } from '../messages/inbox.ts';
import type { EventDeps } from './deps.ts';

export interface Verified {
  raw: RawCallback;
  body: unknown;
  callId: string;
  node: string;
  key: string;
}

function tokenOf(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as { action?: { token?: unknown }; token?: unknown };
  const token = b.action?.token ?? b.token;
  return typeof token === 'string' ? token : undefined;
}

/** The body, parsed and its token verified; a missing, forged or altered one is a 401. */
export function verify(deps: Pick<EventDeps, 'verifyingSecrets'>, raw: RawCallback): Verified {
  let body: unknown;
  try {
    body = JSON.parse(raw.body);
  } catch {
    throw new AppError('UNAUTHORIZED', 'no valid token: the body is not JSON');
  }
  const token = tokenOf(body);
  const verified = token ? verifyNodeToken(token, deps.verifyingSecrets) : null;
  if (!verified) throw new AppError('UNAUTHORIZED', 'missing, forged or altered webhook token');
  return { raw, body, callId: verified.callId, node: verified.node, key: verified.key };
}

const digits = (v: string) => v.replace(/\D/g, '');

/**
 * Whether the webhook's own fields agree with the call its token names: the callee (`to`,
 * compared by digits) and, once the provider's id for the call is known, `mid`.
 */
export function sameCall(body: unknown, callee: string, providerId: string | null): boolean {
  const b = body as { to?: unknown; mid?: unknown };
  if (typeof b.to === 'string' && b.to !== '' && digits(b.to) !== digits(callee)) return false;
  if (providerId && typeof b.mid === 'string' && b.mid !== '' && b.mid !== providerId) return false;
  return true;
}

export const foreignToken = () =>
  new AppError('UNAUTHORIZED', 'the webhook token belongs to another call');
