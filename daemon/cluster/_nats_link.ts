/**
 * Test support for the cluster's modules: a link to a real nats-server (`testing/nats.ts`, one per
 * test file) with the buckets a node uses, named after the test so files never share them.
 *
 * @module
 */

import { startNats } from "../../testing/nats.ts";
import { Logger } from "../../util/log.ts";
import type { ClusterConfig } from "../config/mod.ts";
import { connectNats, type NatsLink } from "./nats.ts";

/** The cluster settings connectNats reads, for test `name` (its node and bucket prefix). */
export function testClusterConfig(url: string, name: string, presenceTtlMs = 2_000): ClusterConfig {
  return {
    servers: [url],
    auth: {},
    node: name,
    listen: { hostname: "127.0.0.1", port: 0 },
    advertise: "127.0.0.1:0",
    key: `a-cluster-key-for-the-${name}`,
    presenceTtlMs,
    bucketPrefix: name,
    replicas: 1,
    tunnelHost: null,
    visitors: "all",
    tls: null,
  };
}

/** Starts a nats-server and connects to it as test `name`; `cleanup()` stops the server. */
export async function testNatsLink(name: string, presenceTtlMs?: number): Promise<NatsLink> {
  const nats = await startNats();
  const log = new Logger({ level: "error", format: "json", sink: () => {} });
  return await connectNats(testClusterConfig(nats.url, name, presenceTtlMs), log);
}
