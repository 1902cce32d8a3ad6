#!/usr/bin/env python3
"""A directory rename in the view (issue 34): `mv` of a 10,000-file tree
the policy allows, inside `permfs run` and inside `permfs run --no-view`,
in one run.

    scripts/bench/moves.py [--repetitions 5] [--files 10000]

The view judges a rename as a read and a write of every name it moves and
a write of every name it makes (`src/view/moves.rs`), so a directory
rename lists its subtree and judges 3 accesses per entry. A permfs mount
is started with the shipped config (`config/permfs.json`: `*.env` denied
on every path surface, so every name is judged against a rule that could
match anywhere). Each repetition starts one sandbox per side (the order
alternates), and inside it a Python program makes a tree of FILES files
in 100 directories (untimed), then times `os.rename(tree, moved)` and
back (`rename(2)` alone, no process start), 0.3 s apart so the view's
verdict cache (250 ms) has expired and every access is judged afresh.
It reports medians of the repetitions and the view's cost over native
in milliseconds (goal: <= 50 ms over native).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import benchlib

PROGRAM = r"""
import json, os, sys, time
files = int(sys.argv[1])
os.makedirs("tree", exist_ok=True)
per = max(1, files // 100)
for d in range(100):
    os.mkdir(f"tree/d{d}")
    for f in range(per):
        with open(f"tree/d{d}/f{f}.txt", "w") as fh:
            fh.write("x")
times = []
for name in ("moved", "tree", "moved", "tree"):
    time.sleep(0.3)
    source = "moved" if name == "tree" else "tree"
    start = time.monotonic_ns()
    os.rename(source, name)
    times.append(time.monotonic_ns() - start)
print(json.dumps(times))
"""


def one(binary, mount, cwd, view: bool, files: int) -> list[int]:
    args = [str(binary), "run", "--mount", str(mount.mnt)]
    if not view:
        args.append("--no-view")
    work = cwd / ("view" if view else "native")
    work.mkdir(exist_ok=True)
    subprocess.run(["rm", "-rf", str(work / "tree"), str(work / "moved")], check=True)
    out = subprocess.run(
        args + ["--", "python3", "-c", PROGRAM, str(files)],
        cwd=work, check=True, capture_output=True,
        env={**os.environ, "PERMFS_LOG": "error"}, stdin=subprocess.DEVNULL,
    )
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--files", type=int, default=10_000)
    args = parser.parse_args()
    binary = benchlib.permfs_binary()
    config = json.loads((benchlib.REPO / "config/permfs.json").read_text())
    busy = benchlib.wait_for_quiet()
    print(f"{benchlib.machine()}; other CPU busy {busy:.0f} %", flush=True)
    results = {True: [], False: []}
    with benchlib.Mount(config=config) as mount:
        cwd = mount.tmp / "cwd"
        for rep in range(args.repetitions):
            for view in ((True, False) if rep % 2 == 0 else (False, True)):
                results[view].extend(one(binary, mount, cwd, view, args.files))
    view = statistics.median(results[True]) / 1e6
    native = statistics.median(results[False]) / 1e6
    print(f"rename of a {args.files}-file tree (median of {len(results[True])} renames a side):")
    print(f"  view   {view:8.2f} ms  (min {min(results[True]) / 1e6:.2f}, max {max(results[True]) / 1e6:.2f})")
    print(f"  native {native:8.2f} ms  (min {min(results[False]) / 1e6:.2f}, max {max(results[False]) / 1e6:.2f})")
    print(f"  over native: {view - native:+.2f} ms (goal <= 50 ms)")
    benchlib.summary("moves", f"view {view:.2f} ms, native {native:.2f} ms, +{view - native:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
