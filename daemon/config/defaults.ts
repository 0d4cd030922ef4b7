/**
 * The configuration the daemon runs with when nothing else is given: usable and closed, with
 * loopback listeners and one `default` client that may expose ports 1024-65535 on 127.0.0.1 and
 * forward nothing.
 *
 * @module
 */

/**
 * The embedded defaults, as a raw document (a fresh copy each call). The `default` client has
 * no token here: `loadConfig` takes it from `TUNNELMUX_TOKEN` or generates one.
 */
export function embeddedDefaults(): Record<string, unknown> {
  return {
    listen: {
      tcp: "127.0.0.1:7000",
      websocket: "127.0.0.1:7080",
      websocketPath: "/tunnel",
      admin: "127.0.0.1:7081",
      http: null,
      https: null,
    },
    tls: null,
    dataDir: "./data",
    shutdownGraceMs: 30000,
    limits: {
      sessions: 1000,
      streamsPerSession: 1024,
      tunnelsPerClient: 16,
      visitorsPerTunnel: 10000,
      visitorsPerClient: 10000,
      dialTimeoutMs: 10000,
      handshakeTimeoutMs: 10000,
      pendingHandshakes: 1024,
      pendingHandshakesPerSource: 256,
      httpConnections: 10000,
      httpResponseTimeoutMs: 60000,
      idleTimeoutMs: 0,
      maxWebSocketMessage: 1048576,
      keepAliveIntervalMs: 30000,
      keepAliveTimeoutMs: 30000,
      streamWindow: 6291456,
      udpFlowIdleMs: 60000,
      udpFlowsPerTunnel: 1024,
    },
    log: { level: "info", format: "auto" },
    adminToken: null,
    clients: [{
      name: "default",
      expose: { ports: ["1024-65535", 0], bindHosts: ["127.0.0.1"], hosts: ["*"] },
      forward: [],
    }],
    cluster: null,
    http: { domain: null, trustForwarded: false, certificates: [], acme: null },
    visitors: {},
    trustedProxies: [],
    identityProviders: [],
  };
}
