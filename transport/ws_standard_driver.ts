/**
 * The {@linkcode SocketDriver} for WHATWG `WebSocket` objects, shared by the client and Deno's
 * server side.
 *
 * @module
 */

import { applicationCloseCode, type SendResult, type SocketDriver } from "./ws_transport.ts";

/** Bun's non-standard additions to the client `WebSocket`. */
interface BunClientSocket {
  pause?(): void;
  resume?(): void;
  terminate?(): void;
}

/**
 * Drives a standard `WebSocket` object: the global client on both runtimes and Deno's server-side
 * socket. Bun's client adds `pause()`/`resume()`/`terminate()`, used when present.
 */
export class StandardSocketDriver implements SocketDriver {
  #socket: WebSocket & BunClientSocket;

  /** Wraps `socket`. */
  constructor(socket: WebSocket) {
    this.#socket = socket;
  }

  buffered(): number {
    return this.#socket.bufferedAmount;
  }

  send(message: Uint8Array): SendResult {
    if (this.#socket.readyState !== WebSocket.OPEN) return "closed";
    this.#socket.send(message);
    return "sent";
  }

  close(code: number, reason: string): void {
    try {
      this.#socket.close(code, reason);
    } catch {
      // Deno refuses protocol codes from clients: send the application-range stand-in.
      try {
        this.#socket.close(applicationCloseCode(code), reason);
      } catch {
        // Already closing.
      }
    }
  }

  terminate(): void {
    if (typeof this.#socket.terminate === "function") this.#socket.terminate();
    else this.close(1000, "");
  }

  pause(): void {
    if (this.#socket.readyState === WebSocket.OPEN) this.#socket.pause?.();
  }

  resume(): void {
    if (this.#socket.readyState === WebSocket.OPEN) this.#socket.resume?.();
  }
}
