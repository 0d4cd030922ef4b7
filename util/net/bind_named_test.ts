import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { bindNamed } from "./bind_named.ts";

/** Listens on 127.0.0.1:`port`; rejects with the runtime's error when it cannot. */
function listenOn(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

describe("bindNamed", () => {
  it("returns what bind gives", async () => {
    assert.equal(await bindNamed("x", "h:1", "--x", () => Promise.resolve(7)), 7);
  });

  it("names the listener, its address and the setting when the address is in use", async () => {
    const taken = await listenOn(0);
    const port = (taken.address() as { port: number }).port;
    try {
      await assert.rejects(
        bindNamed(
          "tunnels over TCP",
          `127.0.0.1:${port}`,
          "--listen-tcp",
          () => listenOn(port),
        ),
        (error: Error) => {
          assert.equal(
            error.message,
            `cannot listen for tunnels over TCP on 127.0.0.1:${port}: the address is in use ` +
              "(another daemon?); choose another with --listen-tcp",
          );
          assert.ok(error.cause instanceof Error, "the runtime's error kept as the cause");
          return true;
        },
      );
    } finally {
      taken.close();
    }
  });

  it("passes any other failure's message on, after the listener's name and address", async () => {
    await assert.rejects(
      bindNamed(
        "the admin API",
        "10.9.9.9:80",
        "--listen-admin",
        () => Promise.reject(new Error("permission denied")),
      ),
      { message: "cannot listen for the admin API on 10.9.9.9:80: permission denied" },
    );
  });
});
