/**
 * The node flags `npm start` gives the server, read from its script in package.json, so that
 * the bench and the tests that run the server as a process run it exactly as `npm start`
 * does: `... && exec node <flags> dist/main.js`.
 */
import { readFileSync } from 'node:fs';

export function startFlags(): string[] {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    scripts: { start: string };
  };
  const m = pkg.scripts.start.match(/\bexec node\b(.*?)\bdist\/main\.js\b/);
  if (!m)
    throw new Error(`package.json's start script does not run dist/main.js: ${pkg.scripts.start}`);
  return m[1]!.split(/\s+/).filter(Boolean);
}
