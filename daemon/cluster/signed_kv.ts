/**
 * Every record a node writes into the cluster's KV buckets is signed, and every record it reads
 * is believed only if the signature checks: a NATS user without the cluster key can write into
 * the buckets, but what it writes is read as nothing. {@linkcode signedBucket} wraps a bucket so
 * that presence, claims and tokens above it read and write plain records as before.
 *
 * The value stored is an envelope: one line `tmkv1 ID:MAC`, then the record as written. `MAC` is
 * HMAC-SHA256 (base64url) under a key derived from the cluster key, over the bucket's name, the
 * record's KV key and the record, so a signed record moved to another key or bucket does not
 * check; `ID` names the key (8 hex digits derived from it, which reveal nothing of it), so that
 * a reader knows a record signed with a key it does not hold from a forged one.
 *
 * A value that does not check is treated as absent: `get` answers null, `keys` leaves it out, a
 * watch reports it as a deletion of that key (what the bucket holds is no longer a record this
 * node can believe, and a node's view then matches what `get` answers, which the claims'
 * compare-and-set reasoning relies on; a writer could delete the key anyway). `create` over such
 * a value replaces it, at its revision, so a forged claim holds nothing. Each refusal is counted
 * and logged by {@linkcode RefusedRecords}.
 *
 * Not prevented (no MAC can): a NATS user replaying an old signed value of the same key, or
 * deleting records (`docs/cluster.md`).
 *
 * @example
 * ```ts
 * import { RecordKeys } from "./signed_kv.ts";
 * const keys = new RecordKeys(["a-shared-cluster-key-of-24+chars"]);
 * const value = keys.seal("tunnelmux-ports", "port-20100", '{"port":20100}');
 * console.assert(keys.open("tunnelmux-ports", "port-20100", value).record === '{"port":20100}');
 * console.assert(keys.open("tunnelmux-ports", "port-20101", value).refused === "forged");
 * ```
 *
 * @module
 */

import type { Buffer } from "node:buffer";
import { createHmac } from "node:crypto";
import type { Logger } from "../../util/log.ts";
import type { KvBucket, KvEntry } from "./nats.ts";
import { proofMatches } from "./peer_auth.ts";

/** How the envelope's first line starts (its format's version). */
const MAGIC = "tmkv1";

/** More signatures than this on one record are not looked at. */
const MAX_SIGNATURES = 8;

/** Why a stored value was not believed. */
export type RefusalReason =
  /** Not an envelope: a bare record (a NATS user, or a node of an older version). */
  | "unsigned"
  /** Signed only with keys this node does not hold (another cluster, or a key rotated out). */
  | "another key"
  /** Signed with a key id this node holds, but the MAC does not check. */
  | "forged";

/** What {@linkcode RecordKeys.open} found: the record, or why it was refused. */
export type Opened = { record: string; refused?: undefined } | {
  record?: undefined;
  refused: RefusalReason;
};

interface DerivedKey {
  /** 8 hex digits naming the key. */
  id: string;
  /** The MAC key, derived from the cluster key for records only. */
  secret: Buffer;
}

/** The name of cluster key `key`: 8 hex digits derived from it, which reveal nothing of it. */
export function keyId(key: string): string {
  return createHmac("sha256", key).update("tunnelmux-key-id-v1").digest("hex").slice(0, 8);
}

/** The keys records are signed and checked with: derived once from the cluster keys. */
export class RecordKeys {
  readonly #keys: DerivedKey[];

  /** Keys from `clusterKeys` (at least one). */
  constructor(clusterKeys: readonly string[]) {
    if (clusterKeys.length === 0) throw new Error("records need a cluster key");
    this.#keys = clusterKeys.map((key) => ({
      id: keyId(key),
      secret: createHmac("sha256", key).update("tunnelmux-kv-record-v1").digest(),
    }));
  }

  /** `record` as stored under `key` of `bucket`: the envelope, signed with every key. */
  seal(bucket: string, key: string, record: string): string {
    const signatures = this.#keys.map((k) => `${k.id}:${mac(k, bucket, key, record)}`);
    return `${MAGIC} ${signatures.join(" ")}\n${record}`;
  }

  /** The record a stored value carries, if one of these keys signed it for `key` of `bucket`. */
  open(bucket: string, key: string, value: string): Opened {
    const newline = value.indexOf("\n");
    if (newline < 0 || !value.startsWith(`${MAGIC} `)) return { refused: "unsigned" };
    const signatures = value.slice(MAGIC.length + 1, newline).split(" ", MAX_SIGNATURES);
    const record = value.slice(newline + 1);
    let held = false;
    for (const k of this.#keys) {
      const signature = signatures.find((s) => s.length > 9 && s.startsWith(`${k.id}:`));
      if (signature === undefined) continue;
      held = true;
      if (proofMatches(signature.slice(9), mac(k, bucket, key, record))) return { record };
    }
    return { refused: held ? "forged" : "another key" };
  }
}

function mac(k: DerivedKey, bucket: string, key: string, record: string): string {
  // Bucket names and KV keys hold no newline: the three parts cannot be confused.
  return createHmac("sha256", k.secret).update(`${bucket}\n${key}\n${record}`).digest("base64url");
}

/** A bucket as the NATS client gives it: {@linkcode KvBucket} and its whole history. */
export interface RawBucket extends Omit<KvBucket, "latest"> {
  /** Every stored message, oldest first (with history 1: each key's last write or deletion). */
  history(): Promise<AsyncIterable<KvEntry>>;
}

