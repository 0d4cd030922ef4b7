// PROXY protocol encoders and decoder. The vectors are written out byte by byte from the spec text
// (haproxy doc/proxy-protocol.txt §2.1 and §2.2), not produced by the code under test; v1 is also
// checked against the spec's literal example and its maximum-length lines, and v2 against a header
// HAProxy itself wrote (a hexdump published in seriousben/experiment-proxy-protocol).

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encodeProxyV1, encodeProxyV2, PROXY_V2_SIGNATURE } from "./proxy_protocol.ts";
import {
  decodeProxyHeader,
  PROXY_V1_MAX_LENGTH,
  ProxyProtocolError,
} from "./proxy_protocol_decoder.ts";

const ascii = (text: string) => new TextEncoder().encode(text);
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** The spec's signature, spelled out again here so a typo in the module cannot hide. */
const SIG = [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a];

function join(...parts: (number | number[] | Uint8Array)[]): Uint8Array {
  return new Uint8Array(parts.flatMap((p) => typeof p === "number" ? [p] : [...p]));
}

describe("encodeProxyV1", () => {
  it("matches the spec's example line", () => {
    // §2.1: "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"
    assert.equal(
      text(encodeProxyV1("192.168.0.1:56324", "192.168.0.11:443")),
      "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n",
    );
  });

  it("writes the spec's maximum-length TCP4 and TCP6 lines (56 and 104 bytes)", () => {
    const v4 = encodeProxyV1("255.255.255.255:65535", "255.255.255.255:65535");
    assert.equal(text(v4), "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n");
    assert.equal(v4.length, 56);
    const ffff = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    const v6 = encodeProxyV1(`[${ffff}]:65535`, `[${ffff}]:65535`);
    assert.equal(text(v6), `PROXY TCP6 ${ffff} ${ffff} 65535 65535\r\n`);
    assert.equal(v6.length, 104);
  });

  it("writes IPv6 compressed, lower case, without leading zeros", () => {
    assert.equal(
      text(encodeProxyV1("[2001:DB8:0:0:0:0:0:1]:8080", "[::1]:443")),
      "PROXY TCP6 2001:db8::1 ::1 8080 443\r\n",
    );
    // Longest zero run wins; a single zero group is not compressed (RFC 5952).
    assert.equal(
      text(encodeProxyV1("[2001:db8:0:1:0:0:0:1]:1", "[2001:db8:0:1:1:1:1:1]:2")),
      "PROXY TCP6 2001:db8:0:1::1 2001:db8:0:1:1:1:1:1 1 2\r\n",
    );
    // A zone names our interface; the header has no room for it.
    assert.equal(
      text(encodeProxyV1("[fe80::1%eth0]:5000", "[fe80::2]:80")),
      "PROXY TCP6 fe80::1 fe80::2 5000 80\r\n",
    );
  });

  it("sends IPv4-mapped pairs as TCP4, and a mapped address with a real IPv6 one as TCP6", () => {
    assert.equal(
      text(encodeProxyV1("[::ffff:192.0.2.1]:5000", "[::ffff:198.51.100.2]:443")),
      "PROXY TCP4 192.0.2.1 198.51.100.2 5000 443\r\n",
    );
    assert.equal(
      text(encodeProxyV1("[::ffff:192.0.2.1]:5000", "127.0.0.1:443")),
      "PROXY TCP4 192.0.2.1 127.0.0.1 5000 443\r\n",
    );
    // v1 IPv6 is hex groups only (§2.1), so the dotted tail is rewritten: 192.0.2.1 = c000:0201.
    assert.equal(
      text(encodeProxyV1("[::ffff:192.0.2.1]:5000", "[2001:db8::2]:443")),
      "PROXY TCP6 ::ffff:c000:201 2001:db8::2 5000 443\r\n",
    );
  });

  it("falls back to PROXY UNKNOWN (15 bytes) for what it cannot express", () => {
    const cases: [string, string][] = [
      ["unknown", "127.0.0.1:80"],
      ["127.0.0.1:80", "unknown"],
      ["192.0.2.1:5000", "[2001:db8::1]:80"], // mixed families
      ["localhost:5000", "127.0.0.1:80"], // a name, not an address
      ["127.0.0.1:65536", "127.0.0.1:80"], // port out of range
      ["127.0.0.01:1", "127.0.0.1:80"], // leading zero: not canonical
      ["::1:80", "::1:81"], // unbracketed IPv6
      ["[::1]", "[::1]:80"], // no port
      ["[1:2:3:4:5:6:7:8:9]:1", "[::1]:80"], // nine groups
      ["[1::2::3]:1", "[::1]:80"], // two "::"
      ["1.2.3:1", "127.0.0.1:80"],
    ];
    for (const [source, destination] of cases) {
      const header = encodeProxyV1(source, destination);
      assert.equal(text(header), "PROXY UNKNOWN\r\n", `${source} ${destination}`);
      assert.equal(header.length, 15);
    }
  });
});

