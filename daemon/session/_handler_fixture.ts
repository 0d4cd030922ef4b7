/**
 * Test support for the control handlers: what a client session gives them, made of real parts
 * (a validated configuration, an in-memory registry, this node's port listeners on 127.0.0.1, a
 * yamux session over an in-memory pair whose far end plays the client), with the daemon's side
 * as switches and recordings (draining, the HTTP ports, events, counts), and every answer, log
 * line and event kept for the test to read.
 *
 * @module
 */

import { memoryPair } from "../../transport/memory.ts";
import { Session } from "../../protocol/session.ts";
import type { Stream } from "../../protocol/stream.ts";
import type { DaemonMessage } from "../../tunnel/control/control.ts";
import { Logger } from "../../util/log.ts";
import { type ClientConfig, type Config, validateConfig } from "../config/mod.ts";
import type { DaemonEventType } from "../events.ts";
import { LocalRegistry } from "../registry/local_registry.ts";
import type {
  ClaimResult,
  HostClaim,
  PortClaim,
  ServiceOffer,
  ServiceRecord,
} from "../registry/registry.ts";
import type { TokenRegistry } from "../tokens/store.ts";
import type { ReverseTunnel } from "../tunnels/reverse_tunnel.ts";
import { TunnelPorts } from "../tunnels/tunnel_ports.ts";
import { VisitorAccounts } from "../tunnels/visitor_limit.ts";
import { type Answer, answerTo } from "./answer.ts";
import type { ExposeContext } from "./expose.ts";
import type { HealthContext } from "./health.ts";
import type { OfferContext } from "./offer.ts";
import { SessionTunnels, type SessionTunnelsContext } from "./session_tunnels.ts";

/** Every handler's context at once, as a client session builds it. */
export type HandlerContext = ExposeContext & OfferContext & HealthContext & SessionTunnelsContext;

/** The key of group `team` in {@linkcode testConfig}. */
export const GROUP_KEY = "team-group-key-0123456789abcdef";

/** The registry never looks into tokens: a stand-in that is never called. */
const NO_TOKENS = {} as TokenRegistry;

/**
 * A validated configuration: client `alice` (fields of `client` added or replaced), client `bob`,
 * group `team` (key {@linkcode GROUP_KEY}) that alice may join, and the fields of `rest`.
 */
export function testConfig(
  client: Record<string, unknown> = {},
  rest: Record<string, unknown> = {},
): Config {
  const result = validateConfig({
    listen: { admin: null },
    clients: [
      {
        name: "alice",
        token: "alice-token-0123456789abcdef",
        expose: { ports: [0, "20000-30000"], hosts: ["*"] },
        services: { offer: ["db", "web*"] },
        groups: ["team"],
        ...client,
      },
      {
        name: "bob",
        token: "bob-token-0123456789abcdef0",
        expose: { ports: [0, "20000-30000"] },
        services: { offer: ["db"] },
      },
    ],
    groups: { team: { key: GROUP_KEY, balance: "least_connections" } },
    http: { domain: "tunnels.example.com" },
    ...rest,
  });
  if (!result.config) throw new Error(JSON.stringify(result.errors));
  return result.config;
}

/** A registry that cannot be asked now, as a cluster's with NATS away. */
export class UnreachableRegistry extends LocalRegistry {
  /** An empty registry of node `n1`. */
  constructor() {
    super({ node: "n1", tokens: NO_TOKENS });
  }

  override claimPort(_claim: PortClaim): Promise<ClaimResult> {
    return Promise.resolve({ ok: false, reason: "unavailable" });
  }

  override claimHost(_claim: HostClaim, _t: ReverseTunnel): Promise<ClaimResult<HostClaim>> {
    return Promise.resolve({ ok: false, reason: "unavailable" });
  }

  override offerService(_offer: ServiceOffer): Promise<ClaimResult<ServiceRecord>> {
    return Promise.resolve({ ok: false, reason: "unavailable" });
  }
}

