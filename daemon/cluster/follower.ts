/**
 * Following one KV bucket with a watch, and knowing cheaply whether the watch still follows.
 *
 * A node learns of every change in a shared bucket from a KV watch. A watch can stall without an
 * error (its consumer lost in a NATS server failover), so the node must now and then make sure
 * it has seen everything. Reading the whole bucket again for that costs one read per record per
 * node: with _T_ records and _N_ nodes, _T_ × _N_ reads each period, a load that grows with the
 * product. Instead, {@linkcode Follower.check} asks NATS for one number, the bucket's last
 * revision (the stream's last sequence: every write, deletion and expiry marker takes the next
 * one), and compares it with the highest revision the watch has delivered. A watch that has not
 * reached, by one check, the revision the bucket had at the check before has stalled: only then
 * is the bucket read whole and the watch started again. The steady cost is one request per bucket
 * per check, whatever the number of records and nodes.
 *
 * @example
 * ```ts ignore
 * import { Follower } from "./follower.ts";
 * const follower = new Follower({
 *   name: "ports",
 *   bucket,
 *   apply: (entry) => records.apply(entry),
 *   reconcile: (listed) => records.forgetAllBut(listed),
 * });
 * await follower.start(); // the watch, then the bucket read whole
 * setInterval(() => void follower.check(), 25_000); // one request; a full read only if stalled
 * ```
 *
 * @module
 */

import type { KvBucket, KvEntry } from "./nats.ts";

/** What a {@linkcode Follower} follows and what it does with what it sees. */
export interface FollowerOptions {
  /** The bucket's short name, for logs and counters. */
  readonly name: string;
  /** The bucket. */
  readonly bucket: KvBucket;
  /** Applies one entry, from the watch or from a full read (applying one twice is harmless). */
  apply(entry: KvEntry): void | Promise<void>;
  /**
   * After a full read: the keys the bucket listed. Records known here but not listed may be gone
   * (a listing is not proof of absence: confirm before forgetting).
   */
  reconcile?(listed: ReadonlySet<string>): Promise<void>;
  /** A full read happened because the watch had stalled or ended. */
  onStall?(name: string): void;
}

/** Follows one bucket: a watch, a full read at start and after a stall, and a cheap check. */
export class Follower {
  readonly #options: FollowerOptions;
  #watch: { stop(): void } | undefined;
  /** The highest revision seen, from the watch or a full read. */
  #seen = 0;
  /** The bucket's last revision at the previous check: the watch must have reached it by now. */
  #owed = 0;
  /** The watch's loop ended (an error, or the server dropped it): read again at the next check. */
  #ended = false;
  #generation = 0;
  /** Full reads made (at start, after NATS came back, after a stall). */
  reads = 0;

  /** A follower of `options.bucket`; nothing happens until {@linkcode start}. */
  constructor(options: FollowerOptions) {
    this.#options = options;
  }

  /** The highest revision this follower has seen. */
  get seen(): number {
    return this.#seen;
  }

  /**
   * (Re)starts the watch, then reads the bucket whole (each key's last value, in one pass) and
   * reconciles: at start, after NATS came back (a watch may not survive a server failover), and
   * after a stall.
   */
  async start(): Promise<void> {
    const { bucket } = this.#options;
    this.#watch?.stop();
    const generation = ++this.#generation;
    this.#ended = false;
    // Everything up to here is in the full read below; everything after comes from the watch.
    const before = await bucket.lastRevision();
    const watch = await bucket.watch({ include: "updates" });
    this.#watch = watch;
    // What the watch delivers while the bucket is read: a key's entry from the read that is
    // older than one the watch already applied must not take its place (a revocation undone).
    const delivered = new Map<string, number>();
    let reading = true;
    (async () => {
      for await (const entry of watch) {
        if (entry.revision > this.#seen) this.#seen = entry.revision;
        if (reading) delivered.set(entry.key, entry.revision);
        await this.#options.apply(entry);
      }
    })().catch(() => {}).finally(() => {
      if (generation === this.#generation) this.#ended = true;
    });
    this.reads++;
    const listed = new Set<string>();
    try {
      // One pass over the bucket with its values, not a listing and then a read per key.
      for await (const entry of await bucket.latest()) {
        listed.add(entry.key);
        if ((delivered.get(entry.key) ?? 0) >= entry.revision) continue;
        if (entry.revision > this.#seen) this.#seen = entry.revision;
        await this.#options.apply(entry);
      }
    } finally {
      reading = false;
      delivered.clear();
    }
    if (before > this.#seen) this.#seen = before;
    this.#owed = this.#seen;
    await this.#options.reconcile?.(listed);
  }

  /**
   * One request: whether the watch has delivered everything the bucket held at the previous
   * check. If it has not (or its loop ended), the bucket is read whole and the watch restarted.
   * Returns true when the watch was found following.
   */
  async check(): Promise<boolean> {
    if (this.#ended || this.#seen < this.#owed) {
      this.#options.onStall?.(this.#options.name);
      await this.start();
      return false;
    }
    this.#owed = await this.#options.bucket.lastRevision();
    return true;
  }

  /** Stops the watch. */
  stop(): void {
    this.#generation++;
    this.#watch?.stop();
    this.#watch = undefined;
  }
}
