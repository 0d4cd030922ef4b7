/**
 * How a control request is answered: with its reply, or with a refusal, which is logged and sent
 * as an `error` carrying the request's id. The session makes one {@linkcode Answer} per request
 * and hands it to the request's handler (`expose.ts`, `offer.ts`, `health.ts`).
 *
 * @module
 */

import type { DaemonMessage } from "../../tunnel/control/control.ts";
import type { Logger } from "../../util/log.ts";

/** The error codes a control handler refuses a request with (the rest are the session's own). */
export type Refusal =
  | "not_allowed"
  | "limit_reached"
  | "not_found"
  | "conflict"
  | "shutting_down"
  | "port_in_use"
  | "unavailable";

/** One request's answer: a reply (`send`) or a refusal (`fail`). */
export interface Answer {
  /** Sends the reply (`ok`, `exposed`) as it is given. */
  send(message: DaemonMessage): void;
  /** Logs `<type> refused` with `code` and `text`, and sends them as an `error` with the request's id. */
  fail(code: Refusal, text: string): void;
}

/** The answer to `request` sent on `control`; refusals are logged to `log`. */
export function answerTo(
  request: { readonly type: string; readonly id: number },
  control: { send(message: DaemonMessage): void },
  log: Logger,
): Answer {
  return {
    send: (message) => control.send(message),
    fail: (code, text) => {
      log.warn(`${request.type} refused`, { reason: code, detail: text });
      control.send({ type: "error", id: request.id, code, message: text });
    },
  };
}
