/**
 * The receiving end of part (g): a user's endpoint as the Standard Webhooks specification
 * describes one. Every request is verified with the `standardwebhooks` package (the secret
 * from SECRET) and appended to LOG as one line, `<webhook-id> <received ms> <event timestamp
 * ms> <body sha256>`, before the 204, so a receiver killed mid-run (SIGKILL) has written
 * everything it acknowledged. A bad signature is logged as `invalid ...` and answered 400.
 * Run as a child of `npm run bench` (PORT=0 or a port to take again after a restart).
 */
import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secret = process.env.SECRET ?? '';
const log = process.env.LOG ?? '';
if (!secret || !log) throw new Error('event-receiver: SECRET and LOG are required');
const webhook = new Webhook(secret);

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const id = String(req.headers['webhook-id'] ?? '');
    try {
      const event = webhook.verify(body, {
        'webhook-id': id,
        'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
        'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
      }) as { timestamp: string };
      const sha = createHash('sha256').update(body).digest('hex').slice(0, 16);
      appendFileSync(log, `${id} ${Date.now()} ${Date.parse(event.timestamp)} ${sha}\n`);
      res.writeHead(204).end();
    } catch (err) {
      appendFileSync(log, `invalid ${id} ${err instanceof Error ? err.message : String(err)}\n`);
      res.writeHead(400).end();
    }
  });
});
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  console.log(JSON.stringify({ port, msg: 'listening' }));
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
