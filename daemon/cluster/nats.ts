/**
 * The cluster's one connection to NATS and its KV buckets. The NATS client is imported here
 * dynamically, so a single-node daemon never loads it (`daemon.ts` imports this folder only when
 * `cluster` is configured).
 *
 * NATS carries coordination only (presence, the registry, tokens, events, admin queries); tunnel
 * bytes go node to node over our own relay sessions (`peers.ts`).
 *
 * @module
 */

import { readFile } from "node:fs/promises";
import type { ClusterConfig } from "../config/mod.ts";
import type { Logger } from "../../util/log.ts";
import { type RawBucket, RecordKeys, RefusedRecords, signedBucket } from "./signed_kv.ts";

/** The slice of a NATS KV bucket the cluster uses (`@nats-io/kv`'s `KV`). */
export interface KvBucket {
  /** Creates `key` if it does not exist (or is deleted); rejects "wrong last sequence" if it does. */
  create(key: string, value: string): Promise<number>;
  /** Writes `key` if its revision is still `revision`. */
  update(key: string, value: string, revision: number): Promise<number>;
  /** Writes `key` unconditionally. */
  put(key: string, value: string): Promise<number>;
  /** The entry of `key` (deleted ones have operation `DEL` or `PURGE`), or null. */
  get(key: string): Promise<KvEntry | null>;
  /** Deletes `key`, if its revision is still `previousSeq` when given. */
  delete(key: string, options?: { previousSeq?: number }): Promise<void>;
  /** Follows every change (current values first, then updates). */
  watch(options?: { include?: string }): Promise<AsyncIterable<KvEntry> & { stop(): void }>;
  /** Every live key. */
  keys(): Promise<AsyncIterable<string>>;
  /** Every live key's latest entry, in one pass over the bucket: no read per key. */
  latest(): Promise<AsyncIterable<KvEntry>>;
  /**
   * The bucket's last revision: the stream sequence of its latest write, deletion or expiry
   * marker, whatever the key. One request, whatever the number of records.
   */
  lastRevision(): Promise<number>;
}

/** One KV entry, as `@nats-io/kv` gives it. */
export interface KvEntry {
  /** The key. */
  readonly key: string;
  /** The stream sequence that wrote it: the revision to compare against. */
  readonly revision: number;
  /** `PUT`, or `DEL` / `PURGE` for a deletion (a TTL expiry arrives as `PURGE`). */
  readonly operation: string;
  /** When the server stored it. */
  readonly created: Date;
  /** The value as text. */
  string(): string;
}

/** The state of the NATS connection, as the cluster reports it. */
export type NatsState = "connected" | "reconnecting" | "closed";

/** A live NATS connection with the cluster's buckets. */
export interface NatsLink {
  /** Presence: one entry per live node, expiring after the presence TTL. */
  readonly nodes: KvBucket;
  /** Public ports of reverse tunnels, cluster-wide. */
  readonly ports: KvBucket;
  /** Named service offers. */
  readonly services: KvBucket;
  /** Host names of HTTP and TLS tunnels. */
  readonly hosts: KvBucket;
  /** Tokens minted through the admin API (hashes only). */
  readonly tokens: KvBucket;
  /**
   * Opens (creating if needed) the signed bucket `<prefix>-<kind>`, whose entries expire `ttlMs`
   * after their last write when given: for buckets only some nodes' settings need.
   */
  bucket(kind: string, ttlMs?: number): Promise<KvBucket>;
  /** The connection's state now. */
  readonly state: NatsState;
  /** The server this connection is on, when connected. */
  readonly server: string | undefined;
  /** Called on every change of {@linkcode state}. */
  onState: ((state: NatsState) => void) | null;
  /** Publishes `data` on `subject`. */
  publish(subject: string, data: string): void;
  /** Answers requests on `subject` with `handler`'s reply. */
  reply(subject: string, handler: (data: string) => Promise<string>): void;
  /** Sends a request; resolves with the reply, rejects after `timeoutMs`. */
  request(subject: string, data: string, timeoutMs: number): Promise<string>;
  /**
   * Collects the replies of every responder to `subject`, until `expected` replies came or
   * `timeoutMs` passed.
   */
  gather(subject: string, data: string, timeoutMs: number, expected: number): Promise<string[]>;
  /** Calls `handler` with every message on `subject` (wildcards allowed). */
  subscribe(subject: string, handler: (data: string, subject: string) => void): () => void;
  /** Closes the connection. */
  close(): Promise<void>;
}

/** True when a KV error says the key exists / the revision moved (a lost compare-and-set). */
export function isRevisionConflict(error: unknown): boolean {
  return /wrong last sequence|key exists/i.test((error as Error)?.message ?? "");
}

/** How long one KV operation may wait for JetStream. */
const KV_TIMEOUT_MS = 2_000;
/** How long a starting node waits for JetStream to open its buckets. */
const BUCKET_DEADLINE_MS = 60_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Connects to NATS with the configured credentials, and opens (creating if needed) the buckets,
 * whose records are signed and checked with the cluster key (`signed_kv.ts`; a record refused is
 * counted with `count` and logged). Keeps reconnecting forever once connected; rejects if the
 * first connection fails.
 */
