import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { formatIp, type IpAddress, parseIp } from "../../util/net/address.ts";
import {
  cidrContains,
  cidrLast,
  classify,
  embeddedIPv4,
  type IpClass,
  parseCidr,
  parseHost,
  parseInetAton,
} from "./ip_ranges.ts";

function ip(text: string): IpAddress {
  const parsed = parseIp(text);
  assert.ok(parsed, `test literal ${text} must parse`);
  return parsed;
}

function cidr(text: string) {
  const parsed = parseCidr(text);
  assert.ok(parsed.ok, `test cidr ${text} must parse`);
  return parsed.cidr;
}

describe("ip ranges: inet_aton forms", () => {
  const cases: [string, string | undefined][] = [
    ["127.0.0.1", "127.0.0.1"],
    ["2130706433", "127.0.0.1"],
    ["0x7f000001", "127.0.0.1"],
    ["0x7f.1", "127.0.0.1"],
    ["0177.0.0.1", "127.0.0.1"],
    ["0177.1", "127.0.0.1"],
    ["127.1", "127.0.0.1"],
    ["127.0.1", "127.0.0.1"],
    ["0X7F.0.0.0x1", "127.0.0.1"],
    ["017700000001", "127.0.0.1"],
    ["0", "0.0.0.0"],
    ["0x", "0.0.0.0"],
    ["169.254.43518", "169.254.169.254"],
    ["2852039166", "169.254.169.254"],
    ["0xa9fea9fe", "169.254.169.254"],
    ["10.0.0.010", "10.0.0.8"],
    ["4294967295", "255.255.255.255"],
    ["4294967296", undefined],
    ["256.1", undefined],
    ["1.16777216", undefined],
    ["1.2.65536", undefined],
    ["08.0.0.1", undefined],
    ["0x1g", undefined],
    ["1.2.3.4.5", undefined],
    ["1..2", undefined],
    ["", undefined],
    ["1.2.3.", undefined],
    ["-1", undefined],
    ["0x100000000", undefined],
    ["99999999999999999999999", undefined],
  ];
  for (const [text, expected] of cases) {
    it(`${JSON.stringify(text)} → ${expected ?? "invalid"}`, () => {
      const parsed = parseInetAton(text);
      assert.equal(parsed && formatIp(parsed), expected);
    });
  }
});

