import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { closedPort, waitFor } from "../../testing/mod.ts";
import { dialServer, serverAddresses } from "./dial_server.ts";

describe("serverAddresses", () => {
  const resolver = (addresses: string[]) => () => Promise.resolve(addresses);

  it("rotates only over several addresses of the family the resolver puts first", async () => {
    assert.deepEqual(await serverAddresses("127.0.0.1", resolver(["10.0.0.1"])), [], "an IP");
    assert.deepEqual(await serverAddresses("::1", resolver(["::2"])), [], "an IPv6 address");
    assert.deepEqual(await serverAddresses("localhost", resolver(["127.0.0.1", "::1"])), []);
    assert.deepEqual(await serverAddresses("one", resolver(["10.0.0.1"])), []);
    assert.deepEqual(
      await serverAddresses("nodes", resolver(["10.0.0.1", "::1", "10.0.0.2", "10.0.0.1"])),
      ["10.0.0.1", "10.0.0.2"],
    );
    assert.deepEqual(await serverAddresses("v6", resolver(["::2", "::3", "10.0.0.1"])), [
      "::2",
      "::3",
    ]);
  });

  it("resolves real names with the system resolver", async () => {
    // localhost has at most one address per family: dialed by name, as before.
    assert.deepEqual(await serverAddresses("localhost"), []);
  });
});

describe("dialServer over a name with several addresses", () => {
  const servers: Server[] = [];
  after(() => servers.forEach((s) => s.close()));

  /** Listens on `host:port`. */
  async function listen(host: string, port: number, onSocket: (socket: Socket) => void) {
    const server = createServer(onSocket);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, resolve);
    });
    servers.push(server);
  }

  it("dials one address per turn, and keeps the name for WebSocket's Host", async () => {
    const port = await closedPort();
    const seen: string[] = [];
    for (const host of ["127.0.0.2", "127.0.0.3"]) {
      await listen(host, port, (socket) => {
        socket.on("error", () => {});
        socket.once("data", (chunk: Buffer) => {
          const head = chunk.toString("latin1");
          seen.push(`${host} ${/^host: (.*)$/im.exec(head)?.[1]?.trim() ?? "raw"}`);
          socket.destroy();
        });
      });
    }
    const resolve = () => Promise.resolve(["127.0.0.2", "127.0.0.3"]);
    for (let turn = 0; turn < 3; turn++) {
      const dialed = await dialServer(`tcp://nodes.test:${port}`, {
        timeoutMs: 5_000,
        turn,
        resolve,
      });
      assert.equal(dialed.addresses, 2);
      assert.equal(dialed.address, turn % 2 === 0 ? "127.0.0.2" : "127.0.0.3");
      dialed.transport.start({ data() {}, drain() {}, end() {}, close() {} });
      dialed.transport.write(new TextEncoder().encode("x"));
      await waitFor(() => seen.length === turn + 1, "the server to see the connection");
      dialed.transport.close();
    }
    // A WebSocket dialed at one address still says the name (the upgrade fails: no server).
    await assert.rejects(
      dialServer(`ws://nodes.test:${port}/tunnel`, { timeoutMs: 5_000, turn: 1, resolve }),
    );
    assert.deepEqual(seen, [
      "127.0.0.2 raw",
      "127.0.0.3 raw",
      "127.0.0.2 raw",
      `127.0.0.3 nodes.test:${port}`,
    ]);
  });
});
