/**
 * The yardstick for /hooks/delivery: a bare Hono app on @hono/node-server that reads a JSON
 * body and answers JSON, with no database, no logging and no middleware; and a GET that answers
 * JSON of its path parameter, the yardstick for reads' CPU per request. Run as a child of
 * `npm run bench` (PORT=0; it prints the port as the server does).
 */
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const app = new Hono();
app.post('/hooks/delivery', async (c) => {
  const body: unknown = await c.req.json();
  return c.json({ received: true, events: Array.isArray(body) ? body.length : 1 });
});
app.get('/v1/messages/:ref', (c) => c.json({ ref: c.req.param('ref'), status: 'delivered' }));

const server = serve(
  { fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: '127.0.0.1' },
  (info) => {
    console.log(JSON.stringify({ port: info.port, msg: 'listening' }));
  },
);
process.once('SIGTERM', () => server.close(() => process.exit(0)));