describe("ip ranges: CIDR", () => {
  const contains: [string, string, boolean][] = [
    ["10.0.0.0/8", "10.0.0.0", true],
    ["10.0.0.0/8", "10.255.255.255", true],
    ["10.0.0.0/8", "9.255.255.255", false],
    ["10.0.0.0/8", "11.0.0.0", false],
    ["172.16.0.0/12", "172.31.255.255", true],
    ["172.16.0.0/12", "172.32.0.0", false],
    ["192.168.1.128/25", "192.168.1.127", false],
    ["192.168.1.128/25", "192.168.1.128", true],
    ["192.168.1.128/25", "192.168.1.255", true],
    ["1.2.3.4/32", "1.2.3.4", true],
    ["1.2.3.4/32", "1.2.3.5", false],
    ["0.0.0.0/0", "255.255.255.255", true],
    ["0.0.0.0/0", "::1", false],
    ["10.0.0.0/8", "::ffff:10.1.2.3", true], // mapped IPv6 matches IPv4 networks
    ["10.0.0.0/8", "::ffff:a01:203", true],
    ["10.0.0.0/8", "::10.1.2.3", false], // compatible is not mapped
    ["127.0.0.0/8", "::ffff:127.0.0.1", true],
    ["::ffff:0:0/96", "1.2.3.4", true],
    ["2001:db8::/32", "2001:db8:ffff::1", true],
    ["2001:db8::/32", "2001:db9::", false],
    ["fe80::/10", "febf:ffff::", true],
    ["fe80::/10", "fec0::", false],
    ["::/0", "::ffff:1.2.3.4", true],
    ["::/0", "1.2.3.4", true], // as its mapped form
    ["::1/128", "::1", true],
    ["::1/128", "::2", false],
  ];
  for (const [net, addr, expected] of contains) {
    it(`${net} ${expected ? "contains" : "excludes"} ${addr}`, () => {
      assert.equal(cidrContains(cidr(net), ip(addr)), expected);
    });
  }
  const bad: [string, RegExp][] = [
    ["10.0.0.0", /ADDRESS\/PREFIX/],
    ["10.0.0.1/8", /host bits set; did you mean 10\.0\.0\.0\/8/],
    ["10.0.0.0/33", /0 to 32/],
    ["::/129", /0 to 128/],
    ["10.0.0.0/", /0 to 32/],
    ["10.0.0.0/-1", /0 to 32/],
    ["10.0.0.0/08x", /0 to 32/],
    ["10.0.0/8", /not an IP/],
    ["fe80::1/10", /did you mean fe80::\/10/],
    ["host/8", /not an IP/],
  ];
  for (const [text, error] of bad) {
    it(`refuses ${text}`, () => {
      const parsed = parseCidr(text);
      assert.equal(parsed.ok, false);
      if (!parsed.ok) assert.match(parsed.error, error);
    });
  }
  it("cidrLast sets the host bits", () => {
    assert.equal(formatIp(cidrLast(cidr("10.0.0.0/8"))), "10.255.255.255");
    assert.equal(formatIp(cidrLast(cidr("192.168.1.128/25"))), "192.168.1.255");
    assert.equal(formatIp(cidrLast(cidr("1.2.3.4/32"))), "1.2.3.4");
    assert.equal(formatIp(cidrLast(cidr("fe80::/10"))), "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  });
});

describe("ip ranges: classify", () => {
  const cases: [string, IpClass][] = [
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["::", "unspecified"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["126.255.255.255", "public"],
    ["128.0.0.0", "public"],
    ["::1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:0:7f00:1", "loopback"], // SIIT translated
    ["::127.0.0.1", "loopback"], // deprecated compatible
    ["64:ff9b::7f00:1", "loopback"], // NAT64
    ["64:ff9b:1:7f00:0:100::", "loopback"], // NAT64 local-use /48
    ["2002:7f00:1::", "loopback"], // 6to4
    ["169.254.169.254", "metadata"],
    ["::ffff:169.254.169.254", "metadata"],
    ["64:ff9b::a9fe:a9fe", "metadata"],
    ["100.100.100.200", "metadata"],
    ["::ffff:100.100.100.200", "metadata"],
    ["fd00:ec2::254", "metadata"],
    ["fd00:ec2::253", "private"],
    ["169.254.169.253", "link_local"],
    ["169.254.0.0", "link_local"],
    ["169.254.255.255", "link_local"],
    ["169.255.0.0", "public"],
    ["fe80::1", "link_local"],
    ["febf::1", "link_local"],
    ["::ffff:169.254.1.1", "link_local"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.255", "multicast"],
    ["ff02::1", "multicast"],
    ["240.0.0.1", "reserved"],
    ["255.255.255.255", "reserved"],
    ["10.0.0.1", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["172.32.0.0", "public"],
    ["172.15.255.255", "public"],
    ["192.168.0.1", "private"],
    ["100.64.0.1", "private"],
    ["100.127.255.255", "private"],
    ["100.128.0.0", "public"],
    ["fc00::1", "private"],
    ["fdff::1", "private"],
    ["fec0::1", "private"],
    ["::ffff:10.0.0.1", "private"],
    ["8.8.8.8", "public"],
    ["::ffff:8.8.8.8", "public"],
    ["2606:4700::1111", "public"],
    ["2002:808:808::", "public"],
    ["::2", "unspecified"], // compatible form of 0.0.0.2
  ];
  for (const [addr, cls] of cases) {
    it(`${addr} is ${cls}`, () => assert.equal(classify(ip(addr)), cls));
  }

  it("embeddedIPv4 leaves :: and ::1 alone", () => {
    assert.equal(embeddedIPv4(ip("::")), undefined);
    assert.equal(embeddedIPv4(ip("::1")), undefined);
    assert.equal(embeddedIPv4(ip("1.2.3.4")), undefined);
    assert.equal(embeddedIPv4(ip("2001:db8::1")), undefined);
  });
});

describe("ip ranges: parseHost", () => {
  const cases: [string, string][] = [
    ["db.internal", "name db.internal"],
    ["DB.Internal.", "name db.internal"],
    ["_svc._tcp.example.com", "name _svc._tcp.example.com"],
    ["xn--bcher-kva.example", "name xn--bcher-kva.example"],
    ["127.0.0.1", "ip 127.0.0.1"],
    ["127.0.0.1.", "ip 127.0.0.1"],
    ["2130706433", "ip 127.0.0.1"],
    ["0x7f.1", "ip 127.0.0.1"],
    ["0177.0.0.1", "ip 127.0.0.1"],
    ["127.1", "ip 127.0.0.1"],
    ["[::1]", "ip ::1"],
    ["::ffff:127.0.0.1", "ip ::ffff:127.0.0.1"],
    ["[::FFFF:7F00:1]", "ip ::ffff:127.0.0.1"],
    ["example.0x10", "invalid"], // ends in a number but is not an address
    ["a.b.c.d.5", "invalid"],
    ["1.2.3.4.5", "invalid"],
    ["256.0.0.1", "invalid"],
    ["08.1", "invalid"],
    ["", "invalid"],
    [".", "invalid"],
    ["a..b", "invalid"],
    ["-a.com", "invalid"],
    ["a-.com", "invalid"],
    ["a b.com", "invalid"],
    ["a/b", "invalid"],
    ["a@b.com", "invalid"],
    ["bücher.example", "invalid"],
    ["[fe80::1%eth0]", "invalid"],
    ["fe80::1%eth0", "invalid"],
    ["[127.0.0.1]", "invalid"],
    ["[::1", "invalid"],
    ["a".repeat(64) + ".com", "invalid"],
    [("a".repeat(60) + ".").repeat(5) + "com", "invalid"],
  ];
  for (const [host, expected] of cases) {
    it(`${JSON.stringify(host)} → ${expected}`, () => {
      const parsed = parseHost(host);
      const shown = parsed.kind === "ip"
        ? `ip ${formatIp(parsed.ip)}`
        : parsed.kind === "name"
        ? `name ${parsed.name}`
        : "invalid";
      assert.equal(shown, expected);
    });
  }
});
