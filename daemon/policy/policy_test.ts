import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { formatIp, type IpAddress, parseIp } from "../../util/net/address.ts";
import {
  allowedPorts,
  canExpose,
  canOfferService,
  canUseService,
  checkResolvedTarget,
  type ClientPolicy,
  type ForwardRule,
  isServiceName,
  isServicePattern,
  matchForward,
  mergeRanges,
  parseForwardRule,
  parsePortRange,
  type PortRange,
} from "./policy.ts";

function ip(text: string): IpAddress {
  const parsed = parseIp(text);
  assert.ok(parsed, text);
  return parsed;
}

function rule(text: string): ForwardRule {
  const parsed = parseForwardRule(text);
  assert.ok(parsed.ok, `${text}: ${!parsed.ok && parsed.error}`);
  return parsed.value;
}

function client(options: {
  forward?: string[];
  ports?: PortRange[];
  anyPort?: boolean;
  bindHosts?: string[];
  offer?: string[];
  use?: string[];
}): ClientPolicy {
  return {
    name: "test",
    expose: {
      ports: options.ports ?? [],
      anyPort: options.anyPort ?? false,
      bindHosts: (options.bindHosts ?? ["127.0.0.1"]).map(ip),
      hosts: [],
    },
    forward: (options.forward ?? []).map(rule),
    services: { offer: options.offer ?? [], use: options.use ?? [] },
  };
}

describe("policy: port specs", () => {
  const cases: [unknown, boolean, string][] = [
    [80, false, "80-80"],
    ["80", false, "80-80"],
    ["8000-8100", false, "8000-8100"],
    ["1-65535", false, "1-65535"],
    ["65535", false, "65535-65535"],
    ["*", true, "1-65535"],
    ["*", false, "error expected PORT, FROM-TO"],
    [0, false, "error port out of range (1 to 65535)"],
    ["0-10", false, "error port out of range (1 to 65535)"],
    [65536, false, "error port out of range (1 to 65535)"],
    ["99999", false, "error port out of range (1 to 65535)"],
    ["100-99", false, "error range start is after its end"],
    [80.5, false, "error expected PORT, FROM-TO"],
    [-1, false, "error expected PORT, FROM-TO"],
    ["80 ", false, "error expected PORT, FROM-TO"],
    ["80-", false, "error expected PORT, FROM-TO"],
    ["-80", false, "error expected PORT, FROM-TO"],
    ["1-2-3", false, "error expected PORT, FROM-TO"],
    ["123456", false, "error expected PORT, FROM-TO"],
    [null, false, "error expected PORT, FROM-TO"],
    [true, false, "error expected PORT, FROM-TO"],
  ];
  for (const [spec, wildcard, expected] of cases) {
    it(`${JSON.stringify(spec)}${wildcard ? " (wildcard)" : ""} → ${expected}`, () => {
      const parsed = parsePortRange(spec, wildcard);
      const shown = parsed.ok ? `${parsed.value.from}-${parsed.value.to}` : `error ${parsed.error}`;
      assert.equal(shown.replace(" or *", ""), expected);
    });
  }

  it("mergeRanges sorts and joins overlapping and adjacent ranges", () => {
    assert.deepEqual(
      mergeRanges([{ from: 10, to: 20 }, { from: 1, to: 5 }, { from: 6, to: 8 }, {
        from: 15,
        to: 30,
      }, {
        from: 40,
        to: 40,
      }]),
      [{ from: 1, to: 8 }, { from: 10, to: 30 }, { from: 40, to: 40 }],
    );
    assert.deepEqual(mergeRanges([]), []);
  });
});

