#!/usr/bin/env python3
"""The pause a caller sees when the server of a mount is SIGKILLed.

Mounts permfs, then N times: SIGKILLs the server (its pid from
`permfs status --json`) and times, from the kill, a read of
`sessions/main/session.json` (which waits for the supervisor to start a
server that takes over the connection). Baseline, in the same run: the
same read with the server alive. Prints medians, p90 and the ratio.

    scripts/bench/restart.py [--count 20] [--interval 1.2]   # PERMFS_BIN, else target/release
    scripts/bench/restart.py --upgrade [--count 10]

With --upgrade, each round runs `permfs mount --upgrade` instead of the
kill, while a thread reads session.json in a loop: the pause is the
longest read during the upgrade (the new server is started and reads its
config while the old one serves; the old one is then SIGKILLed and the
new one takes over), against the median read outside upgrades.

With --view (root and bubblewrap), the reader is a program in a `permfs
run` sandbox that opens, reads and closes a file in its enforcement view
in a loop (every open is judged by the server); the pause is the longest
such read that overlaps each SIGKILL, against the loop's median read.

    scripts/bench/restart.py --view [--count 20]
"""

import threading

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from benchlib import is_mounted, machine, permfs_binary, pct  # noqa: E402


def status(binary, mount, state):
    out = subprocess.run(
        [binary, "status", "--json", "--mount", mount, "--state-dir", state],
        capture_output=True, check=True, text=True,
    ).stdout
    return json.loads(out)


def timed_read(path):
    start = time.perf_counter_ns()
    with open(path, "rb") as f:
        f.read()
    return time.perf_counter_ns() - start


def upgrade_rounds(binary, mount, state, target, args, alive, paused):
    """`permfs mount --upgrade` args.count times under a reading loop."""
    for _ in range(args.count):
        for _ in range(5):
            alive.append(timed_read(target))
        reads, stop = [], threading.Event()

        def loop():
            while not stop.is_set():
                reads.append(timed_read(target))

        reader = threading.Thread(target=loop)
        reader.start()
        time.sleep(0.05)
        subprocess.run(
            [binary, "mount", "--upgrade", mount, "--state-dir", state],
            check=True, capture_output=True,
        )
        time.sleep(0.05)
        stop.set()
        reader.join()
        paused.append(max(reads))
        time.sleep(args.interval)


VIEW_LOOP = r"""
import json, os, statistics, time
starts, durations = [], []
while not os.path.exists("stop"):
    start = time.monotonic_ns()
    with open("a.txt", "rb") as f:
        f.read()
    end = time.monotonic_ns()
    starts.append(start)
    durations.append(end - start)
slow = [[s, d] for s, d in zip(starts, durations) if d > 500_000]
print(json.dumps({"median": statistics.median(durations), "reads": len(durations), "slow": slow}))
"""


def view_rounds(binary, mount, state, tmp, args, alive, paused):
    """SIGKILLs the server args.count times under a reader in a view."""
    work = os.path.join(tmp, "work")
    Path(work, "a.txt").write_text("hello\n")
    runner = subprocess.Popen(
        [binary, "run", "--mount", mount, "--", "python3", "-c", VIEW_LOOP],
        cwd=work, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
        env={**os.environ, "PERMFS_LOG": "error"},
    )
    time.sleep(1.5)
    kills = []
    for _ in range(args.count):
        pid = status(binary, mount, state)["server"]["pid"]
        kills.append(time.monotonic_ns())
        os.kill(pid, signal.SIGKILL)
        time.sleep(args.interval)
    Path(work, "stop").write_text("")
    out, _ = runner.communicate(timeout=60)
    if runner.returncode != 0:
        sys.exit(f"the reader in the view failed: {runner.returncode}")
    report = json.loads(out.decode().strip().splitlines()[-1])
    alive.append(report["median"])
    for kill in kills:
        overlapping = [d for s, d in report["slow"] if s <= kill + 1_000_000_000 and s + d >= kill]
        paused.append(max(overlapping, default=report["median"]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=20)
    # A server that dies within 1 s of its start is restarted after 50 ms
    # (the supervisor's crash-loop guard); --interval 0.2 measures that.
    parser.add_argument("--interval", type=float, default=1.2)
    parser.add_argument("--upgrade", action="store_true", help="time `permfs mount --upgrade` instead of a SIGKILL")
    parser.add_argument("--view", action="store_true", help="the reader is a program in a `permfs run` view")
    args = parser.parse_args()
    binary = str(permfs_binary())
    with tempfile.TemporaryDirectory() as tmp:
        mount, state = os.path.join(tmp, "mnt"), os.path.join(tmp, "state")
        os.mkdir(mount)
        config = os.path.join(tmp, "config.json")
        Path(config).write_text('{"permission": {"bash": "allow"}}')
        # The daemon's cwd is main's: the view's reader runs there.
        os.mkdir(os.path.join(tmp, "work"))
        daemon = subprocess.Popen(
            [binary, "mount", mount, "--config", config, "--state-dir", state],
            env={**os.environ, "PERMFS_LOG": "error"}, cwd=os.path.join(tmp, "work"),
        )
        try:
            target = os.path.join(mount, "sessions", "main", "session.json")
            deadline = time.time() + 10
            while not os.path.exists(target):
                if time.time() > deadline:
                    sys.exit("the mount did not come up")
                time.sleep(0.02)
            alive, paused = [], []
            if args.upgrade:
                upgrade_rounds(binary, mount, state, target, args, alive, paused)
            if args.view:
                view_rounds(binary, mount, state, tmp, args, alive, paused)
            for _ in range(0 if args.upgrade or args.view else args.count):
                for _ in range(5):
                    alive.append(timed_read(target))
                pid = status(binary, mount, state)["server"]["pid"]
                start = time.perf_counter_ns()
                os.kill(pid, signal.SIGKILL)
                with open(target, "rb") as f:
                    f.read()
                paused.append(time.perf_counter_ns() - start)
                time.sleep(args.interval)
            restarts = status(binary, mount, state)["restarts"]
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=20)
            if is_mounted(Path(mount)):
                subprocess.run(["umount", "-l", mount])
    print(machine())
    a, p = statistics.median(alive), statistics.median(paused)
    print(f"restarts {restarts}")
    where = "in the view" if args.view else "of session.json"
    print(f"read {where}, server alive: median {a / 1e3:.0f} us, p90 {pct(alive, 90) / 1e3:.0f} us")
    what = "longest read during an upgrade" if args.upgrade else "read from SIGKILL of the server"
    if args.view:
        what = "longest read in the view overlapping a SIGKILL"
    print(f"{what}: median {p / 1e6:.1f} ms, p90 {pct(paused, 90) / 1e6:.1f} ms, max {max(paused) / 1e6:.1f} ms")
    print(f"ratio {p / a:.0f}x")


if __name__ == "__main__":
    main()
