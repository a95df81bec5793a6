/**
 * A `say:` prompt as pieces: its text split at the `{{params}}`, so the words written in the
 * flow are rendered once and shared by every call, and a call renders only what is its own.
 * "Hello {{name}}, your appointment is on {{date}}." is three pieces for the flow ("Hello",
 * ", your appointment is on", ".") and two for the call ("Maria", "the third of March"); the
 * served file is the pieces' audio joined (src/speech/audio.ts `joinAudio`), each piece's
 * silence trimmed to a short pause at its edges.
 *
 * Params next to each other, with only spaces or punctuation between them
 * ("{{first}} {{last}}"), are one piece, so a name is spoken as one phrase. Words with no
 * letter or digit ("." after the last param) are dropped: eSpeak says nothing for them.
 *
 * @example
 * promptPieces('Hello {{name}}, bye', { name: 'Maria' })
 * // [{ text: 'Hello', personal: false }, { text: 'Maria', personal: true }, { text: ', bye', personal: false }]
 */

/** One piece of a spoken prompt. */
export interface PromptPiece {
  text: string;
  /** filled in from the call's params: someone's details, removed with the call */
  personal: boolean;
}

const TEMPLATE = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;
/** Whether a text has anything to say: a letter or a digit, in any script. */
const SAYABLE = /[\p{L}\p{N}]/u;

/** The pieces of `template` with `vars` filled in, in order. */
export function promptPieces(
  template: string,
  vars: Readonly<Record<string, unknown>>,
): PromptPiece[] {
  const pieces: PromptPiece[] = [];
  // a no-word text after a param: joins it to the next param, or is dropped
  let joiner = '';
  let last = 0;
  const literal = (text: string) => {
    if (text === '') return;
    const previous = pieces[pieces.length - 1];
    if (!SAYABLE.test(text)) {
      if (previous?.personal) joiner += text;
      return;
    }
    joiner = '';
    pieces.push({ text, personal: false });
  };
  for (const m of template.matchAll(TEMPLATE)) {
    literal(template.slice(last, m.index));
    last = m.index + m[0].length;
    const value = vars[m[1]!];
    const text = value === undefined || value === null ? '' : String(value);
    if (!SAYABLE.test(text)) continue;
    const previous = pieces[pieces.length - 1];
    if (previous?.personal) previous.text += joiner + text;
    else pieces.push({ text, personal: true });
    joiner = '';
  }
  literal(template.slice(last));
  return pieces
    .map((p) => ({ text: p.text.trim(), personal: p.personal }))
    .filter((p) => p.text !== '');
}
