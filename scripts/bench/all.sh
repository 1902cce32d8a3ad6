#!/usr/bin/env bash
# Runs the six benchmarks of BENCHMARKS.md in sequence and prints a summary.
#
#   scripts/bench/all.sh            (as root, with /dev/fuse; about 6-8 minutes)
#
# 1 roundtrip.py   recorded-authority round trip vs reading MNT/README
# 2 wakeup.py      live decision -> blocked reader wakes, vs 250 ms polling
# 3 throughput.py  asks/s with 1, 4 and 16 asker processes vs plain reads
# 4 capacity.py    10,000 blocked askers released by one `allow session`
# 5 depth.py       ask from depth 64 vs depth 1, answered by a grant at main
# 10 resolve.py    `permfs resolve` lines/s on a 100k-line mixed file vs the same file through cat
# 6 ../bench-rules.sh  the engine's rule-scaling criterion bench
#
# Builds once (CARGO_BUILD_JOBS defaults to 1) and runs a private copy of
# target/release/permfs, so a concurrent rebuild cannot swap the binary
# mid-run. Each benchmark mounts in its own temp dir and unmounts even when
# it fails. Logs: target/bench/<name>.log. Extra arguments are passed to
# every Python benchmark (e.g. --profile).
set -uo pipefail
cd "$(dirname "$0")/../.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
mkdir -p target/bench

cargo build --release --quiet || exit 1
bin_dir="$(mktemp -d /tmp/permfs-bench-bin.XXXXXX)"
trap 'rm -rf "$bin_dir"' EXIT
cp target/release/permfs "$bin_dir/permfs"
export PERMFS_BIN="$bin_dir/permfs"
PERMFS_BIN_COMMIT="$(git rev-parse --short HEAD)$(git status --porcelain src | grep -q . && echo ' + uncommitted src changes')"
export PERMFS_BIN_COMMIT
echo "permfs $PERMFS_BIN_COMMIT"

failed=()
for name in roundtrip wakeup throughput capacity depth resolve; do
    echo
    echo "=== $name ==="
    if ! python3 "scripts/bench/$name.py" "$@" 2>&1 | tee "target/bench/$name.log"; then
        failed+=("$name")
    elif ! grep -q '^summary:' "target/bench/$name.log"; then
        failed+=("$name")
    fi
done

echo
echo "=== rules (scripts/bench-rules.sh) ==="
if ! scripts/bench-rules.sh 2>&1 | tee target/bench/rules.log; then
    failed+=(rules)
fi

echo
echo "=== summary ==="
grep -h '^machine:' target/bench/roundtrip.log 2>/dev/null | head -1
for name in roundtrip wakeup throughput capacity depth resolve; do
    grep -h '^summary:' "target/bench/$name.log" 2>/dev/null || echo "summary: $name: FAILED (see target/bench/$name.log)"
done
echo "summary: rules: $(grep -h '^ratio 10000/10:' target/bench/rules.log 2>/dev/null || echo FAILED)"
if ((${#failed[@]})); then
    echo "failed: ${failed[*]}"
    exit 1
fi