describe("policy: forward rule parsing", () => {
  const good: [string, string][] = [
    ["db.internal:5432", "name db.internal 5432-5432"],
    ["DB.Internal:5432", "name db.internal 5432-5432"],
    ["*.svc.local:443", "wildcard .svc.local 443-443"],
    ["10.0.0.0/8:*", "ip 10.0.0.0/8 1-65535"],
    ["127.0.0.1:5000-5010", "ip 127.0.0.1/32 5000-5010"],
    ["[::1]:22", "ip ::1/128 22-22"],
    ["[fd00::/8]:443", "ip fd00::/8 443-443"],
    ["[::ffff:10.0.0.1]:80", "ip ::ffff:10.0.0.1/128 80-80"],
    ["169.254.169.254:80", "ip 169.254.169.254/32 80-80"],
  ];
  for (const [text, expected] of good) {
    it(`${text} → ${expected}`, () => {
      const r = rule(text);
      const host = r.kind === "name"
        ? r.name
        : r.kind === "wildcard"
        ? r.suffix
        : `${formatIp(r.cidr.ip)}/${r.cidr.prefix}`;
      assert.equal(`${r.kind} ${host} ${r.ports.from}-${r.ports.to}`, expected);
      assert.equal(r.text, text);
    });
  }
  const bad: [string, RegExp][] = [
    ["db:99999", /port out of range/],
    ["db:0", /port out of range/],
    ["db", /HOST:PORTS/],
    ["db:", /expected PORT/],
    ["db:http", /expected PORT/],
    ["db:100-1", /start is after/],
    ["::1:22", /must be bracketed/],
    ["fd00::/8:443", /must be bracketed/],
    ["[::1]22", /\[IPv6\]:PORTS/],
    ["[::1:22", /\[IPv6\]:PORTS/],
    ["[10.0.0.1]:22", /only for IPv6/],
    ["[zz::1]:22", /not a valid host name/],
    ["*:*", /open proxy/],
    ["*:443", /open proxy/],
    ["*.*.svc:443", /one leading/],
    ["a.*.svc:443", /one leading/],
    ["db*.svc:443", /one leading/],
    ["*svc.local:443", /one leading/],
    ["127.1:22", /canonically: 127\.0\.0\.1/],
    ["2130706433:22", /canonically: 127\.0\.0\.1/],
    ["0x7f.0.0.1:22", /canonically/],
    ["010.0.0.1:22", /canonically: 8\.0\.0\.1/],
    ["localhost:22", /never reach loopback/],
    ["LOCALHOST.:22", /not a valid host name/],
    ["LocalHost:22", /never reach loopback/],
    ["*.localhost:22", /never reach loopback/],
    ["api.localhost:22", /never reach loopback/],
    ["10.0.0.1/8:*", /host bits set/],
    ["10.0.0.0/33:*", /0 to 32/],
    ["bad host:22", /not a valid host name/],
    ["db.internal.:22", /not a valid host name/],
    ["example.0x10:22", /not a valid/],
    ["300.1.1.1:22", /not a valid/],
  ];
  for (const [text, error] of bad) {
    it(`refuses ${JSON.stringify(text)}`, () => {
      const parsed = parseForwardRule(text);
      assert.equal(parsed.ok, false);
      if (!parsed.ok) assert.match(parsed.error, error);
    });
  }
});

describe("policy: canExpose", () => {
  const c = client({
    ports: [{ from: 8000, to: 8100 }, { from: 9000, to: 9000 }],
    anyPort: true,
    bindHosts: ["127.0.0.1", "::1"],
  });
  const cases: [string, number, string][] = [
    ["127.0.0.1", 8000, "ok"],
    ["127.0.0.1", 8100, "ok"],
    ["127.0.0.1", 7999, "port_not_allowed"],
    ["127.0.0.1", 8101, "port_not_allowed"],
    ["127.0.0.1", 9000, "ok"],
    ["127.0.0.1", 9001, "port_not_allowed"],
    ["127.0.0.1", 0, "ok"],
    ["127.0.0.1", -1, "port_not_allowed"],
    ["127.0.0.1", 65536, "port_not_allowed"],
    ["127.0.0.1", 8000.5, "port_not_allowed"],
    ["::1", 8000, "ok"],
    ["[::1]", 8000, "ok"],
    ["::ffff:127.0.0.1", 8000, "ok"],
    ["0.0.0.0", 8000, "bind_host_not_allowed"],
    ["::", 8000, "bind_host_not_allowed"],
    ["127.0.0.2", 8000, "bind_host_not_allowed"],
    ["localhost", 8000, "bind_host_not_allowed"],
    ["127.1", 8000, "bind_host_not_allowed"],
    ["10.0.0.1", 8000, "bind_host_not_allowed"],
    ["", 8000, "bind_host_not_allowed"],
  ];
  for (const [host, port, expected] of cases) {
    it(`${host} port ${port} → ${expected}`, () => {
      const d = canExpose(c, host, port);
      assert.equal(d.ok ? "ok" : d.code, expected);
    });
  }
  it("port 0 needs anyPort", () => {
    const d = canExpose(client({ ports: [{ from: 8000, to: 8000 }] }), "127.0.0.1", 0);
    assert.equal(d.ok ? "ok" : d.code, "port_not_allowed");
  });
  it("a client without ports may not expose at all", () => {
    const d = canExpose(client({ anyPort: true }), "127.0.0.1", 0);
    assert.equal(d.ok ? "ok" : d.code, "not_allowed");
  });
});

