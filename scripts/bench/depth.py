#!/usr/bin/env python3
"""Benchmark 5: an ask that climbs 64 sessions to a grant at the root.

    scripts/bench/depth.py [--depth 64] [--iterations 2000]

Spawns a chain main -> d1 -> d2 -> ... -> d64 (`spawn dK` written to the
ctl of d(K-1); every dK is non-interactive). The root gets recorded
authority for `make depth` without a person in the timed loop: d1 asks
{"surface":"bash","value":"make depth"} (rules: `ask`), the ask climbs to
main, and `allow session` is written to main's inbox entry, which records a
grant at main. Then asks for `make depth` from d1 (2 nodes judged: d1, main)
and from d64 (65 nodes judged) are answered by that grant after climbing.
Each iteration is create + write + close `<rid>.request` + open + read +
close `<rid>.response`, names resolved against a held fd of the asking
session's outbox (so the path walk through 64 levels is not timed), with
depth-1 and depth-64 asks interleaved. Reported: medians and p99 of each,
the ratio depth-64 / depth-1, and the per-hop cost.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="perf record the daemon during the timed loop")
    args = parser.parse_args()
    body = b.request_bytes("make depth")
    print(f"machine: {b.machine()}")

    with b.Mount() as m:
        session_fds = [m.session_fd()]  # index k = depth k (0 = main)
        for k in range(1, args.depth + 1):
            m.spawn(session_fds[-1], f"d{k}")
            session_fds.append(os.open(f"children/d{k}", os.O_RDONLY | os.O_DIRECTORY, dir_fd=session_fds[-1]))
        with open(f"session.json", "rb", opener=lambda p, f: os.open(p, f, dir_fd=session_fds[-1])) as f:
            deepest = json.load(f)
        print(f"chain: {deepest.get('id')!r} depth {deepest.get('depth')}")
        outbox = {k: os.open("outbox", os.O_RDONLY | os.O_DIRECTORY, dir_fd=session_fds[k]) for k in (1, args.depth)}

        # The grant: d1 asks, main's person answers `allow session`.
        b.submit(outbox[1], "seed", body)
        inbox_fd = os.open("inbox", os.O_RDONLY | os.O_DIRECTORY, dir_fd=session_fds[0])
        pending = b.wait_for(lambda: os.listdir(inbox_fd), 5, "the seed ask in main's inbox")
        fd = os.open(pending[0], os.O_WRONLY, dir_fd=inbox_fd)
        os.write(fd, b"allow session")
        os.close(fd)
        seed = json.loads(b.response(outbox[1], "seed"))
        assert seed["approved"] and seed["decidedBy"]["kind"] == "user", seed
        grants = os.listdir(os.open("grants", os.O_RDONLY | os.O_DIRECTORY, dir_fd=session_fds[0]))
        print(f"grant at main: {grants}")

        def ask(k, rid):
            fd = os.open(rid + ".request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=outbox[k])
            os.write(fd, body)
            os.close(fd)
            t_closed = b.now_ns()
            fd = os.open(rid + ".response", os.O_RDONLY, dir_fd=outbox[k])
            data = b.read_all(fd)
            os.close(fd)
            return data, t_closed

        for k in (1, args.depth):
            data = json.loads(ask(k, f"check{k}")[0])
            assert data["approved"] and data["decidedBy"]["kind"] == "session_approval", data
            assert len(data["hops"]) == k + 1, (k, len(data["hops"]))
        for i in range(args.warmup):
            ask(1, f"w1-{i}")
            ask(args.depth, f"wd-{i}")

        total = {1: [], args.depth: []}
        submit = {1: [], args.depth: []}
        bad = 0
        with b.perf_record(m.pid, "depth", args.profile):
            for i in range(args.iterations):
                for k in ((1, args.depth) if i % 2 == 0 else (args.depth, 1)):
                    t0 = b.now_ns()
                    data, t_closed = ask(k, f"t{k}-{i}")
                    t1 = b.now_ns()
                    total[k].append(t1 - t0)
                    submit[k].append(t_closed - t0)
                    if b'"approved": true' not in data or b'"session_approval"' not in data:
                        bad += 1
        if bad:
            raise SystemExit(f"{bad} asks were not answered by main's grant")
        size = {k: len(ask(k, f"size{k}")[0]) for k in (1, args.depth)}
        threads, rss = b.threads_and_rss(m.pid)
        for fd in list(outbox.values()) + session_fds + [inbox_fd]:
            os.close(fd)

    d = args.depth
    print(f"iterations: {args.iterations} per depth (after {args.warmup} warm-up), interleaved")
    print(f"{'asker':<10} {'hops':>5} {'round trip median':>18} {'p99':>10} {'submit (close) median':>22} {'response bytes':>15}")
    for k in (1, d):
        print(
            f"{'depth ' + str(k):<10} {k + 1:>5} {b.us(b.pct(total[k], 50)):>18} {b.us(b.pct(total[k], 99)):>10} "
            f"{b.us(b.pct(submit[k], 50)):>22} {size[k]:>15,}"
        )
    ratio = b.pct(total[d], 50) / b.pct(total[1], 50)
    ratio_submit = b.pct(submit[d], 50) / b.pct(submit[1], 50)
    per_hop = (b.pct(total[d], 50) - b.pct(total[1], 50)) / (d - 1)
    print(f"ratio depth {d} / depth 1: round trip {ratio:.2f}x (median), submit {ratio_submit:.2f}x; "
          f"about {b.us(per_hop)} per extra hop")
    print(f"daemon: {threads} threads, VmRSS {rss:.1f} MiB")
    b.summary(
        "depth",
        f"depth {d} {b.us(b.pct(total[d], 50))} vs depth 1 {b.us(b.pct(total[1], 50))} = {ratio:.2f}x "
        f"({b.us(per_hop)} per hop; response {size[d]:,} vs {size[1]:,} bytes)",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
