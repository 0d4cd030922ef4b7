/**
 * The daemon configuration's types. Embedded defaults (`defaults.ts`), validation
 * (`validate.ts`) and loading (`load.ts`) are beside it; `mod.ts` re-exports them all.
 *
 * Layers, later winning: embedded defaults < config file (JSON or JSONC) < `TUNNELMUX_*`
 * environment < command-line flags. Validation reports every problem with its JSON path at once,
 * and unknown keys are errors, because a typo such as `"fowrard"` must never silently fall back
 * to a default. With no config at all the daemon is usable and closed: loopback listeners and one
 * `default` client that may expose ports 1024-65535 on 127.0.0.1 and forward nothing.
 *
 * @module
 */

import type { HostPort } from "../../util/net/address.ts";
import type { ClientPolicy } from "../policy/policy.ts";
import type { VisitorPolicy } from "../../tunnel/policy/visitor_policy.ts";

/** Where the daemon listens; `null` turns a listener off. */
export interface ListenConfig {
  /** yamux over TCP (TLS when `tls` is set). */
  tcp: HostPort | null;
  /** yamux over WebSocket (wss when `tls` is set). */
  websocket: HostPort | null;
  /** HTTP path the WebSocket upgrade is accepted on. */
  websocketPath: string;
  /** The admin API (token-protected, see `adminTokenHash`). */
  admin: HostPort | null;
  /** The shared port of HTTP tunnels: visitors' requests routed by their `Host` (see `http`). */
  http: HostPort | null;
  /**
   * The shared port of HTTPS and TLS tunnels: connections routed by their TLS server name (SNI),
   * terminated here with a certificate from `http.certificates`, or passed through to a client.
   */
  https: HostPort | null;
}

/** HTTP tunnels: names under a base domain, served on `listen.http`. */
export interface HttpConfig {
  /**
   * The base domain: a client asking for a single label `NAME` holds `NAME.<domain>` (a DNS
   * wildcard `*.<domain>` points at the daemon). null: clients name full host names only.
   */
  domain: string | null;
  /** Keep incoming `X-Forwarded-*` / `Forwarded` (a trusted proxy in front); else replace them. */
  trustForwarded: boolean;
  /**
   * Certificates the HTTPS port terminates with (PEM files, read at start): each serves the names
   * of its subjectAltName, `*.` wildcards included, e.g. one wildcard for the base domain.
   */
  certificates: TlsConfig[];
  /**
   * Certificates from an ACME CA for the names HTTP tunnels hold that no file serves; null: none.
   * Configuring it agrees to the CA's terms of service.
   */
  acme: AcmeConfig | null;
}

/** An ACME CA (RFC 8555), e.g. Let's Encrypt, for `http.acme`. */
export interface AcmeConfig {
  /** The CA's directory URL (https). */
  directory: string;
  /** The account's contact address, or null. */
  email: string | null;
  /** A PEM file of CA certificates to trust for the directory, besides the system's (a test CA). */
  caCerts: string | null;
  /** How names are proven: HTTP-01 on the HTTP port (80) or TLS-ALPN-01 on the HTTPS port (443). */
  challenge: "http-01" | "tls-alpn-01";
}

/** PEM files for TLS on the TCP and WebSocket listeners. */
export interface TlsConfig {
  /** Certificate chain file. */
  cert: string;
  /** Private key file. */
  key: string;
}

