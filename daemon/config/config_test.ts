import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  embeddedDefaults,
  formatConfigReport,
  loadConfig,
  mergeLayers,
  validateConfig,
} from "./mod.ts";
import { TokenVerifier } from "../tokens/verifier.ts";
import { hashToken } from "./token_hash.ts";
import { canExpose, matchForward } from "../policy/policy.ts";

const TOKEN_A = "token-a-0123456789abcdefghij";
const TOKEN_B = "token-b-0123456789abcdefghij";
const ADMIN = "admin-token-0123456789abcdef";

/** A minimal valid document with `clients` replaced/extended by the caller. */
function doc(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { adminToken: ADMIN, clients: [{ name: "a", token: TOKEN_A }], ...extra };
}

function errors(raw: unknown): string[] {
  return validateConfig(raw).errors.map((e) => `${e.path}: ${e.message}`);
}

describe("config: layering", () => {
  it("objects merge, arrays and scalars replace", () => {
    assert.deepEqual(
      mergeLayers({ a: { b: 1, c: 2 }, d: [1, 2], e: 1 }, { a: { c: 3 }, d: [9], e: null }),
      { a: { b: 1, c: 3 }, d: [9], e: null },
    );
  });

  it("a __proto__ key is kept as data (and then reported), never applied", () => {
    const raw = JSON.parse(`{"__proto__": {"polluted": true}, "adminToken": "${ADMIN}"}`);
    const merged = mergeLayers({}, raw) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(merged), Object.prototype);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.ok(errors({ ...doc(), ...raw }).some((e) => e.startsWith("__proto__: unknown key")));
  });

  it("embeddedDefaults returns a fresh copy", () => {
    const a = embeddedDefaults();
    (a.listen as Record<string, unknown>).tcp = "x";
    assert.equal((embeddedDefaults().listen as Record<string, unknown>).tcp, "127.0.0.1:7000");
  });
});

