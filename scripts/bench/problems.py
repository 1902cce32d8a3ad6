#!/usr/bin/env python3
"""Reproductions of the performance problems listed in BENCHMARKS.md.

    scripts/bench/problems.py memory-rm   [--asks 40000]   # 1: VmRSS when every request is rm'd
    scripts/bench/problems.py memory-keep [--asks 30000]   # 2: VmRSS when answers are kept
    scripts/bench/problems.py memory-deep [--asks 14000]   # 2: the same, asks from depth 64
    scripts/bench/problems.py watcher [--parked 1000,10000] [--samples 10]
                                                          # 3: daemon CPU with N parked readers,
                                                          #    EINTR latency of a signalled reader
    scripts/bench/problems.py ls-outbox                   # 5: `ls outbox` time vs entries
    scripts/bench/problems.py self-lookup [--procs 16]    # 8: asks about paths inside the mount
                                                          #    itself (a hang before facts::fence)
    scripts/bench/problems.py all                         # 1-5

Problems 4 (an ask during a big release), 6 (round trip) and 7 (depth) are
measured by capacity.py, roundtrip.py and depth.py. Each subcommand mounts a
fresh daemon (benchlib.Mount: same config, binary and cleanup as the
benchmarks).
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402


def rss(pid):
    return b.threads_and_rss(pid)[1]


# ------------------------------------------------------------ 1 and 2: memory


def memory(asks, every, remove):
    label = "rm each request" if remove else "answers kept"
    body = b.request_bytes("git status")
    with b.Mount() as m:
        outbox_fd = os.open(m.main / "outbox", os.O_RDONLY | os.O_DIRECTORY)
        points = [(0, rss(m.pid))]
        t0 = time.monotonic()
        for i in range(1, asks + 1):
            rid = f"m{i}"
            b.submit(outbox_fd, rid, body)
            data = b.response(outbox_fd, rid)
            if b'"approved": true' not in data:
                raise SystemExit(f"ask {i} not approved: {data[:200]!r}")
            if remove:
                os.unlink(f"{rid}.request", dir_fd=outbox_fd)
            if i % every == 0:
                points.append((i, rss(m.pid)))
        elapsed = time.monotonic() - t0
        retained = len(os.listdir(m.main / "outbox")) // 2  # a fresh open: a held fd lists what it saw at opendir
        os.close(outbox_fd)
    line = " -> ".join(f"{n // 1000}k: {v:.1f}" for n, v in points)
    print(f"memory ({label}): VmRSS MiB {line}; {retained} asks listed in outbox at the end; "
          f"{asks / elapsed:,.0f} asks/s")
    b.summary(f"memory-{'rm' if remove else 'keep'}", f"VmRSS {line} MiB over {asks:,} asks ({label}); "
              f"{retained} retained")


def memory_deep(asks, depth=64, every=2000):
    """Retained answers of asks that climbed `depth` sessions (hops make
    each response about 20x larger)."""
    body = b.request_bytes("make depth")
    with b.Mount() as m:
        fds = [m.session_fd()]
        for k in range(1, depth + 1):
            m.spawn(fds[-1], f"d{k}")
            fds.append(os.open(f"children/d{k}", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        outbox_fd = os.open("outbox", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1])
        inbox_fd = os.open("inbox", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[0])
        b.submit(outbox_fd, "seed", body)
        pending = b.wait_for(lambda: os.listdir(m.main / "inbox"), 5, "the seed ask in main's inbox")
        fd = os.open(pending[0], os.O_WRONLY, dir_fd=inbox_fd)
        os.write(fd, b"allow session")
        os.close(fd)
        size = len(b.response(outbox_fd, "seed"))
        points = [(0, rss(m.pid))]
        for i in range(1, asks + 1):
            b.submit(outbox_fd, f"m{i}", body)
            b.response(outbox_fd, f"m{i}")
            if i % every == 0:
                points.append((i, rss(m.pid)))
        retained = len(os.listdir("/proc/self/fd/%d" % outbox_fd)) // 2  # a fresh open of the same directory
        for fd in fds + [outbox_fd, inbox_fd]:
            os.close(fd)
    line = " -> ".join(f"{n / 1000:g}k: {v:.1f}" for n, v in points)
    print(f"memory (asks from depth {depth}, responses {size:,} B, answers kept): VmRSS MiB {line}; "
          f"{retained} asks listed in the outbox at the end")
    b.summary("memory-deep", f"VmRSS {line} MiB over {asks:,} asks from depth {depth}; {retained} retained")


# ------------------------------------------------------------ 3: the signal watcher


def parker(index, outbox, per_proc, command, ready_w):
    """per_proc threads, each with a pending ask, blocked reading its response."""
    threading.stack_size(256 * 1024)
    outbox_fd = os.open(outbox, os.O_RDONLY | os.O_DIRECTORY)
    body = b.request_bytes(command)
    ready = threading.Semaphore(0)

    def one(slot):
        rid = f"park{index}-{slot}"
        b.submit(outbox_fd, rid, body)
        fd = os.open(f"{rid}.response", os.O_RDONLY, dir_fd=outbox_fd)
        ready.release()
        try:
            os.read(fd, 65536)
        except OSError:
            pass

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(per_proc)]
    for t in threads:
        t.start()
    for _ in range(per_proc):
        ready.acquire()
    os.write(ready_w, f"{index}".encode().ljust(16))
    for t in threads:
        t.join()


class Interrupted(Exception):
    pass


def signalled_reader(outbox, rid, ready_w, result_w):
    """Blocks on its own pending ask; SIGUSR1 raises, and the time the
    read() was interrupted is reported."""

    def handler(_signum, _frame):
        raise Interrupted()

    signal.signal(signal.SIGUSR1, handler)
    outbox_fd = os.open(outbox, os.O_RDONLY | os.O_DIRECTORY)
    b.submit(outbox_fd, rid, b.request_bytes("make eintr"))
    fd = os.open(f"{rid}.response", os.O_RDONLY, dir_fd=outbox_fd)
    os.write(ready_w, b"r")
    try:
        os.read(fd, 65536)
        t = 0
    except Interrupted:
        t = b.now_ns()
    os.write(result_w, str(t).encode().ljust(32))


def thread_signalled_reader(outbox, rid, ready_w, result_w):
    """A second thread blocks on its own pending ask (libc read through
    ctypes, so an EINTR is seen, not retried); the parent sends SIGUSR1 to
    that thread alone (tgkill) and the time the read() failed is reported."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    signal.signal(signal.SIGUSR1, lambda *_: None)
    outbox_fd = os.open(outbox, os.O_RDONLY | os.O_DIRECTORY)
    b.submit(outbox_fd, rid, b.request_bytes("make eintr"))
    fd = os.open(f"{rid}.response", os.O_RDONLY, dir_fd=outbox_fd)
    result = {}

    def reader():
        os.write(ready_w, str(threading.get_native_id()).encode().ljust(16))
        buffer = ctypes.create_string_buffer(65536)
        n = libc.read(fd, buffer, 65536)
        result["t"] = b.now_ns() if n < 0 and ctypes.get_errno() == 4 else 0

    thread = threading.Thread(target=reader)
    thread.start()
    thread.join()
    os.write(result_w, str(result.get("t", 0)).encode().ljust(32))


