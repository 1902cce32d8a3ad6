#!/usr/bin/env python3
"""Benchmark 1: the recorded-authority round trip vs a plain file read.

    scripts/bench/roundtrip.py [--iterations 5000] [--profile]

Round trip: create + write + close `outbox/<rid>.request` with
{"surface":"bash","value":"git status"} (a rule allows it, so the ask is
resolved inside close), then open + read to EOF + close `<rid>.response`.
Baseline: open + read to EOF + close `MNT/README` on the same mount.

Three variants; every iteration runs all six operations (rotating order) so
drift on a shared machine hits every column alike:
  dirfd     names resolved against a held directory fd (outbox/ and the mount
            root): one lookup per open on both sides  <- the headline
  paths     absolute paths, as `cat`/`echo >` use them: sessions/main/outbox/
            adds three lookups per open (the mount's entry TTL is zero)
  exchange  the one-descriptor ask: open outbox/<rid> O_RDWR|O_CREAT|O_EXCL
            (dirfd), write, read the answer, close
  askfile   the one-descriptor ask at the session's fixed `ask` file: open
            it O_RDWR (dirfd of the session; the name is cached, no
            lookup), write, read the answer, close  <- issue 10's goal
            (<= 1.5x the baseline)
  withrm    dirfd plus the client's `rm` of its request (issue 10's goal:
            <= 3.0x the baseline)
The same Python loop on tmpfs bounds the interpreter's own overhead.
Goal: round trip median <= 2.5x the baseline median.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

GOAL = 2.5
# Issue 10's goals for the one-descriptor forms and the two-file ask with its rm.
GOALS = {"exchange": 1.5, "askfile": 1.5, "withrm": 3.0}


def _exchange(outbox_fd: int, rid: str, body: bytes) -> bytes:
    """The one-descriptor ask: create, write, read the answer, close."""
    fd = os.open(rid, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=outbox_fd)
    os.write(fd, body)
    data = b.read_all(fd)
    os.close(fd)
    return data


def _askfile(session_fd: int, body: bytes) -> bytes:
    """The one-descriptor ask at the fixed `ask` file: open, write, read, close."""
    fd = os.open("ask", os.O_RDWR, dir_fd=session_fd)
    os.write(fd, body)
    data = b.read_all(fd)
    os.close(fd)
    return data


def count_fuse_requests(body: bytes) -> dict:
    """FUSE requests the daemon sees per operation (fuser's debug log)."""
    import collections
    import re
    import time

    saved = os.environ.get("PERMFS_LOG")
    os.environ["PERMFS_LOG"] = "fuser=debug"
    counts = {}
    try:
        with b.Mount() as m:
            root_fd = os.open(m.mnt, os.O_RDONLY | os.O_DIRECTORY)
            outbox_fd = os.open(m.main / "outbox", os.O_RDONLY | os.O_DIRECTORY)
            session_fd = os.open(m.main, os.O_RDONLY | os.O_DIRECTORY)
            outbox = m.main / "outbox"
            ops = {
                "baseline dirfd": lambda i: b.read_all_close(os.open("README", os.O_RDONLY, dir_fd=root_fd)),
                "round trip dirfd": lambda i: (b.submit(outbox_fd, f"c{i}", body), b.response(outbox_fd, f"c{i}")),
                "round trip with rm": lambda i: (
                    b.submit(outbox_fd, f"m{i}", body),
                    b.response(outbox_fd, f"m{i}"),
                    os.unlink(f"m{i}.request", dir_fd=outbox_fd),
                ),
                "baseline paths": lambda i: b.read_all_close(os.open(m.mnt / "README", os.O_RDONLY)),
                "round trip paths": lambda i: (
                    b.read_all_close(os.open(outbox / f"p{i}.request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), body),
                    b.read_all_close(os.open(outbox / f"p{i}.response", os.O_RDONLY)),
                ),
                "exchange dirfd": lambda i: _exchange(outbox_fd, f"x{i}", body),
                "askfile dirfd": lambda i: _askfile(session_fd, body),
            }
            log = m.tmp / "daemon.log"
            for i, (name, op) in enumerate(ops.items()):
                op(100 + i)  # warm (the first write asks for security.capability once)
                time.sleep(0.3)
                before = len(log.read_bytes().splitlines())
                op(i)
                time.sleep(0.3)  # RELEASE is sent asynchronously
                lines = log.read_bytes().splitlines()[before:]
                kinds = collections.Counter(
                    m_.group(1).decode() for m_ in (re.search(rb"FUSE\(\s*\d+\) ino \S+ (\w+)", l) for l in lines) if m_
                )
                counts[name] = kinds
            os.close(root_fd)
            os.close(outbox_fd)
            os.close(session_fd)
    finally:
        if saved is None:
            os.environ.pop("PERMFS_LOG", None)
        else:
            os.environ["PERMFS_LOG"] = saved
    return counts


def main() -> int:
    args = b.round_trip_args(__doc__, 5000)
    body = b.request_bytes("git status")
    now = b.now_ns
    print(f"machine: {b.machine()}")

    with b.Mount() as m:
        root_fd = b.dir_fd(m.mnt)
        outbox_fd = b.dir_fd(m.main / "outbox")
        session_fd = os.open(m.main, os.O_RDONLY | os.O_DIRECTORY)
        readme_path = str(m.mnt / "README")
        outbox_path = str(m.main / "outbox")

        def baseline_dirfd():
            fd = os.open("README", os.O_RDONLY, dir_fd=root_fd)
            b.read_all(fd)
            os.close(fd)

        def baseline_paths():
            fd = os.open(readme_path, os.O_RDONLY)
            b.read_all(fd)
            os.close(fd)

        def ask_dirfd(rid):
            fd = os.open(rid + ".request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=outbox_fd)
            os.write(fd, body)
            os.close(fd)
            fd = os.open(rid + ".response", os.O_RDONLY, dir_fd=outbox_fd)
            data = b.read_all(fd)
            os.close(fd)
            return data

        def ask_dirfd_rm(rid):
            """The two-file ask as a careful client makes it: rm of its request at the end."""
            data = ask_dirfd(rid)
            os.unlink(rid + ".request", dir_fd=outbox_fd)
            return data

        def ask_exchange(rid):
            fd = os.open(rid, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=outbox_fd)
            os.write(fd, body)
            data = b.read_all(fd)
            os.close(fd)
            return data

        def ask_paths(rid):
            fd = os.open(f"{outbox_path}/{rid}.request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, body)
            os.close(fd)
            fd = os.open(f"{outbox_path}/{rid}.response", os.O_RDONLY)
            data = b.read_all(fd)
            os.close(fd)
            return data

        first = ask_dirfd("check")
        assert b'"outcome": "allow"' in first and b'"kind": "rule"' in first, first[:400]
        for i in range(args.warmup):
            baseline_dirfd()
            ask_dirfd(f"w{i}")
            baseline_paths()
            ask_paths(f"wp{i}")
            ask_exchange(f"wx{i}")
            _askfile(session_fd, body)

        # All four operations in every iteration, in rotating order, so
        # drift (a shared VM) hits every column alike.
        ops = [
            ("dirfd", "baseline", lambda i: baseline_dirfd()),
            ("dirfd", "round", lambda i: ask_dirfd(f"d{i}")),
            ("paths", "baseline", lambda i: baseline_paths()),
            ("paths", "round", lambda i: ask_paths(f"p{i}")),
            ("exchange", "baseline", lambda i: baseline_dirfd()),
            ("exchange", "round", lambda i: ask_exchange(f"x{i}")),
            ("askfile", "baseline", lambda i: baseline_dirfd()),
            ("askfile", "round", lambda i: _askfile(session_fd, body)),
            ("withrm", "baseline", lambda i: baseline_dirfd()),
            ("withrm", "round", lambda i: ask_dirfd_rm(f"r{i}")),
        ]
        times = {(v, k): [] for v, k, _ in ops}
        bad = 0
        with b.perf_record(m.pid, "roundtrip", args.profile):
            for i in range(args.iterations):
                for j in range(len(ops)):
                    variant, kind, op = ops[(i + j) % len(ops)]
                    t0 = now()
                    data = op(i)
                    times[(variant, kind)].append(now() - t0)
                    if kind == "round" and b'"approved": true' not in data:
                        bad += 1
        if bad:
            raise SystemExit(f"{bad} round trips were not approved")
        results = {v: (times[(v, "baseline")], times[(v, "round")]) for v in ("dirfd", "paths", "exchange", "askfile", "withrm")}

        # The daemon's own CPU per operation (user / kernel), each kind alone.
        cpu_per_op = {}
        for kind, op in (("baseline", lambda i: baseline_dirfd()), ("round", lambda i: ask_dirfd(f"cpu{i}"))):
            n = max(2000, args.iterations // 2)
            u0, s0 = b.cpu_split(m.pid)
            for i in range(n):
                op(i)
            u1, s1 = b.cpu_split(m.pid)
            cpu_per_op[kind] = ((u1 - u0) / n * 1e9, (s1 - s0) / n * 1e9)
        retained = args.iterations * 2 + args.warmup * 2 + 1 + max(2000, args.iterations // 2)
        threads, rss = b.threads_and_rss(m.pid)
        os.close(root_fd)
        os.close(outbox_fd)
        os.close(session_fd)

    # The same loops on tmpfs: what the interpreter and the VFS cost alone.
    shm = tempfile.mkdtemp(prefix="permfs-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        with open(os.path.join(shm, "README"), "wb") as f:
            f.write(b"x" * 1800)
        dfd = os.open(shm, os.O_RDONLY | os.O_DIRECTORY)
        tb, ta = [], []
        for i in range(args.iterations):
            t0 = now()
            fd = os.open("README", os.O_RDONLY, dir_fd=dfd)
            b.read_all(fd)
            os.close(fd)
            t1 = now()
            fd = os.open(f"{i}.request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
            os.write(fd, body)
            os.close(fd)
            fd = os.open(f"{i}.request", os.O_RDONLY, dir_fd=dfd)
            b.read_all(fd)
            os.close(fd)
            t2 = now()
            tb.append(t1 - t0)
            ta.append(t2 - t1)
        os.close(dfd)
    finally:
        import shutil

        shutil.rmtree(shm, ignore_errors=True)

    counts = count_fuse_requests(body)
    print("FUSE requests per operation (fuser debug log of a separate mount):")
    for name, kinds in counts.items():
        detail = " ".join(f"{k}x{v}" if v > 1 else k for k, v in kinds.items())
        print(f"  {name:<17} {sum(kinds.values()):>3}: {detail}")
    print(f"iterations: {args.iterations} (after {args.warmup} warm-up), each running all ten operations")
    print(f"{'variant':<8} {'op':<10} {'median':>10} {'p99':>10} {'p99.9':>10} {'mean':>10}")
    for variant, (base_ns, ask_ns) in results.items():
        for label, values in (("baseline", base_ns), ("round", ask_ns)):
            print(
                f"{variant:<8} {label:<10} {b.us(b.pct(values, 50)):>10} {b.us(b.pct(values, 99)):>10} "
                f"{b.us(b.pct(values, 99.9)):>10} {b.us(sum(values) / len(values)):>10}"
            )
    print(f"tmpfs    baseline   {b.us(b.pct(tb, 50)):>10} {b.us(b.pct(tb, 99)):>10}   (same Python loop)")
    print(f"tmpfs    round      {b.us(b.pct(ta, 50)):>10} {b.us(b.pct(ta, 99)):>10}   (create+write+close+open+read+close)")
    for variant, (base_ns, ask_ns) in results.items():
        ratio = b.pct(ask_ns, 50) / b.pct(base_ns, 50)
        ratio99 = b.pct(ask_ns, 99) / b.pct(base_ns, 99)
        paired = b.pct([a / c for a, c in zip(ask_ns, base_ns)], 50)
        tenth = len(ask_ns) // 10
        drift = b.pct(ask_ns[-tenth:], 50) / b.pct(ask_ns[:tenth], 50)
        goal = GOALS.get(variant, GOAL)
        print(
            f"ratio {variant}: median {ratio:.2f}x, p99 {ratio99:.2f}x, median of per-iteration ratios {paired:.2f}x "
            f"(goal <= {goal}x: {'met' if ratio <= goal else 'MISSED'}); "
            f"round-trip median last/first tenth {drift:.2f}x"
        )
    for kind, (user, system) in cpu_per_op.items():
        print(f"daemon CPU per {'README read' if kind == 'baseline' else 'round trip'}: {b.us(user)} user + "
              f"{b.us(system)} kernel = {b.us(user + system)} (utime/stime over a separate loop of each alone)")
    print(f"daemon after {retained} asks: {threads} threads, VmRSS {rss:.1f} MiB")
    base_ns, ask_ns = results["dirfd"]
    pb, pa = results["paths"]
    xb, xa = results["exchange"]
    r = b.pct(ask_ns, 50) / b.pct(base_ns, 50)
    rp = b.pct(pa, 50) / b.pct(pb, 50)
    rx = b.pct(xa, 50) / b.pct(xb, 50)
    fb, fa = results["askfile"]
    rf = b.pct(fa, 50) / b.pct(fb, 50)
    wb, wa = results["withrm"]
    rw = b.pct(wa, 50) / b.pct(wb, 50)
    b.summary(
        "roundtrip",
        f"median {b.us(b.pct(ask_ns, 50))} vs {b.us(b.pct(base_ns, 50))} = {r:.2f}x (dirfd), "
        f"{rp:.2f}x (paths), {rx:.2f}x (one-descriptor exchange), {rf:.2f}x (ask file), "
        f"{rw:.2f}x (two-file with rm); p99 {b.us(b.pct(ask_ns, 99))} vs {b.us(b.pct(base_ns, 99))}; "
        f"goal <= {GOAL}x {'met' if r <= GOAL else 'MISSED'} (dirfd), {'met' if rp <= GOAL else 'MISSED'} (paths)",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
