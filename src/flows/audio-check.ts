/**
 * The one rule for "does this URL answer with audio", as a telephony provider fetching a
 * menu's intro would find out, used by the sandbox when a speech call is created and by
 * `switchboard flows validate --check-audio`.
 *
 * Rules:
 * - a prompt that is not an absolute http(s) URL (a provider audio id such as `ivr_651854`)
 *   is not fetched: `provider-id`;
 * - the request goes through the outbound policy (src/http/outbound.ts); a URL the policy
 *   refuses is `not-checked` (with the policy's reason), as is one whose host name does not
 *   resolve from here, and one that answers with a redirect (the policy follows none): this
 *   host could not look, which says nothing about what the provider will find;
 * - `HEAD` first: a 2xx with `Content-Type: audio/*` is audio; anything else is looked at again
 *   with a ranged `GET` (`Range: bytes=0-…`; a server may answer 200 with the whole file), whose
 *   status must be 2xx and whose `Content-Type` is `audio/*` or whose first bytes carry a known
 *   audio signature: RIFF/WAVE, an ID3 tag or an MPEG audio frame sync, OggS;
 * - at most `maxBytes` of the body are read, and the whole check (both requests) has
 *   `timeoutMs`; no answer in time, or a connection that fails, is `not-audio`.
 *
 * @example
 * const check = createAudioChecker({ outbound });
 * await check('https://cdn.example.com/intro.wav') // { url, result: 'audio', detail: 'audio/wav' }
 * await check('ivr_651854')                          // { url, result: 'provider-id', detail: ... }
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import {
  type OutboundPolicy,
  OutboundRefusedError,
  OutboundUnreachableError,
} from '../http/outbound.ts';
import { isHttpUrl } from '../provider/menu.ts';

/** What became of one audio reference. */
export type AudioCheckOutcome = 'audio' | 'not-audio' | 'not-checked' | 'provider-id';

export interface AudioCheckResult {
  /** The reference as the menu gave it (a URL or a provider id). */
  url: string;
  result: AudioCheckOutcome;
  /** Why, in a few words: the content type or signature found, the status, the refusal. */
  detail: string;
}

export interface AudioCheckOptions {
  /** Every request goes through this policy's `check` and `send`. */
  outbound: Pick<OutboundPolicy, 'check' | 'send'>;
  /** The whole check of one URL, both requests (default 5000 ms). */
  timeoutMs?: number;
  /** The most of a body read (default 4096 bytes; the signatures need 12). */
  maxBytes?: number;
  /** Resolves a host name; a failure makes the URL `not-checked` (default: the system resolver). */
  resolveName?: (hostname: string) => Promise<unknown>;
  /** Stops every check under way (the sandbox closing): they end `not-checked`. */
  signal?: AbortSignal;
}

/** Checks one reference; never throws. */
export type AudioChecker = (url: string) => Promise<AudioCheckResult>;

/** True for a prompt that is a URL to fetch, false for a provider audio id. */
export function isAudioUrlRef(ref: string): boolean {
  return isHttpUrl(ref);
}

/**
 * The audio format `bytes` begin with, or undefined: `wav` (RIFF....WAVE), `mp3` (an ID3 tag,
 * or an MPEG audio frame sync: 11 set bits), `ogg` (OggS).
 *
 * @example
 * audioSignature(new TextEncoder().encode('OggS\0...')) // 'ogg'
 */