describe("encodeProxyV2", () => {
  it("exports the spec's signature", () => {
    assert.deepEqual([...PROXY_V2_SIGNATURE], SIG);
  });

  it("matches a TCP4 header written by HAProxy", () => {
    // 172.19.0.1:42578 -> 172.19.0.3:80, from a hexdump of HAProxy's send-proxy-v2 output:
    // 0d 0a 0d 0a 00 0d 0a 51 55 49 54 0a 21 11 00 0c ac 13 00 01 ac 13 00 03 a6 52 00 50
    const haproxy = [
      ...[0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a],
      ...[0x21, 0x11, 0x00, 0x0c, 0xac, 0x13, 0x00, 0x01, 0xac, 0x13, 0x00, 0x03],
      ...[0xa6, 0x52, 0x00, 0x50],
    ];
    assert.deepEqual([...encodeProxyV2("172.19.0.1:42578", "172.19.0.3:80")], haproxy);
  });

  it("writes TCP4 byte by byte from the spec", () => {
    const expected = join(
      SIG,
      0x21, // version 2 (high nibble), command PROXY (low nibble)
      0x11, // AF_INET (high nibble), STREAM (low nibble)
      [0x00, 0x0c], // address length 12 = 2*4 + 2*2, big-endian
      [192, 168, 0, 1], // source address
      [192, 168, 0, 11], // destination address
      [0xdc, 0x04], // source port 56324
      [0x01, 0xbb], // destination port 443
    );
    assert.deepEqual(encodeProxyV2("192.168.0.1:56324", "192.168.0.11:443"), expected);
    assert.equal(expected.length, 28);
  });

  it("writes TCP6 byte by byte from the spec", () => {
    const expected = join(
      SIG,
      0x21, // version 2, PROXY
      0x21, // AF_INET6, STREAM
      [0x00, 0x24], // address length 36 = 2*16 + 2*2
      [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01], // 2001:db8::1
      [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01], // ::1
      [0x1f, 0x90], // source port 8080
      [0x00, 0x50], // destination port 80
    );
    assert.deepEqual(encodeProxyV2("[2001:db8::1]:8080", "[::1]:80"), expected);
    assert.equal(expected.length, 52);
  });

  it("unmaps IPv4-mapped pairs to TCP4, keeps a mapped address next to real IPv6 as TCP6", () => {
    assert.deepEqual(
      encodeProxyV2("[::ffff:192.0.2.1]:5000", "[::ffff:198.51.100.2]:443"),
      join(SIG, 0x21, 0x11, [0, 12], [192, 0, 2, 1], [198, 51, 100, 2], [0x13, 0x88], [1, 0xbb]),
    );
    assert.deepEqual(
      encodeProxyV2("[::ffff:192.0.2.1]:5000", "[2001:db8::2]:443"),
      join(
        SIG,
        0x21,
        0x21,
        [0, 36],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1],
        [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02],
        [0x13, 0x88],
        [0x01, 0xbb],
      ),
    );
  });

  it("sends LOCAL with AF_UNSPEC and no addresses when it cannot express them", () => {
    const local = join(SIG, 0x20, 0x00, [0x00, 0x00]);
    for (
      const [source, destination] of [
        ["unknown", "127.0.0.1:80"],
        ["192.0.2.1:5000", "[2001:db8::1]:80"],
        ["localhost:1", "localhost:2"],
      ]
    ) {
      assert.deepEqual(encodeProxyV2(source, destination), local, `${source} ${destination}`);
    }
  });
});

