/**
 * The admin API described as an OpenAPI 3.1 document, served at `GET /v1/openapi.json`.
 *
 * Written by hand rather than generated from the endpoints: the endpoints validate with small
 * functions of their own (`params.ts`), not with a schema library, and adding one for the sake of
 * the document would be the bigger change. `openapi_test.ts` keeps the two in step: the set of
 * registered endpoints must equal the set of documented operations, and real responses of the GET
 * endpoints must validate against their schemas.
 *
 * The schemas use only the JSON Schema subset that test checks (`type`, `required`,
 * `properties`, `items`, `enum`, `$ref`, plus `pattern`/`minimum`/`maximum` as documentation), so
 * that what is written here is what is tested.
 *
 * @module
 */

import { Hono } from "hono";
import { VERSION } from "../../util/host/version.ts";

/** A JSON Schema (the subset this document uses), or any OpenAPI object: plain JSON. */
type Json = Record<string, unknown>;

/** A reference to a schema under `components.schemas`. */
const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });

/** A reference to a shared response under `components.responses`. */
const response = (name: string): Json => ({ $ref: `#/components/responses/${name}` });

/** A JSON response with `schema`. */
function json(description: string, schema: Json): Json {
  return { description, content: { "application/json": { schema } } };
}

/** A non-negative integer (counters, byte totals, milliseconds). */
const count: Json = { type: "integer", minimum: 0 };

/** The path parameter patterns, the same as `params.ts` enforces (a mismatch answers 400). */
export const PARAM_PATTERNS = {
  session: "^s[1-9]\\d{0,15}$",
  stream: "^[1-9]\\d{0,9}$",
  tunnel: "^t-[0-9a-f]{1,64}$",
  token: "^tok_[0-9a-f]{16}$",
} as const;

/** A path parameter. */
function pathParam(name: string, pattern: string, description: string): Json {
  return { name, in: "path", required: true, description, schema: { type: "string", pattern } };
}

const sessionIdParam = pathParam("id", PARAM_PATTERNS.session, "A session id, e.g. `s12`.");

/** Responses every guarded endpoint can give besides its own: bad token, wrong Host, a failure. */
const guarded: Json = {
  "401": response("Unauthorized"),
  "421": response("Misdirected"),
  "500": response("Internal"),
};

/** Responses of endpoints that take an id in the path: malformed (400) or unknown (404). */
const byId: Json = { "400": response("BadRequest"), "404": response("NotFound") };

/** An operation that requires the admin token (the document's default security). */
function op(summary: string, responses: Json, extra: Json = {}): Json {
  return { summary, ...extra, responses: { ...responses, ...guarded } };
}

/** An operation served without the token: the probes, and the dashboard's static files. */
function publicOp(summary: string, responses: Json, extra: Json = {}): Json {
  return {
    summary,
    security: [],
    ...extra,
    responses: { ...responses, "421": response("Misdirected") },
  };
}

/** A static text asset of the dashboard. */
function asset(summary: string, type: string): Json {
  return publicOp(summary, {
    "200": { description: summary, content: { [type]: { schema: { type: "string" } } } },
  }, { tags: ["dashboard"] });
}

