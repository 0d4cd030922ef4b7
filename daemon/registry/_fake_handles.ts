/**
 * Test support: small in-memory {@linkcode SessionHandle}s and {@linkcode TunnelHandle}s for
 * tests of code that reads and acts through the registry (the registry itself, the admin API,
 * the cluster's answers) without a yamux session or a listener behind them. Each records the
 * actions taken on it in `calls`, in order.
 *
 * @module
 */

import { createSessionStats, type SessionStats } from "../../protocol/stats.ts";
import type { Stream } from "../../protocol/stream.ts";
import { TokenStore } from "../tokens/store.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import { Logger } from "../../util/log.ts";
import { LocalRegistry } from "./local_registry.ts";
import type { SessionHandle, StreamResetResult, TunnelHandle, TunnelStats } from "./registry.ts";

/** A stream as a fake session lists it: the fields the admin API shows. */
export interface FakeStream {
  /** Stream id. */
  id: number;
  /** Its state name. */
  state: string;
  /** Bytes received. */
  bytesIn: number;
  /** Bytes sent. */
  bytesOut: number;
  /** When it was opened (ms since the epoch). */
  createdAt: number;
}

/** A fake session: a {@linkcode SessionHandle} whose fields can be set, and its `calls`. */
export interface FakeSession extends SessionHandle {
  /** `close`, `drain`, `resetStream <id>`, `closeTunnel <id> <reason>`, in the order made. */
  readonly calls: string[];
}

/** What a fake session is made of; everything has a plain default. */
export interface FakeSessionOptions {
  /** The client's name (default `alice`; `null` for one still in its handshake). */
  client?: string | null;
  /** Default `ready`. */
  state?: SessionHandle["state"];
  /** Default `tcp`. */
  transportKind?: SessionHandle["transportKind"];
  /** Default `127.0.0.1:40000`. */
  remoteAddress?: string;
  /** Default 0 (the epoch). */
  since?: number;
  /** Default 0. */
  rtt?: number;
  /** Default 1. */
  ha?: number;
  /** Its streams; default none. */
  streams?: FakeStream[];
  /** The control stream's id, if it has one. */
  controlStreamId?: number;
  /** Ids of its tunnels; `closeTunnel` takes one out. */
  tunnels?: string[];
  /** Its counters; default all zero. */
  stats?: Partial<SessionStats>;
}

/** A session `id` that does what it is told and remembers it. */
export function fakeSession(id: string, options: FakeSessionOptions = {}): FakeSession {
  const calls: string[] = [];
  const streams = options.streams ?? [];
  const tunnels = [...(options.tunnels ?? [])];
  let state = options.state ?? "ready";
  let settle!: () => void;
  const closed = new Promise<void>((resolve) => settle = resolve);
  return {
    id,
    client: options.client === null ? undefined : options.client ?? "alice",
    get state() {
      return state;
    },
    transportKind: options.transportKind ?? "tcp",
    remoteAddress: options.remoteAddress ?? "127.0.0.1:40000",
    since: options.since ?? 0,
    closed,
    stats: { ...createSessionStats(), ...options.stats },
    rtt: options.rtt ?? 0,
    ha: options.ha ?? 1,
    streamCount: streams.length,
    controlStreamId: options.controlStreamId,
    calls,
    streams: () =>
      streams.map((s) =>
        ({
          sendWindow: 256 * 1024,
          receiveWindow: 256 * 1024,
          bufferedBytes: 0,
          queuedBytes: 0,
          ...s,
        }) as unknown as Readonly<Stream>
      ).values(),
    tunnelIds: () => [...tunnels],
    close() {
      calls.push("close");
      state = "closed";
      settle();
    },
    revoked(reason: string) {
      calls.push(`revoked ${reason}`);
      state = "closed";
      settle();
    },
    drain() {
      calls.push("drain");
    },
    resetStream(stream: number): StreamResetResult {
      calls.push(`resetStream ${stream}`);
      if (stream === options.controlStreamId) return "control_stream";
      return streams.some((s) => s.id === stream) ? "reset" : "not_found";
    },
    closeTunnel(tunnel: string, reason: string): boolean {
      calls.push(`closeTunnel ${tunnel} ${reason}`);
      const at = tunnels.indexOf(tunnel);
      if (at < 0) return false;
      tunnels.splice(at, 1);
      return true;
    },
  };
}

/** A fake tunnel: a {@linkcode TunnelHandle} whose fields can be set, and its `calls`. */
export interface FakeTunnel extends TunnelHandle {
  /** `stopAccepting`, `close`, in the order made. */
  readonly calls: string[];
}

/** The fields of a fake tunnel that may be set; the rest have plain defaults. */
export type FakeTunnelOptions =
  & Partial<
    Pick<
      TunnelHandle,
      | "client"
      | "owner"
      | "bindHost"
      | "port"
      | "label"
      | "host"
      | "urls"
      | "createdAt"
      | "passthrough"
      | "reportedHealthy"
      | "policy"
      | "requestedPolicy"
    >
  >
  & { stats?: Partial<TunnelStats> };

/** A tunnel `id` (a port's, on 127.0.0.1:9000 of client alice unless told otherwise). */
export function fakeTunnel(id: string, options: FakeTunnelOptions = {}): FakeTunnel {
  const calls: string[] = [];
  let open = true;
  const client = options.client ?? "alice";
  return {
    id,
    client,
    owner: options.owner ?? `client:${client}`,
    bindHost: options.bindHost ?? "127.0.0.1",
    port: options.port ?? 9000,
    label: options.label,
    host: options.host,
    urls: options.urls ?? [],
    createdAt: options.createdAt ?? 0,
    passthrough: options.passthrough ?? false,
    reportedHealthy: options.reportedHealthy ?? true,
    policy: options.policy ?? {},
    requestedPolicy: options.requestedPolicy ?? {},
    setPolicy() {
      calls.push("setPolicy");
    },
    stats: { connections: 0, active: 0, errors: 0, aToB: 0, bToA: 0, ...options.stats },
    get healthy() {
      return open && this.reportedHealthy;
    },
    calls,
    stopAccepting() {
      calls.push("stopAccepting");
    },
    close() {
      calls.push("close");
      open = false;
    },
    visitor() {
      throw new Error("a fake tunnel takes no visitors");
    },
    open() {
      return undefined;
    },
    exchanged() {
      calls.push("exchanged");
    },
    relayed() {
      throw new Error("a fake tunnel takes no relayed visitors");
    },
  };
}

/** Minted tokens kept in memory only (a real {@linkcode TokenStore}, nothing on disk). */
export function memoryTokens(): TokenStore {
  return new TokenStore({
    dataDir: "/nonexistent",
    log: new Logger({ level: "error", format: "json", sink: () => {} }),
    onChange: () => {},
    backend: {
      load: () => Promise.resolve([]),
      add: () => Promise.resolve(),
      remove: () => Promise.resolve(),
    },
  });
}

/** An empty in-memory registry of node `node` (default `n1`), with in-memory tokens. */
export function memoryRegistry(
  node = "n1",
  tokens: TokenRegistry = memoryTokens(),
): LocalRegistry {
  return new LocalRegistry({ node, tokens });
}
