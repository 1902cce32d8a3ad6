#!/usr/bin/env python3
"""Benchmark 3: asks per second with 1, 4 and 16 concurrent asker processes.

    scripts/bench/throughput.py [--seconds 3] [--concurrency 1,4,16] [--paths]

Each asker is a separate process looping over recorded-authority asks:
create + write + close `outbox/<rid>.request` with {"surface":"bash",
"value":"git status"} (allowed by a rule), then open + read + close the
response; and, as a second form, the one-descriptor ask at the session's
`ask` file (open O_RDWR, write, read to EOF, close). The baseline is the
same processes looping over open + read + close of `MNT/README` on the
same mount; each round runs baseline, two-file, ask file in turn. All processes start together on a
pipe barrier and run for --seconds; the rate is completed operations /
elapsed. Each concurrency level gets a fresh mount (asks are kept by the
daemon, so a shared mount would make later levels pay for earlier ones).
Names are resolved against held directory fds (one lookup per open);
--paths uses absolute paths instead. The daemon's CPU use (utime+stime
delta / wall time, out of nproc cores) shows where the time goes.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402


def worker(kind, mnt, tag, seconds, use_paths, go_r, out_w):
    root_fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    outbox = f"{mnt}/sessions/main/outbox"
    outbox_fd = os.open(outbox, os.O_RDONLY | os.O_DIRECTORY)
    body = b.request_bytes("git status")
    readme = f"{mnt}/README"
    session_fd = os.open(f"{mnt}/sessions/main", os.O_RDONLY | os.O_DIRECTORY)
    os.read(go_r, 1)
    count = bad = 0
    start = b.now_ns()
    end = start + int(seconds * 1e9)
    while True:
        if kind == "baseline":
            fd = os.open(readme, os.O_RDONLY) if use_paths else os.open("README", os.O_RDONLY, dir_fd=root_fd)
            b.read_all(fd)
            os.close(fd)
        elif kind == "askfile":
            fd = os.open(f"{mnt}/sessions/main/ask", os.O_RDWR) if use_paths else os.open("ask", os.O_RDWR, dir_fd=session_fd)
            os.write(fd, body)
            data = b.read_all(fd)
            os.close(fd)
            if b'"approved": true' not in data:
                bad += 1
        else:
            rid = f"{tag}-{count}"
            if use_paths:
                fd = os.open(f"{outbox}/{rid}.request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            else:
                fd = os.open(rid + ".request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=outbox_fd)
            os.write(fd, body)
            os.close(fd)
            if use_paths:
                fd = os.open(f"{outbox}/{rid}.response", os.O_RDONLY)
            else:
                fd = os.open(rid + ".response", os.O_RDONLY, dir_fd=outbox_fd)
            data = b.read_all(fd)
            os.close(fd)
            if b'"approved": true' not in data:
                bad += 1
        count += 1
        t = b.now_ns()
        if t >= end:
            break
    os.write(out_w, f"{count} {t - start} {bad}\n".encode().ljust(64))


_runs = [0]


def run(m, kind, concurrency, seconds, use_paths):
    _runs[0] += 1
    go_r, go_w = os.pipe()
    out_r, out_w = os.pipe()
    pids = [
        b.fork_child(worker, kind, str(m.mnt), f"r{_runs[0]}p{i}", seconds, use_paths, go_r, out_w) for i in range(concurrency)
    ]
    time.sleep(0.3)  # let every worker reach the barrier
    cpu0, wall0 = b.cpu_seconds(m.pid), time.monotonic()
    os.write(go_w, b"g" * concurrency)
    total = bad = 0
    elapsed = []
    for _ in range(concurrency):
        count, ns, wrong = map(int, b.read_record(out_r, 64, pids, seconds + 60).split())
        total += count
        bad += wrong
        elapsed.append(ns)
    cpu1, wall1 = b.cpu_seconds(m.pid), time.monotonic()
    for pid in pids:
        b.reap(pid)
    for fd in (go_r, go_w, out_r, out_w):
        os.close(fd)
    if bad:
        raise SystemExit(f"{bad} asks were not approved")
    rate = total / (max(elapsed) / 1e9)
    return rate, total, (cpu1 - cpu0) / (wall1 - wall0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--rounds", type=int, default=3, help="baseline/ask runs alternated per level; medians reported")
    parser.add_argument("--paths", action="store_true", help="absolute paths instead of directory fds")
    parser.add_argument("--profile", action="store_true", help="perf record the daemon during the last ask run at the highest concurrency")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    print(f"machine: {b.machine()}")
    print(
        f"{args.rounds} rounds x {args.seconds} s per kind and level (alternated; medians), "
        f"{'absolute paths' if args.paths else 'directory fds'}, fresh mount per level"
    )
    print(
        f"{'procs':>5} {'form':>8} {'baseline ops/s':>15} {'asks/s':>10} {'ratio':>7} {'per-round ratios':>22} "
        f"{'daemon CPU base/asks':>21} {'RSS after':>10}"
    )
    parts = []
    forms = ["ask", "askfile"]
    for n in levels:
        with b.Mount() as m:
            run(m, "baseline", 1, 0.2, args.paths)  # warm up every path
            for form in forms:
                run(m, form, 1, 0.2, args.paths)
            bases, base_cpu = [], []
            asks = {form: [] for form in forms}
            ask_cpu = {form: [] for form in forms}
            for r in range(args.rounds):
                rate, _, cpu = run(m, "baseline", n, args.seconds, args.paths)
                bases.append(rate)
                base_cpu.append(cpu)
                last = r == args.rounds - 1
                for form in forms:
                    profiled = args.profile and n == max(levels) and last
                    with b.perf_record(m.pid, f"throughput-{form}-{n}", profiled):
                        rate, _, cpu = run(m, form, n, args.seconds, args.paths)
                    asks[form].append(rate)
                    ask_cpu[form].append(cpu)
            _, rss = b.threads_and_rss(m.pid)
        base = b.pct(bases, 50)
        for form in forms:
            ask = b.pct(asks[form], 50)
            ratio = ask / base
            rounds = ",".join(f"{a / c:.2f}" for a, c in zip(asks[form], bases))
            label = "two-file" if form == "ask" else "ask file"
            print(
                f"{n:>5} {label:>8} {base:>15,.0f} {ask:>10,.0f} {ratio:>6.2f}x {rounds:>22} "
                f"{b.pct(base_cpu, 50) * 100:>9.0f}% / {b.pct(ask_cpu[form], 50) * 100:>4.0f}% {rss:>6.1f} MiB"
            )
            parts.append(f"{n} {label}: {ask:,.0f} asks/s vs {base:,.0f} reads/s = {ratio:.2f}x")
    print("daemon CPU: share of one core (the machine has nproc cores); RSS after every ask of the level")
    b.summary("throughput", "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
