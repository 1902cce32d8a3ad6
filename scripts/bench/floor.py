#!/usr/bin/env python3
"""The floor under the view's small-files figure (issue 25): the same
open + read + close of 2,000 4 KiB files on the native directory, on a FUSE
server that judges nothing (scripts/bench/fuse_floor.rs), and on the permfs
view, in one run, rotating the order every repetition.

    scripts/bench/floor.py [--repetitions 7] [--small 2000] [--pin]

fuse_floor serves the same files the way the view serves an allowed file
(passthrough on a backing id kept per inode, names and attributes cached,
FLUSH/OPENDIR/xattrs refused once) and does nothing else, so what it costs
over native is what Linux's FUSE charges any server per open: an `OPEN`
round trip and a `RELEASE` after `close` (passthrough has no open without
them; FUSE_NO_OPEN_SUPPORT turns passthrough off). If the floor is above
4x native, no FUSE server meets the goal on this machine.

--pin runs everything (the loop, fuse_floor, the permfs daemon) on CPU 0:
the wake-ups stay on one CPU, the placement FUSE_IO_URING's per-CPU queues
aim for, so it bounds what that transport could give here.

Needs root, /dev/fuse and `cargo build --release --example fuse_floor`
(built here unless PERMFS_NO_BUILD=1; FUSE_FLOOR_BIN overrides the path).
Everything mounted is unmounted in `finally` blocks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402
import view as v  # noqa: E402


def floor_binary() -> Path:
    if os.environ.get("FUSE_FLOOR_BIN"):
        return Path(os.environ["FUSE_FLOOR_BIN"]).resolve()
    binary = b.REPO / "target/release/examples/fuse_floor"
    if os.environ.get("PERMFS_NO_BUILD") != "1":
        env = dict(os.environ)
        env.setdefault("CARGO_BUILD_JOBS", "1")
        subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "fuse_floor"],
                       cwd=b.REPO, env=env, check=True)
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: cargo build --release --example fuse_floor")
    return binary


class Floor:
    """fuse_floor serving `source` at `mountpoint`, stopped on close."""

    def __init__(self, binary: Path, source: Path, mountpoint: Path):
        self.mountpoint = mountpoint
        self.proc = subprocess.Popen([str(binary), str(source), str(mountpoint)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "mounted" or not b.is_mounted(mountpoint):
            self.close()
            raise SystemExit(f"fuse_floor did not mount {mountpoint} (said {line!r})")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if b.is_mounted(self.mountpoint):
            subprocess.run(["umount", "-l", str(self.mountpoint)], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--pin", action="store_true", help="run everything on CPU 0")
    args = parser.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {0})  # inherited by the daemons started below
    floor_bin = floor_binary()
    b.permfs_binary()
    machine = b.machine()
    work = Path(tempfile.mkdtemp(prefix="permfs-floor-bench-")).resolve()
    floor_root = work / "floor"
    (floor_root / "small").mkdir(parents=True)
    block = b"x" * 4096
    (work / "small").mkdir()
    for i in range(args.small):
        (work / "small" / f"f{i:05}").write_bytes(block)
    results: dict[str, list[float]] = {"native": [], "floor": [], "view": []}
    floor = session = None
    try:
        floor = Floor(floor_bin, work / "small", floor_root / "small")
        with b.Mount(v.CONFIG) as m:
            session = v.ViewSession(m, work)
            try:
                sides = {"native": work, "floor": floor_root, "view": session.path}
                for side in sides.values():  # warm: names, attributes, backings
                    v.small_files(side, args.small)
                names = list(sides)
                for rep in range(args.repetitions):
                    for name in names[rep % 3:] + names[:rep % 3]:
                        results[name].append(v.small_files(sides[name], args.small))
            finally:
                session.close()
    finally:
        if floor is not None:
            floor.close()
        v.unmount_under(work)
        if not any(b.is_mounted(p) for p in (floor_root / "small",)):
            subprocess.run(["rm", "-rf", str(work)], check=False)
    med = {k: statistics.median(vals) / 1000 for k, vals in results.items()}
    print(f"machine: {machine}{', everything on CPU 0' if args.pin else ''}")
    print(f"open+read+close of {args.small:,} x 4 KiB, per file, median of {args.repetitions} (order rotated):")
    for name in results:
        lo, hi = min(results[name]) / 1000, max(results[name]) / 1000
        print(f"  {name:<7} {med[name]:7.1f} us  ({lo:.1f}-{hi:.1f})  {med[name] / med['native']:6.2f}x native")
    print(f"  view / floor {med['view'] / med['floor']:.2f}x")
    b.summary("floor", f"native {med['native']:.1f} us, floor {med['floor']:.1f} us "
              f"({med['floor'] / med['native']:.2f}x), view {med['view']:.1f} us "
              f"({med['view'] / med['native']:.2f}x, {med['view'] / med['floor']:.2f}x the floor)"
              f"{', pinned to CPU 0' if args.pin else ''}")
    return 0


if __name__ == "__main__":
    b.install_signal_handlers()
    sys.exit(main())
