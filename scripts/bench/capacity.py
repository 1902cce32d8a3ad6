#!/usr/bin/env python3
"""Benchmark 4: 10,000 askers blocked at once, released by one decision.

    scripts/bench/capacity.py [--askers 10000] [--procs 20] [--children 4]

main (interactive) spawns --children non-interactive children. --procs
client processes start --askers threads in total (threading.stack_size
256 KiB); each thread asks {"surface":"bash","value":"make build"} (left at
`ask` by the rules) from main or one of the children (round robin; the
children's asks climb to main), then blocks in read() on its response.
The benchmark waits until /proc shows every asker thread asleep in the FUSE
request wait (wchan request_wait_answer) and every ask in main's inbox,
then records the daemon's Threads and VmRSS (/proc/PID/status) against the
values before any ask, and its CPU use while they all wait. Then it writes
ONE `allow session` to one inbox entry (a grant at main for `make build`,
which covers every other pending ask) and measures, with CLOCK_MONOTONIC
timestamps, how long the decider's write() took (the daemon answers every
parked read inside it) and when the last of the readers returned.
Three rounds (commands `make build`, `make build-2`, ...) on one mount; the
release figures are medians. A prober asks `git status` (rule-allowed), alternately
through the two-file form and the `ask` file,
every millisecond to show what other asks see during the release.
Goals: the daemon's thread count does not grow with the askers; VmRSS
under 100 MiB.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

RSS_GOAL_MIB = 100


def client(index, sessions, per_proc, result_dir, ready_w, command, tag):
    threading.stack_size(256 * 1024)
    outboxes = [os.open(f"{s}/outbox", os.O_RDONLY | os.O_DIRECTORY) for s in sessions]
    body = b.request_bytes(command)
    lock = threading.Lock()
    state = {"ready": 0, "errors": []}
    returned = [0] * per_proc
    approved = [False] * per_proc
    all_ready = threading.Event()

    def asker(slot):
        try:
            global_index = index * per_proc + slot
            outbox_fd = outboxes[global_index % len(outboxes)]
            rid = f"{tag}-{global_index}"
            b.submit(outbox_fd, rid, body)
            fd = os.open(f"{rid}.response", os.O_RDONLY, dir_fd=outbox_fd)
            with lock:
                state["ready"] += 1
                if state["ready"] == per_proc:
                    all_ready.set()
            first = os.read(fd, 65536)  # blocks until the grant answers it
            returned[slot] = b.now_ns()
            data = first + b.read_all(fd)
            os.close(fd)
            approved[slot] = b'"approved": true' in data
        except BaseException as error:  # noqa: BLE001
            with lock:
                state["errors"].append(repr(error))
                state["ready"] += 1
                if state["ready"] == per_proc:
                    all_ready.set()

    threads = [threading.Thread(target=asker, args=(i,), daemon=True) for i in range(per_proc)]
    for thread in threads:
        thread.start()
    all_ready.wait()
    os.write(ready_w, f"{index} {len(state['errors'])}\n".encode().ljust(32))
    for thread in threads:
        thread.join()
    with open(os.path.join(result_dir, f"{tag}-{index}.json"), "w") as out:
        json.dump({"returned": returned, "approved": approved, "errors": state["errors"][:5]}, out)


def prober(outbox_path, stop_r, out_path, tag):
    """Rule-allowed asks (`git status`) from main in a loop, to see whether
    other asks stall while the grant releases everyone."""
    import select

    outbox_fd = os.open(outbox_path, os.O_RDONLY | os.O_DIRECTORY)
    session_fd = os.open(os.path.dirname(outbox_path), os.O_RDONLY | os.O_DIRECTORY)
    body = b.request_bytes("git status")
    samples = []
    i = 0
    while not select.select([stop_r], [], [], 0)[0]:
        # Alternately the two-file ask and the one-descriptor `ask` file.
        form = "askfile" if i % 2 else "twofile"
        t0 = b.now_ns()
        # When each step ended: a slow probe says where it waited.
        steps = []
        try:
            if form == "twofile":
                b.submit(outbox_fd, f"{tag}-probe{i}", body)
                steps.append(("create+write+close", b.now_ns()))
                data = b.response(outbox_fd, f"{tag}-probe{i}")
                steps.append(("response", b.now_ns()))
            else:
                fd = os.open("ask", os.O_RDWR, dir_fd=session_fd)
                steps.append(("open", b.now_ns()))
                os.write(fd, body)
                steps.append(("write", b.now_ns()))
                data = b.read_all(fd)
                steps.append(("read", b.now_ns()))
                os.close(fd)
                steps.append(("close", b.now_ns()))
            ok = b'"approved": true' in data
        except FileNotFoundError:
            # Answered, then forgotten before it was read: the daemon keeps
            # at most 10,000 answers and the release adds 10,000 newer ones.
            ok = None
        ends = [t0] + [at for _, at in steps]
        spent = [(name, ends[k + 1] - ends[k]) for k, (name, _) in enumerate(steps)]
        samples.append((t0, b.now_ns() - t0, ok, form, spent))
        i += 1
        time.sleep(0.001)
    with open(out_path, "w") as out:
        json.dump(samples, out)


def one_round(m, args, sessions, per_proc, round_no, profile):
    """Blocks --askers readers, releases them with one grant; returns figures."""
    command = "make build" if round_no == 1 else f"make build-{round_no}"
    tag = f"r{round_no}"
    result_dir = m.tmp / "results"
    result_dir.mkdir(exist_ok=True)
    threads0, rss0 = b.threads_and_rss(m.pid)
    ready_r, ready_w = os.pipe()
    t_start = time.monotonic()
    pids = [
        b.fork_child(client, i, sessions, per_proc, str(result_dir), ready_w, command, tag) for i in range(args.procs)
    ]
    errors = 0
    for _ in range(args.procs):
        errors += int(b.read_record(ready_r, 32, pids, 600).split()[1])
    submitted = time.monotonic() - t_start
    if errors:
        raise SystemExit(f"{errors} askers failed before blocking (see stderr)")

    def blocked():
        count = 0
        for pid in pids:
            for tid in os.listdir(f"/proc/{pid}/task"):
                if tid != str(pid) and b.blocked_in_fuse(f"/proc/{pid}/task/{tid}"):
                    count += 1
        return count

    b.wait_for(lambda: blocked() >= args.askers, 300, "every asker blocked in read()", 0.2)
    all_blocked = time.monotonic() - t_start
    t0 = time.monotonic()
    inbox = os.listdir(m.main / "inbox")
    ls_inbox = time.monotonic() - t0
    if len(inbox) != args.askers:
        raise SystemExit(f"main's inbox has {len(inbox)} asks, expected {args.askers}")
    time.sleep(1.0)
    threads1, rss1 = b.threads_and_rss(m.pid)
    with b.perf_record(m.pid, "capacity-waiting", profile):
        cpu0, w0 = b.cpu_seconds(m.pid), time.monotonic()
        time.sleep(5.0)
        idle_cpu = (b.cpu_seconds(m.pid) - cpu0) / (time.monotonic() - w0)

    # A prober asks `git status` (allowed by a rule) every millisecond from
    # 1 s before the decision until everyone has returned.
    stop_r, stop_w = os.pipe()
    probe_out = m.tmp / f"{tag}-probes.json"
    probe_pid = b.fork_child(prober, str(m.main / "outbox"), stop_r, str(probe_out), tag)
    time.sleep(1.0)

    inbox_fd = os.open(m.main / "inbox", os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(sorted(inbox)[0], os.O_WRONLY, dir_fd=inbox_fd)
    busy0 = b.cpu_totals()
    with b.perf_record(m.pid, "capacity-release", profile):
        t_write = b.now_ns()
        os.write(fd, b"allow session")
        t_written = b.now_ns()
        os.close(fd)
        for pid in pids:
            b.reap(pid, timeout=600)
    machine_busy = b.cpu_totals_busy(busy0)
    time.sleep(0.2)
    os.write(stop_w, b"s")
    b.reap(probe_pid)
    os.close(inbox_fd)
    for fd_ in (stop_r, stop_w, ready_r, ready_w):
        os.close(fd_)
    with open(probe_out) as f:
        probes = json.load(f)
    returned, approved, failures = [], 0, []
    for i in range(args.procs):
        with open(result_dir / f"{tag}-{i}.json") as f:
            data = json.load(f)
        returned += data["returned"]
        approved += sum(data["approved"])
        failures += data["errors"]
    if failures or approved != args.askers:
        raise SystemExit(f"only {approved}/{args.askers} askers were approved; errors: {failures[:3]}")
    if not all(ok for _, _, ok, _, _ in probes if ok is not None):
        raise SystemExit("a probe ask was not approved")
    lost = sum(1 for _, _, ok, _, _ in probes if ok is None)
    wake = [t - t_write for t in returned]
    before = [lat for t0_, lat, _, _, _ in probes if t0_ + lat < t_write]
    # The release lasts until its last reader returned (the decider's
    # write returns after the first chunk; the rest go on in the background).
    t_released = max(returned + [t_written])
    overlapping = [(lat, form, spent) for t0_, lat, _, form, spent in probes if t0_ < t_released and t0_ + lat > t_write]
    during = [lat for lat, _, _ in overlapping]
    worst_by_form = {
        form: max((lat for lat, f, _ in overlapping if f == form), default=float("nan")) for form in ("twofile", "askfile")
    }
    slowest = sorted(overlapping, key=lambda o: -o[0])[:3]
    return {
        "command": command,
        "threads0": threads0, "rss0": rss0, "threads1": threads1, "rss1": rss1,
        "submitted": submitted, "all_blocked": all_blocked, "ls_inbox": ls_inbox, "idle_cpu": idle_cpu,
        "write": t_written - t_write, "first": min(wake), "second": sorted(wake)[1] if len(wake) > 1 else float("nan"), "median": b.pct(wake, 50),
        "p99": b.pct(wake, 99), "last": max(wake), "machine_busy": machine_busy,
        "probe_before": b.pct(before, 50) if before else float("nan"),
        "probe_worst": max(during) if during else float("nan"),
        "probe_during": b.pct(during, 50) if during else float("nan"),
        "probe_during_p90": b.pct(during, 90) if during else float("nan"),
        "probe_count": len(during),
        "probe_worst_twofile": worst_by_form["twofile"],
        "probe_worst_askfile": worst_by_form["askfile"],
        "grants": os.listdir(m.main / "grants"), "left": len(os.listdir(m.main / "inbox")),
        "probes_lost": lost,
        "probe_over_goal": sum(1 for lat in during if lat > 20e6),
        "probe_slowest": [(form, lat, spent) for lat, form, spent in slowest],
    }


def add_asker_arguments(parser, rounds: int) -> None:
    """The blocked askers' shape, shared with soak.py."""
    parser.add_argument("--askers", type=int, default=10000)
    parser.add_argument("--procs", type=int, default=20)
    parser.add_argument("--children", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=rounds, help="block-and-release rounds on one mount")


