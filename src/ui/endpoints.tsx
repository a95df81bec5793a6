/**
 * The console's event endpoint pages, mounted by src/ui/routes.tsx under its sign-in and
 * same-origin check: `/ui/endpoints` (the list), `/ui/endpoints/{id}` (facts and recent
 * attempts, `cursor` for older ones), `POST /ui/endpoints/{id}/replay` (`since`: replay what
 * failed since then) and `POST /ui/events/{id}/replay` (`endpoint`: one event again to it).
 * The posts answer with a redirect back to the endpoint's page saying what was queued.
 *
 * @example
 * app.route('/', endpointPages({ db, clock, page }));
 */
import { type Context, Hono } from 'hono';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/client.ts';
import { listAttempts } from '../events/attempts.ts';
import { getEndpoint, listEndpoints } from '../events/endpoints.ts';
import { replayEvent, replayFailed } from '../events/replay.ts';
import type { AppEnv } from '../http/env.ts';
import type { RenderPage } from './layout.tsx';
import { EndpointPage, EndpointsList } from './pages/endpoints.tsx';

/** A `datetime-local` value (no zone: the console's times are UTC). */
const LOCAL_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/;

function formString(form: Record<string, unknown>, name: string): string {
  const v = form[name];
  return typeof v === 'string' ? v.trim() : '';
}

/** What the redirect after a replay says, read back from its query. */
function noticeOf(c: Context): { error: boolean; text: string } | undefined {
  if (c.req.query('error') === 'since') {
    return { error: true, text: 'Give the time as a date and a time (UTC).' };
  }
  const n = c.req.query('replayed');
  if (n === undefined || !/^\d+$/.test(n)) return undefined;
  const more = c.req.query('more') === '1' ? ' More matched: replay again for the next ones.' : '';
  return {
    error: false,
    text: `Queued ${n} ${n === '1' ? 'delivery' : 'deliveries'} again; they go out within seconds.${more}`,
  };
}

export function endpointPages(deps: { db: Db; clock: Clock; page: RenderPage }) {
  const { db, clock, page } = deps;
  const app = new Hono<AppEnv>();
  const back = (id: string, query: string) =>
    `/ui/endpoints/${encodeURIComponent(id)}${query ? `?${query}` : ''}`;

  app.get('/endpoints', async (c) =>
    page(
      c,
      'Endpoints',
      'endpoints',
      <EndpointsList items={await listEndpoints(db, clock.now())} />,
    ),
  );

  app.get('/endpoints/:id', async (c) => {
    const now = clock.now();
    const endpoint = await getEndpoint(db, c.req.param('id'), now);
    const attempts = await listAttempts(db, endpoint.id, {
      limit: 50,
      cursor: c.req.query('cursor') || undefined,
    });
    const since = new Date(now.getTime() - 24 * 3_600_000).toISOString().slice(0, 16);
    return page(
      c,
      `Endpoint ${endpoint.name ?? endpoint.id}`,
      'endpoints',
      <EndpointPage
        endpoint={endpoint}
        attempts={attempts.items}
        olderCursor={attempts.nextCursor}
        notice={noticeOf(c)}
        since={since}
      />,
    );
  });

  app.post('/endpoints/:id/replay', async (c) => {
    const endpoint = await getEndpoint(db, c.req.param('id'), clock.now());
    const since = formString(await c.req.parseBody(), 'since');
    const at = LOCAL_TIME.test(since) ? new Date(`${since}Z`) : undefined;
    if (!at || Number.isNaN(at.getTime())) return c.redirect(back(endpoint.id, 'error=since'), 303);
    const done = await replayFailed({ db, clock }, endpoint.id, at);
    return c.redirect(
      back(endpoint.id, `replayed=${done.requeued}${done.more ? '&more=1' : ''}`),
      303,
    );
  });

  app.post('/events/:id/replay', async (c) => {
    const endpoint = formString(await c.req.parseBody(), 'endpoint') || undefined;
    const done = await replayEvent({ db, clock }, { eventId: c.req.param('id'), endpoint });
    const to = done.requeued[0]?.endpointId;
    if (endpoint === undefined || to === undefined) return c.redirect('/ui/endpoints', 303);
    return c.redirect(back(to, `replayed=${done.requeued.length}`), 303);
  });

  return app;
}
