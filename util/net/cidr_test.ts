import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Cidr, formatCidr, intersectCidrs, parseCidr } from "./cidr.ts";

const nets = (...texts: string[]): Cidr[] =>
  texts.map((t) => {
    const parsed = parseCidr(t);
    assert.ok(parsed.ok, t);
    return parsed.cidr;
  });

describe("cidr", () => {
  it("formats canonically", () => {
    assert.equal(formatCidr(nets("2001:DB8:0::/32")[0]), "2001:db8::/32");
  });

  it("intersects to the smaller of nested networks, nothing for apart ones", () => {
    const both = intersectCidrs(
      nets("10.0.0.0/8", "192.168.1.0/24", "2001:db8::/32"),
      nets("10.2.0.0/16", "192.168.0.0/16", "172.16.0.0/12", "::/0"),
    );
    assert.deepEqual(both.map(formatCidr), ["10.2.0.0/16", "192.168.1.0/24", "2001:db8::/32"]);
    assert.deepEqual(intersectCidrs(nets("10.0.0.0/8"), nets("11.0.0.0/8")), []);
  });
});
