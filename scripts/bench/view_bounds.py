#!/usr/bin/env python3
"""What one sandbox can make the daemon hold through its enforcement view
(issue 34, item 5, "Bounded"): the view's node log on disk and the
server's memory.

    scripts/bench/view_bounds.py [--churn 20000] [--files 100000] [--name-len 200]

A permfs mount is started (benchlib.Mount) with rules that allow
`path_read` and `path_write`; a session `v1` is spawned with
`cwd=WORK view=WORK lease` on a held `ctl` descriptor, and its view's mount
point is read from `session.json` (as scripts/bench/view.py does). The node
log is `<state>/views/<key>.nodes`, `<key>` the mount point's name. Then,
through the view:

  1  churn: one name created (O_CREAT, closed) and unlinked --churn times;
     the node log's size after it (before issue 34: 95 bytes a cycle,
     1.9 MB for 20,000, kept until a server restart);
  2  --files names of --name-len bytes created in one directory, then
     --churn more create+unlink cycles beside them; the log's size with
     them all alive (the live table's snapshot is the yardstick);
  3  every one of them removed, `echo 2 > /proc/sys/vm/drop_caches` (the
     kernel forgets the nodes), a 1 s settle; the log's size after
     (--rounds N repeats 2 and 3, the RSS after each round printed).

The server's VmRSS (`permfs status --json` names it) is read when the view
is mounted (start), sampled every 0.1 s throughout (peak, with the server's
VmHWM), and after phase 3 (after removal + forget). The goal: after is
within 20 MiB of start; the log stays within a small multiple of the live
table. Needs root (drop_caches, the view's mount point is root's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

CONFIG = {
    "permission": {
        "*": "ask",
        "path_read": "allow",
        "path_write": "allow",
        "bash": {"*": "ask", "git status": "allow"},
    }
}
MIB = 1024 * 1024
RSS_GOAL_MIB = 20


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def server_pid(m: b.Mount) -> int:
    out = subprocess.run(
        [str(b.permfs_binary()), "status", "--json", "--mount", str(m.mnt), "--state-dir", str(m.tmp / "state")],
        check=True, capture_output=True, text=True,
    ).stdout
    return int(json.loads(out)["server"]["pid"])


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    return int(b.proc_status(pid)[field].split()[0]) / 1024.0


def rss_split(pid: int) -> str:
    """VmRSS as anonymous (the heap) + file-backed (the binary's pages
    touched since start, which grow with the code a run goes through)."""
    return f"anon {rss_mib(pid, 'RssAnon'):.1f} + file {rss_mib(pid, 'RssFile'):.1f} MiB"


class ViewSession:
    """Session v1 with a view of `work`; its view unmounted on close."""

    def __init__(self, m: b.Mount, work: Path):
        self.ctl = os.open(m.main / "ctl", os.O_WRONLY)
        os.write(self.ctl, f"spawn v1 cwd={work} lease view={work}\n".encode())
        info = m.main / "children" / "v1" / "session.json"

        def mounted():
            try:
                views = json.loads(info.read_text()).get("views") or []
            except (OSError, ValueError):
                return None
            return views[0]["mount"] if views and b.is_mounted(Path(views[0]["mount"])) else None

        self.path = Path(b.wait_for(mounted, 15, "the view to be mounted"))
        self.log = self.path.parent / f"{self.path.name}.nodes"

    def close(self) -> None:
        os.close(self.ctl)
        deadline = time.monotonic() + 10
        while b.is_mounted(self.path) and time.monotonic() < deadline:
            time.sleep(0.05)
        if b.is_mounted(self.path):
            subprocess.run(["umount", "-l", str(self.path)], check=False)


class Sampler(threading.Thread):
    """Samples the server's VmRSS every 0.1 s (the peak)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            time.sleep(0.1)


