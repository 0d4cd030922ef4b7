/**
 * UDP flows over yamux streams (docs/design/udp.md). Two halves, used on both sides of a tunnel:
 *
 * - {@linkcode UdpFlowTable}: a UDP socket that many visitors send to (the daemon's exposed port,
 *   or the client's `--forward-udp` port). Each visitor address is a flow with its own stream,
 *   opened on its first datagram and closed after an idle time; replies go back to that address.
 * - {@linkcode serveUdpFlow}: the stream's far end. One UDP socket per flow, so the service's
 *   replies come back on the socket of the visitor they belong to.
 *
 * Neither half ever waits on a stream: a flow that cannot keep up drops datagrams and counts them.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import { openUdp, type UdpSocket } from "../../transport/udp.ts";
import { DatagramDecoder, DatagramSender, UdpFramingError } from "./udp_framing.ts";
import { ResetReason } from "../stream/reset_reasons.ts";
import { formatHostPort } from "../../util/net/address.ts";

/** How long a flow lives without a datagram either way, by default. */
export const UDP_FLOW_IDLE_MS = 60_000;

/** Flows a table keeps at once, by default. */
export const UDP_MAX_FLOWS = 1024;

/**
 * Why a datagram was not carried (`refused`: the visitor policy refused its new flow;
 * `rate_limited`: over the tunnel's bandwidth).
 */
export type UdpDrop =
  | "queue_full"
  | "too_large"
  | "flow_limit"
  | "send_failed"
  | "refused"
  | "rate_limited";

/** Every {@linkcode UdpDrop}, for counters that list them all. */
export const UDP_DROPS: readonly UdpDrop[] = [
  "queue_full",
  "too_large",
  "flow_limit",
  "send_failed",
  "refused",
  "rate_limited",
];

/** What a table or a served flow did; shared by all flows of a tunnel. */
export interface UdpCounters {
  /** Flows open now. */
  flowsOpen: number;
  /** Flows opened in all. */
  flows: number;
  /** Datagrams received on the UDP socket and put on a stream (toward the tunnel). */
  datagramsIn: number;
  /** Datagrams taken from a stream and sent on the UDP socket. */
  datagramsOut: number;
  /** Payload bytes of `datagramsIn`. */
  bytesIn: number;
  /** Payload bytes of `datagramsOut`. */
  bytesOut: number;
  /** Datagrams dropped, by reason. */
  drops: Record<UdpDrop, number>;
}

/** Fresh zero counters. */
export function newUdpCounters(): UdpCounters {
  return {
    flowsOpen: 0,
    flows: 0,
    datagramsIn: 0,
    datagramsOut: 0,
    bytesIn: 0,
    bytesOut: 0,
    drops: {
      queue_full: 0,
      too_large: 0,
      flow_limit: 0,
      send_failed: 0,
      refused: 0,
      rate_limited: 0,
    },
  };
}

/**
 * Counters that add to both `a` and `b` as they change (reading gives `a`'s): one flow counted
 * for its session and for the daemon at once, without summing at each read.
 */
export function teeUdpCounters(a: UdpCounters, b: UdpCounters): UdpCounters {
  const tee = <T extends object>(x: T, y: T, keys: readonly (keyof T)[]): T => {
    const out = {} as T;
    for (const key of keys) {
      Object.defineProperty(out, key, {
        enumerable: true,
        get: () => x[key],
        set: (value: number) => {
          const delta = value - (x[key] as number);
          (x[key] as number) += delta;
          (y[key] as number) += delta;
        },
      });
    }
    return out;
  };
  const counters = tee(
    a,
    b,
    [
      "flowsOpen",
      "flows",
      "datagramsIn",
      "datagramsOut",
      "bytesIn",
      "bytesOut",
    ] as const,
  );
  const drops = tee(a.drops, b.drops, UDP_DROPS);
  Object.defineProperty(counters, "drops", { enumerable: true, get: () => drops });
  return counters;
}

