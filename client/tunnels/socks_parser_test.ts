import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  encodeSocksUdp,
  parseSocksUdp,
  SocksParser,
  type SocksParserOptions,
  SocksReply,
  socksReply,
  type SocksTarget,
} from "./socks_parser.ts";
import { concat } from "../../util/bytes/bytes.ts";
import { prng } from "../../util/crypto/prng.ts";

const text = (s: string) => new TextEncoder().encode(s);
const port = (n: number) => [n >> 8, n & 0xff];
const GREETING = [5, 1, 0];
const connectV4 = (a: number[], p: number) => [5, 1, 0, 1, ...a, ...port(p)];
const connectName = (
  name: string,
  p: number,
) => [5, 1, 0, 3, name.length, ...text(name), ...port(p)];
const credentials: SocksParserOptions = {
  credentials: (user, password) =>
    new TextDecoder().decode(user) === "alice" && new TextDecoder().decode(password) === "s3cret",
};
const auth = (user: string, password: string) => [
  1,
  user.length,
  ...text(user),
  password.length,
  ...text(password),
];

/** Feeds `chunks` in order and gathers what the parser said across them. */
function feed(chunks: Uint8Array[], options: SocksParserOptions = {}) {
  const parser = new SocksParser(options);
  const replies: Uint8Array[] = [];
  const rest: Uint8Array[] = [];
  let connect: string | undefined;
  let failure: string | undefined;
  for (const chunk of chunks) {
    const step = parser.push(chunk);
    replies.push(...step.replies);
    if (step.connect) connect = step.connect.address;
    if (step.rest) rest.push(step.rest);
    failure ??= step.failure;
    if (step.failure) break;
  }
  return { replies: [...concat(replies)], connect, rest: concat(rest), failure, parser };
}

