// A single daemon's ACME state (acme_files.ts): certificates and the account key as files of
// mode 0600 under DATA_DIR/acme, read back by a later run; leases and challenges in memory.
// Runs under `deno test -A daemon/tls/acme_files_test.ts` and `bun test daemon/tls/acme_files_test.ts`.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Logger } from "../../util/log.ts";
import { FileAcmeStorage } from "./acme_files.ts";

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-acme-files-"));
  dirs.push(dir);
  return dir;
}

/** A log that keeps its lines. */
function keptLog(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = new Logger({ level: "info", format: "json", sink: (l) => lines.push(JSON.parse(l)) });
  return { log, lines };
}

const identity = (n: number) => ({ cert: `CERT ${n}`, key: `KEY ${n}` });

describe("FileAcmeStorage", () => {
  it("keeps certificates as 0600 files that a later run loads, and reads the latest", async () => {
    const dir = dataDir();
    const first = new FileAcmeStorage(dir, keptLog().log);
    await first.save("a.tunnels.test", identity(1));
    await first.save("b.tunnels.test", identity(2));
    await first.save("a.tunnels.test", identity(3));
    for (const file of ["a.tunnels.test.crt", "a.tunnels.test.key"]) {
      assert.equal(statSync(join(dir, "acme", "certificates", file)).mode & 0o777, 0o600, file);
    }
    const found: [string, unknown][] = [];
    await new FileAcmeStorage(dir, keptLog().log).load((host, id) => found.push([host, id]));
    assert.deepEqual(found, [["a.tunnels.test", identity(3)], ["b.tunnels.test", identity(2)]]);
    assert.deepEqual(await first.latest("b.tunnels.test"), identity(2));
    assert.equal(await first.latest("c.tunnels.test"), undefined);
  });

  it("logs a certificate without its key and loads the others", async () => {
    const dir = dataDir();
    const storage = new FileAcmeStorage(dir, keptLog().log);
    await storage.save("ok.tunnels.test", identity(1));
    writeFileSync(join(dir, "acme", "certificates", "lone.tunnels.test.crt"), "CERT");
    const { log, lines } = keptLog();
    const found: string[] = [];
    await new FileAcmeStorage(dir, log).load((host) => found.push(host));
    assert.deepEqual(found, ["ok.tunnels.test"]);
    assert.deepEqual(lines.map((l) => [l.msg, l.file]), [[
      "stored certificate unusable",
      join(dir, "acme", "certificates", "lone.tunnels.test.crt"),
    ]]);
  });

  it("makes the account key once, 0600, and keeps it", async () => {
    const dir = dataDir();
    let made = 0;
    const create = () => Promise.resolve(`ACCOUNT ${++made}`);
    assert.equal(await new FileAcmeStorage(dir, keptLog().log).accountKey(create), "ACCOUNT 1");
    assert.equal(await new FileAcmeStorage(dir, keptLog().log).accountKey(create), "ACCOUNT 1");
    assert.equal(made, 1);
    assert.equal(statSync(join(dir, "acme", "account.key")).mode & 0o777, 0o600);
  });

  it("leases a name to one order at a time", async () => {
    const storage = new FileAcmeStorage(dataDir(), keptLog().log);
    const lease = await storage.lease("a.tunnels.test");
    assert.ok(lease);
    assert.equal(await storage.lease("a.tunnels.test"), undefined);
    assert.ok(await storage.lease("b.tunnels.test"));
    await lease.release();
    assert.ok(await storage.lease("a.tunnels.test"));
  });

  it("answers challenges until they are removed", async () => {
    const storage = new FileAcmeStorage(dataDir(), keptLog().log);
    const http = { type: "http-01" as const, token: "tok", keyAuthorization: "tok.thumb" };
    const alpn = { type: "tls-alpn-01" as const, host: "a.tunnels.test", identity: identity(9) };
    await storage.addChallenge(http);
    await storage.addChallenge(alpn);
    assert.equal(storage.httpAnswer("tok"), "tok.thumb");
    assert.equal(storage.httpAnswer("other"), undefined);
    assert.deepEqual(storage.alpnIdentity("a.tunnels.test"), identity(9));
    await storage.removeChallenge(http);
    await storage.removeChallenge(alpn);
    assert.equal(storage.httpAnswer("tok"), undefined);
    assert.equal(storage.alpnIdentity("a.tunnels.test"), undefined);
  });
});
