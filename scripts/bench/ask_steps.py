#!/usr/bin/env python3
"""Where a two-file ask's time goes, one system call at a time.

    scripts/bench/ask_steps.py [--iterations 3000] [--warmup 300] [--profile]

Alternates, on one mount and through held directory fds, a static read of
`README` (open, read, read to EOF, close) and a two-file ask with the
client's `rm` (create + write + close `<rid>.request` with a rule-allowed
`git status`, open + read + read to EOF + close `<rid>.response`, unlink
the request), timing each call. Prints the median of every call and the
ratio of the two sums: roundtrip.py's `withrm` figure taken apart, so a
change to one request shows where it lands.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

STATIC = ("open", "read", "read to EOF", "close")
ASK = (
    "create request",
    "write",
    "close",
    "open response",
    "read",
    "read to EOF",
    "close response",
    "unlink request",
)


def main() -> int:
    args = b.round_trip_args(__doc__, 3000)
    body = b.request_bytes("git status")
    clock = time.perf_counter_ns
    print(f"machine: {b.machine()}")
    with b.Mount(limits=False) as m:
        root_fd = b.dir_fd(m.mnt)
        outbox_fd = b.dir_fd(m.main / "outbox")

        def static() -> list[int]:
            t0 = clock()
            fd = os.open("README", os.O_RDONLY, dir_fd=root_fd)
            t1 = clock()
            os.read(fd, 65536)
            t2 = clock()
            os.read(fd, 65536)
            t3 = clock()
            os.close(fd)
            t4 = clock()
            return [t1 - t0, t2 - t1, t3 - t2, t4 - t3]

        def ask(rid: str) -> list[int]:
            t0 = clock()
            fd = os.open(rid + ".request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=outbox_fd)
            t1 = clock()
            os.write(fd, body)
            t2 = clock()
            os.close(fd)
            t3 = clock()
            fd = os.open(rid + ".response", os.O_RDONLY, dir_fd=outbox_fd)
            t4 = clock()
            data = os.read(fd, 65536)
            t5 = clock()
            os.read(fd, 65536)
            t6 = clock()
            os.close(fd)
            t7 = clock()
            os.unlink(rid + ".request", dir_fd=outbox_fd)
            t8 = clock()
            if b'"outcome": "allow"' not in data:
                raise SystemExit(f"unexpected answer: {data[:300]!r}")
            return [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t8 - t7]

        for i in range(args.warmup):
            static()
            ask(f"w{i}")
        static_ns: list[list[int]] = [[] for _ in STATIC]
        ask_ns: list[list[int]] = [[] for _ in ASK]
        with b.perf_record(m.pid, "ask_steps", args.profile):
            for i in range(args.iterations):
                for column, value in zip(static_ns, static()):
                    column.append(value)
                for column, value in zip(ask_ns, ask(f"s{i}")):
                    column.append(value)
        os.close(root_fd)
        os.close(outbox_fd)

    def show(title: str, names: tuple, columns: list[list[int]]) -> float:
        print(title)
        total = 0.0
        for name, column in zip(names, columns):
            median = statistics.median(column) / 1000
            total += median
            print(f"  {name:<16} {median:8.1f} us")
        print(f"  {'sum of medians':<16} {total:8.1f} us")
        return total

    static_total = show("static README:", STATIC, static_ns)
    ask_total = show("two-file ask with rm:", ASK, ask_ns)
    b.summary(
        "ask_steps",
        f"two-file ask with rm {ask_total:.1f} us vs static read {static_total:.1f} us "
        f"= {ask_total / static_total:.2f}x (sums of per-call medians, {args.iterations} iterations)",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
