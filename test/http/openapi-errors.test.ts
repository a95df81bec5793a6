/**
 * The error codes of each operation (src/http/operation-errors.ts; issue 22, point 2): derived
 * from what the operation is, plus what a route declares; a documented error status that none
 * of its codes answers with stops the document. That every code an operation really answers
 * with is listed is held by test/security/routes-fuzz.test.ts, which checks each answer it
 * gets against /openapi.json.
 */
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, httpStatus } from '../../src/errors.ts';
import {
  errorCodes,
  operationErrorCodes,
  withErrorResponses,
} from '../../src/http/operation-errors.ts';
import { needs } from '../../src/http/scopes.ts';
import type { Json } from '../support/app.ts';

const envelope = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

describe('operationErrorCodes', () => {
  it('gives every operation the codes answered before any handler', () => {
    expect(operationErrorCodes('/healthz', { security: [] })).toEqual([
      'URI_TOO_LONG',
      'HEADERS_TOO_LARGE',
      'INTERNAL',
      'INVALID_ENCODING',
    ]);
  });

  it('derives the body, parameter and token codes from the operation', () => {
    const codes = operationErrorCodes('/v1/things/{id}', {
      parameters: [{ in: 'path' }],
      requestBody: {},
      security: needs('send'),
    });
    for (const code of [
      'MALFORMED_JSON',
      'UNSUPPORTED_MEDIA_TYPE',
      'PAYLOAD_TOO_LARGE',
      'VALIDATION_ERROR',
      'NOT_FOUND',
      'UNAUTHORIZED',
      'INSUFFICIENT_SCOPE',
      'UNAVAILABLE',
    ] as const) {
      expect(codes, code).toContain(code);
    }
  });

  it('lists INSUFFICIENT_SCOPE only where some token lacks the scope (every token reads)', () => {
    expect(operationErrorCodes('/v1/things', { security: needs('read') })).not.toContain(
      'INSUFFICIENT_SCOPE',
    );
    expect(operationErrorCodes('/v1/things', { security: needs('admin') })).toContain(
      'INSUFFICIENT_SCOPE',
    );
  });

  it('lists the Idempotency-Key conflicts on the POSTs under /v1 only', () => {
    const post = operationErrorCodes('/v1/things', { requestBody: {} }, 'post');
    expect(post).toContain('IDEMPOTENCY_KEY_REUSED');
    expect(post).toContain('IDEMPOTENCY_KEY_IN_USE');
    expect(operationErrorCodes('/v1/things', {}, 'get')).not.toContain('IDEMPOTENCY_KEY_REUSED');
    expect(operationErrorCodes('/hooks/delivery', { requestBody: {} }, 'post')).not.toContain(
      'IDEMPOTENCY_KEY_REUSED',
    );
  });

  it('judges no callback body: a hook is not refused as bad JSON', () => {
    const codes = operationErrorCodes('/hooks/delivery', { requestBody: {} });
    expect(codes).toContain('PAYLOAD_TOO_LARGE');
    expect(codes).not.toContain('MALFORMED_JSON');
    expect(codes).not.toContain('INVALID_ENCODING');
  });

  it("adds and removes a route's own codes", () => {
    const codes = operationErrorCodes('/v1/things/{id}', {
      parameters: [{ in: 'path' }],
      ...errorCodes({ also: ['CONFLICT'], never: ['NOT_FOUND'] }),
    });
    expect(codes).toContain('CONFLICT');
    expect(codes).not.toContain('NOT_FOUND');
  });
});

describe('withErrorResponses', () => {
  it('writes one response per status, its error.code an enum of that status codes', () => {
    const doc = withErrorResponses({
      paths: {
        '/v1/things': {
          post: {
            requestBody: {},
            security: needs('send'),
            responses: { 202: { description: 'queued' }, 400: envelope('bad thing') },
            ...errorCodes({ also: ['CONFLICT'] }),
          },
        },
      },
    });
    const op: Json = doc.paths['/v1/things'].post;
    expect(op['x-declared-error-codes']).toBeUndefined();
    const listed: string[] = op['x-error-codes'];
    expect(listed).toContain('CONFLICT');
    expect(listed.every((c) => (ERROR_CODES as readonly string[]).includes(c))).toBe(true);
    const statuses = [...new Set(listed.map((c) => httpStatus(c as never)))].map(String);
    expect(Object.keys(op.responses).sort()).toEqual(['202', ...statuses].sort());
    expect(op.responses['400']?.description).toMatch(/^bad thing \(VALIDATION_ERROR/);
    const { schema } = op.responses['409'].content['application/json'];
    expect(schema.allOf[0]).toEqual({ $ref: '#/components/schemas/Error' });
    expect(schema.allOf[1].properties.error.properties.code.enum).toEqual([
      'CONFLICT',
      'IDEMPOTENCY_KEY_REUSED',
      'IDEMPOTENCY_KEY_IN_USE',
    ]);
  });

  it('refuses a documented error status that none of the codes answers with', () => {
    const doc = {
      paths: {
        '/v1/things': { get: { security: needs('read'), responses: { 409: envelope('x') } } },
      },
    };
    expect(() => withErrorResponses(doc)).toThrow(/GET \/v1\/things documents a 409/);
  });
});
