/**
 * The HTTPS front of HTTP and TLS tunnels (docs/design/http-tunnels.md): one visitor
 * connection on the shared HTTPS port, routed by the server name (SNI) of its ClientHello before
 * any byte reaches a client. A TLS tunnel's name gets the connection as it came (ClientHello
 * included) on a stream to its client, which splices it to its local TLS service; an HTTP
 * tunnel's name gets TLS terminated here with the certificate that serves it, and the decrypted
 * connection goes through the HTTP front as `https`, each request routed by its `Host`. A name no
 * tunnel holds, a hello without a name, or a name without a certificate gets a TLS alert
 * (`unrecognized_name`), with no client touched. An ACME TLS-ALPN-01 validation (RFC 8737: a
 * hello offering `acme-tls/1`) is answered here with the challenge's certificate, whoever holds
 * the name.
 *
 * @module
 */

import type { Transport } from "../../protocol/transport.ts";
import { type HelloConnection, TlsAlert, type TlsIdentity } from "../../transport/tls/front.ts";
import { type HttpFrontOptions, serveHttpConnection } from "./http_front.ts";

/** A tunnel as the HTTPS front sees it. */
export interface HttpsRoute {
  /** A TLS tunnel: its connections are passed through, not terminated. */
  readonly passthrough: boolean;
  /** Takes a passed-through connection (see `ReverseTunnel.visitor`). */
  visitor(visitor: Transport): void;
}

/** Why a connection was refused before reaching a client. */
export type HttpsRefusal = "no_name" | "unknown_host" | "no_certificate" | "handshake_failed";

/** What {@linkcode serveHttpsConnection} needs. */
export interface HttpsFrontOptions {
  /** The tunnel holding `host`, or undefined. */
  route(host: string): HttpsRoute | undefined;
  /** The certificate serving `host`, or undefined. */
  certificate(host: string): TlsIdentity | undefined;
  /** How terminated connections are served (their `proto` is `https`). */
  http: Omit<HttpFrontOptions, "proto">;
  /** The TLS-ALPN-01 challenge certificate for `host`, while ACME validates it; else undefined. */
  acmeIdentity?(host: string): TlsIdentity | undefined;
  /** Told about every connection refused (for counters). */
  onRefused?(reason: HttpsRefusal, host: string | undefined): void;
}

/** The protocols a terminated connection may choose: the HTTP front speaks HTTP/1.1. */
const ALPN = ["http/1.1"];
/** The protocol of TLS-ALPN-01 validations (RFC 8737 §6.2). */
const ACME_TLS = "acme-tls/1";

/** Routes one connection of the HTTPS port whose ClientHello is in. */
export function serveHttpsConnection(
  connection: HelloConnection,
  options: HttpsFrontOptions,
): void {
  const host = connection.hello.serverName;
  const refuse = (reason: HttpsRefusal) => {
    options.onRefused?.(reason, host);
    connection.refuse(TlsAlert.UnrecognizedName);
  };
  if (host === undefined) return refuse("no_name");
  if (connection.hello.alpn.includes(ACME_TLS)) {
    const challenge = options.acmeIdentity?.(host);
    if (!challenge) return refuse("unknown_host");
    // The handshake is the answer; nothing is sent after it (RFC 8737 §3).
    return void connection.terminate(challenge, [ACME_TLS]).then((t) => t.end(), () => {});
  }
  const route = options.route(host);
  if (!route) return refuse("unknown_host");
  if (route.passthrough) return route.visitor(connection.passthrough());
  const identity = options.certificate(host);
  if (!identity) return refuse("no_certificate");
  connection.terminate(identity, ALPN).then(
    (visitor) =>
      serveHttpConnection(visitor, {
        ...options.http,
        proto: "https",
        // Requests for names this certificate does not serve were meant for another connection.
        authority: (other) => options.certificate(other) === identity,
      }),
    () => options.onRefused?.("handshake_failed", host),
  );
}
