// `daemon healthcheck`: the URL it derives from the admin listener, the probe's outcomes, and the
// subcommand's exit codes, run as a process under the runtime running the test.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, describe, it } from "node:test";
import { cleanup, closedPort } from "../testing/mod.ts";
import { runProgram } from "../e2e/_ops_util.ts";
import { probe, readyzUrl } from "./healthcheck.ts";

after(cleanup);

/** An HTTP server on 127.0.0.1:0 answering every request with `status`. */
async function answering(status: number): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((_req, res) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ status }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/readyz`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("readyzUrl", () => {
  it("probes a wildcard bind on loopback, and brackets IPv6", () => {
    assert.equal(readyzUrl({ hostname: "0.0.0.0", port: 7081 }), "http://127.0.0.1:7081/readyz");
    assert.equal(readyzUrl({ hostname: "::", port: 7081 }), "http://[::1]:7081/readyz");
    assert.equal(readyzUrl({ hostname: "127.0.0.1", port: 9 }), "http://127.0.0.1:9/readyz");
    assert.equal(readyzUrl({ hostname: "::1", port: 9 }), "http://[::1]:9/readyz");
  });
});

describe("probe", () => {
  it("is ok on 200 only", async () => {
    const ok = await answering(200);
    const draining = await answering(503);
    try {
      assert.equal((await probe(ok.url)).ok, true);
      const result = await probe(draining.url);
      assert.equal(result.ok, false);
      assert.match(result.detail, /503/);
    } finally {
      await ok.close();
      await draining.close();
    }
  });

  it("fails, without throwing, when nothing listens, and says so", async () => {
    const port = await closedPort();
    const result = await probe(`http://127.0.0.1:${port}/readyz`, 2_000);
    assert.equal(result.ok, false);
    assert.equal(
      result.detail,
      `no daemon answering at http://127.0.0.1:${port} (connection refused)`,
    );
  });

  it("fails on timeout", async () => {
    // A fetch that never answers, and rejects only when aborted, as the real one does.
    const hanging: typeof fetch = (_input, init) =>
      new Promise<Response>((_resolve, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal!.reason));
      });
    const result = await probe("http://127.0.0.1:1/readyz", 50, hanging);
    assert.equal(result.ok, false);
    assert.match(result.detail, /no answer within 50 ms/);
  });
});

describe("daemon healthcheck", () => {
  it("exits 1 when nothing listens at --url", async () => {
    const port = await closedPort();
    const url = `http://127.0.0.1:${port}/readyz`;
    const { code, stderr } = await runProgram("daemon/main.ts", ["healthcheck", "--url", url]);
    assert.equal(code, 1, stderr);
    assert.equal(
      stderr.trim(),
      `daemon healthcheck: no daemon answering at http://127.0.0.1:${port} (connection refused)`,
    );
  });

  it("exits 1 when nothing listens at the configured admin address", async () => {
    const port = await closedPort();
    const args = ["healthcheck", "--listen-admin", `0.0.0.0:${port}`, "--timeout", "2000"];
    const { code, stdout, stderr } = await runProgram("daemon/main.ts", args);
    assert.equal(code, 1, stderr);
    // The wildcard bind is probed on loopback.
    assert.match(stderr, new RegExp(`no daemon answering at http://127\\.0\\.0\\.1:${port} \\(`));
    assert.doesNotMatch(stdout + stderr, /token/, "no generated token is printed");
  });

  it("exits 1 when the admin API is off", async () => {
    const args = ["healthcheck", "--listen-admin", "off"];
    const { code, stderr } = await runProgram("daemon/main.ts", args);
    assert.equal(code, 1);
    assert.match(stderr, /admin API is off/);
  });

  it("exits 0 on a 200 and 1 on a 503 (draining)", async () => {
    const ok = await answering(200);
    const draining = await answering(503);
    try {
      assert.equal((await runProgram("daemon/main.ts", ["healthcheck", "--url", ok.url])).code, 0);
      const failed = await runProgram("daemon/main.ts", ["healthcheck", "--url", draining.url]);
      assert.equal(failed.code, 1, failed.stderr);
    } finally {
      await ok.close();
      await draining.close();
    }
  });

  it("refuses --url outside healthcheck, and a bad --timeout", async () => {
    assert.equal((await runProgram("daemon/main.ts", ["check", "--url", "http://x"])).code, 2);
    const bad = await runProgram("daemon/main.ts", ["healthcheck", "--timeout", "soon"]);
    assert.equal(bad.code, 2);
  });
});
