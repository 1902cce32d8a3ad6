#!/usr/bin/env bash
# Builds `permfs-hook` statically linked (static-pie, glibc) and installs it
# beside `permfs`, where `permfs hook install` and `--print-config` find it.
#
#   scripts/install-static-hook.sh [DIR]   # default: the directory of the
#                                          # `permfs` on PATH, else ~/.cargo/bin
#
# Why: the agent runs the hook as a new process before every tool call, and
# a dynamically linked Rust binary spends about 0.4 ms of its start in the
# dynamic loader (libgcc_s and libc, their relocations). Static, the hook
# runs a rule-answered call in 1.8 ms against 2.2 ms (BENCHMARKS.md row 9).
# Cargo cannot link one binary of a package statically and the rest not,
# so this is a step of its own: `cargo rustc` passes `crt-static` to the
# hook's final link only (every dependency is the release build's, so this
# takes about as long as a release rebuild of permfs itself). A later
# `cargo build --release` links target/release/permfs-hook dynamically
# again; the installed copy stays as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-}"
if [ -z "$dest" ]; then
  if command -v permfs >/dev/null 2>&1; then
    dest="$(dirname "$(command -v permfs)")"
  else
    dest="$HOME/.cargo/bin"
  fi
fi
if [ ! -x "$dest/permfs" ]; then
  echo "install-static-hook: no permfs in $dest: install it first (cargo install --locked --path .), or name its directory" >&2
  exit 1
fi
if ! command -v readelf >/dev/null 2>&1; then
  echo "install-static-hook: readelf is missing (the binutils package): it checks the result is static" >&2
  exit 1
fi
cargo rustc --locked --release --quiet --bin permfs-hook -- -C target-feature=+crt-static
built=target/release/permfs-hook
# A static-pie has no interpreter: refuse anything else rather than
# install a binary that is not what this script promises.
if readelf -l "$built" | grep -q 'Requesting program interpreter'; then
  echo "install-static-hook: $built came out dynamically linked; not installed" >&2
  exit 1
fi
install -m755 "$built" "$dest/permfs-hook.new"
# It must run here before it replaces anything.
"$dest/permfs-hook.new" --help >/dev/null
mv -f "$dest/permfs-hook.new" "$dest/permfs-hook"
echo "installed a statically linked $dest/permfs-hook"
echo "re-run 'permfs hook install claude-code|codex' if your settings name another binary"
