import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseIp } from "../../util/net/address.ts";
import { type ClientPolicy, parseForwardRule } from "./policy.ts";
import { type LookupAddress, type LookupFn, resolveTarget } from "./resolve.ts";

function client(forward: string[]): ClientPolicy {
  return {
    name: "test",
    expose: { ports: [], anyPort: false, bindHosts: [parseIp("127.0.0.1")!], hosts: [] },
    forward: forward.map((text) => {
      const parsed = parseForwardRule(text);
      assert.ok(parsed.ok, text);
      return parsed.value;
    }),
    services: { offer: [], use: [] },
  };
}

/** A fake resolver over a fixed table; records the names it was asked for. */
function fakeDns(table: Record<string, string[]>) {
  const asked: string[] = [];
  const lookup: LookupFn = (host, options) => {
    asked.push(host);
    assert.equal(options.all, true);
    const addresses = table[host];
    if (!addresses) {
      return Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" }));
    }
    return Promise.resolve(
      addresses.map((address): LookupAddress => ({
        address,
        family: address.includes(":") ? 6 : 4,
      })),
    );
  };
  return { lookup, asked };
}

const dns = fakeDns({
  "db.internal": ["10.0.0.5"],
  "rebind.svc.local": ["127.0.0.1"],
  "meta.svc.local": ["169.254.169.254"],
  "meta6.svc.local": ["fd00:ec2::254"],
  "mapped.svc.local": ["::ffff:127.0.0.1"],
  "mixed.svc.local": ["127.0.0.1", "169.254.169.254", "10.0.0.7", "10.0.0.8"],
  "v6.svc.local": ["fd12::7"],
  "mapped-ok.svc.local": ["::ffff:10.0.0.9"],
  "ll.svc.local": ["fe80::1"],
  "zone.svc.local": ["fe80::1%eth0"],
  "empty.svc.local": [],
  "garbage.svc.local": ["not-an-ip", "10.0.0.10"],
  "any.svc.local": ["0.0.0.0"],
});

const c = client([
  "db.internal:5432",
  "*.svc.local:443",
  "10.0.0.0/8:*",
  "127.0.0.1:5000-5010",
  "169.254.169.254:80",
]);

describe("resolve: resolveTarget", () => {
  const cases: [string, number, string][] = [
    ["db.internal", 5432, "10.0.0.5 via db.internal:5432"],
    ["db.internal", 5433, "not_allowed"],
    ["evil.com", 443, "not_allowed"],
    ["rebind.svc.local", 443, "loopback_denied"],
    ["meta.svc.local", 443, "metadata_denied"],
    ["meta6.svc.local", 443, "metadata_denied"],
    ["mapped.svc.local", 443, "loopback_denied"],
    ["mixed.svc.local", 443, "10.0.0.7 via *.svc.local:443"],
    ["v6.svc.local", 443, "fd12::7 via *.svc.local:443"],
    ["mapped-ok.svc.local", 443, "10.0.0.9 via *.svc.local:443"],
    ["ll.svc.local", 443, "link_local_denied"],
    ["zone.svc.local", 443, "resolve_failed"],
    ["empty.svc.local", 443, "resolve_failed"],
    ["missing.svc.local", 443, "resolve_failed"],
    ["garbage.svc.local", 443, "10.0.0.10 via *.svc.local:443"],
    ["any.svc.local", 443, "unspecified_denied"],
    // Literals are decided without DNS.
    ["10.1.2.3", 22, "10.1.2.3 via 10.0.0.0/8:*"],
    ["::ffff:10.1.2.3", 22, "10.1.2.3 via 10.0.0.0/8:*"],
    ["0xa010203", 22, "10.1.2.3 via 10.0.0.0/8:*"],
    ["127.0.0.1", 5000, "127.0.0.1 via 127.0.0.1:5000-5010"],
    ["127.1", 5000, "127.0.0.1 via 127.0.0.1:5000-5010"],
    ["2130706433", 5000, "127.0.0.1 via 127.0.0.1:5000-5010"],
    ["[::ffff:7f00:1]", 5000, "127.0.0.1 via 127.0.0.1:5000-5010"],
    ["127.0.0.1", 22, "not_allowed"],
    ["169.254.169.254", 80, "169.254.169.254 via 169.254.169.254:80"],
    ["0xa9fea9fe", 80, "169.254.169.254 via 169.254.169.254:80"],
    ["169.254.169.254", 81, "not_allowed"],
    ["fe80::1%eth0", 443, "invalid_target"],
    ["1.2.3.4.5", 443, "invalid_target"],
  ];
  for (const [host, port, expected] of cases) {
    it(`${host}:${port} → ${expected}`, async () => {
      const r = await resolveTarget(host, port, c, { lookup: dns.lookup });
      assert.equal(r.ok ? `${r.ip} via ${r.rule.text}` : r.code, expected);
      if (r.ok) {
        assert.equal(r.port, port);
        assert.equal(r.family, r.ip.includes(":") ? 6 : 4);
      } else assert.ok(r.message.length > 0);
    });
  }

  it("never resolves literals or names that no rule allows", async () => {
    const spy = fakeDns({});
    for (const host of ["10.1.2.3", "127.1", "0x7f.1", "evil.com", "svc.local", "1.2.3.4.5"]) {
      await resolveTarget(host, 443, c, { lookup: spy.lookup });
    }
    assert.deepEqual(spy.asked, []);
  });

  it("resolves the normalised name", async () => {
    const spy = fakeDns({ "a.svc.local": ["10.0.0.1"] });
    const r = await resolveTarget("A.SVC.LOCAL.", 443, c, { lookup: spy.lookup });
    assert.equal(r.ok && r.ip, "10.0.0.1");
    assert.deepEqual(spy.asked, ["a.svc.local"]);
  });

  it("a later IP rule can unlock what an earlier broad one cannot", async () => {
    const c2 = client(["0.0.0.0/0:*", "127.0.0.1:22"]);
    const r = await resolveTarget("127.0.0.1", 22, c2, { lookup: dns.lookup });
    assert.equal(r.ok && r.rule.text, "127.0.0.1:22");
    const d = await resolveTarget("127.0.0.1", 23, c2, { lookup: dns.lookup });
    assert.equal(!d.ok && d.code, "loopback_denied");
  });

  it("times out a hanging lookup", async () => {
    const hang: LookupFn = () => new Promise(() => {});
    const r = await resolveTarget("slow.svc.local", 443, c, { lookup: hang, timeoutMs: 20 });
    assert.equal(!r.ok && r.code, "resolve_failed");
    assert.match(!r.ok ? r.message : "", /ETIMEOUT/);
  });

  it("a lookup that returns junk is refused", async () => {
    const junk = (() => Promise.resolve([{ address: 42 }, null])) as unknown as LookupFn;
    const r = await resolveTarget("junk.svc.local", 443, c, { lookup: junk });
    assert.equal(!r.ok && r.code, "resolve_failed");
  });

  it("uses node:dns by default (localhost resolves to loopback, which a name rule never reaches)", async () => {
    const c3: ClientPolicy = {
      ...c,
      forward: [{
        text: "localhost:80",
        kind: "name",
        name: "localhost",
        ports: { from: 80, to: 80 },
      }],
    };
    const r = await resolveTarget("localhost", 80, c3);
    assert.equal(!r.ok && r.code, "loopback_denied");
  });
});
