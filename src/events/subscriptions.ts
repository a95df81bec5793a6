/**
 * Which event types at least one enabled endpoint wants, kept in memory: the one check the
 * hot paths (delivery callbacks, the dispatcher, speech webhooks) make before they add
 * anything for events. With no endpoint, `wants` is a Set lookup and nothing else happens.
 *
 * One cache per database handle (a WeakMap), loaded at first use and refreshed:
 * - at once after `changed()`: the endpoints store calls it after each write it committed,
 *   and every instance's workers when the `endpoints_changed` trigger notifies them (a change
 *   made on another instance, src/workers.ts);
 * - otherwise every REFRESH_MS in the background, which bounds the wait should a
 *   notification be missed (docs/events.md).
 *
 * While it does not know (before its first load, and from `changed()` until the refresh
 * after it has read the table), `wants` answers true: the statement then decides in SQL
 * (src/events/record.ts writes only what an enabled endpoint wants), so nothing is lost at
 * start-up or right after an endpoint is made; it costs a few statements an extra part.
 *
 * The timer is unref'd (it never keeps a process alive) and holds the handle weakly (a
 * closed test database is collected, and its timer stops with it); a failed refresh keeps
 * the set it had.
 *
 * @example
 * const subs = subscriptionsOf(db);
 * if (subs.wants('message.status')) parts.push(messageStatusEvents(...));
 */
import { sql } from 'drizzle-orm';
import { type Db, rowsOf } from '../db/client.ts';

/** How often each process reads the endpoints table again on its own. */
export const REFRESH_MS = 5_000;

export interface Subscriptions {
  /** whether some enabled endpoint wants `type` (true while unknown); synchronous */
  wants(type: string): boolean;
  /** the endpoints changed: read them again now (until then, `wants` answers true) */
  changed(): void;
  /** resolves once the set is loaded (tests, and a start that wants to know) */
  ready(): Promise<void>;
}

interface State {
  /** every type some enabled endpoint wants; null: not known (answer true) */
  types: Set<string> | null;
  /** some enabled endpoint wants every type (event_types null) */
  all: boolean;
  /** bumped by changed(): a refresh started before it may have read the old table */
  generation: number;
  loading: Promise<void> | undefined;
}

const caches = new WeakMap<Db, Subscriptions>();

/** The cache of `db` (made at first use). */
export function subscriptionsOf(db: Db): Subscriptions {
  let subs = caches.get(db);
  if (!subs) {
    subs = createSubscriptions(db);
    caches.set(db, subs);
  }
  return subs;
}

function createSubscriptions(db: Db): Subscriptions {
  const state: State = { types: null, all: false, generation: 0, loading: undefined };
  const handle = new WeakRef(db);
  let timer: NodeJS.Timeout | undefined;

  const load = (): Promise<void> => {
    if (state.loading) return state.loading;
    const target = handle.deref();
    if (!target) return Promise.resolve();
    const generation = state.generation;
    const run = (async () => {
      try {
        const rows = rowsOf<{ type: string | null }>(
          await target.execute(sql`
            select distinct t.type
            from endpoints e
            left join lateral unnest(e.event_types) as t(type) on true
            where e.enabled`),
        );
        // a changed() while reading: what was read may be older than the change
        if (generation !== state.generation) return;
        state.all = rows.some((r) => r.type === null);
        state.types = new Set(rows.flatMap((r) => (r.type === null ? [] : [r.type])));
      } catch {
        // a closed or unreachable database: keep what is known; the next refresh tries again
      } finally {
        state.loading = undefined;
      }
    })();
    state.loading = run;
    return run.then(() => {
      // a changed() came while that refresh ran: read once more
      if (state.types === null && generation !== state.generation) return load();
    });
  };

  const start = () => {
    if (timer) return;
    timer = setInterval(() => {
      if (!handle.deref()) {
        clearInterval(timer);
        return;
      }
      void load();
    }, REFRESH_MS);
    timer.unref();
  };

  return {
    wants(type) {
      if (state.types === null) {
        start();
        void load();
        return true;
      }
      return state.all || state.types.has(type);
    },
    changed() {
      state.generation++;
      state.types = null;
      start();
      void load();
    },
    async ready() {
      start();
      while (state.types === null && handle.deref()) {
        const before = state.generation;
        await load();
        // the database did not answer and nothing changed meanwhile: do not spin
        if (state.types === null && before === state.generation) return;
      }
    },
  };
}