/** Adds `from` into `into`; the open-flow gauge too unless `gauge` is false. */
export function addUdpCounters(into: UdpCounters, from: UdpCounters, gauge = true): void {
  if (gauge) into.flowsOpen += from.flowsOpen;
  into.flows += from.flows;
  into.datagramsIn += from.datagramsIn;
  into.datagramsOut += from.datagramsOut;
  into.bytesIn += from.bytesIn;
  into.bytesOut += from.bytesOut;
  for (const reason of UDP_DROPS) into.drops[reason] += from.drops[reason];
}

const NOTHING = () => {};

interface Flow {
  stream: Stream;
  sender: DatagramSender;
  /** The counters of the route the flow took. */
  counters: UdpCounters;
  /** That route's bandwidth. */
  police: UdpFlowWay["police"];
  lastActive: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Wires `stream` to send each datagram it carries with `send` and to take datagrams through the
 * returned sender; `done` runs once when the stream closes, or a bad length resets it.
 */
function wire(
  stream: Stream,
  counters: UdpCounters,
  send: (bytes: Uint8Array) => boolean | "rate_limited",
  touch: () => void,
  done: () => void,
  first?: Uint8Array,
): DatagramSender {
  const sender = new DatagramSender(stream);
  stream.onDrain = () => sender.drained();
  const decoder = new DatagramDecoder();
  const handle = (chunk: Uint8Array) => {
    let datagrams: Uint8Array[];
    try {
      datagrams = decoder.push(chunk);
    } catch (error) {
      if (!(error instanceof UdpFramingError)) throw error;
      counters.drops.too_large++;
      stream.reset(ResetReason.BadHeader);
      return;
    }
    for (const datagram of datagrams) {
      touch();
      const sent = send(datagram);
      if (sent === true) {
        counters.datagramsOut++;
        counters.bytesOut += datagram.length;
      } else {
        counters.drops[sent === false ? "send_failed" : sent]++;
      }
    }
  };
  // What came with the header goes first: setting onData hands over what the stream buffered
  // meanwhile, which came after it.
  if (first && first.length > 0) handle(first);
  stream.onData = handle;
  stream.onEnd = () => stream.end();
  stream.onClose = () => done();
  return sender;
}

/** Puts one datagram on a flow's sender, counting what happened. */
function carry(sender: DatagramSender, bytes: Uint8Array, counters: UdpCounters): void {
  const outcome = sender.send(bytes);
  if (outcome === "sent" || outcome === "queued") {
    counters.datagramsIn++;
    counters.bytesIn += bytes.length;
  } else {
    counters.drops[outcome]++;
  }
}

/**
 * The way one new flow goes, chosen as it opens (a port served by several routes): its stream,
 * the counters it adds to, its bandwidth, and what to call once it ends.
 */
export interface UdpFlowWay {
  /** Opens the flow's stream (and writes its header). */
  openStream: () => Stream;
  /** Called once when the flow ends (or its stream could not be opened). */
  leave: () => void;
  /** Counters the flow adds to. */
  counters: UdpCounters;
  /** Bandwidth per direction, as {@linkcode UdpFlowTableOptions.police}. */
  police?: { in?: (bytes: number) => boolean; out?: (bytes: number) => boolean };
}

/** Options of {@linkcode UdpFlowTable.open}. */
export interface UdpFlowTableOptions {
  /** Address to bind (default 127.0.0.1). */
  hostname?: string;
  /** Port to bind (0: any). */
  port?: number;
  /**
   * Opens a flow's stream (and writes its header) for a visitor address `host:port`; needed
   * unless `route` is given (without either, every new flow fails, counted `send_failed`).
   */
  openStream?: (remote: string) => Stream;
  /** A flow with no datagram either way for this long is closed (default {@linkcode UDP_FLOW_IDLE_MS}). */
  idleMs?: number;
  /** Flows kept at once (default {@linkcode UDP_MAX_FLOWS}); one more visitor's datagrams are dropped. */
  maxFlows?: number;
  /** Counters to add to (default: the table's own). */
  counters?: UdpCounters;
  /**
   * Asked before a new visitor address gets a flow: what to call once the flow ends, or
   * undefined to refuse it (its datagram is dropped, counted `refused`). Default: every visitor.
   */
  admit?: (remote: string) => (() => void) | undefined;
  /**
   * Bandwidth, per direction (`in`: from visitors, `out`: to them): asked for each datagram with
   * its size, false drops it (counted `rate_limited`). Default: no limit.
   */
  police?: { in?: (bytes: number) => boolean; out?: (bytes: number) => boolean };
  /**
   * Chooses the way of each new flow (a port with several routes), in place of `admit`,
   * `openStream`, `counters` and `police`: undefined drops the datagram (the chooser counts it).
   */
  route?: (remote: string) => UdpFlowWay | undefined;
}

/**
 * A policer for one direction of a tunnel's datagrams: each goes while its throttle is not in
 * debt and spends from it; once a datagram puts it in debt, the next ones are dropped until the
 * debt is paid (at most one datagram over the rate, never a queue). `throttle` is read for each
 * datagram (a reload may lift or change the limit); undefined: no limit.
 */
export function udpPolicer(
  throttle: () => { spend(n: number): number } | undefined,
  now: () => number = () => performance.now(),
): (bytes: number) => boolean {
  let until = 0;
  return (bytes) => {
    const limit = throttle();
    if (!limit) return true;
    const at = now();
    if (at < until) return false;
    const hold = limit.spend(bytes);
    if (hold > 0) until = at + hold;
    return true;
  };
}

/** A UDP socket whose visitors each get a flow: a stream of length-prefixed datagrams. */
export class UdpFlowTable {
  readonly #socket: UdpSocket;
  readonly #flows = new Map<string, Flow>();
  readonly #options: UdpFlowTableOptions;
  /** What the table's flows did. */
  readonly counters: UdpCounters;
  #closed = false;

