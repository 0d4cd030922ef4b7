/**
 * Checking a daemon URL before anything is dialed: a URL that cannot work fails at once with a
 * message that says what to write instead, rather than being retried forever.
 *
 * @module
 */

/** The schemes a daemon listens on. */
const SCHEMES = new Set(["tcp:", "tls:", "ws:", "wss:"]);

/**
 * Returns what is wrong with `url` as a daemon URL, or undefined when it is usable.
 *
 * @example
 * ```ts
 * import { serverUrlProblem } from "./server_url.ts";
 * console.assert(serverUrlProblem("tcp://127.0.0.1:7000") === undefined);
 * console.assert(serverUrlProblem("127.0.0.1:7000")?.includes("tcp://127.0.0.1:7000"));
 * ```
 */
export function serverUrlProblem(url: string): string | undefined {
  const example = "tcp://HOST:7000, tls://HOST:7000, ws://HOST:7080/tunnel or wss://HOST/tunnel";
  if (url.trim() === "") return `the daemon URL is empty: use ${example}`;
  if (/^[^/:]+:\d+$/.test(url) || /^\[[0-9a-fA-F:.]+\]:\d+$/.test(url)) {
    return `"${url}" has no scheme: write tcp://${url} (or ws://${url}/tunnel for the WebSocket port)`;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `"${url}" is not a URL: use ${example}`;
  }
  if (parsed.protocol === "http:" || parsed.protocol === "https:") {
    const ws = parsed.protocol === "http:" ? "ws" : "wss";
    const path = parsed.pathname === "/" ? "/tunnel" : parsed.pathname;
    return `"${url}" is an HTTP URL: the daemon's WebSocket listener is ${ws}://${parsed.host}${path}`;
  }
  if (!SCHEMES.has(parsed.protocol)) {
    return `unsupported scheme ${parsed.protocol} in "${url}": use ${example}`;
  }
  if (parsed.hostname === "") return `"${url}" has no host`;
  if ((parsed.protocol === "tcp:" || parsed.protocol === "tls:") && parsed.port === "") {
    return `"${url}" has no port: tcp:// and tls:// need one (the default listener is :7000)`;
  }
  return undefined;
}
