/**
 * HTTP from tests to a server on a port (the test server, the sandbox, a peer).
 *
 * @example
 * const res = await postJson(`${server.url}/v1/messages`, { messages: [...] });
 */

/**
 * POST `body` to `url` as JSON (a string is sent as it is, for bodies that are not valid
 * JSON), with `headers` besides the content type.
 */
export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}