describe("config: validateConfig", () => {
  it("HTTP tunnels: a shared port, a base domain and each client's host patterns", () => {
    const { config, errors } = validateConfig({
      ...doc(),
      listen: { http: "0.0.0.0:8080" },
      http: { domain: "Tunnels.Example.com", trustForwarded: true },
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(config!.listen.http, { hostname: "0.0.0.0", port: 8080 });
    assert.deepEqual(config!.http, {
      domain: "tunnels.example.com",
      trustForwarded: true,
      certificates: [],
      acme: null,
    });
    const bad = validateConfig({
      ...doc(),
      http: { domain: "localhost", trustForwarded: "yes" },
      clients: [{ name: "a", token: TOKEN_A, expose: { hosts: ["*", "*.ok.example", "no way"] } }],
    });
    assert.deepEqual(bad.errors.map((e) => e.path).sort(), [
      "clients[0].expose.hosts[2]",
      "http.domain",
    ]);
  });

  it("HTTPS tunnels: a shared port beside HTTP's, and certificate files", () => {
    const { config, errors } = validateConfig({
      ...doc(),
      listen: { http: "0.0.0.0:80", https: "0.0.0.0:443" },
      http: { certificates: [{ cert: "/etc/t/wild.pem", key: "/etc/t/wild.key" }] },
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(config!.listen.https, { hostname: "0.0.0.0", port: 443 });
    assert.deepEqual(config!.http.certificates, [
      { cert: "/etc/t/wild.pem", key: "/etc/t/wild.key" },
    ]);
    const bad = validateConfig({
      ...doc(),
      listen: { http: "127.0.0.1:8443", https: "127.0.0.1:8443" },
      http: { certificates: [{ cert: "/a.pem" }, { cert: "", key: "/k" }, "x"] },
    });
    assert.deepEqual(bad.errors.map((e) => e.path).sort(), [
      "http.certificates[0].key",
      "http.certificates[1].cert",
      "http.certificates[2]",
      "listen.https",
    ]);
  });

  it("ACME: a CA's https directory, a challenge its listener can answer", () => {
    const good = validateConfig({
      ...doc(),
      listen: { http: "0.0.0.0:80", https: "0.0.0.0:443" },
      http: { acme: { directory: "https://acme.example/dir", email: "ops@example.org" } },
    });
    assert.deepEqual(good.errors, []);
    assert.deepEqual(good.config!.http.acme, {
      directory: "https://acme.example/dir",
      email: "ops@example.org",
      caCerts: null,
      challenge: "http-01",
    });
    const bad = validateConfig({
      ...doc(),
      listen: { https: "0.0.0.0:443" },
      http: { acme: { directory: "http://plain.example/dir", email: "nobody", caCerts: 3 } },
    });
    assert.deepEqual(bad.errors.map((e) => e.path).sort(), ["http.acme.directory"]);
    const noHttp = validateConfig({
      ...doc(),
      listen: { https: "0.0.0.0:443" },
      http: { acme: { directory: "https://acme.example/dir" } },
    });
    assert.deepEqual(noHttp.errors.map((e) => e.message), [
      "http-01 is answered on listen.http, which is off",
    ]);
    const noHttps = validateConfig({
      ...doc(),
      listen: { http: "0.0.0.0:80" },
      http: { acme: { directory: "https://acme.example/dir", challenge: "tls-alpn-01" } },
    });
    assert.deepEqual(noHttps.errors.map((e) => e.path), ["http.acme.challenge"]);
    assert.ok(noHttps.warnings.some((w) => w.path === "http.acme"));
  });

  it("a minimal document takes every default", () => {
    const { config, errors, warnings } = validateConfig(doc());
    assert.deepEqual(errors, []);
    assert.deepEqual(warnings, []);
    assert.ok(config);
    assert.deepEqual(config.listen, {
      tcp: { hostname: "127.0.0.1", port: 7000 },
      websocket: { hostname: "127.0.0.1", port: 7080 },
      websocketPath: "/tunnel",
      admin: { hostname: "127.0.0.1", port: 7081 },
      http: null,
      https: null,
    });
    assert.deepEqual(config.http, {
      domain: null,
      trustForwarded: false,
      certificates: [],
      acme: null,
    });
    assert.equal(config.tls, null);
    assert.equal(config.dataDir, "./data");
    assert.equal(config.shutdownGraceMs, 30000);
    assert.deepEqual(config.limits, {
      sessions: 1000,
      streamsPerSession: 1024,
      tunnelsPerClient: 16,
      visitorsPerTunnel: 10000,
      visitorsPerClient: 10000,
      dialTimeoutMs: 10000,
      handshakeTimeoutMs: 10000,
      pendingHandshakes: 1024,
      pendingHandshakesPerSource: 256,
      httpConnections: 10000,
      httpResponseTimeoutMs: 60000,
      idleTimeoutMs: 0,
      maxWebSocketMessage: 1048576,
      keepAliveIntervalMs: 30000,
      keepAliveTimeoutMs: 30000,
      streamWindow: 6291456,
      udpFlowIdleMs: 60000,
      udpFlowsPerTunnel: 1024,
    });
    assert.deepEqual(config.log, { level: "info", format: "auto" });
    assert.equal(config.adminTokenHash, hashToken(ADMIN));
    const [client] = config.clients;
    assert.equal(client.tokenHash, hashToken(TOKEN_A));
    assert.deepEqual(client.forward, []);
    assert.deepEqual(client.expose, { ports: [], anyPort: false, bindHosts: [], hosts: [] });
    assert.deepEqual(client.services, { offer: [], use: [] });
    assert.deepEqual(client.limits, { tunnels: 16, streams: 1024, visitors: 10000 });
  });

  it("the full example shape validates and drives the policy", () => {
    const { config, errors } = validateConfig({
      listen: { tcp: "127.0.0.1:7000", websocket: null, websocketPath: "/t", admin: null },
      tls: { cert: "c.pem", key: "k.pem" },
      adminToken: null,
      log: { level: "debug", format: "json" },
      clients: [{
        name: "laptop",
        token: hashToken(TOKEN_A).toUpperCase().replace("SHA256:", "sha256:"),
        expose: { ports: ["8000-8100", 9000, 0, "8050-8200"], bindHosts: ["127.0.0.1", "::1"] },
        forward: ["db.internal:5432", "10.0.0.0/8:*", "*.svc.local:443", "127.0.0.1:5000-5010"],
        services: { offer: ["ssh-box"], use: ["ssh-*"] },
        limits: { tunnels: 10, streams: 256, visitors: 50 },
      }],
    });
    assert.deepEqual(errors, []);
    assert.ok(config);
    const laptop = config.clients[0];
    assert.equal(laptop.tokenHash, hashToken(TOKEN_A));
    assert.deepEqual(laptop.expose.ports, [{ from: 8000, to: 8200 }, { from: 9000, to: 9000 }]);
    assert.equal(laptop.expose.anyPort, true);
    assert.deepEqual(laptop.limits, { tunnels: 10, streams: 256, visitors: 50 });
    assert.ok(canExpose(laptop, "::1", 8150).ok);
    assert.ok(!canExpose(laptop, "0.0.0.0", 8150).ok);
    const m = matchForward(laptop, "x.svc.local", 443);
    assert.equal(m.ok && m.rule.text, "*.svc.local:443");
    assert.equal(
      new TokenVerifier(config.clients.map((c) => ({ name: c.name, hash: c.tokenHash }))).verify(
        TOKEN_A,
      ),
      "laptop",
    );
  });

  it("reports every error with its JSON path, not just the first", () => {
    const got = errors({
      listne: {},
      listen: { tcp: "nohost", websocket: 7080, websocketPath: "tunnel", admin: "127.0.0.1:7000" },
      tls: { cert: "c.pem" },
      dataDir: "",
      shutdownGraceMs: -1,
      limits: { sessions: 0, streamsPerSesion: 5, dialTimeoutMs: 1.5 },
      log: { level: "verbose", format: "xml" },
      adminToken: "short",
      clients: [
        { name: "ok", token: TOKEN_A },
        {
          name: "bad name!",
          token: "sha256:1234",
          expose: { ports: ["9000-8000", 70000, "x"], bindHosts: ["localhost"] },
        },
        {
          name: "c",
          token: TOKEN_B,
          forward: ["db:99999", 5, "db.internal:5432"],
          services: { use: ["SSH*"], offr: [] },
        },
        { name: "ok", token: TOKEN_A, limits: { tunnels: 70000, streams: 0 }, extra: true },
        "not an object",
      ],
    });
    const expected = [
      'listne: unknown key (did you mean "listen"?)',
      "tls.key: undefined must be a non-empty string",
      'listen.tcp: "nohost" must be HOST:PORT or [IPv6]:PORT (port 0 to 65535)',
      'listen.websocket: 7080 must be "HOST:PORT" or null',
      'listen.websocketPath: "tunnel" must be an absolute URL path without query or fragment',
      'dataDir: "" must be a non-empty string',
      "shutdownGraceMs: -1 must be an integer from 0 to 3600000",
      'limits.streamsPerSesion: unknown key (did you mean "streamsPerSession"?)',
      "limits.sessions: 0 must be an integer from 1 to 1000000",
      "limits.dialTimeoutMs: 1.5 must be an integer from 1 to 600000",
      'log.level: "verbose" must be one of "debug", "info", "warn", "error"',
      'log.format: "xml" must be one of "auto", "pretty", "json"',
      "adminToken: token too short (at least 24 characters; use a generated one)",
      'clients[1].name: "bad name!" must be letters, digits, ".", "_" or "-" (up to 64)',
      "clients[1].token: malformed hash: expected sha256: and 64 hex digits",
      'clients[1].expose.ports[0]: "9000-8000" range start is after its end',
      "clients[1].expose.ports[1]: 70000 port out of range (1 to 65535)",
      'clients[1].expose.ports[2]: "x" expected PORT, FROM-TO',
      'clients[1].expose.bindHosts[0]: "localhost" must be an IP address',
      'clients[2].forward[0]: "db:99999" port out of range (1 to 65535)',
      "clients[2].forward[1]: 5 must be a string",
      'clients[2].services.offr: unknown key (did you mean "offer"?)',
      'clients[2].services.use[0]: "SSH*" must be a service name, a prefix ending in *, or *',
      "clients[3].extra: unknown key",
      "clients[3].limits.tunnels: 70000 must be an integer from 0 to 65535",
      "clients[3].limits.streams: 0 must be an integer from 1 to 1000000",
      "clients[3].name: duplicate of clients[0].name",
      "clients[3].token: same token as clients[0].token",
      'clients[4]: "not an object" must be an object',
    ];
    for (const line of expected) {
      assert.ok(got.includes(line), `missing: ${line}\ngot:\n${got.join("\n")}`);
    }
    assert.equal(got.length, expected.length, got.join("\n"));
  });

  const single: [string, Record<string, unknown>, string][] = [
    ["top level not an object", { __raw: [] }, ": [] must be an object"],
    ["empty clients", doc({ clients: [] }), "clients: no clients: nobody could connect"],
    ["clients not an array", doc({ clients: {} }), "clients: {} must be an array"],
    [
      "missing token",
      doc({ clients: [{ name: "a" }] }),
      "clients[0].token: required (a token or sha256:<hex> hash)",
    ],
    [
      "token with whitespace",
      doc({ clients: [{ name: "a", token: TOKEN_A + "\n" }] }),
      "clients[0].token: token has leading or trailing whitespace",
    ],
    [
      "same token as admin",
      doc({ clients: [{ name: "a", token: ADMIN }] }),
      "clients[0].token: same token as adminToken",
    ],
    [
      "hashed and plain duplicate",
      doc({ clients: [{ name: "a", token: TOKEN_A }, { name: "b", token: hashToken(TOKEN_A) }] }),
      "clients[1].token: same token as clients[0].token",
    ],
    [
      "admin on without token",
      doc({ adminToken: null }),
      "adminToken: required while listen.admin is on (or set listen.admin to null)",
    ],
    [
      "both transports off",
      doc({ listen: { tcp: null, websocket: null } }),
      "listen: tcp and websocket are both off; enable one",
    ],
    [
      "listener conflict",
      doc({ listen: { websocket: "127.0.0.1:7000" } }),
      "listen.websocket: same address as listen.tcp",
    ],
    ["tls not an object", doc({ tls: "yes" }), 'tls: "yes" must be an object'],
    [
      "0 without ranges",
      doc({ clients: [{ name: "a", token: TOKEN_A, expose: { ports: [0] } }] }),
      "clients[0].expose.ports: 0 (any port) needs at least one port or range to pick from",
    ],
    [
      "forward not an array",
      doc({ clients: [{ name: "a", token: TOKEN_A, forward: "db:1" }] }),
      'clients[0].forward: "db:1" must be an array',
    ],
    [
      "forward open proxy",
      doc({ clients: [{ name: "a", token: TOKEN_A, forward: ["*:*"] }] }),
      'clients[0].forward[0]: "*:*" a bare * host would make an open proxy; list hosts, *.domain or CIDRs',
    ],
    [
      "forward localhost",
      doc({ clients: [{ name: "a", token: TOKEN_A, forward: ["localhost:22"] }] }),
      'clients[0].forward[0]: "localhost:22" host names never reach loopback; write 127.0.0.1:PORTS or [::1]:PORTS instead',
    ],
    [
      "forward odd IPv4",
      doc({ clients: [{ name: "a", token: TOKEN_A, forward: ["0x7f.1:22"] }] }),
      'clients[0].forward[0]: "0x7f.1:22" write the address canonically: 127.0.0.1',
    ],
    [
      "forward host bits",
      doc({ clients: [{ name: "a", token: TOKEN_A, forward: ["10.1.0.0/8:*"] }] }),
      'clients[0].forward[0]: "10.1.0.0/8:*" host bits set; did you mean 10.0.0.0/8?',
    ],
    [
      "client limit above the daemon's",
      doc({
        limits: { streamsPerSession: 100 },
        clients: [{ name: "a", token: TOKEN_A, limits: { tunnels: 17, streams: 101 } }],
      }),
      "clients[0].limits.tunnels: 17 exceeds limits.tunnelsPerClient (16)",
    ],
    [
      "client streams above the daemon's",
      doc({
        limits: { streamsPerSession: 100 },
        clients: [{ name: "a", token: TOKEN_A, limits: { streams: 101 } }],
      }),
      "clients[0].limits.streams: 101 exceeds limits.streamsPerSession (100)",
    ],
    [
      "client visitors above the daemon's",
      doc({
        limits: { visitorsPerClient: 500 },
        clients: [{ name: "a", token: TOKEN_A, limits: { visitors: 501 } }],
      }),
      "clients[0].limits.visitors: 501 exceeds limits.visitorsPerClient (500)",
    ],
    [
      "a tunnel's visitor cap of 0",
      doc({ limits: { visitorsPerTunnel: 0 } }),
      "limits.visitorsPerTunnel: 0 must be an integer from 1 to 1000000",
    ],
    [
      "unknown client key typo",
      doc({ clients: [{ name: "a", token: TOKEN_A, fowrard: ["db:1"] }] }),
      'clients[0].fowrard: unknown key (did you mean "forward"?)',
    ],
  ];
  for (const [label, raw, expected] of single) {
    it(label, () => {
      const got = errors(raw.__raw ?? raw);
      assert.ok(got.includes(expected), `expected ${expected}\ngot:\n${got.join("\n")}`);
      assert.equal(validateConfig(raw.__raw ?? raw).config, undefined);
    });
  }

  it("error messages never quote a plain token", () => {
    const secret = "secret-but-short";
    const result = validateConfig(
      doc({ clients: [{ name: "a", token: secret }, { name: "b", token: secret }] }),
    );
    assert.ok(result.errors.length >= 2);
    assert.ok(!JSON.stringify(result).includes(secret));
  });

  const warned: [string, Record<string, unknown>, string][] = [
    ["clear text off loopback", doc({ listen: { tcp: "0.0.0.0:7000" } }), "listen.tcp"],
    [
      "admin off loopback even with TLS",
      doc({ tls: { cert: "c", key: "k" }, listen: { admin: "10.0.0.1:7081" } }),
      "listen.admin",
    ],
    [
      "an HTTPS port with no certificate and no ACME (TLS tunnels only)",
      doc({ listen: { https: "127.0.0.1:8443" } }),
      "listen.https",
    ],
    [
      "bind on every interface",
      doc({
        clients: [{ name: "a", token: TOKEN_A, expose: { ports: [80], bindHosts: ["0.0.0.0"] } }],
      }),
      "clients[0].expose.bindHosts[0]",
    ],
  ];
  for (const [label, raw, path] of warned) {
    it(`warns: ${label}`, () => {
      const result = validateConfig(raw);
      assert.deepEqual(result.errors, []);
      assert.ok(result.config);
      assert.deepEqual(result.warnings.map((w) => w.path), [path]);
    });
  }
  it("no warning for TLS listeners off loopback or localhost", () => {
    const a = validateConfig(
      doc({
        tls: { cert: "c", key: "k" },
        listen: { tcp: "0.0.0.0:7000", websocket: "[::]:7080" },
      }),
    );
    assert.deepEqual(a.warnings, []);
    const b = validateConfig(doc({ listen: { tcp: "localhost:7000", websocket: "[::1]:7080" } }));
    assert.deepEqual(b.warnings, []);
  });
});

describe("config: loadConfig", () => {
  const file = (text: string) => () => Promise.resolve(text);

  it("no config anywhere: defaults, a generated default token and admin token", async () => {
    const r = await loadConfig({ env: {} });
    assert.deepEqual(r.errors, []);
    assert.ok(r.config);
    assert.match(r.generated.token ?? "", /^tmx_[A-Za-z0-9_-]{43}$/);
    assert.match(r.generated.adminToken ?? "", /^tmx_[A-Za-z0-9_-]{43}$/);
    assert.notEqual(r.generated.token, r.generated.adminToken);
    const [client] = r.config.clients;
    assert.equal(client.name, "default");
    assert.equal(client.tokenHash, hashToken(r.generated.token!));
    assert.equal(r.config.adminTokenHash, hashToken(r.generated.adminToken!));
    assert.deepEqual(client.expose.ports, [{ from: 1024, to: 65535 }]);
    assert.equal(client.expose.anyPort, true);
    assert.ok(canExpose(client, "127.0.0.1", 1024).ok);
    assert.ok(canExpose(client, "127.0.0.1", 0).ok);
    assert.ok(!canExpose(client, "127.0.0.1", 1023).ok);
    assert.ok(!canExpose(client, "0.0.0.0", 8080).ok);
    assert.deepEqual(client.forward, []); // secure by default: forwards nothing
    assert.ok(!matchForward(client, "8.8.8.8", 53).ok);
  });

  it("TUNNELMUX_TOKEN and TUNNELMUX_ADMIN_TOKEN replace the generated ones", async () => {
    const r = await loadConfig({ env: { TUNNELMUX_TOKEN: TOKEN_A, TUNNELMUX_ADMIN_TOKEN: ADMIN } });
    assert.deepEqual(r.generated, {});
    assert.equal(r.config?.clients[0].tokenHash, hashToken(TOKEN_A));
    assert.equal(r.config?.adminTokenHash, hashToken(ADMIN));
  });

  it("no admin token is generated when the admin listener is off", async () => {
    const r = await loadConfig({
      env: { TUNNELMUX_TOKEN: TOKEN_A, TUNNELMUX_LISTEN_ADMIN: "off" },
    });
    assert.deepEqual(r.generated, {});
    assert.equal(r.config?.listen.admin, null);
    assert.equal(r.config?.adminTokenHash, null);
  });

  it("precedence: defaults < file < environment < flags", async () => {
    const text =
      `{ "listen": { "tcp": "127.0.0.1:1001", "websocket": "127.0.0.1:2001" }, "dataDir": "/file",
      "log": { "level": "warn" } }`;
    const env = {
      TUNNELMUX_LISTEN_TCP: "127.0.0.1:1002",
      TUNNELMUX_LOG_LEVEL: "error",
      TUNNELMUX_TOKEN: TOKEN_A,
    };
    const flags = { config: "f.jsonc", listenTcp: "127.0.0.1:1003" };
    const r = await loadConfig({ env, flags, readFile: file(text) });
    assert.deepEqual(r.errors, []);
    const c = r.config!;
    assert.equal(c.listen.tcp?.port, 1003); // flag over env over file
    assert.equal(c.log.level, "error"); // env over file
    assert.equal(c.listen.websocket?.port, 2001); // file over default
    assert.equal(c.dataDir, "/file");
    assert.equal(c.listen.admin?.port, 7081); // default
    assert.equal(c.log.format, "auto"); // default inside a partly overridden object
    assert.equal(r.file, "f.jsonc");
  });

  it("every env variable and flag lands where documented", async () => {
    const env = {
      TUNNELMUX_TOKEN: TOKEN_A,
      TUNNELMUX_ADMIN_TOKEN: ADMIN,
      TUNNELMUX_LISTEN_TCP: "127.0.0.1:1",
      TUNNELMUX_LISTEN_WS: "127.0.0.1:2",
      TUNNELMUX_LISTEN_ADMIN: "127.0.0.1:3",
      TUNNELMUX_DATA_DIR: "/env",
      TUNNELMUX_LOG_LEVEL: "debug",
      TUNNELMUX_LOG_FORMAT: "json",
      TUNNELMUX_TLS_CERT: "cert.pem",
      TUNNELMUX_TLS_KEY: "key.pem",
      TUNNELMUX_KEEPALIVE_INTERVAL_MS: "5000",
      TUNNELMUX_KEEPALIVE_TIMEOUT_MS: "2000",
    };
    const c = (await loadConfig({ env })).config!;
    assert.deepEqual([c.limits.keepAliveIntervalMs, c.limits.keepAliveTimeoutMs], [5000, 2000]);
    assert.deepEqual([c.listen.tcp?.port, c.listen.websocket?.port, c.listen.admin?.port], [
      1,
      2,
      3,
    ]);
    assert.deepEqual([c.dataDir, c.log.level, c.log.format], ["/env", "debug", "json"]);
    assert.deepEqual(c.tls, { cert: "cert.pem", key: "key.pem" });
    const flags = {
      listenTcp: "127.0.0.1:4",
      listenWebsocket: "off",
      listenAdmin: "127.0.0.1:6",
      dataDir: "/flag",
      logLevel: "warn",
      logFormat: "pretty",
      tlsCert: "c2",
      tlsKey: "k2",
      keepaliveIntervalMs: "700",
      keepaliveTimeoutMs: "800",
    };
    const d = (await loadConfig({ env, flags })).config!;
    assert.deepEqual([d.limits.keepAliveIntervalMs, d.limits.keepAliveTimeoutMs], [700, 800]);
    assert.deepEqual([d.listen.tcp?.port, d.listen.websocket, d.listen.admin?.port], [4, null, 6]);
    assert.deepEqual([d.dataDir, d.log.level, d.log.format], ["/flag", "warn", "pretty"]);
    assert.deepEqual(d.tls, { cert: "c2", key: "k2" });
  });

  it("the HTTPS port and its one certificate from the environment or flags", async () => {
    const file = `{"http": {"certificates": [{"cert": "file.pem", "key": "file.key"}]}}`;
    const readFile = () => Promise.resolve(file);
    const env = {
      TUNNELMUX_LISTEN_HTTPS: "0.0.0.0:443",
      TUNNELMUX_HTTPS_CERT: "env.pem",
      TUNNELMUX_HTTPS_KEY: "env.key",
    };
    const fromEnv = await loadConfig({ env, flags: { config: "f.json" }, readFile });
    assert.deepEqual(fromEnv.errors, []);
    assert.deepEqual(fromEnv.config!.listen.https, { hostname: "0.0.0.0", port: 443 });
    assert.deepEqual(fromEnv.config!.http.certificates, [{ cert: "env.pem", key: "env.key" }]);
    const fromFlags = await loadConfig({
      env,
      flags: { config: "f.json", listenHttps: "off", httpsCert: "flag.pem", httpsKey: "flag.key" },
      readFile,
    });
    assert.equal(fromFlags.config!.listen.https, null);
    assert.deepEqual(fromFlags.config!.http.certificates, [{ cert: "flag.pem", key: "flag.key" }]);
    // Half a pair is refused, naming where it came from.
    const half = await loadConfig({ flags: { httpsCert: "only.pem" } });
    assert.equal(half.errors[0].path, "http.certificates[0].key");
    assert.equal(half.errors[0].source, "--https-cert and --https-key");
  });

  it("a keepalive that is not a number is refused, naming its source", async () => {
    const r = await loadConfig({ env: { TUNNELMUX_KEEPALIVE_INTERVAL_MS: "30s" } });
    assert.equal(r.config, undefined);
    assert.equal(r.errors[0].path, "limits.keepAliveIntervalMs");
    assert.equal(r.errors[0].source, "TUNNELMUX_KEEPALIVE_INTERVAL_MS");
    const low = await loadConfig({ flags: { keepaliveTimeoutMs: "5" } });
    assert.equal(low.errors[0].source, "--keepalive-timeout-ms");
  });

  it("limits.httpResponseTimeoutMs: from the file, the environment or a flag, and validated", async () => {
    const readFile = () => Promise.resolve(`{"limits": {"httpResponseTimeoutMs": 5000}}`);
    const file = await loadConfig({ flags: { config: "f.json" }, readFile });
    assert.equal(file.config!.limits.httpResponseTimeoutMs, 5000);
    const env = { TUNNELMUX_HTTP_RESPONSE_TIMEOUT_MS: "7000" };
    assert.equal((await loadConfig({ env })).config!.limits.httpResponseTimeoutMs, 7000);
    const flag = await loadConfig({ env, flags: { httpResponseTimeoutMs: "9000" } });
    assert.equal(flag.config!.limits.httpResponseTimeoutMs, 9000);
    const word = await loadConfig({ env: { TUNNELMUX_HTTP_RESPONSE_TIMEOUT_MS: "60s" } });
    assert.equal(word.config, undefined);
    assert.deepEqual(
      [word.errors[0].path, word.errors[0].source],
      ["limits.httpResponseTimeoutMs", "TUNNELMUX_HTTP_RESPONSE_TIMEOUT_MS"],
    );
    assert.deepEqual(errors(doc({ limits: { httpResponseTimeoutMs: 0 } })), [
      "limits.httpResponseTimeoutMs: 0 must be an integer from 1 to 3600000",
    ]);
  });

  it("empty env values are unset", async () => {
    const r = await loadConfig({
      env: { TUNNELMUX_LISTEN_TCP: "", TUNNELMUX_TOKEN: "", TUNNELMUX_CONFIG: "" },
    });
    assert.deepEqual(r.errors, []);
    assert.equal(r.config?.listen.tcp?.port, 7000);
    assert.ok(r.generated.token);
    assert.equal(r.file, undefined);
  });

  it("TUNNELMUX_CONFIG names the file; the flag wins over it", async () => {
    const seen: string[] = [];
    const readFile = (p: string) => (seen.push(p), Promise.resolve(`{"dataDir": "${p}"}`));
    const a = await loadConfig({ env: { TUNNELMUX_CONFIG: "env.json" }, readFile });
    const b = await loadConfig({
      env: { TUNNELMUX_CONFIG: "env.json" },
      flags: { config: "flag.json" },
      readFile,
    });
    assert.deepEqual([a.config?.dataDir, b.config?.dataDir], ["env.json", "flag.json"]);
    assert.deepEqual(seen, ["env.json", "flag.json"]);
  });

  it("a file with clients replaces the default client and generates no client token", async () => {
    const text = `{ // clients only
      "clients": [{ "name": "laptop", "token": "${
      hashToken(TOKEN_B)
    }", "forward": ["db.internal:5432",], },],
    }`;
    const r = await loadConfig({ env: {}, flags: { config: "c.jsonc" }, readFile: file(text) });
    assert.deepEqual(r.errors, []);
    assert.deepEqual(r.config?.clients.map((c) => c.name), ["laptop"]);
    assert.equal(r.generated.token, undefined);
    assert.ok(r.generated.adminToken);
  });

  it("TUNNELMUX_TOKEN sets a file's client named default, or is ignored with a warning", async () => {
    const withDefault = `{"clients": [{"name": "default", "token": "${TOKEN_B}"}]}`;
    const a = await loadConfig({
      env: { TUNNELMUX_TOKEN: TOKEN_A },
      flags: { config: "a" },
      readFile: file(withDefault),
    });
    assert.equal(a.config?.clients[0].tokenHash, hashToken(TOKEN_A));
    const without = `{"clients": [{"name": "x", "token": "${TOKEN_B}"}]}`;
    const b = await loadConfig({
      env: { TUNNELMUX_TOKEN: TOKEN_A },
      flags: { config: "b" },
      readFile: file(without),
    });
    assert.equal(b.config?.clients[0].tokenHash, hashToken(TOKEN_B));
    assert.ok(b.warnings.some((w) => /TUNNELMUX_TOKEN is ignored/.test(w.message)));
  });

  it("errors from the environment name their variable and never echo tokens", async () => {
    const r = await loadConfig({
      env: { TUNNELMUX_LISTEN_TCP: "nope", TUNNELMUX_TOKEN: "too-short" },
    });
    assert.equal(r.config, undefined);
    assert.deepEqual(r.generated, {});
    const byPath = Object.fromEntries(r.errors.map((e) => [e.path, e.source]));
    assert.equal(byPath["listen.tcp"], "TUNNELMUX_LISTEN_TCP");
    assert.equal(byPath["clients[0].token"], "TUNNELMUX_TOKEN");
    assert.ok(!formatConfigReport(r).includes("too-short"));
    const f = await loadConfig({
      env: { TUNNELMUX_TOKEN: TOKEN_A },
      flags: { listenAdmin: "bad" },
    });
    assert.equal(f.errors.find((e) => e.path === "listen.admin")?.source, "--listen-admin");
  });

  it("a variable overriding the file's value is warned about (the image's TUNNELMUX_LISTEN_*)", async () => {
    const r = await loadConfig({
      env: { TUNNELMUX_LISTEN_TCP: "127.0.0.1:7000", TUNNELMUX_LISTEN_WS: "127.0.0.1:7080" },
      flags: { config: "c.jsonc" },
      readFile: file(
        JSON.stringify({
          listen: { tcp: "127.0.0.1:9000", websocket: "127.0.0.1:7080" },
          clients: [{ name: "a", token: TOKEN_A }],
        }),
      ),
    });
    assert.deepEqual(r.errors, []);
    assert.equal(r.config!.listen.tcp!.port, 7000, "the variable still wins");
    assert.deepEqual(r.warnings.map((w) => [w.path, w.message]), [
      [
        "listen.tcp",
        'TUNNELMUX_LISTEN_TCP=127.0.0.1:7000 overrides the config file\'s "127.0.0.1:9000" ' +
        "(unset the variable to use the file's)",
      ],
    ]);
  });

  it("a near-miss TUNNELMUX_ variable is warned about", async () => {
    const r = await loadConfig({
      env: { TUNNELMUX_TOKEN: TOKEN_A, TUNNELMUX_LISTEN_TPC: "x", TUNNELMUX_SERVER_URL: "y" },
    });
    assert.deepEqual(r.warnings.map((w) => w.message), [
      'unknown environment variable TUNNELMUX_LISTEN_TPC (did you mean "TUNNELMUX_LISTEN_TCP"?)',
    ]);
  });

  const fileErrors: [string, () => Promise<string>, RegExp][] = [
    [
      "unreadable file",
      () => Promise.reject(Object.assign(new Error("x"), { code: "ENOENT" })),
      /cannot read config file f \(ENOENT\)/,
    ],
    [
      "invalid JSON, with its line and column on every runtime",
      file(`{\n  "a": 1,\n  "b": }`),
      /^f: unexpected "}": expected a value at line 3 column 8$/,
    ],
    ["unterminated comment", file(`{"a": 1 /*`), /^f: unterminated \/\* comment at line 1/],
    ["top level array", file(`[]`), /^f: the top level must be an object/],
  ];
  for (const [label, readFile, expected] of fileErrors) {
    it(`file problem: ${label}`, async () => {
      const r = await loadConfig({ env: {}, flags: { config: "f" }, readFile });
      assert.equal(r.config, undefined);
      assert.equal(r.errors.length, 1);
      assert.match(r.errors[0].message, expected);
    });
  }

  it("reads a real file with node:fs", async () => {
    const { mkdtemp, writeFile, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const dir = await mkdtemp(join(tmpdir(), "tunnelmux-config-"));
    try {
      const path = join(dir, "daemon.jsonc");
      await writeFile(path, `{ /* real */ "dataDir": "/real", }`);
      const r = await loadConfig({ env: { TUNNELMUX_TOKEN: TOKEN_A }, flags: { config: path } });
      assert.equal(r.config?.dataDir, "/real");
    } finally {
      await rm(dir, { recursive: true });
    }
  });
});

describe("config: formatConfigReport", () => {
  it("lists every error with its path and source", async () => {
    const text =
      `{"clients": [{"name": "a", "token": "${TOKEN_A}", "forward": ["db:99999", "*:*"]}]}`;
    const r = await loadConfig({
      env: { TUNNELMUX_LISTEN_TCP: "x" },
      flags: { config: "d.jsonc" },
      readFile: () => Promise.resolve(text),
    });
    const report = formatConfigReport(r);
    assert.match(report, /^config invalid \(d\.jsonc\): 3 errors$/m);
    assert.match(report, /^ {2}listen\.tcp \[from TUNNELMUX_LISTEN_TCP\]: "x" must be HOST:PORT/m);
    assert.match(
      report,
      /^ {2}clients\[0\]\.forward\[0\]: "db:99999" port out of range \(1 to 65535\)$/m,
    );
    assert.match(report, /^ {2}clients\[0\]\.forward\[1\]: "\*:\*" a bare \* host/m);
  });

  it("summarises a valid config with its warnings and no tokens", async () => {
    const r = await loadConfig({ env: { TUNNELMUX_LISTEN_TCP: "0.0.0.0:7000" } });
    const report = formatConfigReport(r);
    assert.match(report, /^config OK \(embedded defaults\): 1 client$/m);
    assert.match(
      report,
      /tcp 0\.0\.0\.0:7000, websocket 127\.0\.0\.1:7080\/tunnel, admin 127\.0\.0\.1:7081/,
    );
    assert.match(report, /client default: 0 forward rules, expose 1024-65535/);
    assert.doesNotMatch(report, /https/, "no HTTP(S) line while both ports are off");
    const web = formatConfigReport(
      await loadConfig({
        env: { TUNNELMUX_LISTEN_HTTPS: "0.0.0.0:443", TUNNELMUX_HTTP_DOMAIN: "t.example" },
      }),
    );
    assert.match(
      web,
      /^ {2}http off, https 0\.0\.0\.0:443, domain t\.example, 0 certificate files$/m,
    );
    assert.match(report, /^1 warning:$/m);
    assert.match(
      report,
      /listen\.tcp \[from TUNNELMUX_LISTEN_TCP\]: listens beyond loopback without TLS/,
    );
    assert.ok(!report.includes(r.generated.token!));
    assert.ok(!report.includes(r.generated.adminToken!));
  });
});

describe("config: cluster", () => {
  const KEY = "cluster-key-0123456789abcdefgh";
  const PREVIOUS = "previous-cluster-key-0123456789";
  const cluster = (extra: Record<string, unknown> = {}) =>
    doc({
      cluster: {
        servers: ["nats://127.0.0.1:4222"],
        key: KEY,
        advertise: "10.0.0.1:7090",
        ...extra,
      },
    });

  it("absent: a single node", () => {
    assert.equal(validateConfig(doc()).config?.cluster, null);
  });

  it("takes its defaults: node from the host name, listen 0.0.0.0:7090, TTL 5 s, all visitors", () => {
    const c = validateConfig(cluster()).config!.cluster!;
    assert.match(c.node, /^[A-Za-z0-9][A-Za-z0-9_-]*$/);
    assert.deepEqual(
      [c.listen.hostname, c.listen.port, c.presenceTtlMs, c.visitors, c.replicas, c.bucketPrefix],
      ["0.0.0.0", 7090, 5000, "all", 1, "tunnelmux"],
    );
    assert.equal(c.rereadSpreadMs, 3000, "re-reads after NATS came back spread over 3 s");
    assert.equal(validateConfig(cluster({ rereadSpreadMs: 0 })).config!.cluster!.rereadSpreadMs, 0);
    assert.deepEqual([c.servers, c.auth, c.tunnelHost], [["nats://127.0.0.1:4222"], {}, null]);
  });

  it("advertise defaults to a listen address that is not a wildcard", () => {
    const c = validateConfig(cluster({ advertise: undefined, listen: "10.0.0.2:7091" })).config!;
    assert.equal(c.cluster!.advertise, "10.0.0.2:7091");
  });

  it("listen on port 0 needs no advertise when its host is an address: the bound port is advertised", () => {
    for (const [listen, advertise] of [["127.0.0.1:0", "127.0.0.1:0"], ["[::1]:0", "[::1]:0"]]) {
      const r = validateConfig(cluster({ advertise: undefined, listen }));
      assert.deepEqual(r.errors, [], listen);
      assert.equal(r.config!.cluster!.listen.port, 0);
      // Port 0 stays in the config: the node replaces it with the bound port when it joins.
      assert.equal(r.config!.cluster!.advertise, advertise);
    }
  });

  it("advertise may give port 0 (the bound port), with a wildcard listen too, but not a wildcard host", () => {
    const c = validateConfig(cluster({ listen: "0.0.0.0:0", advertise: "10.0.0.3:0" })).config!;
    assert.deepEqual([c.cluster!.listen.port, c.cluster!.advertise], [0, "10.0.0.3:0"]);
    for (const advertise of ["0.0.0.0:7090", "[::]:0"]) {
      assert.deepEqual(errors(cluster({ advertise })), [
        `cluster.advertise: "${advertise}" is a wildcard address: name one other nodes can dial`,
      ]);
    }
  });

  const bad: [string, Record<string, unknown>, string][] = [
    ["no servers", { servers: [] }, "cluster.servers: name at least one NATS server"],
    [
      "an http URL",
      { servers: ["http://x:1"] },
      'cluster.servers[0]: "http://x:1" must be nats://HOST:PORT',
    ],
    [
      "a short key",
      { key: "short" },
      "cluster.key: the cluster key must be a string of 24+ characters (or TUNNELMUX_CLUSTER_KEY)",
    ],
    [
      "a wildcard listen without advertise",
      { advertise: undefined },
      "cluster.advertise: required when cluster.listen is a wildcard address",
    ],
    [
      "a wildcard listen on port 0 without advertise",
      { advertise: undefined, listen: "[::]:0" },
      "cluster.advertise: required when cluster.listen is a wildcard address",
    ],
    [
      "two kinds of credentials",
      { token: "t", credsFile: "/c" },
      "cluster: give one kind of NATS credentials, not several",
    ],
    ["a user without password", { user: "u" }, "cluster: user and password go together"],
    [
      "a node name with a dot",
      { node: "a.b" },
      'cluster.node: "a.b" must be letters, digits, "_" or "-" (up to 64)',
    ],
    [
      "a TTL below 1 s",
      { presenceTtlMs: 10 },
      "cluster.presenceTtlMs: 10 must be an integer from 1000 to 600000",
    ],
    [
      "a negative re-read spread",
      { rereadSpreadMs: -1 },
      "cluster.rereadSpreadMs: -1 must be an integer from 0 to 60000",
    ],
    [
      "a re-read spread over a minute",
      { rereadSpreadMs: 600_000 },
      "cluster.rereadSpreadMs: 600000 must be an integer from 0 to 60000",
    ],
    [
      "an unknown visitors mode",
      { visitors: "some" },
      'cluster.visitors: "some" must be one of "all", "owner"',
    ],
    ["a typo", { sever: [] }, 'cluster.sever: unknown key (did you mean "servers"?)'],
    [
      "a short previous key",
      { previousKeys: [PREVIOUS, "short"] },
      "cluster.previousKeys[1]: a cluster key must be a string of 24+ characters",
    ],
    [
      "previous keys not in a list",
      { previousKeys: 7 },
      "cluster.previousKeys: must be an array of keys",
    ],
    [
      "five previous keys",
      { previousKeys: [1, 2, 3, 4, 5].map((i) => `${PREVIOUS}-${i}`) },
      "cluster.previousKeys: at most 4 keys (drop those no node signs with)",
    ],
  ];
  for (const [what, extra, message] of bad) {
    it(`refuses ${what}, with its path`, () => {
      assert.ok(errors(cluster(extra)).includes(message), errors(cluster(extra)).join("\n"));
    });
  }

  it("flags and environment fill the section; secrets only from the environment or the file", async () => {
    const env = {
      TUNNELMUX_TOKEN: TOKEN_A,
      TUNNELMUX_CLUSTER_SERVERS: "nats://a:4222, nats://b:4222",
      TUNNELMUX_CLUSTER_KEY: KEY,
      TUNNELMUX_CLUSTER_TOKEN: "nats-token",
      TUNNELMUX_CLUSTER_ADVERTISE: "10.0.0.3:7090",
    };
    const flags = {
      clusterNode: "n7",
      clusterListen: "127.0.0.1:7095",
      clusterTunnelHost: "127.0.0.7",
    };
    const r = await loadConfig({ env, flags });
    assert.deepEqual(r.errors, []);
    const c = r.config!.cluster!;
    assert.deepEqual(
      [c.servers, c.key, c.auth, c.node, c.listen.port, c.advertise, c.tunnelHost],
      [
        ["nats://a:4222", "nats://b:4222"],
        KEY,
        { token: "nats-token" },
        "n7",
        7095,
        "10.0.0.3:7090",
        "127.0.0.7",
      ],
    );
    assert.deepEqual(c.previousKeys, []);
    // A cluster key alone makes no cluster.
    const alone = await loadConfig({
      env: { TUNNELMUX_TOKEN: TOKEN_A, TUNNELMUX_CLUSTER_KEY: KEY },
    });
    assert.equal(alone.config?.cluster, null);
  });

  it("takes previous keys from the file, in order, each once; never quoting one", () => {
    const other = `${PREVIOUS}-other`;
    const result = validateConfig(cluster({ previousKeys: [PREVIOUS, KEY, other, PREVIOUS] }));
    assert.deepEqual(result.errors, []);
    assert.deepEqual(result.config!.cluster!.key, KEY);
    assert.deepEqual(result.config!.cluster!.previousKeys, [PREVIOUS, other]);
    assert.deepEqual(
      result.warnings.map((w) => `${w.path}: ${w.message}`),
      [1, 3].map((i) =>
        `cluster.previousKeys[${i}]: repeats a key given before (cluster.key or this list); used once`
      ),
    );
    const short = "short-secret";
    const refused = validateConfig(cluster({ previousKeys: [short] }));
    assert.ok(!JSON.stringify(refused).includes(short));
  });

  it("takes previous keys from TUNNELMUX_CLUSTER_PREVIOUS_KEYS, comma-separated, over the file's", async () => {
    const env = {
      TUNNELMUX_TOKEN: TOKEN_A,
      TUNNELMUX_CLUSTER_SERVERS: "nats://a:4222",
      TUNNELMUX_CLUSTER_ADVERTISE: "10.0.0.3:7090",
      TUNNELMUX_CLUSTER_KEY: KEY,
      TUNNELMUX_CLUSTER_PREVIOUS_KEYS: `${PREVIOUS}-1, ${PREVIOUS}-2`,
    };
    const file = JSON.stringify({ cluster: { previousKeys: [`${PREVIOUS}-file`] } });
    const r = await loadConfig({
      env,
      flags: { config: "c.json" },
      readFile: () => Promise.resolve(file),
    });
    assert.deepEqual(r.errors, []);
    assert.deepEqual(r.config!.cluster!.previousKeys, [`${PREVIOUS}-1`, `${PREVIOUS}-2`]);
    // A bad one is named with its source, and not quoted.
    const bad = await loadConfig({
      env: { ...env, TUNNELMUX_CLUSTER_PREVIOUS_KEYS: `${PREVIOUS}-1,tiny-secret` },
    });
    assert.deepEqual(bad.errors, [{
      path: "cluster.previousKeys[1]",
      message: "a cluster key must be a string of 24+ characters",
      source: "TUNNELMUX_CLUSTER_PREVIOUS_KEYS",
    }]);
    assert.ok(!formatConfigReport(bad).includes("tiny-secret"));
    // Previous keys alone make no cluster.
    const alone = await loadConfig({
      env: { TUNNELMUX_TOKEN: TOKEN_A, TUNNELMUX_CLUSTER_PREVIOUS_KEYS: PREVIOUS },
    });
    assert.equal(alone.config?.cluster, null);
  });
});

describe("config: expose.anyPort", () => {
  const exposeOf = (expose: Record<string, unknown>) =>
    validateConfig(doc({ clients: [{ name: "a", token: TOKEN_A, expose }] })).config!.clients[0];

  it("a range allows any port within it (port 0) by default, as the README's example expects", () => {
    const client = exposeOf({ ports: ["8000-8100"] });
    assert.equal(client.expose.anyPort, true);
    assert.equal(canExpose(client, "127.0.0.1", 0).ok, true);
  });

  it("anyPort: false makes port 0 an error that says what to change", () => {
    const client = exposeOf({ ports: ["8000-8100"], anyPort: false });
    const decision = canExpose(client, "127.0.0.1", 0);
    assert.equal(decision.ok, false);
    assert.match(
      (decision as { message: string }).message,
      /ask for a port in 8000-8100, or set its expose.anyPort to true/,
    );
  });

  it("anyPort must be a boolean", () => {
    const problems = errors(doc({
      clients: [{ name: "a", token: TOKEN_A, expose: { ports: [8000], anyPort: "yes" } }],
    }));
    assert.ok(
      problems.includes('clients[0].expose.anyPort: "yes" must be true or false'),
      problems.join("\n"),
    );
  });
});

describe("config: visitors and trustedProxies", () => {
  it("a client's visitors replace the daemon-wide ones; none at all is no rule", () => {
    const { config, errors } = validateConfig(doc({
      visitors: { connectionsPerSecond: 20, deny: ["198.51.100.7"] },
      trustedProxies: ["10.0.0.0/8", "2001:DB8::/32"],
      clients: [
        { name: "a", token: TOKEN_A, visitors: { allow: ["203.0.113.0/24"] } },
        { name: "b", token: TOKEN_B },
      ],
    }));
    assert.deepEqual(errors, []);
    assert.deepEqual(config!.visitors, { connectionsPerSecond: 20, deny: ["198.51.100.7/32"] });
    assert.deepEqual(config!.clients[0].visitors, { allow: ["203.0.113.0/24"] });
    assert.deepEqual(config!.clients[1].visitors, config!.visitors);
    assert.deepEqual(config!.trustedProxies, ["10.0.0.0/8", "2001:db8::/32"]);
    const plain = validateConfig(doc()).config!;
    assert.deepEqual([plain.visitors, plain.clients[0].visitors, plain.trustedProxies], [
      {},
      {},
      [],
    ]);
  });

  it("a client's bandwidth across its tunnels, in limits", () => {
    const valid = validateConfig(doc({
      clients: [{ name: "a", token: TOKEN_A, limits: { bandwidth: { out: 1048576 } } }],
    }));
    assert.deepEqual(valid.errors, []);
    assert.deepEqual(valid.config!.clients[0].limits.bandwidth, { out: 1048576 });
    assert.deepEqual(
      errors(doc({
        clients: [{ name: "a", token: TOKEN_A, limits: { bandwidth: { in: 0, up: 1 } } }],
      })),
      [
        `clients[0].limits.bandwidth.up: unknown key (did you mean "in"?)`,
        `clients[0].limits.bandwidth.in: 0 must be an integer from 1 to 1000000000000`,
      ],
    );
  });

  it("names the bad field of a policy and a bad trusted network by their paths", () => {
    assert.deepEqual(
      errors(doc({
        visitors: { denny: [] },
        trustedProxies: ["10.0.0.1/8", 7],
        clients: [{ name: "a", token: TOKEN_A, visitors: { bandwidth: { in: -1 } } }],
      })),
      [
        `visitors.denny: unknown key (did you mean "deny"?)`,
        `trustedProxies[0]: "10.0.0.1/8" is not a network: host bits set; did you mean 10.0.0.0/8?`,
        `trustedProxies[1]: 7 is not a network: must be a string`,
        `clients[0].visitors.bandwidth.in: -1 must be an integer from 1 to 1000000000000`,
      ],
    );
  });
  it("identityProviders: none by default, URL prefixes kept canonical, bad ones named", () => {
    assert.deepEqual(validateConfig(doc()).config!.identityProviders, []);
    const { config } = validateConfig(doc({ identityProviders: ["HTTPS://IdP.test/realms/a"] }));
    assert.deepEqual(config!.identityProviders, ["https://idp.test/realms/a"]);
    assert.deepEqual(errors(doc({ identityProviders: ["idp.test", "ftp://idp.test/"] })), [
      `identityProviders[0]: "idp.test" is not a URL`,
      `identityProviders[1]: "ftp://idp.test/" must be an http or https URL`,
    ]);
  });
});