  private constructor(socket: UdpSocket, options: UdpFlowTableOptions, counters: UdpCounters) {
    this.#socket = socket;
    this.#options = options;
    this.counters = counters;
  }

  /** Binds the socket; its visitors' flows open as their first datagrams arrive. */
  static async open(options: UdpFlowTableOptions): Promise<UdpFlowTable> {
    const counters = options.counters ?? newUdpCounters();
    // Datagrams may arrive before the socket's table exists; they wait (a few) until it does.
    const ref: { table?: UdpFlowTable } = {};
    const early: [Uint8Array, { hostname: string; port: number }][] = [];
    const socket = await openUdp({
      hostname: options.hostname,
      port: options.port,
      onMessage: (bytes, remote) => {
        if (ref.table) ref.table.#received(bytes, remote);
        else if (early.length < 64) early.push([bytes, remote]);
      },
    });
    const table = new UdpFlowTable(socket, options, counters);
    ref.table = table;
    for (const [bytes, remote] of early) table.#received(bytes, remote);
    return table;
  }

  /** The bound address and port. */
  get local(): { hostname: string; port: number } {
    return this.#socket.local;
  }

  /** Visitor addresses with a flow now (`host:port`, `[v6]:port`). */
  get flows(): string[] {
    return [...this.#flows.keys()];
  }

  /** Closes every flow's stream and the socket; idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const flow of [...this.#flows.values()]) flow.stream.end();
    this.#socket.close();
  }

  #received(bytes: Uint8Array, from: { hostname: string; port: number }): void {
    if (this.#closed) return;
    // `[v6]:port` for an IPv6 visitor, so the address rules read its address, not a longer one.
    const remote = formatHostPort(from.hostname, from.port);
    let flow = this.#flows.get(remote);
    if (!flow) {
      if (this.#flows.size >= (this.#options.maxFlows ?? UDP_MAX_FLOWS)) {
        this.counters.drops.flow_limit++;
        return;
      }
      const way = this.#way(remote);
      if (!way) return;
      flow = this.#start(remote, from, way);
      if (!flow) return;
    }
    flow.lastActive = Date.now();
    if (flow.police?.in?.(bytes.length) === false) {
      flow.counters.drops.rate_limited++;
      return;
    }
    carry(flow.sender, bytes, flow.counters);
  }

  /** A new flow's way: the chooser's, or the table's own admission and stream. */
  #way(remote: string): UdpFlowWay | undefined {
    const options = this.#options;
    if (options.route) return options.route(remote);
    const leave = options.admit ? options.admit(remote) : NOTHING;
    if (!leave) {
      this.counters.drops.refused++;
      return undefined;
    }
    return {
      openStream: () => options.openStream!(remote),
      leave,
      counters: this.counters,
      police: options.police,
    };
  }

