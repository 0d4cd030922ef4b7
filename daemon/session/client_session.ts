/**
 * One client connection on the daemon: the yamux session, the handshake on the control stream,
 * and the routing of every stream the client opens. Authorization is checked on every stream and
 * every request, against the client's permissions as they are at that moment (reloads apply to
 * sessions already open). Control requests after the hello go to their handlers, one module per
 * message family: `expose.ts` (with `expose_http.ts` for tunnels by host name), `offer.ts` and
 * `health.ts`; the session's tunnels are kept in `session_tunnels.ts`.
 *
 * @module
 */

import {
  type ClientMessage,
  CONTROL_VERSION,
  parseClientMessage,
} from "../../tunnel/control/control.ts";
import { TUNNEL_ACK_DELAY_MS } from "../../tunnel/ack_delay.ts";
import { ControlChannel } from "../../tunnel/control/control_channel.ts";
import { Lifecycle } from "../../util/lifecycle.ts";
import { readStreamHeader } from "../../tunnel/stream/read_stream_header.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { Session } from "../../protocol/session.ts";
import { type SessionConfig, streamWindowConfig } from "../../protocol/config.ts";
import type { SessionStats } from "../../protocol/stats.ts";
import type { Stream } from "../../protocol/stream.ts";
import type { Transport } from "../../protocol/transport.ts";
import { echoStream } from "../../tunnel/echo.ts";
import type { ClientConfig, Config, Limits } from "../config/mod.ts";
import { serveForward } from "./forward.ts";
import { serveUdpForward } from "./forward_udp.ts";
import { newUdpCounters, teeUdpCounters, type UdpCounters } from "../../tunnel/udp/udp_flow.ts";
import type { Logger } from "../../util/log.ts";
import { canUseService } from "../policy/policy.ts";
import type { LookupFn } from "../policy/resolve.ts";
import type {
  ClientSessionState,
  Registry,
  SessionHandle,
  StreamResetResult,
  TransportKind,
} from "../registry/registry.ts";
import { connectService } from "./services.ts";
import type { TokenVerifier } from "../tokens/verifier.ts";
import type { DaemonEventType } from "../events.ts";
import type { TunnelPorts } from "../tunnels/tunnel_ports.ts";
import { answerTo } from "./answer.ts";
import { expose, type ExposeContext, setPolicy, unexpose } from "./expose.ts";
import { type HealthContext, reportHealth } from "./health.ts";
import { offer, type OfferContext, withdraw } from "./offer.ts";
import { SessionTunnels, type SessionTunnelsContext } from "./session_tunnels.ts";
import type { VisitorLimit } from "../tunnels/visitor_limit.ts";

/** The daemon's side of things that every client session shares. */
export interface DaemonContext {
  /** The configuration in force now (a reload replaces it). */
  config(): Config;
  /** Checks tokens. */
  verifier: TokenVerifier;
  /** Sessions, tunnels, ports, services and tokens: the daemon's state. */
  registry: Registry;
  /** The node's public port listeners. */
  ports: TunnelPorts;
  /** The bound HTTP port of HTTP tunnels, or undefined while `listen.http` is off. */
  httpPort(): number | undefined;
  /** The bound HTTPS port of HTTPS and TLS tunnels, or undefined while `listen.https` is off. */
  httpsPort(): number | undefined;
  /**
   * Whether the HTTPS port terminates TLS for `host`: a certificate serves it, or ACME will get
   * one once the name is held (see `wantCertificate`).
   */
  terminates(host: string): boolean;
  /** A tunnel now holds `host` for HTTP: asks ACME for its certificate if none serves it. */
  wantCertificate(host: string): void;
  /** True while the daemon drains: no new tunnels or streams. */
  draining(): boolean;
  /** The daemon logger. */
  log: Logger;
  /** Counts an event for metrics, e.g. `auth_failure` or a refusal reason. */
  count(event: string): void;
  /** Publishes an event to the daemon's feed (admin API, metrics). */
  publish(type: DaemonEventType, fields: Record<string, string | number | undefined>): void;
  /** Name lookup for forwards (tests replace it). */
  lookup?: LookupFn;
  /** Whether one more session may become ready (the session limit). */
  admit(): boolean;
  /** The session left its handshake (authenticated or closed): it no longer holds a pending place. */
  settled(session: ClientSession): void;
  /** What a tunnel of `client` checks its visitors against. */
  visitorLimit(client: string): VisitorLimit;
  /** The daemon's UDP counters: closed UDP tunnels' totals, and every UDP forward's. */
  readonly udp?: DaemonUdp;
}

