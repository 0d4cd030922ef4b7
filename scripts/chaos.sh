#!/bin/sh
# The whole chaos suite (chaos/*_test.ts with TUNNELMUX_CHAOS=full: more rounds, larger transfers
# and the slow cases) under Deno and under Bun. `npm test` runs the same files' fast subset.
# Builds toxiproxy into .cache/tools on first use (needs Go). Results: docs/reliability.md.
set -u
cd "$(dirname "$0")/.."
[ -x node_modules/.bin/deno ] && [ -x node_modules/.bin/bun ] ||
  npm ci --no-audit --no-fund --loglevel=error || exit 1
export TUNNELMUX_CHAOS=full
status=0
echo "== deno test chaos/"; NO_COLOR=1 node_modules/.bin/deno test -A chaos/ || status=1
echo "== bun test chaos/"; node_modules/.bin/bun test --timeout 600000 chaos/ || status=1
exit $status
