import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clientSettings, formatSettingsErrors } from "./settings.ts";
import { verifyPassword } from "../tunnel/policy/password_hash.ts";

const dir = mkdtempSync(join(tmpdir(), "tunnelmux-settings-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const TOKEN = "a-token-of-24-characters-or-more";

describe("clientSettings", () => {
  it("gives the HTTP tunnels a policy.http: --basic-auth hashed here, the file's httpPolicy checked", async () => {
    const file = join(dir, "policy.json");
    writeFileSync(
      file,
      JSON.stringify({
        httpPolicy: { requestHeaders: { remove: ["x-debug"] } },
        basicAuth: [
          "carol:scrypt:16384:8:1:AAAAAAAAAAAAAAAAAAAAAA:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        ],
      }),
    );
    const { settings, errors } = clientSettings({
      flags: {
        config: file,
        server: ["tcp://a:7000"],
        http: ["app=127.0.0.1:3000"],
        expose: ["0=127.0.0.1:4000"],
        "basic-auth": ["alice:pw"],
        "host-rewrite": "localhost:3000",
      },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.deepEqual(errors, []);
    const [port, app] = [settings!.exposes[0], settings!.exposes[1]];
    assert.equal(port.policy, undefined, "a port's tunnel takes no policy.http");
    const policy = app.policy!.http!;
    assert.deepEqual(policy.requestHeaders, { remove: ["x-debug"] });
    assert.equal(policy.hostRewrite, "localhost:3000");
    assert.deepEqual(policy.basicAuth!.map((u) => u.user), ["carol", "alice"]);
    const hash = policy.basicAuth![1].passwordHash;
    assert.match(hash, /^scrypt:\d+:\d+:\d+:[\w-]+:[\w-]+$/, "a hash, not the password");
    assert.ok(await verifyPassword("pw", hash), "alice's password, hashed");

    const bad = clientSettings({
      flags: {
        server: ["tcp://a:7000"],
        http: ["app=127.0.0.1:3000"],
        "basic-auth": ["nocolon"],
        "host-rewrite": "a b",
      },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.deepEqual(bad.errors.map((e) => e.where), ["--basic-auth", "--host-rewrite"]);
  });

  it("takes flags and variables alone, as before config files", () => {
    const { settings, errors } = clientSettings({
      flags: {
        server: ["tcp://a:7000,tcp://b:7000"],
        expose: ["127.0.0.1:8080=127.0.0.1:3000", "0=[::1]:4000"],
        forward: ["15432=10.0.0.5:5432"],
        "forward-udp": ["5300=10.0.0.2:53"],
        use: ["127.0.0.1:2222=ssh-box"],
        offer: ["db=127.0.0.1:5432"],
        health: "http:/ready=204",
        "health-interval-ms": "250",
        ha: "2",
      },
      env: { TUNNELMUX_TOKEN: TOKEN, TUNNELMUX_KEEPALIVE_INTERVAL_MS: "1500" },
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(settings!.servers, ["tcp://a:7000", "tcp://b:7000"]);
    assert.equal(settings!.ha, 2);
    assert.equal(settings!.keepAliveInterval, 1500);
    assert.deepEqual(
      settings!.exposes.map((e) => [e.bindHost, e.remotePort, e.local]),
      [["127.0.0.1", 8080, "127.0.0.1:3000"], [undefined, 0, "[::1]:4000"]],
    );
    assert.deepEqual(settings!.exposes[0].health, {
      check: { kind: "http", path: "/ready", status: 204 },
      intervalMs: 250,
    });
    assert.deepEqual(
      settings!.forwards.map((f) => [f.listen, f.target ?? f.service, f.protocol]),
      [
        ["127.0.0.1:15432", "10.0.0.5:5432", undefined],
        ["127.0.0.1:5300", "10.0.0.2:53", "udp"],
        ["127.0.0.1:2222", "ssh-box", undefined],
      ],
    );
    assert.deepEqual(settings!.offers.map((o) => [o.name, o.local]), [["db", "127.0.0.1:5432"]]);
  });

  it("takes the stream window in bytes, with a suffix, from a flag, a variable or the file", () => {
    const base = { server: ["tcp://a:7000"], expose: ["8080=127.0.0.1:3000"] };
    const env = { TUNNELMUX_TOKEN: TOKEN };
    assert.equal(clientSettings({ flags: base, env }).settings!.streamWindow, 6 * 1024 * 1024);
    const flag = clientSettings({ flags: { ...base, "stream-window": "32m" }, env });
    assert.equal(flag.settings!.streamWindow, 32 * 1024 * 1024);
    const variable = clientSettings({
      flags: base,
      env: { ...env, TUNNELMUX_STREAM_WINDOW: "524288" },
    });
    assert.equal(variable.settings!.streamWindow, 524288);
    const file = join(dir, "window.json");
    writeFileSync(
      file,
      JSON.stringify({
        server: "tcp://a:7000",
        expose: ["8080=127.0.0.1:3000"],
        streamWindow: 1048576,
      }),
    );
    assert.equal(clientSettings({ flags: { config: file }, env }).settings!.streamWindow, 1048576);
    for (const bad of ["100k", "65m", "lots"]) {
      const { settings, errors } = clientSettings({
        flags: { ...base, "stream-window": bad },
        env,
      });
      assert.equal(settings, undefined, bad);
      assert.deepEqual(errors.map((e) => e.where), ["--stream-window"]);
    }
  });

  it("takes UDP tunnels from --expose-udp and exposeUdp, apart from TCP ones of the same port", () => {
    const file = join(dir, "udp.json");
    writeFileSync(
      file,
      JSON.stringify({ exposeUdp: ["5353=127.0.0.1:53"], proxyProtocol: "v2", health: "tcp" }),
    );
    const { settings, errors } = clientSettings({
      flags: {
        config: file,
        server: ["tcp://a:7000"],
        expose: ["5353=127.0.0.1:53"],
        "expose-udp": ["[::1]:0=[::1]:5300"],
        "allow-ip": ["10.0.0.0/8"],
      },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(
      settings!.exposes.map((e) => [e.key, e.protocol, e.bindHost, e.remotePort, e.local]),
      [
        ["5353=127.0.0.1:53", undefined, undefined, 5353, "127.0.0.1:53"],
        ["udp 5353=127.0.0.1:53", "udp", undefined, 5353, "127.0.0.1:53"],
        ["udp [::1]:0=[::1]:5300", "udp", "::1", 0, "[::1]:5300"],
      ],
    );
    const [tcp, udp] = settings!.exposes;
    assert.equal(tcp.proxyProtocol, "v2");
    assert.equal(udp.proxyProtocol, undefined, "a UDP flow takes no PROXY header");
    assert.equal(udp.health, undefined, "nor a TCP health check");
    assert.deepEqual(udp.policy, { allow: ["10.0.0.0/8"] }, "the visitor policy applies");

    const bad = clientSettings({
      flags: {
        server: ["tcp://a:7000"],
        "expose-udp": ["5353", "70000=127.0.0.1:53", "53=nowhere"],
      },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.deepEqual(bad.errors.map((e) => e.where), [
      "--expose-udp",
      "--expose-udp",
      "--expose-udp",
    ]);
    // A group's UDP port: every member names it; port 0 is refused, saying why.
    const grouped = clientSettings({
      flags: { server: ["tcp://a:7000"], group: "web", "expose-udp": ["53=127.0.0.1:53"] },
      env: { TUNNELMUX_TOKEN: TOKEN, TUNNELMUX_GROUP_KEY: "a-group-key-of-24-characters-ok" },
    });
    assert.deepEqual(grouped.errors, []);
    assert.equal(grouped.settings?.exposes[0].protocol, "udp");
    assert.equal(grouped.settings?.exposes[0].group, "web");
    const anyPort = clientSettings({
      flags: { server: ["tcp://a:7000"], group: "web", "expose-udp": ["0=127.0.0.1:53"] },
      env: { TUNNELMUX_TOKEN: TOKEN, TUNNELMUX_GROUP_KEY: "a-group-key-of-24-characters-ok" },
    });
    assert.match(formatSettingsErrors(anyPort.errors), /group's UDP port must be named, not 0/);
  });

  it("reads a JSONC file: its lists first, then the flags'; flags win over its values; paths are relative to it", () => {
    writeFileSync(join(dir, "token"), `${TOKEN}\n`);
    writeFileSync(join(dir, "group-key"), "a-group-key-of-24-characters-ok\n");
    const file = join(dir, "client.jsonc");
    writeFileSync(
      file,
      `{
        // comments and trailing commas are fine
        "server": ["tcp://file:7000"],
        "tokenFile": "token",
        "group": "web",
        "groupKeyFile": "group-key",
        "ha": 3,
        "reconnect": false,
        "expose": ["8080=127.0.0.1:3000"],
        "offer": ["db=127.0.0.1:5432"],
      }`,
    );
    const { settings, errors } = clientSettings({
      flags: { config: file, ha: "2", expose: ["9090=127.0.0.1:4000"] },
      env: {},
    });
    assert.deepEqual(errors, []);
    assert.equal(settings!.file, file);
    assert.deepEqual(settings!.servers, ["tcp://file:7000"]);
    assert.equal(settings!.token, TOKEN);
    assert.equal(settings!.ha, 2, "the flag wins");
    assert.equal(settings!.reconnect, false);
    assert.deepEqual(settings!.exposes.map((e) => e.key), [
      "8080=127.0.0.1:3000",
      "9090=127.0.0.1:4000",
    ]);
    assert.equal(settings!.exposes[0].group, "web");
    assert.equal(settings!.offers[0].options.groupKey, "a-group-key-of-24-characters-ok");
  });

  it("--http NAME=LOCAL is an HTTP tunnel; a bad local address is named by its flag", () => {
    const { settings, errors } = clientSettings({
      flags: { server: ["tcp://a:7000"], http: ["myapp=127.0.0.1:3000"] },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.deepEqual(errors, []);
    assert.equal(settings!.exposes.length, 1);
    assert.equal(settings!.exposes[0].http, "myapp");
    assert.equal(settings!.exposes[0].local, "127.0.0.1:3000");
    assert.equal(settings!.exposes[0].remotePort, 0);
    const bad = clientSettings({
      flags: { server: ["tcp://a:7000"], http: ["myapp=nowhere"] },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.equal(bad.errors[0]?.where, "--http");
  });

  it("reports every problem at once, each by its flag, variable or path", () => {
    const file = join(dir, "bad.jsonc");
    writeFileSync(
      file,
      JSON.stringify({
        server: 7,
        expose: ["8080"],
        forward: [""],
        keepAliveIntervalMs: 5,
        group: "web",
        colour: "blue",
      }),
    );
    const { settings, errors } = clientSettings({
      flags: { config: file, ha: "9", use: ["nope=ssh"], "proxy-protocol": "v3" },
      env: {},
    });
    assert.equal(settings, undefined);
    const where = errors.map((e) => e.where);
    for (
      const expected of [
        "colour",
        "server",
        "--server",
        "TUNNELMUX_TOKEN",
        "--ha",
        "keepAliveIntervalMs",
        "--proxy-protocol",
        "group",
        "expose[0]",
        "forward[0]",
        "--use",
      ]
    ) {
      assert.ok(where.includes(expected), `${expected} in ${where.join(", ")}`);
    }
    assert.match(
      formatSettingsErrors(errors, file),
      /^client: \d+ problems \(config .*bad\.jsonc\):\n {2}/,
    );
  });

  it("a syntax error names its line and column; nothing to do is its own error", () => {
    const file = join(dir, "syntax.jsonc");
    writeFileSync(file, '{\n  "server": "tcp://a:1",\n  "expose": [}\n');
    const broken = clientSettings({ flags: { config: file }, env: { TUNNELMUX_TOKEN: TOKEN } });
    assert.match(broken.errors[0].message, /line 3/);
    const idle = clientSettings({
      flags: { server: ["tcp://a:1"] },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.deepEqual(idle.errors.map((e) => e.where), ["(client)"]);
  });

  it("a mistyped key in the file is answered with the key meant; a stranger with the known keys", () => {
    const file = join(dir, "typo.jsonc");
    writeFileSync(
      file,
      JSON.stringify({ sever: "tcp://a:1", expsoe: ["1=127.0.0.1:2"], colourScheme: 1 }),
    );
    const { errors } = clientSettings({ flags: { config: file }, env: { TUNNELMUX_TOKEN: TOKEN } });
    const said = Object.fromEntries(errors.map((e) => [e.where, e.message]));
    assert.equal(said.sever, 'unknown setting (did you mean "server"?)');
    assert.equal(said.expsoe, 'unknown setting (did you mean "expose"?)');
    assert.match(said.colourScheme, /^unknown setting \(known: server, tokenFile, /);
  });

  it("readyTimeoutMs: 30 s by default, from the file or --ready-timeout-ms, 0 to keep trying", () => {
    const base = { server: ["tcp://a:1"], expose: ["1=127.0.0.1:2"] };
    const env = { TUNNELMUX_TOKEN: TOKEN };
    assert.equal(clientSettings({ flags: base, env }).settings!.readyTimeoutMs, 30_000);
    const file = join(dir, "ready.jsonc");
    writeFileSync(file, JSON.stringify({ readyTimeoutMs: 0 }));
    const fromFile = clientSettings({ flags: { ...base, config: file }, env });
    assert.equal(fromFile.settings!.readyTimeoutMs, 0);
    const flag = { ...base, config: file, "ready-timeout-ms": "5000" };
    assert.equal(clientSettings({ flags: flag, env }).settings!.readyTimeoutMs, 5000);
    const bad = clientSettings({ flags: { ...base, "ready-timeout-ms": "soon" }, env });
    assert.deepEqual(bad.errors.map((e) => e.where), ["--ready-timeout-ms"]);
  });

  it("--socks [ADDR]: alone is enough, a bare port is loopback, credentials as the token is read", () => {
    const env = { TUNNELMUX_TOKEN: TOKEN };
    const server = ["tcp://a:1"];
    const alone = clientSettings({ flags: { server, socks: "1081" }, env });
    assert.deepEqual(alone.errors, []);
    assert.deepEqual(alone.settings!.socks, { listen: "127.0.0.1:1081" });
    const file = join(dir, "socks.jsonc");
    writeFileSync(join(dir, "socks-password"), "from a file\n");
    writeFileSync(
      file,
      JSON.stringify({
        server,
        socks: true,
        socksUser: "alice",
        socksPasswordFile: "socks-password",
      }),
    );
    const fromFile = clientSettings({ flags: { config: file }, env });
    assert.deepEqual(fromFile.settings!.socks, {
      listen: "127.0.0.1:1080",
      user: "alice",
      password: "from a file",
    });
    const open = clientSettings({
      flags: { server, socks: "0.0.0.0:1080", "socks-user": "bob" },
      env: { ...env, TUNNELMUX_SOCKS_PASSWORD: "from the environment" },
    });
    assert.deepEqual(open.settings!.socks, {
      listen: "0.0.0.0:1080",
      user: "bob",
      password: "from the environment",
    });
  });

  it("--socks on a public address without credentials is refused, saying why", () => {
    const env = { TUNNELMUX_TOKEN: TOKEN };
    const server = ["tcp://a:1"];
    const said = (flags: Record<string, string>, extra: Record<string, string> = {}) =>
      clientSettings({ flags: { server, ...flags }, env: { ...env, ...extra } }).errors
        .map((e) => `${e.where}: ${e.message}`);
    assert.match(said({ socks: "0.0.0.0:1080" })[0], /^--socks: .*not a loopback.*password/);
    assert.match(said({ socks: "1080", "socks-user": "a" })[0], /^--socks-user: .*password/);
    assert.match(
      said({ socks: "1080" }, { TUNNELMUX_SOCKS_PASSWORD: "x" })[0],
      /^TUNNELMUX_SOCKS_PASSWORD: .*username/,
    );
    assert.match(
      clientSettings({ flags: { server, expose: ["1=127.0.0.1:2"], "socks-user": "a" }, env })
        .errors.map((e) => e.message)[0],
      /need --socks/,
    );
    assert.match(said({ socks: "nowhere" })[0], /^--socks: bad listen address/);
  });

  it("--inspect: off unless asked, 127.0.0.1:4040 by default, off loopback only with a token", () => {
    const base = { server: ["tcp://a:7000"], http: ["app=127.0.0.1:3000"] };
    const env = { TUNNELMUX_TOKEN: TOKEN };
    const run = (flags: Record<string, unknown>, extra: Record<string, string> = {}) =>
      clientSettings({ flags: { ...base, ...flags }, env: { ...env, ...extra } });
    assert.equal(run({}).settings!.inspect, undefined);
    assert.deepEqual(run({ inspect: "" }).settings!.inspect, {
      address: "127.0.0.1:4040",
      unredacted: false,
      token: undefined,
    });
    assert.equal(run({ inspect: "4041" }).settings!.inspect!.address, "127.0.0.1:4041");
    assert.equal(run({ inspect: "[::1]:4040" }).errors.length, 0);
    const open = run({ inspect: "0.0.0.0:4040" });
    assert.equal(open.errors[0].where, "--inspect");
    assert.match(open.errors[0].message, /TUNNELMUX_INSPECT_TOKEN/);
    const withToken = run({ inspect: "0.0.0.0:4040" }, {
      TUNNELMUX_INSPECT_TOKEN: "inspector-token-0123456789",
    });
    assert.deepEqual(withToken.errors, []);
    assert.equal(withToken.settings!.inspect!.token, "inspector-token-0123456789");
    assert.match(
      run({ inspect: "" }, { TUNNELMUX_INSPECT_TOKEN: "short" }).errors[0].message,
      /16 characters/,
    );
    assert.equal(run({ "inspect-unredacted": true }).errors[0].where, "--inspect-unredacted");
    assert.equal(run({ inspect: "nope" }).errors[0].where, "--inspect");

    const file = join(dir, "inspect.jsonc");
    writeFileSync(file, '{ "inspect": true, "inspectUnredacted": true }');
    const fromFile = clientSettings({ flags: { ...base, config: file }, env });
    assert.deepEqual(fromFile.settings!.inspect, {
      address: "127.0.0.1:4040",
      unredacted: true,
      token: undefined,
    });
    writeFileSync(file, '{ "inspect": 4040 }');
    assert.equal(
      clientSettings({ flags: { ...base, config: file }, env }).errors[0].where,
      "inspect",
    );
  });
});

describe("clientSettings: the visitor policy", () => {
  it("takes the file's visitors, the flags adding to its lists and replacing its numbers", () => {
    const file = join(dir, "policy.jsonc");
    writeFileSync(
      file,
      JSON.stringify({
        server: "tcp://a:7000",
        expose: ["0=127.0.0.1:3000"],
        http: ["app=127.0.0.1:4000"],
        visitors: { allow: ["10.0.0.0/8"], connectionsPerSecond: 50, bandwidth: { out: 100 } },
      }),
    );
    const { settings, errors } = clientSettings({
      flags: {
        config: file,
        "allow-ip": ["192.0.2.1,2001:db8::/32"],
        "deny-ip": ["10.9.0.0/16"],
        rate: "5",
        "max-conn-per-visitor": "3",
        "bandwidth-in": "1m",
      },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.deepEqual(errors, []);
    const expected = {
      allow: ["10.0.0.0/8", "192.0.2.1/32", "2001:db8::/32"],
      deny: ["10.9.0.0/16"],
      connectionsPerSecond: 5,
      connectionsPerVisitor: 3,
      bandwidth: { in: 1048576, out: 100 },
    };
    assert.deepEqual(settings!.exposes.map((e) => e.policy), [expected, expected]);
  });

  it("names the flag or the file's path of a bad rule", () => {
    const file = join(dir, "bad-policy.jsonc");
    writeFileSync(file, JSON.stringify({ expose: ["0=127.0.0.1:1"], visitors: { dney: [] } }));
    const { errors } = clientSettings({
      flags: { server: ["tcp://a:7000"], config: file, "allow-ip": ["10.0.0.1/8"], rate: "x" },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.deepEqual(errors.map((e) => `${e.where}: ${e.message}`), [
      `--rate: must be a number, got "x"`,
      `visitors.dney: unknown key (did you mean "deny"?)`,
    ]);
    const flagOnly = clientSettings({
      flags: { server: ["tcp://a:7000"], expose: ["0=127.0.0.1:1"], "allow-ip": ["10.0.0.1/8"] },
      env: { TUNNELMUX_TOKEN: TOKEN },
    });
    assert.equal(flagOnly.errors.length, 1);
    assert.equal(flagOnly.errors[0].where, "--allow-ip");
    assert.match(flagOnly.errors[0].message, /host bits set; did you mean 10\.0\.0\.0\/8/);
  });
});
