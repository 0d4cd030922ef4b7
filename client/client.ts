/**
 * The client SDK: a connection to a tunnelmux daemon that stays up (reconnecting with backoff),
 * and the tunnels, forwards and services a script asks for, restored after every reconnect.
 *
 * This file holds the public {@linkcode Client} and its session lifecycle (connect, handshake,
 * lost, backoff, close). What it holds and does on a session lives beside it: `tunnels.ts` and
 * `offers.ts` (the records and their requests), `restore.ts` (what is asked for again after a
 * reconnect), `health_reports.ts` (health checks told to the daemon), `visitors.ts` (streams the
 * daemon opens), `requests.ts` (control requests and their answers) and `connect_errors.ts`
 * (what a failed attempt means).
 *
 * @module
 */

import { listenUdpForward, type UdpForward } from "./tunnels/forward_udp.ts";
import type { SessionConfig } from "../protocol/config.ts";
import { Session } from "../protocol/session.ts";
import type { Stream } from "../protocol/stream.ts";
import type { Transport } from "../protocol/transport.ts";
import { CONTROL_VERSION, type DaemonMessage } from "../tunnel/control/control.ts";
import { ControlChannel } from "../tunnel/control/control_channel.ts";
import { encodeStreamHeader, type StreamHeader } from "../tunnel/stream/stream_header.ts";
import { TUNNEL_ACK_DELAY_MS } from "../tunnel/ack_delay.ts";
import { Lifecycle } from "../util/lifecycle.ts";
import { Backoff, type BackoffOptions } from "./connect/backoff.ts";
import { dialFailure, sessionFailure } from "./connect/connect_errors.ts";
import { dialServer, type HostResolver } from "./connect/dial_server.ts";
import { Emitter } from "./emitter.ts";
import { ClientError } from "./errors.ts";
import { type Forward, listenForward } from "./tunnels/forward_listener.ts";
import { watchHealth } from "./tunnels/health_reports.ts";
import type { SocksServer } from "./tunnels/socks.ts";
import type { SocksOptions } from "./tunnels/socks_options.ts";
import {
  newOfferRecord,
  type OfferOptions,
  type OfferRecord,
  offerRequest,
} from "./tunnels/offers.ts";
import { type ControlRequest, PendingRequests } from "./connect/requests.ts";
import { restoreAll, type RestoreContext, restoreOffer, restoreTunnel } from "./tunnels/restore.ts";
import { serverUrlProblem } from "./connect/server_url.ts";
import {
  type ExposeOptions,
  exposeRequest,
  newTunnelRecord,
  recordExposed,
  type Tunnel,
  tunnelById,
  type TunnelRecord,
  tunnelView,
} from "./tunnels/expose.ts";
import { acceptIncoming, type VisitorInspector, type VisitorRoutes } from "./tunnels/visitors.ts";

export type { ExposeOptions, Forward, OfferOptions, SocksOptions, SocksServer, Tunnel };

/** Fatal codes that are retried once a session was up: answers of the wrong listener. */
const RETRIED_ONCE_UP = new Set<string>(["wrong_protocol", "upgrade_refused"]);

/** How long `close()` lets open streams finish before it closes the connection anyway. */
const CLOSE_GRACE_MS = 5_000;

/** Client lifecycle states. */
export type ClientState = "connecting" | "authenticating" | "ready" | "backoff" | "closed";

/** What moves the client between states. */
export type ClientEvent = "connected" | "authenticated" | "lost" | "retry" | "close";

/** The client lifecycle: connect → authenticate → ready, and back through backoff when lost. */
export const CLIENT_TRANSITIONS = {
  connecting: { connected: "authenticating", lost: "backoff", close: "closed" },
  authenticating: { authenticated: "ready", lost: "backoff", close: "closed" },
  ready: { lost: "backoff", close: "closed" },
  backoff: { retry: "connecting", close: "closed" },
  closed: {},
} as const satisfies Record<ClientState, Partial<Record<ClientEvent, ClientState>>>;

