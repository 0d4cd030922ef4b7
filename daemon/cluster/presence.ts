/**
 * Presence: which nodes of the cluster are alive. Each node keeps one entry in the `nodes` bucket,
 * whose TTL is the presence TTL, and rewrites it every third of the TTL. A node that dies stops
 * rewriting, NATS expires the entry, and every watcher sees it go (an expiry arrives as a `PURGE`
 * marker). Each beat also checks, with one request, that the watch still follows the bucket (see
 * `follower.ts`): the bucket is read whole only at start, after NATS came back and when the watch
 * fell behind. A node the watch has not shown beating for {@linkcode GONE_AFTER_TTLS} TTLs is taken
 * for gone even if its expiry marker never came. So a node's steady work is one write and one
 * request per beat, plus the watch bringing every other node's beats: no read per node.
 *
 * A node writes its entry with a compare-and-set on the revision it wrote last. When that fails,
 * the entry expired while this node was away (a long pause, NATS out of reach for longer than the
 * TTL) and other nodes may have taken what it held: it writes a fresh entry and reports
 * {@linkcode Presence.onSelfLost}, so the registry can re-assert its claims or give up the ones
 * others took. A node restarted under the same name has a new `run` id, so claims of its previous
 * run count as stale.
 *
 * @module
 */

import type { Logger } from "../../util/log.ts";
import { isRevisionConflict, type KvBucket, type KvEntry } from "./nats.ts";
import { Follower } from "./follower.ts";

/**
 * A node unseen for this many TTLs is gone, marker or not: its entry expired a third of a TTL ago
 * at least (every live node beats each third), and a stalled watch is found and read again within
 * two beats, before that.
 */
export const GONE_AFTER_TTLS = 4 / 3;

/** A node's presence entry. */
export interface NodeInfo {
  /** The node's name. */
  node: string;
  /** A random id of this run of the node. */
  run: string;
  /** Where other nodes dial its relay listener. */
  advertise: string;
  /** tunnelmux version. */
  version: string;
  /** When the node started (ms since the epoch). */
  startedAt: number;
  /** When this entry was written (ms since the epoch, the writer's clock). */
  at: number;
  /** Client sessions on the node. */
  sessions: number;
  /** Reverse tunnels held by the node. */
  tunnels: number;
}

/** How to build a {@linkcode Presence}. */
export interface PresenceOptions {
  /** The `nodes` bucket. */
  bucket: KvBucket;
  /** This node's entry, without the live fields (`at`, counts). */
  self: Omit<NodeInfo, "at" | "sessions" | "tunnels">;
  /** Live counts for the entry. */
  counts: () => { sessions: number; tunnels: number };
  /** The presence TTL, ms. */
  ttlMs: number;
  /** Where changes are logged. */
  log: Logger;
}

/** This node's presence, and the view of every other node's. */
export class Presence {
  /** A node appeared (or a new run of it). */
  onNodeUp: ((info: NodeInfo) => void) | null = null;
  /** A node (run) is gone: its entry expired or was deleted, or a new run replaced it. */
  onNodeGone: ((info: NodeInfo) => void) | null = null;
  /** This node's own entry was lost and has been written again. */
  onSelfLost: (() => void) | null = null;
  /** After each successful heartbeat, with its count. */
  onBeat: ((beats: number) => void) | null = null;

  readonly #options: PresenceOptions;
  readonly #nodes = new Map<string, NodeInfo>();
  /** When this node last saw each node's entry written (its own clock). */
  readonly #seen = new Map<string, number>();
  #revision = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  readonly #follower: Follower;
  #beating = false;
  #beats = 0;
  #stopped = false;

