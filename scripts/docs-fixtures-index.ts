/**
 * Writes test/provider/docs/INDEX.json: for each JSON example of the provider's public
 * documentation pages that the contract fixtures cover (every ```json block, and every
 * `curl ... -d '...'` body), the page, line, section and the fixture(s) copied from it; then
 * the pages with no JSON example at all, and why; the fixtures copied from elsewhere (code
 * samples, the published help site); then what was judged not to be a concrete JSON example,
 * and why.
 *
 * Reads the pages from a git mirror of smsbat/help at a fixed commit, and the fixtures'
 * `.meta.json` files. Before writing, it checks each fixture taken mechanically from a block
 * (the block itself, a curl body, the block without its first line or its comments, one part
 * of a block split by comments) against the block with the meta's placeholder fills applied:
 * a fixture that is not a faithful copy fails the run.
 *
 * @example
 * npx tsx scripts/docs-fixtures-index.ts            # check, then write INDEX.json
 * npx tsx scripts/docs-fixtures-index.ts --check    # check, and compare with INDEX.json
 * npx tsx scripts/docs-fixtures-index.ts --mirror /path/to/smsbat+help/repo
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

export const COMMIT = 'bc0d1145b40b581c623d4f573054d17eecf108f6';
export const DEFAULT_MIRROR = '/work/.mirror/smsbat+help/repo';

/** The pages the fixtures cover. */
export const PAGES = [
  'docs/api/smsbat/index.md',
  'docs/api/smsbat/send-message.md',
  'docs/api/smsbat/sms.md',
  'docs/api/smsbat/status.md',
  'docs/api/smsbat/viber.md',
  'docs/api/smsbat/rcs.md',
  'docs/api/smsbat/flashcall.md',
  'docs/api/cascade/index.md',
  'docs/api/cascade/send.md',
  'docs/api/cascade/message-types.md',
  'docs/api/cascade/variables.md',
  'docs/api/chathub/index.md',
  'docs/api/chathub/authentication.md',
  'docs/api/chathub/organizations.md',
  'docs/api/chathub/operators.md',
  'docs/api/chathub/widget.md',
] as const;

/**
 * Pages of PAGES with no JSON example at all (no ```json block, no curl body), and why: each
 * must have none, and every other page must have some.
 */
export const NO_EXAMPLES = [
  {
    page: 'docs/api/chathub/widget.md',
    why: 'an HTML script tag and JavaScript, Vue and TypeScript code: the one provider body it builds (get-token in "Server-Side Token Generation") is made from variables, and the JSON it answers is the reader\'s own server\'s',
  },
] as const;

/**
 * Code samples judged not to be concrete JSON examples: their bodies are built by code
 * (from variables, parameters, loops, the clock or the environment), or they repeat, in
 * another language's syntax, a body already copied.
 */
