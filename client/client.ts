/**
 * The client SDK: a connection to a tunnelmux daemon that stays up (reconnecting with backoff),
 * and the tunnels, forwards and services a script asks for, restored after every reconnect.
 *
 * @module
 */

import type { SessionConfig } from "../protocol/config.ts";
import { CONTROL_VERSION, type DaemonMessage } from "../tunnel/control.ts";
import { ControlChannel } from "../tunnel/control_channel.ts";
import { Lifecycle } from "../util/lifecycle.ts";
import { readStreamHeader } from "../tunnel/read_stream_header.ts";
import { ResetReason } from "../tunnel/reset_reasons.ts";
import { Session } from "../protocol/session.ts";
import type { Stream } from "../protocol/stream.ts";
import { encodeStreamHeader, type StreamHeader } from "../tunnel/stream_header.ts";
import type { Transport } from "../protocol/transport.ts";
import { dialTcp, resetReasonForDial } from "../tunnel/dial.ts";
import { encodeProxyV1, encodeProxyV2 } from "../tunnel/proxy_protocol.ts";
import { splice, streamEnd, transportEnd } from "../tunnel/splice.ts";
import { parseHostPort } from "../util/address.ts";
import { Backoff, type BackoffOptions } from "./backoff.ts";
import { type Forward, listenForward } from "./forward_listener.ts";
export type { Forward };
import { serverUrlProblem } from "./server_url.ts";
import { WebSocketConnectError } from "../transport/ws.ts";
import { dialServer, type HostResolver } from "./dial_server.ts";
import { ClientError } from "./errors.ts";
import { Emitter } from "./emitter.ts";
import { HealthMonitor, type HealthOptions } from "./health_check.ts";

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
   * protocol reject at once instead; network errors are retried until then.
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

/** What {@linkcode Client.expose} asks for. */
export interface ExposeOptions {
  /** Where visitors are sent on this side, `host:port`. */
  local: string;
  /** The daemon's port to listen on; 0 (default) lets the daemon pick an allowed one. */
  remotePort?: number;
  /** The daemon's address to bind; default 127.0.0.1 on the daemon. */
  bindHost?: string;
  /** A name shown to operators. */
  label?: string;
  /** Send a PROXY protocol header to `local` first, so it sees the visitor's real address. */
  proxyProtocol?: "v1" | "v2";
  /**
   * An HTTP tunnel instead of a port: the host name to hold on the daemon's HTTP port (a label
   * under its base domain, e.g. `myapp` for `myapp.tunnels.example.com`, or a full name the
   * client may hold). Each request whose `Host` is that name reaches `local`. The tunnel's
   * `remoteHost` is the full name and `remotePort` the daemon's HTTP port.
   */
  http?: string;
  /**
   * A TLS tunnel instead of a port: the host name to hold on the daemon's HTTPS port (named as
   * for `http`). Each connection whose TLS server name (SNI) is that name reaches `local` as it
   * came, never decrypted by the daemon: `local` speaks TLS with its own certificate.
   */
  tls?: string;
  /**
   * Serve the tunnel as a member of this group (with `groupKey`): every member's session is a
   * route of one public port, and visitors are balanced across the members. The client's token
   * must allow the group. With `remotePort` 0 a member joins the port the group already holds.
   */
  group?: string;
  /** The group's key (a secret the daemon's config holds the hash of). */
  groupKey?: string;
  /**
   * Let other sessions of this client serve the same port too (high availability: the same
   * client connected to several nodes), instead of the port being refused to them.
   */
  shared?: boolean;
  /**
   * Check `local` now and then (TCP connect, or HTTP GET): while it fails, the daemon sends this
   * tunnel's visitors to its other routes (a group's other members, the client's other
   * sessions) instead. Default: no check.
   */
  health?: HealthOptions;
}