/** The daemon's UDP counters, for metrics: live tunnels keep their own until they close. */
export interface DaemonUdp {
  /** What UDP tunnels that have closed did, added as each closes (no open flows). */
  readonly closedTunnels: UdpCounters;
  /** What every UDP forward (`udpForward` streams) did, and its flows open now. */
  readonly forwards: UdpCounters;
  /** What this node's UDP relays to other nodes' tunnels did, added as each closes. */
  readonly closedRelays?: UdpCounters;
}

export type { ClientSessionState, TransportKind };

const TRANSITIONS = {
  handshake: { authenticated: "ready", close: "closed" },
  ready: { close: "closed" },
  closed: {},
} as const;

let nextSessionNumber = 1;

/** How often a draining session checks whether its last data stream has finished. */
const DRAIN_CHECK_MS = 50;

/** The yamux tuning of a client's session under the daemon's `limits`. */
export function sessionConfigFor(limits: Limits): Partial<SessionConfig> {
  return {
    maxStreams: limits.streamsPerSession,
    keepAliveInterval: limits.keepAliveIntervalMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    ...streamWindowConfig(limits.streamWindow),
    ackDelay: TUNNEL_ACK_DELAY_MS,
  };
}

/** What the control handlers and the tunnel table see of a session: each takes its own part. */
type HandlerContext = ExposeContext & OfferContext & HealthContext & SessionTunnelsContext;

/** A connected client. */
export class ClientSession implements SessionHandle {
  /** Session id, unique in this daemon run. */
  readonly id = `s${nextSessionNumber++}`;
  /** How the client connected. */
  readonly transportKind: TransportKind;
  /** The client's address. */
  readonly remoteAddress: string;
  /** When it connected (ms since the epoch). */
  readonly since = Date.now();
  /** Resolves when the session is closed. */
  readonly closed: Promise<void>;
  /** What this session's UDP forwards did (flows, datagrams, bytes, drops), live. */
  readonly udpForwards: UdpCounters = newUdpCounters();

