/**
 * The daemon's two shared ports for HTTP(S) tunnels, wired together: the HTTP port, whose every
 * request goes through the HTTP front to the client holding its `Host`, and the HTTPS port,
 * whose connections are routed by their TLS server name (terminated with a certificate from the
 * store or from ACME, or passed through to a TLS tunnel). Both count against one limit of
 * visitor connections. The HTTPS port's modules (node:tls, ACME) load only when it is bound, or,
 * for ACME, when a cluster node's HTTP port answers other nodes' challenges.
 *
 * @module
 */

import { readHostTextFile } from "../../util/host/host.ts";
import { AddressRules } from "../../tunnel/policy/visitor_policy.ts";
import type { TransportListener } from "../../protocol/transport.ts";
import { listenTcp } from "../../transport/tcp.ts";
import type { HostPort } from "../../util/net/address.ts";
import type { Logger } from "../../util/log.ts";
import { currentRuntime } from "../../util/host/runtime.ts";
import type { Config } from "../config/mod.ts";
import type { DaemonEvent, DaemonEventType } from "../events.ts";
import type { HostRoute } from "../registry/registry.ts";
import type { AcmeCertificates } from "../tls/acme.ts";
import type { AcmeStorage } from "../tls/acme_storage.ts";
import type { CertificateStore } from "../tls/certificates.ts";
import type { HttpFrontOptions } from "./http_front.ts";
import { loadSessionKey, setSessionKeySource } from "./session_key.ts";
import { hostEnv } from "../../util/host/host.ts";
import type { HttpStats } from "./http_stats.ts";

/** What the web fronts need from their daemon. */
export interface WebFrontsOptions {
  /** The configuration in force (read per connection: a reload changes limits at once). */
  config: () => Config;
  /**
   * The route to the client holding `host`, if any (this node's tunnel, or a relay); given a
   * request's `path`, the one of the longest path prefix it lies under.
   */
  route: (host: string, path?: string) => HostRoute | undefined;
  /** The certificates the HTTPS port terminates with. */
  certificates: CertificateStore;
  /** Per-host counters of the HTTP front. */
  httpStats: HttpStats;
  /** Counts an event for metrics. */
  count: (event: string) => void;
  /** Publishes a daemon event (ACME's). */
  publish: (type: DaemonEventType, fields: DaemonEvent["fields"]) => void;
  /**
   * Where ACME keeps its state when not in the data directory (a cluster's buckets, shared by
   * every node); undefined: the data directory.
   */
  acmeStorage?: () => Promise<AcmeStorage> | undefined;
  /** Logger. */
  log: Logger;
}

/** The HTTP and HTTPS ports of one daemon. */
export class WebFronts {
  readonly #options: WebFrontsOptions;
  /** Visitor connections open on both ports (`limits.httpConnections`). */
  #connections = 0;
  /** Certificates from ACME, when `http.acme` is set and the HTTPS port is on (or in a cluster). */
  #acme: AcmeCertificates | undefined;
  #trusted: { list: readonly string[]; rules: AddressRules | undefined } | undefined;

  /** Fronts for a daemon; nothing listens until {@linkcode listenHttp} or {@linkcode listenHttps}. */
  constructor(options: WebFrontsOptions) {
    this.#options = options;
    // OIDC logins' session cookies: the key is read (or made) at the first login.
    setSessionKeySource(() =>
      loadSessionKey(options.config().dataDir, hostEnv().TUNNELMUX_HTTP_SESSION_KEY)
    );
  }

  /** Whether the HTTPS port can terminate TLS for `host` (a certificate, or ACME to get one). */
  terminates(host: string): boolean {
    return this.#acme !== undefined || this.#options.certificates.find(host) !== undefined;
  }

  /** Asks ACME for a certificate for `host`, when ACME is on. */
  wantCertificate(host: string): void {
    this.#acme?.want(host);
  }