  /** A presence for `options.self`; nothing is written until {@linkcode start}. */
  constructor(options: PresenceOptions) {
    this.#options = options;
    this.#follower = new Follower({
      name: "nodes",
      bucket: options.bucket,
      apply: (entry) => this.#apply(entry),
      // A listing is not proof of absence (during a NATS failover it can come back short): a
      // node missing from it is gone only once this node has not seen it beat for a whole TTL.
      reconcile: (listed) => {
        this.#sweep(options.ttlMs, listed);
        return Promise.resolve();
      },
      onStall: () => options.log.warn("cluster presence watch fell behind; reading it again"),
    });
  }

  /** This node's name. */
  get node(): string {
    return this.#options.self.node;
  }

  /** Where other nodes dial this node, as its entry says. */
  get advertise(): string {
    return this.#options.self.advertise;
  }

  /** This run's id. */
  get run(): string {
    return this.#options.self.run;
  }

  /** Writes this node's entry, reads everyone's, and starts the heartbeat and the watch. */
  async start(): Promise<void> {
    const { bucket, ttlMs } = this.#options;
    this.#revision = await bucket.put(this.node, this.#entry());
    await this.refollow();
    this.#timer = setInterval(() => void this.#beat(), Math.max(200, Math.floor(ttlMs / 3)));
  }

  /** (Re)starts the watch of the bucket and reads it whole (a watch may not survive a failover). */
  async refollow(): Promise<void> {
    await this.#follower.start();
  }

  /** Writes this node's entry now (NATS just came back: others may have seen it expire). */
  beatNow(): void {
    void this.#beat();
  }

  /** Whether `node` is alive (in run `run`, when given). */
  alive(node: string, run?: string): boolean {
    const info = this.#nodes.get(node);
    return info !== undefined && (run === undefined || info.run === run);
  }

  /** Every live node, this one included, by name. */
  nodes(): NodeInfo[] {
    return [...this.#nodes.values()].sort((a, b) => a.node.localeCompare(b.node));
  }

  /** The entry of `node`, if alive. */
  get(node: string): NodeInfo | undefined {
    return this.#nodes.get(node);
  }

  /** Stops the heartbeat and removes this node's entry (others see it leave at once). */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#follower.stop();
    await this.#options.bucket.delete(this.node, { previousSeq: this.#revision }).catch(() => {});
  }

  #entry(): string {
    const info: NodeInfo = { ...this.#options.self, at: Date.now(), ...this.#options.counts() };
    this.#nodes.set(info.node, info);
    return JSON.stringify(info);
  }

  async #beat(): Promise<void> {
    if (this.#beating || this.#stopped) return;
    this.#beating = true;
    try {
      this.#revision = await this.#options.bucket.update(this.node, this.#entry(), this.#revision);
      this.onBeat?.(++this.#beats);
    } catch (error) {
      if (isRevisionConflict(error)) {
        // Our entry expired (or someone wrote it): we were away longer than the TTL.
        this.#options.log.warn("cluster presence was lost; registering again", {
          detail: (error as Error).message,
        });
        try {
          this.#revision = await this.#options.bucket.put(this.node, this.#entry());
          this.onSelfLost?.();
        } catch {
          // NATS is unreachable; the next beat tries again.
        }
      }
      // Anything else: NATS is unreachable now; the next beat tries again.
    } finally {
      this.#beating = false;
    }
    try {
      // The watch first: a stalled one is read again here, before the sweep judges by it.
      if (await this.#follower.check()) {
        this.#sweep(GONE_AFTER_TTLS * this.#options.ttlMs);
      }
    } catch {
      // NATS is unreachable; the next beat checks again.
    }
  }

  /**
   * Takes for gone every other node not seen beating for `unseenMs` (and, after a full read,
   * not in `listed`): catches expiries whose marker the watch did not bring.
   */
  #sweep(unseenMs: number, listed?: ReadonlySet<string>): void {
    const now = Date.now();
    for (const info of [...this.#nodes.values()]) {
      if (info.node === this.node || listed?.has(info.node)) continue;
      if (now - (this.#seen.get(info.node) ?? 0) > unseenMs) this.#gone(info);
    }
  }

  #apply(entry: KvEntry): void {
    if (entry.operation !== "PUT") {
      const info = this.#nodes.get(entry.key);
      if (info && entry.key !== this.node) this.#gone(info);
      return;
    }
    let info: NodeInfo;
    try {
      info = JSON.parse(entry.string()) as NodeInfo;
    } catch {
      return;
    }
    if (info.node !== entry.key || info.node === this.node) return;
    const previous = this.#nodes.get(info.node);
    if (previous && previous.run !== info.run) this.#gone(previous);
    this.#nodes.set(info.node, info);
    this.#seen.set(info.node, Date.now());
    if (!previous || previous.run !== info.run) {
      this.#options.log.info("cluster node up", { peer: info.node, advertise: info.advertise });
      this.onNodeUp?.(info);
    }
  }

  #gone(info: NodeInfo): void {
    if (this.#nodes.get(info.node) === info) this.#nodes.delete(info.node);
    this.#options.log.info("cluster node gone", { peer: info.node });
    this.onNodeGone?.(info);
  }
}
