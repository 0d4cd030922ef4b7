/**
 * Test support: small plain-TCP and HTTP services on 127.0.0.1 to tunnel to (echo, a server that
 * stalls, one that keeps writing after the peer's end, an HTTP server with fixed routes), and a
 * port nothing listens on. Each is registered for {@linkcode cleanup}.
 *
 * @module
 */

import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { pattern } from "../util/bytes/bytes.ts";
import { register } from "./cleanup.ts";
import { DEFAULT_TIMEOUT_MS, withTimeout } from "./wait.ts";

export { cleanup } from "./cleanup.ts";

/** A TCP service started for a test. */
export interface TestServer {
  /** The bound port on 127.0.0.1. */
  readonly port: number;
  /** `127.0.0.1:PORT`. */
  readonly address: string;
  /** Connections accepted in all. */
  readonly connections: number;
  /** Connections open now. */
  readonly active: number;
  /** The accepted sockets still open. */
  readonly sockets: ReadonlySet<Socket>;
  /** Stops listening and destroys open connections. */
  close(): Promise<void>;
}

/** A stalling server: it accepts but never reads. */
export interface StallServer extends TestServer {
  /** Starts reading (and discarding) on every stalled socket. */
  release(): void;
}

async function startNetServer(
  onSocket: (socket: Socket) => void,
  options: { allowHalfOpen?: boolean } = {},
): Promise<TestServer & { server: Server }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer({ allowHalfOpen: options.allowHalfOpen ?? true }, (socket) => {
    connections++;
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
    onSocket(socket);
  });
  await listenServer(server);
  return serverView(server, sockets, () => connections);
}

function listenServer(server: Server | ReturnType<typeof createHttpServer>): Promise<void> {
  return withTimeout(
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    }),
    DEFAULT_TIMEOUT_MS,
    "listen on 127.0.0.1:0",
  );
}

function serverView<S extends Server | ReturnType<typeof createHttpServer>>(
  server: S,
  sockets: Set<Socket>,
  connections: () => number,
): TestServer & { server: S } {
  const port = (server.address() as { port: number }).port;
  let closed: Promise<void> | undefined;
  const close = () =>
    closed ??= withTimeout(
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
      DEFAULT_TIMEOUT_MS,
      "server close",
    ).catch(() => {});
  register(close);
  return {
    server,
    port,
    address: `127.0.0.1:${port}`,
    get connections() {
      return connections();
    },
    get active() {
      return sockets.size;
    },
    sockets,
    close,
  };
}

/**
 * A TCP server on 127.0.0.1:0 that hands each accepted socket (half-open allowed, errors
 * swallowed) to `onSocket`: the building block for services a test needs once.
 */
export function startTcpServer(onSocket: (socket: Socket) => void): Promise<TestServer> {
  return startNetServer(onSocket);
}

/** An echo server: echoes every byte, and half-closes its side when the peer does. */
export function startEchoServer(): Promise<TestServer> {
  return startNetServer((socket) => socket.pipe(socket));
}

/**
 * A server that reads the whole request until EOF (the peer's half-close) and only then answers
 * with `respond(request)` and closes. Without the peer's half-close it never answers.
 */
export function startAfterEofServer(
  respond: (request: Uint8Array) => Uint8Array = (request) =>
    new TextEncoder().encode(`got ${request.length} bytes`),
): Promise<TestServer> {
  return startNetServer((socket) => {
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("end", () => socket.end(respond(Buffer.concat(chunks))));
  });
}

/**
 * A server that accepts connections and never reads from them (their data piles up in the
 * kernel, then in whoever writes), until {@linkcode StallServer.release}.
 */
export async function startStallServer(): Promise<StallServer> {
  const base = await startNetServer((socket) => socket.pause());
  return Object.assign(base, {
    release() {
      for (const socket of base.sockets) {
        socket.on("data", () => {});
        socket.resume();
      }
    },
  });
}

/**
 * An HTTP/1.1 server (`node:http`). Routes: `GET /bytes?n=N&seed=S` answers N bytes of
 * {@linkcode pattern}(N, S); `POST /echo` answers the request body; `GET /hello` answers
 * "hello"; anything else 404. `requests` counts requests.
 */
export async function startHttpServer(): Promise<TestServer & { readonly requests: number }> {
  let connections = 0;
  let requests = 0;
  const sockets = new Set<Socket>();
  const server = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    requests++;
    const url = new URL(req.url ?? "/", "http://localhost");
    if (req.method === "GET" && url.pathname === "/bytes") {
      const body = pattern(
        Number(url.searchParams.get("n") ?? 0),
        Number(url.searchParams.get("seed") ?? 0),
      );
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        "content-length": body.length,
      });
      res.end(body);
    } else if (req.method === "POST" && url.pathname === "/echo") {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        res.writeHead(200, {
          "content-type": "application/octet-stream",
          "content-length": body.length,
        });
        res.end(body);
      });
    } else if (url.pathname === "/hello") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("hello");
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  server.on("connection", (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await listenServer(server);
  const view = serverView(server, sockets, () => connections);
  Object.defineProperty(view, "requests", { get: () => requests, enumerable: true });
  return view as unknown as TestServer & { readonly requests: number };
}

/** A port on 127.0.0.1 where nothing listens (bound, then closed, so connecting is refused). */
export async function closedPort(): Promise<number> {
  return (await closedPorts(1))[0];
}

/**
 * `count` different ports on 127.0.0.1 where nothing listens, none of them in `except` (ports the
 * caller took earlier and will still use): all bound at once before any is closed, since ports
 * taken one after another by {@linkcode closedPort} may repeat (the kernel can hand a
 * just-released port out again, and two servers then meet on it).
 */
export async function closedPorts(count: number, except: number[] = []): Promise<number[]> {
  const servers: ReturnType<typeof createNetServer>[] = [];
  const ports: number[] = [];
  try {
    while (ports.length < count) {
      const server = createNetServer();
      servers.push(server);
      await listenServer(server);
      const port = (server.address() as { port: number }).port;
      if (!except.includes(port)) ports.push(port);
    }
  } finally {
    await Promise.all(
      servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    );
  }
  return ports;
}