export const NOT_COPIED = [
  {
    where: 'docs/api/smsbat/index.md, docs/api/cascade/index.md "Authentication"',
    what: 'curl ... -d @request.json',
    why: 'the body is a file the page does not show',
  },
  {
    where:
      'docs/api/smsbat/status.md "Check Multiple Messages", "Polling ...", "Implementation Examples", "Best Practices", "Use Cases"',
    what: 'JavaScript, Python, PHP and Node.js samples',
    why: "they read status records (fields named, no record shown) and build no body; the records they read are the page's json blocks",
  },
  {
    where: 'docs/api/smsbat/flashcall.md "Web (Server-Side)"',
    what: "JSON.stringify({messages: [{from: 'YourApp', to: phoneNumber, ...}]})",
    why: 'to and callerId are variables (phoneNumber, process.env.FLASH_CALL_NUMBER); the same message with literal values is the curl body of "2. Request Flash Call"',
  },
  {
    where: 'docs/api/smsbat/flashcall.md "Android", "iOS", "6. Verify Pattern", "Permissions"',
    what: 'Kotlin, Swift, JavaScript, XML',
    why: 'no provider body',
  },
  {
    where: 'docs/api/cascade/send.md "Python", "PHP" (usage)',
    what: "send_message(tracking_id='order-12345', ...), sendMessage('order-12345', ...)",
    why: 'the same message as the JavaScript usage (cascade/send/js-usage-send-message), in Python keyword arguments and PHP positional ones',
  },
  {
    where:
      'docs/api/cascade/send.md "Python", "JavaScript (Node.js)", "PHP": scheduled and bulk sends',
    what: 'scheduledSent from datetime.now()/Date.now(); bulk messages from a loop (toPhone +38011111111{i})',
    why: 'values computed by code',
  },
  {
    where: 'docs/api/cascade/send.md "Retry Logic"',
    what: 'sendWithRetry(message)',
    why: 'no body',
  },
  {
    where: 'docs/api/cascade/message-types.md "Implementation Example"',
    what: "builder.buildTransaction('order-123', 'Store', '+380XXXXXXXXX', 'Order confirmed') and the others",
    why: 'bodies built by functions from positional arguments and default ttls, not literals',
  },
  {
    where: 'docs/api/cascade/variables.md "Python", "PHP" (usage)',
    what: 'variables = [...]; send_with_variables(...), sendWithVariables(...)',
    why: 'the same upload and message as the JavaScript usage (cascade/variables/js-usage-upload, js-usage-send)',
  },
  {
    where: 'docs/api/cascade/variables.md "Advanced Patterns"',
    what: 'sendBulkPersonalized, MessageTemplate',
    why: 'bodies built by loops and string replacement',
  },
  {
    where:
      'docs/api/cascade/variables.md "Step 2", "Complete Example" (**Result:**, **Delivered Message:**) and the `// Result` part of each "Use Cases" block',
    what: 'the delivered text',
    why: 'what the provider delivers (with short URLs of its own), not a body; kept as docsResult in the meta of the message it belongs to',
  },
  {
    where: 'docs/api/chathub/authentication.md "Implementation Examples" (Python, JavaScript, PHP)',
    what: "get_company_token('login', 'password'), get_operator_token(operator_id=123, expires_days=30), validate_token(operator_token) and their JavaScript and PHP twins",
    why: "bodies built by methods from arguments; expiresAt is computed from the clock (30 days ahead, past the 24-hour limit the same page states) and the token is the one just issued; the literal bodies of these calls are the page's curl bodies",
  },
  {
    where:
      'docs/api/chathub/authentication.md "Error Handling", "Token Validation", "HTTPS Only", "Rate Limiting"',
    what: 'authenticateWithRetry, performSecureOperation, baseUrl, RateLimitedAuth',
    why: 'no body',
  },
  {
    where: 'docs/api/chathub/operators.md "Python", "PHP" (usage)',
    what: "add_operators([{'organizationId': 24, 'name': 'John Doe'}, ...]), $manager->addOperators([['organizationId' => 24, ...], ...])",
    why: 'the same two operators as the JavaScript usage (chathub/operators/js-usage-add-operators), in Python and PHP syntax',
  },
  {
    where: 'docs/api/chathub/operators.md "Python", "JavaScript (Node.js)", "PHP"',
    what: 'change_operator_status(104, 1), changeOperatorStatus(104, 0), ...',
    why: 'bodies built from positional arguments; the same bodies, literal, are the curl bodies of "Example: Deactivate Operator" and "Example: Reactivate Operator"',
  },
  {
    where:
      'docs/api/chathub/operators.md "Common Use Cases", "Best Practices", "Duplicate Operators"',
    what: 'onboardOperators, importOperatorsFromCSV, addOperatorsSafely, validateOperatorData, addUniqueOperators, ...',
    why: 'bodies built by maps, loops and filters from data the page does not show, or no body',
  },
  {
    where: 'docs/api/chathub/organizations.md "Implementation Examples" and below',
    what: 'Python, JavaScript and PHP organization lookups; the `6: Customer Support` output',
    why: "GET requests with no body; they read the list that is the page's json block; the output is plain text printed from it",
  },
] as const;

export interface Block {
  page: string;
  /** 1-based line of the opening fence */
  line: number;
  lang: string;
  /** headings above the block, below the page title, joined with " > " */
  section: string;
  /** `json` block, or a shell block holding `curl ... -d '...'` */
  form: 'json' | 'curl-d';
  /** the block's lines, with the fence's indentation removed */
  body: string[];
}

