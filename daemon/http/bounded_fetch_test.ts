import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server, type ServerResponse } from "node:http";
import { boundedFetch } from "./bounded_fetch.ts";

describe("boundedFetch", () => {
  let server: Server;
  let base: string;
  // Answers held open by the "never" route, ended at the end so the server can close.
  const held: ServerResponse[] = [];
  let served10MB = 0;

  before(async () => {
    server = createServer((req, res) => {
      if (req.url === "/never") return void held.push(res);
      if (req.url === "/redirect") {
        res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data" });
        return void res.end();
      }
      if (req.url === "/10mb") {
        served10MB++;
        res.setHeader("content-type", "application/json");
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        let sent = 0;
        const more = () => {
          while (sent < 10 * 1024 * 1024) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once("drain", more);
          }
          res.end();
        };
        res.on("error", () => {});
        return more();
      }
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ keys: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });

  after(async () => {
    for (const res of held) res.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const bounds = { maxBytes: 256 * 1024, timeoutMs: 500 };

  it("gives the whole answer with its status and fields", async () => {
    const response = await boundedFetch(`${base}/jwks`, {}, bounds);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-type"), "application/json");
    assert.deepEqual(await response.json(), { keys: [] });
  });

  it("gives up on a server that never answers at its deadline", async () => {
    await assert.rejects(boundedFetch(`${base}/never`, {}, bounds));
    assert.equal(held.length, 1, "the request reached the server");
  });

  it("refuses a 10 MB answer without reading it all", async () => {
    await assert.rejects(
      boundedFetch(`${base}/10mb`, {}, { ...bounds, timeoutMs: 30_000 }),
      /answered with over 262144 bytes/,
    );
    assert.equal(served10MB, 1);
  });

  it("follows no redirect", async () => {
    await assert.rejects(boundedFetch(`${base}/redirect`, {}, bounds), /redirect/);
  });
});