describe("policy: allowedPorts", () => {
  const expose = {
    ports: [{ from: 10, to: 12 }, { from: 20, to: 21 }],
    anyPort: true,
    bindHosts: [],
    hosts: [],
  };
  it("lists each allowed port once, in order", () => {
    assert.deepEqual([...allowedPorts(expose)], [10, 11, 12, 20, 21]);
  });
  it("starts at an offset and wraps around", () => {
    assert.deepEqual([...allowedPorts(expose, 3)], [20, 21, 10, 11, 12]);
    assert.deepEqual([...allowedPorts(expose, 7)], [12, 20, 21, 10, 11]);
    assert.deepEqual([...allowedPorts(expose, -1)], [21, 10, 11, 12, 20]);
  });
  it("merges overlapping ranges and is empty without ranges", () => {
    const overlapping = { ...expose, ports: [{ from: 5, to: 7 }, { from: 6, to: 8 }] };
    assert.deepEqual([...allowedPorts(overlapping)], [5, 6, 7, 8]);
    assert.deepEqual([...allowedPorts({ ...expose, ports: [] })], []);
  });
  it("is lazy over the full port space", () => {
    const all = allowedPorts({ ...expose, ports: [{ from: 1024, to: 65535 }] }, 1e9);
    const first = all.next().value as number;
    assert.ok(first >= 1024 && first <= 65535);
  });
});

describe("policy: matchForward", () => {
  const c = client({
    forward: [
      "db.internal:5432",
      "10.0.0.0/8:*",
      "*.svc.local:443",
      "127.0.0.1:5000-5010",
      "[fd00::/8]:80",
    ],
  });
  const cases: [string, number, string][] = [
    ["db.internal", 5432, "db.internal:5432"],
    ["DB.INTERNAL.", 5432, "db.internal:5432"],
    ["db.internal", 5433, "not_allowed"],
    ["db.internal.evil.com", 5432, "not_allowed"],
    ["xdb.internal", 5432, "not_allowed"],
    ["10.1.2.3", 1, "10.0.0.0/8:*"],
    ["10.1.2.3", 65535, "10.0.0.0/8:*"],
    ["012.1.2.3", 22, "10.0.0.0/8:*"], // octal 10.1.2.3
    ["167837955", 22, "10.0.0.0/8:*"], // 10.1.2.3 as one number
    ["::ffff:10.1.2.3", 22, "10.0.0.0/8:*"],
    ["[::ffff:a01:203]", 22, "10.0.0.0/8:*"],
    ["11.0.0.0", 22, "not_allowed"],
    ["a.svc.local", 443, "*.svc.local:443"],
    ["a.b.svc.local", 443, "*.svc.local:443"],
    ["A.SVC.LOCAL.", 443, "*.svc.local:443"],
    ["svc.local", 443, "not_allowed"],
    ["evil.com", 443, "not_allowed"],
    ["evilsvc.local", 443, "not_allowed"],
    ["svc.local.evil.com", 443, "not_allowed"],
    ["a.svc.local.evil.com", 443, "not_allowed"],
    ["a.svc.localx", 443, "not_allowed"],
    ["a.svc.local", 444, "not_allowed"],
    ["127.0.0.1", 4999, "not_allowed"],
    ["127.0.0.1", 5000, "127.0.0.1:5000-5010"],
    ["127.0.0.1", 5010, "127.0.0.1:5000-5010"],
    ["127.0.0.1", 5011, "not_allowed"],
    ["127.1", 5005, "127.0.0.1:5000-5010"],
    ["0x7f000001", 5005, "127.0.0.1:5000-5010"],
    ["::ffff:127.0.0.1", 5005, "127.0.0.1:5000-5010"],
    ["127.0.0.2", 5005, "not_allowed"],
    ["localhost", 5005, "not_allowed"], // names never match IP rules
    ["fd12::1", 80, "[fd00::/8]:80"],
    ["[fd12::1]", 80, "[fd00::/8]:80"],
    ["fe80::1", 80, "not_allowed"],
    ["db.internal", 0, "invalid_target"],
    ["db.internal", 65536, "invalid_target"],
    ["db.internal", 1.5, "invalid_target"],
    ["", 80, "invalid_target"],
    ["fe80::1%eth0", 80, "invalid_target"],
    ["db.internal/x", 5432, "invalid_target"],
    ["10.1.2.3.4", 22, "invalid_target"],
    ["db.internal:5432", 5432, "invalid_target"],
  ];
  for (const [host, port, expected] of cases) {
    it(`${JSON.stringify(host)}:${port} → ${expected}`, () => {
      const m = matchForward(c, host, port);
      assert.equal(m.ok ? m.rule.text : m.code, expected);
    });
  }
  it("returns every matching rule in order", () => {
    const c2 = client({ forward: ["0.0.0.0/0:*", "169.254.169.254:80", "*.a.b:1", "x.a.b:1"] });
    const m = matchForward(c2, "169.254.169.254", 80);
    assert.ok(m.ok);
    assert.deepEqual(m.rules.map((r) => r.text), ["0.0.0.0/0:*", "169.254.169.254:80"]);
    const n = matchForward(c2, "x.a.b", 1);
    assert.ok(n.ok);
    assert.deepEqual(n.rules.map((r) => r.text), ["*.a.b:1", "x.a.b:1"]);
  });
  it("a client with no rules forwards nothing", () => {
    const m = matchForward(client({}), "8.8.8.8", 53);
    assert.equal(m.ok ? "ok" : m.code, "not_allowed");
  });
});