export function readPage(mirror: string, page: string): string {
  return execFileSync('git', ['-C', mirror, 'show', `${COMMIT}:${page}`], { encoding: 'utf8' });
}

/** Every fenced block of a page, with its line and section. */
export function scanPage(text: string, page: string): Block[] {
  const lines = text.split('\n');
  const heads: string[] = [];
  const out: Block[] = [];
  let cur: (Omit<Block, 'form'> & { indent: number }) | undefined;
  lines.forEach((l, i) => {
    const fence = l.match(/^(\s*)```(\S*)\s*$/);
    const heading = l.match(/^(#{1,6}) (.*)$/);
    if (!cur && heading) {
      const level = heading[1]!.length;
      heads.length = level - 1;
      heads[level - 1] = heading[2]!;
    }
    if (fence && !cur) {
      cur = {
        page,
        line: i + 1,
        lang: fence[2] ?? '',
        section: heads.filter(Boolean).slice(1).join(' > '),
        body: [],
        indent: fence[1]!.length,
      };
    } else if (fence && cur) {
      const { indent: _indent, ...block } = cur;
      const curl = block.body.some((b) => /-d '/.test(b));
      if (block.lang === 'json' || curl) out.push({ ...block, form: curl ? 'curl-d' : 'json' });
      cur = undefined;
    } else if (cur) {
      const lead = l.match(/^\s*/)![0].length;
      cur.body.push(l.slice(Math.min(cur.indent, lead)));
    }
  });
  return out;
}

/** The JSON examples of every page: json blocks and curl bodies. */
export function scanPages(mirror: string): Block[] {
  return PAGES.flatMap((page) => scanPage(readPage(mirror, page), page));
}

interface Fill {
  placeholder: string;
  value: string;
  in?: string;
}

interface Meta {
  source: {
    file?: string;
    url?: string;
    line?: number;
    section?: string;
    extract?: string;
    part?: number;
    literalLine?: number;
  };
  kind: string;
  fills: Fill[];
}

/** The JSON text a fixture was taken from, by the meta's `extract`; undefined when by hand. */
export function extractText(block: Block, extract: string, part?: number): string | undefined {
  const text = block.body.join('\n');
  switch (extract) {
    case 'block':
      return text;
    case 'curl-d':
      return text.match(/-d '([\s\S]*?)'\s*$/m)?.[1];
    case 'drop-first-line':
      return block.body.slice(1).join('\n');
    case 'json-with-comments':
      return text.replace(/^\s*\/\/.*$\n?/gm, '').replace(/,(\s*[}\]])/g, '$1');
    case 'comment-part':
      return text
        .split(/^\/\/ .*$/m)
        .map((s) => s.trim())
        .filter(Boolean)[part ?? 0];
    default:
      return undefined;
  }
}

function walk(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) walk(path, out);
    else if (e.name.endsWith('.meta.json')) out.push(path);
  }
  return out;
}

export function buildIndex(mirror: string, docsDir: string) {
  const blocks = scanPages(mirror);
  const metas = walk(docsDir)
    .map((path) => ({
      name: relative(docsDir, path).slice(0, -'.meta.json'.length),
      meta: JSON.parse(readFileSync(path, 'utf8')) as Meta,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
  const problems: string[] = [];
  const key = (page: string, line: number) => `${page}:${line}`;
  const byBlock = new Map(blocks.map((b) => [key(b.page, b.line), b]));
  const fixturesOf = new Map<string, string[]>();
  const other: { source: string; section?: string; fixtures: string[] }[] = [];

  for (const { name, meta } of metas) {
    const s = meta.source;
    const block =
      s.file !== undefined && s.line !== undefined ? byBlock.get(key(s.file, s.line)) : undefined;
    if (s.url !== undefined || s.extract === 'code-literal') {
      const source = s.url ?? `${s.file}:${s.literalLine ?? s.line}`;
      const entry = other.find((o) => o.source === source);
      if (entry) entry.fixtures.push(name);
      else other.push({ source, ...(s.section && { section: s.section }), fixtures: [name] });
      continue;
    }
    if (!block) {
      problems.push(`${name}: ${s.file}:${s.line} is not a JSON block or curl body of the pages`);
      continue;
    }
    if (s.section !== block.section) {
      problems.push(`${name}: section "${s.section}", but the block is under "${block.section}"`);
    }
    fixturesOf.set(key(block.page, block.line), [
      ...(fixturesOf.get(key(block.page, block.line)) ?? []),
      name,
    ]);
    const raw = extractText(block, s.extract ?? 'block', s.part);
    if (raw === undefined) {
      problems.push(`${name}: nothing to extract by ${s.extract}`);
      continue;
    }
    let text = raw;
    for (const f of meta.fills.filter((f) => f.in === undefined))
      text = text.split(f.placeholder).join(f.value);
    const fixture = JSON.parse(readFileSync(join(docsDir, `${name}.json`), 'utf8')) as unknown;
    let copied: unknown;
    try {
      copied = JSON.parse(text);
    } catch (err) {
      problems.push(
        `${name}: the block does not parse as JSON after the fills: ${(err as Error).message}`,
      );
      continue;
    }
    if (!isDeepStrictEqual(copied, fixture))
      problems.push(`${name}: differs from ${s.file}:${s.line}`);
  }

  const withBlocks = new Set(blocks.map((b) => b.page));
  const without = new Set<string>(NO_EXAMPLES.map((n) => n.page));
  for (const page of PAGES) {
    if (!withBlocks.has(page) && !without.has(page))
      problems.push(`${page} has no JSON example, and NO_EXAMPLES does not say why`);
    if (withBlocks.has(page) && without.has(page))
      problems.push(`${page} is in NO_EXAMPLES, but has JSON examples`);
  }

  const entries = blocks.map((b) => {
    const fixtures = fixturesOf.get(key(b.page, b.line)) ?? [];
    if (fixtures.length === 0) problems.push(`${b.page}:${b.line} (${b.section}) has no fixture`);
    return { page: b.page, line: b.line, form: b.form, section: b.section, fixtures };
  });
  const index = {
    about:
      'The JSON examples of the provider documentation pages and the fixtures copied from them; written by scripts/docs-fixtures-index.ts.',
    repo: 'smsbat/help',
    commit: COMMIT,
    pages: PAGES,
    blocks: entries,
    pagesWithoutExamples: NO_EXAMPLES,
    other,
    notCopied: NOT_COPIED,
  };
  return { index, problems };
}

function main(argv: string[]): number {
  const mirrorAt = argv.indexOf('--mirror');
  const mirror = mirrorAt >= 0 ? argv[mirrorAt + 1]! : DEFAULT_MIRROR;
  const docsDir = fileURLToPath(new URL('../test/provider/docs/', import.meta.url));
  const target = join(docsDir, 'INDEX.json');
  if (!existsSync(mirror)) {
    console.error(`no mirror of smsbat/help at ${mirror} (pass --mirror <git dir>)`);
    return 2;
  }
  const { index, problems } = buildIndex(mirror, docsDir);
  for (const p of problems) console.error(p);
  if (problems.length > 0) return 1;
  if (argv.includes('--check')) {
    const same =
      existsSync(target) &&
      isDeepStrictEqual(
        JSON.parse(readFileSync(target, 'utf8')),
        JSON.parse(JSON.stringify(index)),
      );
    console.log(same ? 'INDEX.json is current' : 'INDEX.json is out of date: run without --check');
    return same ? 0 : 1;
  }
  writeFileSync(target, `${JSON.stringify(index, null, 2)}\n`);
  // in the repository's JSON style (biome), so that `npm run check` stays clean
  const biome = fileURLToPath(new URL('../node_modules/.bin/biome', import.meta.url));
  if (existsSync(biome)) execFileSync(biome, ['format', '--write', target], { stdio: 'ignore' });
  const count = index.blocks.reduce((n, b) => n + b.fixtures.length, 0);
  console.log(
    `${index.blocks.length} blocks (${count} fixtures), ${index.other.length} other sources: ${relative(process.cwd(), target)}`,
  );
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = main(process.argv.slice(2));
}
