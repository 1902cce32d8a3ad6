#!/usr/bin/env bash
# Runs the rule-scaling benchmark and prints the 10,000-rule / 10-rule ratio.
#
#   scripts/bench-rules.sh [criterion args...]     e.g. scripts/bench-rules.sh rule_scaling/miss
#
# Criterion's reports land in target/criterion/; the full output is kept in
# target/bench-rules.log. Set CARGO_BUILD_JOBS to limit the build's cores.
set -euo pipefail

cd "$(dirname "$0")/.."
log=target/bench-rules.log
mkdir -p target

cargo bench --bench rule_scaling -- "$@" 2>&1 | tee "$log"

echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
ratio=$(grep -E '^ratio 10000/10:' "$log" || true)
if [[ -z "$ratio" ]]; then
    echo "bench-rules.sh: no ratio line in the output (see $log)" >&2
    exit 1
fi
echo "$ratio"
