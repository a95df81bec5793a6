/**
 * Checks on the console's own markup (regular expressions suffice: the pages are ours and
 * rendered by hono/jsx, so attributes are always double-quoted).
 */
import { expect } from 'vitest';

/** Values of `attr` on every element. */
export function attrs(html: string, attr: string): string[] {
  return [...html.matchAll(new RegExp(`\\s${attr}="([^"]*)"`, 'g'))].map((m) => m[1]!);
}

/** The text of a page with tags removed and entities of our own output decoded. */
export function text(html: string): string {
  return html
    .replace(/<script[\s\S]*?<\/script>/g, '')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ');
}

/**
 * What every console page must have: one h1 with `title`, landmarks, a language, labelled
 * form controls, and nothing loaded from or linked to another origin.
 */
export function expectConsolePage(html: string, title: string | RegExp): void {
  expect(html.startsWith('<!DOCTYPE html><html lang="en">')).toBe(true);
  expect(html).toContain('<html lang="en">');
  const h1 = [...html.matchAll(/<h1>([\s\S]*?)<\/h1>/g)];
  expect(h1).toHaveLength(1);
  expect(text(h1[0]![1]!).trim()).toMatch(title);
  expect(html).toMatch(/<main id="main"/);
  expect(html).toMatch(/<nav aria-label="Console">/);
  expect(html).toContain('href="#main"'); // skip link

  // every visible control has an id and a label for it
  const controls = [...html.matchAll(/<(input|select|textarea)\b([^>]*)>/g)].filter(
    (m) => !/type="hidden"/.test(m[2]!),
  );
  const labelled = new Set(attrs(html, 'for'));
  for (const [tag] of controls) {
    const id = tag.match(/\sid="([^"]+)"/)?.[1];
    expect(id, `control without id: ${tag}`).toBeDefined();
    expect(labelled.has(id!), `control without a label: ${tag}`).toBe(true);
  }
  // buttons have a name: text or aria-label
  for (const m of html.matchAll(/<button\b([^>]*)>([\s\S]*?)<\/button>/g)) {
    expect(/aria-label="[^"]+"/.test(m[1]!) || text(m[2]!).trim() !== '').toBe(true);
  }

  // same origin only: no absolute URL in any src, href or action, and no CSS or script from
  // elsewhere
  for (const url of [...attrs(html, 'src'), ...attrs(html, 'href'), ...attrs(html, 'action')]) {
    expect(url, `external URL ${url}`).toMatch(/^(\/(?!\/)|#|\?)/);
  }
  expect(html).not.toMatch(/<(script|link)[^>]+(src|href)="(https?:)?\/\//);
}