describe("policy: checkResolvedTarget", () => {
  const cases: [string, string, string][] = [
    // Hostname rules: public and private are fine, the special classes never.
    ["db.internal:5432", "10.0.0.5", "ok"],
    ["db.internal:5432", "8.8.8.8", "ok"],
    ["db.internal:5432", "fd12::1", "ok"],
    ["db.internal:5432", "100.64.0.1", "ok"],
    ["db.internal:5432", "127.0.0.1", "loopback_denied"],
    ["db.internal:5432", "127.53.0.1", "loopback_denied"],
    ["db.internal:5432", "::1", "loopback_denied"],
    ["db.internal:5432", "::ffff:127.0.0.1", "loopback_denied"],
    ["db.internal:5432", "::ffff:7f00:1", "loopback_denied"],
    ["db.internal:5432", "64:ff9b::7f00:1", "loopback_denied"],
    ["db.internal:5432", "169.254.169.254", "metadata_denied"],
    ["db.internal:5432", "::ffff:169.254.169.254", "metadata_denied"],
    ["db.internal:5432", "fd00:ec2::254", "metadata_denied"],
    ["db.internal:5432", "100.100.100.200", "metadata_denied"],
    ["db.internal:5432", "169.254.1.1", "link_local_denied"],
    ["db.internal:5432", "fe80::1", "link_local_denied"],
    ["db.internal:5432", "0.0.0.0", "unspecified_denied"],
    ["db.internal:5432", "::", "unspecified_denied"],
    ["db.internal:5432", "224.0.0.1", "multicast_denied"],
    ["db.internal:5432", "ff02::1", "multicast_denied"],
    ["db.internal:5432", "255.255.255.255", "reserved_denied"],
    ["*.svc.local:443", "127.0.0.1", "loopback_denied"],
    ["*.svc.local:443", "169.254.169.254", "metadata_denied"],
    // IP rules naming the class unlock it.
    ["127.0.0.1:5000", "127.0.0.1", "ok"],
    ["127.0.0.1:5000", "::ffff:127.0.0.1", "ok"],
    ["127.0.0.0/8:*", "127.5.5.5", "ok"],
    ["127.0.0.0/16:*", "127.0.9.9", "ok"],
    ["[::1]:22", "::1", "ok"],
    ["[::ffff:127.0.0.1]:22", "127.0.0.1", "ok"],
    ["169.254.0.0/16:*", "169.254.1.1", "ok"],
    ["[fe80::/10]:*", "fe80::1", "ok"],
    ["169.254.169.254:80", "169.254.169.254", "ok"],
    ["[fd00:ec2::254]:80", "fd00:ec2::254", "ok"],
    ["100.100.100.200:80", "100.100.100.200", "ok"],
    ["224.0.0.0/4:*", "224.0.0.251", "ok"],
    // Broad rules do not unlock special classes inside them.
    ["0.0.0.0/0:*", "8.8.8.8", "ok"],
    ["0.0.0.0/0:*", "127.0.0.1", "loopback_denied"],
    ["0.0.0.0/0:*", "169.254.169.254", "metadata_denied"],
    ["0.0.0.0/0:*", "0.0.0.0", "unspecified_denied"],
    ["[::/0]:*", "::1", "loopback_denied"],
    ["[::/0]:*", "::ffff:127.0.0.1", "loopback_denied"],
    ["[::/0]:*", "2606:4700::1111", "ok"],
    ["169.254.0.0/16:*", "169.254.169.254", "metadata_denied"],
    ["169.254.169.0/24:*", "169.254.169.254", "metadata_denied"],
    ["100.64.0.0/10:*", "100.100.100.200", "metadata_denied"],
    ["100.64.0.0/10:*", "100.100.100.201", "ok"],
    ["[fd00::/8]:*", "fd00:ec2::254", "metadata_denied"],
    ["[fd00::/8]:*", "fd00:ec2::253", "ok"],
    ["126.0.0.0/7:*", "127.0.0.1", "loopback_denied"],
    ["127.0.0.1:5000", "127.0.0.2", "not_allowed"], // outside the rule
    ["10.0.0.0/8:*", "11.0.0.1", "not_allowed"],
  ];
  for (const [ruleText, addr, expected] of cases) {
    it(`${ruleText} → ${addr}: ${expected}`, () => {
      const d = checkResolvedTarget(rule(ruleText), ip(addr));
      assert.equal(d.ok ? "ok" : d.code, expected);
      if (!d.ok) assert.ok(d.message.length > 0);
    });
  }
});

