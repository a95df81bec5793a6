/**
 * The flows a server knows: every flow file (`isFlowFile`: not `*.test.yaml`), loaded at start and re-read when a file
 * changes (checked by modification time when a flow is asked for), so editing a file affects
 * the next call without a restart. Calls already running stay on the version they pinned
 * (see `machineFor`).
 *
 * @example
 * const flows = createFlowRegistry('./flows');
 * const flow = await flows.get('appointment-reminder'); // LoadedFlow, or undefined
 */
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type CompiledFlow,
  type CompileOptions,
  createFlowMachine,
  type FlowMachine,
  flowIdOf,
  isFlowFile,
  type LoadedFlow,
  loadFlowFile,
} from '../flows/index.ts';

export interface FlowRegistry {
  /** every flow file, compiled or with its errors */
  list(): Promise<LoadedFlow[]>;
  get(id: string): Promise<LoadedFlow | undefined>;
  /** the machine of a compiled version (cached: building one costs more than a transition) */
  machineFor(compiled: CompiledFlow): FlowMachine;
}

export function createFlowRegistry(
  dir: string,
  opts: CompileOptions = {},
  hooks: {
    /** told of each flow compiled (at start and after a file changed): its prompts render */
    onCompiled?: (compiled: CompiledFlow) => void;
  } = {},
): FlowRegistry {
  const cache = new Map<string, { mtimeMs: number; flow: LoadedFlow }>();
  const machines = new Map<string, FlowMachine>();

  async function files(): Promise<string[]> {
    try {
      return (await readdir(dir)).filter(isFlowFile).sort();
    } catch {
      return []; // no flows directory: no flows
    }
  }

  async function load(file: string): Promise<LoadedFlow | undefined> {
    const path = join(dir, file);
    let mtimeMs: number;
    try {
      mtimeMs = (await stat(path)).mtimeMs;
    } catch {
      cache.delete(path);
      return undefined;
    }
    const hit = cache.get(path);
    if (hit && hit.mtimeMs === mtimeMs) return hit.flow;
    const flow = await loadFlowFile(path, opts);
    cache.set(path, { mtimeMs, flow });
    if (flow.compiled) hooks.onCompiled?.(flow.compiled);
    return flow;
  }

  const registry: FlowRegistry = {
    async list() {
      const out: LoadedFlow[] = [];
      for (const file of await files()) {
        const flow = await load(file);
        if (flow) out.push(flow);
      }
      return out;
    },
    async get(id) {
      for (const file of await files()) {
        if (flowIdOf(file) === id) return load(file);
      }
      return undefined;
    },
    machineFor(compiled) {
      const key = `${compiled.id}@${compiled.version}`;
      let machine = machines.get(key);
      if (!machine) {
        machine = createFlowMachine(compiled);
        if (machines.size > 200) machines.delete(machines.keys().next().value!);
        machines.set(key, machine);
      }
      return machine;
    },
  };
  return registry;
}
