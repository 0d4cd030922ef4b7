import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { serveUdpForward } from "./forward_udp.ts";
import { type ClientPolicy, parseForwardRule } from "../policy/policy.ts";
import { Session } from "../../protocol/session.ts";
import { memoryPair } from "../../transport/memory.ts";
import { openUdp } from "../../transport/udp.ts";
import { encodeStreamHeader } from "../../tunnel/stream/stream_header.ts";
import { readStreamHeader } from "../../tunnel/stream/read_stream_header.ts";
import { newUdpCounters, UdpFlowTable } from "../../tunnel/udp/udp_flow.ts";
import { parseIp } from "../../util/net/address.ts";
import { Logger } from "../../util/log.ts";
import { runCommand } from "../../testing/command.ts";
import { waitFor } from "../../testing/wait.ts";
import { startDnsResponder } from "../../testing/udp_servers.ts";

function policy(forward: string[]): ClientPolicy {
  return {
    name: "test",
    expose: { ports: [], anyPort: false, bindHosts: [parseIp("127.0.0.1")!], hosts: [] },
    forward: forward.map((text) => {
      const parsed = parseForwardRule(text);
      assert.ok(parsed.ok, text);
      return parsed.value;
    }),
    services: { offer: [], use: [] },
  };
}

/** A client's `--forward-udp` port whose flows the daemon serves under `forward` rules. */
async function forwardPort(forward: string[], target: string) {
  const [a, b] = memoryPair();
  const daemon = new Session(a, { client: false, config: { enableKeepAlive: false } });
  const client = new Session(b, { client: true, config: { enableKeepAlive: false } });
  const served: boolean[] = [];
  const counters = newUdpCounters();
  const counted: string[] = [];
  void (async () => {
    for (let i = 0; i < 20; i++) {
      const stream = await daemon.accept().catch(() => undefined);
      if (!stream) return;
      const { header, rest } = await readStreamHeader(stream, 5000);
      assert.equal(header.kind, "udpForward");
      served.push(
        await serveUdpForward(stream, (header as { target: string }).target, rest, {
          policy: policy(forward),
          log: new Logger({ level: "error", format: "json", sink: () => {} }),
          counters,
          count: (reason) => counted.push(reason),
        }),
      );
    }
  })();
  const table = await UdpFlowTable.open({
    openStream: () => {
      const stream = client.open();
      stream.write(encodeStreamHeader({ kind: "udpForward", target }));
      return stream;
    },
  });
  return {
    table,
    served,
    counters,
    counted,
    close: () => (table.close(), daemon.destroy(), client.destroy()),
  };
}

describe("udp forwards", () => {
  it("dig resolves through a UDP forward to an allowlisted DNS server", async (t) => {
    const dig = await runCommand("dig", ["-v"], { timeoutMs: 10_000 }).catch(() => undefined);
    if (dig?.code !== 0) {
      return t.skip("dig is not installed (Debian: apt-get install dnsutils)");
    }
    const dns = await startDnsResponder();
    const port = await forwardPort([`127.0.0.1:${dns.local.port}`], `127.0.0.1:${dns.local.port}`);
    try {
      const result = await runCommand("dig", [
        "@127.0.0.1",
        "-p",
        String(port.table.local.port),
        "+tries=1",
        "+time=5",
        "+short",
        "tunnel.test",
        "A",
      ], { timeoutMs: 20_000 });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout.trim(), "192.0.2.7");
      assert.deepEqual(port.served, [true]);
      assert.equal(port.counters.datagramsOut, 1);
      assert.equal(port.counters.datagramsIn, 1);
    } finally {
      port.close();
      dns.close();
    }
  });

  it("refuses a target outside the allowlist when the flow opens", async () => {
    const dns = await startDnsResponder();
    const port = await forwardPort(["127.0.0.1:1-1000"], `127.0.0.1:${dns.local.port}`);
    const got: Uint8Array[] = [];
    const visitor = await openUdp({ onMessage: (bytes) => got.push(bytes) });
    try {
      visitor.send(new Uint8Array(20), "127.0.0.1", port.table.local.port);
      await waitFor(() => port.served.length === 1, "the daemon's decision");
      assert.deepEqual(port.served, [false]);
      assert.deepEqual(port.counted, ["not_allowed"]);
      await waitFor(() => port.table.flows.length === 0, "the refused flow to close");
      assert.equal(port.counters.datagramsOut, 0);
      assert.deepEqual(got, []);
    } finally {
      visitor.close();
      port.close();
      dns.close();
    }
  });
});