/** How to connect. */
export interface ConnectOptions {
  /** The client token. */
  token: string;
  /** A name for this client in the daemon's logs. */
  name?: string;
  /** Reconnect when the connection is lost (default true), with these backoff settings. */
  reconnect?: boolean | BackoffOptions;
  /** Give up on a connection attempt (dial and handshake) after this long. Default 10 s. */
  connectTimeoutMs?: number;
  /**
   * {@linkcode connect} rejects (and closes the client) when no session is ready this long after
   * it was called, naming the last failure. Default 30 s. Mistakes in the URL, token, path or
   * protocol, and a URL at the wrong kind of listener, reject at once instead; network errors are
   * retried until then.
   */
  readyTimeoutMs?: number;
  /**
   * Called for each failed connection attempt that will be retried (also emitted as the client's
   * `retry` event): the cause, how many attempts in a row failed, and the wait before the next.
   */
  onRetry?: (retry: RetryInfo) => void;
  /**
   * After a reconnect, how long to keep asking for a tunnel's old port while it is still held
   * for the lost session (port_in_use). Default 30 s.
   */
  restoreTimeoutMs?: number;
  /** Deadline for dialing local targets of tunnels and services. Default 10 s. */
  dialTimeoutMs?: number;
  /**
   * Records the exchanges of this client's HTTP tunnels: an `Inspector` from
   * `startInspector()` (`client/inspector/`). Default none, and then nothing looks at them.
   */
  inspector?: VisitorInspector;
  /**
   * Sessions this client keeps to distinct nodes (set by `HaClient`); told to the
   * daemon so its operators can see a client running degraded.
   */
  ha?: number;
  /**
   * When a daemon URL's host name resolves to several addresses (one DNS name for a cluster's
   * nodes), which one the first attempt dials; each later attempt takes the next. Default 0
   * (`HaClient` starts each session at another).
   */
  firstAddress?: number;
  /**
   * How daemon host names are resolved (default: the system resolver). A name with several
   * addresses of one family is dialed at one of them per attempt, in turn.
   */
  resolve?: HostResolver;
  /** Extra CA certificates (PEM) to trust for `wss://` and `tls://`. */
  caCerts?: string[];
  /** yamux session tuning. */
  session?: Partial<SessionConfig>;
}

/** A failed connection attempt that the client will retry. */
export interface RetryInfo {
  /** Why the attempt failed. */
  error: ClientError;
  /** Attempts that failed in a row since the last ready session (1 for the first). */
  attempt: number;
  /** Milliseconds until the next attempt. */
  delayMs: number;
}

/** Events a client emits. */
export interface ClientEvents {
  /** The lifecycle state changed. */
  state: [state: ClientState];
  /** A session is ready (first connect and every reconnect): on which node, through which URL. */
  ready: [info: { session: string; client: string; node?: string; url: string }];
  /** Something went wrong; the client keeps going unless it is a fatal error. */
  error: [error: ClientError];
  /** A tunnel was (re)established. */
  tunnel: [tunnel: Tunnel];
  /** A connection attempt failed and will be retried. */
  retry: [retry: RetryInfo];
  /**
   * A tunnel's or an offered service's local service went down or came back up (its health
   * check): `tunnel` or `service` says which.
   */
  health: [info: HealthInfo];
}

/** What a {@linkcode ClientEvents.health} event says. */
export interface HealthInfo {
  /** The tunnel whose local service it is. */
  tunnel?: Tunnel;
  /** The offered service whose local service it is. */
  service?: string;
  /** The local service checked (`host:port`). */
  local: string;
  /** Whether it passes now. */
  healthy: boolean;
  /** Why it fails, when it does. */
  detail: string | undefined;
}

/**
 * Connects to a daemon and resolves once the first session is ready. With reconnect on (the
 * default) a failing first attempt is retried too; a wrong token or protocol version, or a URL at
 * the wrong kind of listener, fails at once. `url` is `tcp://host:port`, `tls://host:port`, `ws://host:port/path` or `wss://…`.
 *
 * @example
 * ```ts ignore
 * import { connect } from "./client.ts";
 * const client = await connect("ws://127.0.0.1:7080/tunnel", { token: Deno.env.get("TOKEN")! });
 * const tunnel = await client.expose({ local: "127.0.0.1:3000", remotePort: 8080 });
 * console.log(`visitors of ${tunnel.remoteHost}:${tunnel.remotePort} reach 127.0.0.1:3000`);
 * ```
 */
