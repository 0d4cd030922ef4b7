import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_SESSION_CONFIG, resolveSessionConfig, streamWindowConfig } from "./config.ts";
import { INITIAL_STREAM_WINDOW } from "./constants.ts";

describe("resolveSessionConfig", () => {
  it("fills in the documented defaults", () => {
    const config = resolveSessionConfig();
    assert.equal(config.acceptBacklog, 256);
    assert.equal(config.maxUnackedOpens, 256);
    assert.equal(config.maxStreamWindow, 6 * 1024 * 1024);
    assert.deepEqual(config, { ...DEFAULT_SESSION_CONFIG });
  });

  it("keeps overrides", () => {
    assert.equal(resolveSessionConfig({ maxStreams: 10 }).maxStreams, 10);
  });

  it("names the field of a bad value", () => {
    assert.throws(() => resolveSessionConfig({ acceptBacklog: 0 }), /acceptBacklog/);
    assert.throws(() => resolveSessionConfig({ maxStreams: 1.5 }), /maxStreams/);
    assert.throws(() => resolveSessionConfig({ keepAliveInterval: -1 }), /keepAliveInterval/);
    assert.throws(
      () => resolveSessionConfig({ autoTuneWindow: 1 as unknown as boolean }),
      /autoTuneWindow/,
    );
    assert.throws(() => resolveSessionConfig({ bogus: 1 } as never), /bogus/);
  });

  it("refuses a frame limit below the window, since a peer may send a whole window at once", () => {
    assert.throws(
      () => resolveSessionConfig({ maxStreamWindow: 32 * 1024 * 1024 }),
      /maxFrameLength/,
    );
    assert.ok(resolveSessionConfig({ maxStreamWindow: 2 ** 25, maxFrameLength: 2 ** 25 }));
  });

  it("streamWindowConfig raises the frame limit to a window above it, never lowers it", () => {
    assert.deepEqual(streamWindowConfig(256 * 1024), {
      maxStreamWindow: 256 * 1024,
      maxFrameLength: DEFAULT_SESSION_CONFIG.maxFrameLength,
    });
    const wide = resolveSessionConfig(streamWindowConfig(64 * 1024 * 1024));
    assert.equal(wide.maxFrameLength, 64 * 1024 * 1024);
  });

  it("refuses a window below the spec's 256 KiB or above 32 bits", () => {
    assert.throws(
      () => resolveSessionConfig({ maxStreamWindow: INITIAL_STREAM_WINDOW - 1 }),
      /maxStreamWindow/,
    );
    assert.throws(() => resolveSessionConfig({ maxStreamWindow: 2 ** 32 }), /maxStreamWindow/);
  });
});
