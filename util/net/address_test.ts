import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  bracketHost,
  formatHostPort,
  formatIp,
  type IpAddress,
  ipEquals,
  isLoopbackHost,
  parseHostPort,
  parseIp,
  parseIPv4,
  parseIPv6,
  splitHostPort,
  unbracketHost,
  unmapIPv4,
} from "./address.ts";

function ip(text: string): IpAddress {
  const parsed = parseIp(text);
  assert.ok(parsed, `test literal ${text} must parse`);
  return parsed;
}

describe("address: IPv4 literals", () => {
  const good: [string, number[]][] = [
    ["0.0.0.0", [0, 0, 0, 0]],
    ["127.0.0.1", [127, 0, 0, 1]],
    ["255.255.255.255", [255, 255, 255, 255]],
    ["10.20.30.40", [10, 20, 30, 40]],
  ];
  for (const [text, bytes] of good) {
    it(`parses ${text}`, () => assert.deepEqual([...parseIPv4(text)!.bytes], bytes));
  }
  const bad = [
    "",
    "1.2.3",
    "1.2.3.4.5",
    "256.0.0.1",
    "01.2.3.4",
    "1.2.3.04",
    "0x7f.0.0.1",
    "1.2.3.-1",
  ];
  bad.push("1.2.3.4 ", " 1.2.3.4", "1..2.3", "a.b.c.d", "1.2.3.4.", "2130706433", "+1.2.3.4");
  for (const text of bad) {
    it(`refuses ${JSON.stringify(text)}`, () => assert.equal(parseIPv4(text), undefined));
  }
});