  #start(
    remote: string,
    { hostname, port }: { hostname: string; port: number },
    way: UdpFlowWay,
  ): Flow | undefined {
    const { counters, leave } = way;
    let stream: Stream;
    try {
      stream = way.openStream();
    } catch {
      leave();
      counters.drops.send_failed++;
      return undefined;
    }
    const flow: Flow = {
      stream,
      counters,
      police: way.police,
      lastActive: Date.now(),
      timer: undefined,
      sender: undefined as unknown as DatagramSender,
    };
    flow.sender = wire(
      stream,
      counters,
      (bytes) =>
        way.police?.out?.(bytes.length) === false
          ? "rate_limited"
          : this.#socket.send(bytes, hostname, port),
      () => flow.lastActive = Date.now(),
      () => {
        clearTimeout(flow.timer);
        if (this.#flows.get(remote) === flow) {
          this.#flows.delete(remote);
          counters.flowsOpen--;
          leave();
        }
      },
    );
    this.#flows.set(remote, flow);
    counters.flowsOpen++;
    counters.flows++;
    armIdle(flow, this.#options.idleMs ?? UDP_FLOW_IDLE_MS);
    return flow;
  }
}

/** Resets the flow's stream once nothing went either way for `idleMs`; checks at most twice per period. */
function armIdle(flow: Flow, idleMs: number): void {
  const check = () => {
    const quiet = Date.now() - flow.lastActive;
    if (quiet >= idleMs) return flow.stream.reset(ResetReason.IdleTimeout);
    flow.timer = setTimeout(check, idleMs - quiet);
  };
  flow.timer = setTimeout(check, idleMs);
}

/** Options of {@linkcode serveUdpFlow}. */
export interface ServeUdpFlowOptions {
  /** Where the flow's datagrams go. */
  hostname: string;
  /** Port they go to. */
  port: number;
  /** Datagrams that came with the stream header. */
  rest?: Uint8Array;
  /** Closes the flow after this long with no datagram either way (default {@linkcode UDP_FLOW_IDLE_MS}). */
  idleMs?: number;
  /** Counters to add to. */
  counters?: UdpCounters;
}

/**
 * Serves one flow's stream: its datagrams go from a UDP socket of its own to `hostname:port`, and
 * what comes back from there goes onto the stream. Resolves once the socket is bound; rejects (and
 * resets the stream) when it cannot be.
 */
export async function serveUdpFlow(stream: Stream, options: ServeUdpFlowOptions): Promise<void> {
  const counters = options.counters ?? newUdpCounters();
  const flow: Flow = {
    stream,
    counters,
    police: undefined,
    lastActive: Date.now(),
    timer: undefined,
    sender: undefined as unknown as DatagramSender,
  };
  let socket: UdpSocket;
  try {
    socket = await openUdp({
      hostname: options.hostname.includes(":") ? "::" : "0.0.0.0",
      port: 0,
      onMessage: (bytes, remote) => {
        // Only the target's replies: anything else reaching this ephemeral port is not the flow's.
        if (remote.port !== options.port) return;
        flow.lastActive = Date.now();
        carry(flow.sender, bytes, counters);
      },
    });
  } catch (error) {
    stream.reset(ResetReason.DialFailed);
    throw error;
  }
  counters.flowsOpen++;
  counters.flows++;
  flow.sender = wire(
    stream,
    counters,
    (bytes) => socket.send(bytes, options.hostname, options.port),
    () => flow.lastActive = Date.now(),
    () => {
      clearTimeout(flow.timer);
      socket.close();
      counters.flowsOpen--;
    },
    options.rest,
  );
  armIdle(flow, options.idleMs ?? UDP_FLOW_IDLE_MS);
  stream.resume();
}
