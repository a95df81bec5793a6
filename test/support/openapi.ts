/**
 * Reading /openapi.json back in tests: the error codes each operation lists, per status (the
 * `enum` of `error.code` in its responses; src/http/operation-errors.ts writes them), keyed
 * the way Hono writes a route (`GET /v1/messages/:ref`), so a test that holds a Hono route can
 * ask what its operation documents.
 */

interface Schema {
  $ref?: string;
  allOf?: Schema[];
  properties?: Record<string, Schema>;
  enum?: string[];
}

export interface OpenApiDoc {
  paths: Record<
    string,
    Record<
      string,
      { responses?: Record<string, { content?: Record<string, { schema?: Schema }> }> }
    >
  >;
}

/** The codes `schema` (an error response's) narrows `error.code` to. */
function codesOf(schema: Schema | undefined): string[] {
  if (!schema) return [];
  const own = schema.properties?.error?.properties?.code?.enum ?? [];
  return [...own, ...(schema.allOf ?? []).flatMap(codesOf)];
}

/** `METHOD /path/:param` -> the `"<status> <code>"` pairs its operation lists. */
export function documentedErrors(doc: OpenApiDoc): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const pairs = new Set<string>();
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        const schema = response.content?.['application/json']?.schema;
        for (const code of codesOf(schema)) pairs.add(`${status} ${code}`);
      }
      out.set(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`, pairs);
    }
  }
  return out;
}
