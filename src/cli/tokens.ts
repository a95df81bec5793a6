/**
 * `switchboard tokens`: make, list and revoke API tokens through a running Switchboard's API
 * (`/v1/tokens`, which needs the `admin` scope: API_TOKEN, or a token made with it). Never
 * through the database itself: the server that holds an embedded one is found through its
 * DATA_DIR lock (cli/io.ts switchboardTarget).
 *
 * `create` prints the new token alone on stdout (so `TOKEN=$(switchboard tokens create ...)`
 * works) and what it is on stderr; the token is shown this once.
 *
 * Exit codes: 0 done; 1 bad flags, server unreachable, or the request refused.
 *
 * @example
 * switchboard tokens create --name ci-deploy --scope send
 * switchboard tokens list
 * switchboard tokens revoke tok_3kVx2mQ9aLr8
 */
import { parseArgs } from 'node:util';
import { createTransport, ProviderError } from '../provider/http.ts';
import { type CliIo, describeError, switchboardTarget, unreachable } from './io.ts';

const HELP = `Usage:
  switchboard tokens create --name <name> --scope <read,send,admin>
  switchboard tokens list
  switchboard tokens revoke <id>

Scopes: read (every GET), send (messages and calls; can read), admin (erasure, flows,
settings, tokens, the audit log; can read). A token can give only scopes it has.

Options:
  --url <base>       Switchboard's address (default $SWITCHBOARD_URL, else the server
                     running on DATA_DIR's embedded database, else http://$HOST:$PORT,
                     localhost:3000 when unset)
  --token <token>    an admin token (default: the first of API_TOKEN)
  --json             print the API's answer as JSON
  -h, --help
`;

class UsageError extends Error {}

interface TokenView {
  id: string;
  name: string;
  scopes: string[];
  createdAt: string;
  createdBy: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

function flags(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      scope: { type: 'string', multiple: true },
      url: { type: 'string' },
      token: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

function table(items: TokenView[]): string {
  const rows = [
    ['ID', 'NAME', 'SCOPES', 'CREATED', 'BY', 'LAST USED', 'REVOKED'],
    ...items.map((t) => [
      t.id,
      t.name,
      t.scopes.join(','),
      t.createdAt,
      t.createdBy,
      t.lastUsedAt ?? '-',
      t.revokedAt ?? '-',
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export async function runTokens(argv: string[], io: CliIo): Promise<number> {
  let f: ReturnType<typeof flags>['values'];
  let positionals: string[];
  try {
    ({ values: f, positionals } = flags(argv));
  } catch (e) {
    io.stderr.write(`switchboard tokens: ${(e as Error).message}\n\n${HELP}`);
    return 1;
  }
  const [action, ...args] = positionals;
  if (f.help || action === undefined) {
    (f.help ? io.stdout : io.stderr).write(HELP);
    return f.help ? 0 : 1;
  }
  const { baseUrl, headers } = switchboardTarget(f, io.env);
  const transport = createTransport({ baseUrl, headers, timeoutMs: 30_000 });
  const print = (value: unknown, text: string) =>
    io.stdout.write(f.json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
  try {
    switch (action) {
      case 'create': {
        if (!f.name) throw new UsageError('--name is required');
        const scopes = (f.scope ?? []).flatMap((s) => s.split(',')).map((s) => s.trim());
        if (scopes.length === 0 || scopes.includes('')) {
          throw new UsageError('--scope is required: read, send, admin, or several (send,read)');
        }
        const res = await transport.request({
          method: 'POST',
          path: '/v1/tokens',
          json: { name: f.name, scopes },
          retry: false,
        });
        const made = res.json as { id: string; name: string; scopes: string[]; token: string };
        if (!f.json) {
          io.stderr.write(
            `created ${made.id} "${made.name}" (${made.scopes.join(', ')}); the token is shown this once:\n`,
          );
        }
        print(made, made.token);
        return 0;
      }
      case 'list': {
        const res = await transport.request({ method: 'GET', path: '/v1/tokens' });
        const { items } = res.json as { items: TokenView[] };
        print(items, items.length === 0 ? 'no tokens' : table(items));
        return 0;
      }
      case 'revoke': {
        const [id] = args;
        if (!id) throw new UsageError('name the token: switchboard tokens revoke <id>');
        const res = await transport.request({
          method: 'DELETE',
          path: `/v1/tokens/${encodeURIComponent(id)}`,
          retry: false,
        });
        const t = res.json as TokenView;
        print(t, `revoked ${t.id} "${t.name}" (since ${t.revokedAt})`);
        return 0;
      }
      default:
        throw new UsageError(`unknown action "${action}": create, list or revoke`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`switchboard tokens: ${e.message}\n\n${HELP}`);
    } else if (e instanceof ProviderError && e.kind === 'network') {
      io.stderr.write(`switchboard tokens: ${unreachable(baseUrl, e.message)}\n`);
    } else if (e instanceof ProviderError && e.status === 401 && !headers.Authorization) {
      io.stderr.write(
        `switchboard tokens: ${describeError(e.body)}\n  ${baseUrl} asks for an admin token: set API_TOKEN to the server's (or one made with the admin scope), or pass --token\n`,
      );
    } else if (e instanceof ProviderError) {
      io.stderr.write(`switchboard tokens: ${describeError(e.body)}\n`);
    } else {
      io.stderr.write(`switchboard tokens: ${(e as Error).message}\n`);
    }
    return 1;
  }
}
