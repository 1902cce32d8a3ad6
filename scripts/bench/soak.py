#!/usr/bin/env python3
"""Soak: the daemon's memory over many big releases and many rule-answered asks.

    scripts/bench/soak.py [--askers 10000] [--rounds 20] [--rule-asks 200000]
                          [--procs 20] [--children 4] [--rule-procs 4] [--idle 5]

One mount, --rounds rounds. Each round is benchmark 4's round
(capacity.py's `one_round`, imported): --askers threads block on
`make build-N` (left at `ask` by the rules) from main and its --children
children, a prober asks `git status` every millisecond, and ONE
`allow session` releases them all. The asker threads read their answer and
close it, without removing the request, so each round leaves --askers
answered asks for the daemon to retain or forget.

After each round, --rule-asks / --rounds rule-answered asks (`git status`,
allowed by a rule) are made by --rule-procs processes, from every session
in turn; half of them in the two-file form (create `<rid>.request`, read
`<rid>.response`, `rm` the request), half in the one-descriptor form
(`open(outbox/<rid>, O_RDWR|O_CREAT|O_EXCL)`, write, read to EOF, close).
Every answer must be `approved`.

A thread samples the daemon's VmRSS (/proc/PID/status) every --sample-ms
(100 ms). Reported: the maximum over the soak (goal < 128 MiB), the RSS
after every round (its release and its rule asks done), after round 1
plus --idle seconds with nothing asked (the reference level), and after
the soak plus the same idle; goal: the last within 20 % of the reference. Quick iterations:
`--askers 2000 --rounds 5 --rule-asks 20000`.

Deterministic: the rounds, names and request bodies are fixed; only the
timing (and so the sampled peaks) varies with the machine.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402
import capacity  # noqa: E402

RSS_MAX_MIB = 128
RETURN_RATIO = 1.20


class Sampler(threading.Thread):
    """VmRSS of a process every `interval` seconds, labelled by phase."""

    def __init__(self, pid: int, interval: float):
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.phase = "start"
        self.samples: list[tuple[float, float, str]] = []
        self.stopped = threading.Event()

    def rss(self) -> float:
        return b.threads_and_rss(self.pid)[1]

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stopped.is_set():
            try:
                self.samples.append((time.monotonic() - t0, self.rss(), self.phase))
            except (OSError, KeyError, ValueError):
                return
            self.stopped.wait(self.interval)

    def peak(self, phase: str | None = None) -> float:
        values = [rss for _, rss, p in self.samples if phase is None or p == phase]
        return max(values) if values else float("nan")


def rule_asker(sessions, start: int, count: int, tag: str, out_path: str) -> None:
    """`count` rule-answered asks, alternating the two-file form (with the
    request removed) and the one-descriptor form, over every session."""
    outboxes = [os.open(f"{s}/outbox", os.O_RDONLY | os.O_DIRECTORY) for s in sessions]
    body = b.request_bytes("git status")
    denied = 0
    for i in range(start, start + count):
        outbox_fd = outboxes[i % len(outboxes)]
        rid = f"{tag}-{i}"
        if i % 2 == 0:
            b.submit(outbox_fd, rid, body)
            data = b.response(outbox_fd, rid)
            os.unlink(f"{rid}.request", dir_fd=outbox_fd)
        else:
            fd = os.open(rid, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=outbox_fd)
            try:
                os.write(fd, body)
                data = b.read_all(fd)
            finally:
                os.close(fd)
        if b'"approved": true' not in data:
            denied += 1
    with open(out_path, "w") as out:
        json.dump({"denied": denied}, out)


def rule_asks(m, sessions, count: int, procs: int, round_no: int) -> float:
    """Runs `count` rule-answered asks from `procs` processes; their rate."""
    t0 = time.monotonic()
    per = count // procs
    pids = []
    for p in range(procs):
        n = per + (count % procs if p == procs - 1 else 0)
        out = str(m.tmp / f"rule-{round_no}-{p}.json")
        pids.append((b.fork_child(rule_asker, sessions, p * per, n, f"g{round_no}", out), out))
    denied = 0
    for pid, out in pids:
        if b.reap(pid, timeout=1800) != 0:
            raise SystemExit(f"a rule asker of round {round_no} failed (see stderr)")
        with open(out) as f:
            denied += json.load(f)["denied"]
    if denied:
        raise SystemExit(f"{denied} rule-answered asks of round {round_no} were not approved")
    return count / (time.monotonic() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    capacity.add_asker_arguments(parser, rounds=20)
    parser.add_argument("--rule-asks", type=int, default=200000, help="rule-answered asks in all, spread over the rounds")
    parser.add_argument("--rule-procs", type=int, default=4)
    parser.add_argument("--sample-ms", type=float, default=100.0)
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of idle before the last reading")
    args = parser.parse_args()
    per_proc, nofile = capacity.asker_layout(args)
    print(f"machine: {b.machine()}")
    print(
        f"soak: {args.rounds} rounds of {args.askers} blocked askers ({args.procs} processes) released by one grant, "
        f"plus {args.rule_asks} rule-answered asks ({args.rule_procs} processes, half two-file with rm, half "
        f"one-descriptor); sessions main + {args.children}; RSS every {args.sample_ms:.0f} ms; RLIMIT_NOFILE {nofile}",
        flush=True,
    )

    rows = []
    with b.Mount() as m:
        sampler = Sampler(m.pid, args.sample_ms / 1000.0)
        sampler.start()
        sessions = capacity.spawn_children(m, args.children)
        start_rss = sampler.rss()
        per_round = args.rule_asks // args.rounds
        for r in range(1, args.rounds + 1):
            sampler.phase = f"round {r}"
            f = capacity.one_round(m, args, sessions, per_proc, r, False)
            released = sampler.rss()
            rate = rule_asks(m, sessions, per_round + (args.rule_asks % args.rounds if r == args.rounds else 0),
                             args.rule_procs, r)
            end = sampler.rss()
            if r == 1:
                # The reference level: after round 1 and the same idle as at the end.
                sampler.phase = "idle after round 1"
                time.sleep(args.idle)
                base_idle = sampler.rss()
            rows.append({
                "round": r, "before": f["rss0"], "waiting": f["rss1"], "released": released, "end": end,
                "peak": sampler.peak(f"round {r}"), "release_ms": f["last"] / 1e6, "rate": rate,
                "lost": f["probes_lost"], "busy": f["machine_busy"],
            })
            row = rows[-1]
            print(
                f"round {r:2}: VmRSS before {row['before']:.1f}, {args.askers} waiting {row['waiting']:.1f}, "
                f"released {row['released']:.1f}, after {per_round} rule asks {row['end']:.1f}, peak {row['peak']:.1f} MiB; "
                f"release {row['release_ms']:.0f} ms, rule asks {rate:.0f}/s, probes lost {row['lost']} "
                f"(machine {row['busy']:.0f}% busy during the release)",
                flush=True,
            )
        sampler.phase = "idle"
        time.sleep(args.idle)
        after = sampler.rss()
        sampler.stopped.set()
        sampler.join()
        outbox = len(os.listdir(m.main / "outbox"))

    peak = sampler.peak()
    base = base_idle
    ratio = after / base
    peak_ok = peak < RSS_MAX_MIB
    return_ok = ratio <= RETURN_RATIO
    print(f"VmRSS at start {start_rss:.1f} MiB; samples {len(sampler.samples)}; main's outbox lists {outbox} names at the end")
    print(f"max VmRSS over the soak: {peak:.1f} MiB ({'met' if peak_ok else 'MISSED'}: goal < {RSS_MAX_MIB} MiB)")
    print(
        f"after round 1 + {args.idle:.0f} s idle: {base:.1f} MiB (at once: {rows[0]['end']:.1f}); "
        f"after the soak + {args.idle:.0f} s idle: {after:.1f} MiB; ratio {ratio:.2f} "
        f"({'met' if return_ok else 'MISSED'}: goal <= {RETURN_RATIO:.2f})"
    )
    b.summary(
        "soak",
        f"{args.rounds} x {args.askers} blocked + {args.rule_asks} rule asks: max VmRSS {peak:.1f} MiB, after round 1 "
        f"{base:.1f}, after {after:.1f} MiB ({ratio:.2f}x); goals {'met' if peak_ok and return_ok else 'MISSED'}",
    )
    return 0 if peak_ok and return_ok else 1


if __name__ == "__main__":
    sys.exit(main())
