// The HTTPS port's certificates by name (certificates.ts): exact names before wildcards, a
// wildcard for one label only, the longest-lived first, expired ones not served, and the
// certificates that cannot be served refused with the reason.
// Runs under `deno test -A daemon/certificates_test.ts` and `bun test daemon/certificates_test.ts`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  hasOpenssl,
  makeTestIdentity,
  type TestIdentity,
} from "../../transport/_test_certificate.ts";
import { CertificateError, CertificateStore, describeCertificate } from "./certificates.ts";

const noOpenssl = hasOpenssl ? false : "openssl is not installed";
const empty: TestIdentity = { cert: "", key: "" };
const wildcard = hasOpenssl
  ? makeTestIdentity("wildcard", "DNS:*.tunnels.test,DNS:tunnels.test")
  : empty;
const exact = hasOpenssl ? makeTestIdentity("exact", "DNS:app.tunnels.test") : empty;
const ipOnly = hasOpenssl ? makeTestIdentity("ip", "IP:127.0.0.1") : empty;
const DAY = 24 * 60 * 60 * 1000;

describe("CertificateStore", { skip: noOpenssl }, () => {
  it("reads a certificate's DNS names and validity", () => {
    const info = describeCertificate(wildcard);
    assert.deepEqual(info.names, ["*.tunnels.test", "tunnels.test"]);
    assert.ok(info.notBefore <= Date.now() && Date.now() < info.notAfter);
    assert.ok(info.notAfter - info.notBefore <= DAY + 1000);
  });

  it("serves an exact name before a wildcard, and a wildcard for one label only", () => {
    const store = new CertificateStore();
    const w = store.add(wildcard, "file");
    const e = store.add(exact, "file");
    assert.equal(store.find("app.tunnels.test"), e);
    assert.equal(store.find("other.tunnels.test"), w);
    assert.equal(store.find("tunnels.test"), w);
    assert.equal(store.find("a.b.tunnels.test"), undefined);
    assert.equal(store.find("tunnels.example"), undefined);
    assert.deepEqual(store.list(), [w, e]);
    store.remove(e);
    assert.equal(store.find("app.tunnels.test"), w);
    assert.deepEqual(store.list(), [w]);
  });

  it("does not serve a certificate past its notAfter", () => {
    const store = new CertificateStore();
    const w = store.add(wildcard, "file");
    assert.equal(store.find("x.tunnels.test", w.notAfter - 1), w);
    assert.equal(store.find("x.tunnels.test", w.notAfter + 1), undefined);
  });

  it("refuses what it cannot serve, saying why", () => {
    const store = new CertificateStore();
    assert.throws(
      () => store.add({ cert: exact.cert, key: wildcard.key }, "file"),
      (e) => e instanceof CertificateError && /does not belong/.test(e.message),
    );
    assert.throws(
      () => store.add(ipOnly, "file"),
      (e) => e instanceof CertificateError && /no DNS name/.test(e.message),
    );
    assert.throws(
      () => store.add({ cert: "garbage", key: exact.key }, "file"),
      (e) => e instanceof CertificateError && /not a PEM certificate/.test(e.message),
    );
    assert.throws(
      () => store.add({ cert: exact.cert, key: "garbage" }, "file"),
      (e) => e instanceof CertificateError && /not a PEM private key/.test(e.message),
    );
    assert.deepEqual(store.list(), []);
  });
});
