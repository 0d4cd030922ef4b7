/**
 * Test fixture for the admin API: a daemon in this process with its admin listener, an echo
 * target, SDK clients, and small HTTP helpers (fetch with the token, raw requests over node:net).
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { connect as netConnect } from "node:net";
import { Client, type ConnectOptions } from "../../client/client.ts";
import { Daemon } from "../daemon.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validateConfig } from "../config/mod.ts";
import { Logger } from "../../util/log.ts";
import { listenTcp } from "../../transport/mod.ts";
import { hasOpenssl, makeTestIdentity } from "../../transport/_test_certificate.ts";
import type { TransportListener } from "../../protocol/transport.ts";
import { type AdminServer, startAdmin } from "./start.ts";

/** The admin token of the fixture daemon. */
export const ADMIN_TOKEN = "admin-test-token-0123456789abcdef";
/** The client token of the fixture daemon. */
export const CLIENT_TOKEN = "admin-client-token-0123456789abcdef";

/** A running daemon with its admin API and an echo target. */
export interface Fixture {
  /** The daemon. */
  daemon: Daemon;
  /** Its admin API. */
  admin: AdminServer;
  /** A plain TCP echo server on 127.0.0.1. */
  echo: TransportListener;
  /** Calls the admin API with the token (unless `init.headers` says otherwise). */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** Connects an SDK client over TCP (closed by `stop`); resolves once its session is ready. */
  client(options?: Partial<ConnectOptions>): Promise<Client>;
  /** The daemon's id of the client's current session, from its latest welcome. */
  sessionId(client: Client): string;
  /** Closes clients, the admin API, the daemon and the echo server. */
  stop(): Promise<void>;
}

/** Starts a fixture. */
export async function startFixture(): Promise<Fixture> {
  const echo = await listenTcp({ hostname: "127.0.0.1", port: 0 }, (t) => {
    t.start({
      data: (chunk) => {
        if (!t.write(chunk)) t.pause();
      },
      drain: () => t.resume(),
      end: () => t.end(),
      close: () => {},
    });
  });
  // Minted tokens are persisted in the data directory: never the repository's ./data in tests.
  const dataDir = mkdtempSync(join(tmpdir(), "tunnelmux-admin-"));
  // HTTP and HTTPS tunnels too, with a wildcard certificate for their names (when openssl is here).
  const certificates: { cert: string; key: string }[] = [];
  if (hasOpenssl) {
    const wildcard = makeTestIdentity("wildcard", "DNS:*.tunnels.test");
    writeFileSync(join(dataDir, "wildcard.pem"), wildcard.cert);
    writeFileSync(join(dataDir, "wildcard.key"), wildcard.key, { mode: 0o600 });
    certificates.push({ cert: join(dataDir, "wildcard.pem"), key: join(dataDir, "wildcard.key") });
  }
  const result = validateConfig({
    listen: {
      tcp: "127.0.0.1:0",
      websocket: null,
      admin: "127.0.0.1:0",
      http: "127.0.0.1:0",
      https: "127.0.0.1:0",
    },
    http: { domain: "tunnels.test", certificates },
    dataDir,
    adminToken: ADMIN_TOKEN,
    clients: [{
      name: "alice",
      token: CLIENT_TOKEN,
      expose: { ports: [0, "20000-32767"] },
      forward: [`127.0.0.1:${echo.port}`],
      services: { offer: ["box"], use: ["echo", "box"] },
    }],
  });
  assert.deepEqual(result.errors, []);
  const log = new Logger({ level: "error", format: "json", sink: () => {} });
  const daemon = new Daemon(result.config!, { log });
  await daemon.start();
  const admin = await startAdmin(daemon, { address: result.config!.listen.admin!, log });
  const clients: Client[] = [];
  const sessionIds = new Map<Client, string>();
  return {
    daemon,
    admin,
    echo,
    api: (path, init = {}) => {
      const headers = new Headers(init.headers);
      if (!headers.has("authorization")) headers.set("authorization", `Bearer ${ADMIN_TOKEN}`);
      return fetch(admin.url + path, { ...init, headers });
    },
    client: async (options = {}) => {
      const client = new Client(`tcp://${daemon.addresses.tcp}`, {
        token: CLIENT_TOKEN,
        reconnect: false,
        ...options,
      });
      clients.push(client);
      client.on("ready", ({ session }) => sessionIds.set(client, session));
      await client.ready();
      return client;
    },
    sessionId: (client) => {
      const id = sessionIds.get(client);
      assert.ok(id, "the client has had a session");
      return id;
    },
    stop: async () => {
      await Promise.all(clients.map((c) => c.close()));
      daemon.stop();
      await admin.close();
      echo.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Reads a JSON error response and checks its shape; returns `error.code`. */
export async function errorCode(response: Response): Promise<string> {
  assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
  const body = await response.json() as { error?: { code?: unknown; message?: unknown } };
  assert.equal(typeof body.error?.code, "string", JSON.stringify(body));
  assert.equal(typeof body.error?.message, "string", JSON.stringify(body));
  return body.error!.code as string;
}

/**
 * Sends raw bytes to 127.0.0.1:`port` and resolves with the response: its head and as many body
 * bytes as its Content-Length says (or everything until the server closes). Bounded: gives up
 * after 5 s with what it has.
 */
export function rawHttp(port: number, request: string | Uint8Array): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: "127.0.0.1", port });
    const chunks: Uint8Array[] = [];
    const text = () => new TextDecoder().decode(Buffer.concat(chunks));
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(text());
    };
    const timer = setTimeout(finish, 5_000);
    socket.on("data", (chunk: Uint8Array) => {
      chunks.push(chunk);
      const received = text();
      const end = received.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(received.slice(0, end));
      // Byte and character counts agree here: the API's JSON bodies are ASCII.
      if (length && received.length - end - 4 >= Number(length[1])) finish();
    });
    socket.on("error", (error) => {
      // A server that answers early and closes may reset our unread upload: keep the answer.
      if (chunks.length === 0) reject(error);
    });
    socket.on("close", finish);
    socket.write(request);
  });
}
