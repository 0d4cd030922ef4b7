/**
 * High availability: one client that keeps sessions to several nodes of a cluster at once, each
 * serving the same tunnels and services (every session is a route), so that losing a node cuts
 * only the visitors in flight on it. Each session is a {@linkcode Client} of its own, with its
 * own reconnects and backoff, starting at a different URL of the list (or a different address of
 * a DNS name that resolves to several nodes); two sessions on the same node count as one. The client reports when it runs with fewer distinct nodes than asked
 * (`degraded`, on every change of its nodes while so) and when it is whole again.
 *
 * @example
 * ```ts ignore
 * import { connectHa } from "./ha_client.ts";
 * const ha = await connectHa(["tcp://node-a:7000", "tcp://node-b:7000"], { token, sessions: 2 });
 * ha.on("degraded", ({ nodes, wanted }) => console.warn(`on ${nodes.length} of ${wanted} nodes`));
 * const { remotePort } = await ha.expose({ local: "127.0.0.1:3000" });
 * ```
 *
 * @module
 */

import type { VisitorPolicy } from "../tunnel/policy/visitor_policy.ts";
import { listenUdpForward, type UdpForward } from "./tunnels/forward_udp.ts";
import { Client, type ConnectOptions, type ExposeOptions, type OfferOptions } from "./client.ts";
import { ClientError } from "./errors.ts";
import { Emitter } from "./emitter.ts";
import { type Forward, listenForward } from "./tunnels/forward_listener.ts";
import type { SocksServer } from "./tunnels/socks.ts";
import type { SocksOptions } from "./tunnels/socks_options.ts";

/** Options of {@linkcode connectHa}: a client's, plus how many nodes to keep sessions to. */
export interface HaOptions extends ConnectOptions {
  /** Sessions to keep, each to a different node when there are enough. Default 2. */
  sessions?: number;
}

/** One session of an HA client, as {@linkcode HaClient.sessions} lists it. */
export interface HaSession {
  /** The URL it is on (or trying next). */
  url: string;
  /** Its node, while connected. */
  node: string | undefined;
  /** Its state. */
  state: Client["state"];
  /** Last keepalive round trip, ms (0 before one). */
  rtt: number;
}

/** Events of an {@linkcode HaClient}. */
export interface HaEvents {
  /** Fewer distinct nodes than wanted (emitted when the set of nodes changes while so). */
  degraded: [info: { nodes: string[]; wanted: number }];
  /** As many distinct nodes as wanted again. */
  whole: [info: { nodes: string[] }];
  /**
   * A session failed or was lost (it reconnects on its own), or a forward's connection failed
   * (`session` -1).
   */
  error: [error: ClientError, session: number];
}

/** A client with sessions to several nodes. Create with {@linkcode connectHa}. */
export class HaClient extends Emitter<HaEvents> {
  /** The sessions, each a client of its own. */
  readonly members: readonly Client[];
  /** How many distinct nodes it wants. */
  readonly wanted: number;
  /** The node set last reported, so events come only when it changes. */
  #lastNodes: string | undefined;

