import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { openUdp, type UdpSocket } from "./udp.ts";
import { waitFor } from "../testing/wait.ts";
import { pattern } from "../util/bytes/bytes.ts";
import { MAX_UDP_DATAGRAM } from "../tunnel/udp/udp_framing.ts";
import process from "node:process";
import { runCommand } from "../testing/command.ts";
import { runtimeArgs } from "../testing/process.ts";

const SIZES = [0, 1, 512, 1472, 9000, 32_000, MAX_UDP_DATAGRAM];

describe("udp sockets", () => {
  it("sends and receives whole datagrams of many sizes, and knows the sender", async () => {
    const got: { bytes: Uint8Array; port: number }[] = [];
    const sockets: UdpSocket[] = [];
    try {
      const receiver = await openUdp({
        onMessage: (bytes, remote) => got.push({ bytes, port: remote.port }),
      });
      sockets.push(receiver);
      const sender = await openUdp({ onMessage: () => {} });
      sockets.push(sender);
      assert.ok(receiver.local.port > 0);
      for (const size of SIZES) {
        assert.equal(sender.send(pattern(size, size), "127.0.0.1", receiver.local.port), true);
        await waitFor(() => got.length === SIZES.indexOf(size) + 1, `datagram of ${size}`);
      }
      assert.deepEqual(got.map((g) => g.bytes.length), SIZES);
      SIZES.forEach((size, i) => assert.deepEqual(got[i].bytes, pattern(size, size)));
      assert.ok(got.every((g) => g.port === sender.local.port));
    } finally {
      for (const socket of sockets) socket.close();
    }
  });

  it("receives an IPv6 datagram larger than IPv4's largest whole, never cut short", async () => {
    const got: Uint8Array[] = [];
    const receiver = await openUdp({ hostname: "::1", onMessage: (bytes) => got.push(bytes) })
      .catch(() => undefined);
    if (!receiver) return; // no IPv6 loopback here
    const sender = await openUdp({ hostname: "::1", onMessage: () => {} });
    try {
      // Larger than IPv4's largest: the layer above must see its real size to refuse it.
      const sizes = [MAX_UDP_DATAGRAM + 1, 65_527, 3];
      for (const size of sizes) {
        assert.equal(sender.send(pattern(size, size), "::1", receiver.local.port), true);
        await waitFor(() => got.length === sizes.indexOf(size) + 1, `datagram of ${size}`);
      }
      assert.deepEqual(got.map((g) => g.length), sizes);
      // Each is the handler's own: a later datagram does not overwrite an earlier one.
      sizes.forEach((size, i) => assert.deepEqual(got[i], pattern(size, size)));
    } finally {
      sender.close();
      receiver.close();
    }
  });

  it("says nothing when a datagram's receiver has gone, and goes on receiving", async () => {
    // In a process of its own, to see its stderr: the kernel's "port unreachable" for a visitor
    // that went away must not be printed (a flood of them would flood the log).
    const result = await runCommand(
      process.execPath,
      runtimeArgs("transport/_udp_refused_probe.ts"),
      {
        timeoutMs: 60_000,
      },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.trim(), "[3]");
    assert.equal(result.stderr, "");
  });

  it("sends nothing after close", async () => {
    const socket = await openUdp({ onMessage: () => {} });
    socket.close();
    socket.close();
    assert.equal(socket.send(new Uint8Array([1]), "127.0.0.1", 9), false);
  });
});
