/**
 * A bare RFC 6455 client over a TCP transport, for the WebSocket tests (not a test file itself):
 * it can stop reading for real, send text or oversized messages, and vanish without a close frame,
 * which the `WebSocket` API cannot.
 *
 * @module
 */

import type { Transport } from "../../protocol/transport.ts";
import { Probe } from "../_test_util.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { connectTcp } from "../mod.ts";

/** One message (or control frame) the server sent. */
export interface RawFrame {
  /** 1 text, 2 binary, 8 close, 9 ping, 10 pong. */
  opcode: number;
  /** The unmasked payload. */
  payload: Uint8Array;
}

/** A WebSocket client speaking the wire protocol itself over `connectTcp`. */
export class RawWebSocket {
  /** The TCP transport beneath. */
  readonly tcp: Transport;
  /** Its events. */
  readonly probe: Probe;
  /** Data frames received (binary and text), in order. */
  readonly messages: RawFrame[] = [];
  /** Payload bytes of the binary messages received. */
  binaryBytes = 0;
  /** The code of the close frame the server sent, once it did. */
  closeCode: number | undefined;
  #pending: Uint8Array = new Uint8Array(0);
  #handshake = true;
  #status = "";

  private constructor(tcp: Transport, probe: Probe) {
    this.tcp = tcp;
    this.probe = probe;
  }

  /** Connects and completes the upgrade on `path`; rejects unless the server answers 101. */
  static async connect(port: number, path = "/tunnel"): Promise<RawWebSocket> {
    const tcp = await connectTcp({ hostname: "127.0.0.1", port });
    const probe = new Probe();
    const raw = new RawWebSocket(tcp, probe);
    probe.onData = (chunk) => raw.#receive(chunk);
    tcp.start(probe);
    tcp.write(
      new TextEncoder().encode(
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
          "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
          "Sec-WebSocket-Version: 13\r\n\r\n",
      ),
    );
    await probe.until(() => !raw.#handshake || probe.closes.length > 0, "upgrade response");
    if (!raw.#status.startsWith("HTTP/1.1 101")) {
      tcp.close();
      throw new Error(`upgrade refused: ${raw.#status}`);
    }
    return raw;
  }

  /** Sends one frame, masked as a client must (with a zero key, which leaves bytes as they are). */
  send(opcode: number, payload: Uint8Array): void {
    const n = payload.length;
    const header = n < 126 ? 2 : n < 65536 ? 4 : 10;
    const frame = new Uint8Array(header + 4 + n);
    frame[0] = 0x80 | opcode;
    if (n < 126) frame[1] = 0x80 | n;
    else if (n < 65536) {
      frame[1] = 0x80 | 126;
      new DataView(frame.buffer).setUint16(2, n);
    } else {
      frame[1] = 0x80 | 127;
      new DataView(frame.buffer).setBigUint64(2, BigInt(n));
    }
    frame.set(payload, header + 4);
    this.tcp.write(frame);
  }

  /** Writes `bytes` as they are: hand-made frames a well-behaved client would never send. */
  sendRaw(bytes: Uint8Array): void {
    this.tcp.write(bytes);
  }

  /** Sends a close frame with `code`. */
  sendClose(code: number): void {
    const payload = new Uint8Array(2);
    new DataView(payload.buffer).setUint16(0, code);
    this.send(8, payload);
  }

  #receive(chunk: Uint8Array): void {
    this.#pending = this.#pending.length === 0 ? chunk : concat([this.#pending, chunk]);
    if (this.#handshake) {
      const text = new TextDecoder().decode(this.#pending);
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return;
      this.#status = text.slice(0, text.indexOf("\r\n"));
      this.#handshake = false;
      // The response head is ASCII, so its length in characters is its length in bytes.
      this.#pending = this.#pending.subarray(end + 4);
    }
    for (;;) {
      const p = this.#pending;
      if (p.length < 2) return;
      let length = p[1] & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (p.length < 4) return;
        length = (p[2] << 8) | p[3];
        offset = 4;
      } else if (length === 127) {
        if (p.length < 10) return;
        length = Number(new DataView(p.buffer, p.byteOffset + 2, 8).getBigUint64(0));
        offset = 10;
      }
      if (p.length < offset + length) return;
      const frame = { opcode: p[0] & 0x0f, payload: p.slice(offset, offset + length) };
      this.#pending = p.subarray(offset + length);
      if (frame.opcode === 8) {
        this.closeCode = frame.payload.length >= 2
          ? (frame.payload[0] << 8) | frame.payload[1]
          : 1005;
      } else if (frame.opcode === 9) {
        this.send(10, frame.payload);
      } else {
        this.messages.push(frame);
        if (frame.opcode === 2) this.binaryBytes += length;
      }
    }
  }
}
