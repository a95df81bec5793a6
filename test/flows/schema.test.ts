import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FlowDefinition, flowJsonSchema, parseDuration } from '../../src/flows/index.ts';
import { FLOWS_DIR } from './helpers.ts';

describe('the flow language schema', () => {
  it('is exported as the JSON Schema in flows/schema.json (npm run flows:schema)', () => {
    const committed = JSON.parse(readFileSync(`${FLOWS_DIR}/schema.json`, 'utf8'));
    expect(committed).toEqual(flowJsonSchema());
  });

  it('names its parts for editors and forbids unknown fields', () => {
    const schema = flowJsonSchema() as {
      $defs: Record<string, unknown>;
      properties: Record<string, unknown>;
      additionalProperties: boolean;
    };
    expect(Object.keys(schema.$defs)).toEqual(
      expect.arrayContaining(['Menu', 'Action', 'ActionList', 'SendMessage', 'Duration', 'Prompt']),
    );
    expect(Object.keys(schema.properties)).toEqual([
      '$schema',
      'title',
      'description',
      'params',
      'languages',
      'start',
      'menus',
      'on',
      'campaign',
      'assert',
    ]);
    expect(schema.additionalProperties).toBe(false);
    expect(JSON.stringify(schema.$defs.Menu)).toContain(
      '"propertyNames":{"type":"string","enum":["0","1","2","3","4","5","6","7","8","9","*","#"]}',
    );
  });

  it('accepts the smallest flow and refuses one without menus', () => {
    expect(FlowDefinition.safeParse({ menus: { main: { intro: 'x' } } }).success).toBe(true);
    expect(FlowDefinition.safeParse({ menus: {} }).success).toBe(false);
    expect(FlowDefinition.safeParse({ menus: { 'a/b': { intro: 'x' } } }).success).toBe(false);
  });

  it('reads durations', () => {
    expect([
      parseDuration('500ms'),
      parseDuration('8s'),
      parseDuration('1.5m'),
      parseDuration('2h'),
      parseDuration('1d'),
    ]).toEqual([500, 8000, 90_000, 7_200_000, 86_400_000]);
    expect(() => parseDuration('8')).toThrow();
  });
});
