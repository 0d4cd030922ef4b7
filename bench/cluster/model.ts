/**
 * The pure part of the cluster scale bench: reading nats-server's monitoring answers, turning two
 * samples into rates, and fitting the cost model to the measured points. No I/O here, so it is
 * unit-tested (`model_test.ts`); the timings themselves are the bench's, never a test's.
 *
 * @module
 */

/** The counters of nats-server's `/varz` the bench follows. */
export interface NatsCounters {
  /** Messages received by the server from clients (and routes). */
  inMsgs: number;
  /** Messages sent by the server to subscribers. */
  outMsgs: number;
  /** Bytes received. */
  inBytes: number;
  /** Bytes sent. */
  outBytes: number;
  /** JetStream API requests served so far (KV get, create, update, delete, info, consumers…). */
  apiTotal: number;
}

function count(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new Error(`nats-server's /varz has no valid ${what}`);
  }
  return value;
}

/**
 * The counters out of a `/varz` document (parsed JSON); throws a clear error naming the field
 * when one is missing, e.g. a server started without JetStream.
 */
export function parseVarz(varz: unknown): NatsCounters {
  if (typeof varz !== "object" || varz === null) throw new Error("nats-server's /varz: not JSON");
  const v = varz as Record<string, unknown>;
  const api = (v.jetstream as { stats?: { api?: { total?: unknown } } } | undefined)?.stats?.api;
  return {
    inMsgs: count(v.in_msgs, "in_msgs"),
    outMsgs: count(v.out_msgs, "out_msgs"),
    inBytes: count(v.in_bytes, "in_bytes"),
    outBytes: count(v.out_bytes, "out_bytes"),
    apiTotal: count(api?.total, "jetstream.stats.api.total"),
  };
}

/** Per-second rates between two samples taken `seconds` apart. */
export function ratesOf(
  before: NatsCounters,
  after: NatsCounters,
  seconds: number,
): NatsCounters {
  if (!(seconds > 0)) throw new Error("rates need a positive interval");
  const rate = (key: keyof NatsCounters) => Math.max(0, after[key] - before[key]) / seconds;
  return {
    inMsgs: rate("inMsgs"),
    outMsgs: rate("outMsgs"),
    inBytes: rate("inBytes"),
    outBytes: rate("outBytes"),
    apiTotal: rate("apiTotal"),
  };
}

/** CPU seconds (user + system) of a process from the text of `/proc/PID/stat`. */
export function cpuSecondsOfStat(stat: string, ticksPerSecond = 100): number {
  // The command name (field 2) is in parentheses and may hold spaces: count from after it.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(fields[11]), stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) throw new Error("not a /proc stat line");
  return (utime + stime) / ticksPerSecond;
}

/** Resident memory in MiB from the text of `/proc/PID/status`; undefined when absent. */
export function rssMiBOfStatus(status: string): number | undefined {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(status);
  return match ? Number(match[1]) / 1024 : undefined;
}

/** One measured configuration: nodes, tunnels, and a rate measured there. */
export interface Point {
  /** Nodes. */
  n: number;
  /** Tunnels in the whole cluster. */
  t: number;
  /** The measured value (per second). */
  y: number;
}

/** `y ≈ a·f1 + b·f2`, fitted. */
export interface Fit {
  /** Coefficient of the first term. */
  a: number;
  /** Coefficient of the second term. */
  b: number;
}

/**
 * Least squares for `y ≈ a·f1(p) + b·f2(p)` (no constant: no nodes, no load). Throws when the
 * points cannot tell the two terms apart.
 */
export function fit2(
  points: readonly Point[],
  f1: (p: Point) => number,
  f2: (p: Point) => number,
): Fit {
  let s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (const p of points) {
    const x1 = f1(p), x2 = f2(p);
    s11 += x1 * x1;
    s12 += x1 * x2;
    s22 += x2 * x2;
    s1y += x1 * p.y;
    s2y += x2 * p.y;
  }
  const det = s11 * s22 - s12 * s12;
  if (!(Math.abs(det) > 1e-12 * Math.max(1, s11 * s22))) {
    throw new Error("the points do not separate the model's two terms: measure more shapes");
  }
  return { a: (s1y * s22 - s2y * s12) / det, b: (s2y * s11 - s1y * s12) / det };
}
