import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { DaemonMessage } from "../../tunnel/control/control.ts";
import { Logger } from "../../util/log.ts";
import { answerTo } from "./answer.ts";

function channel() {
  const sent: DaemonMessage[] = [];
  const lines: string[] = [];
  const log = new Logger({ level: "debug", format: "json", sink: (l) => lines.push(l) });
  return { sent, lines, log, control: { send: (m: DaemonMessage) => void sent.push(m) } };
}

describe("answerTo", () => {
  it("sends a reply as it is given, and logs nothing", () => {
    const { sent, lines, log, control } = channel();
    answerTo({ type: "offer", id: 7 }, control, log).send({ type: "ok", id: 7 });
    assert.deepEqual(sent, [{ type: "ok", id: 7 }]);
    assert.deepEqual(lines, []);
  });

  it("sends a refusal as an error with the request's id, and logs it as a warning", () => {
    const { sent, lines, log, control } = channel();
    answerTo({ type: "expose", id: 3 }, control, log).fail("port_in_use", "port 9 is in use");
    assert.deepEqual(sent, [
      { type: "error", id: 3, code: "port_in_use", message: "port 9 is in use" },
    ]);
    assert.equal(lines.length, 1);
    const line = JSON.parse(lines[0]);
    assert.equal(line.level, "warn");
    assert.equal(line.msg, "expose refused");
    assert.equal(line.reason, "port_in_use");
    assert.equal(line.detail, "port 9 is in use");
  });
});
