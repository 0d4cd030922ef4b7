/**
 * A tiny writer for the Prometheus text exposition format, version 0.0.4: one `# HELP` and one
 * `# TYPE` line per family, then its samples. Only what the daemon needs (counters and gauges);
 * names are checked so that a typo fails a test instead of producing output a scraper rejects.
 *
 * @module
 */

/** The `Content-Type` of a text exposition. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Metric types this writer emits. */
export type MetricType = "counter" | "gauge";

/** Label names to values. */
export type Labels = Readonly<Record<string, string>>;

/** One sample of a family: its labels (if any) and value. */
export interface Sample {
  /** Labels of this sample; families without labels omit them. */
  labels?: Labels;
  /** The value. */
  value: number;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
// Names starting with "__" are reserved for Prometheus itself.
const LABEL_NAME = /^(?!__)[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Escapes a label value: backslash, double quote and line feed. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** Escapes `# HELP` text: backslash and line feed (quotes stay as they are there). */
export function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** Formats a sample value the way Prometheus parses it (`NaN`, `+Inf`, `-Inf`, else decimal). */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

/** Collects families and renders them as one exposition. */
export class PrometheusWriter {
  readonly #lines: string[] = [];
  readonly #names = new Set<string>();

  /**
   * Adds a family. Throws on an invalid or repeated name, or an invalid label name: both are
   * programming errors, and a scraper would reject the whole exposition for them.
   */
  family(name: string, type: MetricType, help: string, samples: Iterable<Sample>): this {
    if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name ${JSON.stringify(name)}`);
    if (this.#names.has(name)) throw new Error(`metric family ${name} written twice`);
    this.#names.add(name);
    this.#lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
    for (const sample of samples) {
      this.#lines.push(`${name}${renderLabels(sample.labels)} ${formatValue(sample.value)}`);
    }
    return this;
  }

  /** Adds a family with one unlabelled sample. */
  single(name: string, type: MetricType, help: string, value: number): this {
    return this.family(name, type, help, [{ value }]);
  }

  /** The exposition text, ending in a line feed. */
  toString(): string {
    return this.#lines.length === 0 ? "" : this.#lines.join("\n") + "\n";
  }
}

function renderLabels(labels: Labels | undefined): string {
  if (!labels) return "";
  const parts: string[] = [];
  for (const [name, value] of Object.entries(labels)) {
    if (!LABEL_NAME.test(name)) throw new Error(`invalid label name ${JSON.stringify(name)}`);
    parts.push(`${name}="${escapeLabelValue(value)}"`);
  }
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}