const schemas: Record<string, Json> = {
  Error: {
    type: "object",
    description: "Every failure, whatever raised it.",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["code", "message"],
        properties: {
          code: {
            type: "string",
            enum: [
              "bad_request",
              "unauthorized",
              "forbidden",
              "not_found",
              "method_not_allowed",
              "conflict",
              "payload_too_large",
              "misdirected",
              "not_ready",
              "internal",
            ],
          },
          message: { type: "string" },
        },
      },
    },
  },
  Health: {
    type: "object",
    required: ["status"],
    properties: { status: { type: "string", enum: ["ok", "ready"] } },
  },
  DaemonState: { type: "string", enum: ["starting", "running", "draining", "stopped"] },
  RecentHistory: {
    type: "object",
    required: ["intervalMs", "samples"],
    properties: {
      intervalMs: { type: "integer", description: "Time between samples." },
      samples: {
        type: "array",
        description: "The last five minutes at most, oldest first; kept by the daemon in a ring.",
        items: {
          type: "object",
          required: ["at", "bytesIn", "bytesOut", "sessions", "streams"],
          properties: {
            at: { type: "string", format: "date-time" },
            bytesIn: {
              type: "number",
              description: "Transport bytes per second received since the sample before.",
            },
            bytesOut: {
              type: "number",
              description: "Transport bytes per second sent since the sample before.",
            },
            sessions: { type: "integer" },
            streams: { type: "integer", description: "Open streams, over every session." },
          },
        },
      },
    },
  },
  Info: {
    type: "object",
    required: [
      "version",
      "runtime",
      "state",
      "startedAt",
      "uptimeMs",
      "listeners",
      "tls",
      "limits",
      "shutdownGraceMs",
      "clients",
      "counts",
    ],
    properties: {
      version: { type: "string" },
      runtime: {
        type: "object",
        required: ["name", "version"],
        properties: {
          name: { type: "string", enum: ["deno", "bun", "node"] },
          version: { type: "string" },
        },
      },
      state: ref("DaemonState"),
      startedAt: { type: "string", format: "date-time" },
      uptimeMs: count,
      listeners: {
        type: "object",
        description: "Bound addresses as host:port (websocket with its path).",
        properties: {
          tcp: { type: "string" },
          websocket: { type: "string" },
          admin: { type: "string" },
          http: { type: "string", description: "The shared port of HTTP tunnels." },
          https: { type: "string", description: "The shared port of HTTPS and TLS tunnels." },
          cluster: {
            type: "string",
            description: "In a cluster: the relay listener, where other nodes' sessions arrive.",
          },
          advertise: {
            type: "string",
            description: "In a cluster: where other nodes dial the relay listener.",
          },
        },
        required: ["admin"],
      },
      tls: { type: "boolean" },
      limits: {
        type: "object",
        required: [
          "sessions",
          "streamsPerSession",
          "tunnelsPerClient",
          "visitorsPerTunnel",
          "visitorsPerClient",
          "dialTimeoutMs",
          "handshakeTimeoutMs",
          "pendingHandshakes",
          "pendingHandshakesPerSource",
          "httpConnections",
          "httpResponseTimeoutMs",
          "idleTimeoutMs",
          "maxWebSocketMessage",
          "keepAliveIntervalMs",
          "keepAliveTimeoutMs",
          "streamWindow",
          "udpFlowIdleMs",
          "udpFlowsPerTunnel",
        ],
        properties: {
          sessions: count,
          streamsPerSession: count,
          tunnelsPerClient: count,
          visitorsPerTunnel: count,
          visitorsPerClient: count,
          dialTimeoutMs: count,
          handshakeTimeoutMs: count,
          pendingHandshakes: count,
          pendingHandshakesPerSource: count,
          httpConnections: count,
          httpResponseTimeoutMs: count,
          idleTimeoutMs: count,
          maxWebSocketMessage: count,
          keepAliveIntervalMs: count,
          keepAliveTimeoutMs: count,
          streamWindow: count,
          udpFlowIdleMs: count,
          udpFlowsPerTunnel: count,
        },
      },
      shutdownGraceMs: count,
      clients: {
        type: "array",
        items: {
          type: "object",
          required: [
            "name",
            "forwardRules",
            "exposePortRanges",
            "servicesOffered",
            "servicesUsed",
            "sessions",
            "tunnels",
          ],
          properties: {
            name: { type: "string" },
            forwardRules: count,
            exposePortRanges: count,
            servicesOffered: count,
            servicesUsed: count,
            sessions: count,
            tunnels: count,
          },
        },
      },
      counts: {
        type: "object",
        required: ["mintedTokens", "sessions", "tunnels", "services"],
        properties: { mintedTokens: count, sessions: count, tunnels: count, services: count },
      },
    },
  },
  SessionSummary: {
    type: "object",
    required: [
      "id",
      "client",
      "state",
      "transport",
      "remoteAddress",
      "since",
      "rttMs",
      "bytesIn",
      "bytesOut",
      "streamCount",
      "tunnelCount",
    ],
    properties: {
      id: { type: "string", pattern: PARAM_PATTERNS.session },
      client: { type: ["string", "null"], description: "null until the handshake names it." },
      state: { type: "string", enum: ["handshake", "ready", "closed"] },
      transport: { type: "string", enum: ["tcp", "tls", "ws", "wss"] },
      remoteAddress: { type: "string" },
      since: { type: "string", format: "date-time" },
      rttMs: { type: ["number", "null"], description: "null until a keepalive was answered." },
      bytesIn: count,
      bytesOut: count,
      streamCount: count,
      tunnelCount: count,
      ha: {
        type: "integer",
        minimum: 1,
        description: "Sessions its client keeps to distinct nodes (its --ha); 1 when not said.",
      },
    },
  },
  SessionPage: {
    type: "object",
    required: ["sessions", "nextCursor"],
    properties: {
      sessions: { type: "array", items: ref("SessionSummary") },
      nextCursor: {
        type: ["string", "null"],
        description: "Pass as `cursor` for the next page; null on the last page.",
      },
    },
  },
  Stream: {
    type: "object",
    required: [
      "id",
      "state",
      "bytesIn",
      "bytesOut",
      "sendWindow",
      "receiveWindow",
      "bufferedBytes",
      "queuedBytes",
      "ageMs",
    ],
    properties: {
      id: { type: "integer", minimum: 1 },
      state: { type: "string" },
      bytesIn: count,
      bytesOut: count,
      sendWindow: count,
      receiveWindow: count,
      bufferedBytes: count,
      queuedBytes: count,
      ageMs: count,
    },
  },
  SessionDetail: {
    type: "object",
    description: "A SessionSummary plus the fields below.",
    required: [
      "id",
      "client",
      "state",
      "transport",
      "remoteAddress",
      "since",
      "rttMs",
      "bytesIn",
      "bytesOut",
      "streamCount",
      "tunnelCount",
      "frames",
      "resets",
      "streams",
      "tunnels",
    ],
    properties: {
      frames: {
        type: "object",
        description: "Frames received (`in`) and sent (`out`), by frame type.",
        required: ["in", "out"],
        properties: { in: ref("FrameCounts"), out: ref("FrameCounts") },
      },
      resets: {
        type: "object",
        required: ["sent", "received"],
        properties: { sent: count, received: count },
      },
      streams: { type: "array", items: ref("Stream") },
      tunnels: { type: "array", items: { type: "string", pattern: PARAM_PATTERNS.tunnel } },
      udpForwards: {
        oneOf: [ref("UdpForwardCounters"), { type: "null" }],
        description: "What the session's UDP forwards did (--forward-udp): flows, datagrams " +
          "and payload bytes to and from their targets, drops by reason.",
      },
    },
  },
  UdpForwardCounters: {
    type: "object",
    required: [
      "flowsOpen",
      "flows",
      "datagramsToTargets",
      "datagramsFromTargets",
      "bytesToTargets",
      "bytesFromTargets",
      "drops",
    ],
    properties: {
      flowsOpen: count,
      flows: count,
      datagramsToTargets: count,
      datagramsFromTargets: count,
      bytesToTargets: count,
      bytesFromTargets: count,
      drops: ref("UdpDrops"),
    },
  },
  FrameCounts: {
    type: "object",
    required: ["data", "windowUpdate", "ping", "goAway"],
    properties: { data: count, windowUpdate: count, ping: count, goAway: count },
  },
  Kicked: {
    type: "object",
    required: ["session", "state"],
    properties: {
      session: { type: "string", pattern: PARAM_PATTERNS.session },
      state: { type: "string", enum: ["closing"] },
    },
  },
  Tunnel: {
    type: "object",
    required: [
      "id",
      "client",
      "session",
      "bind",
      "label",
      "createdAt",
      "connections",
      "active",
      "bytesFromVisitors",
      "bytesToVisitors",
      "errors",
    ],
    properties: {
      id: { type: "string", pattern: PARAM_PATTERNS.tunnel },
      client: { type: "string" },
      session: { type: ["string", "null"] },
      bind: {
        type: "string",
        description:
          "host:port the tunnel listens on (an HTTP tunnel: its name and the port its visitors " +
          "are sent to; see urls for every port it answers on).",
      },
      protocol: {
        type: "string",
        enum: ["tcp", "udp", "http", "tls"],
        description: "What it carries: a TCP or UDP port, or a host name's HTTP requests or " +
          "TLS connections.",
      },
      host: {
        type: ["string", "null"],
        description:
          "An HTTP or TLS tunnel's host name on the shared ports; null for a port's tunnel.",
      },
      urls: {
        type: "array",
        items: { type: "string" },
        description:
          "Every URL visitors reach an HTTP or TLS tunnel by (the HTTP and the HTTPS port's); " +
          "empty for a port's tunnel.",
      },
      passthrough: {
        type: "boolean",
        description: "A TLS tunnel: its HTTPS connections reach the client undecrypted.",
      },
      certificate: {
        oneOf: [ref("Certificate"), { type: "null" }],
        description: "The certificate the HTTPS port terminates its host with, if any.",
      },
      label: { type: ["string", "null"] },
      createdAt: { type: "string", format: "date-time" },
      connections: count,
      active: count,
      bytesFromVisitors: count,
      bytesToVisitors: count,
      errors: count,
      healthy: {
        type: "boolean",
        description: "false while its client reports the local service unhealthy (no visitors).",
      },
      policy: {
        type: "object",
        description: "Its visitor policy in force: the operator's rules narrowed by the " +
          "client's (docs/policy.md); {} when none.",
      },
      routes: {
        type: "array",
        description: "GET /v1/tunnels/{id} only: every route of the tunnel's port (the same " +
          "protocol's: a group's UDP members, not the TCP port of that number).",
        items: { type: "object" },
      },
      udp: {
        oneOf: [ref("UdpCounters"), { type: "null" }],
        description: "A UDP tunnel's flows, datagrams and drops (its connections count flows, " +
          "its bytes payload bytes); null for any other.",
      },
    },
  },
  UdpCounters: {
    type: "object",
    required: [
      "flowsOpen",
      "flows",
      "datagramsFromVisitors",
      "datagramsToVisitors",
      "bytesFromVisitors",
      "bytesToVisitors",
      "drops",
    ],
    properties: {
      flowsOpen: count,
      flows: count,
      datagramsFromVisitors: count,
      datagramsToVisitors: count,
      bytesFromVisitors: count,
      bytesToVisitors: count,
      drops: ref("UdpDrops"),
    },
  },
  UdpDrops: {
    type: "object",
    description: "Datagrams dropped, by reason: queue_full (the flow's stream could not keep " +
      "up), too_large, flow_limit, send_failed, refused (the visitor policy or limits), " +
      "rate_limited (over the bandwidth).",
    required: ["queue_full", "too_large", "flow_limit", "send_failed", "refused", "rate_limited"],
    properties: {
      queue_full: count,
      too_large: count,
      flow_limit: count,
      send_failed: count,
      refused: count,
      rate_limited: count,
    },
  },
  Service: {
    type: "object",
    required: [
      "name",
      "client",
      "session",
      "node",
      "owner",
      "healthy",
      "connections",
      "active",
      "bytesToOfferer",
      "bytesFromOfferer",
    ],
    properties: {
      name: { type: "string" },
      client: { type: "string" },
      session: { type: "string" },
      node: { type: "string", description: "The node holding the offering session." },
      owner: {
        type: "string",
        description: "Who owns the name: client:NAME, or group:NAME for a group's offers.",
      },
      healthy: {
        type: "boolean",
        description: "False while the offering client reports its local service unhealthy.",
      },
      connections: count,
      active: count,
      bytesToOfferer: count,
      bytesFromOfferer: count,
    },
  },
  Certificate: {
    type: "object",
    required: ["names", "notBefore", "notAfter", "source"],
    properties: {
      names: { type: "array", items: { type: "string" }, description: "Its DNS names." },
      notBefore: { type: "string", format: "date-time" },
      notAfter: { type: "string", format: "date-time", description: "When it expires." },
      source: { type: "string", enum: ["file", "acme"] },
    },
  },
  TunnelList: {
    type: "object",
    required: ["tunnels", "services"],
    properties: {
      tunnels: { type: "array", items: ref("Tunnel") },
      services: { type: "array", items: ref("Service") },
    },
  },
  DrainRequest: {
    type: "object",
    description: "Optional; an empty body drains with the configured grace period.",
    additionalProperties: false,
    properties: { graceMs: { type: "integer", minimum: 0, maximum: 3_600_000 } },
  },
  Draining: {
    type: "object",
    required: ["state", "graceMs"],
    properties: { state: ref("DaemonState"), graceMs: count },
  },
  // The minted client tokens of api/tokens.ts. Scopes are kept as given (config-client
  // shapes, re-validated on every reload), so they are only objects here.
  Scopes: {
    type: "object",
    description: "As a config client's `expose`, `forward`, `services` and `limits`.",
    properties: {
      expose: { type: "object" },
      forward: { type: "array" },
      services: { type: "object" },
      limits: { type: "object" },
    },
  },
  Token: {
    type: "object",
    description: "A minted token as listed: never the token or its hash.",
    required: ["id", "name", "scopes", "createdAt", "expiresAt", "active", "problem", "sessions"],
    properties: {
      id: { type: "string", pattern: PARAM_PATTERNS.token },
      name: { type: "string", description: "The client name it authenticates as." },
      scopes: ref("Scopes"),
      createdAt: { type: "string", format: "date-time" },
      expiresAt: { type: ["string", "null"], format: "date-time" },
      active: { type: "boolean", description: "Whether it authenticates now." },
      problem: { type: ["string", "null"], description: "Why it does not, when it does not." },
      sessions: {
        type: "array",
        description: "Its ready sessions.",
        items: { type: "string", pattern: PARAM_PATTERNS.session },
      },
    },
  },
  TokenList: {
    type: "object",
    required: ["tokens"],
    properties: { tokens: { type: "array", items: ref("Token") } },
  },
  TokenRequest: {
    type: "object",
    description: "Unknown fields are refused; give at most one of expiresIn and expiresAt.",
    additionalProperties: false,
    required: ["name"],
    properties: {
      name: { type: "string", description: "The client name; not one the config uses." },
      expose: { type: "object" },
      forward: { type: "array" },
      services: { type: "object" },
      limits: { type: "object" },
      expiresIn: { type: "integer", minimum: 1, maximum: 315_360_000 },
      expiresAt: { type: "string", format: "date-time" },
    },
  },
  TokenCreated: {
    type: "object",
    description: "A Token plus the secret, shown once, here; only its hash is kept.",
    required: [
      "id",
      "name",
      "scopes",
      "createdAt",
      "expiresAt",
      "active",
      "problem",
      "sessions",
      "token",
      "limits",
      "warnings",
    ],
    properties: {
      token: { type: "string" },
      limits: {
        type: "object",
        required: ["tunnels", "streams", "visitors"],
        properties: { tunnels: count, streams: count, visitors: count },
      },
      warnings: {
        type: "array",
        items: {
          type: "object",
          required: ["field", "message"],
          properties: { field: { type: "string" }, message: { type: "string" } },
        },
      },
    },
  },
  TokenRevoked: {
    type: "object",
    required: ["id", "name", "revoked", "sessionsClosed"],
    properties: {
      id: { type: "string", pattern: PARAM_PATTERNS.token },
      name: { type: "string" },
      revoked: { type: "boolean", enum: [true] },
      sessionsClosed: { type: "array", items: { type: "string", pattern: PARAM_PATTERNS.session } },
    },
  },
  FieldError: {
    type: "object",
    description: "A 400 of the token endpoints: the Error shape plus the fields at fault.",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["code", "message"],
        properties: {
          code: { type: "string", enum: ["bad_request"] },
          message: { type: "string" },
          field: { type: "string" },
          issues: {
            type: "array",
            items: {
              type: "object",
              required: ["field", "message"],
              properties: { field: { type: "string" }, message: { type: "string" } },
            },
          },
        },
      },
    },
  },
};

