// ACME certificates' own rules (acme.ts), without a CA: a failed order is retried with a pause
// that doubles and is reported each time; a name a certificate file serves is never ordered; a
// stored certificate is served at load. Issuance itself runs against pebble in e2e/acme_test.ts.
// Runs under `deno test -A daemon/acme_test.ts` and `bun test daemon/acme_test.ts`.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { hasOpenssl, makeTestIdentity } from "../../transport/_test_certificate.ts";
import { createServer } from "node:http";
import { waitFor } from "../../testing/wait.ts";
import { Logger } from "../../util/log.ts";
import { AcmeCertificates, type AcmeOptions } from "./acme.ts";
import { CertificateStore } from "./certificates.ts";

const noOpenssl = hasOpenssl ? false : "openssl is not installed";
const log = new Logger({ level: "error", format: "json", sink: () => {} });
const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-acme-unit-"));
  dirs.push(dir);
  return dir;
}

/**
 * A "CA" that has no directory: every order fails at once (a 404 is not retried, where a network
 * error is retried by acme-client for over a minute first).
 */
async function missingCa(): Promise<{ directory: string; requests(): number; close(): void }> {
  let requests = 0;
  const ca = createServer((_req, res) => {
    requests++;
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((resolve) => ca.listen(0, "127.0.0.1", resolve));
  return {
    directory: `http://127.0.0.1:${(ca.address() as { port: number }).port}/dir`,
    requests: () => requests,
    close: () => ca.close(),
  };
}

/** Certificates from `directory`, with `options`; what they report is collected in `events`. */
function issuer(directory: string, options: Partial<AcmeOptions>) {
  const events: { type: string; fields: Record<string, unknown> }[] = [];
  const acme = new AcmeCertificates({
    config: { directory, email: null, caCerts: null, challenge: "http-01" },
    dataDir: dataDir(),
    store: new CertificateStore(),
    log,
    publish: (type, fields) => events.push({ type, fields }),
    ...options,
  });
  return { acme, events };
}

describe("AcmeCertificates", { skip: noOpenssl }, () => {
  it("retries a failed order after a pause that doubles, reporting each failure", async () => {
    const ca = await missingCa();
    const { acme, events } = issuer(ca.directory, { retryMs: 40, maxRetryMs: 100 });
    try {
      acme.want("a.tunnels.test");
      acme.want("a.tunnels.test"); // already on its way: not a second order
      await waitFor(() => events.length >= 1, { timeoutMs: 20_000, message: "one failure" });
      const firstTry = ca.requests();
      await waitFor(() => events.length >= 3, { timeoutMs: 20_000, message: "three failures" });
      // Each retry asks the CA again, not the first failure's answer kept.
      assert.ok(ca.requests() >= firstTry * 3, `${ca.requests()} requests, ${firstTry} at first`);
      assert.ok(events.every((e) => e.type === "certificate_failed"));
      assert.ok(events.every((e) => e.fields.host === "a.tunnels.test"));
      assert.deepEqual(events.slice(0, 3).map((e) => e.fields.retryMs), [40, 80, 100]);
    } finally {
      acme.stop();
      ca.close();
    }
  });

  it("orders at most newOrdersPerHour new names an hour, deferring the rest", async () => {
    const ca = await missingCa();
    const { acme, events } = issuer(ca.directory, { retryMs: 60_000, newOrdersPerHour: 2 });
    try {
      for (const name of ["n1", "n2", "n3", "n4"]) acme.want(`${name}.tunnels.test`);
      await waitFor(() => events.length >= 4, { message: "four outcomes" });
      const byHost = new Map(events.map((e) => [e.fields.host, e.fields]));
      // Two orders were made (and failed at the CA); two waited for the hour.
      assert.match(String(byHost.get("n3.tunnels.test")!.error), /2 new names an hour/);
      assert.match(String(byHost.get("n4.tunnels.test")!.error), /2 new names an hour/);
      assert.doesNotMatch(String(byHost.get("n1.tunnels.test")!.error), /new names an hour/);
      assert.ok(Number(byHost.get("n3.tunnels.test")!.retryMs) > 59 * 60_000);
    } finally {
      acme.stop();
      ca.close();
    }
  });

  it("never orders a name a certificate file serves, and serves stored ones at load", async () => {
    const dir = dataDir();
    const stored = makeTestIdentity("stored", "DNS:old.tunnels.test");
    mkdirSync(join(dir, "acme", "certificates"), { recursive: true });
    writeFileSync(join(dir, "acme", "certificates", "old.tunnels.test.crt"), stored.cert);
    writeFileSync(join(dir, "acme", "certificates", "old.tunnels.test.key"), stored.key);
    const store = new CertificateStore();
    store.add(makeTestIdentity("file", "DNS:*.files.test"), "file");
    const events: string[] = [];
    const acme = new AcmeCertificates({
      config: {
        directory: "https://127.0.0.1:1/dir",
        email: null,
        caCerts: null,
        challenge: "http-01",
      },
      dataDir: dir,
      store,
      log,
      publish: (type) => events.push(type),
      retryMs: 10,
    });
    try {
      await acme.load();
      assert.equal(store.find("old.tunnels.test")?.source, "acme");
      acme.want("x.files.test");
      assert.equal(acme.httpAnswer("anything"), undefined);
      assert.equal(acme.alpnIdentity("x.files.test"), undefined);
      // Give an order the chance it must not take.
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(events, []);
    } finally {
      acme.stop();
    }
  });
});
