/**
 * Requests to the daemon on the control channel: each gets a number, the daemon answers it by
 * that number (`ok`, `exposed` or `error`), and a request left unanswered fails after a deadline
 * or when the session ends.
 *
 * @module
 */

import type { ClientMessage, DaemonMessage } from "../../tunnel/control/control.ts";
import { ClientError } from "../errors.ts";

/** A control message the daemon answers, without its `id` (the table numbers it). */
export type ControlRequest = ClientMessage extends infer M
  ? M extends { id: number } ? Omit<M, "id"> : never
  : never;

/** Where requests are written: the session's control channel. */
export interface RequestSink {
  /** Sends one control message. */
  send(message: unknown): void;
}

interface Pending {
  resolve: (message: DaemonMessage) => void;
  reject: (error: ClientError) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** The requests waiting for the daemon's answer, by number. */
export class PendingRequests {
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();

  /** How many requests wait for an answer. */
  get size(): number {
    return this.#pending.size;
  }

  /**
   * Sends `message` on `sink` with the next number. Resolves with the daemon's answer; rejects
   * with its `error` as a {@linkcode ClientError}, or with `timeout` after `timeoutMs`.
   */
  send(sink: RequestSink, message: ControlRequest, timeoutMs: number): Promise<DaemonMessage> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new ClientError("timeout", `${message.type} got no answer`));
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      sink.send({ ...message, id });
    });
  }

  /**
   * Settles the request `message` answers (an `error` rejects it). False when it answers none:
   * no `id`, or one that timed out, failed or was never sent.
   */
  answer(message: DaemonMessage): boolean {
    const id = "id" in message ? message.id ?? -1 : -1;
    const pending = this.#pending.get(id);
    if (!pending) return false;
    this.#pending.delete(id);
    clearTimeout(pending.timer);
    if (message.type === "error") {
      pending.reject(ClientError.fromDaemon(message.code, message.message));
    } else pending.resolve(message);
    return true;
  }

  /** Rejects every waiting request with `error` (the session ended, or the client closed). */
  failAll(error: ClientError): void {
    for (const pending of this.#pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(error);
    }
    this.#pending.clear();
  }
}
