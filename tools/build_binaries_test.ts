// The single binaries for every client platform, built into a temp dir. linux-x64 runs here: its
// version, and a client exposing a port of a real daemon that a visitor's bytes cross; linux-arm64
// the same under qemu-aarch64 when that is installed. Every binary is checked by its header
// (format and CPU). A target whose runtime cannot be downloaded (offline) is skipped with
// its reason printed; linux-x64 needs no download and must always build.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildBinary,
  type BuildResult,
  executableFormat,
  expectedFormat,
  readHead,
  type Target,
  TARGETS,
} from "./build_binaries.ts";
import {
  baseEnv,
  cleanup,
  daemonConfig,
  newToken,
  runCommand,
  startCommand,
  startDaemon,
  startEchoServer,
  tcpRoundTrip,
  waitFor,
} from "../testing/mod.ts";

/** Bun's words when a target's runtime could not be fetched. */
const DOWNLOAD_FAILED = /download|fetch|network|ENOTFOUND|ECONNREFUSED|ECONNRESET|timed? ?out/i;

/** A header: `bytes` at their offsets in a zeroed buffer of `size`. */
function header(size: number, parts: [number, number[]][]): Uint8Array {
  const head = new Uint8Array(size);
  for (const [at, bytes] of parts) head.set(bytes, at);
  return head;
}

describe("executableFormat", () => {
  it("reads ELF, Mach-O and PE headers and their CPU, and nothing else", () => {
    const elf = (machine: number) =>
      header(64, [[0, [0x7f, 0x45, 0x4c, 0x46, 2, 1]], [18, [machine, 0]]]);
    assert.deepEqual(executableFormat(elf(62)), { format: "elf", cpu: "x64" });
    assert.deepEqual(executableFormat(elf(183)), { format: "elf", cpu: "arm64" });
    assert.equal(executableFormat(elf(40)), undefined, "32-bit ARM is not a target");
    const macho = (cpu: number[]) => header(64, [[0, [0xcf, 0xfa, 0xed, 0xfe]], [4, cpu]]);
    assert.deepEqual(executableFormat(macho([7, 0, 0, 1])), { format: "mach-o", cpu: "x64" });
    assert.deepEqual(executableFormat(macho([12, 0, 0, 1])), { format: "mach-o", cpu: "arm64" });
    assert.equal(executableFormat(header(64, [[0, [0xfe, 0xed, 0xfa, 0xce]]])), undefined);
    const pe = (machine: number[]) =>
      header(256, [[0, [0x4d, 0x5a]], [0x3c, [0x80, 0, 0, 0]], [0x80, [
        0x50,
        0x45,
        0,
        0,
        ...machine,
      ]]]);
    assert.deepEqual(executableFormat(pe([0x64, 0x86])), { format: "pe", cpu: "x64" });
    assert.deepEqual(executableFormat(pe([0x64, 0xaa])), { format: "pe", cpu: "arm64" });
    const notPe = header(256, [[0, [0x4d, 0x5a]], [0x3c, [0x80, 0, 0, 0]]]);
    assert.equal(executableFormat(notPe), undefined, "MZ without PE\\0\\0 is a DOS program");
    const pastEnd = header(64, [[0, [0x4d, 0x5a]], [0x3c, [0xff, 0xff, 0, 0]]]);
    assert.equal(executableFormat(pastEnd), undefined);
    assert.equal(executableFormat(new Uint8Array(8)), undefined);
  });

  it("expects each target's own format", () => {
    assert.deepEqual(expectedFormat("windows-x64"), { format: "pe", cpu: "x64" });
    assert.deepEqual(expectedFormat("darwin-arm64"), { format: "mach-o", cpu: "arm64" });
    assert.deepEqual(expectedFormat("linux-arm64"), { format: "elf", cpu: "arm64" });
  });
});

describe("single binaries for Linux, macOS and Windows (tools/build_binaries.ts)", () => {
  const out = mkdtempSync(join(tmpdir(), "tunnelmux-binaries-"));
  const built = new Map<Target, BuildResult>();
  before(() => {
    for (const target of TARGETS) built.set(target, buildBinary(target, out));
  });
  after(async () => {
    await cleanup();
    rmSync(out, { recursive: true, force: true });
  });

  /** The binary of `target`, or undefined (printed) when its runtime could not be downloaded. */
  function binary(target: Target): string | undefined {
    const result = built.get(target)!;
    if (result.path) {
      const format = executableFormat(readHead(result.path));
      assert.deepEqual(format, expectedFormat(target), `${target}'s header`);
      console.log(`binary-figure ${JSON.stringify({ target, bytes: statSync(result.path).size })}`);
      return result.path;
    }
    if (target !== "linux-x64" && DOWNLOAD_FAILED.test(result.output)) {
      console.warn(`SKIPPED ${target}: its Bun runtime could not be downloaded:\n${result.output}`);
      return undefined;
    }
    assert.fail(`${target} did not build:\n${result.output}`);
  }

  /** `command` (the binary, or qemu running it) prints its version and exposes a port. */
  async function runsAClient(command: string, prefix: string[], target: string) {
    const version = await runCommand(command, [...prefix, "version"], { timeoutMs: 120_000 });
    assert.match(version.stdout, /^tunnelmux \d+\.\d+\.\d+ \(bun /, version.stderr);
    const token = newToken("binary");
    const echo = await startEchoServer();
    const daemon = await startDaemon({ config: daemonConfig([{ name: "binary", token }]) });
    const client = startCommand(command, [
      ...prefix,
      "client",
      "--server",
      daemon.tcpUrl,
      "--expose",
      `0=127.0.0.1:${echo.port}`,
      "--log-format",
      "json",
    ], { env: { ...baseEnv(), TUNNELMUX_TOKEN: token } });
    try {
      const port = Number(
        (await waitFor(() => /"remote":"127\.0\.0\.1:(\d+)"/.exec(client.stderr()), {
          timeoutMs: 60_000,
          message: `the ${target} binary's tunnel (stderr: ${client.stderr().slice(-800)})`,
        }))[1],
      );
      const bytes = new TextEncoder().encode(`through the ${target} binary`);
      assert.deepEqual(await tcpRoundTrip(port, bytes), bytes);
      assert.equal(await client.stop(), 0, client.stderr().slice(-800));
    } finally {
      client.signal("SIGKILL");
    }
  }

  it("linux-x64: runs, and its client exposes a port of a real daemon", async () => {
    await runsAClient(binary("linux-x64")!, [], "linux-x64");
  });

  it("linux-arm64: an aarch64 ELF; under qemu-aarch64 (where installed) the same client run", async () => {
    const path = binary("linux-arm64");
    if (!path) return;
    const sysroot = "/usr/aarch64-linux-gnu";
    const qemu = ["/usr/bin/qemu-aarch64", "/usr/bin/qemu-aarch64-static"].find(existsSync);
    if (!qemu || !existsSync(sysroot)) {
      console.warn(
        "linux-arm64 checked by its header only: no qemu-aarch64 and aarch64 libc " +
          "(apt-get install qemu-user libc6-arm64-cross)",
      );
      return;
    }
    await runsAClient(qemu, ["-L", sysroot, path], "linux-arm64");
  });

  for (const target of ["darwin-x64", "darwin-arm64", "windows-x64"] as const) {
    it(`${target}: a ${expectedFormat(target).format} executable for ${expectedFormat(target).cpu}`, () => {
      binary(target);
    });
  }
});
