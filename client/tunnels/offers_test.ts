import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { newOfferRecord, offerRequest } from "./offers.ts";

describe("offers", () => {
  it("a record keeps the local service and options; a bad local address fails at once", () => {
    const options = { group: "g" };
    assert.deepEqual(newOfferRecord("127.0.0.1:3000", options), {
      local: "127.0.0.1:3000",
      options,
    });
    assert.throws(() => newOfferRecord("127.0.0.1", {}));
  });

  it("the offer request names the service and its group", () => {
    assert.deepEqual(offerRequest("box", newOfferRecord("127.0.0.1:3000", {})), {
      type: "offer",
      service: "box",
      group: undefined,
      groupKey: undefined,
    });
    const grouped = newOfferRecord("127.0.0.1:3000", { group: "g", groupKey: "k" });
    assert.deepEqual(offerRequest("box", grouped), {
      type: "offer",
      service: "box",
      group: "g",
      groupKey: "k",
    });
  });
});
