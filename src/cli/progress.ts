/**
 * The progress bar of the commands that send many things (send, call): on stderr, only when
 * asked or when stderr is a terminal and the input is large.
 *
 * @example
 * const progress = createProgress(20_000, { stderr: process.stderr, unit: 'calls' });
 * progress.advance(1000); progress.stop();
 */
import cliProgress from 'cli-progress';

/** Inputs from this many items up get a progress bar on a terminal. */
export const PROGRESS_THRESHOLD = 1000;

export interface Progress {
  advance(n: number): void;
  stop(): void;
}

export function createProgress(
  total: number,
  opts: { stderr: NodeJS.WritableStream; unit: string; verb?: string; show?: boolean | undefined },
): Progress {
  const isTty = (opts.stderr as { isTTY?: boolean }).isTTY === true;
  const show = opts.show ?? (isTty && total >= PROGRESS_THRESHOLD);
  if (!show) return { advance() {}, stop() {} };
  const bar = new cliProgress.SingleBar(
    {
      stream: opts.stderr,
      format: `${opts.verb ?? 'sending'} [{bar}] {percentage}% | {value}/{total} ${opts.unit} | {duration_formatted}`,
      noTTYOutput: true,
      gracefulExit: false,
      hideCursor: isTty,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0);
  let stopped = false;
  return {
    advance: (n) => bar.increment(n),
    stop() {
      if (stopped) return;
      stopped = true;
      bar.stop();
    },
  };
}
