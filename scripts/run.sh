#!/usr/bin/env bash
# The main job on a fresh machine: install the FUSE tools if missing, build,
# and mount permfs with the default config (config/permfs.json) at ./mount.
# Stop it with Ctrl-C (or SIGTERM): pending asks are answered "cancelled"
# and the mount is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v fusermount3 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null
  else
    echo "fusermount3 is missing: install the fuse3 package (as root: apt-get install fuse3)" >&2
    exit 1
  fi
fi
mkdir -p mount
# The global config stays in the repository (config/permfs.json, made
# absolute by the daemon). An agent started with `permfs run` from here sees
# config/ read-only through its view (with .permfs/, .pi/, .claude/, .codex/;
# reads there judged like any other path), and an agent's
# write to it is denied by a final guard; project layers count for `allow`
# only once trusted: `permfs trust DIR`.
# The first release build takes two to three minutes (`--profile dist` is the
# slower, faster-running build to ship).
[ -x target/release/permfs ] || echo "permfs: building the release binary (a few minutes the first time)..." >&2
exec cargo run --release --quiet -- mount ./mount --config config/permfs.json "$@"