def churn(directory: Path, count: int) -> float:
    """count create+unlink cycles of one name; seconds taken."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    start = time.monotonic()
    try:
        for _ in range(count):
            os.close(os.open("churn", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dfd))
            os.unlink("churn", dir_fd=dfd)
    finally:
        os.close(dfd)
    return time.monotonic() - start


def names(count: int, length: int):
    for i in range(count):
        head = f"f{i:07}-"
        yield head + "x" * (length - len(head))


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--churn", type=int, default=20000)
    parser.add_argument("--files", type=int, default=100000)
    parser.add_argument("--name-len", type=int, default=200)
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="phases 2 and 3 this many times (RSS after each: what stays is not a leak if it does not grow)",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("view_bounds.py needs root (drop_caches; the view's mount point is root's)")
    machine = b.machine()
    out = [machine]
    with b.Mount(CONFIG) as m:
        work = m.tmp / "work"
        (work / "many").mkdir(parents=True)
        view = ViewSession(m, work)
        try:
            pid = server_pid(m)
            time.sleep(0.5)
            start = rss_mib(pid)
            start_split = rss_split(pid)
            sampler = Sampler(pid)
            sampler.start()

            took = churn(view.path, args.churn)
            after_churn = size(view.log)
            out.append(
                f"1 churn: {args.churn:,} create+unlink of one name in {took:.1f} s: "
                f"node log {kib(after_churn)} ({after_churn / max(1, args.churn):.1f} bytes a cycle)"
            )

            many = view.path / "many"
            rounds_after = []
            for _ in range(args.rounds):
                dfd = os.open(many, os.O_RDONLY | os.O_DIRECTORY)
                t0 = time.monotonic()
                try:
                    for name in names(args.files, args.name_len):
                        os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd))
                finally:
                    os.close(dfd)
                made = time.monotonic() - t0
                took = churn(view.path, args.churn)
                alive_log = size(view.log)
                alive_rss = rss_mib(pid)
                # The live table as a fresh log writes it: one `n INO PARENT
                # HEXNAME` line a node (about 2 x name + 16 bytes).
                snapshot = args.files * (2 * args.name_len + 16)
                out.append(
                    f"2 {args.files:,} names of {args.name_len} bytes made in {made:.1f} s, then {args.churn:,} more "
                    f"cycles ({took:.1f} s): node log {kib(alive_log)} (live table ~{kib(snapshot)}: "
                    f"{alive_log / snapshot:.2f}x); VmRSS {alive_rss:.1f} MiB"
                )

                t0 = time.monotonic()
                dfd = os.open(many, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    for name in names(args.files, args.name_len):
                        os.unlink(name, dir_fd=dfd)
                finally:
                    os.close(dfd)
                removed = time.monotonic() - t0
                Path("/proc/sys/vm/drop_caches").write_text("2\n")
                time.sleep(1.0)
                rounds_after.append(rss_mib(pid))
                out.append(
                    f"3 removed in {removed:.1f} s, caches dropped: node log {kib(size(view.log))}, "
                    f"VmRSS {rounds_after[-1]:.1f} MiB"
                )
            sampler.stop.set()
            sampler.join()
            after_log = size(view.log)
            after = rss_mib(pid)
            after_split = rss_split(pid)
            hwm = rss_mib(pid, "VmHWM")
            if args.rounds > 1:
                out.append("VmRSS after each round: " + ", ".join(f"{r:.1f}" for r in rounds_after) + " MiB")
            out.append(
                f"server VmRSS: start {start:.1f} MiB, peak {max(sampler.peak, alive_rss):.1f} MiB "
                f"(VmHWM {hwm:.1f}), after removal+forget {after:.1f} MiB: "
                f"{after - start:+.1f} MiB (goal within {RSS_GOAL_MIB} MiB: {'met' if after - start <= RSS_GOAL_MIB else 'MISSED'})"
            )
            out.append(f"  start: {start_split}; after: {after_split}")
        finally:
            view.close()
    print("\n".join(out))
    b.summary(
        "view bounds",
        f"log {kib(after_churn)} after {args.churn:,} churn, {kib(alive_log)} with {args.files:,} names alive, "
        f"{kib(after_log)} after; RSS {start:.1f} -> peak {max(sampler.peak, alive_rss):.1f} -> {after:.1f} MiB",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
