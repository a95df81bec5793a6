/**
 * The source-level menu graph of a flow: which menu a list of actions continues in, and
 * which gotos close a cycle. Both the checks and the unroller read the graph from here, so
 * they agree on what "reachable" and "cycle" mean.
 */
import { type Action, FLOW_KEYS, type FlowDefinition } from './schema.ts';

/** The name of the first menu a flow plays. */
export function startMenu(flow: FlowDefinition): string {
  return flow.start ?? Object.keys(flow.menus)[0]!;
}

/** The actions that run: everything up to and including the first goto or hangup. */
export function effectiveActions(actions: readonly Action[]): Action[] {
  const end = actions.findIndex((a) => a === 'hangup' || (typeof a === 'object' && 'goto' in a));
  return end === -1 ? [...actions] : actions.slice(0, end + 1);
}

/** The goto target of an action list, if it continues in another menu. */
export function gotoOf(actions: readonly Action[]): string | undefined {
  const last = effectiveActions(actions).at(-1);
  return typeof last === 'object' && 'goto' in last ? last.goto : undefined;
}

/** Every action list of a menu, keys in emit order then `wrong`, with its path. */
export function menuLists(
  flow: FlowDefinition,
  menu: string,
): Array<{ key: string; path: Array<string | number>; actions: Action[] }> {
  const m = flow.menus[menu];
  if (!m) return [];
  const out: Array<{ key: string; path: Array<string | number>; actions: Action[] }> = [];
  for (const key of FLOW_KEYS) {
    const actions = m.keys?.[key];
    if (actions) out.push({ key, path: ['menus', menu, 'keys', key], actions });
  }
  if (m.wrong) out.push({ key: 'wrong', path: ['menus', menu, 'wrong'], actions: m.wrong });
  return out;
}

/** Goto targets of a menu, in emit order, without duplicates. */
export function successors(flow: FlowDefinition, menu: string): string[] {
  const out: string[] = [];
  for (const list of menuLists(flow, menu)) {
    const to = gotoOf(list.actions);
    if (to !== undefined && flow.menus[to] && !out.includes(to)) out.push(to);
  }
  return out;
}

/** Menus reachable from the start menu, in breadth-first order. */
export function reachableMenus(flow: FlowDefinition): string[] {
  const start = startMenu(flow);
  if (!flow.menus[start]) return [];
  const seen = [start];
  for (let i = 0; i < seen.length; i++) {
    for (const next of successors(flow, seen[i]!)) if (!seen.includes(next)) seen.push(next);
  }
  return seen;
}

/**
 * Gotos that close a cycle: `from -> to` where `to` is on the depth-first stack from the
 * start menu when `from` is expanded (a self-loop included). Without them the menu graph
 * is acyclic, which is what makes the unrolled copies a DAG.
 *
 * @example
 * backEdges(flow).has('reschedule>main') // true for "press * to go back"
 */
export function backEdges(flow: FlowDefinition): Set<string> {
  const back = new Set<string>();
  const onStack = new Set<string>();
  const done = new Set<string>();
  const visit = (menu: string): void => {
    onStack.add(menu);
    for (const next of successors(flow, menu)) {
      if (onStack.has(next)) back.add(edgeKey(menu, next));
      else if (!done.has(next)) visit(next);
    }
    onStack.delete(menu);
    done.add(menu);
  };
  const start = startMenu(flow);
  if (flow.menus[start]) visit(start);
  return back;
}

export function edgeKey(from: string, to: string): string {
  return `${from}>${to}`;
}