// SessionDetail and TokenCreated repeat their base's properties rather than using allOf: the
// test's checker (and some client generators) do not merge allOf.
(schemas.SessionDetail.properties as Json) = {
  ...(schemas.SessionSummary.properties as Json),
  ...(schemas.SessionDetail.properties as Json),
};
(schemas.TokenCreated.properties as Json) = {
  ...(schemas.Token.properties as Json),
  ...(schemas.TokenCreated.properties as Json),
};

const errorContent = { "application/json": { schema: ref("Error") } };

const responses: Record<string, Json> = {
  BadRequest: { description: "A malformed parameter or body.", content: errorContent },
  Unauthorized: {
    description: "The admin bearer token is missing or wrong.",
    headers: { "WWW-Authenticate": { schema: { type: "string" } } },
    content: errorContent,
  },
  NotFound: { description: "Nothing has this id.", content: errorContent },
  Conflict: { description: "Not possible in the current state.", content: errorContent },
  PayloadTooLarge: { description: "The body is over 8 KiB.", content: errorContent },
  Misdirected: {
    description: "The Host header is not one this listener answers to (DNS rebinding guard).",
    content: errorContent,
  },
  NotReady: {
    description: "The daemon is not running (starting or draining).",
    content: errorContent,
  },
  Internal: {
    description: "An unexpected failure; details are only logged.",
    content: errorContent,
  },
};

