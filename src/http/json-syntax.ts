/**
 * Where a JSON text first breaks, and why, in words for people: the line and column (both
 * from 1) of the first character JSON.parse cannot take. Node's own messages say "at
 * position N" for some errors only ("Unexpected token 'x', ... is not valid JSON" says no
 * position, "Unexpected end of JSON input" neither), so the text is scanned here, once,
 * and only after JSON.parse has refused it. Iterative: any nesting depth is scanned without
 * recursion.
 *
 * @example
 * jsonSyntaxError('{\n  "a": 1,\n}')
 * // { line: 3, column: 1, reason: 'a property name in double quotes must come here' }
 */

export interface JsonSyntaxError {
  line: number;
  column: number;
  /** what is wrong there, e.g. "a ',' or '}' must come here" */
  reason: string;
}

const WS = new Set([' ', '\t', '\n', '\r']);
const ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const HEX4 = /[0-9a-fA-F]{4}/y;

/** Line and column (from 1, in UTF-16 units as JavaScript counts) of an offset. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    start = i + 1;
  }
  return { line, column: offset - start + 1 };
}

/** The first syntax error of `text`, or undefined when it is valid JSON. */
export function jsonSyntaxError(text: string): JsonSyntaxError | undefined {
  const at = scan(text);
  return at && { ...lineColumn(text, at.offset), reason: at.reason };
}

type Expect = 'value' | 'key' | 'colon' | 'comma-or-end' | 'first-key-or-end' | 'first-or-end';

function scan(text: string): { offset: number; reason: string } | undefined {
  let i = 0;
  const stack: ('{' | '[')[] = [];
  let expect: Expect = 'value';
  const fail = (reason: string) => ({ offset: i, reason });
  const skip = () => {
    while (i < text.length && WS.has(text[i]!)) i++;
  };
  const string = (): { offset: number; reason: string } | undefined => {
    i++; // the opening quote
    while (i < text.length) {
      const c = text[i]!;
      if (c === '"') {
        i++;
        return undefined;
      }
      if (c === '\\') {
        const e = text[i + 1];
        if (e === 'u') {
          HEX4.lastIndex = i + 2;
          if (!HEX4.test(text)) return fail('a \\u escape takes four hex digits');
          i += 6;
        } else if (e !== undefined && ESCAPES.has(e)) i += 2;
        else return fail('not an escape JSON knows (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)');
        continue;
      }
      if (c < ' ') return fail('a control character (a raw line break or tab) inside a string');
      i++;
    }
    return fail('the string is not closed: a double quote is missing');
  };
  for (;;) {
    skip();
    if (i >= text.length) {
      if (stack.length === 0 && expect === 'comma-or-end') return undefined;
      return fail(
        stack.length > 0
          ? `the text ends before the ${stack.at(-1) === '{' ? "object's '}'" : "list's ']'"}`
          : 'the body is empty: a JSON value must come here',
      );
    }
    const c = text[i]!;
    const top = stack.at(-1);
    switch (expect) {
      case 'first-key-or-end':
      case 'key':
        if (c === '}' && expect === 'first-key-or-end') {
          stack.pop();
          i++;
          expect = 'comma-or-end';
          continue;
        }
        if (c !== '"') return fail('a property name in double quotes must come here');
        {
          const bad = string();
          if (bad) return bad;
        }
        expect = 'colon';
        continue;
      case 'colon':
        if (c !== ':') return fail("a ':' must follow the property name");
        i++;
        expect = 'value';
        continue;
      case 'comma-or-end':
        if (top === undefined) return fail('nothing may follow the JSON value');
        if (c === ',') {
          i++;
          expect = top === '{' ? 'key' : 'value';
          continue;
        }
        if ((c === '}' && top === '{') || (c === ']' && top === '[')) {
          stack.pop();
          i++;
          expect = 'comma-or-end';
          continue;
        }
        return fail(top === '{' ? "a ',' or '}' must come here" : "a ',' or ']' must come here");
      case 'first-or-end':
        if (c === ']') {
          stack.pop();
          i++;
          expect = 'comma-or-end';
          continue;
        }
        break;
      case 'value':
        break;
    }
    // a value
    if (c === '{') {
      stack.push('{');
      i++;
      expect = 'first-key-or-end';
    } else if (c === '[') {
      stack.push('[');
      i++;
      expect = 'first-or-end';
    } else if (c === '"') {
      const bad = string();
      if (bad) return bad;
      expect = 'comma-or-end';
    } else if (text.startsWith('true', i) || text.startsWith('null', i)) {
      i += 4;
      expect = 'comma-or-end';
    } else if (text.startsWith('false', i)) {
      i += 5;
      expect = 'comma-or-end';
    } else {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      if (!m) {
        return fail(
          c === ']' || c === '}' || c === ','
            ? `a value must come before '${c}' (a trailing comma?)`
            : 'a value must come here: an object, a list, a string in double quotes, a number, true, false or null',
        );
      }
      i += m[0].length;
      expect = 'comma-or-end';
    }
  }
}
