/**
 * Headers for the pages a browser renders (the console, the API docs): a content policy that
 * loads scripts, styles and images from this server only, no framing (clickjacking), no
 * referrer to other sites, no type sniffing. The JSON API and the hooks do without them.
 *
 * Styles allow 'unsafe-inline': the diagram's SVG (Mermaid) carries its own <style>.
 *
 * @example
 * app.use('/ui/*', pageHeaders());
 */
import { secureHeaders } from 'hono/secure-headers';

export function pageHeaders() {
  return secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'self'"],
      scriptSrc: ["'self'"],
      styleSrc: ["'self'", "'unsafe-inline'"],
      imgSrc: ["'self'", 'data:'],
      fontSrc: ["'self'", 'data:'],
      connectSrc: ["'self'"],
      objectSrc: ["'none'"],
      baseUri: ["'none'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
    },
    xFrameOptions: 'DENY',
    referrerPolicy: 'no-referrer',
  });
}