/** The OpenAPI 3.1 document of the admin API. */
export const OPENAPI_DOCUMENT: Json = {
  openapi: "3.1.0",
  info: {
    title: "tunnelmux admin API",
    version: VERSION,
    license: { name: "MIT", identifier: "MIT" },
    description: "Inspect and control a tunnelmux daemon. Errors are always " +
      "`{ error: { code, message } }`. A method a path does not serve answers 405 with `Allow`.",
  },
  servers: [{
    url: "http://127.0.0.1:7081",
    description: "The default admin listener (loopback; --listen-admin moves it).",
  }],
  security: [{ bearer: [] }],
  tags: [
    { name: "system", description: "Probes, facts, drain, metrics and this document." },
    { name: "sessions", description: "Client sessions and their streams: list, kick, reset." },
    { name: "tunnels", description: "Reverse tunnels, their routes, named services, the cluster." },
    { name: "tokens", description: "Minted client tokens: mint (shown once), list, revoke." },
    { name: "dashboard", description: "The operator's web page and its files." },
  ],
  paths: {
    "/healthz": {
      get: publicOp("Liveness: the process answers", { "200": json("Alive", ref("Health")) }, {
        tags: ["system"],
      }),
    },
    "/readyz": {
      get: publicOp("Readiness: the daemon takes new sessions", {
        "200": json("Running", ref("Health")),
        "503": response("NotReady"),
      }, { tags: ["system"] }),
    },
    "/v1/info": {
      get: op("Version, runtime, listeners, limits and counts", {
        "200": json("The daemon", ref("Info")),
      }, { tags: ["system"] }),
    },
    "/v1/drain": {
      post: op("Stop taking sessions and close the existing ones within a grace period", {
        "202": json("Draining started", ref("Draining")),
        "400": response("BadRequest"),
        "409": response("Conflict"),
        "413": response("PayloadTooLarge"),
      }, {
        tags: ["system"],
        requestBody: {
          required: false,
          content: { "application/json": { schema: ref("DrainRequest") } },
        },
      }),
    },
    "/v1/sessions": {
      get: op("List sessions in creation order, paged", {
        "200": json("A page of sessions", ref("SessionPage")),
        "400": response("BadRequest"),
      }, {
        tags: ["sessions"],
        parameters: [
          {
            name: "limit",
            in: "query",
            required: false,
            schema: { type: "integer", minimum: 1, maximum: 1000, default: 100 },
          },
          {
            name: "cursor",
            in: "query",
            required: false,
            description: "The last session id of the previous page.",
            schema: { type: "string", pattern: PARAM_PATTERNS.session },
          },
          {
            name: "scope",
            in: "query",
            required: false,
            description: "`cluster`: every node's, each item with its `node`, and `missing` " +
              "naming nodes that did not answer within 2 s.",
            schema: { type: "string", enum: ["node", "cluster"], default: "node" },
          },
        ],
      }),
    },
    "/v1/sessions/{id}": {
      parameters: [sessionIdParam],
      get: op("One session with its streams", {
        "200": json("The session", ref("SessionDetail")),
        ...byId,
      }, { tags: ["sessions"] }),
      delete: op("Kick a session (GoAway, then close); a reconnecting client comes back", {
        "202": json("Closing", ref("Kicked")),
        ...byId,
        "504": {
          description: "In a cluster: the node named by `node` did not answer.",
          content: errorContent,
        },
      }, {
        tags: ["sessions"],
        parameters: [{
          name: "node",
          in: "query",
          required: false,
          description: "In a cluster: the node holding the session (default: this one).",
          schema: { type: "string" },
        }],
      }),
    },
    "/v1/sessions/{id}/streams/{sid}": {
      parameters: [
        sessionIdParam,
        pathParam("sid", PARAM_PATTERNS.stream, "A stream id, 1 to 2^32-1."),
      ],
      delete: op("Reset one stream", {
        "204": { description: "Reset" },
        ...byId,
        "409": {
          description: "The stream is the session's control stream: kick the session instead.",
          content: errorContent,
        },
      }, { tags: ["sessions"] }),
    },
    "/v1/tunnels": {
      get: op("List reverse tunnels and named services", {
        "200": json("Tunnels and services", ref("TunnelList")),
        "400": response("BadRequest"),
      }, {
        tags: ["tunnels"],
        parameters: [
          {
            name: "scope",
            in: "query",
            required: false,
            description: "`cluster`: every node's, each item with its `node`, and `missing` " +
              "naming nodes that did not answer within 2 s.",
            schema: { type: "string", enum: ["node", "cluster"], default: "node" },
          },
        ],
      }),
    },
    "/v1/certificates": {
      get: op("The certificates the HTTPS port terminates with (files and ACME), with expiry", {
        "200": json("Certificates", {
          type: "object",
          required: ["certificates"],
          properties: { certificates: { type: "array", items: ref("Certificate") } },
        }),
      }, { tags: ["tunnels"] }),
    },
    "/v1/cluster": {
      get: op("The cluster: nodes with health and version, NATS, relay sessions, ports", {
        "200": json("The cluster as this node sees it; `cluster` is null for a single node", {
          type: "object",
          required: ["cluster"],
          properties: {
            cluster: {
              type: ["object", "null"],
              description: "`nodes` (every live node, with its `health` answer or null), " +
                "`missing` (nodes that did not answer within 2 s), `degraded` (`--ha` clients " +
                "on fewer nodes than they asked for), `peers` (relay sessions), `counts` " +
                "(`nodes`, `ports`, `routes`, `relays`: all of them), and one page of `ports` " +
                "(every route, by port, node and tunnel) with this node's `relays` in the " +
                "same range, and `nextCursor` (null on the last page).",
              properties: {
                counts: {
                  type: "object",
                  required: ["nodes", "ports", "routes", "relays"],
                  properties: {
                    nodes: { type: "integer" },
                    ports: { type: "integer" },
                    routes: { type: "integer" },
                    relays: { type: "integer" },
                  },
                },
                ports: { type: "array", items: { type: "object" } },
                relays: { type: "array", items: { type: "object" } },
                nextCursor: { type: ["string", "null"] },
              },
            },
          },
        }),
        "400": response("BadRequest"),
      }, {
        tags: ["cluster"],
        parameters: [
          {
            name: "limit",
            in: "query",
            required: false,
            description: "Routes per page (ports and relays can number 100,000).",
            schema: { type: "integer", minimum: 1, maximum: 1000, default: 100 },
          },
          {
            name: "cursor",
            in: "query",
            required: false,
            description: "The previous page's `nextCursor` (`PORT/NODE/TUNNEL`, its last route).",
            schema: {
              type: "string",
              pattern: "^\\d{1,5}/[A-Za-z0-9._-]{1,128}/[A-Za-z0-9._-]{1,128}$",
            },
          },
        ],
      }),
    },
    "/v1/tunnels/{id}": {
      parameters: [pathParam("id", PARAM_PATTERNS.tunnel, "A tunnel id, e.g. `t-1a2b`.")],
      get: op(
        "One tunnel of this node with every route of its port (node, client, session, health)",
        {
          "200": json("The tunnel", ref("Tunnel")),
          ...byId,
        },
        { tags: ["tunnels"] },
      ),
      delete: op("Close a reverse tunnel (its client is told)", {
        "204": { description: "Closed" },
        ...byId,
      }, { tags: ["tunnels"] }),
    },
    "/v1/tokens": {
      get: op("List minted client tokens (never the secrets)", {
        "200": json("Tokens", ref("TokenList")),
      }, { tags: ["tokens"] }),
      post: op("Mint a scoped, expiring client token; the secret is in this response only", {
        "201": json("Minted", ref("TokenCreated")),
        "400": json("A malformed body, or scopes that do not validate", ref("FieldError")),
        "409": response("Conflict"),
        "413": response("PayloadTooLarge"),
      }, {
        tags: ["tokens"],
        requestBody: {
          required: true,
          content: { "application/json": { schema: ref("TokenRequest") } },
        },
      }),
    },
    "/v1/tokens/{id}": {
      parameters: [
        pathParam("id", PARAM_PATTERNS.token, "A token id, e.g. `tok_0123456789abcdef`."),
      ],
      get: op("One minted token", { "200": json("The token", ref("Token")), ...byId }, {
        tags: ["tokens"],
      }),
      delete: op("Revoke a token: it stops authenticating and its sessions are closed", {
        "200": json("Revoked", ref("TokenRevoked")),
        ...byId,
      }, { tags: ["tokens"] }),
    },
    "/v1/events": {
      get: op("The event feed as Server-Sent Events, resumable", {
        "200": {
          description: "`id:` is the event's sequence number, `event:` its type, `data:` JSON " +
            "with `type`, `time` and the event's fields. `event: reset` says events were lost.",
          content: { "text/event-stream": { schema: { type: "string" } } },
        },
        "400": response("BadRequest"),
      }, {
        tags: ["system"],
        parameters: [
          {
            name: "Last-Event-ID",
            in: "header",
            required: false,
            description: "Resume after this event (what EventSource sends on reconnect).",
            schema: { type: "string", pattern: "^\\d{1,15}$" },
          },
          {
            name: "lastEventId",
            in: "query",
            required: false,
            description: "As the header, for clients that cannot set it; 0 replays everything.",
            schema: { type: "string", pattern: "^\\d{1,15}$" },
          },
          {
            name: "scope",
            in: "query",
            required: false,
            description: "`cluster`: every node's events, each with its `node` (ids are this " +
              "node's sequence of cluster events).",
            schema: { type: "string", enum: ["node", "cluster"], default: "node" },
          },
        ],
      }),
    },
    "/metrics": {
      get: op("Prometheus metrics", {
        "200": {
          description: "Prometheus text exposition format 0.0.4",
          content: { "text/plain": { schema: { type: "string" } } },
        },
      }, { tags: ["system"] }),
    },
    "/v1/metrics/recent": {
      get: op("Throughput, sessions and streams of the last minutes, sampled every 2 s", {
        "200": json("The samples, oldest first", ref("RecentHistory")),
      }, { tags: ["system"] }),
    },
    "/v1/openapi.json": {
      get: op("This document", {
        "200": json("OpenAPI 3.1", {
          type: "object",
          required: ["openapi", "paths"],
          properties: { openapi: { type: "string" }, paths: { type: "object" } },
        }),
      }, { tags: ["system"] }),
    },
    "/": {
      get: publicOp("The dashboard page; it asks for the admin token and keeps it per tab", {
        "200": { description: "HTML", content: { "text/html": { schema: { type: "string" } } } },
      }, { tags: ["dashboard"] }),
    },
    "/dashboard.js": { get: asset("The dashboard's script", "text/javascript") },
    "/dashboard.css": { get: asset("The dashboard's style sheet", "text/css") },
  },
  components: {
    securitySchemes: {
      bearer: {
        type: "http",
        scheme: "bearer",
        description: "The daemon's admin token (config `adminToken`).",
      },
    },
    schemas,
    responses,
  },
};