/** What a client session gives the handlers, with everything they did kept for the test. */
export class Fixture {
  /** What the handlers are given: session `s1`. */
  readonly context: HandlerContext;
  /** The configuration in force (replace it to reload). */
  config: Config;
  /** The registry behind `context`. */
  readonly registry: LocalRegistry;
  /** Visitor accounts of the clients (as the daemon keeps them). */
  readonly visitors: VisitorAccounts;
  /** This node's port listeners. */
  readonly ports: TunnelPorts;
  /** The session's tunnels. */
  readonly tunnels: SessionTunnels;
  /** Streams the daemon opened to the client (visitors, service users), in order. */
  readonly opened: Stream[] = [];
  /** Every message the answers sent, in order. */
  readonly sent: DaemonMessage[] = [];
  /** Every log line, as JSON text. */
  readonly lines: string[] = [];
  /** Every published event. */
  readonly events: { type: DaemonEventType; fields: Record<string, unknown> }[] = [];
  /** Every counted event. */
  readonly counted: string[] = [];
  /** Host names a certificate was asked for. */
  readonly certificatesWanted: string[] = [];
  /** Host names the HTTPS port terminates TLS for. */
  readonly terminated = new Set<string>();
  /** The daemon drains. */
  draining = false;
  /** The session has ended. */
  ended = false;
  /** The HTTP port of tunnels by host name, or undefined while off. */
  httpPort: number | undefined;
  /** The HTTPS port, or undefined while off. */
  httpsPort: number | undefined;

  readonly #log: Logger;
  readonly #yamux: Session;
  readonly #peer: Session;

  /** Session `s1` of a client on node `n1`; `registry` replaces the in-memory registry. */
  constructor(options: { config?: Config; registry?: LocalRegistry } = {}) {
    this.config = options.config ?? testConfig();
    this.#log = new Logger({ level: "debug", format: "json", sink: (l) => this.lines.push(l) });
    this.registry = options.registry ?? new LocalRegistry({ node: "n1", tokens: NO_TOKENS });
    this.visitors = new VisitorAccounts(() => this.config.limits.visitorsPerClient);
    this.ports = new TunnelPorts(this.#log);
    const [daemonEnd, clientEnd] = memoryPair();
    this.#yamux = new Session(daemonEnd, { client: false, config: { enableKeepAlive: false } });
    this.#peer = new Session(clientEnd, {
      client: true,
      config: { enableKeepAlive: false },
      onStream: (stream) => this.opened.push(stream),
    });
    const tunnels = () => this.tunnels;
    this.context = {
      sessionId: "s1",
      yamux: this.#yamux,
      registry: this.registry,
      ports: this.ports,
      get tunnels() {
        return tunnels();
      },
      log: this.#log,
      ended: () => this.ended,
      config: () => this.config,
      draining: () => this.draining,
      httpPort: () => this.httpPort,
      httpsPort: () => this.httpsPort,
      terminates: (host) => this.terminated.has(host),
      wantCertificate: (host) => void this.certificatesWanted.push(host),
      count: (event) => void this.counted.push(event),
      publish: (type, fields) => void this.events.push({ type, fields }),
      visitorLimit: (client) => ({
        perTunnel: () => this.config.limits.visitorsPerTunnel,
        client: this.visitors.of(client),
        refused: (reason) => void this.counted.push(reason),
      }),
    };
    this.tunnels = new SessionTunnels(this.context);
  }

  /** Client `alice` of the configuration in force. */
  get client(): ClientConfig {
    return this.config.clients.find((c) => c.name === "alice")!;
  }

  /** A new answer to `request`, recording into `sent` and `lines`. */
  answer(request: { type: string; id: number }): Answer {
    return answerTo(request, { send: (message) => this.sent.push(message) }, this.#log);
  }

  /** The log lines whose message is `message`, parsed. */
  logged(message: string): Record<string, unknown>[] {
    return this.lines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === message);
  }

  /** Takes every tunnel down, closes every port and both yamux ends. */
  close(): void {
    this.tunnels.removeAll();
    for (const listener of this.ports.listeners()) listener.close();
    this.#peer.destroy();
    this.#yamux.destroy();
  }
}