def eintr_latency(m, samples, directed=False):
    """Process-directed (kill) or, with directed, thread-directed (tgkill)
    SIGUSR1 to a blocked reader: ns until its read() failed with EINTR."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    out = []
    for s in range(samples):
        ready_r, ready_w = os.pipe()
        result_r, result_w = os.pipe()
        target = thread_signalled_reader if directed else signalled_reader
        pid = b.fork_child(target, str(m.main / "outbox"), f"eintr{time.monotonic_ns()}-{s}",
                           ready_w, result_w)
        record = b.read_record(ready_r, 16 if directed else 1, [pid], 60)
        tid = int(record.strip()) if directed else pid
        b.wait_for(lambda: b.blocked_in_fuse(f"/proc/{pid}/task/{tid}"), 30, "the signalled reader blocked", 0.002)
        time.sleep(0.05 + 0.0137 * s)  # spread the signal over the watcher's tick phase
        t0 = b.now_ns()
        if directed:
            libc.syscall(234, pid, tid, signal.SIGUSR1)  # tgkill (x86_64)
        else:
            os.kill(pid, signal.SIGUSR1)
        t1 = int(b.read_record(result_r, 32, [pid], 30).strip())
        b.reap(pid)
        for fd in (ready_r, ready_w, result_r, result_w):
            os.close(fd)
        if t1 == 0:
            raise SystemExit("the signalled reader was answered instead of interrupted")
        out.append(t1 - t0)
    return out


def watcher(parked_list, samples, procs_max=20):
    results = []
    for parked in [0] + parked_list:
        with b.Mount() as m:
            pids = []
            if parked:
                procs = min(procs_max, max(1, parked // 500))
                per = parked // procs
                b.raise_nofile(per + 256)
                ready_r, ready_w = os.pipe()
                pids = [b.fork_child(parker, i, str(m.main / "outbox"), per, "make park", ready_w)
                        for i in range(procs)]
                for _ in range(procs):
                    b.read_record(ready_r, 16, pids, 600)

                def blocked():
                    n = 0
                    for pid in pids:
                        for tid in os.listdir(f"/proc/{pid}/task"):
                            if tid != str(pid) and b.blocked_in_fuse(f"/proc/{pid}/task/{tid}"):
                                n += 1
                    return n

                b.wait_for(lambda: blocked() >= procs * per, 300, "every parked reader blocked", 0.2)
                parked = procs * per
            time.sleep(1.0)
            c0, w0 = b.cpu_seconds(m.pid), time.monotonic()
            time.sleep(5.0)
            cpu = (b.cpu_seconds(m.pid) - c0) / (time.monotonic() - w0)
            lat = eintr_latency(m, samples)
            tlat = eintr_latency(m, samples, directed=True)
            results.append((parked, cpu, lat, tlat))
            print(f"{parked:>6} parked readers: daemon CPU {cpu * 100:.1f}% of a core; EINTR after a signal: "
                  f"median {b.ms(b.pct(lat, 50))}, max {b.ms(max(lat))} ({len(lat)} samples); "
                  f"after a signal to the thread (tgkill): median {b.ms(b.pct(tlat, 50))}, max {b.ms(max(tlat))}",
                  flush=True)
    b.summary("watcher", "; ".join(
        f"{p} parked: CPU {c * 100:.1f}%, EINTR median {b.pct(l, 50) / 1e6:.1f} ms max {max(l) / 1e6:.1f} ms, "
        f"thread-directed median {b.pct(t, 50) / 1e6:.1f} ms max {max(t) / 1e6:.1f} ms"
        for p, c, l, t in results))


# ------------------------------------------------------------ 5: ls outbox


def time_ls(m, path, reps=3):
    walls, cpus = [], []
    for _ in range(reps):
        c0 = b.cpu_seconds(m.pid)
        t0 = time.monotonic()
        out = subprocess.run(["ls", str(path)], capture_output=True, check=True).stdout
        walls.append(time.monotonic() - t0)
        cpus.append(b.cpu_seconds(m.pid) - c0)
    return len(out.splitlines()), b.pct(walls, 50), b.pct(cpus, 50)


def ls_outbox(answered_steps, pending_steps):
    rows = []
    with b.Mount() as m:
        outbox = m.main / "outbox"
        outbox_fd = os.open(outbox, os.O_RDONLY | os.O_DIRECTORY)
        body = b.request_bytes("git status")
        done = 0
        for target in answered_steps:
            while done < target:
                b.submit(outbox_fd, f"a{done}", body)
                b.response(outbox_fd, f"a{done}")
                done += 1
            n, wall, cpu = time_ls(m, outbox)
            rows.append((f"{target:,} answered asks submitted", n, wall, cpu))
            print(f"  {rows[-1][0]}: ls lists {n:,} entries in {wall * 1000:.1f} ms (daemon CPU {cpu * 1000:.0f} ms)",
                  flush=True)
        os.close(outbox_fd)
    with b.Mount() as m:
        outbox = m.main / "outbox"
        outbox_fd = os.open(outbox, os.O_RDONLY | os.O_DIRECTORY)
        body = b.request_bytes("make pending")
        done = 0
        for target in pending_steps:
            while done < target:
                b.submit(outbox_fd, f"p{done}", body)
                done += 1
            n, wall, cpu = time_ls(m, outbox)
            rows.append((f"{target:,} pending asks", n, wall, cpu))
            print(f"  {rows[-1][0]}: ls lists {n:,} entries in {wall * 1000:.1f} ms (daemon CPU {cpu * 1000:.0f} ms)",
                  flush=True)
        os.close(outbox_fd)
    b.summary("ls-outbox", "; ".join(f"{n:,} entries {w * 1000:.0f} ms" for _, n, w, _ in rows))


# ------------------------------------------------------------ 8: self-lookup


def self_lookup(procs, seconds=4.0):
    """Forked processes ask, in a loop, about paths under the mount itself.
    Before `facts::fence`, each ask made a FUSE handler look inside its own
    mount and wait for another handler: all of them soon did, and the
    daemon hung. A stuck run is freed by aborting the FUSE connection."""
    import json

    with b.Mount() as m:
        outbox = m.main / "outbox"
        # FUSE names a connection by its device (major 0): read it now,
        # while the mount still answers.
        connection = os.minor(os.stat(m.mnt).st_dev)
        pids = []
        for p in range(procs):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    end = time.time() + seconds
                    i = 0
                    while time.time() < end:
                        path = m.mnt / "sessions" / "main" / "children" / f"c{p}" / "d" / "x"
                        body = json.dumps({"tool": "read", "input": {"path": str(path)}}).encode()
                        name = outbox / f"s{p}-{i}.request"
                        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                        os.write(fd, body)
                        os.close(fd)
                        os.unlink(name)
                        i += 1
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
        time.sleep(seconds + 4)
        stuck = [pid for pid in pids if os.waitpid(pid, os.WNOHANG) == (0, 0)]
        print(f"self-lookup: {procs} processes asking about paths under the mount for {seconds:.0f} s: "
              f"{procs - len(stuck)} finished, {len(stuck)} stuck", flush=True)
        if stuck:
            print("summary: self-lookup: HUNG (the daemon waits on its own mount)", flush=True)
            with open(f"/sys/fs/fuse/connections/{connection}/abort", "w") as abort:
                abort.write("1")
        else:
            print("summary: self-lookup: every asker finished", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["memory-rm", "memory-keep", "memory-deep", "watcher", "ls-outbox", "self-lookup", "all"])
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--asks", type=int, default=None)
    parser.add_argument("--parked", default="1000,10000")
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    print(f"machine: {b.machine()}", flush=True)
    what = args.what
    if what in ("memory-rm", "all"):
        memory(args.asks or 40000, 10000, remove=True)
    if what in ("memory-keep", "all"):
        memory(args.asks or 30000, 10000, remove=False)
    if what in ("memory-deep", "all"):
        memory_deep(args.asks or 14000)
    if what in ("watcher", "all"):
        watcher([int(x) for x in args.parked.split(",") if x], args.samples)
    if what in ("ls-outbox", "all"):
        ls_outbox([5000, 10000, 20000, 40000], [20000, 40000])
    if what == "self-lookup":
        self_lookup(args.procs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
