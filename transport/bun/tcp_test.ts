import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Transport } from "../../protocol/transport.ts";
import { firstReadContract, tcpContract, tcpPairFactory, transportContract } from "../_contract.ts";
import { isBun } from "../_test_util.ts";
import { BunTcpTransport, connectBunTcp, listenBunTcp } from "./tcp.ts";
import { isPooled, releaseBytes, retainBytes } from "../../util/bytes/buffer_pool.ts";

// The native Bun adapter exists only under Bun; elsewhere these suites are reported as skipped.
// The contract's echo test retains every chunk Bun hands to `data` and compares them at the end:
// that is the check that Bun does not reuse its read buffers.
const adapter = { connect: connectBunTcp, listen: listenBunTcp };
transportContract("bun/tcp", tcpPairFactory(adapter), { skip: !isBun });
tcpContract("bun/tcp", adapter, !isBun);
firstReadContract("bun/tcp", adapter, !isBun);

/** A stand-in for a Bun socket that records every call the adapter makes on it. */
function recordingSocket() {
  const calls: string[] = [];
  const socket = {
    data: undefined as unknown,
    get remoteAddress() {
      calls.push("remoteAddress");
      return "127.0.0.1";
    },
    get remotePort() {
      calls.push("remotePort");
      return 4000;
    },
    get localAddress() {
      calls.push("localAddress");
      return "127.0.0.1";
    },
    get localPort() {
      calls.push("localPort");
      return 5000;
    },
    pause: () => calls.push("pause"),
    resume: () => calls.push("resume"),
    setNoDelay: (on: boolean) => calls.push(`setNoDelay(${on})`),
    write: (bytes: Uint8Array) => bytes.length,
    shutdown: () => calls.push("shutdown"),
    end: () => calls.push("end"),
    terminate: () => calls.push("terminate"),
  };
  return { socket, calls };
}

const noHandlers = { data() {}, end() {}, drain() {}, close() {} };

describe("bun/tcp: system calls a connection does not need", () => {
  it("a transport started at once never pauses, resumes or asks for its addresses", () => {
    const { socket, calls } = recordingSocket();
    // deno-lint-ignore no-explicit-any
    const transport = new BunTcpTransport(socket as any, {}, { remote: "127.0.0.1:4000" });
    transport.start(noHandlers);
    transport.onData(new Uint8Array([1, 2, 3]));
    assert.equal(transport.remoteAddress, "127.0.0.1:4000");
    assert.deepEqual(calls, []);
  });

  it("data before start is held, the socket paused then, and resumed at start", () => {
    const { socket, calls } = recordingSocket();
    // deno-lint-ignore no-explicit-any
    const transport = new BunTcpTransport(socket as any);
    transport.onData(new Uint8Array([1]));
    transport.onData(new Uint8Array([2]));
    assert.deepEqual(calls, ["pause"]);
    const got: number[] = [];
    transport.start({ ...noHandlers, data: (chunk) => got.push(...chunk) });
    assert.deepEqual(got, [1, 2]);
    assert.deepEqual(calls, ["pause", "resume"]);
  });

  it("pause and resume reach the socket once each, however often they are asked", () => {
    const { socket, calls } = recordingSocket();
    // deno-lint-ignore no-explicit-any
    const transport = new BunTcpTransport(socket as any);
    transport.start(noHandlers);
    transport.pause();
    transport.pause();
    transport.resume();
    transport.resume();
    assert.deepEqual(calls, ["pause", "resume"]);
  });

  it("asks the kernel for an address it was not told, once, and keeps it", () => {
    const { socket, calls } = recordingSocket();
    // deno-lint-ignore no-explicit-any
    const transport = new BunTcpTransport(socket as any);
    assert.equal(transport.remoteAddress, "127.0.0.1:4000");
    assert.equal(transport.remoteAddress, "127.0.0.1:4000");
    assert.equal(transport.localAddress, "127.0.0.1:5000");
    assert.deepEqual(calls, ["remoteAddress", "remotePort", "localAddress", "localPort"]);
  });

  it("only turning Nagle's algorithm back on costs a call", () => {
    const { socket, calls } = recordingSocket();
    // deno-lint-ignore no-explicit-any
    new BunTcpTransport(socket as any, { noDelay: false });
    assert.deepEqual(calls, ["setNoDelay(false)"]);
  });
});

describe("bun/tcp: addresses known without asking", { skip: !isBun }, () => {
  it("a dialed IP literal and a listener's own address are the kernel's", async () => {
    let accepted: Transport | undefined;
    const listener = await listenBunTcp({ hostname: "127.0.0.1", port: 0 }, (t) => accepted = t);
    try {
      const client = await connectBunTcp({ hostname: "127.0.0.1", port: listener.port });
      for (let i = 0; i < 100 && accepted === undefined; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.ok(accepted);
      assert.equal(client.remoteAddress, `127.0.0.1:${listener.port}`);
      assert.equal(accepted.localAddress, `127.0.0.1:${listener.port}`);
      assert.equal(accepted.remoteAddress, client.localAddress);
      client.close();
      accepted.close();
    } finally {
      await listener.close();
    }
  });
});

describe("bun/tcp: read memory", () => {
  it("a large read goes to a releasing receiver with a claim, and is freed at its release", () => {
    const { socket } = recordingSocket();
    // deno-lint-ignore no-explicit-any
    const transport = new BunTcpTransport(socket as any);
    const got: Uint8Array[] = [];
    transport.start({ ...noHandlers, releases: true, data: (chunk) => got.push(chunk) });
    transport.onData(new Uint8Array(64 * 1024).fill(1));
    transport.onData(new Uint8Array(100).fill(2));
    assert.equal(got.length, 2);
    assert.ok(isPooled(got[0]));
    assert.ok(!isPooled(got[1]), "a small read is left to the collector");
    const view = got[0].subarray(0, 10);
    retainBytes(view);
    releaseBytes(got[0]);
    assert.ok(view.every((b) => b === 1), "a view with a claim stays readable");
    releaseBytes(view);
    assert.equal(got[0].buffer.byteLength, 0, "freed at the last release");
  });

  it("a receiver that does not release keeps its reads whole", () => {
    const { socket } = recordingSocket();
    // deno-lint-ignore no-explicit-any
    const transport = new BunTcpTransport(socket as any);
    const got: Uint8Array[] = [];
    transport.start({ ...noHandlers, data: (chunk) => got.push(chunk) });
    transport.onData(new Uint8Array(64 * 1024).fill(3));
    releaseBytes(got[0]);
    assert.equal(got[0].length, 64 * 1024);
    assert.ok(!isPooled(got[0]));
  });
});
