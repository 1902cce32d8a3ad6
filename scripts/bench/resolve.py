#!/usr/bin/env python3
"""Benchmark 10: `permfs resolve` lines/s on a 100k-line mixed file.

    scripts/bench/resolve.py [--lines 100000] [--repetitions 5]
                             [--old /path/to/old/permfs] [--keep FILE]

Generates, deterministically (fixed seed), a JSON-lines file of asks as an
agent tree makes them: bash lines (pipelines, `cd`, redirects, wrappers,
substitutions), tool calls with paths (repeated files, fresh names, `..`
escapes, a symlink out of the tree, `.env` files), surface + value asks,
`mcp` and `skill` calls. The paths point into a small tree built next to
the file (the cwd of the run), so symlinks and missing files are real.

Each repetition runs, in rotating order:
  new    permfs resolve --config CFG --cwd TREE < FILE > /dev/null
  old    the same with --old (e.g. the previous commit's binary), if given
  cat    cat FILE > /dev/null (the cost of moving the bytes at all)
and reports lines/s from wall-clock time. The summary is the median over
repetitions, and new/old as the median of per-repetition ratios (each
ratio from one repetition, so a busy machine moves both sides). Goal
(issue 10): >= 150,000 lines/s.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as b  # noqa: E402

GOAL = 150_000.0
SEED = 10

CONFIG = {
    "permission": {
        "*": "ask",
        "read": "allow",
        "grep": "allow",
        "find": "allow",
        "ls": "allow",
        "path": {"*.env": "deny", "*.env.*": "deny", "*.env.example": "allow"},
        "bash": {
            "*": "ask",
            "git status": "allow",
            "git diff *": "allow",
            "git log *": "allow",
            "ls *": "allow",
            "cat *": "allow",
            "cargo *": "allow",
            "rm -rf *": {"action": "deny", "reason": "no recursive deletes"},
        },
        "external_directory": "ask",
        "mcp": {"*": "ask", "github_*": "allow"},
    }
}

FILES = [
    "src/main.rs", "src/lib.rs", "src/a/mod.rs", "src/a/b.rs", "src/a/c.rs",
    "README.md", "Cargo.toml", "docs/guide.md", "docs/api.md", ".env",
    "conf/.env.example", "tests/t1.rs", "tests/t2.rs", "scripts/run.sh",
]


def build_tree(root: Path) -> Path:
    """The cwd of the run: a small project with a symlink out of it."""
    work = root / "work"
    outside = root / "outside"
    for rel in FILES:
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    (outside / "data").mkdir(parents=True, exist_ok=True)
    (outside / "data" / "notes.txt").write_text("x\n")
    os.symlink(outside, work / "ext")
    os.symlink(work / "src", work / "srclink")
    return work


def generate(lines: int, path: Path) -> dict:
    rng = random.Random(SEED)
    kinds = {"bash": 0, "path tool": 0, "surface": 0, "other": 0}
    fresh = [f"src/gen/m{i}.rs" for i in range(400)]
    paths = FILES + ["ext/data/notes.txt", "srclink/a/b.rs", "../elsewhere/x.txt",
                     "/etc/hosts", "/tmp/out.log", "~/notes.md", "./docs/../README.md"]
    bash_lines = [
        "git status",
        "git diff HEAD~{n}",
        "git log --oneline -n {n}",
        "ls -la src/a",
        "cat README.md | grep -n foo{n}",
        "cargo test --release -- t{n}",
        "cargo build -j2 && ./target/debug/app --port {n}",
        "rm -rf build/{n}",
        "cd src && ls a && cat main.rs",
        "echo $(date +%s) > /tmp/stamp{n}",
        "find . -name '*.rs' -exec wc -l {{}} +",
        "sudo apt-get install -y pkg{n}",
        "python3 scripts/x.py --in docs/guide.md --out /tmp/o{n}.json",
        "grep -r TODO src | sort | uniq -c | head -{n}",
        "for f in src/*.rs; do echo $f; done",
        "cp ext/data/notes.txt docs/notes{n}.md",
        "sh -c 'make all'",
        "FOO=bar env X=1 node index.js {n}",
        "cat ../elsewhere/secret{n}.txt",
        "mkdir -p out/{n} && touch out/{n}/a",
    ]
    surfaces = ["bash", "path_read", "path_write", "external_directory", "deploy", "webfetch"]
    with open(path, "w") as out:
        for _ in range(lines):
            roll = rng.random()
            n = rng.randrange(100)
            if roll < 0.40:
                kinds["bash"] += 1
                command = rng.choice(bash_lines).format(n=n)
                if rng.random() < 0.5:
                    line = {"tool": "bash", "input": {"command": command}}
                else:
                    line = {"surface": "bash", "value": command}
            elif roll < 0.75:
                kinds["path tool"] += 1
                tool = rng.choice(["read", "read", "write", "edit", "grep", "ls", "find"])
                target = rng.choice(fresh) if rng.random() < 0.3 else rng.choice(paths)
                line = {"tool": tool, "input": {"path": target}}
            elif roll < 0.9:
                kinds["surface"] += 1
                surface = rng.choice(surfaces)
                value = rng.choice(paths) if surface.startswith(("path", "external")) else f"v{n}"
                line = {"surface": surface, "value": value}
            else:
                kinds["other"] += 1
                if rng.random() < 0.5:
                    line = {"tool": "mcp", "input": {"tool": f"github_issue_{n % 5}", "server": "github"}}
                else:
                    line = {"tool": "skill", "input": {"name": f"skill{n % 7}"}}
            out.write(json.dumps(line) + "\n")
    return kinds


def timed(argv: list[str], stdin_path: Path, cwd: Path) -> float:
    with open(stdin_path, "rb") as stdin, open(os.devnull, "wb") as sink:
        start = time.perf_counter()
        done = subprocess.run(argv, stdin=stdin, stdout=sink, stderr=subprocess.PIPE, cwd=cwd, check=False)
        elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--old", help="a second permfs binary measured in the same run")
    parser.add_argument("--keep", help="also write the generated file here")
    args = parser.parse_args()
    binary = str(b.permfs_binary())
    print("machine:", b.machine(), flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="permfs-resolve-bench."))
    try:
        work = build_tree(tmp)
        data = tmp / "asks.jsonl"
        kinds = generate(args.lines, data)
        if args.keep:
            shutil.copy(data, args.keep)
        config = tmp / "permfs.json"
        config.write_text(json.dumps(CONFIG))
        print(f"{args.lines} lines, {data.stat().st_size} bytes: {kinds}", flush=True)
        sides = {"new": [binary, "resolve", "--config", str(config), "--cwd", str(work)]}
        if args.old:
            sides["old"] = [str(Path(args.old).resolve()), "resolve", "--config", str(config), "--cwd", str(work)]
        sides["cat"] = ["cat"]
        # Both binaries must answer the file identically (the cache must not
        # change an answer).
        if args.old:
            outputs = {}
            for name in ("new", "old"):
                with open(data, "rb") as stdin:
                    outputs[name] = subprocess.run(sides[name], stdin=stdin, capture_output=True, cwd=tmp).stdout
            same = outputs["new"] == outputs["old"]
            print(f"new and old answers identical: {same}", flush=True)
        rates: dict[str, list[float]] = {name: [] for name in sides}
        ratios: list[float] = []
        order = list(sides)
        for rep in range(args.repetitions):
            busy = b.other_cpu_busy(0.5)
            for name in order[rep % len(order):] + order[: rep % len(order)]:
                rates[name].append(args.lines / timed(sides[name], data, tmp))
            line = ", ".join(f"{name} {rates[name][-1]:,.0f} lines/s" for name in sides)
            if args.old:
                ratios.append(rates["new"][-1] / rates["old"][-1])
                line += f", new/old {ratios[-1]:.2f}x"
            print(f"rep {rep + 1}: {line} (CPUs {busy:.0f}% busy before)", flush=True)
        medians = {name: statistics.median(values) for name, values in rates.items()}
        text = f"new {medians['new']:,.0f} lines/s (goal {GOAL:,.0f}: {'met' if medians['new'] >= GOAL else 'missed by ' + format(1 - medians['new'] / GOAL, '.0%')})"
        if args.old:
            text += f", old {medians['old']:,.0f} lines/s, new/old {statistics.median(ratios):.2f}x"
        text += f", cat {medians['cat']:,.0f} lines/s"
        b.summary("resolve", text)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
