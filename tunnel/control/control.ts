/**
 * Messages of the control channel (the first stream a client opens, kind `control`). A client says
 * hello with its token, then asks for tunnels and services; the daemon answers each request by its
 * `id` and sends notices. Documented in docs/protocol.md.
 *
 * Everything a client sends is checked by {@linkcode parseClientMessage} before the daemon acts
 * on it: unknown types, unknown or ill-typed fields are errors, never ignored.
 *
 * @module
 */

import { parseVisitorPolicy, type VisitorPolicy } from "../policy/visitor_policy.ts";

/** The control protocol version this code speaks. */
export const CONTROL_VERSION = 1;

/** Client → daemon. */
export type ClientMessage =
  /** First message: who the client is. `token` may be omitted when the WebSocket upgrade carried it. */
  | {
    type: "hello";
    version: number;
    token?: string;
    name?: string;
    agent?: string;
    /** Sessions the client keeps to distinct nodes (its `--ha`), so operators see it degraded. */
    ha?: number;
  }
  /**
   * Open a reverse tunnel: the daemon listens on `bindHost:port` (0 = any allowed port). With
   * `group` (and its `groupKey`) the tunnel is the group's: every member's session is a route
   * and visitors are balanced across them. With `shared`, further sessions of the same client
   * may serve the same port (high availability) instead of being refused.
   */
  | {
    type: "expose";
    id: number;
    port: number;
    bindHost?: string;
    label?: string;
    group?: string;
    groupKey?: string;
    shared?: boolean;
    /**
     * An HTTP tunnel instead of a port (then `port` is 0): the host name to hold on the daemon's
     * HTTP port, a label under its base domain or a full name; its requests are routed by `Host`.
     */
    http?: string;
    /**
     * With `http`: a TLS tunnel. The name's connections on the daemon's HTTPS port are passed to
     * the client as they come (routed by their TLS server name, never decrypted), for a local
     * service that speaks TLS itself.
     */
    passthrough?: boolean;
    /**
     * `udp`: a UDP port (its visitors' datagrams reach the client as flows, `udpVisitor` streams);
     * default `tcp`. Not with `http`.
     */
    protocol?: "tcp" | "udp";
    /**
     * Who may visit and how much (`docs/policy.md`): the daemon narrows it by the operator's rules
     * for the client and enforces the result.
     */
    policy?: VisitorPolicy;
  }
  /**
   * Replace the visitor policy of one of the session's tunnels (a reloaded client config), without
   * closing it: visitors connected stay, the next ones meet the new rules.
   */
  | { type: "policy"; id: number; tunnel: string; policy: VisitorPolicy }
  /** Close a reverse tunnel. */
  | { type: "unexpose"; id: number; tunnel: string }
  /**
   * The client's health check of a tunnel's (or an offered service's) local service changed:
   * while `healthy` is false that route takes no visitors (another route does, if any). Names
   * exactly one of `tunnel` and `service`.
   */
  | {
    type: "health";
    id: number;
    tunnel?: string;
    service?: string;
    healthy: boolean;
    detail?: string;
  }
  /**
   * Offer a named service that other clients may connect to. With `group` (and its `groupKey`)
   * the name is the group's: every member's offer serves it. Further sessions of the same
   * client (high availability) serve it together with the first.
   */
  | { type: "offer"; id: number; service: string; group?: string; groupKey?: string }
  /** Stop offering a named service. */
  | { type: "withdraw"; id: number; service: string };

/** Daemon → client. */
export type DaemonMessage =
  /** The hello was accepted. */
  | {
    type: "welcome";
    version: number;
    session: string;
    client: string;
    server: string;
    /** The daemon's node name in a cluster (`local` for a single node). */
    node?: string;
  }
  /** A reverse tunnel is listening. */
  | {
    type: "exposed";
    id: number;
    tunnel: string;
    bindHost: string;
    port: number;
    /** An HTTP or TLS tunnel's address for visitors (`https://NAME/` when the daemon has TLS for it). */
    url?: string;
  }
  /** A request without other results succeeded. */
  | { type: "ok"; id: number }
  /** A request (or, without `id`, the session) failed. `code` is stable, `message` for people. */
  | { type: "error"; id?: number; code: ControlErrorCode; message: string }
  /** A tunnel closed without the client asking (e.g. removed by an operator). */
  | { type: "tunnel_closed"; tunnel: string; reason: string };

