import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Flag, FrameType, HEADER_LENGTH, MAX_UINT32, PROTOCOL_VERSION } from "./constants.ts";
import { readUint32, writeHeader } from "./header.ts";

function header(type: number, flags: number, streamId: number, length: number): Uint8Array {
  const buf = new Uint8Array(HEADER_LENGTH);
  writeHeader(buf, 0, type, flags, streamId, length);
  return buf;
}

describe("header: wire layout (spec.md: version 8, type 8, flags 16, stream id 32, length 32)", () => {
  it("constants match the spec", () => {
    assert.equal(PROTOCOL_VERSION, 0);
    assert.equal(HEADER_LENGTH, 12);
    assert.deepEqual(FrameType, { Data: 0, WindowUpdate: 1, Ping: 2, GoAway: 3 });
    assert.deepEqual(Flag, { SYN: 1, ACK: 2, FIN: 4, RST: 8 });
    assert.equal(MAX_UINT32, 4294967295);
  });

  it("window update SYN on stream 1 with delta 0", () => {
    assert.deepEqual(
      header(FrameType.WindowUpdate, Flag.SYN, 1, 0),
      new Uint8Array([0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00]),
    );
  });

  it("data ACK|FIN on stream 2 with a 256 KiB length", () => {
    assert.deepEqual(
      header(FrameType.Data, Flag.ACK | Flag.FIN, 2, 256 * 1024),
      new Uint8Array([0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00]),
    );
  });

  it("ping ACK echoes an opaque value, big-endian", () => {
    assert.deepEqual(
      header(FrameType.Ping, Flag.ACK, 0, 0x01020304),
      new Uint8Array([0x00, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04]),
    );
  });

  it("go away with protocol error code", () => {
    assert.deepEqual(
      header(FrameType.GoAway, 0, 0, 1),
      new Uint8Array([0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]),
    );
  });

  it("max values: id and length 0xffffffff, all flag bits", () => {
    const buf = header(FrameType.WindowUpdate, 0xffff, MAX_UINT32, MAX_UINT32);
    assert.deepEqual(
      buf,
      new Uint8Array([0x00, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
    );
    assert.equal(readUint32(buf, 4), MAX_UINT32);
    assert.equal(readUint32(buf, 8), MAX_UINT32);
  });

  it("values with the top bit set do not come back negative", () => {
    const buf = header(FrameType.Data, 0x8000, 0x80000000, 0x80000001);
    assert.deepEqual(
      buf,
      new Uint8Array([0x00, 0x00, 0x80, 0x00, 0x80, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x01]),
    );
    assert.equal(readUint32(buf, 4), 0x80000000);
    assert.equal(readUint32(buf, 8), 0x80000001);
  });

  it("writes at an offset and touches only its 12 bytes", () => {
    const buf = new Uint8Array(40).fill(0xaa);
    writeHeader(buf, 17, FrameType.Ping, Flag.SYN, 0, 7);
    assert.deepEqual(buf.subarray(0, 17), new Uint8Array(17).fill(0xaa));
    assert.deepEqual(
      buf.subarray(17, 29),
      new Uint8Array([0x00, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07]),
    );
    assert.deepEqual(buf.subarray(29), new Uint8Array(11).fill(0xaa));
  });

  it("readUint32 reads at an offset inside a subarray view", () => {
    const backing = new Uint8Array([9, 9, 0xde, 0xad, 0xbe, 0xef, 9]);
    const view = backing.subarray(1);
    assert.equal(readUint32(view, 1), 0xdeadbeef);
  });
});

describe("header: round trip (property)", () => {
  it("writeHeader then read gives back every field, matching DataView big-endian", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 0, max: 0xffff }),
        fc.integer({ min: 0, max: MAX_UINT32 }),
        fc.integer({ min: 0, max: MAX_UINT32 }),
        fc.integer({ min: 0, max: 20 }),
        (type, flags, streamId, length, offset) => {
          const buf = new Uint8Array(offset + HEADER_LENGTH + 3);
          writeHeader(buf, offset, type, flags, streamId, length);
          const view = new DataView(buf.buffer, offset, HEADER_LENGTH);
          assert.equal(view.getUint8(0), PROTOCOL_VERSION);
          assert.equal(view.getUint8(1), type);
          assert.equal(view.getUint16(2), flags);
          assert.equal(view.getUint32(4), streamId);
          assert.equal(view.getUint32(8), length);
          assert.equal(readUint32(buf, offset + 4), streamId);
          assert.equal(readUint32(buf, offset + 8), length);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("readUint32 agrees with DataView for any 4 bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 4, maxLength: 4 }), (bytes) => {
        const expected = new DataView(bytes.buffer, bytes.byteOffset).getUint32(0);
        assert.equal(readUint32(bytes, 0), expected);
      }),
      { numRuns: 500 },
    );
  });
});
