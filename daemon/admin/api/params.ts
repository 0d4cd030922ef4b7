/**
 * Validation of path and query parameters. A malformed id is a 400 (the caller's mistake), kept
 * apart from a well-formed id that names nothing (404), so scripts can tell a typo from a race.
 *
 * @module
 */

import { ApiError } from "./errors.ts";

const SESSION_ID = /^s[1-9]\d{0,15}$/;
const STREAM_ID = /^[1-9]\d{0,9}$/;
const TUNNEL_ID = /^t-[0-9a-f]{1,64}$/;

/** The largest yamux stream id (32 bits). */
const MAX_STREAM_ID = 0xffff_ffff;

/** Checks a session id (`s` and a number); throws a 400 ApiError otherwise. */
export function sessionId(value: string | undefined): string {
  if (value === undefined || !SESSION_ID.test(value)) {
    throw new ApiError(400, "bad_request", "a session id looks like s12");
  }
  return value;
}

/** Checks a stream id (a positive 32-bit integer); throws a 400 ApiError otherwise. */
export function streamId(value: string | undefined): number {
  const id = value !== undefined && STREAM_ID.test(value) ? Number(value) : NaN;
  if (!(id >= 1 && id <= MAX_STREAM_ID)) {
    throw new ApiError(400, "bad_request", "a stream id is a positive integer below 2^32");
  }
  return id;
}

/** Checks a tunnel id (`t-` and hex digits); throws a 400 ApiError otherwise. */
export function tunnelId(value: string | undefined): string {
  if (value === undefined || !TUNNEL_ID.test(value)) {
    throw new ApiError(400, "bad_request", "a tunnel id looks like t-1a2b");
  }
  return value;
}

/** A page request: at most `limit` items after `cursor` (exclusive). */
export interface PageRequest {
  /** Items per page. */
  limit: number;
  /** The last session id of the previous page, if any. */
  cursor: string | undefined;
}

/** Default and largest page sizes. */
export const PAGE_DEFAULT = 100;
const PAGE_MAX = 1000;

/** Reads `limit` (1..1000, default 100) and `cursor` (a session id) from the query. */
export function sessionPage(query: Record<string, string | undefined>): PageRequest {
  let limit = PAGE_DEFAULT;
  if (query.limit !== undefined) {
    limit = /^\d{1,4}$/.test(query.limit) ? Number(query.limit) : NaN;
    if (!(limit >= 1 && limit <= PAGE_MAX)) {
      throw new ApiError(400, "bad_request", `limit must be an integer from 1 to ${PAGE_MAX}`);
    }
  }
  const cursor = query.cursor === undefined ? undefined : sessionId(query.cursor);
  return { limit, cursor };
}

/** The numeric part of a session id, for ordering (`s10` after `s9`). */
export function sessionNumber(id: string): number {
  return Number(id.slice(1));
}

/** The largest drain grace period accepted, one hour. */
const MAX_GRACE_MS = 3_600_000;

/**
 * Validates a drain request body: empty, or a JSON object with at most an integer `graceMs` in
 * 0..3600000. Unknown keys are refused, as in the config, so a typo does not silently default.
 */
export function drainRequest(body: unknown): { graceMs?: number } {
  if (body === undefined) return {};
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ApiError(400, "bad_request", "the body must be a JSON object");
  }
  const unknown = Object.keys(body).filter((key) => key !== "graceMs");
  if (unknown.length > 0) {
    throw new ApiError(400, "bad_request", `unknown field ${JSON.stringify(unknown[0])}`);
  }
  const { graceMs } = body as { graceMs?: unknown };
  if (graceMs === undefined) return {};
  if (
    !Number.isSafeInteger(graceMs) || (graceMs as number) < 0 || graceMs as number > MAX_GRACE_MS
  ) {
    throw new ApiError(400, "bad_request", `graceMs must be an integer from 0 to ${MAX_GRACE_MS}`);
  }
  return { graceMs: graceMs as number };
}