export function audioSignature(bytes: Uint8Array): 'wav' | 'mp3' | 'ogg' | undefined {
  const ascii = (from: number, to: number) => String.fromCharCode(...bytes.subarray(from, to));
  if (bytes.length >= 12 && ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WAVE') return 'wav';
  if (bytes.length >= 4 && ascii(0, 4) === 'OggS') return 'ogg';
  if (bytes.length >= 3 && ascii(0, 3) === 'ID3') return 'mp3';
  const [b0 = 0, b1 = 0] = bytes;
  // frame sync, and a version and layer that exist (not the reserved 01 version, not layer 00)
  if (bytes.length >= 2 && b0 === 0xff && (b1 & 0xe0) === 0xe0 && (b1 & 0x18) !== 0x08) {
    if ((b1 & 0x06) !== 0) return 'mp3';
  }
  return undefined;
}

/** The media type of a Content-Type header, lower case, without parameters. */
function mediaType(header: string | null): string {
  return (header ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Reads at most `max` bytes of `response`'s body, then drops the rest. */
async function firstBytes(response: Response, max: number): Promise<Uint8Array> {
  const reader = response.body?.getReader();
  if (reader === undefined) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let length = 0;
  try {
    while (length < max) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      length += value.length;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  const all = new Uint8Array(Math.min(length, max));
  let at = 0;
  for (const chunk of chunks) {
    if (at >= all.length) break;
    const part = chunk.subarray(0, all.length - at);
    all.set(part, at);
    at += part.length;
  }
  return all;
}

/** `{url} answered 302 (Location ...)`: the policy follows no redirect, so nothing was seen. */
function redirectOf(response: Response): AudioCheckResult['detail'] | undefined {
  if (response.status < 300 || response.status > 399) return undefined;
  const location = response.headers.get('location');
  return `redirects (${response.status}${location ? ` to ${location}` : ''}), and redirects are not followed`;
}

/**
 * A checker under `opts`; the same URL asked again while its check runs shares that check.
 *
 * @example
 * const check = createAudioChecker({ outbound, timeoutMs: 2000 });
 */
export function createAudioChecker(opts: AudioCheckOptions): AudioChecker {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const maxBytes = opts.maxBytes ?? 4096;
  const resolveName = opts.resolveName ?? ((host: string) => lookup(host, { all: true }));
  const inFlight = new Map<string, Promise<AudioCheckResult>>();

  async function checkOne(url: string): Promise<AudioCheckResult> {
    const result = (outcome: AudioCheckOutcome, detail: string): AudioCheckResult => ({
      url,
      result: outcome,
      detail,
    });
    if (!isAudioUrlRef(url)) {
      return result('provider-id', 'a provider audio id: played from the provider library');
    }
    let verdict: Awaited<ReturnType<OutboundPolicy['check']>>;
    try {
      verdict = await opts.outbound.check(url);
    } catch (error) {
      if (error instanceof OutboundUnreachableError) {
        return result('not-checked', 'its host name does not resolve from here');
      }
      throw error;
    }
    if (!verdict.ok)
      return result('not-checked', `refused by the outbound policy: ${verdict.reason}`);
    const host = verdict.url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) === 0) {
      try {
        await resolveName(host);
      } catch {
        return result('not-checked', 'its host name does not resolve from here');
      }
    }

    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    try {
      const head = await opts.outbound.send(url, { method: 'HEAD', signal });
      await head.body?.cancel().catch(() => undefined);
      const headRedirect = redirectOf(head);
      if (headRedirect !== undefined) return result('not-checked', headRedirect);
      const headType = mediaType(head.headers.get('content-type'));
      if (head.ok && headType.startsWith('audio/')) return result('audio', headType);

      const get = await opts.outbound.send(url, {
        method: 'GET',
        ownHeaders: { range: `bytes=0-${maxBytes - 1}` },
        signal,
      });
      const getRedirect = redirectOf(get);
      if (getRedirect !== undefined) {
        await get.body?.cancel().catch(() => undefined);
        return result('not-checked', getRedirect);
      }
      if (!get.ok) {
        await get.body?.cancel().catch(() => undefined);
        return result('not-audio', `answered ${get.status}`);
      }
      const type = mediaType(get.headers.get('content-type'));
      if (type.startsWith('audio/')) {
        await get.body?.cancel().catch(() => undefined);
        return result('audio', type);
      }
      const format = audioSignature(await firstBytes(get, maxBytes));
      if (format !== undefined) {
        return result('audio', `${format} data${type ? ` served as ${type}` : ''}`);
      }
      return result(
        'not-audio',
        `answered ${get.status} with ${type || 'no content type'}, not audio`,
      );
    } catch (error) {
      if (error instanceof OutboundRefusedError) {
        return result('not-checked', `refused by the outbound policy: ${error.reason}`);
      }
      if (opts.signal?.aborted) return result('not-checked', 'the check was stopped');
      if (timeout.aborted) return result('not-audio', `no answer within ${timeoutMs} ms`);
      return result('not-audio', 'no answer: the connection failed');
    }
  }

  return (url) => {
    const running = inFlight.get(url);
    if (running !== undefined) return running;
    const started = checkOne(url)
      .catch(
        (error: unknown): AudioCheckResult => ({
          url,
          result: 'not-audio',
          detail: `the check failed: ${(error as Error).message}`,
        }),
      )
      .finally(() => inFlight.delete(url));
    inFlight.set(url, started);
    return started;
  };
}

/**
 * Checks every distinct reference of `refs` once, in parallel; results in the order of first
 * appearance.
 *
 * @example
 * await checkAudioRefs(check, ['ivr_1', 'https://a/x.wav', 'https://a/x.wav']) // two results
 */
export function checkAudioRefs(
  check: AudioChecker,
  refs: Iterable<string>,
): Promise<AudioCheckResult[]> {
  return Promise.all([...new Set(refs)].map((ref) => check(ref)));
}

/** A prompt of a flow as written: where it is, and what it is. */
export interface FlowAudioRef {
  /** Path into the flow document, as `locate` (loader.ts) takes it: `['menus', 'main', 'intro', 'uk']`. */
  path: (string | number)[];
  /** `url`: fetched; `id`: a provider audio id; `template`: a URL with `{{...}}`; `say`: text. */
  kind: 'url' | 'id' | 'template' | 'say';
  /** The prompt as written (for `say`, its text). */
  value: string;
}

/** The fields of a menu that hold a prompt. */
const PROMPT_FIELDS = ['intro', 'reprompt'] as const;

/**
 * Every prompt of a flow definition (`menus.<name>.intro` / `reprompt`, one value or one per
 * language), in the order written.
 *
 * @example
 * flowAudioRefs({ menus: { main: { intro: { en: 'https://a/x.wav', uk: 'ivr_2' } } } })
 * // [{ path: ['menus', 'main', 'intro', 'en'], kind: 'url', ... }, { ..., kind: 'id' }]
 */
export function flowAudioRefs(definition: unknown): FlowAudioRef[] {
  const out: FlowAudioRef[] = [];
  const asRecord = (v: unknown): Record<string, unknown> | undefined =>
    typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined;
  const one = (value: unknown, path: (string | number)[]): boolean => {
    if (typeof value === 'string') {
      const kind = value.includes('{{') ? 'template' : isAudioUrlRef(value) ? 'url' : 'id';
      out.push({ path, kind, value });
      return true;
    }
    const say = asRecord(value)?.say;
    if (say !== undefined) {
      // text Switchboard renders (one text, or one per language inside `say`)
      out.push({ path, kind: 'say', value: typeof say === 'string' ? say : JSON.stringify(say) });
      return true;
    }
    return false;
  };
  for (const [name, menu] of Object.entries(asRecord(asRecord(definition)?.menus) ?? {})) {
    for (const field of PROMPT_FIELDS) {
      const prompt = asRecord(menu)?.[field];
      if (prompt === undefined || one(prompt, ['menus', name, field])) continue;
      for (const [lang, value] of Object.entries(asRecord(prompt) ?? {})) {
        one(value, ['menus', name, field, lang]);
      }
    }
  }
  return out;
}
