import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MAX_AGE_MS, openSigned, seal } from "./signed.ts";

const KEY = "a-shared-cluster-key-of-24+chars";
const SUBJECT = "tunnelmux.admin.sessions";

/** Runs `body` with the clock stopped at `time` (seal and openSigned read Date.now). */
function at<T>(time: number, body: () => T): T {
  const now = Date.now;
  Date.now = () => time;
  try {
    return body();
  } finally {
    Date.now = now;
  }
}

/** `text` with its JSON fields changed by `change`. */
function altered(text: string, change: (message: Record<string, unknown>) => void): string {
  const message = JSON.parse(text);
  change(message);
  return JSON.stringify(message);
}

describe("signed messages", () => {
  it("open to their data under the same key and subject", () => {
    const data = { kind: "kick", session: "s7", nested: [1, "two", null] };
    assert.deepEqual(openSigned(KEY, SUBJECT, seal(KEY, SUBJECT, data)), data);
    assert.equal(openSigned(KEY, SUBJECT, seal(KEY, SUBJECT, undefined)), null);
  });

  it("are refused under another key", () => {
    const text = seal(KEY, SUBJECT, { kind: "kick" });
    assert.equal(openSigned("another-cluster-key-of-24+chars", SUBJECT, text), undefined);
  });

  it("are refused on another subject: a query is not its reply, nor another node's query", () => {
    const text = seal(KEY, SUBJECT, { kind: "kick" });
    assert.equal(openSigned(KEY, `${SUBJECT}.reply`, text), undefined);
    assert.equal(openSigned(KEY, `${SUBJECT}.n2`, text), undefined);
  });

  it("are taken up to MAX_AGE_MS old, and refused when replayed later or dated in the future", () => {
    const sealedAt = Date.now();
    const text = at(sealedAt, () => seal(KEY, SUBJECT, { n: 1 }));
    const openAt = (ms: number) => at(sealedAt + ms, () => openSigned(KEY, SUBJECT, text));
    assert.deepEqual(openAt(MAX_AGE_MS), { n: 1 });
    assert.equal(openAt(MAX_AGE_MS + 1), undefined);
    assert.deepEqual(openAt(-MAX_AGE_MS), { n: 1 });
    assert.equal(openAt(-MAX_AGE_MS - 1), undefined);
  });

  it("are refused when their body, time or MAC was changed", () => {
    const text = seal(KEY, SUBJECT, { kind: "list" });
    assert.equal(
      openSigned(KEY, SUBJECT, altered(text, (m) => m.body = '{"kind":"kick"}')),
      undefined,
    );
    assert.equal(
      openSigned(KEY, SUBJECT, altered(text, (m) => m.at = Number(m.at) - 1)),
      undefined,
    );
    assert.equal(
      openSigned(
        KEY,
        SUBJECT,
        altered(text, (m) => m.mac = String(m.mac).replace(/^./, (c) => c === "0" ? "1" : "0")),
      ),
      undefined,
    );
    assert.equal(openSigned(KEY, SUBJECT, altered(text, (m) => m.mac = "")), undefined);
    assert.equal(openSigned(KEY, SUBJECT, altered(text, (m) => delete m.mac)), undefined);
  });

  it("are refused when the text is not a sealed message", () => {
    for (
      const text of [
        "",
        "not json",
        "null",
        "{}",
        JSON.stringify({ at: String(Date.now()), body: "{}", mac: "00" }),
        JSON.stringify({ at: Date.now(), body: { kind: "kick" }, mac: "00" }),
      ]
    ) {
      assert.equal(openSigned(KEY, SUBJECT, text), undefined, text);
    }
    // Its MAC still matches (the time is signed as text), but the time must be a number.
    const genuine = seal(KEY, SUBJECT, { n: 1 });
    assert.equal(openSigned(KEY, SUBJECT, altered(genuine, (m) => m.at = String(m.at))), undefined);
  });
});

describe("signed messages under several keys (a key rotation)", () => {
  const OLD = KEY;
  const NEW = "a-new-cluster-key-of-24+chars!!";

  it("carry a MAC under each key: the first as `mac`, what a single-key node checks", () => {
    const message = JSON.parse(seal([NEW, OLD], SUBJECT, { n: 1 }));
    assert.equal(message.macs.length, 1);
    assert.deepEqual(openSigned(NEW, SUBJECT, seal([NEW, OLD], SUBJECT, { n: 1 })), { n: 1 });
    assert.equal(JSON.parse(seal(OLD, SUBJECT, 1)).macs, undefined, "one key: as before");
  });

  it("open when the sender and the reader share any key", () => {
    assert.deepEqual(openSigned([OLD], SUBJECT, seal([NEW, OLD], SUBJECT, { n: 2 })), { n: 2 });
    assert.deepEqual(openSigned([NEW, OLD], SUBJECT, seal([OLD], SUBJECT, { n: 3 })), { n: 3 });
    assert.deepEqual(openSigned([OLD, NEW], SUBJECT, seal([NEW], SUBJECT, { n: 4 })), { n: 4 });
  });

  it("are refused when they share none, or an added MAC was changed", () => {
    assert.equal(openSigned([NEW], SUBJECT, seal([OLD], SUBJECT, { n: 5 })), undefined);
    assert.equal(openSigned([OLD], SUBJECT, seal([NEW], SUBJECT, { n: 5 })), undefined);
    const text = seal([NEW, OLD], SUBJECT, { n: 6 });
    const changed = altered(text, (m) => m.macs = [String(m.mac)]);
    assert.equal(openSigned([OLD], SUBJECT, changed), undefined);
    assert.equal(openSigned([OLD], SUBJECT, altered(text, (m) => m.macs = "x")), undefined);
  });
});
