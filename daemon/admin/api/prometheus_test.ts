// The text exposition writer: escaping, types, and the checks that keep output scrapeable.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  escapeHelp,
  escapeLabelValue,
  formatValue,
  PROMETHEUS_CONTENT_TYPE,
  PrometheusWriter,
} from "./prometheus.ts";

describe("PrometheusWriter", () => {
  it("writes HELP and TYPE before the samples of a counter and a gauge", () => {
    const text = new PrometheusWriter()
      .family("x_requests_total", "counter", "Requests.", [
        { labels: { code: "200" }, value: 3 },
        { labels: { code: "500" }, value: 0 },
      ])
      .single("x_temperature", "gauge", "Degrees.", -1.5)
      .toString();
    assert.equal(
      text,
      [
        "# HELP x_requests_total Requests.",
        "# TYPE x_requests_total counter",
        'x_requests_total{code="200"} 3',
        'x_requests_total{code="500"} 0',
        "# HELP x_temperature Degrees.",
        "# TYPE x_temperature gauge",
        "x_temperature -1.5",
        "",
      ].join("\n"),
    );
  });

  it("escapes backslash, double quote and line feed in label values", () => {
    assert.equal(escapeLabelValue('a\\b"c\nd'), 'a\\\\b\\"c\\nd');
    const text = new PrometheusWriter()
      .family("x", "gauge", "h", [{ labels: { path: 'C:\\dir\n"q"' }, value: 1 }])
      .toString();
    assert.ok(text.includes('x{path="C:\\\\dir\\n\\"q\\""} 1\n'), text);
    assert.equal(text.split("\n").length, 4, "no raw line feed inside a sample");
  });

  it("escapes backslash and line feed in HELP, but not quotes", () => {
    assert.equal(escapeHelp('one\\two\n"three"'), 'one\\\\two\\n"three"');
    const text = new PrometheusWriter().single("x", "gauge", "a\nb", 1).toString();
    assert.equal(text.split("\n")[0], "# HELP x a\\nb");
  });

  it("formats special values the way Prometheus reads them", () => {
    assert.equal(formatValue(NaN), "NaN");
    assert.equal(formatValue(Infinity), "+Inf");
    assert.equal(formatValue(-Infinity), "-Inf");
    assert.equal(formatValue(0.25), "0.25");
    assert.equal(formatValue(12345678901), "12345678901");
  });

  it("writes a family with no samples as HELP and TYPE only", () => {
    assert.equal(
      new PrometheusWriter().family("x_total", "counter", "h", []).toString(),
      "# HELP x_total h\n# TYPE x_total counter\n",
    );
  });

  it("rejects invalid metric and label names and repeated families", () => {
    assert.throws(() => new PrometheusWriter().single("1x", "gauge", "h", 1), /metric name/);
    assert.throws(() => new PrometheusWriter().single("a-b", "gauge", "h", 1), /metric name/);
    assert.throws(
      () => new PrometheusWriter().family("x", "gauge", "h", [{ labels: { "a-b": "" }, value: 1 }]),
      /label name/,
    );
    assert.throws(
      () => new PrometheusWriter().family("x", "gauge", "h", [{ labels: { __x: "" }, value: 1 }]),
      /label name/,
    );
    const w = new PrometheusWriter().single("x", "gauge", "h", 1);
    assert.throws(() => w.single("x", "gauge", "h", 1), /twice/);
  });

  it("names the 0.0.4 content type", () => {
    assert.equal(PROMETHEUS_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
  });
});
