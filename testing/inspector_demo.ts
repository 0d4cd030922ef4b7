/**
 * A request inspector with something to show, for the browser test and the screenshot tool: a
 * daemon in this process with an HTTP port, a client holding an HTTP tunnel `shop` with the
 * inspector on, a small local shop app on 127.0.0.1, and {@linkcode InspectorDemo.visit} to send
 * visitors through the daemon. Everything listens on 127.0.0.1 only.
 *
 * @module
 */

import { createServer, request } from "node:http";
import { gzipSync } from "node:zlib";
import { type Client, connect } from "../client/mod.ts";
import { type InspectorServer, startInspector } from "../client/inspector/start.ts";
import { validateConfig } from "../daemon/config/mod.ts";
import { Daemon } from "../daemon/daemon.ts";
import { Logger } from "../util/log.ts";

/** The demo's domain: the tunnel is `shop.` this. */
export const DEMO_DOMAIN = "tunnels.test";

const DEMO_TOKEN = "inspector-demo-0123456789abcdef";

/** A running demo. */
export interface InspectorDemo {
  readonly inspector: InspectorServer;
  /** What the local app was asked, `METHOD PATH BODY`, in order. */
  readonly seen: string[];
  /** Sends one visitor's request to `shop.tunnels.test` through the daemon. */
  visit(
    method: string,
    path: string,
    body?: string,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: string }>;
  /** Stops it all. */
  close(): Promise<void>;
}

/** Starts the demo; `token` protects the inspector's API. */
export async function startInspectorDemo(options: { token?: string } = {}): Promise<InspectorDemo> {
  const seen: string[] = [];
  const app = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => {
      seen.push(`${req.method} ${req.url} ${body}`);
      const json = (status: number, value: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(value));
      };
      if (req.method === "POST" && req.url?.startsWith("/api/orders")) {
        let order: unknown = body;
        try {
          order = JSON.parse(body);
        } catch {
          // kept as text
        }
        json(201, { id: 42, status: "created", order, path: req.url });
      } else if (req.url === "/api/orders/42") {
        res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
        res.end(gzipSync(JSON.stringify({ id: 42, items: [{ sku: "tea", qty: 2 }], total: 9.5 })));
      } else if (req.url === "/health") {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("ok");
      } else json(404, { error: "not found", path: req.url });
    });
  });
  await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
  const local = `127.0.0.1:${(app.address() as { port: number }).port}`;

  const { config, errors } = validateConfig({
    listen: { tcp: "127.0.0.1:0", websocket: null, admin: null, http: "127.0.0.1:0" },
    http: { domain: DEMO_DOMAIN },
    clients: [{ name: "demo", token: DEMO_TOKEN, expose: { hosts: ["*"] } }],
  });
  if (!config) throw new Error(`demo config: ${JSON.stringify(errors)}`);
  const daemon = new Daemon(config, {
    log: new Logger({ level: "error", format: "json", sink: () => {} }),
  });
  await daemon.start();
  const httpPort = Number(daemon.addresses.http!.split(":").pop());
  const inspector = await startInspector({ address: "127.0.0.1:0", token: options.token });
  let client: Client | undefined;
  try {
    client = await connect(`tcp://${daemon.addresses.tcp}`, {
      token: DEMO_TOKEN,
      reconnect: false,
      inspector,
    });
    await client.expose({ http: "shop", local });
  } catch (error) {
    await client?.close();
    await inspector.close();
    daemon.stop();
    app.close();
    throw error;
  }

  return {
    inspector,
    seen,
    visit(method, path, body = "", headers = {}) {
      return new Promise((resolve, reject) => {
        const req = request({
          host: "127.0.0.1",
          port: httpPort,
          method,
          path,
          headers: { host: `shop.${DEMO_DOMAIN}`, ...headers },
        }, (res) => {
          let text = "";
          res.setEncoding("latin1").on("data", (d: string) => (text += d));
          res.on("end", () => resolve({ status: res.statusCode!, body: text }));
        });
        req.on("error", reject).end(body);
      });
    },
    async close() {
      await client?.close();
      await inspector.close();
      daemon.stop();
      await new Promise((resolve) => app.close(resolve));
    },
  };
}
