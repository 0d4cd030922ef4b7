// TLS over TCP: the shared transport contract over the native adapter of the running runtime, over
// node:tls, and across the two (so each side's half-close is checked against another TLS stack);
// then, through mod.ts and per adapter, a yamux Session echo and the handshake failures.
// Runs under `deno test -A transport/tls_test.ts` and `bun test --timeout 60000 transport/tls_test.ts`.
//
// Certificates are made with openssl at load time (not in a before hook: the contract suites fetch
// them lazily from their pair factories, and describe blocks are collected before hooks run). The
// suites are skipped when openssl is missing.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Session } from "../protocol/mod.ts";
import type { Transport, TransportListener } from "../protocol/transport.ts";
import { checkEcho } from "../tools/echo_check.ts";
import { echoStream } from "../tunnel/echo.ts";
import {
  type PairFactory,
  type TcpAdapter,
  tcpContract,
  tcpPairFactory,
  transportContract,
} from "./_contract.ts";
import { hasOpenssl, makeTestIdentity, type TestIdentity } from "./_test_certificate.ts";
import { isBun, isDeno, pattern, Probe, sameBytes } from "./_test_util.ts";
import { connectBunTls, listenBunTls } from "./bun/tcp.ts";
import { connectDenoTls, listenDenoTls } from "./deno/tcp.ts";
import type { TlsConnectOptions } from "./io/tcp_options.ts";
import { connectTls, listenTcp, listenTls, TlsHandshakeError } from "./mod.ts";
import { connectNodeTls, listenNodeTls } from "./node/tcp.ts";
import { waitFor } from "../testing/wait.ts";

type Identity = TestIdentity;

let server: Identity = { cert: "", key: "" };
// Another self-signed certificate: trusting it must not make the server's acceptable.
let stranger: Identity = { cert: "", key: "" };
if (hasOpenssl) {
  server = makeTestIdentity("server");
  stranger = makeTestIdentity("stranger", "DNS:stranger.test");
}
const noOpenssl = hasOpenssl ? false : "openssl is not installed";

/** How one TLS implementation connects and listens. */
interface TlsImpl {
  connect(
    address: { hostname: string; port: number },
    tls?: TlsConnectOptions,
    options?: { highWaterMark?: number },
  ): Promise<Transport>;
  listen(
    address: { hostname: string; port: number },
    identity: Identity,
    onTransport: (transport: Transport) => void,
    options?: { highWaterMark?: number },
  ): Promise<TransportListener>;
}

const deno: TlsImpl = { connect: connectDenoTls, listen: listenDenoTls };
const bun: TlsImpl = { connect: connectBunTls, listen: listenBunTls };
const node: TlsImpl = { connect: connectNodeTls, listen: listenNodeTls };
const mod: TlsImpl = {
  connect: (address, tls, options) => connectTls({ ...address, ...tls, ...options }),
  listen: (address, identity, onTransport, options) =>
    listenTls({ ...address, ...identity, ...options }, onTransport),
};
const native = isDeno ? deno : isBun ? bun : undefined;
const nativeName = isDeno ? "deno" : "bun";

/** A TcpAdapter whose client trusts the test certificate and whose server presents it. */
function adapter(client: TlsImpl, listener: TlsImpl): TcpAdapter {
  return {
    connect: (address, options) => client.connect(address, { caCerts: [server.cert] }, options),
    listen: (address, onTransport, options) =>
      listener.listen(address, server, onTransport, options),
  };
}

// The whole contract fits TLS: half-close is close_notify plus FIN on every stack (see the
// adapters' module notes), and reads can be paused since TLS runs over a real socket. One
// exception: Deno 2.9.6's node:tls keeps reading a paused TLSSocket (25 MiB into a paused socket,
// where its node:net stops at the kernel buffers), so the contract's "write returns false while the
// peer is paused" cannot pass with node:tls as the paused side (`b`) under Deno. Hence node_tls
// with itself is skipped there, and the native-client pair runs with its roles swapped: the node
// server writes (`a`) and the native client is paused (`b`), covering the native client's reads.
function swapped(factory: PairFactory): PairFactory {
  return async (options) => {
    const pair = await factory(options);
    return { a: pair.b, b: pair.a, cleanup: pair.cleanup };
  };
}

const suites: [string, TlsImpl | undefined, TlsImpl | undefined, boolean][] = [
  [`${nativeName}_tls`, native, native, false],
  ["node_tls", isDeno ? undefined : node, node, false],
  [`node_tls server writing to ${nativeName}_tls client`, native, node, true],
  [`node_tls client, ${nativeName}_tls server`, node, native, false],
];
for (const [name, client, listener, swap] of suites) {
  const skip = !client || !listener || !hasOpenssl;
  const pair = adapter(client ?? node, listener ?? node);
  transportContract(name, (swap ? swapped : (f: PairFactory) => f)(tcpPairFactory(pair)), {
    skip,
  });
}
// Listener and address behaviour does not pause anything, so every combination runs.
tcpContract(`${nativeName}_tls`, adapter(native ?? node, native ?? node), !native || !hasOpenssl);
tcpContract("node_tls", adapter(node, node), !hasOpenssl);