/** Each operation's `operationId` (client generators name their methods after it). */
const OPERATION_IDS: Record<string, string> = {
  "get /healthz": "getHealth",
  "get /readyz": "getReadiness",
  "get /v1/info": "getInfo",
  "post /v1/drain": "drain",
  "get /v1/sessions": "listSessions",
  "get /v1/sessions/{id}": "getSession",
  "delete /v1/sessions/{id}": "kickSession",
  "delete /v1/sessions/{id}/streams/{sid}": "resetStream",
  "get /v1/tunnels": "listTunnels",
  "get /v1/certificates": "listCertificates",
  "get /v1/cluster": "getCluster",
  "get /v1/tunnels/{id}": "getTunnel",
  "delete /v1/tunnels/{id}": "closeTunnel",
  "get /v1/tokens": "listTokens",
  "post /v1/tokens": "mintToken",
  "get /v1/tokens/{id}": "getToken",
  "delete /v1/tokens/{id}": "revokeToken",
  "get /v1/events": "streamEvents",
  "get /metrics": "getMetrics",
  "get /v1/metrics/recent": "getRecentHistory",
  "get /v1/openapi.json": "getOpenApi",
  "get /": "getDashboard",
  "get /dashboard.js": "getDashboardScript",
  "get /dashboard.css": "getDashboardStyles",
};

for (const [path, item] of Object.entries(OPENAPI_DOCUMENT.paths as Record<string, Json>)) {
  for (const [method, operation] of Object.entries(item)) {
    if (typeof operation !== "object" || operation === null || Array.isArray(operation)) continue;
    const id = OPERATION_IDS[`${method} ${path}`];
    if (id === undefined) throw new Error(`no operationId for ${method} ${path}`);
    (operation as Json).operationId = id;
  }
}

/** The document, serialized once: it does not change while the daemon runs. */
const BODY = JSON.stringify(OPENAPI_DOCUMENT);

/** `GET /v1/openapi.json`, as a sub-app for the admin API to mount behind its guards. */
export function openapiApi(): Hono {
  const app = new Hono();
  app.get(
    "/v1/openapi.json",
    (c) => c.body(BODY, 200, { "content-type": "application/json; charset=utf-8" }),
  );
  return app;
}
