import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Logger } from "./log.ts";

describe("Logger", () => {
  it("writes JSON lines with context, and skips levels below its own", () => {
    const lines: string[] = [];
    const log = new Logger({ level: "info", format: "json", sink: (l) => lines.push(l) });
    const child = log.child({ session: "s1", client: "laptop" });
    child.debug("hidden");
    child.warn("refused", { stream: 5, reason: "not_allowed" });
    assert.equal(lines.length, 1);
    const line = JSON.parse(lines[0]);
    assert.equal(line.level, "warn");
    assert.equal(line.msg, "refused");
    assert.equal(line.session, "s1");
    assert.equal(line.stream, 5);
    assert.ok(!Number.isNaN(Date.parse(line.time)));
  });

  it("writes readable lines on a terminal, quoting values with spaces", () => {
    const lines: string[] = [];
    const log = new Logger({ level: "debug", format: "pretty", sink: (l) => lines.push(l) });
    log.info("tunnel up", { tunnel: "t-1", note: "two words", gone: undefined });
    assert.match(lines[0], / INFO {2}tunnel up {2}tunnel=t-1 note="two words"$/);
  });
});
