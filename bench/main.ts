/**
 * `bench`: the protocol suite (S1–S5: tunnelmux, libp2p-yamux, yamux-js, the Go yamux peers and
 * raw TCP) and the tunnel suite (T1–T4: tunnelmux's daemon and client on Deno and Bun over TCP
 * and WebSocket, frp, chisel, bore and rathole, against `direct`). Every measurement runs in
 * fresh processes; rounds interleave the implementations so drift hits them all alike. Progress
 * goes to stderr, the tables to stdout, everything to `--json FILE`.
 *
 * Structure: scenarios are data (`scenarios.ts`, `tunnel/scenarios.ts`), implementations are
 * commands (`impls.ts`, `tunnel/impls.ts`), a measurement is a set of processes (`process.ts`,
 * `tunnel/measure.ts`), and one {@linkcode BenchReport} is built from all samples
 * (`report.ts`); a further suite adds its samples and scenarios to the same report.
 *
 * @module
 */

import { writeFileSync } from "node:fs";
import process from "node:process";
import { parseArgs } from "node:util";
import { benchEnv } from "./env.ts";
import { allImpls, type Impl, type JsRuntime, selectImpls } from "./impls.ts";
import { measureOnce, type RunOutcome } from "./process.ts";
import {
  type BenchReport,
  buildReport,
  formatReport,
  type ReportScenario,
  type SampleRecord,
  type SkippedImpl,
  type Suite,
} from "./report.ts";
import { type Scenario, SCENARIOS, type Workload } from "./scenarios.ts";
import { findBinary, tunnelImpls } from "./tunnel/impls.ts";
import { TUNNEL_SCENARIOS } from "./tunnel/scenarios.ts";
import { runsIn, runTunnelSuite } from "./tunnel/suite.ts";

/** The tunnel suite's baselines, which run whatever `--only` says: TCP and UDP straight to the backend. */
const BASELINES = ["direct", "udp-direct"];
import { formatMemory, runMemory } from "./memory.ts";
import { renderSvg } from "./svg.ts";

export type { BenchReport };

const HELP = `tunnelmux bench: yamux engines (protocol suite), tunnels (tunnel) and memory (M1)

Usage:
  deno task bench [options]      (or: bun run bench [options], bun bench/main.ts [options])

Options:
  --suite S           protocol, tunnel, memory or all (default all)
  --scenarios S1,T3   only these scenarios (default: every scenario of the chosen suites; M1 is
                      the memory suite)
  --rounds N          measured rounds (default 5; --quick: 1)
  --quick             tiny sizes, one round, no warm-up pass, no foreign tunnels, no iperf3 (a
                      smoke test, not a measurement)
  --only a,b          implementations whose id starts with one of these. Protocol: tunnelmux,
                      libp2p-yamux, yamux-js, hashicorp, goyamux, raw-native, raw-node, raw, or
                      full ids like tunnelmux-bun. Tunnel: tunnelmux, tunnelmux-deno-ws, jsrelay
                      (both floor rows), frp, chisel, bore, rathole, http (the HTTP family), udp
                      (the UDP family) (direct and udp-direct, the baselines, always run;
                      a scenario runs when a tunnel of its family is selected)
  --runtime deno|bun  only JS implementations on this runtime (default: both); Go, direct and
                      the foreign tunnels always run
  --peers-dir DIR     where to look for frps, frpc, chisel, bore and rathole before PATH; those
                      found in neither are reported as skipped (docs/bench.md builds them)
  --timeout SECONDS   bound on one client or load process (default 60); an implementation that
                      hangs in a protocol scenario is not run in it again
  --soak MINUTES      M1 also soaks under steady traffic for this long (the soak of the targets: 10),
                      sampling RSS every 10 s; implies the memory suite
  --json FILE         write the full report (environment, samples, summaries, ratios) as JSON
  --svg FILE          write a chart per scenario, implementations side by side, as SVG
  -h, --help          show this help

Protocol scenarios (client-opened echo streams, every byte verified by the client):
${SCENARIOS.map((s) => `  ${s.id}  ${s.title} (${s.metric.unit})`).join("\n")}

Raw TCP runs the same workloads without a mux: S1/S2 open a connection per stream, S3/S4 are
one bulk echo of the same bytes, S5 round trips on one connection.

Tunnel scenarios (a Go load generator and backend, the same for every tunnel; every byte
verified; a fresh backend, tunnel server, tunnel client and load process per measurement):
${TUNNEL_SCENARIOS.map((s) => `  ${s.id}  ${s.title} (${s.metric.unit})`).join("\n")}

T1 counts MB/s as 10^6 bytes per second, from the request to the last byte. T4 times each new
connection from just before connect() until the first byte of the 16 bytes sent right after it
comes back, echoed by the backend through the tunnel (so it includes the tunnel opening its
stream and its client dialing the backend).

U1–U6 are UDP: the backend is a UDP echo, and they run through the udp- family only:
udp-direct, udp-tunnelmux-{deno,bun} (the daemon's --expose-udp port -> client -> the echo),
udp-tunnelmux-{deno,bun}-fwd (the client's --forward-udp port -> daemon -> the echo), udp-frp
(a type = "udp" proxy) and udp-rathole (a UDP service). Each datagram carries a sequence number and is checked; one that
does not come back is lost (U1/U2 give a window slot up after 50 ms, the end waits 500 ms at most).
U1–U3 report CPU per 100k datagrams, all of them the RSS of the tunnel's two processes. U5 and
U6 are iperf3's reading of the same path (iperf3 -u through the tunnel to iperf3 -s, the tunnel
carrying its TCP control connection too): full runs with iperf3 on PATH, or named in --scenarios.

Tunnels: direct (the load straight to the backend), tunnelmux-{deno,bun}-{tcp,ws} (daemon/main.ts
and client/main.ts --expose, each a fresh process on that runtime), frp (frps + frpc, a tcp
proxy), chisel (server --reverse + client R:), bore (server + local), rathole (server + client),
all on 127.0.0.1 with an auth token. jsrelay-{deno,bun} are each runtime's floor: two chained
plain relays (bench/tunnel/floor/), visitor -> relay -> relay -> backend, no mux and no auth; the
public one counts as the server, the one that dials the backend as the client. T1 and T2 also report the CPU seconds (user + system) of the
tunnel's two processes over the timed part, per GiB and per 1000 connections; T2 their RSS
after the timed part. Ratios: each tunnel against direct in the same round, WebSocket against
TCP, each tunnelmux tunnel against its runtime's floor (every figure), tunnelmux's CPU and RSS
against the foreign tunnels'.

Memory (M1, tunnelmux on each runtime, two fresh processes over TCP, readings after a forced GC):
RSS and heap per idle stream for 10,000 open streams on one session (--quick: 500); a stream whose
reader paused while the peer offers 64 MiB, its buffered bytes against its receive window, and a
second stream echoing meanwhile; with --soak, RSS over time under steady traffic. See
docs/bench.md.`;