describe("SOCKS5 parser", () => {
  it("serves a greeting, a CONNECT and payload arriving in one chunk, payload kept", () => {
    const got = feed([Uint8Array.from([...GREETING, ...connectV4([10, 0, 0, 5], 5432), 1, 2, 3])]);
    assert.deepEqual(got.replies, [5, 0]);
    assert.equal(got.connect, "10.0.0.5:5432");
    assert.deepEqual([...got.rest], [1, 2, 3]);
    assert.equal(got.parser.done, true);
  });

  it("gives the same answer at every split point, and byte by byte", () => {
    const whole = Uint8Array.from([
      5,
      2,
      0,
      2,
      ...auth("alice", "s3cret"),
      ...connectName("db.internal", 443),
      ...text("hello"),
    ]);
    const splits = [...Array(whole.length + 1).keys()].map((at) => [
      whole.subarray(0, at),
      whole.subarray(at),
    ]);
    splits.push([...whole].map((b) => Uint8Array.of(b)));
    for (const chunks of splits) {
      const got = feed(chunks, credentials);
      assert.deepEqual(got.replies, [5, 2, 1, 0]);
      assert.equal(got.connect, "db.internal:443");
      assert.deepEqual(got.rest, text("hello"));
      assert.equal(got.failure, undefined);
    }
  });

  it("reads IPv6 targets, and an address sent in the name field, canonically", () => {
    const v6 = [5, 1, 0, 4, ...Array(15).fill(0), 1, ...port(80)];
    assert.equal(feed([Uint8Array.from([...GREETING, ...v6])]).connect, "[::1]:80");
    assert.equal(
      feed([Uint8Array.from([...GREETING, ...connectName("0:0::1", 22)])]).connect,
      "[::1]:22",
    );
    assert.equal(
      feed([Uint8Array.from([...GREETING, ...connectName("127.0.0.1", 22)])]).connect,
      "127.0.0.1:22",
    );
  });

  it("leaves a name unresolved, as the client wrote it", () => {
    const got = feed([Uint8Array.from([...GREETING, ...connectName("Web-1.example_x.org", 8080)])]);
    assert.equal(got.connect, "Web-1.example_x.org:8080");
  });

  it("requires username/password when configured, and refuses wrong ones", () => {
    const none = feed([Uint8Array.from(GREETING)], credentials);
    assert.deepEqual(none.replies, [5, 0xff]);
    assert.match(none.failure!, /username\/password/);
    const wrong = feed([Uint8Array.from([5, 1, 2, ...auth("alice", "guess")])], credentials);
    assert.deepEqual(wrong.replies, [5, 2, 1, 1]);
    assert.match(wrong.failure!, /wrong username or password/);
    const empty = feed([Uint8Array.from([5, 1, 2, 1, 0])], credentials);
    assert.deepEqual(empty.replies, [5, 2, 1, 1]);
    const version = feed([Uint8Array.from([5, 1, 2, 5, 1, 97, 1, 97])], credentials);
    assert.deepEqual(version.replies, [5, 2, 1, 1]);
    assert.match(version.failure!, /version 5, not 1/);
  });

  it("offers no authentication it has not set up", () => {
    const got = feed([Uint8Array.from([5, 1, 2, ...auth("alice", "s3cret")])]);
    assert.deepEqual(got.replies, [5, 0xff]);
    assert.ok(got.failure);
  });

  const refusals: [string, number[], number[], RegExp][] = [
    ["SOCKS4, in SOCKS4's words", [4, 1, ...port(80), 127, 0, 0, 1, 0], [
      0,
      0x5b,
      0,
      0,
      0,
      0,
      0,
      0,
    ], /SOCKS4/],
    ["an HTTP request, with silence", [...text("GET / HTTP/1.1\r\n")], [], /not a SOCKS5/],
    ["a greeting without methods", [5, 0], [5, 0xff], /no authentication method/],
    ["BIND", [...GREETING, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80], [
      5,
      0,
      ...socksReply(SocksReply.CommandNotSupported),
    ], /BIND/],
    ["UDP ASSOCIATE from a name", [...GREETING, 5, 3, 0, 3, 1, 97, 0, 0], [
      5,
      0,
      ...socksReply(SocksReply.AddressTypeNotSupported),
    ], /from a name/],
    ["an unknown command", [...GREETING, 5, 9, 0, 1, 1, 2, 3, 4, 0, 80], [
      5,
      0,
      ...socksReply(SocksReply.CommandNotSupported),
    ], /command 9/],
    ["an unknown address type", [...GREETING, 5, 1, 0, 7], [
      5,
      0,
      ...socksReply(SocksReply.AddressTypeNotSupported),
    ], /address type 7/],
    ["a request of another version", [...GREETING, 4, 1, 0, 1], [
      5,
      0,
      ...socksReply(SocksReply.GeneralFailure),
    ], /version 4/],
    ["port 0", [...GREETING, ...connectV4([10, 0, 0, 1], 0)], [
      5,
      0,
      ...socksReply(SocksReply.GeneralFailure),
    ], /port 0/],
    ["an empty name", [...GREETING, 5, 1, 0, 3, 0], [
      5,
      0,
      ...socksReply(SocksReply.HostUnreachable),
    ], /empty host name/],
    ["a name that is no host name", [...GREETING, ...connectName("a b:c/d", 80)], [
      5,
      0,
      ...socksReply(SocksReply.HostUnreachable),
    ], /not a host name/],
  ];
  for (const [name, input, replies, failure] of refusals) {
    it(`refuses ${name}, whole or split`, () => {
      for (const chunks of [[Uint8Array.from(input)], input.map((b) => Uint8Array.of(b))]) {
        const got = feed(chunks);
        assert.deepEqual(got.replies, replies);
        assert.match(got.failure!, failure);
        assert.equal(got.connect, undefined);
        assert.equal(got.parser.done, true);
      }
    });
  }

  it("never throws on random input, and ends each handshake once at most", () => {
    const random = prng(1928);
    for (let n = 0; n < 3000; n++) {
      const length = Math.floor(random() * 40);
      const bytes = Uint8Array.from({ length }, (_, i) =>
        // Mostly plausible prefixes, so the deeper states are reached too.
        i === 0 && random() < 0.9 ? 5 : Math.floor(random() * (random() < 0.5 ? 6 : 256)));
      const parser = new SocksParser(n % 2 ? credentials : {});
      let ends = 0;
      for (let at = 0; at < bytes.length;) {
        const size = 1 + Math.floor(random() * 8);
        const step = parser.push(bytes.subarray(at, at + size));
        at += size;
        if (step.connect || step.failure) ends++;
      }
      assert.ok(ends <= 1);
    }
  });

  it("takes UDP ASSOCIATE, with the client's address or zeros, whole or split", () => {
    const cases: [number[], string][] = [
      [[5, 3, 0, 1, 0, 0, 0, 0, 0, 0], "0.0.0.0:0"],
      [[5, 3, 0, 1, 127, 0, 0, 1, ...port(4321)], "127.0.0.1:4321"],
      [[5, 3, 0, 4, ...new Array(15).fill(0), 1, 0, 0], "[::1]:0"],
    ];
    for (const [request, address] of cases) {
      const input = [...GREETING, ...request, 9];
      for (const chunks of [[Uint8Array.from(input)], input.map((b) => Uint8Array.of(b))]) {
        const parser = new SocksParser();
        let associate: SocksTarget | undefined;
        const rest: number[] = [];
        for (const chunk of chunks) {
          const step = parser.push(chunk);
          associate ??= step.associate;
          assert.equal(step.connect, undefined);
          assert.equal(step.failure, undefined);
          if (step.rest) rest.push(...step.rest);
        }
        assert.equal(associate?.address, address);
        assert.deepEqual(rest, [9]);
        assert.equal(parser.done, true);
      }
    }
  });
});

