/**
 * Compile time of a generated flow that unrolls to 200 provider menus (the default limit):
 * checks, unrolling, menu template, machine config and version hash. Goal: under 50 ms.
 *
 * Run alone: `npx tsx bench/compile.ts`.
 *
 * @example
 * const { menus, ms } = benchCompile(); // { menus: 200, ms: 12.3, ... }
 */
import { pathToFileURL } from 'node:url';
import {
  type Action,
  compileFlow,
  createFlowMachine,
  type FlowDefinition,
  renderMenu,
  signNodeToken,
} from '../src/flows/index.ts';

/**
 * A flow of 50 menus in a tree (three children each), every menu with one retry and a
 * "press * to go back" cycle to its parent: 50 menus x 2 attempts x 2 rounds = 200.
 */
export function generateFlow(): FlowDefinition {
  const count = 50;
  const menus: FlowDefinition['menus'] = {};
  for (let i = 0; i < count; i++) {
    const keys: Record<string, Action[]> = {
      '0': [
        { outcome: `done-${i}` },
        {
          send: {
            type: 'sms',
            text: { en: `Thanks {{name}}, menu ${i}`, uk: `Дякуємо {{name}}, меню ${i}` },
          },
        },
        { webhook: { url: `https://crm.example.com/menus/${i}`, body: { order: '{{order}}' } } },
        'hangup',
      ],
    };
    for (let c = 1; c <= 3; c++) {
      const child = i * 3 + c;
      if (child < count) keys[String(c)] = [{ outcome: `went-${child}` }, { goto: `m${child}` }];
    }
    if (i > 0) keys['*'] = [{ goto: `m${Math.floor((i - 1) / 3)}` }];
    menus[`m${i}`] = {
      intro: {
        en: `https://cdn.example.com/en/m${i}.mp3`,
        uk: `https://cdn.example.com/uk/m${i}.mp3`,
      },
      reprompt: `https://cdn.example.com/again-${i}.mp3`,
      timeout: '8s',
      retries: 1,
      keys,
      wrong: [{ outcome: 'no-input' }, 'hangup'],
    };
  }
  return {
    title: 'Generated',
    params: { name: 'string', order: 'string' },
    languages: ['en', 'uk'],
    menus,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export interface CompileBench {
  /** Provider menus after unrolling. */
  menus: number;
  /** Median milliseconds of one `compileFlow`. */
  ms: number;
  runs: number;
  /** Median milliseconds to render one call's menu (tokens signed). */
  renderMs: number;
  /** Milliseconds to build the xstate machine once (done per flow version, not per call). */
  machineMs: number;
  goalMs: number;
}

export function benchCompile(runs = 15): CompileBench {
  const definition = generateFlow();
  const opts = { maxVisits: 2 };
  for (let i = 0; i < 3; i++) compileFlow({ id: 'generated', definition }, opts); // warm up
  const times: number[] = [];
  let compiled = compileFlow({ id: 'generated', definition }, opts);
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    compiled = compileFlow({ id: 'generated', definition }, opts);
    times.push(performance.now() - start);
  }
  const secret = { id: 'bench', key: 'bench-secret' };
  const renders: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    renderMenu(compiled, {
      vars: { name: 'Ann', order: 'A-1' },
      lang: 'uk',
      hookUrl: 'https://sb.example.com/hooks/speechcall',
      tokenFor: (node, key) => signNodeToken({ callId: `call-${i}`, node, key }, secret),
    });
    renders.push(performance.now() - start);
  }
  const machineStart = performance.now();
  createFlowMachine(compiled);
  const machineMs = performance.now() - machineStart;
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    menus: compiled.menuCount,
    ms: round(median(times)),
    runs,
    renderMs: round(median(renders)),
    machineMs: round(machineMs),
    goalMs: 50,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const result = benchCompile();
  console.log(
    `compile: ${result.menus} menus in ${result.ms} ms (median of ${result.runs}; goal < ${result.goalMs} ms); ` +
      `render one call: ${result.renderMs} ms; build machine: ${result.machineMs} ms`,
  );
  process.exitCode = result.ms < result.goalMs ? 0 : 1;
}