/** Daemon-wide limits. Durations in milliseconds, sizes in bytes; 0 idle timeout = none. */
export interface Limits {
  /** Concurrent client sessions. */
  sessions: number;
  /** Open streams per session; a client's `limits.streams` may only lower it. */
  streamsPerSession: number;
  /** Reverse tunnels per client; a client's `limits.tunnels` may only lower it. */
  tunnelsPerClient: number;
  /**
   * Visitors connected at once to one tunnel (on this node, relayed ones included); past it a
   * newcomer is refused at once and counted (`tunnel_visitor_limit`).
   */
  visitorsPerTunnel: number;
  /**
   * Visitors connected at once to one client's tunnels together, on this node; a client's
   * `limits.visitors` may only lower it. Past it a newcomer is refused (`client_visitor_limit`).
   */
  visitorsPerClient: number;
  /** Give up dialling a forward target after this long (also bounds its DNS lookup). */
  dialTimeoutMs: number;
  /** A new connection must authenticate within this long. */
  handshakeTimeoutMs: number;
  /**
   * Connections held in their handshake at once. When all places are taken, a newcomer closes the
   * oldest pending connection: a flood of silent connections cannot lock clients out.
   */
  pendingHandshakes: number;
  /** Of those, from one source address; past it a source's newcomer closes its own oldest. */
  pendingHandshakesPerSource: number;
  /**
   * Visitor connections open at once on the HTTP and HTTPS ports together; past it a newcomer is
   * closed at once (each is also bounded in time: head, hello and idle deadlines).
   */
  httpConnections: number;
  /**
   * How long the HTTP front waits for a response head once a request is all sent to its tunnel's
   * client; then the visitor gets 504. Read at each request: a reload applies at once.
   */
  httpResponseTimeoutMs: number;
  /** Close sessions idle this long; 0 disables. */
  idleTimeoutMs: number;
  /** Largest WebSocket message accepted. */
  maxWebSocketMessage: number;
  /**
   * Ping a client after this long without a frame from it. Keep it below the idle timeout of any
   * proxy, load balancer or CDN between clients and the daemon, so an idle session carries a
   * frame before they cut it.
   */
  keepAliveIntervalMs: number;
  /** Close a session whose ping goes unanswered this long: a dead client is noticed within
   * `keepAliveIntervalMs + keepAliveTimeoutMs`. */
  keepAliveTimeoutMs: number;
  /**
   * Largest receive window a stream grows to (yamux flow control), in bytes: what a visitor slower
   * than its tunnel's client lets wait in the daemon per stream, and what one stream carries per
   * round trip (the default, 6 MiB, is a gigabit at 50 ms). Raise it for long fat links. Applies to
   * client sessions that open after it is set, and to a cluster's relay sessions as the daemon starts.
   */
  streamWindow: number;
  /** A UDP flow (one visitor address of a UDP tunnel, or of a UDP forward) ends after this long with no datagram either way. */
  udpFlowIdleMs: number;
  /** Flows of one UDP tunnel at once; a datagram that would open one more is dropped and counted (`flow_limit`). */
  udpFlowsPerTunnel: number;
}

/** Logging. `auto` = pretty on a TTY, JSON lines otherwise. */
export interface LogConfig {
  /** Least severe level written. */
  level: "debug" | "info" | "warn" | "error";
  /** Output format. */
  format: "auto" | "pretty" | "json";
}

/** A client's own limits, already capped by the daemon-wide ones. */
export interface ClientLimits {
  /** Reverse tunnels at once. */
  tunnels: number;
  /** Streams per session. */
  streams: number;
  /** Visitors connected at once to its tunnels together, on one node. */
  visitors: number;
  /**
   * Bytes per second through all its tunnels together on one node, each way (`in`: visitors →
   * services); absent: no limit beyond each tunnel's own (`visitors.bandwidth`).
   */
  bandwidth?: { in?: number; out?: number };
}

/** One client: its credential, its permissions and its limits. */
export interface ClientConfig extends ClientPolicy {
  /** `sha256:<hex>` of the token; plain tokens are hashed at load and never kept. */
  tokenHash: string;
  /** Effective limits. */
  limits: ClientLimits;
  /** Groups this client may join (serving a group's tunnels with the other members). */
  groups: string[];
  /**
   * The visitor policy of its tunnels, defaults and ceilings: what the client asks for is narrowed
   * by it (`docs/policy.md`). The daemon-wide `visitors` when the client sets none.
   */
  visitors: VisitorPolicy;
}

/** A group: several clients serve one tunnel, each joining with the group's key. */
export interface GroupConfig {
  /** `sha256:` hash of the group key a member presents. */
  keyHash: string;
  /** How visitors are spread across the members. */
  balance: "round_robin" | "least_connections";
}

/** NATS credentials: at most one kind. */
export interface NatsAuth {
  /** A NATS token. */
  token?: string;
  /** User name (with `password`). */
  user?: string;
  /** Password (with `user`). */
  password?: string;
  /** A `.creds` file (JWT and nkey seed), as `nsc` writes it. */
  credsFile?: string;
  /** A file holding an nkey seed (`SU…`). */
  nkeySeedFile?: string;
}

/**
 * Several daemons as one, coordinated through NATS JetStream (`docs/cluster.md`). Absent: a
 * single node, and nothing of NATS is loaded.
 */
