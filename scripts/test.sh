#!/usr/bin/env bash
# The tests, and one honest line at the end:
#   tests: N passed, N failed, N skipped
# with each skip's test and reason. A test whose prerequisite is missing
# (root, bubblewrap, the agent CLIs…) returns at once, which libtest counts
# as a pass; such tests say so through tests/common's `skip`, into
# target/tmp/permfs-skipped.txt, and are counted here as skipped, not
# passed. `#[ignore]`d tests (benchmarks run by hand) are counted apart,
# and so are tests that passed only on nextest's one retry (flaky, named).
#
# Runs `cargo nextest run` when cargo-nextest is installed (every test in
# its own process, the binaries side by side: the suite's wall time is
# about its CPU time, not the sum of its waits), `cargo test` otherwise.
# Arguments go to either (a filter, `--release`, …).
set -uo pipefail
cd "$(dirname "$0")/.."

skips=target/tmp/permfs-skipped.txt
mkdir -p target/tmp
: >"$skips"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if [ -z "${PERMFS_TEST_CARGO_TEST:-}" ] && cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --no-fail-fast "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  summary=$(grep -E '^ *Summary \[' "$log" | tail -n 1)
  ran=$(grep -Eo '[0-9]+ passed' <<<"$summary" | grep -Eo '[0-9]+' || echo 0)
  failed=$(grep -Eo '[0-9]+ failed' <<<"$summary" | grep -Eo '[0-9]+' || echo 0)
  ignored=$(grep -Eo '[0-9]+ skipped' <<<"$summary" | grep -Eo '[0-9]+' || echo 0)
  # Passed on a retry (.config/nextest.toml): said, never hidden.
  flaky=$(grep -Eo '[0-9]+ flaky' <<<"$summary" | grep -Eo '[0-9]+' || echo 0)
else
  cargo test --no-fail-fast "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  sum() { grep -Eo "^test result: .*" "$log" | grep -Eo "[0-9]+ $1" | awk '{s+=$1} END {print s+0}'; }
  ran=$(sum passed)
  failed=$(sum failed)
  ignored=$(sum ignored)
  flaky=0
fi

skipped=$(grep -c '^skipped' "$skips" || true)
parts=$(grep -c '^part skipped' "$skips" || true)
echo
echo "tests: $((ran - skipped)) passed, ${failed} failed, ${skipped} skipped (${ignored} ignored: benchmarks run by hand; ${flaky} flaky: passed on a retry)"
if [ "$flaky" -gt 0 ]; then
  grep -E '^ +FLAKY' "$log" | sort -u | sed 's/^ */  /'
fi
if [ "$skipped" -gt 0 ] || [ "$parts" -gt 0 ]; then
  sort -u "$skips" | while IFS=$'\t' read -r kind test reason; do
    echo "  ${kind}: ${test}: ${reason}"
  done
fi
exit "$status"
