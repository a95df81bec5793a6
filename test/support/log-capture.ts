/** A pino destination that keeps every line a logger writes (createLogger's second argument). */
export function captureLog() {
  const lines: string[] = [];
  return {
    lines,
    stream: { write: (s: string) => void lines.push(s) },
    text: () => lines.join(''),
  };
}