def asker_layout(args) -> tuple[int, int]:
    """Threads per process, and the open-file limit raised to hold them."""
    if args.askers % args.procs:
        raise SystemExit("--askers must be a multiple of --procs")
    per_proc = args.askers // args.procs
    return per_proc, b.raise_nofile(per_proc + 256)


def spawn_children(m, children: int) -> list[str]:
    """main plus `children` non-interactive children: the askers' sessions."""
    main_fd = m.session_fd()
    names = [f"c{i}" for i in range(children)]
    for name in names:
        m.spawn(main_fd, name)
    os.close(main_fd)
    return [str(m.main)] + [str(m.main / "children" / n) for n in names]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_asker_arguments(parser, rounds=3)
    parser.add_argument("--profile", action="store_true", help="perf record the daemon while everyone waits, and while the grant releases them (last round)")
    args = parser.parse_args()
    per_proc, nofile = asker_layout(args)
    print(f"machine: {b.machine()}")
    print(f"askers: {args.askers} = {args.procs} processes x {per_proc} threads; "
          f"sessions: main + {args.children} children; RLIMIT_NOFILE {nofile}; {args.rounds} rounds")

    rounds = []
    with b.Mount() as m:
        sessions = spawn_children(m, args.children)
        for r in range(1, args.rounds + 1):
            f = one_round(m, args, sessions, per_proc, r, args.profile and r == args.rounds)
            rounds.append(f)
            print(
                f"round {r} ({f['command']!r}): submitted in {f['submitted']:.2f} s, all blocked after "
                f"{f['all_blocked']:.2f} s; os.listdir(inbox) {f['ls_inbox'] * 1000:.0f} ms"
            )
            print(
                f"  daemon: threads {f['threads0']} -> {f['threads1']} while {args.askers} wait; VmRSS "
                f"{f['rss0']:.1f} -> {f['rss1']:.1f} MiB (+{(f['rss1'] - f['rss0']) * 1024 / args.askers:.2f} KiB per ask); "
                f"CPU while they wait {f['idle_cpu'] * 100:.0f}% of one core"
            )
            print(
                f"  one 'allow session' ({f['grants'][-1] if f['grants'] else '?'}; inbox left {f['left']}): "
                f"decider's write() {b.ms(f['write'])}; readers returned first {b.ms(f['first'])} "
                f"(the decided ask; the first the grant released: {b.ms(f['second'])}), "
                f"median {b.ms(f['median'])}, p99 {b.ms(f['p99'])}, last {b.ms(f['last'])} "
                f"(machine {f['machine_busy']:.0f}% busy meanwhile)"
            )
            print(
                f"  another ask (`git status`, rule-allowed, from main): median {b.us(f['probe_before'])} before; "
                f"the {f['probe_count']} overlapping the release: median {b.ms(f['probe_during'])}, "
                f"p90 {b.ms(f['probe_during_p90'])}, worst {b.ms(f['probe_worst'])} "
                f"(two-file {b.ms(f['probe_worst_twofile'])}, ask file {b.ms(f['probe_worst_askfile'])})"
                + (f"; {f['probes_lost']} probe answer(s) forgotten before they were read (ENOENT)"
                   if f["probes_lost"] else "")
            )
            print(
                f"  overlapping probes over 20 ms: {f['probe_over_goal']}; the slowest, step by step: "
                + "; ".join(
                    f"{form} {b.ms(lat)} = " + " + ".join(f"{name} {b.ms(ns)}" for name, ns in spent)
                    for form, lat, spent in f["probe_slowest"]
                )
            )
        threads_end, rss_end = b.threads_and_rss(m.pid)

    first = rounds[0]
    med = lambda key: b.pct([f[key] for f in rounds], 50)  # noqa: E731
    flat = all(f["threads1"] == f["threads0"] for f in rounds)
    rss_ok = first["rss1"] < RSS_GOAL_MIB
    print(f"daemon at the end: {threads_end} threads, VmRSS {rss_end:.1f} MiB")
    print(
        f"medians over {len(rounds)} rounds: decider's write() {b.ms(med('write'))}, first released by the grant {b.ms(med('second'))}, last reader {b.ms(med('last'))}, "
        f"median reader {b.ms(med('median'))}, other ask during the release {b.ms(med('probe_worst'))}"
    )
    print(
        f"threads {first['threads0']} -> {first['threads1']} with {args.askers} waiting: "
        f"{'flat (met)' if flat else 'GREW (missed)'}; VmRSS {first['rss1']:.1f} MiB in round 1: "
        f"{'met' if rss_ok else 'MISSED'} (goal < {RSS_GOAL_MIB} MiB)"
    )
    b.summary(
        "capacity",
        f"{args.askers} blocked: daemon threads {first['threads0']} -> {first['threads1']}, VmRSS "
        f"{first['rss0']:.1f} -> {first['rss1']:.1f} MiB, CPU while waiting {first['idle_cpu'] * 100:.0f}%; "
        f"one grant released all in {b.ms(med('last'))} (median of {len(rounds)}; decider write {b.ms(med('write'))}); "
        f"goals {'met' if flat and rss_ok else 'MISSED'}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
