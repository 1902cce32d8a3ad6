#!/usr/bin/env bash
# Installs the published pi-permission-system (the reference permfs follows)
# into DIR (default: $TMPDIR/permfs-pi-reference) so its own code can be run
# with tsx: the pi view's tests drive its subagent forwarding client against
# the mount. Prints the package directory. Needs node and npm (registry access).
# Only its runtime dependencies are installed (not its build and test tools:
# 45 MB, not 394 MB), and the peer @earendil-works/pi-coding-agent is
# stubbed: the forwarding code does not need them. The tests start this
# script side by side (one process each): the first installs, the others
# wait for it.
set -euo pipefail
version=20.7.3
dir=${1:-${TMPDIR:-/tmp}/permfs-pi-reference}
mkdir -p "$dir" && cd "$dir"
exec 9>.lock
flock 9
if [ ! -f package/package.json ]; then
  npm pack --silent "@gotgenes/pi-permission-system@$version" >/dev/null
  tar xzf "gotgenes-pi-permission-system-$version.tgz"
fi
cd package
if [ ! -d node_modules/tsx ]; then
  npm install --silent --no-audit --no-fund --ignore-scripts --legacy-peer-deps --omit=dev zod@4 tsx >/dev/null
fi
stub=node_modules/@earendil-works/pi-coding-agent
mkdir -p "$stub"
cat > "$stub/package.json" <<'J'
{"name":"@earendil-works/pi-coding-agent","version":"0.0.0-stub","type":"module","main":"index.js"}
J
cat > "$stub/index.js" <<'J'
export function getAgentDir() { return "/nonexistent-agent-dir"; }
export function getPackageDir() { return "/nonexistent-package-dir"; }
J
pwd
