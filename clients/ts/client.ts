/**
 * A typed client of the Switchboard API: `fetch`, with the paths, parameters, bodies and
 * answers of clients/ts/schema.d.ts (generated from /openapi.json), so a call the document
 * does not allow does not compile, and an answer is typed by its status: `data` for a 2xx,
 * `error` (its `code` one of those the operation lists) otherwise.
 *
 * @example
 * const api = createClient({ baseUrl: 'http://127.0.0.1:3000', token: process.env.API_TOKEN });
 * const sent = await api.POST('/v1/messages', { body: { messages: [{ type: 'sms', ... }] } });
 * if (sent.data) console.log(sent.data.messages[0]?.id);
 * const one = await api.GET('/v1/messages/{ref}', { path: { ref: 'order-42-shipped' } });
 */
import type { paths } from './schema.d.ts';

type Method = 'get' | 'post' | 'delete';
/** The paths that have an operation for `M`. */
type PathsWith<M extends Method> = {
  [P in keyof paths]: paths[P] extends Record<M, object> ? P : never;
}[keyof paths];
type Op<P extends keyof paths, M extends Method> = paths[P] extends Record<M, infer O> ? O : never;

type JsonOf<R> = R extends { content: { 'application/json': infer J } } ? J : unknown;
type Responses<O> = O extends { responses: infer R } ? R : never;
type Success = 200 | 201 | 202 | 204;
type Data<O> = {
  [S in keyof Responses<O>]: S extends Success ? JsonOf<Responses<O>[S]> : never;
}[keyof Responses<O>];
type Failure<O> = {
  [S in keyof Responses<O>]: S extends Success ? never : JsonOf<Responses<O>[S]>;
}[keyof Responses<O>];

/** What a call takes: its path parameters, query and JSON body, as the operation declares. */
type Init<O> = (O extends { parameters: { path: infer A } } ? { path: A } : { path?: never }) &
  (O extends { parameters: { query?: infer Q } } ? { query?: Q } : object) &
  (O extends { requestBody: { content: { 'application/json': infer B } } }
    ? { body: B }
    : { body?: never }) & { headers?: Record<string, string> };
type Args<O> = object extends Init<O> ? [init?: Init<O>] : [init: Init<O>];

export type Result<O> =
  | { status: number; data: Data<O>; error?: never }
  | { status: number; data?: never; error: Failure<O> extends { error: infer E } ? E : unknown };

interface Loose {
  path?: Record<string, unknown>;
  query?: Record<string, unknown>;
  body?: unknown;
  headers?: Record<string, string>;
}

export function createClient(opts: { baseUrl: string; token?: string }) {
  async function call(method: Method, path: string, init: Loose = {}) {
    const filled = path.replace(/\{(\w+)\}/g, (_, n: string) =>
      encodeURIComponent(String(init.path?.[n])),
    );
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(init.query ?? {})) {
      if (v !== undefined) query.append(k, String(v));
    }
    const headers: Record<string, string> = { accept: 'application/json', ...init.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${opts.baseUrl}${filled}${query.size > 0 ? `?${query}` : ''}`, {
      method: method.toUpperCase(),
      headers,
      ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
    });
    const json = res.headers.get('content-type')?.includes('json');
    const payload: unknown = json ? await res.json() : await res.text();
    return res.ok
      ? { status: res.status, data: payload }
      : { status: res.status, error: (payload as { error?: unknown }).error ?? payload };
  }
  const verb =
    <M extends Method>(method: M) =>
    <P extends PathsWith<M>>(path: P, ...[init]: Args<Op<P, M>>) =>
      call(method, path, init as Loose) as Promise<Result<Op<P, M>>>;
  return { GET: verb('get'), POST: verb('post'), DELETE: verb('delete') };
}