export interface ClusterConfig {
  /** NATS server URLs (`nats://host:4222`). */
  servers: string[];
  /** Credentials for NATS. */
  auth: NatsAuth;
  /** This node's name, unique in the cluster (default: the host name). */
  node: string;
  /** Where this node takes relay sessions from other nodes. */
  listen: HostPort;
  /**
   * `host:port` other nodes dial to reach `listen` (default: `listen`, unless it is a wildcard);
   * port 0 stands for the port `listen` gets bound to, advertised once bound.
   */
  advertise: string;
  /** The secret every node of the cluster shares; nodes prove it to each other (HMAC). */
  key: string;
  /**
   * Keys still accepted, and signed with beside `key`, while the cluster rolls over to a new key
   * (`docs/cluster.md`): a node holding any one of this node's keys works with it.
   */
  previousKeys: string[];
  /** A node whose heartbeat is older than this is gone, and what it held is released. */
  presenceTtlMs: number;
  /**
   * After NATS came back, this node reads the buckets again after a random delay below this, ms,
   * so that the nodes' re-reads are spread out (default 3000; 0: at once).
   */
  rereadSpreadMs: number;
  /** Prefix of the KV buckets (`<prefix>-nodes`, `-ports`, `-services`, `-tokens`). */
  bucketPrefix: string;
  /** JetStream replicas of each bucket (3 with a 3-node NATS cluster). */
  replicas: number;
  /**
   * The address this node binds tunnel ports on, whatever host the client asked for (the claim
   * keeps the asked one). null: the asked host. Set it when nodes share a machine.
   */
  tunnelHost: string | null;
  /** `all`: every node binds every cluster tunnel's port and relays; `owner`: only the owner. */
  visitors: "all" | "owner";
  /**
   * TLS for relay sessions between nodes: this node's certificate and key (valid for the host of
   * its `advertise` address) and the CA that signs every node's (files, PEM). null: plain TCP.
   */
  tls: { cert: string; key: string; ca: string } | null;
}

/** A validated configuration: every field present, every rule parsed. */
export interface Config {
  /** Listeners. */
  listen: ListenConfig;
  /** TLS, or null for plain TCP / ws. */
  tls: TlsConfig | null;
  /** Where state is kept. */
  dataDir: string;
  /** On SIGTERM, let sessions drain this long before closing them. */
  shutdownGraceMs: number;
  /** Daemon-wide limits. */
  limits: Limits;
  /** Logging. */
  log: LogConfig;
  /** Hash of the admin API token, or null when the admin listener is off. */
  adminTokenHash: string | null;
  /** The clients, in config order. */
  clients: ClientConfig[];
  /** Groups of clients serving one tunnel together, by name. */
  groups: Record<string, GroupConfig>;
  /** The cluster this node belongs to, or null for a single node. */
  cluster: ClusterConfig | null;
  /** HTTP tunnels' names and forwarding. */
  http: HttpConfig;
  /** The visitor policy of clients that set none of their own (`docs/policy.md`). */
  visitors: VisitorPolicy;
  /**
   * Networks (canonical CIDR) of fronts whose word on the visitor's address the daemon believes
   * for visitor rules: `X-Forwarded-For` / `Forwarded` on the HTTP ports, a PROXY protocol header
   * (required from them) on tunnel ports and the HTTPS port; empty: the socket's address.
   */
  trustedProxies: string[];
  /**
   * URL prefixes (origin and path) a client's own `policy.http` may name as a JWKS or an OIDC
   * issuer, for the daemon to fetch; empty: none (the operator's own rules are not limited).
   */
  identityProviders: string[];
}

/** A problem found in the configuration. */
export interface Issue {
  /** JSON path, e.g. `clients[2].forward[0]`; empty for the document itself. */
  path: string;
  /** What is wrong, quoting the offending value. Never contains a token. */
  message: string;
  /** Where the value came from when not the config file, e.g. `TUNNELMUX_LISTEN_TCP`. */
  source?: string;
}

/** Outcome of {@link validateConfig}: a config only when there are no errors. */
export interface ValidationResult {
  /** The validated configuration, when `errors` is empty. */
  config?: Config;
  /** Everything that makes the configuration unusable. */
  errors: Issue[];
  /** Things that work but are probably unintended (e.g. clear-text listeners off loopback). */
  warnings: Issue[];
}