  /** Binds the HTTP port. Rejects if it cannot be bound. */
  async listenHttp(address: HostPort): Promise<TransportListener> {
    // The HTTP front loads with the first HTTP port: a daemon without one starts without it.
    const { serveHttpConnection } = await import("./http_front.ts");
    return listenTcp(address, (visitor) => {
      if (!this.#admit()) return visitor.close();
      serveHttpConnection(visitor, {
        ...this.#httpOptions("http"),
        onClose: () => this.#connections--,
      });
    });
  }

  /**
   * Loads `http.certificates`, and ACME's when `http.acme` is set: what the HTTPS port needs
   * before it is bound (and a cluster node's HTTP port, to answer challenges). Rejects, naming the
   * certificate by its place in the config, when one cannot be served.
   */
  async loadCertificates(): Promise<void> {
    const config = this.#options.config();
    const { certificates, log } = this.#options;
    for (const [i, files] of config.http.certificates.entries()) {
      const where = `http.certificates[${i}] (${files.cert})`;
      try {
        const served = certificates.add({
          cert: await readHostTextFile(files.cert),
          key: await readHostTextFile(files.key),
        }, "file");
        log.info("certificate loaded", {
          names: served.names.join(","),
          expires: new Date(served.notAfter).toISOString(),
        });
        if (served.notAfter <= Date.now()) {
          log.warn("certificate expired: its names get no TLS", { file: files.cert });
        }
      } catch (error) {
        throw new Error(`${where}: ${(error as Error).message}`);
      }
    }
    const acme = config.http.acme;
    if (acme?.challenge === "tls-alpn-01" && currentRuntime() === "deno") {
      throw new Error(
        "http.acme.challenge: tls-alpn-01 is not available on Deno, whose TLS (rustls) will not " +
          "serve a certificate with the critical acmeIdentifier extension the challenge needs; " +
          "use http-01 (on listen.http), or run the daemon on Bun",
      );
    }
    if (acme) {
      const { AcmeCertificates } = await import("../tls/acme.ts");
      this.#acme = new AcmeCertificates({
        config: acme,
        dataDir: config.dataDir,
        storage: await this.#options.acmeStorage?.(),
        store: certificates,
        log,
        publish: this.#options.publish,
      });
      await this.#acme.load();
    }
  }

  /** Binds the HTTPS port (after {@linkcode loadCertificates}). Rejects if it cannot be bound. */
  async listenHttps(address: HostPort): Promise<TransportListener> {
    const { certificates } = this.#options;
    const [{ listenTlsFront }, { serveHttpsConnection }, { isTrustedFront, proxyPreamble }] =
      await Promise.all([
        import("../../transport/tls/front.ts"),
        import("./https_front.ts"),
        import("../tunnels/proxy_front.ts"),
      ]);
    const timeoutMs = this.#options.config().limits.handshakeTimeoutMs;
    return await listenTlsFront(address, (connection) =>
      serveHttpsConnection(connection, {
        route: this.#options.route,
        certificate: (host) => certificates.find(host)?.identity,
        acmeIdentity: (host) => this.#acme?.alpnIdentity(host),
        http: this.#httpOptions("https"),
        onRefused: (reason) => this.#options.count(`https_${reason}`),
      }), {
      helloTimeoutMs: timeoutMs,
      // A trusted front (a TCP load balancer) names the visitor in a PROXY header before the
      // ClientHello, so passed-through and terminated connections alike judge the visitor.
      preamble: (remote) =>
        isTrustedFront(remote, this.#trustedProxies()) ? proxyPreamble : undefined,
      admit: () => this.#admit(),
      onClosed: () => this.#connections--,
      handshakeTimeoutMs: timeoutMs,
      onDropped: (reason) => {
        // A connection over the limit is counted by #admit.
        if (reason !== "limit") this.#options.count(`https_hello_${reason}`);
      },
    });
  }

  /** Stops ACME's renewals. The listeners are the daemon's to close. */
  stop(): void {
    this.#acme?.stop();
  }

  /** Takes one more visitor connection of either port, unless the limit is reached (counted). */
  #admit(): boolean {
    if (this.#connections >= this.#options.config().limits.httpConnections) {
      this.#options.count("http_connection_limit");
      return false;
    }
    this.#connections++;
    return true;
  }

  /** `trustedProxies` of the configuration in force, compiled once per configuration. */
  #trustedProxies(): AddressRules | undefined {
    const list = this.#options.config().trustedProxies;
    if (this.#trusted?.list !== list) {
      this.#trusted = {
        list,
        rules: list.length > 0 ? new AddressRules({ allow: list }) : undefined,
      };
    }
    return this.#trusted.rules;
  }

  /** How the HTTP front serves a connection of the HTTP port, or a terminated one of HTTPS. */
  #httpOptions(proto: "http" | "https"): HttpFrontOptions {
    const config = this.#options.config();
    const route = (host: string, path?: string) => {
      const found = this.#options.route(host, path);
      // A TLS tunnel's name takes TLS connections only, never requests.
      return found && !found.passthrough ? found : undefined;
    };
    return {
      route,
      proto,
      trustForwarded: config.http.trustForwarded,
      trustedProxies: () => this.#trustedProxies(),
      headerTimeoutMs: config.limits.handshakeTimeoutMs,
      // Asked at each request: a reload applies to connections already open.
      responseTimeoutMs: () => this.#options.config().limits.httpResponseTimeoutMs,
      onExchange: (exchange) =>
        this.#options.httpStats.record(
          exchange,
          exchange.routed ?? route(exchange.host) !== undefined,
        ),
      acmeAnswer: this.#acme && ((token) => this.#acme?.httpAnswer(token)),
      // Refusals by a tunnel's policy.http, by reason (basic_wrong, jwt_invalid, …): brute force
      // shows in the daemon's events.
      onRefused: (_host, reason) => this.#options.count(`http_policy_${reason}`),
    };
  }
}
