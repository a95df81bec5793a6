/**
 * Reads the console needs beyond the API's own: the compiled flow a call is pinned to (its
 * diagram is that version's, whatever the file says now), and the prompts a call's menus play.
 */
import { and, eq } from 'drizzle-orm';
import type { FlowRegistry } from '../calls/registry.ts';
import type { Queryable } from '../db/client.ts';
import { flowVersions, messages } from '../db/schema/index.ts';
import { type CompiledFlow, type CompiledNode, renderTemplate } from '../flows/index.ts';

/**
 * The compiled flow of `flowId` at `version`: the file's, when it still compiles to that
 * version, else the stored copy; undefined when neither has it.
 *
 * @example
 * const compiled = await pinnedFlow(db, flows, call.flow, call.flowVersion);
 */
export async function pinnedFlow(
  db: Queryable,
  flows: FlowRegistry,
  flowId: string,
  version: string,
): Promise<CompiledFlow | undefined> {
  const current = (await flows.get(flowId))?.compiled;
  if (current?.version === version) return current;
  const [row] = await db
    .select({ compiled: flowVersions.compiled })
    .from(flowVersions)
    .where(and(eq(flowVersions.flowId, flowId), eq(flowVersions.version, version)));
  return row?.compiled as CompiledFlow | undefined;
}

/**
 * The intro of each menu of a call's speechcall message, by menu index, as it was sent to the
 * provider: a Switchboard prompt URL (PUBLIC_URL/prompts/…), recorded audio or a provider
 * audio id. Empty when the message is not stored or retention removed its content.
 *
 * @example
 * const intros = await callIntros(db, call.id); // ['https://sb.example/prompts/Xq….wav', 'ivr_1']
 */
export async function callIntros(db: Queryable, callId: string): Promise<string[]> {
  const [row] = await db
    .select({ payload: messages.payload })
    .from(messages)
    .where(and(eq(messages.callId, callId), eq(messages.role, 'call')))
    .limit(1);
  const menu = (row?.payload as { menu?: unknown } | undefined)?.menu;
  if (!Array.isArray(menu)) return [];
  return menu.map((item) => {
    const url = (item as { introUrl?: unknown } | null)?.introUrl;
    return typeof url === 'string' ? url : '';
  });
}

/**
 * The same-origin path of a Switchboard prompt URL (`/prompts/{id}.wav`), so the console plays
 * it from wherever it is served whatever PUBLIC_URL says; undefined for any other intro.
 */
export function promptPath(introUrl: string): string | undefined {
  if (!URL.canParse(introUrl)) return undefined;
  const { pathname } = new URL(introUrl);
  return /^\/prompts\/[A-Za-z0-9_-]+\.[a-z0-9]{1,5}$/.test(pathname) ? pathname : undefined;
}

/**
 * The words a node's spoken intro says in a call (its text with the call's vars): the
 * transcript shown beside the audio. Undefined for recorded audio or an unknown node.
 *
 * @example
 * spokenWords(node, 'en', { name: 'Ann' }) // 'Hello Ann, press 1 to confirm.'
 */
export function spokenWords(
  node: CompiledNode | undefined,
  lang: string,
  vars: Readonly<Record<string, unknown>>,
): string | undefined {
  const intro = node && (node.intro[lang] ?? Object.values(node.intro)[0]);
  return intro === undefined || typeof intro === 'string'
    ? undefined
    : renderTemplate(intro.say, vars);
}
