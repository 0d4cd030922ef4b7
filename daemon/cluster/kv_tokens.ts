/**
 * Minted tokens kept in the cluster's `tokens` bucket instead of the data directory, so that a
 * token minted on one node works on every node and a revocation anywhere closes its sessions
 * everywhere (each node follows the bucket and re-applies its clients on every change, within
 * the watch's delivery time). Records are stored as the file keeps them: hashes only.
 *
 * The watch is a {@linkcode Follower}'s: a watch can stall without an error (a NATS server
 * failover), and a node whose watch stalled would keep accepting a revoked token. The cluster
 * calls {@linkcode KvTokenBackend.check} now and then (one request: the bucket's last revision),
 * which reads the bucket again only when the watch fell behind, and
 * {@linkcode KvTokenBackend.refollow} when NATS came back.
 *
 * A record's key is its client name, so that two nodes minting the same name at once cannot
 * both succeed: the bucket's create-if-absent decides.
 *
 * @module
 */

import { TOKEN_ID, type TokenRecord } from "../tokens/file.ts";
import { type TokenBackend, TokenNameConflict } from "../tokens/store.ts";
import { isRevisionConflict, type KvBucket, type KvEntry } from "./nats.ts";
import { Follower } from "./follower.ts";

/** The KV key of a minted token: its client name (names are key-safe: letters, digits, . _ -). */
export function tokenKeyOf(name: string): string {
  return `name-${name.replaceAll(".", "_2e")}`;
}

function parse(entry: KvEntry): TokenRecord | undefined {
  try {
    const record = JSON.parse(entry.string()) as TokenRecord;
    if (typeof record?.id !== "string" || !TOKEN_ID.test(record.id)) return undefined;
    if (typeof record.name !== "string" || typeof record.hash !== "string") return undefined;
    return record;
  } catch {
    return undefined;
  }
}

/** A {@linkcode TokenBackend} over the `tokens` bucket, with its watch checked and restarted. */
export interface KvTokenBackend extends TokenBackend {
  /**
   * One request: whether the watch still follows the bucket; if it fell behind, the bucket is
   * read again and what changed meanwhile reported. True when it was following (or not started).
   */
  check(): Promise<boolean>;
  /** Restarts the watch and reads the bucket again (NATS came back). */
  refollow(): Promise<void>;
  /** Stops the watch. */
  stop(): void;
}

/** A {@linkcode KvTokenBackend} over the cluster's `tokens` bucket. */
export function kvTokenBackend(bucket: KvBucket): KvTokenBackend {
  /** What this node knows is in the bucket, by key, so deletions can name their record. */
  const known = new Map<string, TokenRecord>();
  let follower: Follower | undefined;
  return {
    async load() {
      // One pass over the bucket with its values, not a listing and then a read per key.
      for await (const entry of await bucket.latest()) {
        const record = entry.operation === "PUT" ? parse(entry) : undefined;
        if (record) known.set(entry.key, record);
      }
      return [...known.values()];
    },
    async add(record) {
      const key = tokenKeyOf(record.name);
      known.set(key, record); // before the watch can report our own write as someone else's
      try {
        await bucket.create(key, JSON.stringify(record));
      } catch (error) {
        known.delete(key);
        if (isRevisionConflict(error)) {
          throw new TokenNameConflict(`a minted token is named ${record.name}`);
        }
        throw new Error(`the cluster's token store cannot be reached: ${(error as Error).message}`);
      }
    },
    async remove(record) {
      const key = tokenKeyOf(record.name);
      if (known.get(key)?.id !== record.id) return;
      known.delete(key);
      // This node's view may be behind: the name may have been revoked and minted anew on another
      // node. Delete only the record meant, at the revision it was read at.
      const entry = await bucket.get(key);
      if (entry?.operation !== "PUT" || parse(entry)?.id !== record.id) return;
      try {
        await bucket.delete(key, { previousSeq: entry.revision });
      } catch (error) {
        if (!isRevisionConflict(error)) throw error;
      }
    },
    follow(changed) {
      const apply = (entry: KvEntry) => {
        const before = known.get(entry.key);
        const record = entry.operation === "PUT" ? parse(entry) : undefined;
        if (before && before.id !== record?.id) {
          known.delete(entry.key);
          changed(before, "removed");
        }
        if (record && before?.id !== record.id) {
          known.set(entry.key, record);
          changed(record, "added");
        }
      };
      follower = new Follower({
        name: "tokens",
        bucket,
        apply,
        // Known here, missing from the listing: revoked while the watch was not following,
        // unless written since (a listing is not proof of absence: confirm each).
        reconcile: async (listed) => {
          for (const [key, before] of [...known]) {
            if (listed.has(key)) continue;
            const entry = await bucket.get(key);
            if (entry) apply(entry);
            else if (known.get(key) === before) {
              known.delete(key);
              changed(before, "removed");
            }
          }
        },
      });
      follower.start().catch(() => {});
    },
    check: () => follower?.check() ?? Promise.resolve(true),
    refollow: () => follower?.start() ?? Promise.resolve(),
    stop: () => follower?.stop(),
  };
}
