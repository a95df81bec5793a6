#!/usr/bin/env node
/**
 * `npm run build` (and the first half of `npm start`): every module of src/ to plain
 * JavaScript in dist/, one file each, in the same layout, with source maps. esbuild strips
 * the types and nothing else: no bundling, packages stay imports of node_modules.
 *
 * Why `npm start` runs built files rather than tsx: tsx compiles through Node's module hooks,
 * which run on a loader thread of their own with its own V8 heap, ~45 MB of the server's
 * ~160 MB at rest. Building takes a fraction of a second. `npm run dev` keeps tsx (it watches).
 *
 * dist/ must sit beside src/ (a module's paths to files outside it, such as db/migrate.ts's
 * `../../migrations`, are relative to it), and the console's static files are copied along.
 * The build is written beside it and swapped in whole, so a server starting meanwhile (the
 * bench, tests, a second `npm start`) never finds dist/ half written.
 */
import { cp, rename, rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Sources import each other as `./x.ts`; the built files import `./x.js`, built beside. */
const relativeTs = {
  name: 'relative-ts',
  setup(b) {
    b.onResolve({ filter: /^\.\.?\/.*\.tsx?$/ }, (args) => ({
      path: args.path.replace(/\.tsx?$/, '.js'),
      external: true,
    }));
  },
};

const out = `${root}/dist`;
const next = `${out}.${process.pid}.tmp`;
await build({
  absWorkingDir: root,
  entryPoints: ['src/**/*.ts', 'src/**/*.tsx'],
  outdir: next,
  outbase: 'src',
  // "bundle" only so that the plugin sees every import; each one is external
  bundle: true,
  packages: 'external',
  plugins: [relativeTs],
  format: 'esm',
  platform: 'node',
  target: 'node20',
  jsx: 'automatic',
  jsxImportSource: 'hono/jsx',
  sourcemap: true,
  logLevel: 'warning',
});
await cp(`${root}/src/ui/assets`, `${next}/ui/assets`, { recursive: true });
const old = `${out}.${process.pid}.old`;
await rename(out, old).catch((err) => {
  if (err.code !== 'ENOENT') throw err;
});
await rename(next, out).catch(async (err) => {
  // another build swapped its own in meanwhile: built from the same sources, it serves
  if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
  await rm(next, { recursive: true, force: true });
});
await rm(old, { recursive: true, force: true });
