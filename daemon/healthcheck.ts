/**
 * `daemon healthcheck`: probes the admin API's `/readyz` and exits 0 on 200, 1 otherwise. Made for
 * container `HEALTHCHECK`s and supervisors, on images that have no curl: the daemon's own runtime
 * is the probe.
 *
 * @module
 */

import { formatHostPort, type HostPort } from "../util/net/address.ts";

/** Default bound on the whole probe; well under Docker's default healthcheck timeout (30 s). */
export const HEALTHCHECK_TIMEOUT_MS = 3_000;

/**
 * The URL to probe for an admin listener address: its `/readyz`. A wildcard bind (`0.0.0.0`,
 * `::`) is probed on the matching loopback address, which is both reachable from inside the
 * host or container and in the admin API's `Host` allowlist.
 */
export function readyzUrl(admin: HostPort): string {
  let host = admin.hostname;
  if (host === "0.0.0.0" || host === "") host = "127.0.0.1";
  else if (host === "::") host = "::1";
  return `http://${formatHostPort(host, admin.port)}/readyz`;
}

/** Outcome of {@linkcode probe}. */
export interface ProbeResult {
  /** True when the answer was 200. */
  ok: boolean;
  /** One line for the operator: the status, or why there was none. */
  detail: string;
}

/**
 * GETs `url` with a bounded timeout. Never throws: a refused connection, a timeout or any
 * status but 200 is a failed probe.
 */
export async function probe(
  url: string,
  timeoutMs: number = HEALTHCHECK_TIMEOUT_MS,
  fetchImpl: typeof fetch = fetch,
): Promise<ProbeResult> {
  try {
    const response = await fetchImpl(url, {
      signal: AbortSignal.timeout(timeoutMs),
      redirect: "manual",
    });
    // Drain the body so the connection is released before the process exits.
    const body = (await response.text()).slice(0, 200);
    const detail = `${url}: ${response.status}${body ? ` ${body}` : ""}`;
    return { ok: response.status === 200, detail };
  } catch (error) {
    const name = (error as Error)?.name;
    if (refused(error)) {
      return { ok: false, detail: `no daemon answering at ${origin(url)} (connection refused)` };
    }
    const reason = name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : describe(error);
    return { ok: false, detail: `${url}: ${reason}` };
  }
}

/**
 * Whether a fetch failed because nothing listens: each runtime says so its own way (Node an
 * `ECONNREFUSED` cause, Bun the code on the error, Deno the OS's words in the cause).
 */
function refused(error: unknown): boolean {
  for (
    let e = error as { code?: string; message?: string; cause?: unknown } | undefined, i = 0;
    e && i < 4;
    e = e.cause as typeof e, i++
  ) {
    if (e.code === "ECONNREFUSED" || /connection refused/i.test(e.message ?? "")) return true;
  }
  return false;
}

/** A fetch failure in words: its cause's, when the error itself only says "fetch failed". */
function describe(error: unknown): string {
  const e = error as { message?: string; cause?: { message?: string } } | undefined;
  return e?.cause?.message ?? e?.message ?? String(error);
}

/** `scheme://host:port` of `url`, or `url` itself if it does not parse. */
function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}
