// Go yamux peers against each other: every client scenario of one library
// against the other library's echo server (hashicorp <-> go-yamux).
// Runs under `deno test -A interop/` and `bun test --timeout 120000 interop/`.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  buildGoPeer,
  type GoPeerName,
  type GoServer,
  type GoSummary,
  runGoClient,
  startGoServer,
} from "./go_peer.ts";

const PAIRS: ReadonlyArray<readonly [client: GoPeerName, server: GoPeerName]> = [
  ["hashicorp", "goyamux"],
  ["goyamux", "hashicorp"],
];

async function withServer<T>(
  name: GoPeerName,
  args: string[],
  fn: (server: GoServer) => Promise<T>,
): Promise<T> {
  const server = await startGoServer(name, args);
  try {
    return await fn(server);
  } finally {
    await server.close();
  }
}

function client(
  name: GoPeerName,
  server: GoServer,
  scenario: string,
  ...args: string[]
): Promise<GoSummary> {
  return runGoClient(name, [
    "-connect",
    server.address,
    "-scenario",
    scenario,
    "-timeout",
    "60s",
    ...args,
  ]);
}

test("go peers build and the cache is reused", async () => {
  const [a, b] = await Promise.all([buildGoPeer("hashicorp"), buildGoPeer("goyamux")]);
  assert.match(a, /\.cache[\\/]interop[\\/]hashicorp/);
  assert.match(b, /\.cache[\\/]interop[\\/]goyamux/);
  assert.equal(await buildGoPeer("hashicorp"), a);
});

test("runGoClient rejects with a clear message on failure", async () => {
  await withServer("goyamux", [], async (server) => {
    await assert.rejects(
      runGoClient("hashicorp", ["-connect", server.address, "-scenario", "nope"]),
      /unknown -scenario "nope"/,
    );
  });
  // The server resets every stream after 100 bytes: a normal echo must fail.
  await withServer("goyamux", ["-rst-after", "100"], async (server) => {
    await assert.rejects(client("hashicorp", server, "halfclose"), /connection reset/);
  });
});

for (const [c, s] of PAIRS) {
  const pair = `${c} client -> ${s} server`;

  test(`${pair}: concurrent (100 streams <= 256 KiB)`, async () => {
    await withServer(s, [], async (server) => {
      const r = await client(c, server, "concurrent", "-count", "100", "-max-size", "262144");
      assert.equal(r.ok, true);
      assert.equal(r.impl, c);
      assert.equal(r.streams, 100);
      assert.equal(r.bytes, r.planned_bytes);
      const end = await server.waitForEvent((e) => e.event === "session-end");
      assert.equal(end.echoed, 100);
      assert.equal(end.echo_errors, 0);
    });
  });

  test(`${pair}: halfclose`, async () => {
    await withServer(s, [], async (server) => {
      const r = await client(c, server, "halfclose");
      assert.equal(r.echo_after_fin_bytes, 128 * 1024);
      assert.notEqual(r.write_after_fin_error, "", "write after FIN must fail");
    });
  });

  test(`${pair}: rst`, async () => {
    await withServer(s, [], async (server) => {
      const r = await client(c, server, "rst", "-count", "3");
      assert.equal(r.resets, 3);
      assert.equal(r.streams, 1, "follow-up echo stream");
      const end = await server.waitForEvent((e) => e.event === "session-end");
      assert.equal(end.echo_resets, 3);
      assert.equal(end.echo_errors, 0);
      assert.equal((end.wire_in as Record<string, number>).rst, 3);
    });
  });

  test(`${pair}: ping`, async () => {
    await withServer(s, [], async (server) => {
      const r = await client(c, server, "ping", "-count", "5");
      assert.equal(r.pings, 5);
      assert.equal((r.rtt_us as number[]).length, 5);
    });
  });

  test(`${pair}: dribble`, async () => {
    await withServer(s, [], async (server) => {
      const r = await client(c, server, "dribble");
      assert.equal(r.bytes, 4096);
      assert.equal((r.wire_out as Record<string, number>).data_bytes, 4096);
    });
  });

  test(`${pair}: goaway (client sends GoAway; server's later opens are refused)`, async () => {
    await withServer(s, ["-server-opens", "2", "-server-opens-delay", "1s"], async (server) => {
      const r = await client(c, server, "goaway", "-wait", "1500ms");
      assert.equal(r.syn_after_goaway, 0);
      const opens = await server.waitForEvent((e) => e.event === "server-opens");
      assert.equal(opens.ok, false);
      assert.equal(opens.verified, 0);
      assert.equal(opens.refused, 2);
    });
  });

  test(`${pair}: goaway-recv (server sends GoAway after 3 streams)`, async () => {
    await withServer(s, ["-goaway-after", "3"], async (server) => {
      const r = await client(c, server, "goaway-recv", "-expect", "3");
      assert.equal(r.completed, 3);
      assert.equal(r.goaway_received, true);
    });
  });

  test(`${pair}: accept (server opens 10 streams, client echoes)`, async () => {
    await withServer(s, ["-server-opens", "10", "-server-opens-size", "100000"], async (server) => {
      const r = await client(c, server, "accept", "-count", "10");
      assert.equal(r.incoming_echoed, 10);
      const opens = await server.waitForEvent((e) => e.event === "server-opens");
      assert.equal(opens.ok, true, JSON.stringify(opens));
      assert.equal(opens.verified, 10);
    });
  });

  test(`${pair}: rst-recv (server resets after 10000 bytes)`, async () => {
    await withServer(s, ["-rst-after", "10000"], async (server) => {
      const r = await client(c, server, "rst-recv");
      assert.ok((r.echoed_before_reset as number) <= 10000);
      assert.equal(r.streams, 1, "follow-up echo stream");
    });
  });

  test(`${pair}: largewindow (32 MiB, 16 MiB window)`, async () => {
    await withServer(s, ["-window", String(16 << 20)], async (server) => {
      const r = await client(c, server, "largewindow");
      assert.equal(r.bytes, 32 << 20);
      assert.equal(r.window, 16 << 20);
    });
  });

  test(`${pair}: benchmark scenarios (throughput, rtt, streams) smoke`, async () => {
    await withServer(s, [], async (server) => {
      const t = await client(c, server, "throughput", "-bytes", String(8 << 20));
      assert.ok((t.mib_per_s as number) > 0);
      const rtt = await client(c, server, "rtt", "-count", "200");
      assert.ok((rtt.p50_us as number) <= (rtt.p99_us as number));
      const st = await client(c, server, "streams", "-count", "200", "-inflight", "16");
      assert.equal(st.streams, 200);
      assert.ok((st.streams_per_s as number) > 0);
    });
  });
}
