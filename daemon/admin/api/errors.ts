/**
 * Errors of the admin API. Every failure, whether raised by an endpoint, a middleware or hono
 * itself, leaves as `{ "error": { "code", "message" } }` with a matching status: operators script
 * against the API, and an HTML page or a stack trace would be useless to them (and a leak).
 *
 * @module
 */

import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Logger } from "../../../util/log.ts";

/** Stable machine-readable error codes; clients may match on them. */
export type ApiErrorCode =
  | "bad_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "payload_too_large"
  | "misdirected"
  | "not_ready"
  | "node_unreachable"
  | "internal";

/** The code used for a status when nothing more specific was said. */
const CODE_BY_STATUS: Record<number, ApiErrorCode> = {
  400: "bad_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  409: "conflict",
  413: "payload_too_large",
  421: "misdirected",
  503: "not_ready",
};

/** An error an endpoint throws on purpose; its message is safe to show to the caller. */
export class ApiError extends Error {
  /** HTTP status. */
  readonly status: ContentfulStatusCode;
  /** Machine-readable code. */
  readonly code: ApiErrorCode;

  /** Creates an error answered with `status` and `{ error: { code, message } }`. */
  constructor(status: ContentfulStatusCode, code: ApiErrorCode, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The JSON error response. `headers` adds e.g. `WWW-Authenticate` or `Allow`. */
export function errorResponse(
  c: Context,
  status: ContentfulStatusCode,
  code: ApiErrorCode,
  message: string,
  headers?: Record<string, string>,
): Response {
  return c.json({ error: { code, message } }, status, headers);
}

/**
 * The app's `onError`: ApiErrors as they are, hono's HTTPExceptions (e.g. a malformed JSON body)
 * under their status, and anything else as a bare 500; the details go to the log only.
 */
export function onApiError(log: Logger): ErrorHandler {
  return (error, c) => {
    if (error instanceof ApiError) return errorResponse(c, error.status, error.code, error.message);
    if (error instanceof HTTPException && error.status < 500) {
      const status = error.status as ContentfulStatusCode;
      return errorResponse(c, status, CODE_BY_STATUS[status] ?? "bad_request", error.message);
    }
    log.error("admin API request failed", {
      method: c.req.method,
      path: c.req.path,
      detail: String(error),
    });
    return errorResponse(c, 500, "internal", "internal error");
  };
}

/** The app's `notFound`: unknown paths answer 404 in the same JSON shape. */
export const onNotFound: NotFoundHandler = (c) =>
  errorResponse(c, 404, "not_found", `no endpoint ${c.req.method} ${c.req.path}`);