describe("address: IPv6 literals", () => {
  const good: [string, string][] = [
    ["::", "::"],
    ["::1", "::1"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["2001:DB8::1", "2001:db8::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["fe80::", "fe80::"],
    ["1::", "1::"],
    ["1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"],
    ["::2:3:4:5:6:7:8", "0:2:3:4:5:6:7:8"],
    ["::ffff:127.0.0.1", "::ffff:127.0.0.1"],
    ["::ffff:7f00:1", "::ffff:127.0.0.1"],
    ["0:0:0:0:0:ffff:7f00:0001", "::ffff:127.0.0.1"],
    ["::127.0.0.1", "::7f00:1"],
    ["64:ff9b::169.254.169.254", "64:ff9b::a9fe:a9fe"],
    ["fd00:ec2::254", "fd00:ec2::254"],
    ["1:0:0:2:0:0:0:3", "1:0:0:2::3"],
  ];
  for (const [text, canonical] of good) {
    it(`parses ${text} → ${canonical}`, () => assert.equal(formatIp(parseIPv6(text)!), canonical));
  }
  const bad = [
    "",
    ":",
    ":::",
    "1:::2",
    "1::2::3",
    ":1::2",
    "1::2:",
    "1:2:3:4:5:6:7:8:9",
    "1:2:3:4:5:6:7",
    "1:2:3:4:5:6:7:8::",
    "12345::1",
    "g::1",
    "fe80::1%eth0",
    "fe80::1%25eth0",
    "::ffff:127.0.0.01",
    "::ffff:127.1",
    "::ffff:1.2.3.4:5",
    "1.2.3.4::",
    "[::1]",
  ];
  for (const text of bad) {
    it(`refuses ${JSON.stringify(text)}`, () => assert.equal(parseIPv6(text), undefined));
  }

  it("parseIp picks the family by the colon", () => {
    assert.equal(parseIp("1.2.3.4")?.family, 4);
    assert.equal(parseIp("::1")?.family, 6);
    assert.equal(parseIp("localhost"), undefined);
  });
});

describe("address: helpers", () => {
  it("unmapIPv4 only unwraps the mapped form", () => {
    assert.equal(formatIp(unmapIPv4(ip("::ffff:1.2.3.4"))), "1.2.3.4");
    assert.equal(formatIp(unmapIPv4(ip("::1.2.3.4"))), "::102:304");
    assert.equal(formatIp(unmapIPv4(ip("1.2.3.4"))), "1.2.3.4");
  });
  it("ipEquals treats mapped and plain IPv4 alike", () => {
    assert.ok(ipEquals(ip("::ffff:127.0.0.1"), ip("127.0.0.1")));
    assert.ok(ipEquals(ip("::1"), ip("0::0:1")));
    assert.ok(!ipEquals(ip("::1"), ip("127.0.0.1")));
    assert.ok(!ipEquals(ip("10.0.0.1"), ip("10.0.0.2")));
  });
});

describe("address: host and port", () => {
  it("formatHostPort formats IPv4, brackets IPv6, and keeps names", () => {
    assert.equal(formatHostPort("127.0.0.1", 80), "127.0.0.1:80");
    assert.equal(formatHostPort("::1", 8080), "[::1]:8080");
    assert.equal(formatHostPort("[::1]", 8080), "[::1]:8080");
    assert.equal(formatHostPort("fe80::1%eth0", 1), "[fe80::1%eth0]:1");
    assert.equal(formatHostPort("localhost", 1), "localhost:1");
    assert.equal(formatHostPort("::1"), "[::1]");
    assert.equal(formatHostPort(undefined, undefined), "unknown");
  });
  it("bracketHost brackets IPv6 literals once", () => {
    assert.equal(bracketHost("::1"), "[::1]");
    assert.equal(bracketHost("[::1]"), "[::1]");
    assert.equal(bracketHost("10.0.0.1"), "10.0.0.1");
  });
  it("unbracketHost takes the brackets off and leaves other hosts alone", () => {
    assert.equal(unbracketHost("[::1]"), "::1");
    assert.equal(unbracketHost("::1"), "::1");
    assert.equal(unbracketHost("10.0.0.1"), "10.0.0.1");
    assert.equal(unbracketHost("example.com"), "example.com");
    assert.equal(unbracketHost("[::1"), "[::1");
    assert.equal(unbracketHost(unbracketHost("[::1]")), "::1");
    assert.equal(unbracketHost(bracketHost("fe80::1")), "fe80::1");
  });
  it("parseHostPort takes HOST:PORT and [IPv6]:PORT", () => {
    assert.deepEqual(parseHostPort("127.0.0.1:7000"), { hostname: "127.0.0.1", port: 7000 });
    assert.deepEqual(parseHostPort("[::1]:0"), { hostname: "::1", port: 0 });
    assert.deepEqual(parseHostPort("localhost:65535"), { hostname: "localhost", port: 65535 });
    for (const bad of ["::1:80", "host", "host:65536", "[::1]", "host:-1", ":80"]) {
      assert.throws(() => parseHostPort(bad), /HOST:PORT/, bad);
    }
  });
  it("formatIp with hexOnly writes mapped IPv4 in hex groups", () => {
    assert.equal(formatIp(ip("::ffff:1.2.3.4")), "::ffff:1.2.3.4");
    assert.equal(formatIp(ip("::ffff:1.2.3.4"), { hexOnly: true }), "::ffff:102:304");
  });
});

describe("splitHostPort", () => {
  it("cuts at the colon that ends the host, bracketed or not, judging neither part", () => {
    assert.deepEqual(splitHostPort("example.com:443"), {
      host: "example.com",
      port: "443",
      bracketed: false,
    });
    assert.deepEqual(splitHostPort("[fd00::/8]:80-90"), {
      host: "fd00::/8",
      port: "80-90",
      bracketed: true,
    });
    assert.deepEqual(splitHostPort("::1:80"), { host: "::1", port: "80", bracketed: false });
    assert.deepEqual(splitHostPort("memory:a"), { host: "memory", port: "a", bracketed: false });
  });

  it("gives undefined without a colon after the host, or with a bracket not closed before one", () => {
    for (const text of ["example.com", "[::1]", "[::1]80", "[::1", ""]) {
      assert.equal(splitHostPort(text), undefined, text);
    }
  });
});

describe("isLoopbackHost", () => {
  it("tells loopback listen hosts from the rest", () => {
    for (
      const host of ["127.0.0.1", "127.9.8.7", "::1", "[::1]", "::ffff:127.0.0.1", "LocalHost"]
    ) {
      assert.equal(isLoopbackHost(host), true, host);
    }
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "::2", "example.com", "128.0.0.1", ""]) {
      assert.equal(isLoopbackHost(host), false, host);
    }
  });
});
