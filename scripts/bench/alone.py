#!/usr/bin/env python3
"""Two permfs binaries, one mounted at a time: what a change cost the ask.

    scripts/bench/alone.py --old /path/to/old/permfs [--new target/release/permfs]
                           [--asks 3000] [--repetitions 5] [--two-file | --person]

versus.py mounts both binaries at once; on this 2-core VM the two daemons
then compete for the CPUs, and work one does after answering (a `RELEASE`
handled after `close` returned, a held journal delete) slows the other's
next call, so its ratios measure contention as much as cost. Here each
repetition mounts the old binary alone, runs `--asks` rule-answered
one-descriptor asks (outbox/<rid> opened read-write: write `git status`,
read the answer, close) from one thread, unmounts, then does the same
with the new one (the order alternates between repetitions); with
--two-file, the two-file ask instead (create, write and close
<rid>.request, then open, read and close <rid>.response); with --person,
a person-answered exchange in one thread (write `make deploy`, left at
`ask`; list main's inbox until its entry is there; write `allow` to it;
read the answer; close). For each it
reports the median ask, and what the daemon (supervisor and server, every
thread) spent per ask: CPU time (user + system) and context switches.
Prints per-repetition figures, medians over repetitions, and new/old
ratios.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

CONFIG = {"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow"}}}


def usage(pids: list[int]) -> tuple[int, int]:
    """(CPU ticks, context switches) of every thread of `pids`."""
    ticks = switches = 0
    for pid in pids:
        for task in os.listdir(f"/proc/{pid}/task"):
            stat = open(f"/proc/{pid}/task/{task}/stat").read().rsplit(")", 1)[1].split()
            ticks += int(stat[11]) + int(stat[12])
            status = open(f"/proc/{pid}/task/{task}/status").read()
            switches += sum(int(n) for n in re.findall(r"ctxt_switches:\s+(\d+)", status))
    return ticks, switches


def exchange(outbox: int, rid: str, body: bytes) -> bytes:
    fd = os.open(rid, os.O_RDWR | os.O_CREAT, dir_fd=outbox)
    os.write(fd, body)
    answer = b.read_all(fd)
    os.close(fd)
    return answer


def two_file(outbox: int, rid: str, body: bytes) -> bytes:
    b.submit(outbox, rid, body)
    return b.response(outbox, rid)


def person(outbox: int, rid: str, _body: bytes, inbox: str) -> bytes:
    fd = os.open(rid, os.O_RDWR | os.O_CREAT, dir_fd=outbox)
    os.write(fd, b.request_bytes("make deploy"))
    while not (entries := os.listdir(inbox)):
        pass
    with open(os.path.join(inbox, entries[0]), "w") as decision:
        decision.write("allow")
    answer = b.read_all(fd)
    os.close(fd)
    return answer


def one(binary: str, asks: int, form) -> dict:
    os.environ["PERMFS_BIN"] = binary
    body = b.request_bytes("git status")
    with b.Mount(config=CONFIG, limits=False) as m:
        outbox = os.open(m.main / "outbox", os.O_RDONLY | os.O_DIRECTORY)
        inbox = str(m.main / "inbox")

        def ask(outbox, rid, body):
            if form is person:
                return person(outbox, rid, body, inbox)
            return form(outbox, rid, body)

        pids = b.daemon_pids(m.pid)
        for i in range(200):  # warm-up
            ask(outbox, f"w{i}", body)
        time.sleep(0.1)
        ticks0, switches0 = usage(pids)
        times = []
        answer = b""
        for i in range(asks):
            start = time.perf_counter_ns()
            answer = ask(outbox, f"x{i}", body)
            times.append(time.perf_counter_ns() - start)
        # What the daemon does after the last close (its RELEASE) counts.
        time.sleep(0.1)
        ticks1, switches1 = usage(pids)
        os.close(outbox)
    if json.loads(answer).get("outcome") != "allow":
        sys.exit(f"{binary}: the ask was not allowed: {answer[:200]!r}")
    hz = os.sysconf("SC_CLK_TCK")
    return {
        "ask": statistics.median(times) / 1e3,
        "cpu": (ticks1 - ticks0) / hz / asks * 1e6,
        "switches": (switches1 - switches0) / asks,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", default="target/release/permfs")
    parser.add_argument("--asks", type=int, default=3000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--two-file", action="store_true", help="the two-file ask, not the exchange")
    parser.add_argument("--person", action="store_true", help="a person-answered exchange")
    args = parser.parse_args()
    ask = two_file if args.two_file else person if args.person else exchange
    form = "two-file" if args.two_file else "person" if args.person else "exchange"
    print(b.machine())
    runs = {"old": [], "new": []}
    for rep in range(args.repetitions):
        busy = b.wait_for_quiet()
        order = ("old", "new") if rep % 2 == 0 else ("new", "old")
        for side in order:
            binary = args.old if side == "old" else args.new
            runs[side].append(one(binary, args.asks, ask))
        print(
            f"repetition {rep + 1}: machine busy {busy:.0f}% before; "
            + "; ".join(
                f"{side} ask {runs[side][-1]['ask']:.1f} us, daemon cpu {runs[side][-1]['cpu']:.1f} us, "
                f"{runs[side][-1]['switches']:.2f} switches"
                for side in ("old", "new")
            )
        )
    med = {
        side: {key: statistics.median(r[key] for r in runs[side]) for key in ("ask", "cpu", "switches")}
        for side in runs
    }
    print(f"median of {args.repetitions} repetitions x {args.asks} asks, one mount at a time:")
    for side in ("old", "new"):
        m = med[side]
        print(f"  {side}: ask {m['ask']:.1f} us, daemon cpu {m['cpu']:.1f} us per ask, {m['switches']:.2f} switches per ask")
    print(
        f"summary: alone ({form}): new/old ask {med['new']['ask'] / med['old']['ask']:.2f}x, "
        f"daemon cpu {med['new']['cpu'] / med['old']['cpu']:.2f}x, "
        f"switches {med['new']['switches'] / med['old']['switches']:.2f}x"
    )


if __name__ == "__main__":
    main()
