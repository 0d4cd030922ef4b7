// The yamux tuning a client's session gets from the daemon's limits (client_session.ts). Runs
// under `deno test -A` and `bun test`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sessionConfigFor } from "./client_session.ts";
import { embeddedDefaults } from "../config/mod.ts";
import { validateConfig } from "../config/validate.ts";
import { resolveSessionConfig } from "../../protocol/config.ts";
import type { Limits } from "../config/mod.ts";

const DEFAULT_LIMITS = embeddedDefaults().limits as Limits;

describe("daemon/session: sessionConfigFor", () => {
  it("gives each stream the window of limits.streamWindow, 6 MiB by default", () => {
    const config = resolveSessionConfig(sessionConfigFor(DEFAULT_LIMITS));
    assert.equal(config.maxStreamWindow, 6 * 1024 * 1024);
    assert.equal(config.maxStreams, DEFAULT_LIMITS.streamsPerSession);
    assert.equal(config.keepAliveInterval, DEFAULT_LIMITS.keepAliveIntervalMs);
  });

  it("accepts frames of a whole window at every window the configuration allows", () => {
    for (const streamWindow of [256 * 1024, 16 * 1024 * 1024, 64 * 1024 * 1024]) {
      const config = resolveSessionConfig(sessionConfigFor({ ...DEFAULT_LIMITS, streamWindow }));
      assert.equal(config.maxStreamWindow, streamWindow);
      assert.ok(config.maxFrameLength >= streamWindow, `window ${streamWindow}`);
    }
  });

  it("refuses a window the session could not take, naming limits.streamWindow", () => {
    for (const streamWindow of [256 * 1024 - 1, 64 * 1024 * 1024 + 1]) {
      const { errors } = validateConfig({ limits: { streamWindow } });
      assert.ok(
        errors.some((e) => e.path === "limits.streamWindow"),
        JSON.stringify(errors),
      );
    }
  });
});
