#!/usr/bin/env python3
"""Benchmark 2: live-decision wake-up vs a 250 ms polling file protocol.

    scripts/bench/wakeup.py [--samples 300] [--ref-samples 40]

permfs: an asker process submits {"surface":"bash","value":"make build"}
(left at `ask`, so it waits in main's inbox) and blocks in read() on its
response. Once /proc shows the asker asleep in the FUSE request wait
(wchan request_wait_answer), the decider (this process) writes `allow` to
the inbox entry through an fd it opened beforehand. Both take
CLOCK_MONOTONIC timestamps: the decider just before write() and just after
it returns, the asker just after read() returns (sent back over a pipe).
Reported: asker-return minus decider-write-return (the brief's metric; it
can be negative, because the daemon answers the parked read before it
answers the write) and asker-return minus decider-write-start (the whole
decision-to-wake path). Goal: median under 1 ms.

Reference: the file protocol of pi-permission-system, simulated on tmpfs
(/dev/shm): the reader polls for the response file every 250 ms; the writer
writes it (open+write+close) at a random phase; latency = reader noticed
(after opening and reading it) minus writer's close returning.
"""

import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

GOAL_NS = 1_000_000
POLL_S = 0.250


def asker(outbox_path: str, go_r: int, ready_w: int, done_w: int, samples: int) -> None:
    outbox_fd = os.open(outbox_path, os.O_RDONLY | os.O_DIRECTORY)
    body = b.request_bytes("make build")
    for i in range(samples):
        if not os.read(go_r, 1):
            return
        rid = f"wake{i}"
        b.submit(outbox_fd, rid, body)
        fd = os.open(f"{rid}.response", os.O_RDONLY, dir_fd=outbox_fd)
        os.write(ready_w, b"r")
        first = os.read(fd, 65536)  # blocks until the decision
        t1 = b.now_ns()
        rest = b.read_all(fd)
        os.close(fd)
        ok = b'"approved": true' in first + rest
        os.write(done_w, f"{t1} {int(ok)}\n".encode().ljust(32))


def run_permfs(samples: int, warmup: int):
    with b.Mount() as m:
        inbox = m.main / "inbox"
        go_r, go_w = os.pipe()
        ready_r, ready_w = os.pipe()
        done_r, done_w = os.pipe()
        total = samples + warmup
        pid = b.fork_child(asker, str(m.main / "outbox"), go_r, ready_w, done_w, total)
        task = f"/proc/{pid}/task/{pid}"
        inbox_fd = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)
        from_return, from_start, write_ns = [], [], []
        for i in range(total):
            os.write(go_w, b"g")
            os.read(ready_r, 1)
            # The ask is in the inbox once its request was closed; wait until
            # the asker sleeps in read() on the response.
            entries = b.wait_for(lambda: os.listdir(inbox), 5, "the ask in the inbox", 0.0005)
            b.wait_for(lambda: b.blocked_in_fuse(task), 5, "the asker blocked in read()", 0.0005)
            time.sleep(0.002)
            fd = os.open(entries[0], os.O_WRONLY, dir_fd=inbox_fd)
            t0 = b.now_ns()
            os.write(fd, b"allow")
            t0b = b.now_ns()
            os.close(fd)
            line = os.read(done_r, 32).decode().split()
            t1, ok = int(line[0]), line[1] == "1"
            if not ok:
                raise SystemExit(f"sample {i}: the asker's response was not an approval")
            if i >= warmup:
                from_return.append(t1 - t0b)
                from_start.append(t1 - t0)
                write_ns.append(t0b - t0)
        b.reap(pid)
        os.close(inbox_fd)
        return from_return, from_start, write_ns


def reference_reader(path: str, noticed_w: int, samples: int) -> None:
    for _ in range(samples):
        while True:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                time.sleep(POLL_S)
                continue
            b.read_all(fd)
            t1 = b.now_ns()
            os.close(fd)
            os.unlink(path)
            os.write(noticed_w, f"{t1}\n".encode().ljust(24))
            break


def run_reference(samples: int):
    shm = tempfile.mkdtemp(prefix="permfs-bench-ref-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    path = os.path.join(shm, "r.response")
    try:
        noticed_r, noticed_w = os.pipe()
        pid = b.fork_child(reference_reader, path, noticed_w, samples)
        rng = random.Random(1)
        latencies = []
        body = b'{"approved": true, "state": "approved"}\n'
        for _ in range(samples):
            time.sleep(rng.uniform(0, POLL_S))
            tmp = path + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, body)
            os.close(fd)
            os.rename(tmp, path)  # atomic publish, as a careful writer does
            t0 = b.now_ns()
            t1 = int(os.read(noticed_r, 24).decode())
            latencies.append(t1 - t0)
        b.reap(pid)
        return latencies
    finally:
        import shutil

        b.kill_children()
        shutil.rmtree(shm, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--ref-samples", type=int, default=40)
    args = parser.parse_args()
    print(f"machine: {b.machine()}")
    from_return, from_start, write_ns = run_permfs(args.samples, args.warmup)
    reference = run_reference(args.ref_samples)

    def row(label, values, unit=b.us):
        print(
            f"{label:<44} median {unit(b.pct(values, 50)):>11}  p90 {unit(b.pct(values, 90)):>11}  "
            f"p99 {unit(b.pct(values, 99)):>11}  min {unit(min(values)):>11}  max {unit(max(values)):>11}"
        )

    print(f"permfs samples: {len(from_return)} (after {args.warmup} warm-up); reference samples: {len(reference)}")
    row("permfs: write() returned -> read() returned", from_return)
    row("permfs: write() called -> read() returned", from_start)
    row("permfs: the decider's write() itself", write_ns)
    negative = sum(1 for v in from_return if v < 0)
    print(f"permfs: {negative}/{len(from_return)} readers returned before the decider's write() did")
    row("reference: 250 ms poll on tmpfs, write -> noticed", reference, b.ms)
    med = b.pct(from_start, 50)
    ratio = b.pct(reference, 50) / max(med, 1)
    print(
        f"ratio reference/permfs (medians, permfs from write() called): {ratio:,.0f}x faster; "
        f"goal median < 1 ms: {'met' if med < GOAL_NS and b.pct(from_return, 50) < GOAL_NS else 'MISSED'}"
    )
    b.summary(
        "wakeup",
        f"median {b.us(b.pct(from_return, 50))} after write() returns, {b.us(med)} from write() called "
        f"(p99 {b.us(b.pct(from_start, 99))}); 250 ms poll on tmpfs median {b.ms(b.pct(reference, 50))} "
        f"= {ratio:,.0f}x slower; goal < 1 ms {'met' if med < GOAL_NS else 'MISSED'}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
