/**
 * The implementations the benchmark compares, and how to start each one's echo server and run its
 * client for a scenario. JS implementations run a worker script (`bench/workers/*.ts`) in a fresh
 * process of their runtime; the Go peers are the interop binaries from `interop/`.
 *
 * The tunnel suite's implementations (tunnels, not muxes) are in `tunnel/impls.ts`.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildGoPeer, type GoPeerName } from "../interop/go_peer.ts";
import type { Scenario, Workload } from "./scenarios.ts";

/** A JS runtime the workers run on. */
export type JsRuntime = "deno" | "bun";

/** One sample's numbers, as parsed from a client's JSON line. */
export interface Sample {
  /** The headline value, in the scenario's unit. */
  value: number;
  /** The 99th percentile (S5 only). */
  p99?: number;
}

/** One implementation under test. */
export interface Impl {
  /** Unique id, e.g. `tunnelmux-deno`, `hashicorp-go`; `--only` matches its prefix. */
  id: string;
  /** Runtime: `deno`, `bun` or `go`. */
  runtime: JsRuntime | "go";
  /** No mux: the raw TCP ceiling. */
  raw: boolean;
  /** The server command (argv); resolved lazily because Go peers are built first. */
  server(): Promise<string[]>;
  /** The client command for `scenario` at `address`. */
  client(address: string, scenario: Scenario, work: Workload): Promise<string[]>;
  /** Extracts the headline value from the client's JSON line (which has `ok: true`). */
  parse(line: Record<string, unknown>, scenario: Scenario, work: Workload): Sample;
}

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

/** The pinned runtime binaries installed from npm. */
export const RUNTIME_BIN: Record<JsRuntime, string> = {
  deno: join(ROOT, "node_modules", ".bin", "deno"),
  bun: join(ROOT, "node_modules", ".bin", "bun"),
};

function runtimeArgv(runtime: JsRuntime, script: string): string[] {
  const path = join(ROOT, "bench", "workers", script);
  return runtime === "deno" ? [RUNTIME_BIN.deno, "run", "-A", path] : [RUNTIME_BIN.bun, path];
}

function workArgs(scenario: Scenario, work: Workload): string[] {
  return [
    "--scenario",
    scenario.id,
    "--count",
    String(work.count),
    "--size",
    String(work.size),
    "--inflight",
    String(work.inflight),
  ];
}

/** Reads the worker's own fields (see `WorkerResult`). */
function parseWorker(line: Record<string, unknown>, scenario: Scenario): Sample {
  if (scenario.kind === "rtt") return { value: Number(line.p50_us), p99: Number(line.p99_us) };
  const key = scenario.metric.unit === "streams/s" ? "streams_per_s" : "mib_per_s";
  return { value: Number(line[key]) };
}

function jsImpl(family: string, script: string, runtime: JsRuntime, raw = false): Impl {
  return {
    id: `${family}-${runtime}`,
    runtime,
    raw,
    server: () => Promise.resolve([...runtimeArgv(runtime, script), "--serve"]),
    client: (address, scenario, work) =>
      Promise.resolve([
        ...runtimeArgv(runtime, script),
        "--connect",
        address,
        ...workArgs(scenario, work),
      ]),
    parse: (line, scenario) => parseWorker(line, scenario),
  };
}

/** Maps a scenario onto the Go peer's `streams`, `throughput` and `rtt` client scenarios. */
function goClientArgs(scenario: Scenario, work: Workload): string[] {
  switch (scenario.kind) {
    case "streams":
      return [
        "-scenario",
        "streams",
        "-count",
        String(work.count),
        "-size",
        String(work.size),
        "-inflight",
        String(work.inflight),
      ];
    case "bulk":
      return ["-scenario", "throughput", "-bytes", String(work.size * work.count)];
    case "rtt":
      return ["-scenario", "rtt", "-count", String(work.count), "-size", String(work.size)];
  }
}

function goImpl(peer: GoPeerName): Impl {
  return {
    id: `${peer}-go`,
    runtime: "go",
    raw: false,
    server: async () => [await buildGoPeer(peer), "-listen", "127.0.0.1:0"],
    client: async (address, scenario, work) => [
      await buildGoPeer(peer),
      "-connect",
      address,
      "-timeout",
      "300s",
      ...goClientArgs(scenario, work),
    ],
    parse(line, scenario, work) {
      if (scenario.kind === "rtt") return { value: Number(line.p50_us), p99: Number(line.p99_us) };
      if (scenario.kind === "bulk") return { value: Number(line.mib_per_s) };
      const perSecond = Number(line.streams_per_s);
      return {
        value: scenario.metric.unit === "streams/s"
          ? perSecond
          : Math.round(perSecond * work.size / (1024 * 1024) * 10) / 10,
      };
    },
  };
}

/** Every implementation, in table order, for the given runtimes. */
export function allImpls(runtimes: readonly JsRuntime[]): Impl[] {
  const impls: Impl[] = [];
  for (const rt of runtimes) impls.push(jsImpl("tunnelmux", "tunnelmux.ts", rt));
  for (const rt of runtimes) impls.push(jsImpl("libp2p-yamux", "libp2p.ts", rt));
  for (const rt of runtimes) impls.push(jsImpl("yamux-js", "yamux_js.ts", rt));
  impls.push(goImpl("hashicorp"), goImpl("goyamux"));
  for (const rt of runtimes) {
    impls.push(jsImpl("raw-native", "raw_native.ts", rt, true));
    impls.push(jsImpl("raw-node", "raw_node.ts", rt, true));
  }
  return impls;
}

/** Keeps the implementations whose id starts with one of `prefixes` (all when empty). */
export function selectImpls<T extends { id: string }>(
  impls: readonly T[],
  prefixes: readonly string[],
): T[] {
  if (prefixes.length === 0) return [...impls];
  const picked = impls.filter((impl) => prefixes.some((p) => impl.id.startsWith(p)));
  if (picked.length === 0) {
    throw new Error(
      `--only ${prefixes.join(",")} matches no implementation (have ${
        impls.map((i) => i.id).join(", ")
      })`,
    );
  }
  return picked;
}
