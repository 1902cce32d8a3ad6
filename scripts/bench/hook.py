#!/usr/bin/env python3
"""Benchmark 9: a rule-answered PreToolUse through `permfs hook`.

    scripts/bench/hook.py [--iterations 200]

Each iteration, in rotating order:
  hook      run `permfs hook --mount MNT` with a Claude Code PreToolUse Bash
            event on stdin (`git status`, allowed by a rule) and read its
            answer: process start, event parse, the one-descriptor ask from
            the agent's session main/<session_id>, the JSON answer, exit
  bare      the same request ({"tool":"bash",...}) asked in-process on one
            descriptor from the same session: the outbox round trip alone
  true      run /bin/true the same way: the cost of starting any process
Goal (issue 13): hook median < 10 ms.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

GOAL_MS = 10.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    config = {"permission": {"*": "ask", "bash": {"*": "ask", "git *": "allow"}}}
    with b.Mount(config) as m:
        binary = str(b.permfs_binary())
        cwd = str(m.tmp / "cwd")
        event = json.dumps({
            "session_id": "bench", "transcript_path": None, "cwd": cwd,
            "permission_mode": "default", "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": "git status"},
            "tool_use_id": "toolu_bench",
        }).encode()
        hook = [binary, "hook", "--mount", str(m.mnt)]
        env = dict(os.environ, PERMFS_LOG="error")
        env.pop("PERMFS_SESSION", None)

        def run_hook() -> None:
            out = subprocess.run(hook, input=event, capture_output=True, env=env, check=False)
            answer = json.loads(out.stdout)
            assert answer["hookSpecificOutput"]["permissionDecision"] == "allow", out

        run_hook()  # spawns main/bench
        session = m.session_fd("bench")
        outbox = os.open("outbox", os.O_RDONLY | os.O_DIRECTORY, dir_fd=session)
        body = json.dumps({"tool": "bash", "input": {"command": "git status"}}).encode()
        counter = [0]

        def bare() -> None:
            counter[0] += 1
            fd = os.open(f"b{counter[0]}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=outbox)
            os.write(fd, body)
            answer = json.loads(b.read_all(fd))
            os.close(fd)
            assert answer["approved"] is True, answer

        def true() -> None:
            subprocess.run(["/bin/true"], input=b"", capture_output=True, check=True)

        cases = {"hook": run_hook, "bare": bare, "true": true}
        times = {name: [] for name in cases}
        names = list(cases)
        for i in range(args.iterations):
            for name in names[i % 3:] + names[: i % 3]:
                start = b.now_ns()
                cases[name]()
                times[name].append(b.now_ns() - start)
        os.close(outbox)
        os.close(session)
        med = {name: b.pct(values, 50) for name, values in times.items()}
        p99 = {name: b.pct(values, 99) for name, values in times.items()}
        print(b.machine())
        for name in names:
            print(f"{name:5} median {b.ms(med[name])}  p99 {b.ms(p99[name])}  (n={len(times[name])})")
        ratio = med["hook"] / med["bare"]
        met = "met" if med["hook"] / 1e6 < GOAL_MS else "MISSED"
        b.summary(
            "hook",
            f"permfs hook median {b.ms(med['hook'])} (p99 {b.ms(p99['hook'])}); bare one-descriptor ask "
            f"{b.ms(med['bare'])} ({ratio:.1f}x); /bin/true {b.ms(med['true'])}; goal < {GOAL_MS} ms: {met}",
        )


if __name__ == "__main__":
    main()