/** A reverse tunnel held by the client. Its remote port stays the same across reconnects when it can. */
export interface Tunnel {
  /** The daemon's id for it (a new one after each reconnect). */
  readonly id: string;
  /** Where the daemon listens. */
  readonly remoteHost: string;
  /** The daemon's port. */
  readonly remotePort: number;
  /**
   * An HTTP or TLS tunnel's address for visitors, as the daemon gives it (`https://NAME.DOMAIN/`
   * where it has TLS for the name, else `http://NAME.DOMAIN:PORT/`); undefined for a port's tunnel.
   */
  readonly url: string | undefined;
  /** Where visitors go on this side. */
  readonly local: string;
  /** Closes the tunnel on the daemon and forgets it. */
  close(): Promise<void>;
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

/** Options of {@linkcode Client.offer}. */
export interface OfferOptions {
  /**
   * Offer the service as a member of this group (with `groupKey`): every member's offer serves
   * the name, and users are balanced across the members. The client's token must allow the
   * group.
   */
  group?: string;
  /** The group's key. */
  groupKey?: string;
  /** Check `local` now and then: while it fails, users go to the name's other offers instead. */
  health?: HealthOptions;
}

interface OfferRecord {
  local: string;
  options: OfferOptions;
  /** The health check of its local service, when asked for. */
  monitor?: HealthMonitor;
}

interface TunnelRecord {
  request: ExposeOptions;
  id: string;
  remoteHost: string;
  remotePort: number;
  /** An HTTP or TLS tunnel's address, from the daemon's reply. */
  url?: string;
  closed: boolean;
  /** Registered with keep(): exposed whenever a session is ready, even if it never was yet. */
  kept?: boolean;
  /** The health check of its local service, when asked for. */
  monitor?: HealthMonitor;
}

/** A tunnel's record before it is exposed; a bad local address fails here, not at a visitor. */
function newRecord(options: ExposeOptions, kept: boolean): TunnelRecord {
  parseHostPort(options.local);
  return { request: options, id: "", remoteHost: "", remotePort: 0, closed: false, kept };
}

/** Pause between two attempts to get a tunnel's old port back after a reconnect. */
const RESTORE_RETRY_MS = 500;

/** What a failed dial means: a refused WebSocket upgrade says the URL or token is wrong. */
function dialFailure(url: string, error: Error): ClientError {
  const status = error instanceof WebSocketConnectError ? error.status : undefined;
  if (status === 401 || status === 403) {
    return new ClientError(
      "unauthorized",
      `the daemon refused the token at ${url} (HTTP ${status})`,
    );
  }
  if (status === 404) {
    return new ClientError(
      "upgrade_refused",
      `no WebSocket listener at ${url} (HTTP 404): check the path (the daemon's default is /tunnel)`,
    );
  }
  if (status !== undefined && status >= 400 && status < 500 && status !== 429) {
    return new ClientError(
      "upgrade_refused",
      `the daemon refused the upgrade at ${url} (HTTP ${status})`,
    );
  }
  return new ClientError("connect_failed", `cannot reach ${url}: ${error.message}`);
}

/** What a session that ended means; an HTTP answer on a yamux URL is a wrong port or scheme. */
function sessionFailure(url: string, error: Error | undefined, wasReady: boolean): ClientError {
  // "H" (72) is the first byte of "HTTP/1.1 400 …": a tcp:// URL pointed at an HTTP port.
  if (!wasReady && error && /unsupported protocol version 72\b/.test(error.message)) {
    const host = url.replace(/^[a-z]+:\/\//, "");
    return new ClientError(
      "wrong_protocol",
      `${url} answered in HTTP: it is an HTTP/WebSocket port; use ws://${host}/tunnel`,
    );
  }
  return new ClientError("session_lost", `connection lost${error ? `: ${error.message}` : ""}`);
}

interface Pending {
  resolve: (message: DaemonMessage) => void;
  reject: (error: ClientError) => void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * Connects to a daemon and resolves once the first session is ready. With reconnect on (the
 * default) a failing first attempt is retried too; a wrong token or protocol version fails at
 * once. `url` is `tcp://host:port`, `tls://host:port`, `ws://host:port/path` or `wss://…`.
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
  #nextRequestId = 1;
  readonly #pending = new Map<number, Pending>();
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

  /** Opens a reverse tunnel: the daemon listens, and its visitors are piped to `options.local`. */
  async expose(options: ExposeOptions): Promise<Tunnel> {
    const record = newRecord(options, false);
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
    const record = newRecord(options, true);
    this.#tunnels.add(record);
    if (this.#lifecycle.state === "ready") void this.#restoreTunnel(record);
    return this.#tunnelView(record);
  }

  /**
   * Opens a stream to `target` (`host:port`) through the daemon. The daemon checks its allowlist
   * and dials; a refusal arrives as a reset of the stream whose error names the reason.
   */
  open(target: string): Stream {
    return this.#openWith({ kind: "forward", target });
  }

  /**
   * Listens on `listen` (`host:port`, port 0 = any) on this machine; every connection there is
   * piped through the daemon to `target` (or, with `service`, to a named service). Connections
   * made while the daemon is unreachable are closed at once.
   */
  forward(options: { listen: string; target?: string; service?: string }): Promise<Forward> {
    return listenForward(options, () => this, (error) => this.emit("error", error));
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
   * availability) may offer the same name; with `group`, so may the group's other members.
   */
  async offer(name: string, local: string, options: OfferOptions = {}): Promise<void> {
    parseHostPort(local);
    const record: OfferRecord = { local, options };
    await this.#offerOnce(name, record);
    this.#offers.set(name, record);
    this.#watchOfferHealth(name, record);
  }

  /**
   * Registers an offer to be made whenever a session is ready (now, if one is), like
   * {@linkcode keep} for tunnels; a refusal arrives as an `error` event.
   */
  keepOffer(name: string, local: string, options: OfferOptions = {}): void {
    parseHostPort(local);
    const record: OfferRecord = { local, options };
    this.#offers.set(name, record);
    if (this.#lifecycle.state === "ready") void this.#restoreOffer(name, record);
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
      return failure.fatal ? this.#giveUp(failure) : this.#lost(failure);
    }
    if (this.#lifecycle.state === "closed") return transport.close();
    const session = new Session(transport, {
      client: true,
      config: this.#options.session,
      onStream: (stream) => this.#incoming(stream),
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
      const failure = handshakeFailure ?? sessionFailure(this.url, error, this.#readyAt > 0);
      if (failure.fatal) return this.#giveUp(failure);
      this.#lost(failure, streamsOpened + streamsAccepted > 1);
    });
    const handshake = setTimeout(() => session.destroy(new Error("handshake timed out")), timeout);
    try {
      const welcome = await this.#handshake(session);
      clearTimeout(handshake);
      this.#readyAt = Date.now();
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
      await this.#restore();
    } catch (error) {
      clearTimeout(handshake);
      const failure = error instanceof ClientError
        ? error
        : new ClientError("session_lost", String(error));
      if (failure.fatal) return this.#giveUp(failure, session);
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

  #onControl(message: DaemonMessage): void {
    if (message.type === "welcome" || (message.type === "error" && message.id === undefined)) {
      const waiter = this.#welcome;
      this.#welcome = undefined;
      if (message.type === "welcome") return waiter?.resolve(message);
      const error = ClientError.fromDaemon(message.code, message.message);
      return waiter ? waiter.reject(error) : this.emit("error", error);
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
    const id = message.id ?? -1;
    const pending = this.#pending.get(id);
    if (!pending) return;
    this.#pending.delete(id);
    clearTimeout(pending.timer);
    if (message.type === "error") {
      pending.reject(ClientError.fromDaemon(message.code, message.message));
    } else pending.resolve(message);
  }

  /** After a (re)connect: re-expose every tunnel and re-offer every service. */
  async #restore(): Promise<void> {
    await Promise.all([...this.#tunnels].map((record) => this.#restoreTunnel(record)));
    for (const [name, record] of this.#offers) await this.#restoreOffer(name, record);
  }

  /** Makes an offer again on this session, with its health check. */
  async #restoreOffer(name: string, record: OfferRecord): Promise<void> {
    try {
      await this.#offerOnce(name, record);
      if (this.#offers.get(name) === record) this.#watchOfferHealth(name, record);
    } catch (error) {
      this.emit("error", error as ClientError);
    }
  }

  async #offerOnce(name: string, record: OfferRecord): Promise<void> {
    const { group, groupKey } = record.options;
    await this.#request({ type: "offer", service: name, group, groupKey });
  }

  /** Starts an offer's health check, and tells the daemon what it knows already. */
  #watchOfferHealth(name: string, record: OfferRecord): void {
    const options = record.options.health;
    if (!options) return;
    const report = (healthy: boolean, detail?: string) => {
      if (this.#offers.get(name) !== record) return;
      this.#request({ type: "health", service: name, healthy, detail }).catch(() => {});
    };
    if (!record.monitor) {
      record.monitor = new HealthMonitor(record.local, options, (healthy, detail) => {
        this.emit("health", { service: name, local: record.local, healthy, detail });
        report(healthy, detail);
      });
      record.monitor.start();
    } else if (!record.monitor.healthy) report(false, record.monitor.detail);
  }

  /**
   * Re-exposes one tunnel on the port it had, so its public address survives the reconnect. The
   * port may still be held for the session that was lost (until the daemon notices, or, in a
   * cluster, until the dead node's claim expires): `port_in_use` is retried for a while.
   */
  async #restoreTunnel(record: TunnelRecord): Promise<void> {
    const session = this.#session;
    const port = record.remotePort || (record.request.remotePort ?? 0);
    const deadline = Date.now() + (this.#options.restoreTimeoutMs ?? 30_000);
    for (;;) {
      if ((record.id === "" && !record.kept) || record.closed) return;
      if (this.#session !== session || !session) return;
      try {
        return await this.#exposeOnce(record, port);
      } catch (error) {
        const code = (error as ClientError).code;
        if (code !== "port_in_use" || port === 0 || Date.now() > deadline) {
          return void this.emit("error", error as ClientError);
        }
      }
      await new Promise((resolve) => setTimeout(resolve, RESTORE_RETRY_MS));
    }
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

  /** A mistake retrying cannot fix: stop, and fail the first connect with it. */
  #giveUp(error: ClientError, session?: Session): void {
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
    for (const pending of this.#pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(error);
    }
    this.#pending.clear();
  }

  // ---- Requests and streams ----

  async #exposeOnce(record: TunnelRecord, port: number): Promise<void> {
    const { bindHost, label, group, groupKey, shared, http, tls } = record.request;
    const name = tls ?? http;
    const reply = await this.#request({
      type: "expose",
      // An HTTP or TLS tunnel holds a name on the daemon's shared ports, never a port of its own.
      port: name === undefined ? port : 0,
      bindHost,
      label,
      group,
      groupKey,
      shared,
      http: name,
      passthrough: tls === undefined ? undefined : true,
    });
    if (reply.type !== "exposed") throw new ClientError("protocol", "expected exposed");
    record.id = reply.tunnel;
    record.remoteHost = reply.bindHost;
    record.remotePort = reply.port;
    record.url = reply.url;
    this.emit("tunnel", this.#tunnelView(record));
    this.#watchHealth(record);
  }

  /** Starts the record's health check, and tells the daemon what it knows already. */
  #watchHealth(record: TunnelRecord): void {
    const options = record.request.health;
    if (!options) return;
    const report = (healthy: boolean, detail?: string) => {
      if (record.closed || record.id === "") return;
      this.#request({ type: "health", tunnel: record.id, healthy, detail })
        .catch(() => {}); // not connected: the next session reports again
    };
    if (!record.monitor) {
      record.monitor = new HealthMonitor(record.request.local, options, (healthy, detail) => {
        const tunnel = this.#tunnelView(record);
        this.emit("health", { tunnel, local: record.request.local, healthy, detail });
        report(healthy, detail);
      });
      record.monitor.start();
    } else if (!record.monitor.healthy) report(false, record.monitor.detail);
  }

  #tunnelView(record: TunnelRecord): Tunnel {
    return {
      get id() {
        return record.id;
      },
      get remoteHost() {
        return record.remoteHost;
      },
      get remotePort() {
        return record.remotePort;
      },
      get url() {
        if (record.request.http === undefined && record.request.tls === undefined) return undefined;
        if (record.remoteHost === "") return undefined;
        if (record.url !== undefined) return record.url;
        // A daemon that does not say (an older one): its HTTP port.
        const port = record.remotePort === 80 ? "" : `:${record.remotePort}`;
        return `http://${record.remoteHost}${port}/`;
      },
      local: record.request.local,
      close: async () => {
        if (record.closed) return;
        record.closed = true;
        record.monitor?.stop();
        this.#tunnels.delete(record);
        if (this.#lifecycle.state === "ready") {
          await this.#request({ type: "unexpose", tunnel: record.id });
        }
      },
    };
  }

  #request(message: Record<string, unknown>): Promise<DaemonMessage> {
    const control = this.#control;
    if (this.#lifecycle.state !== "ready" || !control) {
      return Promise.reject(new ClientError("not_connected", "not connected to the daemon"));
    }
    const id = this.#nextRequestId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new ClientError("timeout", `${message.type} got no answer`));
      }, this.#options.connectTimeoutMs ?? 10_000);
      this.#pending.set(id, { resolve, reject, timer });
      control.send({ ...message, id });
    });
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

  /** The tunnel the daemon knows as `id` (ids change on reconnects, so a scan; no copy per visitor). */
  #tunnelById(id: string): TunnelRecord | undefined {
    for (const record of this.#tunnels) if (record.id === id) return record;
    return undefined;
  }

  /** A stream the daemon opened: a visitor of one of our tunnels, or a user of our service. */
  #incoming(stream: Stream): void {
    readStreamHeader(stream, this.#options.connectTimeoutMs ?? 10_000).then(
      ({ header, rest }) => {
        let local: string | undefined;
        let first = rest;
        if (header.kind === "visitor") {
          const request = this.#tunnelById(header.tunnel)?.request;
          if (!request) return stream.reset(ResetReason.UnknownTunnel);
          local = request.local;
          if (request.proxyProtocol) {
            const encode = request.proxyProtocol === "v2" ? encodeProxyV2 : encodeProxyV1;
            const proxyHeader = encode(header.remote, header.local);
            first = new Uint8Array(proxyHeader.length + rest.length);
            first.set(proxyHeader);
            first.set(rest, proxyHeader.length);
          }
        } else if (header.kind === "service") {
          local = this.#offers.get(header.service)?.local;
          if (!local) return stream.reset(ResetReason.UnknownService);
        } else {
          return stream.reset(ResetReason.BadHeader);
        }
        void this.#pipeToLocal(stream, local, first);
      },
      () => stream.reset(ResetReason.BadHeader),
    );
  }

  /** Dials `local` and pipes `stream` to it, writing `first` (PROXY header, early payload) first. */
  async #pipeToLocal(stream: Stream, local: string, first: Uint8Array): Promise<void> {
    const { hostname, port } = parseHostPort(local);
    let socket: Transport;
    try {
      socket = await dialTcp(hostname, port, this.#options.dialTimeoutMs ?? 10_000);
    } catch (error) {
      this.emit(
        "error",
        new ClientError("local_dial_failed", `cannot reach ${local}: ${(error as Error).message}`),
      );
      return stream.reset(resetReasonForDial(error));
    }
    await splice(streamEnd(stream), transportEnd(socket), { aFirst: first });
  }
}