  readonly #context: DaemonContext;
  /** {@linkcode udpForwards}, and the daemon's UDP forward counters with them. */
  #udpCounters: UdpCounters | undefined;
  #ha = 1;
  readonly #yamux: Session;
  readonly #lifecycle = new Lifecycle<ClientSessionState, "authenticated" | "close">(
    TRANSITIONS,
    "handshake",
  );
  #client: string | undefined;
  readonly #preauthenticated: string | undefined;
  #control: ControlChannel | undefined;
  #log: Logger;
  readonly #handlers: HandlerContext;
  readonly #tunnels: SessionTunnels;
  readonly #handshakeTimer: ReturnType<typeof setTimeout>;
  #closeTimer: ReturnType<typeof setTimeout> | undefined;
  #sawFirstStream = false;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #drainTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Starts serving `transport`. `preauthenticated` is the client name when the transport already
   * proved a token (a WebSocket upgrade with `Authorization: Bearer`).
   */
  constructor(
    transport: Transport,
    context: DaemonContext,
    kind: TransportKind,
    preauthenticated?: string,
  ) {
    this.#context = context;
    this.transportKind = kind;
    this.remoteAddress = transport.remoteAddress;
    this.#preauthenticated = preauthenticated;
    this.#log = context.log.child({ session: this.id, remote: transport.remoteAddress });
    const limits = context.config().limits;
    this.#yamux = new Session(transport, {
      client: false,
      config: sessionConfigFor(limits),
      onStream: (stream) => this.#onStream(stream),
      onError: (error, reason) =>
        this.#log.warn("protocol error", { reason, detail: error.message }),
      // Refused before any header was read: say why, as for every other refusal.
      refusalCode: (why) =>
        why === "going_away" ? ResetReason.ShuttingDown : ResetReason.LimitReached,
    });
    this.#handlers = this.#handlerContext();
    this.#tunnels = new SessionTunnels(this.#handlers);
    this.#handshakeTimer = setTimeout(() => {
      this.#context.count("handshake_timeout");
      this.#log.warn("no handshake within the timeout; closing");
      this.close();
    }, limits.handshakeTimeoutMs);
    this.closed = this.#yamux.closed.then((error) => this.#teardown(error));
    this.#log.debug("connection", { transport: kind });
  }

  /** The authenticated client's name, once the handshake is done. */
  get client(): string | undefined {
    return this.#client;
  }

  /** handshake, ready or closed. */
  get state(): ClientSessionState {
    return this.#lifecycle.state;
  }

  /** The yamux session's counters (live). */
  get stats(): Readonly<SessionStats> {
    return this.#yamux.stats;
  }

  /** Last keepalive round trip in ms; 0 until one was answered. */
  get rtt(): number {
    return this.#yamux.rtt;
  }

  /** Sessions its client keeps to distinct nodes, as its hello said (1 when it did not). */
  get ha(): number {
    return this.#ha;
  }

  /** Streams open now, the control stream included. */
  get streamCount(): number {
    return this.#yamux.streamCount;
  }

  /** The control stream's id, once the client opened it. */
  get controlStreamId(): number | undefined {
    return this.#control?.stream.id;
  }

  /** The open streams, for inspection. */
  streams(): IterableIterator<Readonly<Stream>> {
    return this.#yamux.streams();
  }

  /** Ids of this session's reverse tunnels. */
  tunnelIds(): string[] {
    return this.#tunnels.ids();
  }

  /** Resets one stream (an operator's action); the control stream is refused. */
  resetStream(id: number): StreamResetResult {
    const stream = this.#yamux.stream(id);
    if (!stream) return "not_found";
    if (id === this.controlStreamId) return "control_stream";
    // No reset reason means "operator action": the protocol has no code of its own for it.
    stream.reset(ResetReason.None);
    return "reset";
  }

  /**
   * Graceful: GoAway (the client opens nothing new), then the session is closed as soon as no
   * stream but the control stream is left, which the client keeps open for as long as it is
   * connected. Checked on a short timer only while draining.
   */
  drain(): void {
    this.#yamux.goAway();
    const check = () => {
      if (this.#hasEnded()) return;
      const busy = this.#yamux.streamCount > (this.#control ? 1 : 0);
      if (!busy) return this.close();
      this.#drainTimer = setTimeout(check, DRAIN_CHECK_MS);
    };
    check();
  }

  /** Closes now: GoAway and transport closed, streams fail. */
  close(): void {
    this.#yamux.goAway();
    this.#yamux.destroy();
  }

  /**
   * Closes because the client's credential no longer holds (a revoked, expired or changed token,
   * a removed client): its tunnels, offers and streams go at once, and the client is told `reason`
   * as a session-level `unauthorized` error, which it takes as final rather than reconnecting.
   */
  revoked(reason: string): void {
    if (this.#hasEnded()) return;
    this.#tunnels.removeAll();
    void this.#context.registry.withdrawServices(this.id);
    for (const stream of [...this.#yamux.streams()]) {
      if (stream.id !== this.controlStreamId) stream.reset(ResetReason.NotAuthenticated);
    }
    if (!this.#control) return this.close();
    this.#control.send({ type: "error", code: "unauthorized", message: reason });
    this.#closeAfterReply();
  }

  /** Closes one reverse tunnel of this session (operator action); false if it is not ours. */
  closeTunnel(id: string, reason: string): boolean {
    const tunnel = this.#tunnels.get(id);
    if (!tunnel) return false;
    void this.#tunnels.remove(tunnel);
    this.#control?.send({ type: "tunnel_closed", tunnel: id, reason });
    return true;
  }

  /** The client's configuration as in force now; undefined once it was removed by a reload. */
  /** A forward (TCP or UDP) this session asked for was refused or failed: counted and published. */
  #forwardRefused(client: string, stream: number, reason: string): void {
    this.#context.count(`forward_${reason}`);
    this.#context.publish("stream_reset", { session: this.id, client, stream, reason });
  }

  #clientConfig(): ClientConfig | undefined {
    return this.#context.config().clients.find((c) => c.name === this.#client);
  }

  #onStream(stream: Stream): void {
    // Before the handshake only the first stream (the control stream) is read. Others are reset
    // at once: each could otherwise hold a full 256 KiB window of an unauthenticated peer's data.
    if (this.#lifecycle.state === "handshake" && this.#sawFirstStream) {
      return stream.reset(ResetReason.NotAuthenticated);
    }
    this.#sawFirstStream = true;
    const config = this.#context.config();
    readStreamHeader(stream, config.limits.handshakeTimeoutMs).then(
      ({ header, rest }) => {
        if (header.kind === "control") return this.#startControl(stream, rest);
        const client = this.#clientConfig();
        if (this.#lifecycle.state !== "ready" || !client) {
          return stream.reset(ResetReason.NotAuthenticated);
        }
        if (this.#context.draining()) return stream.reset(ResetReason.ShuttingDown);
        if (this.#yamux.streamCount > client.limits.streams) {
          this.#context.count("stream_limit");
          return stream.reset(ResetReason.LimitReached);
        }
        const log = this.#log;
        switch (header.kind) {
          case "forward":
            return void serveForward(stream, header.target, rest, {
              policy: client,
              dialTimeoutMs: config.limits.dialTimeoutMs,
              log,
              lookup: this.#context.lookup,
              count: (reason) => this.#forwardRefused(client.name, stream.id, reason),
            }, header.confirm === "1");
          case "udpForward":
            return void serveUdpForward(stream, header.target, rest, {
              policy: client,
              log,
              lookup: this.#context.lookup,
              count: (reason) => this.#forwardRefused(client.name, stream.id, reason),
              counters: this.#udpCounters ??= this.#context.udp
                ? teeUdpCounters(this.udpForwards, this.#context.udp.forwards)
                : this.udpForwards,
              idleMs: config.limits.udpFlowIdleMs,
            });
          case "service": {
            const decision = canUseService(client, header.service);
            if (!decision.ok) {
              log.info("service refused", { service: header.service, reason: decision.code });
              return stream.reset(ResetReason.NotAllowed);
            }
            const offer = this.#context.registry.service(header.service);
            return void connectService(stream, offer, client.name, rest);
          }
          case "echo": {
            if (!canUseService(client, "echo").ok) {
              log.info("echo refused", {
                reason: "not_allowed",
                detail: 'needs services.use ["echo"]',
              });
              return stream.reset(ResetReason.NotAllowed);
            }
            echoStream(stream);
            if (rest.length > 0) stream.write(rest);
            return stream.resume();
          }
          default:
            return stream.reset(ResetReason.BadHeader);
        }
      },
      (error) => {
        this.#log.warn("bad stream header", { stream: stream.id, detail: error.message });
        stream.reset(ResetReason.BadHeader);
      },
    );
  }

  #startControl(stream: Stream, rest: Uint8Array): void {
    if (this.#control) return stream.reset(ResetReason.BadHeader); // one control stream only
    const control = new ControlChannel(stream, rest);
    this.#control = control;
    control.onMessage = (value) => {
      let message: ClientMessage;
      try {
        message = parseClientMessage(value);
      } catch (error) {
        const id = (value as { id?: unknown })?.id;
        return control.send({
          type: "error",
          id: typeof id === "number" ? id : undefined,
          code: "bad_request",
          message: (error as Error).message,
        });
      }
      this.#onControl(message).catch((error) => {
        this.#log.error("control request failed", { detail: String(error) });
        control.send({ type: "error", code: "internal", message: "internal error" });
      });
    };
    // The control stream lives as long as the session: when it ends, so does the session.
    control.onClose = () => this.close();
    // Only now, with both handlers set: a hello read together with the stream's header is delivered.
    control.start();
  }

  /** Answers a control request: the hello here, every other by its handler once the hello was said. */
  async #onControl(message: ClientMessage): Promise<void> {
    const control = this.#control!;
    if (message.type === "hello") return this.#hello(message);
    const client = this.#clientConfig();
    if (this.#lifecycle.state !== "ready" || !client) {
      return control.send({
        type: "error",
        id: message.id,
        code: "unauthorized",
        message: "say hello first",
      });
    }
    const answer = answerTo(message, control, this.#log);
    const handlers = this.#handlers;
    switch (message.type) {
      case "expose":
        return await expose(handlers, client, message, answer);
      case "unexpose":
        return await unexpose(handlers, message, answer);
      case "policy":
        return await setPolicy(handlers, client, message, answer);
      case "health":
        return await reportHealth(handlers, client, message, answer);
      case "offer":
        return await offer(handlers, client, message, answer);
      case "withdraw":
        return await withdraw(handlers, message, answer);
    }
  }

  #hello(message: Extract<ClientMessage, { type: "hello" }>): void {
    const control = this.#control!;
    this.#ha = Math.min(message.ha ?? 1, 64);
    if (this.#lifecycle.state !== "handshake") {
      return control.send({
        type: "error",
        code: "bad_request",
        message: "hello was already said",
      });
    }
    if (message.version !== CONTROL_VERSION) {
      control.send({
        type: "error",
        code: "version_mismatch",
        message:
          `this daemon speaks control version ${CONTROL_VERSION}, the client ${message.version}`,
      });
      return this.#closeAfterReply();
    }
    const client = message.token === undefined
      ? this.#preauthenticated
      : this.#context.verifier.verify(message.token);
    if (client === undefined) {
      this.#context.count("auth_failure");
      this.#context.publish("auth_failure", {
        remote: this.remoteAddress,
        transport: this.transportKind,
      });
      this.#log.warn("authentication failed", { name: message.name });
      control.send({ type: "error", code: "unauthorized", message: "unknown or missing token" });
      return this.#closeAfterReply();
    }
    if (!this.#context.admit()) {
      this.#context.count("session_limit");
      this.#log.warn("session limit reached", { client });
      control.send({ type: "error", code: "limit_reached", message: "too many sessions" });
      return this.#closeAfterReply();
    }
    clearTimeout(this.#handshakeTimer);
    this.#client = client;
    this.#lifecycle.fire("authenticated");
    this.#context.settled(this);
    this.#watchIdle();
    this.#log = this.#log.child({ client });
    this.#log.info("session ready", { transport: this.transportKind, agent: message.agent });
    this.#context.publish("session_opened", {
      session: this.id,
      client,
      transport: this.transportKind,
      remote: this.remoteAddress,
    });
    control.send({
      type: "welcome",
      version: CONTROL_VERSION,
      session: this.id,
      client,
      server: "tunnelmux/0.1.0",
      node: this.#context.registry.node,
    });
  }

  /**
   * What the control handlers see of this session and the daemon. Read through getters: the
   * daemon's registry changes once it joins a cluster, the session's logger once the hello named
   * the client.
   */
  #handlerContext(): HandlerContext {
    const daemon = this.#context;
    const log = () => this.#log;
    const tunnels = () => this.#tunnels;
    return {
      sessionId: this.id,
      yamux: this.#yamux,
      get tunnels() {
        return tunnels();
      },
      get log() {
        return log();
      },
      get registry() {
        return daemon.registry;
      },
      get ports() {
        return daemon.ports;
      },
      ended: () => this.#hasEnded(),
      config: () => daemon.config(),
      draining: () => daemon.draining(),
      httpPort: () => daemon.httpPort(),
      httpsPort: () => daemon.httpsPort(),
      terminates: (host) => daemon.terminates(host),
      wantCertificate: (host) => daemon.wantCertificate(host),
      count: (event) => daemon.count(event),
      publish: (type, fields) => daemon.publish(type, fields),
      visitorLimit: (client) => daemon.visitorLimit(client),
      udpTotals: daemon.udp?.closedTunnels,
    };
  }

  #hasEnded(): boolean {
    return this.#lifecycle.state === "closed";
  }

  /**
   * With `limits.idleTimeoutMs` set, closes the session once it has held no tunnel, no stream
   * besides its control stream, and moved no bytes for that long.
   */
  #watchIdle(): void {
    const timeout = this.#context.config().limits.idleTimeoutMs;
    if (timeout <= 0) return;
    let lastFrames = -1;
    let idleSince = Date.now();
    const check = () => {
      if (this.#hasEnded()) return;
      // Data frames only: keepalive pings must not keep an idle session alive.
      const { framesIn, framesOut } = this.#yamux.stats;
      const frames = framesIn.data + framesOut.data;
      const busy = this.#tunnels.size > 0 || this.#yamux.streamCount > 1 || frames !== lastFrames;
      lastFrames = frames;
      if (busy) idleSince = Date.now();
      else if (Date.now() - idleSince >= timeout) {
        this.#context.count("idle_timeout");
        this.#log.info("closing an idle session", { idleMs: timeout });
        return this.close();
      }
      this.#idleTimer = setTimeout(check, Math.max(50, timeout / 4));
    };
    check();
  }

  /** Lets the error reply reach the client, then closes. */
  #closeAfterReply(): void {
    this.#control?.end();
    void this.#yamux.close();
    this.#closeTimer = setTimeout(() => this.#yamux.destroy(), 1_000);
  }

  #teardown(error: Error | undefined): void {
    clearTimeout(this.#handshakeTimer);
    clearTimeout(this.#closeTimer);
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#drainTimer);
    this.#lifecycle.fire("close");
    this.#tunnels.removeAll();
    void this.#context.registry.withdrawServices(this.id);
    this.#log.info("session closed", { reason: error?.message });
    if (this.#client !== undefined) {
      this.#context.publish("session_closed", {
        session: this.id,
        client: this.#client,
        reason: error?.message,
      });
    }
  }
}