/** What {@linkcode signedBucket} needs besides the bucket. */
export interface SignedBucketOptions {
  /** The bucket's name in NATS (signed into every record). */
  bucket: string;
  /** The keys that sign and check. */
  keys: RecordKeys;
  /** A stored value was not believed. */
  refused: (key: string, revision: number, reason: RefusalReason) => void;
}

/**
 * `raw` with every value signed on write and checked on read (see the module's comment).
 * Compare-and-set is the bucket's own: `update` at a revision, `delete` at `previousSeq`.
 */
export function signedBucket(raw: RawBucket, options: SignedBucketOptions): KvBucket {
  const { bucket, keys, refused } = options;
  const seal = (key: string, record: string) => keys.seal(bucket, key, record);
  /** The entry as this node may believe it: its record, or null if refused. */
  const believe = (entry: KvEntry): KvEntry | null => {
    if (entry.operation !== "PUT") return entry;
    const opened = keys.open(bucket, entry.key, entry.string());
    if (opened.refused !== undefined) {
      refused(entry.key, entry.revision, opened.refused);
      return null;
    }
    return view(entry, entry.operation, opened.record);
  };
  /** Each live key's last entry, believed: one pass over the bucket with the values. */
  const latest = async (): Promise<AsyncIterable<KvEntry>> => {
    const last = new Map<string, KvEntry>();
    for await (const entry of await raw.history()) last.set(entry.key, entry);
    const live: KvEntry[] = [];
    for (const entry of last.values()) {
      const believed = entry.operation === "PUT" ? believe(entry) : null;
      if (believed) live.push(believed);
    }
    return (async function* () {
      yield* live;
    })();
  };
  return {
    async create(key, value) {
      const sealed = seal(key, value);
      try {
        return await raw.create(key, sealed);
      } catch (error) {
        // The key exists. If what it holds is not believed, it holds nothing: take it, at the
        // revision read, so that of two nodes doing so only one wins.
        const entry = await raw.get(key);
        if (entry?.operation !== "PUT" || believe(entry) !== null) throw error;
        return await raw.update(key, sealed, entry.revision);
      }
    },
    update: (key, value, revision) => raw.update(key, seal(key, value), revision),
    put: (key, value) => raw.put(key, seal(key, value)),
    async get(key) {
      const entry = await raw.get(key);
      return entry && believe(entry);
    },
    delete: (key, deleteOptions) => raw.delete(key, deleteOptions),
    // A number, not a record: nothing to sign. A forged write raises it, and its watch entry
    // (refused, seen as a deletion) carries the same revision, so a follower is not misled.
    lastRevision: () => raw.lastRevision(),
    async watch(watchOptions) {
      const inner = await raw.watch(watchOptions);
      return {
        stop: () => inner.stop(),
        async *[Symbol.asyncIterator]() {
          for await (const entry of inner) {
            // A value not believed replaces whatever this node believed of the key: as if
            // deleted.
            yield believe(entry) ?? view(entry, "DEL", "");
          }
        },
      };
    },
    async keys() {
      const live: string[] = [];
      for await (const entry of await latest()) live.push(entry.key);
      return (async function* () {
        yield* live;
      })();
    },
    latest,
  };
}

function view(entry: KvEntry, operation: string, record: string): KvEntry {
  return {
    key: entry.key,
    revision: entry.revision,
    operation,
    created: entry.created,
    string: () => record,
  };
}

/** Refusals counted once per revision of a key, and logged once per key, kept this many. */
const REMEMBERED = 10_000;
/** At most this many refusals are logged per {@linkcode LOG_WINDOW_MS}. */
const LOG_BURST = 10;
const LOG_WINDOW_MS = 60_000;

/**
 * Counts and logs records not believed: each revision of a key counted once
 * (`registry_unverified_<kind>`, however often it is read), a warning for a key's first refusal,
 * at most {@linkcode LOG_BURST} a minute (a flood of forged records cannot flood the log; the
 * next warning says how many were left out).
 */
export class RefusedRecords {
  readonly #log: Logger;
  readonly #count: (event: string) => void;
  readonly #counted = new Map<string, number>();
  readonly #logged = new Set<string>();
  #windowStart = 0;
  #inWindow = 0;
  #unlogged = 0;

  /** Refusals logged to `log` and counted with `count`. */
  constructor(log: Logger, count: (event: string) => void) {
    this.#log = log;
    this.#count = count;
  }

  /** A value at `revision` of `key` in bucket `bucket` (of kind `kind`: `ports`, …) was refused. */
  report(bucket: string, kind: string, key: string, revision: number, reason: RefusalReason): void {
    const id = `${bucket}/${key}`;
    if (this.#counted.get(id) === revision) return;
    this.#counted.delete(id);
    this.#counted.set(id, revision);
    if (this.#counted.size > REMEMBERED) this.#counted.delete(this.#counted.keys().next().value!);
    this.#count(`registry_unverified_${kind}`);
    if (this.#logged.has(id)) return;
    this.#logged.add(id);
    if (this.#logged.size > REMEMBERED) this.#logged.delete(this.#logged.values().next().value!);
    const now = Date.now();
    if (now - this.#windowStart >= LOG_WINDOW_MS) {
      this.#windowStart = now;
      this.#inWindow = 0;
    }
    if (this.#inWindow >= LOG_BURST) {
      this.#unlogged++;
      return;
    }
    this.#inWindow++;
    this.#log.warn("cluster record refused: not signed with the cluster key", {
      bucket,
      key,
      revision,
      reason,
      ...(this.#unlogged > 0 ? { unlogged: this.#unlogged } : {}),
    });
    this.#unlogged = 0;
  }
}
