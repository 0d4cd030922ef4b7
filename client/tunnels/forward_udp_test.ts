import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect } from "../client.ts";
import { Daemon } from "../../daemon/daemon.ts";
import { validateConfig } from "../../daemon/config/mod.ts";
import { Logger } from "../../util/log.ts";
import { openUdp, type UdpSocket } from "../../transport/udp.ts";
import { waitFor } from "../../testing/wait.ts";
import { pattern } from "../../util/bytes/bytes.ts";

const TOKEN = "forward-udp-test-token-0123456789ab";

describe("client SDK: forwardUdp", () => {
  it("carries two visitors' datagrams through a real daemon to an allowlisted UDP echo", async () => {
    const echo: UdpSocket = await openUdp({
      onMessage: (bytes, remote) => echo.send(bytes, remote.hostname, remote.port),
    });
    const result = validateConfig({
      listen: { tcp: "127.0.0.1:0", websocket: null, admin: null },
      clients: [{ name: "alice", token: TOKEN, forward: [`127.0.0.1:${echo.local.port}`] }],
    });
    assert.deepEqual(result.errors, []);
    const daemon = new Daemon(result.config!, {
      log: new Logger({ level: "error", format: "json", sink: () => {} }),
    });
    await daemon.start();
    const client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: TOKEN,
      reconnect: false,
    });
    const sockets: UdpSocket[] = [];
    try {
      const forward = await client.forwardUdp({
        listen: "127.0.0.1:0",
        target: `127.0.0.1:${echo.local.port}`,
      });
      const port = Number(forward.address.split(":")[1]);
      const gotA: Uint8Array[] = [];
      const gotB: Uint8Array[] = [];
      sockets.push(await openUdp({ onMessage: (b) => gotA.push(b) }));
      sockets.push(await openUdp({ onMessage: (b) => gotB.push(b) }));
      const sizes = [1, 700, 1472, 20_000];
      for (const [i, size] of sizes.entries()) {
        sockets[0].send(pattern(size, 1), "127.0.0.1", port);
        sockets[1].send(pattern(size, 2), "127.0.0.1", port);
        await waitFor(() => gotA.length === i + 1 && gotB.length === i + 1, `datagrams of ${size}`);
      }
      sizes.forEach((size, i) => {
        assert.deepEqual(gotA[i], pattern(size, 1));
        assert.deepEqual(gotB[i], pattern(size, 2));
      });
      assert.equal(forward.stats.flowsOpen, 2);
      assert.equal(forward.stats.datagramsOut, 2 * sizes.length);
      forward.close();
    } finally {
      sockets.forEach((s) => s.close());
      await client.close();
      echo.close();
      daemon.stop();
      await daemon.stopped;
    }
  });
});
