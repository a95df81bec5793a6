/**
 * A flow's history against the database (src/calls/flow-history.ts) where the HTTP test
 * (test/http/flow-versions.test.ts) does not reach: versions pinned before their source was
 * kept (migration 0012), counters counted before they were kept per version and language, a
 * file with no call yet, a file gone; and the compiled menus' diff on its own.
 */
import { describe, expect, it } from 'vitest';
import {
  diffFlowVersions,
  flowVersionDetail,
  listFlowVersions,
  resolveFlowVersion,
} from '../../src/calls/flow-history.ts';
import { flowStatsOf } from '../../src/calls/read.ts';
import { flowStats, flowVersions } from '../../src/db/schema/index.ts';
import { type LoadedFlow, parseFlowSource } from '../../src/flows/index.ts';
import { diffCompiledMenus } from '../../src/flows/menu-diff.ts';
import { uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const OLD = `languages: [en]
params:
  name: string
menus:
  main:
    intro: "https://cdn.example.com/en/old.mp3"
    timeout: 8s
    keys:
      "1": [ { outcome: confirmed }, hangup ]
    wrong: [ { outcome: no-input }, hangup ]
`;

const NEW = `languages: [en, uk]
params:
  name: string
  date: string
menus:
  main:
    intro: { en: "https://cdn.example.com/en/new.mp3", uk: "https://cdn.example.com/uk/new.mp3" }
    timeout: 5s
    keys:
      "1": [ { outcome: confirmed }, hangup ]
      "2": [ { outcome: declined }, hangup ]
    wrong: [ { outcome: no-input }, hangup ]
`;

function load(
  id: string,
  source: string,
): LoadedFlow & { compiled: NonNullable<LoadedFlow['compiled']> } {
  const flow = parseFlowSource(source, `flows/${id}.yaml`);
  if (!flow.compiled) throw new Error(JSON.stringify(flow.errors));
  return flow as LoadedFlow & { compiled: NonNullable<LoadedFlow['compiled']> };
}

describe('diffCompiledMenus', () => {
  it('names each change of a node: intro per language, timeout, keys; and params and languages', () => {
    const d = diffCompiledMenus(load('f', OLD).compiled, load('f', NEW).compiled);
    expect(d.added).toEqual([]);
    expect(d.removed).toEqual([]);
    expect(d.changed.map((c) => c.node)).toEqual(['main']);
    const main = d.changed[0]!;
    expect(main.intro?.en).toEqual({
      from: 'https://cdn.example.com/en/old.mp3',
      to: 'https://cdn.example.com/en/new.mp3',
    });
    expect(main.intro?.uk).toEqual({ from: null, to: 'https://cdn.example.com/uk/new.mp3' });
    expect(main.timeoutMs).toEqual({ from: 8000, to: 5000 });
    expect(Object.keys(main.keys ?? {})).toEqual(['2']);
    expect(main.keys?.['2']?.from).toBeNull();
    expect(d.params.added).toEqual(['date']);
    expect(d.languages).toEqual({ added: ['uk'], removed: [] });
  });

  it('finds nothing between a version and itself', () => {
    const d = diffCompiledMenus(load('f', NEW).compiled, load('f', NEW).compiled);
    expect(d.changed).toEqual([]);
    expect(d.unchanged).toBe(load('f', NEW).compiled.nodes.length);
  });
});

describeEachEngine('flow history in the database', (ctx) => {
  it('keeps a version pinned before 0012 without source, and counters from before apart', async () => {
    const db = ctx.database().db;
    const id = uniq('hist');
    const old = load(id, OLD);
    const file = load(id, NEW);
    // as 0012 leaves them: a version with no source, counters with version and language ''
    await db.insert(flowVersions).values({
      flowId: id,
      version: old.compiled.version,
      compiled: old.compiled,
      createdAt: new Date('2026-01-01T00:00:00Z'),
    });
    await db.insert(flowStats).values([
      { flowId: id, metric: 'started', subject: '', count: 3 },
      { flowId: id, metric: 'outcome', subject: 'confirmed', count: 2 },
      {
        flowId: id,
        version: old.compiled.version,
        lang: 'en',
        metric: 'started',
        subject: '',
        count: 4,
      },
      {
        flowId: id,
        version: old.compiled.version,
        lang: 'en',
        metric: 'outcome',
        subject: 'confirmed',
        count: 1,
      },
    ]);

    const list = await listFlowVersions(db, id, file);
    expect(list.current).toBe(file.compiled.version);
    expect(list.unversioned).toEqual({ started: 3 });
    expect(list.items.map((v) => [v.version, v.current, v.runs, v.hasSource, v.started])).toEqual([
      [file.compiled.version, true, false, true, 0],
      [old.compiled.version, false, true, false, 4],
    ]);
    expect(list.items[1]).toMatchObject({
      firstRunAt: '2026-01-01T00:00:00.000Z',
      lastCallAt: null,
      outcomes: { confirmed: 1 },
    });

    const detail = await flowVersionDetail(db, id, old.compiled.version, file);
    expect(detail).toMatchObject({
      source: null,
      current: false,
      menus: ['main'],
      languages: ['en'],
    });

    const diff = await diffFlowVersions(db, id, old.compiled.version, 'current', file);
    expect(diff.source.patch).toBeNull();
    expect(diff.source.note).toContain(old.compiled.version);
    expect(diff.from.hasSource).toBe(false);
    expect(diff.menus.changed.map((c) => c.node)).toEqual(['main']);
    // the old counters are the old version's only; '' counts are in no version
    expect(diff.stats.started).toEqual({ from: 4, to: 0 });
    expect(diff.stats.outcomes.confirmed).toEqual({
      from: { count: 1, share: 0.25 },
      to: { count: 0, share: null },
    });
    expect(diff.stats.languages.en?.started).toEqual({ from: 4, to: 0 });
    expect(diff.stats.languages.uk?.started).toEqual({ from: 0, to: 0 });

    // the unfiltered sum still holds the counts from before 0012
    expect((await flowStatsOf(db, id)).started).toBe(7);
    expect((await flowStatsOf(db, id, { version: old.compiled.version })).started).toBe(4);
    expect((await flowStatsOf(db, id, { version: '' })).started).toBe(3);
  });

  it('keeps a version after its file is gone, and then has no current one', async () => {
    const db = ctx.database().db;
    const id = uniq('gone');
    const old = load(id, OLD);
    await db.insert(flowVersions).values({
      flowId: id,
      version: old.compiled.version,
      compiled: old.compiled,
      source: OLD,
    });
    const list = await listFlowVersions(db, id, undefined);
    expect(list.current).toBeNull();
    expect(list.items.map((v) => [v.version, v.current, v.hasSource])).toEqual([
      [old.compiled.version, false, true],
    ]);
    expect((await resolveFlowVersion(db, id, old.compiled.version, undefined)).source).toBe(OLD);
    await expect(resolveFlowVersion(db, id, 'current', undefined, 'to')).rejects.toMatchObject({
      code: 'UNKNOWN_FLOW_VERSION',
      details: [{ path: 'to', code: 'UNKNOWN_FLOW_VERSION' }],
    });
    await expect(listFlowVersions(db, uniq('never'), undefined)).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('answers for a version by its hash with the text it first ran with, for current with the file now', async () => {
    const db = ctx.database().db;
    const id = uniq('same');
    const file = load(id, NEW);
    const ran = `# a comment the compiled form does not see\n${NEW}`;
    await db.insert(flowVersions).values({
      flowId: id,
      version: file.compiled.version,
      compiled: file.compiled,
      source: ran,
    });
    expect((await resolveFlowVersion(db, id, file.compiled.version, file)).source).toBe(ran);
    expect((await resolveFlowVersion(db, id, 'current', file)).source).toBe(NEW);
    const diff = await diffFlowVersions(db, id, file.compiled.version, 'current', file);
    expect(diff.source.removed).toBe(1);
    expect(diff.source.added).toBe(0);
    expect(diff.menus.changed).toEqual([]);
  });
});
