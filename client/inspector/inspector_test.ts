import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Inspector, ReplayError } from "./inspector.ts";

const text = new TextEncoder();

/** One exchange through the inspector's observer, as a visitor's stream would feed it. */
function record(inspector: Inspector, request: string, response: string) {
  const observer = inspector.observe({ tunnel: "app", local: "127.0.0.1:1", remote: "r" });
  observer.aToB(text.encode(request));
  observer.bToA(text.encode(response));
  observer.close();
  return inspector.recorder.list().at(-1)!;
}

describe("Inspector.replay", () => {
  it("refuses what it cannot send as it was: a cut body, an upgrade, bad edits", () => {
    const inspector = new Inspector({ bodyLimit: 4, maxBytes: 4096 });
    const cut = record(
      inspector,
      "POST / HTTP/1.1\r\nContent-Length: 8\r\n\r\n12345678",
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    );
    const upgrade = record(
      inspector,
      "GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
      "HTTP/1.1 101 Switching Protocols\r\n\r\n",
    );
    const refused = (run: () => unknown, status: number, message: RegExp) =>
      assert.throws(
        run,
        (e) => e instanceof ReplayError && e.status === status && message.test(e.message),
      );
    refused(() => inspector.replay(cut), 409, /cut at 4 of 8 bytes: give the body/);
    refused(() => inspector.replay(upgrade), 409, /upgrade/);
    refused(() => inspector.replay(cut, { body: "x", method: "GE T" }), 400, /bad method/);
    refused(
      () => inspector.replay(cut, { body: "x", headers: [["X", "a\r\nb"]] }),
      400,
      /bad header/,
    );
    refused(() => inspector.replay(cut, { bodyBase64: "%%%" }), 400, /not base64/);
  });
});
