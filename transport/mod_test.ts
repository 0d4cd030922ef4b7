import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { tcpContract, tcpPairFactory, transportContract } from "./_contract.ts";
import { isBun, isDeno, pattern, Probe, sameBytes } from "./_test_util.ts";
import { connectTcp, listenTcp, memoryPair, runtimeName } from "./mod.ts";

const forced = (globalThis as { process?: { env: Record<string, string | undefined> } }).process
  ?.env.TUNNELMUX_TRANSPORT === "node";

describe("mod", () => {
  it("picks the runtime's native adapter", () => {
    const expected = forced ? "node" : isDeno ? "deno" : isBun ? "bun" : "node";
    assert.equal(runtimeName(), expected);
  });

  it("re-exports memoryPair", () => {
    const [a, b] = memoryPair();
    a.close();
    b.close();
  });

  it("connects and listens through the chosen adapter", async () => {
    const accepted: Probe[] = [];
    const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => {
      const probe = new Probe();
      probe.onData = (chunk) => t.write(chunk);
      probe.onEnd = () => t.end();
      accepted.push(probe);
      t.start(probe);
    });
    const a = await connectTcp({ hostname: "127.0.0.1", port: listener.port, noDelay: true });
    const pa = new Probe();
    try {
      a.start(pa);
      const data = pattern(100_000, 11);
      a.write(data);
      a.end();
      await pa.until(() => pa.closes.length === 1, "close");
      assert.ok(sameBytes(pa.received(), data));
      assert.deepEqual(pa.log, ["end", "close"]);
      assert.equal(a.remoteAddress, `127.0.0.1:${listener.port}`);
    } finally {
      a.close();
      listener.close();
    }
  });
});

// connectTcp/listenTcp must honour the whole contract too, whichever adapter they pick.
const chosen = {
  connect: (address: { hostname: string; port: number }, options?: { highWaterMark?: number }) =>
    connectTcp({ ...address, ...options }),
  listen: (
    address: { hostname: string; port: number },
    onTransport: Parameters<typeof listenTcp>[1],
    options?: { highWaterMark?: number },
  ) => listenTcp({ ...address, ...options }, onTransport),
};
transportContract("mod", tcpPairFactory(chosen));
tcpContract("mod", chosen);