  /** Starts every session at once; prefer {@linkcode connectHa}, which waits for the first. */
  constructor(urls: readonly string[], options: HaOptions) {
    super();
    this.wanted = Math.max(1, options.sessions ?? 2);
    // Each session starts at a different URL (and at a different address of a name with
    // several), so with enough of them they land on different nodes.
    this.members = Array.from({ length: this.wanted }, (_, i) => {
      const rotated = [...urls.slice(i % urls.length), ...urls.slice(0, i % urls.length)];
      const member = new Client(rotated, { ...options, ha: this.wanted, firstAddress: i });
      member.on("ready", () => this.#check(member));
      member.on("state", () => this.#check());
      member.on("error", (error) => this.emit("error", error, i));
      return member;
    });
  }

  /** Resolves once one session is ready; rejects if every session gave up. */
  async ready(): Promise<void> {
    const results = this.members.map((m) => m.ready());
    await Promise.any(results).catch(async () => {
      throw await results[0].catch((error) => error);
    });
  }

  /** The sessions: URL, node, state, round trip. */
  get sessions(): HaSession[] {
    return this.members.map((m) => ({
      url: m.url,
      node: m.node,
      state: m.state,
      rtt: m.session?.rtt ?? 0,
    }));
  }

  /** The distinct nodes with a ready session. */
  get nodes(): string[] {
    const nodes = new Set<string>();
    for (const m of this.members) if (m.state === "ready" && m.node) nodes.add(m.node);
    return [...nodes].sort();
  }

  /** Whether fewer distinct nodes than wanted have a session now. */
  get degraded(): boolean {
    return this.nodes.length < this.wanted;
  }

  /**
   * Exposes a tunnel on every session: the first ready session picks the port, every other
   * session serves the same port (a shared port, or the group's), now and after its reconnects.
   * `close()` closes it on every session.
   */
  async expose(
    options: ExposeOptions,
  ): Promise<
    {
      remoteHost: string;
      remotePort: number;
      close(): Promise<void>;
      setPolicy(policy: VisitorPolicy): Promise<void>;
    }
  > {
    const shared = options.group === undefined ? { shared: true } : {};
    const first = await this.#firstReady();
    const tunnel = await first.expose({ ...options, ...shared });
    const tunnels = [tunnel];
    for (const member of this.members) {
      if (member !== first) {
        tunnels.push(member.keep({ ...options, ...shared, remotePort: tunnel.remotePort }));
      }
    }
    return {
      remoteHost: tunnel.remoteHost,
      remotePort: tunnel.remotePort,
      close: async () => {
        await Promise.all(tunnels.map((t) => t.close().catch(() => {})));
      },
      // Every session's route meets the same rules; the first refusal is the answer.
      setPolicy: async (policy) => {
        await Promise.all(tunnels.map((t) => t.setPolicy(policy)));
      },
    };
  }

  /**
   * Offers a named service on every session (each is an offer of the name: users go to any
   * live one), now and after each session's reconnects. Resolves once the first ready session's
   * offer is accepted; a later refusal on another session arrives as an `error` event.
   */
  async offer(name: string, local: string, options: OfferOptions = {}): Promise<void> {
    const first = await this.#firstReady();
    await first.offer(name, local, options);
    for (const member of this.members) {
      if (member !== first) member.keepOffer(name, local, options);
    }
  }

  /**
   * Listens on `listen` here; each connection goes through the first session that is ready when
   * it arrives (to `target`, or to the named `service`), so a forward keeps working while any
   * session is up. Connections arriving while none is are closed at once.
   */
  forward(options: { listen: string; target?: string; service?: string }): Promise<Forward> {
    return listenForward(options, () => {
      const member = this.members.find((m) => m.state === "ready");
      if (!member) throw new ClientError("not_connected", "no session is ready");
      return member;
    }, (error) => this.emit("error", error, -1));
  }

  /**
   * A SOCKS5 server on `options.listen`; each CONNECT goes through the first session that is
   * ready when it comes (see `Client.socks`).
   */
  async socks(options: SocksOptions): Promise<SocksServer> {
    // The SOCKS front's code loads with the first front started.
    const { listenSocks } = await import("./tunnels/socks.ts");
    return listenSocks(options, () => {
      const member = this.members.find((m) => m.state === "ready");
      if (!member) throw new ClientError("not_connected", "no session is ready");
      return member;
    }, (error) => this.emit("error", error, -1));
  }

  /**
   * Binds UDP `listen` here; each visitor's flow goes through the first session that is ready
   * when it starts (a flow stays on its session). Flows starting while none is drop their datagram.
   */
  forwardUdp(options: { listen: string; target: string }): Promise<UdpForward> {
    return listenUdpForward(options, () => {
      const member = this.members.find((m) => m.state === "ready");
      if (!member) throw new ClientError("not_connected", "no session is ready");
      return member;
    }, (error) => this.emit("error", error, -1));
  }

  /** Stops offering a service on every session. */
  async withdraw(name: string): Promise<void> {
    await Promise.all(this.members.map((m) => m.withdraw(name).catch(() => {})));
  }

  /** Closes every session. */
  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.close()));
  }

  async #firstReady(): Promise<Client> {
    const ready = this.members.find((m) => m.state === "ready");
    if (ready) return ready;
    await this.ready();
    const now = this.members.find((m) => m.state === "ready");
    if (!now) throw new ClientError("not_connected", "no session is ready");
    return now;
  }

  /**
   * Recomputes the distinct nodes. A session that landed on a node another session already has
   * moves on to its next URL, when it has one (two sessions on one node count as one).
   */
  #check(joined?: Client): void {
    if (joined?.node !== undefined && joined.hasAlternatives) {
      const twin = this.members.find((m) =>
        m !== joined && m.state === "ready" && m.node === joined.node
      );
      if (twin) joined.session?.destroy(); // reconnects to its next URL
    }
    const nodes = this.nodes;
    const key = nodes.join(",");
    if (key === this.#lastNodes) return;
    this.#lastNodes = key;
    if (nodes.length < this.wanted) this.emit("degraded", { nodes, wanted: this.wanted });
    else this.emit("whole", { nodes });
  }
}

/** Connects sessions to `urls` (several nodes of a cluster); resolves when one is ready. */
export async function connectHa(urls: readonly string[], options: HaOptions): Promise<HaClient> {
  const client = new HaClient(urls, options);
  try {
    await client.ready();
  } catch (error) {
    await client.close();
    throw error;
  }
  return client;
}
