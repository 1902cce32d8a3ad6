#!/usr/bin/env python3
"""Two permfs binaries side by side: what a change cost the ask.

    scripts/bench/versus.py --old /path/to/old/permfs [--new target/release/permfs]
                            [--iterations 2000] [--repetitions 3]
                            [--command 'git status']

Mounts both binaries at once (same config, same machine, same moment) and,
in every iteration, runs on each mount in rotating order:
  read    open + read + close of MNT/README (the baseline of that mount)
  ask     the two-file ask: create + write + close outbox/<rid>.request,
          open + read + close <rid>.response (a rule allows it)
and on both mounts also
  exchange  the one-descriptor ask (outbox/<rid>, O_RDWR: write, read, close)
  person    (with --person) a person-answered one-descriptor ask, in one
            thread: write `make deploy` (left at `ask`), list main's inbox
            until its entry is there, write `allow` to it, read the answer
            (what the journal adds to an ask that waits: its pending row
            and its answer)
The request is the bash line `--command` (rules allow `git *` and `cat *`;
a line with paths, such as `cat /etc/hosts ./src/x ../y`, times the path
facts: symlinks and canonical forms). Names are resolved against held
directory fds. Each repetition reports
medians; the summary is the median over repetitions of each figure, with
the machine's busy share before each repetition (a busy machine makes every
figure noisier, not one side slower: the sides are interleaved). The two
mounts are not equal even with one binary in both (a few per cent either
way, more on a busy VM): run a comparison both ways round (--old A --new B,
then --old B --new A) and report both.
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

CONFIG = {"permission": {"*": "ask", "path": {"*": "allow"}, "bash": {"*": "ask", "git *": "allow", "cat *": "allow"}}}


def mount_with(binary: str) -> b.Mount:
    os.environ["PERMFS_BIN"] = binary
    # Both sides without `limits` (an older binary does not know the key;
    # a repetition stays within the default bounds).
    return b.Mount(config=CONFIG, limits=False)


def one_repetition(old_bin: str, new_bin: str, iterations: int, warmup: int, rep: int, command: str,
                   person: bool = False) -> dict:
    body = b.request_bytes(command)
    person_body = b.request_bytes("make deploy")
    now = b.now_ns
    with mount_with(old_bin) as old, mount_with(new_bin) as new:
        sides = {}
        for name, m in (("old", old), ("new", new)):
            sides[name] = (
                os.open(m.mnt, os.O_RDONLY | os.O_DIRECTORY),
                os.open(m.main / "outbox", os.O_RDONLY | os.O_DIRECTORY),
            )
        inboxes = {"old": old.main / "inbox", "new": new.main / "inbox"}

        def read(side):
            root_fd, _ = sides[side]
            return b.read_all_close(os.open("README", os.O_RDONLY, dir_fd=root_fd))

        def ask(side, rid):
            _, outbox_fd = sides[side]
            b.submit(outbox_fd, rid, body)
            return b.response(outbox_fd, rid)

        def exchange(side, rid):
            _, outbox_fd = sides[side]
            fd = os.open(rid, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=outbox_fd)
            os.write(fd, body)
            data = b.read_all(fd)
            os.close(fd)
            return data

        def decided(side, rid):
            _, outbox_fd = sides[side]
            fd = os.open(rid, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=outbox_fd)
            os.write(fd, person_body)
            while True:
                entries = os.listdir(inboxes[side])
                if entries:
                    break
            with open(inboxes[side] / entries[0], "w") as f:
                f.write("allow")
            data = b.read_all(fd)
            os.close(fd)
            return data

        ops = [
            ("old read", lambda i: read("old")),
            ("old ask", lambda i: ask("old", f"r{rep}-{i}")),
            ("old exchange", lambda i: exchange("old", f"x{rep}-{i}")),
            ("new read", lambda i: read("new")),
            ("new ask", lambda i: ask("new", f"r{rep}-{i}")),
            ("new exchange", lambda i: exchange("new", f"x{rep}-{i}")),
        ]
        if person:
            ops += [
                ("old person", lambda i: decided("old", f"p{rep}-{i}")),
                ("new person", lambda i: decided("new", f"p{rep}-{i}")),
            ]
        for i in range(warmup):
            for _, op in ops:
                op(-1 - i)
        times = {name: [] for name, _ in ops}
        for i in range(iterations):
            for j in range(len(ops)):
                name, op = ops[(i + j) % len(ops)]
                t0 = now()
                data = op(i)
                times[name].append(now() - t0)
                if name != "old read" and name != "new read" and b'"approved": true' not in data:
                    raise SystemExit(f"{name} was not approved: {data[:300]!r}")
        for root_fd, outbox_fd in sides.values():
            os.close(root_fd)
            os.close(outbox_fd)
    return {name: b.pct(values, 50) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="the baseline binary")
    parser.add_argument("--new", default=str(b.REPO / "target/release/permfs"))
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--command", default="git status", help="the bash line asked (a rule must allow it)")
    parser.add_argument("--person", action="store_true", help="also a person-answered ask on each side")
    args = parser.parse_args()
    print(f"machine: {b.machine()}")
    print(f"old: {args.old}\nnew: {args.new}")
    reps = []
    for rep in range(args.repetitions):
        busy = b.other_cpu_busy()
        medians = one_repetition(args.old, args.new, args.iterations, args.warmup, rep, args.command,
                                 args.person)
        reps.append(medians)
        line = ", ".join(f"{k} {b.us(v)}" for k, v in medians.items())
        print(f"repetition {rep + 1}: machine busy {busy:.0f}% before; medians: {line}")

    def med(key):
        return statistics.median(r[key] for r in reps)

    def ratio(a, c):
        return statistics.median(r[a] / r[c] for r in reps)

    print(f"median of {args.repetitions} repetitions x {args.iterations} iterations:")
    for key in reps[0]:
        print(f"  {key:<14} {b.us(med(key)):>10}")
    print(f"  old ask / old read        {ratio('old ask', 'old read'):.2f}x")
    print(f"  new ask / new read        {ratio('new ask', 'new read'):.2f}x")
    print(f"  new exchange / new read   {ratio('new exchange', 'new read'):.2f}x")
    print(f"  new ask / old ask         {ratio('new ask', 'old ask'):.2f}x")
    print(f"  new exchange / old ask    {ratio('new exchange', 'old ask'):.2f}x")
    print(f"  new exchange / old exchange {ratio('new exchange', 'old exchange'):.2f}x")
    if args.person:
        print(f"  new person / old person   {ratio('new person', 'old person'):.2f}x")
    b.summary(
        "versus",
        f"two-file ask new/old {ratio('new ask', 'old ask'):.2f}x; ask/README old {ratio('old ask', 'old read'):.2f}x, "
        f"new {ratio('new ask', 'new read'):.2f}x; one-descriptor ask {ratio('new exchange', 'new read'):.2f}x README, "
        f"{ratio('new exchange', 'old ask'):.2f}x the old two-file ask",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
