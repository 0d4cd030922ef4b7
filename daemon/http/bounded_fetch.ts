/**
 * The fetch the daemon uses for what an identity provider serves (a JWKS, an OIDC discovery
 * document, token and userinfo answers): a deadline over the whole exchange, body included, a
 * bound on the body's size, and no redirect followed (a redirect is an error), so a provider
 * cannot make the daemon wait forever, hold unbounded memory, or fetch another origin.
 *
 * @module
 */

import { concat } from "../../util/bytes/bytes.ts";

/** Limits of {@linkcode boundedFetch}. */
export interface FetchBounds {
  /** Bodies larger than this are refused. */
  maxBytes: number;
  /** The whole exchange, the body read included, ends with an error after this long. */
  timeoutMs: number;
}

/**
 * Fetches `url` with `init` within `bounds`: the answer with its status and fields and the whole
 * body read into memory, or an error (too large, too slow, a redirect, a network failure).
 */
export async function boundedFetch(
  url: string | URL,
  init: RequestInit,
  bounds: FetchBounds,
): Promise<Response> {
  const deadline = AbortSignal.timeout(bounds.timeoutMs);
  const signal = init.signal ? AbortSignal.any([init.signal, deadline]) : deadline;
  const response = await fetch(url, { ...init, redirect: "manual", signal });
  if (response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400)) {
    await response.body?.cancel();
    throw new Error(`${new URL(url).origin} answered with a redirect, which is not followed`);
  }
  const reader = response.body?.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (reader) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > bounds.maxBytes) {
      await reader.cancel();
      throw new Error(`${new URL(url).origin} answered with over ${bounds.maxBytes} bytes`);
    }
    chunks.push(value);
  }
  // A status without a body (204, 304) may not be given one.
  const body = response.status === 204 || response.status === 304 ? null : concat(chunks);
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
