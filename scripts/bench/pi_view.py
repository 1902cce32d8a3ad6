#!/usr/bin/env python3
"""The pi view's end-to-end latency with pi-permission-system's own
forwarding client, against permfs's native Node client, interleaved in one
Node process (scripts/bench/pi_forward_bench.ts).

Two figures, each as medians over the rounds and a ratio pi/native:
  rule    a rule-answered ask, start to decision in the agent
  person  an ask a person answers: from the decision's write to the agent
          holding the answer (pi polls every 250 ms; the native client's
          read is woken by the answer)

Needs node and npm (the reference is installed once under target/).

    python3 scripts/bench/pi_view.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys

from benchlib import REPO, Mount, machine, other_cpu_busy, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if not shutil.which("node") or not shutil.which("npm"):
        raise SystemExit("pi_view.py needs node and npm")
    package = subprocess.run(
        ["bash", str(REPO / "scripts/pi-reference.sh"), str(REPO / "target/pi-reference")],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    shutil.copy(REPO / "scripts/bench/pi_forward_bench.ts", f"{package}/src/zz-permfs-forward-bench.ts")
    busy = other_cpu_busy()
    config = {"permission": {"*": "ask", "bash": {"*": "ask", "git status": "allow"}}}
    with Mount(config) as mount:
        (mount.main / "ctl").write_text("spawn c\n")
        child = mount.main / "children" / "c"
        out = subprocess.run(
            ["npx", "--no-install", "tsx", "src/zz-permfs-forward-bench.ts", str(child),
             str(mount.main / "inbox"), str(REPO / "clients/permfs.js"), str(args.rounds)],
            cwd=package, check=True, capture_output=True, text=True,
        ).stdout
    samples = json.loads(out.strip().splitlines()[-1])
    med = {k: statistics.median(v) for k, v in samples.items()}
    lines = [machine(), f"other CPU busy before the run: {busy:.0f}%", f"rounds: {args.rounds} (interleaved)"]
    for kind in ("rule", "person"):
        pi, native = med[f"{kind}_pi"], med[f"{kind}_native"]
        lines.append(
            f"{kind:6}  pi view (unmodified pi client) {pi:8.2f} ms   native client {native:7.2f} ms   "
            f"ratio {pi / native:6.1f}x   (pi min/max {min(samples[kind + '_pi']):.1f}/{max(samples[kind + '_pi']):.1f} ms)"
        )
    print("\n".join(lines))
    summary("pi view", "; ".join(lines[3:]))


if __name__ == "__main__":
    sys.exit(main())
