/**
 * Tracing off (no OTLP endpoint): every helper of src/tracing.ts is a plain call, and the
 * environment's OTEL_* variables decide when it turns on.
 */
import { describe, expect, it } from 'vitest';
import {
  activeLink,
  activeTraceparent,
  httpSpans,
  injectTraceHeaders,
  inSpan,
  linkFromTraceparent,
  tracingConfigured,
  tracingEnabled,
} from '../../src/tracing.ts';

describe('tracing off', () => {
  it('runs the work with no span and leaves headers alone', async () => {
    expect(tracingEnabled()).toBe(false);
    // no request-span middleware for the app to mount
    expect(httpSpans()).toBeUndefined();
    let given: unknown = 'unset';
    const out = await inSpan('x', {}, async (span) => {
      given = span;
      return 7;
    });
    expect(out).toBe(7);
    expect(given).toBeUndefined();
    const headers: Record<string, string> = {};
    injectTraceHeaders(headers);
    expect(headers).toEqual({});
    expect(activeLink()).toBeUndefined();
    expect(activeTraceparent()).toBeUndefined();
    expect(
      linkFromTraceparent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'),
    ).toBeUndefined();
  });

  it('turns on only with an OTLP endpoint, and OTEL_SDK_DISABLED wins', () => {
    expect(tracingConfigured({})).toBe(false);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(
      tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }),
    ).toBe(true);
    expect(
      tracingConfigured({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        OTEL_SDK_DISABLED: 'true',
      }),
    ).toBe(false);
    expect(
      tracingConfigured({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        OTEL_TRACES_EXPORTER: 'none',
      }),
    ).toBe(false);
  });
});
