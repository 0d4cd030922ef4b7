/**
 * Test support: a real ACME CA, Let's Encrypt's test server **pebble** (v2.10.1), with its
 * companion `pebble-challtestsrv` as the DNS server that answers 127.0.0.1 for every name. Both
 * are installed from the Go module proxy into `.cache/tools` on first use, like nats-server; never
 * a real CA. Pebble validates HTTP-01 on `httpPort` and TLS-ALPN-01 on `tlsPort` of 127.0.0.1, so
 * the daemon under test listens there.
 *
 * @example
 * ```ts ignore
 * import { startPebble } from "./pebble.ts";
 * const httpPort = await closedPort();
 * const pebble = await startPebble({ httpPort, tlsPort: await closedPort(), validitySeconds: 60 });
 * // daemon: listen.http 127.0.0.1:httpPort, http.acme { directory: pebble.directory,
 * //   caCerts: pebble.caFile, challenge: "http-01" }; visitors trust await pebble.root()
 * ```
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Agent, get } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { makeTestIdentity } from "../transport/_test_certificate.ts";
import { installGoTool } from "../util/host/go_build.ts";
import { register } from "./cleanup.ts";
import { closedPorts } from "./fake_servers.ts";
import { ROOT } from "./process.ts";
import { waitFor } from "./wait.ts";

/** The pebble release the ACME tests are written against. */
export const PEBBLE_VERSION = "v2.10.1";

/** A running pebble. */
export interface Pebble {
  /** The ACME directory URL (https, with {@linkcode caFile}'s certificate). */
  readonly directory: string;
  /** A PEM file with the certificate pebble's own HTTPS listener uses: trust it for the directory. */
  readonly caFile: string;
  /** The root that signs what pebble issues (new at each start): what visitors trust. */
  root(): Promise<string>;
  /** Recent output of both processes, for failure messages. */
  output(): string;
}

/** How to start pebble. */
export interface PebbleOptions {
  /** Where pebble checks HTTP-01 challenges (on 127.0.0.1). */
  httpPort: number;
  /** Where pebble checks TLS-ALPN-01 challenges (on 127.0.0.1). */
  tlsPort: number;
  /** How long issued certificates are valid (default 90 days' worth of seconds). */
  validitySeconds?: number;
  /** Other ports the caller took and will bind later (its daemons'): pebble's own avoid them. */
  avoid?: number[];
}

function tool(name: string): Promise<string> {
  return installGoTool({
    name,
    pkg: `github.com/letsencrypt/pebble/v2/cmd/${name}@${PEBBLE_VERSION}`,
    cacheDir: join(ROOT, ".cache", "tools"),
  });
}

function fetchText(url: string, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // ACME servers refuse requests without a User-Agent (RFC 8555 §6.1).
    get(url, { agent: new Agent({ ca }), headers: { "user-agent": "tunnelmux-tests" } }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (d: string) => text += d);
      res.on(
        "end",
        () =>
          res.statusCode === 200 ? resolve(text) : reject(new Error(`${url}: ${res.statusCode}`)),
      );
    }).on("error", reject);
  });
}

/** Starts pebble and its DNS server; both are stopped and their files removed by cleanup. */
export async function startPebble(options: PebbleOptions): Promise<Pebble> {
  const [pebbleBin, dnsBin] = await Promise.all([tool("pebble"), tool("pebble-challtestsrv")]);
  // Not the caller's ports, which are free now and taken once its daemons start.
  const [acmePort, managementPort, dnsPort, dnsManagementPort] = await closedPorts(4, [
    options.httpPort,
    options.tlsPort,
    ...options.avoid ?? [],
  ]);
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-pebble-"));
  const identity = makeTestIdentity("pebble", "IP:127.0.0.1,DNS:localhost");
  const caFile = join(dir, "pebble-listener.pem");
  writeFileSync(caFile, identity.cert);
  writeFileSync(join(dir, "key.pem"), identity.key, { mode: 0o600 });
  writeFileSync(
    join(dir, "pebble.json"),
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${acmePort}`,
        managementListenAddress: `127.0.0.1:${managementPort}`,
        certificate: caFile,
        privateKey: join(dir, "key.pem"),
        httpPort: options.httpPort,
        tlsPort: options.tlsPort,
        ocspResponderURL: "",
        externalAccountBindingRequired: false,
        profiles: {
          default: {
            description: "tunnelmux tests",
            validityPeriod: options.validitySeconds ?? 90 * 24 * 3600,
          },
        },
      },
    }),
  );
  let output = "";
  const children: ChildProcess[] = [];
  const run = (bin: string, args: string[], env: Record<string, string> = {}) => {
    const child = spawn(bin, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    const keep = (chunk: Uint8Array) =>
      output = (output + new TextDecoder().decode(chunk)).slice(-16_000);
    child.stdout!.on("data", keep);
    child.stderr!.on("data", keep);
    children.push(child);
    return child;
  };
  register(async () => {
    await Promise.all(children.map((child) =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGKILL");
      })
    ));
    rmSync(dir, { recursive: true, force: true });
  });
  run(dnsBin, [
    "-defaultIPv4",
    "127.0.0.1",
    "-defaultIPv6",
    "",
    "-dnsserver",
    `127.0.0.1:${dnsPort}`,
    "-management",
    `127.0.0.1:${dnsManagementPort}`,
    "-http01",
    "",
    "-https01",
    "",
    "-tlsalpn01",
    "",
    "-doh",
    "",
  ]);
  const pebble = run(pebbleBin, [
    "-config",
    join(dir, "pebble.json"),
    "-dnsserver",
    `127.0.0.1:${dnsPort}`,
  ], {
    // No random sleeps before validation, no nonces refused at random: tests stay quick.
    PEBBLE_VA_NOSLEEP: "1",
    PEBBLE_WFE_NONCEREJECT: "0",
  });
  const directory = `https://127.0.0.1:${acmePort}/dir`;
  await waitFor(async () => {
    if (pebble.exitCode !== null) throw new Error(`pebble exited:\n${output}`);
    return await fetchText(directory, identity.cert).then(() => true, () => false);
  }, { timeoutMs: 20_000, intervalMs: 50, message: `pebble on port ${acmePort}` });
  return {
    directory,
    caFile,
    root: () => fetchText(`https://127.0.0.1:${managementPort}/roots/0`, identity.cert),
    output: () => output,
  };
}