export async function connectNats(
  config: ClusterConfig,
  log: Logger,
  count: (event: string) => void = () => {},
): Promise<NatsLink> {
  const [{ connect, credsAuthenticator, nkeyAuthenticator }, { jetstream }, { Kvm }] = await Promise
    .all([
      import("@nats-io/transport-node"),
      import("@nats-io/jetstream"),
      import("@nats-io/kv"),
    ]);
  const { auth } = config;
  const authenticator = auth.credsFile
    ? credsAuthenticator(await readFile(auth.credsFile))
    : auth.nkeySeedFile
    ? nkeyAuthenticator(encoder.encode((await readFile(auth.nkeySeedFile, "utf8")).trim()))
    : undefined;
  let nc: Awaited<ReturnType<typeof connect>>;
  try {
    nc = await connect({
      servers: config.servers,
      name: `tunnelmux-${config.node}`,
      token: auth.token,
      user: auth.user,
      pass: auth.password,
      authenticator,
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      reconnectJitter: 100,
      pingInterval: Math.max(1000, Math.floor(config.presenceTtlMs / 2)),
      maxPingOut: 2,
    });
  } catch (error) {
    throw new Error(
      `cannot join the cluster: NATS at ${config.servers.join(", ")}: ${(error as Error).message}`,
    );
  }
  // A KV operation waits this long for JetStream: a claim while NATS is away is refused after
  // it, not held for the client library's default (5-10 s).
  const kvm = new Kvm(jetstream(nc, { timeout: KV_TIMEOUT_MS }));
  const keys = new RecordKeys([config.key, ...config.previousKeys]);
  const refused = new RefusedRecords(log, count);
  const bucket = async (kind: string, ttl?: number): Promise<KvBucket> => {
    const name = `${config.bucketPrefix}-${kind}`;
    const options = {
      timeout: KV_TIMEOUT_MS,
      history: 1,
      replicas: config.replicas,
      ...(ttl ? { ttl, markerTTL: ttl } : {}),
    };
    // create() opens an existing bucket of the same settings. A JetStream cluster that has just
    // started may still be electing its leader: try for a while before giving up.
    const deadline = Date.now() + BUCKET_DEADLINE_MS;
    let kv;
    for (;;) {
      try {
        kv = await kvm.create(name, options);
        break;
      } catch (error) {
        if (Date.now() > deadline) {
          throw new Error(`cannot open the NATS KV bucket ${name}: ${(error as Error).message}`);
        }
        log.info("waiting for JetStream", { bucket: name, detail: (error as Error).message });
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    const raw: RawBucket = {
      create: (key, value) => kv.create(key, value),
      update: (key, value, revision) => kv.update(key, value, revision),
      put: (key, value) => kv.put(key, value),
      get: (key) => kv.get(key),
      delete: (key, options) => kv.delete(key, options),
      // deno-lint-ignore no-explicit-any
      watch: (options) => kv.watch(options as any),
      keys: () => kv.keys(),
      lastRevision: async () => (await kv.status()).streamInfo.state.last_seq,
      history: () => kv.history(),
    };
    return signedBucket(raw, {
      bucket: name,
      keys,
      refused: (key, revision, reason) => refused.report(name, kind, key, revision, reason),
    });
  };
  let state: NatsState = "connected";
  const link: NatsLink = {
    nodes: await bucket("nodes", config.presenceTtlMs),
    ports: await bucket("ports"),
    services: await bucket("services"),
    hosts: await bucket("hosts"),
    tokens: await bucket("tokens"),
    bucket,
    get state() {
      return state;
    },
    get server() {
      return state === "connected" ? nc.getServer() : undefined;
    },
    onState: null,
    publish: (subject, data) => nc.publish(subject, encoder.encode(data)),
    reply(subject, handler) {
      nc.subscribe(subject, {
        callback: (error, message) => {
          if (error) return;
          handler(decoder.decode(message.data)).then(
            (answer) => message.respond(encoder.encode(answer)),
            (failure) => log.warn("cluster query failed", { subject, detail: String(failure) }),
          );
        },
      });
    },
    async request(subject, data, timeoutMs) {
      const answer = await nc.request(subject, encoder.encode(data), { timeout: timeoutMs });
      return decoder.decode(answer.data);
    },
    gather(subject, data, timeoutMs, expected) {
      return new Promise((resolve) => {
        const replies: string[] = [];
        const inbox = `_INBOX.${crypto.randomUUID().replaceAll("-", "")}`;
        const finish = () => {
          clearTimeout(timer);
          sub.unsubscribe();
          resolve(replies);
        };
        const sub = nc.subscribe(inbox, {
          callback: (error, message) => {
            if (error) return;
            replies.push(decoder.decode(message.data));
            if (replies.length >= expected) finish();
          },
        });
        const timer = setTimeout(finish, timeoutMs);
        nc.publish(subject, encoder.encode(data), { reply: inbox });
      });
    },
    subscribe(subject, handler) {
      const sub = nc.subscribe(subject, {
        callback: (error, message) => {
          if (!error) handler(decoder.decode(message.data), message.subject);
        },
      });
      return () => sub.unsubscribe();
    },
    async close() {
      state = "closed";
      await nc.close().catch(() => {});
    },
  };
  const setState = (next: NatsState) => {
    if (state === next || state === "closed") return;
    state = next;
    log.info(`NATS ${next}`, { server: link.server });
    link.onState?.(next);
  };
  (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect" || status.type === "reconnecting") setState("reconnecting");
      else if (status.type === "reconnect") setState("connected");
    }
  })().catch(() => {});
  nc.closed().then(() => setState("closed"));
  return link;
}
