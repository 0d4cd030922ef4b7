/**
 * Test support: waiting, always bounded. {@linkcode waitFor} polls a condition (every few
 * milliseconds, or once per event-loop turn with `intervalMs: 0`) a bounded number of times;
 * {@linkcode withTimeout} turns a hang into a failure. Nothing here asserts on durations.
 *
 * @module
 */

/** Default bound of every wait in the test support, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 15_000;

/** Options of {@linkcode waitFor}. */
export interface WaitOptions {
  /** Give up after about this long (default {@linkcode DEFAULT_TIMEOUT_MS}). */
  timeoutMs?: number;
  /**
   * Pause between polls (default 25 ms); 0 polls once per event-loop turn. The number of polls is
   * `tries`, or else timeout / interval.
   */
  intervalMs?: number;
  /** How many polls at most (default `timeoutMs / intervalMs`; needed when `intervalMs` is 0). */
  tries?: number;
  /** Says what was awaited, for the timeout error. */
  message?: string;
}

/**
 * Polls `condition` until it returns a truthy value (returned) or the bounded number of polls
 * (`tries`, or `timeoutMs / intervalMs`) is used up, then rejects. `what` is the options, or just
 * the message (what was awaited, for the timeout error). A throwing condition counts as falsy; its
 * last error is quoted on timeout.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  what: string | WaitOptions = {},
): Promise<NonNullable<T>> {
  const options = typeof what === "string" ? { message: what } : what;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const intervalMs = options.intervalMs ?? 25;
  const polls = options.tries ?? Math.max(1, Math.ceil(timeoutMs / Math.max(1, intervalMs)));
  let lastError: unknown;
  for (let i = 0; i < polls; i++) {
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    await sleep(intervalMs);
  }
  const detail = lastError ? ` (last error: ${(lastError as Error).message ?? lastError})` : "";
  const bound = options.tries === undefined ? `${timeoutMs} ms` : `${polls} polls`;
  throw new Error(`waitFor: ${options.message ?? "condition"} not met in ${bound}${detail}`);
}

/**
 * Options for conditions that in-process code makes true within a few event-loop turns (an
 * in-memory transport, a session and its peer in one process): poll once per turn, at most 5000
 * times. Spread them: `waitFor(check, { ...EACH_TURN, message: "..." })`.
 */
export const EACH_TURN: Readonly<WaitOptions> = { intervalMs: 0, tries: 5000 };

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Rejects with `message` if `promise` does not settle within `timeoutMs`. */
export function withTimeout<T>(
  promise: Promise<T>,
  timeoutMs: number,
  message: string,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out after ${timeoutMs} ms: ${message}`)),
      timeoutMs,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
