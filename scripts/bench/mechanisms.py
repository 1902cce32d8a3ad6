#!/usr/bin/env python3
"""Issue 36: an agent's commands inside `permfs run`, by each mechanism, in
one run.

    scripts/bench/mechanisms.py [--repetitions 5] [--files 5000] [--only grep,git]

A permfs mount (benchlib.Mount, release build) with path rules that speak
(`*.env`, `*.pem` deny), and a work dir holding one copy of the data per
side (a git repository of --files files in 100-file directories, 2,000
small files, a 256 MiB file), so no side's caches or git index are
another's. The sides:

  native   no sandbox: the commands on the host
  no-view  `permfs run --no-view`: the cwd bound plainly, nothing judged
  fuse     `permfs run --mechanism fuse`: the FUSE view judges every open
  kernel   `permfs run --mechanism kernel`: fanotify (reads, allows kept by
           the kernel) and seccomp (writes)

Each task runs in a fresh sandbox of its side, four times in a row
(tests/bench/inner.py inside): the first run is "first" (the first command
of a fresh sandbox: nothing remembered), the median of the other three is
"repeated". Sides alternate in rotating order each repetition; medians of
the repetitions are reported, with the ratio against no-view and native.
`start` is `permfs run -- true` itself.

Tasks: grep -r (a word in no file), git status, find -printf %s (a stat
per file), opens (C: open+read+close of 2,000 4 KiB files), ruled (the
same, of 2,000 files a rule names, `*/ruled/*: allow`, so each first open
is a rule-answered judgment, none remembered ahead), creates (C:
2,000 64-byte files made, timed; removed after, untimed), read / write
(256 MiB sequentially, 1 MiB calls, warm cache; MiB/s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as b  # noqa: E402

SIDES = ["native", "no-view", "fuse", "kernel"]
TASKS = ["grep", "git", "find", "opens", "ruled", "creates", "read", "write"]
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent", "GIT_AUTHOR_NAME": "b",
           "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
CONFIG = {"permission": {"*": "allow", "path": {"*.env": "deny", "*.pem": "deny", "*/ruled/*": "allow"},
                         "external_directory": "ask"}}

C_OPENS = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int n = atoi(argv[2]); char path[4096], buf[8192]; struct timespec a, z;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/f%05d", argv[1], i);
    int fd = open(path, O_RDONLY); if (fd < 0) { perror(path); return 1; }
    if (read(fd, buf, sizeof buf) != 4096) return 1; close(fd);
  }
  clock_gettime(CLOCK_MONOTONIC, &z);
  printf("%f\n", ((z.tv_sec - a.tv_sec) * 1e9 + (z.tv_nsec - a.tv_nsec)) / n);
  return 0;
}
"""

C_CREATES = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int n = atoi(argv[2]); char path[4096]; struct timespec a, z;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/c%05d", argv[1], i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644); if (fd < 0) { perror(path); return 1; }
    if (write(fd, "0123456789012345678901234567890123456789012345678901234567890123", 64) != 64) return 1;
    close(fd);
  }
  clock_gettime(CLOCK_MONOTONIC, &z);
  printf("%f\n", ((z.tv_sec - a.tv_sec) * 1e9 + (z.tv_nsec - a.tv_nsec)) / n);
  return 0;
}
"""

# Runs one task RUNS times and prints {"runs": [...]} (ms, µs a file or
# MiB/s); in the sandbox, or on the host for `native`.
INNER = r"""
import json, os, shutil, subprocess, sys, time
task, side_dir, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME="/nonexistent")
def wall(cmd, **kw):
    t = time.perf_counter(); subprocess.run(cmd, check=kw.pop("check", True), stdout=subprocess.DEVNULL, env=env, **kw)
    return (time.perf_counter() - t) * 1e3
MIB = 1 << 20
out = []
for r in range(runs):
    if task == "grep":
        out.append(wall(["grep", "-r", "zz-no-such-word-zz", f"{side_dir}/repo"], check=False))
    elif task == "git":
        out.append(wall(["git", "status", "--porcelain"], cwd=f"{side_dir}/repo"))
    elif task == "find":
        out.append(wall(["find", f"{side_dir}/repo", "-printf", "%s\n"]))
    elif task in ("opens", "ruled"):
        folder = "small" if task == "opens" else "ruled"
        p = subprocess.run([f"{side_dir}/../opens", f"{side_dir}/{folder}", "2000"], check=True, capture_output=True, text=True)
        out.append(float(p.stdout) / 1e3)
    elif task == "creates":
        os.sync()  # the disk's earlier work is not this side's
        d = f"{side_dir}/made{r}"
        os.mkdir(d)
        p = subprocess.run([f"{side_dir}/../creates", d, "2000"], check=True, capture_output=True, text=True)
        out.append(float(p.stdout) / 1e3)
        shutil.rmtree(d)
    elif task in ("read", "write"):
        buf = bytearray(MIB)
        path = f"{side_dir}/big"
        fd = os.open(path, os.O_RDONLY if task == "read" else os.O_WRONLY)
        size = os.fstat(fd).st_size
        t = time.perf_counter()
        done = 0
        while done < size:
            n = os.readv(fd, [buf]) if task == "read" else os.write(fd, buf)
            if n <= 0: break
            done += n
        os.close(fd)
        out.append(done / MIB / (time.perf_counter() - t))
