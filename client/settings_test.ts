import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clientSettings, formatSettingsErrors } from "./settings.ts";

const dir = mkdtempSync(join(tmpdir(), "tunnelmux-settings-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const TOKEN = "a-token-of-24-characters-or-more";

describe("clientSettings", () => {
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
});
