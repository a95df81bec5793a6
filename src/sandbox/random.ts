/**
 * A small seeded PRNG (mulberry32), so shuffled callbacks and flash-call codes repeat
 * exactly in a test that fixes the seed.
 *
 * @example
 * const rand = createRandom(42);
 * rand.next(); // 0.6011037519201636, every time with seed 42
 */
export interface Random {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** `n` random decimal digits. */
  digits(n: number): string;
}

export function createRandom(seed: number = Date.now()): Random {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number): number => Math.floor(next() * n);
  return {
    next,
    int,
    digits: (n) => Array.from({ length: n }, () => String(int(10))).join(''),
  };
}