function list(text: string | undefined): string[] {
  return (text ?? "").split(",").map((s) => s.trim()).filter(Boolean);
}

/** The protocol suite: a process pair per measurement (see `process.ts`). */
async function runProtocolSuite(
  impls: readonly Impl[],
  scenarios: readonly { scenario: Scenario; workload: Workload }[],
  rounds: number,
  quick: boolean,
  timeoutMs: number,
  log: (line: string) => void,
): Promise<SampleRecord[]> {
  // An implementation that hung in a scenario (yamux-js, losing a split frame) is not run in it
  // again: each retry would cost the whole bound and end the same way. Its rounds are recorded
  // as failed, saying where it hung.
  const hung = new Map<string, string>();
  const hangKey = (scenario: Scenario, impl: Impl) => `${scenario.id} ${impl.id}`;

  // One unrecorded pass at quick sizes: builds the Go peers, warms the module and disk caches.
  // (Each client also warms up in-process before its timed run.)
  if (!quick) {
    for (const { scenario } of scenarios) {
      for (const impl of impls) {
        const outcome = await measureOnce(
          await impl.server(),
          (address) => impl.client(address, scenario, scenario.quick),
          Math.min(timeoutMs, 15_000), // quick sizes: a hang need not cost the full bound
        );
        log(`warm-up ${scenario.id} ${impl.id}: ${outcome.ok ? "ok" : outcome.error}`);
        if (!outcome.ok && outcome.timedOut) {
          hung.set(hangKey(scenario, impl), `hung in the warm-up (${outcome.error})`);
        }
      }
    }
  }

  const samples: SampleRecord[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const { scenario, workload } of scenarios) {
      // Interleaved: every implementation once per scenario per round (A B C, A B C, ...).
      for (const impl of impls) {
        const where = `[${round + 1}/${rounds}] ${scenario.id} ${impl.id}`;
        const hangNote = hung.get(hangKey(scenario, impl));
        const outcome: RunOutcome = hangNote
          ? { ok: false, error: `not run: ${hangNote}` }
          : await measureOnce(
            await impl.server(),
            (address) => impl.client(address, scenario, workload),
            timeoutMs,
          );
        if (!outcome.ok && outcome.timedOut) {
          hung.set(hangKey(scenario, impl), `hung in round ${round + 1} (${outcome.error})`);
        }
        if (outcome.ok) {
          const sample = impl.parse(outcome.line, scenario, workload);
          const ok = Number.isFinite(sample.value);
          samples.push({
            round,
            scenario: scenario.id,
            impl: impl.id,
            ok,
            ...sample,
            ...(ok ? {} : { error: `no value in ${JSON.stringify(outcome.line)}` }),
          });
          const p99 = sample.p99 !== undefined ? ` (p99 ${sample.p99})` : "";
          log(`${where}: ${sample.value} ${scenario.metric.unit}${p99}`);
        } else {
          samples.push({
            round,
            scenario: scenario.id,
            impl: impl.id,
            ok: false,
            value: NaN,
            error: outcome.error,
          });
          log(`${where}: FAILED ${outcome.error}`);
        }
      }
    }
  }
  return samples;
}

