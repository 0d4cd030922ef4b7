/**
 * Test support for the cluster's modules: a link to a real nats-server (`testing/nats.ts`, one per
 * test file) with the buckets a node uses, named after the test so files never share them; and a
 * bare NATS client on those buckets, holding no cluster key, as any NATS user could write them.
 *
 * @module
 */

import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { startNats } from "../../testing/nats.ts";
import { register } from "../../testing/cleanup.ts";
import { Logger } from "../../util/log.ts";
import type { ClusterConfig } from "../config/mod.ts";
import { connectNats, type KvBucket, type NatsLink } from "./nats.ts";

/** The cluster key of test `name`'s nodes. */
export function testClusterKey(name: string): string {
  return `a-cluster-key-for-the-${name}`;
}

/** The cluster settings connectNats reads, for test `name` (its node and bucket prefix). */
export function testClusterConfig(url: string, name: string, presenceTtlMs = 2_000): ClusterConfig {
  return {
    servers: [url],
    auth: {},
    node: name,
    listen: { hostname: "127.0.0.1", port: 0 },
    advertise: "127.0.0.1:0",
    key: testClusterKey(name),
    previousKeys: [],
    presenceTtlMs,
    rereadSpreadMs: 3_000,
    bucketPrefix: name,
    replicas: 1,
    tunnelHost: null,
    visitors: "all",
    tls: null,
  };
}

/**
 * Starts a nats-server and connects to it as test `name` (the link says the server's `url`);
 * `cleanup()` stops the server.
 */
export async function testNatsLink(
  name: string,
  presenceTtlMs?: number,
): Promise<NatsLink & { url: string }> {
  const nats = await startNats();
  const log = new Logger({ level: "error", format: "json", sink: () => {} });
  const link = await connectNats(testClusterConfig(nats.url, name, presenceTtlMs), log);
  return Object.assign(link, { url: nats.url });
}

/** What {@linkcode connectTestLink} may change of a test node. */
export interface TestLinkOptions {
  /** The cluster keys: `cluster.key`, then `cluster.previousKeys` (default: test `name`'s). */
  keys?: readonly string[];
  /** The presence TTL (default 2 s). */
  presenceTtlMs?: number;
  /** Counts what the link counts (refused records). */
  count?: (event: string) => void;
  /** Where the link logs (default: nowhere). */
  log?: Logger;
}

/** Connects to the nats-server at `url` as a node of test `name`; closed by `cleanup()`. */
export async function connectTestLink(
  url: string,
  name: string,
  options: TestLinkOptions = {},
): Promise<NatsLink> {
  const [key, ...previousKeys] = options.keys ?? [testClusterKey(name)];
  const config = { ...testClusterConfig(url, name, options.presenceTtlMs), key, previousKeys };
  const log = options.log ?? new Logger({ level: "error", format: "json", sink: () => {} });
  const link = await connectNats(config, log, options.count);
  register(() => link.close());
  return link;
}

/** A bare NATS client's view of one bucket: values as stored, written without any key. */
export interface BareBucket {
  /** Writes `value` as is. */
  put(key: string, value: string): Promise<number>;
  /** The stored value of `key` (deleted: undefined). */
  get(key: string): Promise<{ value: string; revision: number } | undefined>;
  /** Deletes `key`. */
  delete(key: string): Promise<void>;
}

/** Opens bucket `bucket` (which a node has created) on `url` with a bare NATS client. */
export async function bareBucket(url: string, bucket: string): Promise<BareBucket> {
  const nc = await connect({ servers: url });
  register(() => nc.close());
  const kv = await new Kvm(jetstream(nc)).open(bucket);
  return {
    put: (key, value) => kv.put(key, value),
    async get(key) {
      const entry = await kv.get(key);
      return entry?.operation === "PUT"
        ? { value: entry.string(), revision: entry.revision }
        : undefined;
    },
    delete: (key) => kv.delete(key),
  };
}

/** Requests a {@linkcode countedBucket} was asked for, by kind. */
export interface BucketCalls {
  get: number;
  keys: number;
  latest: number;
}

/**
 * `bucket` with its reads counted; `control.duringRead`, when set, runs (once) after a
 * `latest()` pass has its values and before the caller sees them.
 */
export function countedBucket(bucket: KvBucket): {
  bucket: KvBucket;
  calls: BucketCalls;
  control: { duringRead: (() => Promise<void>) | undefined };
} {
  const calls: BucketCalls = { get: 0, keys: 0, latest: 0 };
  const control = { duringRead: undefined as (() => Promise<void>) | undefined };
  const counted: KvBucket = {
    ...bucket,
    get: (key) => (calls.get++, bucket.get(key)),
    keys: () => (calls.keys++, bucket.keys()),
    async latest() {
      calls.latest++;
      const read = await bucket.latest();
      const hook = control.duringRead;
      control.duringRead = undefined;
      await hook?.();
      return read;
    },
  };
  return { bucket: counted, calls, control };
}
