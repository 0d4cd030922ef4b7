#!/bin/sh
# The whole chaos suite (chaos/*_test.ts with TUNNELMUX_CHAOS=full: more rounds, larger transfers,
# bigger floods) under Deno and under Bun. `npm test` runs the same files' fast subset. Builds
# toxiproxy into .cache/tools on first use (needs Go). The figures the tests measure (recovery and
# detection times, memory) are collected into .cache/chaos/figures.jsonl and printed at the end;
# docs/reliability.md quotes the last run.
set -u
cd "$(dirname "$0")/.."
[ -x node_modules/.bin/deno ] && [ -x node_modules/.bin/bun ] ||
  npm ci --no-audit --no-fund --loglevel=error || exit 1
export TUNNELMUX_CHAOS=full
mkdir -p .cache/chaos
log=.cache/chaos/last-run.log
status=0
{
  echo "== deno test chaos/"; NO_COLOR=1 node_modules/.bin/deno test -A chaos/ || echo "CHAOS-FAILED deno"
  echo "== bun test chaos/"; node_modules/.bin/bun test --timeout 600000 chaos/ || echo "CHAOS-FAILED bun"
} 2>&1 | tee "$log"
grep -q '^CHAOS-FAILED' "$log" && status=1
sed -n 's/^chaos-figure //p' "$log" > .cache/chaos/figures.jsonl
echo "== figures (.cache/chaos/figures.jsonl)"
node -e '
  const lines = require("fs").readFileSync(".cache/chaos/figures.jsonl", "utf8").trim().split("\n");
  for (const l of lines.filter(Boolean)) {
    const f = JSON.parse(l);
    console.log(`${f.runtime.padEnd(5)} ${String(f.value).padStart(7)} ${f.unit.padEnd(4)} ${f.name}`);
  }'
exit $status
