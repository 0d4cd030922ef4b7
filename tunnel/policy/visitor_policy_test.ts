import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { formatIp, parseIp } from "../../util/net/address.ts";
import { cidrContains, parseCidr } from "../../util/net/cidr.ts";
import {
  AddressRules,
  narrowVisitorPolicy,
  parseVisitorPolicy,
  type VisitorPolicy,
} from "./visitor_policy.ts";

function parsed(value: unknown): VisitorPolicy {
  const result = parseVisitorPolicy(value, "policy");
  assert.ok(result.ok, result.ok ? "" : result.error);
  return result.policy;
}

function error(value: unknown): string {
  const result = parseVisitorPolicy(value, "policy");
  assert.ok(!result.ok, "expected a parse error");
  return result.error;
}

describe("visitor policy: parsing", () => {
  it("keeps every field in canonical form", () => {
    assert.deepEqual(
      parsed({
        allow: ["203.0.113.0/24", "2001:DB8::/32", "192.0.2.1"],
        deny: ["198.51.100.7/32"],
        connectionsPerSecond: 20,
        tunnelConnectionsPerSecond: 500,
        connectionsPerVisitor: 10,
        bandwidth: { in: 1048576, out: 2048 },
        http: { pathPrefix: "/api" },
      }),
      {
        allow: ["203.0.113.0/24", "2001:db8::/32", "192.0.2.1/32"],
        deny: ["198.51.100.7/32"],
        connectionsPerSecond: 20,
        tunnelConnectionsPerSecond: 500,
        connectionsPerVisitor: 10,
        bandwidth: { in: 1048576, out: 2048 },
        http: { pathPrefix: "/api" },
      },
    );
    assert.deepEqual(parsed({}), {});
  });

  it("refuses unknown keys with a suggestion", () => {
    assert.equal(error({ alow: [] }), `policy.alow: unknown key (did you mean "allow"?)`);
    assert.match(error({ bandwidth: { inn: 5 } }), /^policy\.bandwidth\.inn: unknown key.*"in"/);
  });

  it("names the bad network and why", () => {
    assert.match(error({ allow: ["10.0.0.1/8"] }), /^policy\.allow\[0\]: .*host bits set/);
    assert.match(error({ deny: ["1.2.3.4", "nope"] }), /^policy\.deny\[1\]: "nope" is not/);
    assert.match(error({ allow: ["10.0.0.0/33"] }), /prefix must be 0 to 32/);
    assert.match(error({ allow: "10.0.0.0/8" }), /^policy\.allow: .*must be an array/);
    assert.match(error({ allow: [] }), /^policy\.allow: must name at least one network/);
    assert.match(error({ allow: [7] }), /^policy\.allow\[0\]: 7 must be a string/);
  });

  it("refuses numbers that are not positive integers", () => {
    assert.match(error({ connectionsPerSecond: -1 }), /^policy\.connectionsPerSecond: -1 must/);
    assert.match(error({ connectionsPerVisitor: 1.5 }), /^policy\.connectionsPerVisitor: 1\.5/);
    assert.match(error({ tunnelConnectionsPerSecond: "5" }), /tunnelConnectionsPerSecond/);
    assert.match(error({ bandwidth: { out: 0 } }), /^policy\.bandwidth\.out: 0 must/);
  });

  it("refuses a value that is not an object, and a non-object http", () => {
    assert.match(error([]), /^policy: \[\] must be an object/);
    assert.match(error({ http: "x" }), /^policy\.http: must be an object/);
  });
});

