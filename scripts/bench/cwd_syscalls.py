#!/usr/bin/env python3
"""How many readlink/stat calls the daemon makes per rule-answered ask.

    scripts/bench/cwd_syscalls.py [--asks 500] [BINARY ...]

For each binary (default: $PERMFS_BIN or target/release/permfs): mounts it,
warms up with 50 asks, then counts the daemon's readlink and stat-family
system calls (strace -c -f, attached) over --asks two-file asks of
{"surface":"bash","value":"git status"} (allowed by a rule). The session's
cwd is the mount's temp directory, so a realpath of it costs one readlink
per component. Needs strace.
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

CONFIG = {"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow"}}}


def count(binary: str, asks: int) -> str:
    os.environ["PERMFS_BIN"] = binary
    with b.Mount(CONFIG) as m:
        outbox = os.open(m.main / "outbox", os.O_RDONLY | os.O_DIRECTORY)
        body = b.request_bytes("git status")
        for i in range(50):
            b.submit(outbox, f"w{i}", body)
            b.response(outbox, f"w{i}")
        trace = subprocess.Popen(
            ["strace", "-f", "-c", "-e", "trace=readlink,statx,newfstatat,lstat,stat", "-p", str(m.pid)],
            stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        for i in range(asks):
            b.submit(outbox, f"r{i}", body)
            b.response(outbox, f"r{i}")
        time.sleep(0.3)
        trace.send_signal(2)
        return trace.communicate()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--asks", type=int, default=500)
    parser.add_argument("binaries", nargs="*")
    args = parser.parse_args()
    for binary in args.binaries or [str(b.permfs_binary())]:
        print(f"{binary}: {args.asks} asks")
        print(count(binary, args.asks))


if __name__ == "__main__":
    main()