export async function connect(
  servers: string | readonly string[],
  options: ConnectOptions,
): Promise<Client> {
  const client = new Client(servers, options);
  const url = client.urls.join(", ");
  const limit = options.readyTimeoutMs ?? 30_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const last = client.lastError ? ` (last error: ${client.lastError.message})` : "";
      reject(new ClientError("timeout", `no session with ${url} within ${limit} ms${last}`));
    }, limit);
  });
  try {
    await Promise.race([client.ready(), timedOut]);
  } catch (error) {
    await client.close();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  return client;
}

/** A connection to a tunnelmux daemon. Create it with {@linkcode connect}. */
export class Client extends Emitter<ClientEvents> {
  /**
   * The daemon URLs, tried in turn: after a failed attempt or a lost session the next one is
   * used, so a client given every node of a cluster fails over without a load balancer.
   */
  readonly urls: readonly string[];
  #urlIndex = 0;
  /** Which of a name's addresses the next attempt dials. */
  #addressTurn = 0;
  /** How many addresses the last dialed URL's host offered. */
  #addresses = 1;
  #node: string | undefined;

  readonly #options: ConnectOptions;
  readonly #backoff: Backoff | undefined;
  readonly #lifecycle = new Lifecycle<ClientState, ClientEvent>(CLIENT_TRANSITIONS, "connecting");
  #session: Session | undefined;
  #control: ControlChannel | undefined;
  #readyAt = 0;
  /** Whether any session was ready yet (a silent server is a mistake only before that). */
  #everReady = false;
  readonly #requests = new PendingRequests();
  #welcome:
    | {
      resolve: (m: Extract<DaemonMessage, { type: "welcome" }>) => void;
      reject: (e: Error) => void;
    }
    | undefined;
  readonly #tunnels = new Set<TunnelRecord>();
  readonly #offers = new Map<string, OfferRecord>();
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #lastError: ClientError | undefined;
  #failedAttempts = 0;
  #firstReady: { resolve: () => void; reject: (error: Error) => void } | undefined;
  readonly #firstReadyPromise: Promise<void>;
  /** Where the streams the daemon opens go: this client's tunnels and offers. */
  readonly #routes: VisitorRoutes;

