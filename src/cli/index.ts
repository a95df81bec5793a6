/**
 * The `switchboard` command line (package.json `bin`).
 *
 * @example
 * npx switchboard flows validate
 * npx switchboard send --to +380501234567 --from Acme --type sms --text "Hi"
 */
import { ConfigError } from '../config.ts';
import { type CliIo, processIo } from './io.ts';

const HELP = `Usage: switchboard <command> [options]

Commands:
  serve                         start the server (same as npm start)
  migrate                       apply the database migrations and exit
  flows validate [files...]     check flow files (exit 1 on any error)
  flows compile <id> [--var k=v] [--lang xx]   print a flow's provider menu JSON
  flows graph <id>              print a flow as a Mermaid diagram
  flows simulate <id> --keys 1,timeout,2       walk a flow by its machine and its menu
  flows test [ids...]           run the flows' test files (<id>.test.yaml); exit 1 on a failure
  flows replay <id> --file f --since 7d   replay stored calls through a changed flow (on the server)
  flows schema [--out file]     print the JSON Schema of the flow language
  send [flags | --file f]       send messages (one from flags, or a JSON/CSV file)
  call <flow> --to ... --from ... [--var k=v] [--wait]   start a call from a flow
  call <flow> --file calls.csv --from ...                start a batch of calls
  campaign create <flow> --from ... --file recipients.csv [--per-minute N ...]   start a campaign
  campaign status <id> [--wait] | pause | resume | cancel <id>   follow or steer a campaign
  campaign export <id> [--out results.csv]      a campaign's results as CSV
  tokens create --name NAME --scope read,send   make an API token (printed once)
  tokens list | tokens revoke <id>              list or revoke API tokens

Environment: see README.md (PORT, DATABASE_URL, DATA_DIR, PUBLIC_URL, PROVIDER_*, ...).
`;

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve': {
      const { runServe } = await import('./serve.ts');
      await runServe(io.env);
      return await new Promise<number>(() => {}); // runs until a signal ends the process
    }
    case 'migrate': {
      const { runMigrate } = await import('./migrate.ts');
      return runMigrate(io);
    }
    case 'flows': {
      const { runFlows } = await import('./flows.ts');
      return runFlows(rest, { stdout: io.stdout, stderr: io.stderr, cwd: io.cwd, env: io.env });
    }
    case 'send': {
      const { runSend } = await import('./send.ts');
      return runSend(rest, { stdout: io.stdout, stderr: io.stderr, env: io.env });
    }
    case 'call': {
      const { runCall } = await import('./call.ts');
      return runCall(rest, io);
    }
    case 'campaign': {
      const { runCampaign } = await import('./campaign.ts');
      return runCampaign(rest, io);
    }
    case 'tokens': {
      const { runTokens } = await import('./tokens.ts');
      return runTokens(rest, io);
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      io.stdout.write(HELP);
      return command === undefined ? 1 : 0;
    default:
      io.stderr.write(`switchboard: unknown command "${command}"\n\n${HELP}`);
      return 1;
  }
}

const io = processIo();
try {
  process.exitCode = await runCli(process.argv.slice(2), io);
} catch (err) {
  if (err instanceof ConfigError) {
    io.stderr.write(`switchboard: ${err.message}\n`);
    process.exitCode = 2;
  } else {
    io.stderr.write(`switchboard: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