describe("policy: services", () => {
  const c = client({ offer: ["ssh-box", "web-*"], use: ["ssh-*", "db"] });
  const cases: [string, string, string][] = [
    ["offer", "ssh-box", "ok"],
    ["offer", "ssh-box2", "not_allowed"],
    ["offer", "web-1", "ok"],
    ["offer", "web-", "ok"],
    ["offer", "web", "not_allowed"],
    ["use", "ssh-box", "ok"],
    ["use", "ssh-", "ok"],
    ["use", "ssh", "not_allowed"],
    ["use", "xssh-box", "not_allowed"],
    ["use", "db", "ok"],
    ["use", "db2", "not_allowed"],
    ["use", "web-1", "not_allowed"],
    ["use", "SSH-box", "invalid_service"],
    ["use", "ssh-*", "invalid_service"],
    ["use", "", "invalid_service"],
    ["use", "a".repeat(64), "invalid_service"],
    ["offer", "-x", "invalid_service"],
  ];
  for (const [verb, name, expected] of cases) {
    it(`${verb} ${JSON.stringify(name)} → ${expected}`, () => {
      const d = verb === "use" ? canUseService(c, name) : canOfferService(c, name);
      assert.equal(d.ok ? "ok" : d.code, expected);
    });
  }
  it("* matches every service, an empty list none", () => {
    const all = client({ use: ["*"] });
    assert.ok(canUseService(all, "anything.at-all").ok);
    assert.ok(!canOfferService(all, "anything").ok);
  });
  it("validates names and patterns", () => {
    for (const p of ["*", "ssh", "ssh-*", "a.b_c-d*"]) assert.ok(isServicePattern(p), p);
    for (const p of ["", "**", "*ssh", "ss*h", "SSH", "-a", "a b"]) {
      assert.ok(!isServicePattern(p), p);
    }
    assert.ok(isServiceName("ssh-box"));
    assert.ok(!isServiceName("ssh*"));
  });
});