/** Stable error codes in `error` messages. */
export type ControlErrorCode =
  | "bad_request"
  | "unauthorized"
  | "version_mismatch"
  | "not_allowed"
  | "limit_reached"
  | "port_in_use"
  | "not_found"
  | "conflict"
  | "shutting_down"
  | "unavailable"
  | "internal";

/** A control message was malformed. */
export class ControlMessageError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "ControlMessageError";
  }
}

type FieldType = "string" | "id" | "port" | "version" | "boolean" | "policy" | "protocol";

const CLIENT_FIELDS: Record<ClientMessage["type"], Record<string, [FieldType, boolean]>> = {
  hello: {
    version: ["version", true],
    token: ["string", false],
    name: ["string", false],
    agent: ["string", false],
    ha: ["version", false],
  },
  expose: {
    id: ["id", true],
    port: ["port", true],
    bindHost: ["string", false],
    label: ["string", false],
    group: ["string", false],
    groupKey: ["string", false],
    shared: ["boolean", false],
    http: ["string", false],
    passthrough: ["boolean", false],
    protocol: ["protocol", false],
    policy: ["policy", false],
  },
  policy: { id: ["id", true], tunnel: ["string", true], policy: ["policy", true] },
  unexpose: { id: ["id", true], tunnel: ["string", true] },
  health: {
    id: ["id", true],
    tunnel: ["string", false],
    service: ["string", false],
    healthy: ["boolean", true],
    detail: ["string", false],
  },
  offer: {
    id: ["id", true],
    service: ["string", true],
    group: ["string", false],
    groupKey: ["string", false],
  },
  withdraw: { id: ["id", true], service: ["string", true] },
};

const MAX_STRING = 256;

/**
 * Checks an untrusted decoded JSON value and returns it as a {@linkcode ClientMessage}, or throws
 * a {@linkcode ControlMessageError} naming the first problem.
 */
export function parseClientMessage(value: unknown): ClientMessage {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ControlMessageError("a control message must be a JSON object");
  }
  const { type, ...fields } = value as Record<string, unknown>;
  if (typeof type !== "string" || !Object.hasOwn(CLIENT_FIELDS, type)) {
    throw new ControlMessageError(`unknown control message type ${JSON.stringify(type)}`);
  }
  const spec = CLIENT_FIELDS[type as ClientMessage["type"]];
  for (const [name, fieldValue] of Object.entries(fields)) {
    const field = spec[name];
    if (field === undefined) throw new ControlMessageError(`unexpected field "${name}" in ${type}`);
    if (field[0] === "policy") {
      // Kept in canonical form, so the daemon narrows and stores one spelling of each rule.
      const parsed = parseVisitorPolicy(fieldValue, name);
      if (!parsed.ok) throw new ControlMessageError(`bad ${type}: ${parsed.error}`);
      (value as Record<string, unknown>)[name] = parsed.policy;
      continue;
    }
    if (!valid(field[0], fieldValue)) {
      throw new ControlMessageError(`bad value for "${name}" in ${type}`);
    }
  }
  for (const [name, [, required]] of Object.entries(spec)) {
    if (required && !(name in fields)) throw new ControlMessageError(`${type} needs "${name}"`);
  }
  if (type === "health" && ("tunnel" in fields) === ("service" in fields)) {
    throw new ControlMessageError(`health needs "tunnel" or "service", not both`);
  }
  return value as ClientMessage;
}

function valid(type: FieldType, value: unknown): boolean {
  switch (type) {
    case "string":
      return typeof value === "string" && value.length > 0 && value.length <= MAX_STRING;
    case "id":
      return Number.isSafeInteger(value) && (value as number) >= 0;
    case "port":
      return Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 65535;
    case "version":
      return Number.isInteger(value) && (value as number) >= 1;
    case "boolean":
      return typeof value === "boolean";
    case "protocol":
      return value === "tcp" || value === "udp";
    case "policy":
      return false; // checked by parseVisitorPolicy
  }
}
