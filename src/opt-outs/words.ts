/**
 * Opt-out replies: an incoming message that is, as a whole, one of the opt-out words (STOP,
 * СТОП, ВІДПИСАТИСЯ...) asks not to be contacted again. Only the whole reply counts, so "please
 * stop calling me at night" is a message for a person, not an opt-out. Case, surrounding
 * spaces and punctuation (and emoji) around the word are ignored; the words come from
 * OPT_OUT_WORDS (src/config.ts), these are its default.
 *
 * @example
 * isOptOutReply(' Stop! ', DEFAULT_OPT_OUT_WORDS) // true
 * isOptOutReply('please stop calling me at night', DEFAULT_OPT_OUT_WORDS) // false
 */

export const DEFAULT_OPT_OUT_WORDS: readonly string[] = [
  'STOP',
  'STOP ALL',
  'UNSUBSCRIBE',
  'OPT OUT',
  'OPTOUT',
  // not CANCEL, END or QUIT: to an appointment reminder "cancel" is an answer, not an opt-out
  // Ukrainian (and the Russian spellings people still type)
  'СТОП',
  'ВІДПИСАТИСЯ',
  'ВІДПИСАТИСЬ',
  'ВІДПИСКА',
  'ОТПИСАТЬСЯ',
  'ОТПИСКА',
];

/**
 * A text as compared: upper case (locale-free), letters, digits and single spaces only;
 * apostrophes (Ukrainian uses them inside words) dropped rather than turned into spaces.
 */
export function normaliseReply(text: string): string {
  return text
    .normalize('NFKC')
    .toUpperCase()
    .replace(/['’ʼ`]/gu, '')
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

/** Whether the whole reply is one of `words` (not a word inside a sentence). */
export function isOptOutReply(text: string, words: readonly string[]): boolean {
  const reply = normaliseReply(text);
  if (reply === '') return false;
  return words.some((w) => normaliseReply(w) === reply);
}