describe("decodeProxyHeader", () => {
  it("decodes v1 TCP4, TCP6 and UNKNOWN, reporting the header length", () => {
    const line = "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n";
    assert.deepEqual(decodeProxyHeader(ascii(`${line}GET / HTTP/1.1\r\n`)), {
      version: 1,
      source: "192.168.0.1:56324",
      destination: "192.168.0.11:443",
      length: line.length,
    });
    assert.deepEqual(decodeProxyHeader(ascii("PROXY TCP6 2001:DB8:0::1 ::1 8080 80\r\n")), {
      version: 1,
      source: "[2001:db8::1]:8080",
      destination: "[::1]:80",
      length: 38,
    });
    assert.deepEqual(decodeProxyHeader(ascii("PROXY UNKNOWN\r\n")), {
      version: 1,
      source: undefined,
      destination: undefined,
      length: 15,
    });
    // "the receiver must ignore anything presented before the CRLF" after UNKNOWN.
    const long = "PROXY UNKNOWN ffff:f::1 ffff:f::2 65535 65535\r\n";
    assert.equal(decodeProxyHeader(ascii(long))?.length, long.length);
  });

  it("decodes v2 TCP4 and TCP6, skipping TLVs", () => {
    const haproxy = join(SIG, 0x21, 0x11, [0, 12], [172, 19, 0, 1], [172, 19, 0, 3], [0xa6, 0x52], [
      0,
      0x50,
    ]);
    assert.deepEqual(decodeProxyHeader(join(haproxy, ascii("GET /"))), {
      version: 2,
      source: "172.19.0.1:42578",
      destination: "172.19.0.3:80",
      length: 28,
    });
    // A PP2_TYPE_NOOP TLV (type 0x04, length 2) after the addresses: length 12 + 5 = 17.
    const withTlv = join(SIG, 0x21, 0x11, [0, 17], [10, 0, 0, 1], [10, 0, 0, 2], [0, 1], [0, 2], [
      0x04,
      0x00,
      0x02,
      0xaa,
      0xbb,
    ]);
    assert.deepEqual(decodeProxyHeader(withTlv), {
      version: 2,
      source: "10.0.0.1:1",
      destination: "10.0.0.2:2",
      length: 33,
    });
    const v6 = join(
      SIG,
      0x21,
      0x21,
      [0, 36],
      [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1],
      [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02],
      [0x13, 0x88],
      [0x01, 0xbb],
    );
    assert.deepEqual(decodeProxyHeader(v6), {
      version: 2,
      source: "[::ffff:c000:201]:5000",
      destination: "[2001:db8::2]:443",
      length: 52,
    });
  });

  it("treats LOCAL, UNSPEC, UDP and UNIX as 'use the real endpoints', skipping their block", () => {
    const none = (length: number) => ({
      version: 2,
      source: undefined,
      destination: undefined,
      length,
    });
    assert.deepEqual(decodeProxyHeader(join(SIG, 0x20, 0x00, [0, 0])), none(16));
    // LOCAL must skip whatever address block it carries ("must not assume zero").
    const localWithAddresses = join(SIG, 0x20, 0x11, [0, 12], new Uint8Array(12));
    assert.deepEqual(decodeProxyHeader(localWithAddresses), none(28));
    assert.deepEqual(decodeProxyHeader(join(SIG, 0x21, 0x00, [0, 0])), none(16));
    assert.deepEqual(
      decodeProxyHeader(join(SIG, 0x21, 0x12, [0, 12], new Uint8Array(12))),
      none(28),
    );
    assert.deepEqual(
      decodeProxyHeader(join(SIG, 0x21, 0x31, [0, 216], new Uint8Array(216))),
      none(232),
    );
  });

  it("round-trips what the encoders write", () => {
    const pairs: [string, string][] = [
      ["127.0.0.1:1", "127.0.0.1:65535"],
      ["0.0.0.0:0", "255.255.255.255:65535"],
      ["[::1]:2", "[2001:db8:85a3::8a2e:370:7334]:3"],
      ["[::]:4", "[1:2:3:4:5:6:7:8]:5"],
    ];
    for (const [source, destination] of pairs) {
      for (const encode of [encodeProxyV1, encodeProxyV2]) {
        const header = encode(source, destination);
        const decoded = decodeProxyHeader(header);
        assert.equal(decoded?.source, source);
        assert.equal(decoded?.destination, destination);
        assert.equal(decoded?.length, header.length);
      }
    }
  });

  it("asks for more bytes on every proper prefix of a valid header", () => {
    const headers = [
      encodeProxyV1("192.168.0.1:56324", "192.168.0.11:443"),
      encodeProxyV1("unknown", "unknown"),
      encodeProxyV2("[2001:db8::1]:8080", "[::1]:80"),
      encodeProxyV2("unknown", "unknown"),
    ];
    for (const header of headers) {
      for (let n = 0; n < header.length; n++) {
        assert.equal(decodeProxyHeader(header.subarray(0, n)), null, `prefix of ${n} bytes`);
      }
      assert.ok(decodeProxyHeader(header));
    }
  });

  it("rejects what the spec says to drop", () => {
    const bad: [string, Uint8Array][] = [
      ["HTTP instead of a header", ascii("GET / HTTP/1.1\r\n")],
      ["lower-case signature", ascii("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n")],
      ["LF alone", ascii("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n")],
      ["CR alone", ascii("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rx")],
      ["no CRLF in 107 bytes", ascii(`PROXY UNKNOWN ${"x".repeat(PROXY_V1_MAX_LENGTH)}`)],
      ["two spaces", ascii("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n")],
      ["leading zero in an address", ascii("PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n")],
      ["leading zero in a port", ascii("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n")],
      ["port out of range", ascii("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n")],
      ["IPv6 under TCP4", ascii("PROXY TCP4 ::1 ::1 1 2\r\n")],
      ["IPv4 under TCP6", ascii("PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n")],
      ["unknown protocol", ascii("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n")],
      ["missing port", ascii("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n")],
      ["v2 version 1", join(SIG, 0x11, 0x11, [0, 12], new Uint8Array(12))],
      ["v2 command 2", join(SIG, 0x22, 0x11, [0, 12], new Uint8Array(12))],
      ["v2 family 4", join(SIG, 0x21, 0x41, [0, 0])],
      ["v2 protocol 3", join(SIG, 0x21, 0x13, [0, 12], new Uint8Array(12))],
      ["v2 TCP4 block too short", join(SIG, 0x21, 0x11, [0, 8], new Uint8Array(8))],
      ["v2 TCP6 block too short", join(SIG, 0x21, 0x21, [0, 12], new Uint8Array(12))],
      ["broken v2 signature", join(SIG.slice(0, 11), 0x0b, 0x21, 0x11)],
    ];
    for (const [what, bytes] of bad) {
      assert.throws(() => decodeProxyHeader(bytes), ProxyProtocolError, what);
    }
  });
});
