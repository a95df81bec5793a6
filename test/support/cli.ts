import { Writable } from 'node:stream';

/** A stream a CLI command writes to, and what it wrote. */
export function capture() {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}