describe("visitor policy: narrowing", () => {
  const narrow = (operator: unknown, client: unknown) =>
    narrowVisitorPolicy(parsed(operator), parsed(client));

  it("intersects allow lists, joins deny lists, takes the smaller number", () => {
    const result = narrow(
      {
        allow: ["10.0.0.0/8", "2001:db8::/32"],
        deny: ["10.9.9.9/32"],
        connectionsPerSecond: 20,
        bandwidth: { in: 1000 },
      },
      {
        allow: ["10.1.0.0/16", "192.168.0.0/16", "::/0"],
        deny: ["10.1.1.1/32"],
        connectionsPerSecond: 50,
        connectionsPerVisitor: 3,
        bandwidth: { in: 5000, out: 10 },
      },
    );
    assert.deepEqual(result, {
      ok: true,
      policy: {
        allow: ["10.1.0.0/16", "2001:db8::/32"],
        deny: ["10.9.9.9/32", "10.1.1.1/32"],
        connectionsPerSecond: 20,
        connectionsPerVisitor: 3,
        bandwidth: { in: 1000, out: 10 },
      },
    });
  });

  it("keeps either side's list when the other has none", () => {
    assert.deepEqual(narrow({}, { allow: ["10.0.0.0/8"] }), {
      ok: true,
      policy: { allow: ["10.0.0.0/8"] },
    });
    assert.deepEqual(narrow({ allow: ["10.0.0.0/8"] }, {}), {
      ok: true,
      policy: { allow: ["10.0.0.0/8"] },
    });
  });

  it("refuses a client whose allow list lies outside the operator's", () => {
    const result = narrow({ allow: ["10.0.0.0/8"] }, { allow: ["192.168.0.0/16"] });
    assert.ok(!result.ok);
    assert.match(result.error, /^policy\.allow: /);
  });

  it("keeps the operator's HTTP rules", () => {
    const rules = { requestHeaders: { set: { "x-env": "staging" } } };
    const result = narrow({ http: rules }, {});
    assert.ok(result.ok);
    assert.deepEqual(result.policy.http, rules);
  });
});

describe("visitor policy: address rules", () => {
  const ip = (text: string) => parseIp(text)!;

  it("denies before it allows, and allows all without a list", () => {
    const rules = new AddressRules(parsed({ allow: ["127.0.0.0/8"], deny: ["127.0.0.3"] }));
    assert.ok(rules.admits(ip("127.0.0.2")));
    assert.ok(!rules.admits(ip("127.0.0.3")));
    assert.ok(!rules.admits(ip("10.0.0.1")));
    assert.ok(rules.admits(ip("::ffff:127.0.0.2")), "a mapped address is its IPv4 form");
    assert.ok(new AddressRules({}).admits(ip("2001:db8::1")));
    assert.ok(!new AddressRules(parsed({ deny: ["::/0"] })).admits(ip("2001:db8::1")));
  });

  it("matches IPv4 visitors by number as the byte-wise match does, at every prefix length", () => {
    // A fixed sequence of addresses (no randomness): each network of every length around them.
    let seed = 12345;
    const next = () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 8 & 0xff;
    for (let round = 0; round < 40; round++) {
      const bytes = [next(), next(), next(), next()];
      const visitor = ip(bytes.join("."));
      const near = ip([bytes[0], bytes[1], bytes[2] ^ 1, bytes[3]].join("."));
      for (let prefix = 0; prefix <= 32; prefix++) {
        const keep = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
        const n = ((bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3]) & keep) >>> 0;
        const net = `${[n >>> 24, n >>> 16 & 255, n >>> 8 & 255, n & 255].join(".")}/${prefix}`;
        const parsedNet = parseCidr(net);
        assert.ok(parsedNet.ok, net);
        const rules = new AddressRules(parsed({ allow: [net] }));
        const denied = new AddressRules(parsed({ deny: [net] }));
        for (const who of [visitor, near, ip(`::ffff:${formatIp(near)}`)]) {
          const expected = cidrContains(parsedNet.cidr, who);
          assert.equal(rules.admits(who), expected, `${formatIp(who)} in ${net}`);
          assert.equal(denied.admits(who), !expected, `${formatIp(who)} denied by ${net}`);
        }
      }
    }
    // An IPv6 network holding the IPv4-mapped space still takes IPv4 visitors.
    assert.ok(new AddressRules(parsed({ allow: ["::ffff:0:0/96"] })).admits(ip("192.0.2.1")));
    assert.ok(!new AddressRules(parsed({ allow: ["10.0.0.0/8"] })).admits(ip("2001:db8::1")));
  });
});
