#!/usr/bin/env python3
"""What an idle daemon costs an ask: the same rule-answered ask through
`main/ask`, repeated with a pause before each.

    scripts/bench/idle_gap.py [--asks 200] [--gaps 0,1,3,10]

For each gap (ms), one process sleeps that long, then opens `ask`, writes
the request, reads the answer and closes, timing each step. A hook is a
fresh process a second or more after the last call, so it always pays the
longest gap's price: every round trip wakes a daemon thread that went to
sleep and then the caller, and on a VM a wake-up after idling costs far
more than one right after work (BENCHMARKS.md section 9).
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

CONFIG = {"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow"}}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--asks", type=int, default=200)
    parser.add_argument("--gaps", default="0,1,3,10")
    args = parser.parse_args()
    body = b.request_bytes("git status")
    print(f"machine: {b.machine()}")
    with b.Mount(config=CONFIG) as m:
        ask = str(m.main / "ask")
        for gap in [float(g) for g in args.gaps.split(",")]:
            rows = []
            for _ in range(args.asks):
                time.sleep(gap / 1000)
                t0 = time.perf_counter()
                fd = os.open(ask, os.O_RDWR)
                t1 = time.perf_counter()
                os.write(fd, body)
                t2 = time.perf_counter()
                os.read(fd, 65536)
                t3 = time.perf_counter()
                os.close(fd)
                t4 = time.perf_counter()
                rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0))
            med = [statistics.median(r[k] for r in rows) * 1e6 for k in range(5)]
            print(
                f"gap {gap:5.1f} ms: open {med[0]:5.0f}  write {med[1]:5.0f}  "
                f"read {med[2]:5.0f}  close {med[3]:4.0f}  whole {med[4]:5.0f} us (medians of {args.asks})"
            )


if __name__ == "__main__":
    main()