/**
 * The server side of `client` among `accepted`, once it is there. Every other accepted transport
 * must be a failed handshake's leftover and end: node:tls clients check the certificate only after
 * the handshake completed (node's design), so their servers may see a finished handshake that the
 * client then abandons. Native clients fail inside the handshake and their servers never hand out.
 */
async function serverSide(accepted: Transport[], client: Transport): Promise<Transport> {
  await waitFor(() => accepted.some((t) => t.remoteAddress === client.localAddress), "accept");
  const others = accepted.filter((t) => t.remoteAddress !== client.localAddress);
  for (const t of others) {
    const probe = new Probe();
    t.start(probe);
    await probe.until(() => probe.ends + probe.closes.length > 0, "abandoned handshake ends");
  }
  return accepted.find((t) => t.remoteAddress === client.localAddress)!;
}

/** Awaits the rejection of `promise` and returns the error. */
async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

const impls: [string, TlsImpl | undefined][] = [
  ["mod", mod],
  [`${nativeName}_tls`, native],
  ["node_tls", node],
];
for (const [name, impl] of impls) {
  describe(`${name}: tls`, { skip: !impl || noOpenssl }, () => {
    const tls = impl ?? node;

    /** A listener on a free port that records what it hands out. */
    async function serve(): Promise<{ listener: TransportListener; accepted: Transport[] }> {
      const accepted: Transport[] = [];
      const listener = await tls.listen(
        { hostname: "127.0.0.1", port: 0 },
        server,
        (t) => accepted.push(t),
      );
      return { listener, accepted };
    }

    it("echoes 50 concurrent yamux streams through a Session pair", async () => {
      const sessions: Session[] = [];
      const listener = await tls.listen(
        { hostname: "127.0.0.1", port: 0 },
        server,
        (t) => sessions.push(new Session(t, { client: false, onStream: echoStream })),
      );
      let client: Session | undefined;
      try {
        const transport = await tls.connect(
          { hostname: "127.0.0.1", port: listener.port },
          { caCerts: [server.cert] },
        );
        client = new Session(transport, { client: true });
        const result = await checkEcho(client, {
          streams: 50,
          maxSize: 128 * 1024,
          concurrency: 50,
          seed: 7,
        });
        assert.equal(result.streams, 50);
        assert.equal(await client.close(), undefined);
        await waitFor(() => sessions.length === 1, "server session");
        assert.equal(await sessions[0].closed, undefined);
      } finally {
        client?.destroy();
        for (const s of sessions) s.destroy();
        listener.close();
      }
    });

    it("rejects an untrusted certificate with a TlsHandshakeError", async () => {
      const { listener, accepted } = await serve();
      try {
        const address = { hostname: "127.0.0.1", port: listener.port };
        for (const options of [{}, { caCerts: [stranger.cert] }]) {
          const error = await failure(tls.connect(address, options));
          assert.ok(error instanceof TlsHandshakeError, String(error));
          assert.equal(error.address, `127.0.0.1:${listener.port}`);
          assert.match(error.message, /^TLS handshake with 127\.0\.0\.1:\d+ failed: /);
          // Each stack words it differently, but all name the certificate problem.
          assert.match(error.message, /issuer|self[- ]signed|certificate|unknown ?ca/i);
          assert.ok(error.cause instanceof Error);
        }
        // A trusted connection afterwards is the only one that stays.
        const a = await tls.connect(address, { caCerts: [server.cert] });
        try {
          await serverSide(accepted, a);
        } finally {
          a.close();
        }
      } finally {
        for (const t of accepted) t.close();
        listener.close();
      }
    });

    it("verifies serverName: rejects a name the certificate lacks, accepts one it has", async () => {
      const { listener, accepted } = await serve();
      try {
        const address = { hostname: "127.0.0.1", port: listener.port };
        const error = await failure(
          tls.connect(address, { caCerts: [server.cert], serverName: "stranger.test" }),
        );
        assert.ok(error instanceof TlsHandshakeError, String(error));
        assert.match(error.message, /stranger\.test|not valid for name|altnames/i);
        // The certificate covers DNS:localhost too, so that name passes while dialing the IP.
        const a = await tls.connect(address, { caCerts: [server.cert], serverName: "localhost" });
        const pa = new Probe();
        try {
          a.start(pa);
          const b = await serverSide(accepted, a);
          const pb = new Probe();
          b.start(pb);
          const data = pattern(10_000, 5);
          a.write(data);
          await pb.until(() => pb.bytes === data.length, "data");
          assert.ok(sameBytes(pb.received(), data));
        } finally {
          a.close();
        }
      } finally {
        for (const t of accepted) t.close();
        listener.close();
      }
    });

    it("rejects with a TlsHandshakeError when the server hangs up mid-handshake", async () => {
      // A plain TCP server that closes every connection at once.
      const listener = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => t.close());
      try {
        const error = await failure(
          tls.connect({ hostname: "127.0.0.1", port: listener.port }, {
            caCerts: [server.cert],
          }),
        );
        assert.ok(error instanceof TlsHandshakeError, String(error));
      } finally {
        listener.close();
      }
    });

    it("rejects a refused connection with the runtime's error, not a TlsHandshakeError", async () => {
      const { listener } = await serve();
      const port = listener.port;
      listener.close();
      const error = await failure(tls.connect({ hostname: "127.0.0.1", port }, {}));
      assert.ok(!(error instanceof TlsHandshakeError), String(error));
    });
  });
}