  /** Starts connecting at once; prefer {@linkcode connect}, which waits for the first session. */
  constructor(servers: string | readonly string[], options: ConnectOptions) {
    super();
    this.urls = typeof servers === "string" ? [servers] : [...servers];
    this.#options = options;
    const reconnect = options.reconnect ?? true;
    this.#backoff = reconnect === false
      ? undefined
      : new Backoff(reconnect === true ? {} : reconnect);
    this.#firstReadyPromise = new Promise((resolve, reject) =>
      this.#firstReady = { resolve, reject }
    );
    this.#firstReadyPromise.catch(() => {}); // observed through ready()
    this.#lifecycle.onTransition((to) => this.emit("state", to));
    if (options.onRetry) this.on("retry", options.onRetry);
    this.#routes = {
      tunnel: (id) => {
        const record = tunnelById(this.#tunnels, id);
        return record?.udp ? { ...record.request, udp: record.udp } : record?.request;
      },
      service: (name) => this.#offers.get(name)?.local,
      deadlines: options,
      onDialError: (error) => this.emit("error", error),
      inspector: options.inspector,
    };
    void this.#attempt();
  }

  /** The URL of the current session, or of the next attempt. */
  get url(): string {
    return this.urls[this.#urlIndex] ?? "";
  }

  /** The node the current session is on (its cluster node name; `local` for a single daemon). */
  get node(): string | undefined {
    return this.#session ? this.#node : undefined;
  }

  /**
   * Whether a reconnect may reach another node: several URLs, or a host name with several
   * addresses (as last resolved).
   */
  get hasAlternatives(): boolean {
    return this.urls.length > 1 || this.#addresses > 1;
  }

  /** The lifecycle state. */
  get state(): ClientState {
    return this.#lifecycle.state;
  }

  /** The last connection failure, until a session is ready again. */
  get lastError(): ClientError | undefined {
    return this.#lastError;
  }

  /** The current session, while connected. */
  get session(): Session | undefined {
    return this.#session;
  }

  /** Resolves when the first session is ready; rejects if the client gives up before that. */
  ready(): Promise<void> {
    return this.#firstReadyPromise;
  }

  /**
   * Opens a reverse tunnel: the daemon listens, and its visitors are piped to `options.local`. A
   * refusal (a port or name held elsewhere, one not allowed) rejects this call only: the session
   * and the other tunnels stay.
   */
  async expose(options: ExposeOptions): Promise<Tunnel> {
    const record = newTunnelRecord(options, false);
    await this.#exposeOnce(record, options.remotePort ?? 0);
    this.#tunnels.add(record);
    return this.#tunnelView(record);
  }

  /**
   * Keeps a tunnel exposed: now if a session is ready, and after every (re)connect, asking for
   * the port it had. Unlike {@linkcode expose} it does not fail: refusals are `error` events,
   * and the tunnel is tried again at the next session. Its `tunnel` events say when it is up.
   */
  keep(options: ExposeOptions): Tunnel {
    const record = newTunnelRecord(options, true);
    this.#tunnels.add(record);
    if (this.#lifecycle.state === "ready") void restoreTunnel(record, this.#restoreContext());
    return this.#tunnelView(record);
  }

  /**
   * Opens a stream to `target` (`host:port`) through the daemon. The daemon checks its allowlist
   * and dials; a refusal arrives as a reset of the stream whose error names the reason. With
   * `confirm`, the stream's first byte is 0, sent once the target is connected (before its bytes).
   */
  open(target: string, options: { confirm?: boolean } = {}): Stream {
    return this.#openWith(
      options.confirm ? { kind: "forward", target, confirm: "1" } : { kind: "forward", target },
    );
  }

  /**
   * Listens on `listen` (`host:port`, port 0 = any) on this machine; every connection there is
   * piped through the daemon to `target` (or, with `service`, to a named service). Connections
   * made while the daemon is unreachable are closed at once.
   */
  forward(options: { listen: string; target?: string; service?: string }): Promise<Forward> {
    return listenForward(options, () => this, (error) => this.emit("error", error));
  }

  /**
   * A SOCKS5 server on `options.listen` (loopback unless credentials are set): every CONNECT is a
   * forward to the target the SOCKS client names, resolved and checked against the allowlist by
   * the daemon, and answered with the SOCKS reply code that says how that went; each target of a
   * UDP ASSOCIATE is a UDP flow under the same rules. Failures are `error` events.
   */
  async socks(options: SocksOptions): Promise<SocksServer> {
    // The SOCKS front's code loads with the first front started.
    const { listenSocks } = await import("./tunnels/socks.ts");
    return listenSocks(options, () => this, (error) => this.emit("error", error));
  }

  /** Opens a UDP flow's stream to `target` (`host:port`): length-prefixed datagrams each way. */
  openUdp(target: string): Stream {
    return this.#openWith({ kind: "udpForward", target });
  }

  /**
   * Binds UDP `listen` (`host:port`, port 0 = any) on this machine; each visitor address there
   * is a flow piped through the daemon to UDP `target`, allowed by the client's `forward` rules.
   */
  forwardUdp(options: { listen: string; target: string; idleMs?: number }): Promise<UdpForward> {
    return listenUdpForward(options, () => this, (error) => this.emit("error", error));
  }

  /** Opens a stream to a named service another client offers. */
  openService(name: string): Stream {
    return this.#openWith({ kind: "service", service: name });
  }

  /**
   * Opens a stream to the daemon's echo service (diagnostics). The daemon allows it only to
   * clients whose config lists it: `services: { use: ["echo"] }`; otherwise the stream closes
   * with a `not_allowed` {@linkcode ClientError}.
   */
  echo(): Stream {
    return this.#openWith({ kind: "echo" });
  }

  /**
   * Offers a named service; its users' connections are piped to `local` (`host:port`). The
   * offer is made again after every reconnect. Other sessions of this client (high
   * availability) may offer the same name; with `group`, so may the group's other members. A
   * refusal rejects this call only: the session, its tunnels and other offers stay.
   */
  async offer(name: string, local: string, options: OfferOptions = {}): Promise<void> {
    const record = newOfferRecord(local, options);
    await this.#request(offerRequest(name, record));
    this.#offers.set(name, record);
    this.#watchOfferHealth(name, record);
  }

  /**
   * Registers an offer to be made whenever a session is ready (now, if one is), like
   * {@linkcode keep} for tunnels; a refusal arrives as an `error` event.
   */
  keepOffer(name: string, local: string, options: OfferOptions = {}): void {
    const record = newOfferRecord(local, options);
    this.#offers.set(name, record);
    if (this.#lifecycle.state === "ready") void restoreOffer(name, record, this.#restoreContext());
  }

  /**
   * Stops offering a service. Without a ready session it is only forgotten (the daemon dropped
   * the offer with the session, and it is not made again).
   */
  async withdraw(name: string): Promise<void> {
    this.#offers.get(name)?.monitor?.stop();
    this.#offers.delete(name);
    if (this.#lifecycle.state !== "ready") return;
    await this.#request({ type: "withdraw", service: name });
  }

  /** Round-trip time to the daemon in milliseconds. */
  ping(): Promise<number> {
    return this.#readySession().ping();
  }

  /** Closes gracefully: no reconnect, the session ends once its streams are done. */
  async close(): Promise<void> {
    if (!this.#lifecycle.fire("close")) return;
    for (const record of this.#tunnels) record.monitor?.stop();
    for (const record of this.#offers.values()) record.monitor?.stop();
    clearTimeout(this.#retryTimer);
    this.#firstReady?.reject(new ClientError("closed", "the client was closed"));
    this.#failPending(new ClientError("closed", "the client was closed"));
    const session = this.#session;
    if (!session) return;
    // Ending the control stream tells the daemon we are leaving; it then ends the session.
    // Streams still open get a bounded time to finish.
    this.#control?.end();
    const forced = setTimeout(() => session.destroy(), CLOSE_GRACE_MS);
    await session.close();
    // Let the transport finish closing (a WebSocket's close handshake) before a process exits.
    await session.transportClosed;
    clearTimeout(forced);
  }

  // ---- Connection lifecycle ----

  async #attempt(): Promise<void> {
    const timeout = this.#options.connectTimeoutMs ?? 10_000;
    if (this.urls.length === 0) {
      return this.#giveUp(new ClientError("bad_url", "no daemon URL was given"));
    }
    for (const url of this.urls) {
      const problem = serverUrlProblem(url);
      if (problem) return this.#giveUp(new ClientError("bad_url", problem));
    }
    if (typeof this.#options.token !== "string" || this.#options.token.trim() === "") {
      return this.#giveUp(
        new ClientError(
          "bad_token",
          "the token is empty: pass the client's token (TUNNELMUX_TOKEN)",
        ),
      );
    }
    let transport: Transport;
    try {
      const dialed = await dialServer(this.url, {
        timeoutMs: timeout,
        caCerts: this.#options.caCerts,
        turn: (this.#options.firstAddress ?? 0) + this.#addressTurn++,
        resolve: this.#options.resolve,
      });
      transport = dialed.transport;
      this.#addresses = dialed.addresses;
    } catch (error) {
      const failure = dialFailure(this.url, error as Error);
      return this.#final(failure) ? this.#giveUp(failure) : this.#lost(failure);
    }
    if (this.#lifecycle.state === "closed") return transport.close();
    const session = new Session(transport, {
      client: true,
      config: { ackDelay: TUNNEL_ACK_DELAY_MS, ...this.#options.session },
      onStream: (stream) => acceptIncoming(stream, this.#routes),
      // A stream the daemon refuses closes with a ClientError that names the reason.
      resetError: (id, code) => ClientError.fromReset(id, code),
    });
    this.#session = session;
    this.#lifecycle.fire("connected");
    let handshakeFailure: ClientError | undefined;
    session.closed.then((error) => {
      if (this.#session !== session) return;
      this.#session = undefined;
      this.#control = undefined;
      // A refused handshake (e.g. limit_reached) says why; anything else is a lost connection.
      // More than one stream (the control stream) means the session carried traffic.
      const { streamsOpened, streamsAccepted } = session.stats;
      const parting = this.#parting;
      this.#parting = undefined;
      const firstContact = this.#everReady ? undefined : { bytesIn: session.stats.bytesIn };
      const failure = handshakeFailure ?? parting ??
        sessionFailure(this.url, error, this.#readyAt > 0, firstContact);
      if (this.#final(failure)) return this.#giveUp(failure);
      this.#lost(failure, streamsOpened + streamsAccepted > 1);
    });
    const handshake = setTimeout(() => session.destroy(new Error("handshake timed out")), timeout);
    try {
      const welcome = await this.#handshake(session);
      clearTimeout(handshake);
      this.#readyAt = Date.now();
      this.#everReady = true;
      this.#lastError = undefined;
      this.#failedAttempts = 0;
      this.#node = welcome.node;
      this.#lifecycle.fire("authenticated");
      this.emit("ready", {
        session: welcome.session,
        client: welcome.client,
        node: welcome.node,
        url: this.url,
      });
      this.#firstReady?.resolve();
      await restoreAll(this.#tunnels, this.#restoreContext());
    } catch (error) {
      clearTimeout(handshake);
      const failure = error instanceof ClientError
        ? error
        : new ClientError("session_lost", String(error));
      if (this.#final(failure)) return this.#giveUp(failure, session);
      handshakeFailure = failure;
      session.destroy();
    }
  }

  #handshake(session: Session): Promise<Extract<DaemonMessage, { type: "welcome" }>> {
    const stream = session.open();
    stream.write(encodeStreamHeader({ kind: "control" }));
    const control = new ControlChannel(stream);
    this.#control = control;
    control.onMessage = (value) => this.#onControl(value as DaemonMessage);
    control.onClose = () => session.destroy();
    control.start();
    return new Promise((resolve, reject) => {
      this.#welcome = { resolve, reject };
      control.send({
        type: "hello",
        version: CONTROL_VERSION,
        token: this.#options.token,
        name: this.#options.name,
        agent: "tunnelmux-client/0.1.0",
        ha: this.#options.ha,
      });
    });
  }

  /** Why the daemon is ending the current session, when it said so (a final error). */
  #parting: ClientError | undefined;

  #onControl(message: DaemonMessage): void {
    if (message.type === "welcome" || (message.type === "error" && message.id === undefined)) {
      const waiter = this.#welcome;
      this.#welcome = undefined;
      if (message.type === "welcome") return waiter?.resolve(message);
      const error = ClientError.fromDaemon(message.code, message.message);
      if (waiter) return waiter.reject(error);
      if (!error.fatal) return this.emit("error", error);
      // The daemon ends the session for a reason reconnecting cannot mend (its token was
      // revoked): that reason is the session's end, told once, and the client stops.
      this.#parting = error;
      return this.#session?.destroy();
    }
    if (message.type === "tunnel_closed") {
      for (const record of this.#tunnels) {
        if (record.id === message.tunnel) {
          record.closed = true;
          this.#tunnels.delete(record);
        }
      }
      return this.emit(
        "error",
        new ClientError("tunnel_closed", `tunnel ${message.tunnel} closed: ${message.reason}`),
      );
    }
    this.#requests.answer(message);
  }

  /** What restoring needs, bound to the session that is current now. */
  #restoreContext(): RestoreContext {
    const session = this.#session;
    return {
      isCurrent: () => session !== undefined && this.#session === session,
      expose: (record, port) => this.#exposeOnce(record, port),
      offer: (name, record) => this.#request(offerRequest(name, record)),
      offered: (name, record) => this.#watchOfferHealth(name, record),
      offers: this.#offers,
      onError: (error) => this.emit("error", error),
      restoreTimeoutMs: this.#options.restoreTimeoutMs ?? 30_000,
    };
  }

  /** Starts an offer's health check, and tells the daemon what it knows already. */
  #watchOfferHealth(name: string, record: OfferRecord): void {
    watchHealth(record, record.local, record.options.health, {
      changed: (healthy, detail) =>
        this.emit("health", { service: name, local: record.local, healthy, detail }),
      report: (healthy, detail) => {
        if (this.#offers.get(name) !== record) return;
        this.#request({ type: "health", service: name, healthy, detail }).catch(() => {});
      },
    });
  }

  #lost(error: ClientError, carriedTraffic = false): void {
    this.#lastError = error;
    this.#failPending(error);
    if (this.#lifecycle.state === "closed") return;
    if (!this.#backoff) {
      this.#lifecycle.fire("close");
      this.#firstReady?.reject(error);
      return this.emit("error", error);
    }
    if (this.#readyAt > 0) {
      this.#backoff.connectionEnded(Date.now() - this.#readyAt, carriedTraffic);
    }
    this.#readyAt = 0;
    // The next attempt goes to the next daemon URL, if there are several.
    this.#urlIndex = (this.#urlIndex + 1) % this.urls.length;
    this.emit("error", error);
    this.#lifecycle.fire("lost");
    const delayMs = this.#backoff.next();
    this.emit("retry", { error, attempt: ++this.#failedAttempts, delayMs });
    this.#retryTimer = setTimeout(() => {
      if (this.#lifecycle.fire("retry")) void this.#attempt();
    }, delayMs);
  }

  /**
   * Whether `failure` stops the client. A URL at the wrong listener is a mistake before the first
   * session; once one was up, the same answer is a proxy or a redeploy in between, and is retried
   * like a network error (a refused token stays final).
   */
  #final(failure: ClientError): boolean {
    return failure.fatal && !(this.#everReady && RETRIED_ONCE_UP.has(failure.code));
  }

  /** A mistake retrying cannot fix: stop, and fail the first connect with it. */
  #giveUp(error: ClientError, session?: Session): void {
    // Told once: a failed handshake reaches here both from its own catch and its session's end.
    if (this.#lifecycle.state === "closed") return void session?.destroy();
    this.#lastError = error;
    this.#failPending(error);
    this.#lifecycle.fire("close");
    this.#firstReady?.reject(error);
    this.emit("error", error);
    session?.destroy();
  }

  #failPending(error: ClientError): void {
    this.#welcome?.reject(error);
    this.#welcome = undefined;
    this.#requests.failAll(error);
  }

  // ---- Requests and streams ----

  /** Asks the daemon for `record` on `port` and starts its health check once it is exposed. */
  async #exposeOnce(record: TunnelRecord, port: number): Promise<void> {
    const reply = await this.#request(exposeRequest(record.request, port));
    if (!recordExposed(record, reply)) throw new ClientError("protocol", "expected exposed");
    this.emit("tunnel", this.#tunnelView(record));
    this.#watchTunnelHealth(record);
  }

  /** Starts the record's health check, and tells the daemon what it knows already. */
  #watchTunnelHealth(record: TunnelRecord): void {
    const local = record.request.local;
    watchHealth(record, local, record.request.health, {
      changed: (healthy, detail) =>
        this.emit("health", { tunnel: this.#tunnelView(record), local, healthy, detail }),
      report: (healthy, detail) => {
        if (record.closed || record.id === "") return;
        this.#request({ type: "health", tunnel: record.id, healthy, detail })
          .catch(() => {}); // not connected: the next session reports again
      },
    });
  }

  #tunnelView(record: TunnelRecord): Tunnel {
    return tunnelView(
      record,
      async () => {
        this.#tunnels.delete(record);
        if (this.#lifecycle.state === "ready") {
          await this.#request({ type: "unexpose", tunnel: record.id });
        }
      },
      async (policy) => {
        // Asked for again on a reconnect: the record holds what the daemon should enforce.
        const before = record.request.policy;
        record.request = { ...record.request, policy };
        if (this.#lifecycle.state !== "ready" || record.id === "" || record.closed) return;
        const reply = await this.#request({ type: "policy", tunnel: record.id, policy }).catch(
          (error) => {
            record.request = { ...record.request, policy: before };
            throw error;
          },
        );
        if (reply.type !== "ok") throw new ClientError("protocol", "expected ok");
      },
    );
  }

  #request(message: ControlRequest): Promise<DaemonMessage> {
    const control = this.#control;
    if (this.#lifecycle.state !== "ready" || !control) {
      return Promise.reject(new ClientError("not_connected", "not connected to the daemon"));
    }
    return this.#requests.send(control, message, this.#options.connectTimeoutMs ?? 10_000);
  }

  #readySession(): Session {
    if (this.#lifecycle.state !== "ready" || !this.#session) {
      throw new ClientError("not_connected", "not connected to the daemon");
    }
    return this.#session;
  }

  #openWith(header: StreamHeader): Stream {
    const stream = this.#readySession().open();
    stream.write(encodeStreamHeader(header));
    return stream;
  }
}
