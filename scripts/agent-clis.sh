#!/usr/bin/env bash
# Installs the real agent CLIs that tests/real_clients.rs drives, at pinned
# versions, into DIR (default: target/agent-clis): Claude Code (a native
# binary shipped in a platform package; its postinstall links it into
# place) and Codex (a node launcher around a native binary; node >= 16).
# Nothing runs them against a real model: the tests point them at a
# scripted one on 127.0.0.1. Needs npm (registry access). Idempotent.
set -euo pipefail
claude_version=2.1.332
codex_version=0.171.0
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
pwd
