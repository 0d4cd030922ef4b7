/**
 * Health checks of a tunnel's local service, run by the client: a TCP connect, or an HTTP GET
 * expecting a status. After `fall` failures in a row the service counts as down and the client
 * tells the daemon, which stops sending visitors to this route (another route of the port takes
 * them); after `rise` successes in a row it is up again.
 *
 * @example
 * ```ts ignore
 * import { HealthMonitor } from "./health_check.ts";
 * const monitor = new HealthMonitor("127.0.0.1:3000", { check: { kind: "http", path: "/healthz" } },
 *   (healthy, detail) => console.log(healthy ? "up" : `down: ${detail}`));
 * monitor.start();
 * ```
 *
 * @module
 */

import { nodeBuiltin } from "../../util/host/host.ts";
import { formatHostPort, parseHostPort } from "../../util/net/address.ts";

/** What is checked. */
export type HealthCheck =
  | { kind: "tcp" }
  | {
    kind: "http";
    /** The path to GET. */
    path: string;
    /** The expected status; default: any 2xx or 3xx. */
    status?: number;
  };

/** How a tunnel's local service is checked. */
export interface HealthOptions {
  /** The check. */
  check: HealthCheck;
  /** Between two checks, ms. Default 5000. */
  intervalMs?: number;
  /** A check slower than this fails, ms. Default 2000. */
  timeoutMs?: number;
  /** Failures in a row before the service counts as down. Default 3. */
  fall?: number;
  /** Successes in a row before it counts as up again. Default 2. */
  rise?: number;
}

/** Runs one check of `local`; resolves with why it failed, or undefined when it passed. */
export function probe(
  local: string,
  check: HealthCheck,
  timeoutMs: number,
): Promise<string | undefined> {
  const { hostname, port } = parseHostPort(local);
  if (check.kind === "http") {
    const url = `http://${formatHostPort(hostname, port)}${check.path}`;
    return fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: "manual" }).then(
      async (response) => {
        await response.body?.cancel();
        const ok = check.status !== undefined
          ? response.status === check.status
          : response.status >= 200 && response.status < 400;
        return ok ? undefined : `GET ${check.path} answered ${response.status}`;
      },
      (error: Error) => `GET ${check.path}: ${error.message}`,
    );
  }
  return new Promise((resolve) => {
    // node:net on first use: most clients have no health check, and loading it costs Deno's start.
    const socket = nodeBuiltin("node:net").connect({ host: hostname, port });
    const timer = setTimeout(() => finish(`no connection within ${timeoutMs} ms`), timeoutMs);
    const finish = (failure: string | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(failure);
    };
    socket.once("connect", () => finish(undefined));
    socket.once("error", (error) => finish(`connect: ${error.message}`));
  });
}

/** Checks a local service now and then and reports when it goes down or comes back up. */
export class HealthMonitor {
  /** Whether the service counts as up (it does until `fall` checks failed). */
  healthy = true;
  /** Why the last failed check failed. */
  detail: string | undefined;
  readonly #local: string;
  readonly #options: Required<HealthOptions>;
  readonly #onChange: (healthy: boolean, detail: string | undefined) => void;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #failures = 0;
  #successes = 0;
  #stopped = true;

  /** A monitor of `local`; call {@linkcode start}. */
  constructor(
    local: string,
    options: HealthOptions,
    onChange: (healthy: boolean, detail: string | undefined) => void,
  ) {
    this.#local = local;
    this.#options = {
      intervalMs: 5_000,
      timeoutMs: 2_000,
      fall: 3,
      rise: 2,
      ...options,
    };
    this.#onChange = onChange;
  }

  /** Starts checking (the first check at once). */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    void this.#run();
  }

  /** Stops checking. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  async #run(): Promise<void> {
    if (this.#stopped) return;
    const failure = await probe(this.#local, this.#options.check, this.#options.timeoutMs);
    if (this.#stopped) return;
    if (failure === undefined) {
      this.#failures = 0;
      this.#successes++;
      if (!this.healthy && this.#successes >= this.#options.rise) this.#set(true, undefined);
    } else {
      this.#successes = 0;
      this.#failures++;
      this.detail = failure;
      if (this.healthy && this.#failures >= this.#options.fall) this.#set(false, failure);
    }
    this.#timer = setTimeout(() => void this.#run(), this.#options.intervalMs);
  }

  #set(healthy: boolean, detail: string | undefined): void {
    this.healthy = healthy;
    this.#onChange(healthy, detail);
  }
}