/** The scenarios of the chosen suites, narrowed to `--scenarios` (unknown ids throw). */
function pickScenarios<S extends { id: string }>(
  all: readonly S[],
  suiteOn: boolean,
  wanted: string[],
): S[] {
  if (!suiteOn) return [];
  if (wanted.length === 0) return [...all];
  return all.filter((s) => wanted.includes(s.id.toLowerCase()));
}

/**
 * Runs `tunnelmux bench` with `args` (the words after the command) and resolves with the exit
 * code. Run directly, this file passes its own arguments.
 */
export async function main(args: string[] = process.argv.slice(2)): Promise<number> {
  args = [...args];
  if (args[0] === "--") args.shift(); // `deno task bench -- --quick` passes the separator on
  const { values } = parseArgs({
    args,
    options: {
      suite: { type: "string", default: "all" },
      rounds: { type: "string" },
      quick: { type: "boolean", default: false },
      only: { type: "string" },
      runtime: { type: "string" },
      scenarios: { type: "string" },
      "peers-dir": { type: "string" },
      timeout: { type: "string", default: "60" },
      json: { type: "string" },
      svg: { type: "string" },
      soak: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const quick = values.quick;
  const rounds = Number(values.rounds ?? (quick ? 1 : 5));
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds must be >= 1");
  const timeoutMs = Number(values.timeout) * 1000;
  if (!(timeoutMs > 0)) throw new Error("--timeout must be a positive number of seconds");
  if (values.runtime && values.runtime !== "deno" && values.runtime !== "bun") {
    throw new Error("--runtime must be deno or bun");
  }
  if (!["protocol", "tunnel", "memory", "all"].includes(values.suite)) {
    throw new Error("--suite must be protocol, tunnel, memory or all");
  }
  const soakMinutes = values.soak === undefined ? undefined : Number(values.soak);
  if (soakMinutes !== undefined && !(soakMinutes > 0)) {
    throw new Error("--soak must be a positive number of minutes");
  }
  const runtimes: JsRuntime[] = values.runtime ? [values.runtime as JsRuntime] : ["deno", "bun"];
  const only = list(values.only);
  const wanted = list(values.scenarios).map((id) => id.toLowerCase());
  const all = values.suite === "all";
  const protocolOn = all || values.suite === "protocol";
  const tunnelOn = all || values.suite === "tunnel";
  // --soak asks for M1 whatever the suite; otherwise M1 runs with its suite or by name.
  const memoryOn = soakMinutes !== undefined ||
    ((all || values.suite === "memory") && (wanted.length === 0 || wanted.includes("m1")));
  const protocolScenarios = pickScenarios(SCENARIOS, protocolOn, wanted);
  // iperf3's scenarios: full runs with iperf3 on PATH, or asked for by name (then iperf3 must be).
  const iperf3 = findBinary("iperf3", undefined) !== null;
  const named = (id: string) => wanted.includes(id.toLowerCase());
  const missingIperf3 = TUNNEL_SCENARIOS.filter((s) => s.iperf3 && named(s.id) && !iperf3);
  if (tunnelOn && missingIperf3.length) {
    throw new Error(
      `${missingIperf3.map((s) => s.id).join(", ")} need iperf3 on PATH (Debian: apt-get install ` +
        "iperf3)",
    );
  }
  const tunnelScenarios = pickScenarios(
    TUNNEL_SCENARIOS.filter((s) => !s.iperf3 || named(s.id) || (iperf3 && !quick)),
    tunnelOn,
    wanted,
  );
  const known = [...protocolScenarios, ...tunnelScenarios].map((s) => s.id.toLowerCase());
  if (memoryOn) known.push("m1");
  const unknown = wanted.filter((id) => !known.includes(id));
  if (unknown.length) {
    throw new Error(`unknown scenario ${unknown.join(", ")} in suite ${values.suite}`);
  }

  // --only narrows each suite; a suite it leaves empty (the tunnel suite: only direct) drops out.
  const matches = (id: string) => only.length === 0 || only.some((p) => id.startsWith(p));
  const protocolImpls = protocolScenarios.length
    ? allImpls(runtimes).filter((impl) => matches(impl.id))
    : [];
  const allTunnels = tunnelScenarios.length
    ? tunnelImpls(runtimes, values["peers-dir"], !quick).filter((impl) =>
      BASELINES.includes(impl.id) || matches(impl.id)
    )
    : [];
  const skipped: SkippedImpl[] = allTunnels.filter((impl) => impl.missing)
    .map((impl) => ({ impl: impl.id, reason: impl.missing! }));
  let tunnels = allTunnels.filter((impl) => !impl.missing);
  // A scenario runs only when a tunnel of its family (TCP or UDP) is selected, besides the baseline.
  const tunnelRuns = tunnelScenarios.filter((scenario) =>
    tunnels.some((impl) => !BASELINES.includes(impl.id) && runsIn(impl, scenario))
  );
  if (tunnelScenarios.length && tunnelRuns.length === 0) {
    process.stderr.write("bench: no tunnel selected (or found): the tunnel suite is left out\n");
    tunnels = [];
  }
  tunnels = tunnels.filter((impl) => tunnelRuns.some((scenario) => runsIn(impl, scenario)));
  if (protocolImpls.length === 0 && tunnels.length === 0 && !memoryOn) {
    // The same message as before for the protocol suite, with the tunnel ids added.
    selectImpls([...allImpls(runtimes), ...allTunnels], only);
    throw new Error("nothing to run: no implementation left in the chosen suites");
  }

  const env = benchEnv();
  const log = (line: string) => process.stderr.write(line + "\n");
  const ids = [...protocolImpls, ...tunnels].map((i) => i.id);
  const suites = [ids.join(", "), memoryOn ? "M1" : ""].filter(Boolean).join("; ");
  log(`bench: ${suites}; ${rounds} round(s); ${env.cpus} CPUs`);
  for (const s of skipped) log(`bench: skipping ${s.impl}: ${s.reason}`);

  const scenarios: { scenario: ReportScenario; workload: unknown; suite: Suite }[] = [];
  const samples: SampleRecord[] = [];
  if (protocolImpls.length) {
    const picked = protocolScenarios.map((scenario) => ({
      scenario,
      workload: quick ? scenario.quick : scenario.full,
    }));
    samples.push(
      ...await runProtocolSuite(protocolImpls, picked, rounds, quick, timeoutMs, log),
    );
    scenarios.push(...picked.map((p) => ({ ...p, suite: "protocol" as const })));
  }
  if (tunnels.length) {
    const picked = tunnelRuns.map((scenario) => ({
      scenario,
      workload: quick ? scenario.quick : scenario.full,
    }));
    samples.push(
      ...await runTunnelSuite({
        impls: tunnels,
        scenarios: picked,
        rounds,
        warmUp: !quick,
        timeoutMs,
        log,
      }),
    );
    scenarios.push(...picked.map((p) => ({ ...p, suite: "tunnel" as const })));
  }

  const report = buildReport(
    env,
    {
      suite: values.suite,
      rounds,
      quick,
      only: values.only ?? null,
      runtime: values.runtime ?? null,
      peersDir: values["peers-dir"] ?? null,
    },
    scenarios,
    ids,
    samples,
    rounds,
    skipped,
  );
  if (memoryOn) {
    report.memory = await runMemory({ runtimes, quick, soakMinutes, log });
  }
  console.log(formatReport(report));
  if (report.memory) console.log("\n" + formatMemory(report.memory));
  if (values.svg) {
    writeFileSync(values.svg, renderSvg(report));
    log(`bench: wrote ${values.svg}`);
  }
  if (values.json) {
    // NaN is not JSON: failed values become null.
    writeFileSync(values.json, JSON.stringify(report, (_k, v) => Number.isNaN(v) ? null : v, 2));
    log(`bench: wrote ${values.json}`);
  }
  return 0;
}

if (import.meta.main) {
  try {
    process.exitCode = await main();
  } catch (error) {
    console.error(`bench: ${(error as Error).message}\n\n${HELP}`);
    process.exitCode = 2;
  }
}