describe("SOCKS5 UDP request header", () => {
  it("reads IPv4, IPv6 and name targets, and the payload as a view", () => {
    const v4 = parseSocksUdp(Uint8Array.of(0, 0, 0, 1, 10, 0, 0, 5, 0, 53, 1, 2, 3));
    assert.ok(typeof v4 !== "string");
    assert.equal(v4.frag, 0);
    assert.equal(v4.target.address, "10.0.0.5:53");
    assert.deepEqual([...v4.data], [1, 2, 3]);
    const v6 = parseSocksUdp(Uint8Array.of(0, 0, 0, 4, ...new Array(15).fill(0), 1, 0x14, 0xe9));
    assert.ok(typeof v6 !== "string");
    assert.equal(v6.target.address, "[::1]:5353");
    assert.equal(v6.data.length, 0);
    const name = parseSocksUdp(Uint8Array.of(0, 0, 2, 3, 6, ...text("dns.io"), 0, 53, 7));
    assert.ok(typeof name !== "string");
    assert.equal(name.frag, 2);
    assert.deepEqual(name.target, { type: "name", host: "dns.io", port: 53, address: "dns.io:53" });
    assert.deepEqual([...name.data], [7]);
  });

  it("says why a header is bad, never throws", () => {
    const bad: [number[], RegExp][] = [
      [[0, 0, 0], /no header/],
      [[0, 0, 0, 9, 1, 2], /address type 9/],
      [[0, 0, 0, 1, 10, 0, 0], /cut short/],
      [[0, 0, 0, 3, 0, 0, 53], /empty host name/],
      [[0, 0, 0, 3, 3, ...text("a b"), 0, 53], /not a host name/],
      [[0, 0, 0, 1, 10, 0, 0, 5, 0, 0, 1], /port 0/],
    ];
    for (const [bytes, why] of bad) {
      const got = parseSocksUdp(Uint8Array.from(bytes));
      assert.equal(typeof got, "string");
      assert.match(got as string, why);
    }
  });

  it("writes a reply's header naming the target as the client named it", () => {
    const target = { type: "name" as const, host: "dns.io", port: 53, address: "dns.io:53" };
    assert.deepEqual(
      [...encodeSocksUdp(target, Uint8Array.of(9))],
      [0, 0, 0, 3, 6, ...text("dns.io"), 0, 53, 9],
    );
    const v4 = { type: "ipv4" as const, host: "127.0.0.1", port: 258, address: "127.0.0.1:258" };
    assert.deepEqual([...encodeSocksUdp(v4, new Uint8Array(0))], [0, 0, 0, 1, 127, 0, 0, 1, 1, 2]);
  });

  it("property: encode then parse gives back target and payload; any bytes parse or say why", () => {
    const label = fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,20}$/);
    const targetArb: fc.Arbitrary<SocksTarget> = fc.oneof(
      fc.tuple(fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 4 }))
        .map(([b]) => b.join(".")),
      fc.array(label, { minLength: 1, maxLength: 4 }).map((l) => `${l.join(".")}.test`),
    ).chain((host) =>
      fc.integer({ min: 1, max: 65535 }).map((port) => {
        const type = /^[0-9.]+$/.test(host) ? "ipv4" as const : "name" as const;
        return { type, host, port, address: `${host}:${port}` };
      })
    );
    fc.assert(
      fc.property(targetArb, fc.uint8Array({ maxLength: 300 }), (target, data) => {
        const parsed = parseSocksUdp(encodeSocksUdp(target, data));
        assert.ok(typeof parsed !== "string", String(parsed));
        assert.deepEqual(parsed.target, target);
        assert.equal(parsed.frag, 0);
        assert.deepEqual([...parsed.data], [...data]);
      }),
      { numRuns: 500, seed: 1928 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), (bytes) => {
        const parsed = parseSocksUdp(bytes);
        if (typeof parsed === "string") return;
        assert.ok(parsed.target.port >= 1 && parsed.target.port <= 65535);
        assert.ok(parsed.data.length <= bytes.length - 4);
      }),
      { numRuns: 2000, seed: 7 },
    );
  });
});