print(json.dumps({"runs": out}))
"""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def make_side(root: Path, files: int, mib: int) -> None:
    repo = root / "repo"
    for i in range(files):
        d = repo / f"d{i // 100:03}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"file{i:05}.txt").write_text(f"line {i}\n" * (1 + i % 20))
    env = dict(os.environ, **GIT_ENV)
    subprocess.run(["git", "init", "-q"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "files"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "status", "--porcelain"], cwd=repo, env=env, check=True, stdout=subprocess.DEVNULL)
    small = root / "small"
    small.mkdir()
    block = os.urandom(4096)
    for i in range(2000):
        (small / f"f{i:05}").write_bytes(block)
    # Files a rule names (`*/ruled/*: allow`): each first open is judged by a
    # walk (no directory's first miss remembers them ahead).
    ruled = root / "ruled"
    ruled.mkdir()
    for i in range(2000):
        (ruled / f"f{i:05}").write_bytes(block)
    chunk = os.urandom(1 << 20)
    with open(root / "big", "wb") as f:
        for _ in range(mib):
            f.write(chunk)


def run_side(binary: Path, mount: b.Mount, work: Path, side: str, task: str, runs: int) -> tuple[list[float], float]:
    """The task's runs in a fresh sandbox of `side`; and the whole wall time."""
    side_dir = str(work / side)
    inner = [sys.executable, str(work / "inner.py"), task, side_dir, str(runs)]
    if side == "native":
        cmd = inner
    else:
        flags = ["--no-view"] if side == "no-view" else ["--mechanism", side]
        cmd = [str(binary), "run", "--mount", str(mount.mnt), *flags, "--", "/usr/bin/python3", *inner[1:]]
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=dict(os.environ, PERMFS_LOG="error"))
    total = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        raise RuntimeError(f"{side} {task}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])["runs"], total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--only", default=",".join(TASKS))
    args = parser.parse_args()
    tasks = [t for t in args.only.split(",") if t]
    if os.geteuid() != 0 or not shutil.which("bwrap") or not shutil.which("cc"):
        raise SystemExit("needs root, bubblewrap and cc")
    binary = b.permfs_binary()
    busy = b.wait_for_quiet(threshold=30.0, max_wait=120.0)
    before = b.machine()
    work = Path(tempfile.mkdtemp(prefix="permfs-mech-", dir="/var/tmp"))
    os.chmod(work, 0o755)
    try:
        log(f"making the data in {work}")
        for side in SIDES:
            (work / side).mkdir()
            make_side(work / side, args.files, args.mib)
        for name, source in (("opens", C_OPENS), ("creates", C_CREATES)):
            (work / f"{name}.c").write_text(source)
            subprocess.run(["cc", "-O2", "-o", str(work / name), str(work / f"{name}.c")], check=True)
        (work / "inner.py").write_text(INNER)
        with b.Mount(config=CONFIG) as mount:
            first = {(s, t): [] for s in SIDES for t in tasks}
            repeated = {(s, t): [] for s in SIDES for t in tasks}
            starts = {s: [] for s in SIDES if s != "native"}
            for rep in range(args.repetitions):
                order = SIDES[rep % len(SIDES):] + SIDES[:rep % len(SIDES)]
                log(f"repetition {rep + 1}/{args.repetitions}: {' '.join(order)}")
                for side in order:
                    if side != "native":
                        flags = ["--no-view"] if side == "no-view" else ["--mechanism", side]
                        t = time.perf_counter()
                        subprocess.run([str(binary), "run", "--mount", str(mount.mnt), *flags, "--", "/bin/true"],
                                       cwd=work, check=True, env=dict(os.environ, PERMFS_LOG="error"))
                        starts[side].append((time.perf_counter() - t) * 1e3)
                    for task in tasks:
                        runs, _ = run_side(binary, mount, work, side, task, 4)
                        first[(side, task)].append(runs[0])
                        repeated[(side, task)].append(statistics.median(runs[1:]))
        after = b.machine()
        units = {"grep": "ms", "git": "ms", "find": "ms", "opens": "µs/file", "ruled": "µs/file", "creates": "µs/file",
                 "read": "MiB/s", "write": "MiB/s"}
        print(f"# scripts/bench/mechanisms.py --repetitions {args.repetitions} --files {args.files} "
              f"(commit {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, cwd=b.REPO).stdout.strip()})")
        print(f"# machine before: {before}; after: {after}; waited for quiet: {busy}")
        print("| task | when | native | no-view | fuse | kernel | fuse / no-view | kernel / no-view | kernel / native |")
        print("|---|---|---|---|---|---|---|---|---|")
        med = statistics.median
        for task in tasks:
            for when, table in (("first", first), ("repeated", repeated)):
                m = {s: med(table[(s, task)]) for s in SIDES}
                higher_is_better = task in ("read", "write")
                ratio = (lambda x, y: y / x) if higher_is_better else (lambda x, y: x / y)
                print(f"| {task} ({units[task]}) | {when} | {m['native']:.1f} | {m['no-view']:.1f} | {m['fuse']:.1f} | "
                      f"{m['kernel']:.1f} | {ratio(m['fuse'], m['no-view']):.2f}x | {ratio(m['kernel'], m['no-view']):.2f}x | "
                      f"{ratio(m['kernel'], m['native']):.2f}x |")
        print("| start: `permfs run -- true` (ms) | — | — | "
              + " | ".join(f"{med(starts[s]):.1f}" for s in ("no-view", "fuse", "kernel"))
              + f" | {med(starts['fuse']) / med(starts['no-view']):.2f}x | {med(starts['kernel']) / med(starts['no-view']):.2f}x | — |")
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(work)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
