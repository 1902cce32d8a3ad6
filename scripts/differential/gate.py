#!/usr/bin/env python3
"""Differential check of tool calls: `permfs resolve` vs the reference's tool-call gate pipeline.

    gate.py --seed N --count K [--permfs PATH] [--out disagreements.json]

Generates K scenarios whose policies come from gen.py and whose queries are tool calls,
`{"tool": T, "input": {...}, "agent"?}`, of every kind: the path tools with and without a
path, bash with path words, redirects, `cd`, compound lines, subshells, substitutions,
wrappers, heredocs, comments and control flow, MCP inputs, extension tools with and
without a path, and skills. Answers them with the reference's real `ToolCallGatePipeline`
(`npx tsx src/zz-gate-oracle.ts` in --oracle-dir: every gate runs, the strictest answers)
and with

    PERMFS resolve --config global.json [--project project.json] --agents-dir agents --cwd CWD

and compares the verdict (`state`) and, for an `ask` or `deny`, what decided it (the gate's
surface, with permfs's directional `path_read`/`path_write`/`external_directory_*` folded
onto the reference's `path`/`external_directory`, and the matched pattern). Reports agreement by category and
how often permfs is less restrictive than the reference (deny > ask > allow).

Exit status as run.py: 0 report produced, 1 permfs failed on some scenario, 2 harness failure.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import random
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen  # noqa: E402
import run  # noqa: E402

PATH_TOOLS = ["read", "write", "edit", "grep", "find", "ls"]
EXT_TOOLS = ["task", "web_fetch", "deploy"]

# Bash lines by category. {etc}, {out}, {abs}, {cwd} are filled as in gen.py.
BASH = {
    "simple": gen.BASH_VALUES,
    "path words": [
        "cat {etc}/passwd", "cat src/.env", "cat .env", "cat config/.env", "cp src/main.rs /tmp/x",
        "ls ../outside", "cat ../outside/secret.txt", "cat ~/x/notes", "head -n 5 config/a.json",
        "cat {out}/secret.txt", "cat out-link/secret.txt", "vim ../../etc/hosts", "ls {abs}",
        "rm -rf build", "cat src/main.rs", "grep -r TODO {out}", "cat link-src/main.rs",
        "touch a/../../x", "cat $HOME/x/y", "cat {cwd}/.env", "ls /", "cat docs/notes.md",
    ],
    "redirect": [
        "echo hi > {etc}/x", "echo hi > out.txt", "ls > {out}/list", "cat < .env",
        "git status 2> /dev/null", "echo x >> ~/.bashrc", "echo x > src/.env", "ls > out",
        "git log > ../log.txt",
    ],
    "cd": [
        "cd {etc} && cat passwd", "cd src && cat .env", "cd .. && ls", "cd {out} && rm secret.txt",
        "cd src; cat main.rs", "cd /tmp && ls", "cd config && cat .env",
    ],
    "subshell": ["(cd src && ls)", "(git status; rm -rf x)", "(cat {etc}/passwd)", "(ls) | grep x"],
    "substitution": [
        "echo $(cat .env)", "echo \"$(rm -rf x)\"", "ls `pwd`", "diff <(ls a) <(ls b)",
        "echo \"$(cat {etc}/passwd)\"", "git commit -m \"$(date)\"", "echo $(git status)",
    ],
    "wrapper": [
        "sudo ls", "sudo rm -rf /", "env FOO=1 git status", "xargs rm < list",
        "bash -c 'git status'", "sh -c \"cat {etc}/passwd\"", "timeout 5 git push", "nohup make &",
        "find . -name x -exec rm {} \\;", "time cargo build", "bash x.sh -c 'rm -rf /'",
        "nice -n 5 cat .env", "eval 'git status'", "env cat {etc}/passwd", "sudo cat src/.env",
        "xargs cat", "timeout 60 git status",
    ],
    "heredoc": ["cat <<EOF > x\nhi\nEOF", "cat <<'EOF'\nrm -rf /\nEOF", "git status <<EOF\nx\nEOF"],
    "comment": ["# do it\ngit status", "git status # ok", "# only a comment", "# a\n# b\nrm -rf x"],
    "var prefix": ["FOO=1 git push", "A=1 B=2 rm -rf x", "PATH=/x ls", "X=1 cat .env"],
    "control flow": [
        "for f in *.rs; do cat $f; done", "if true; then rm -rf x; fi", "{ git status; ls; }",
        "while true; do git status; done", "case x in y) rm -rf z;; esac",
        "if [ -f .env ]; then cat .env; fi",
    ],
    "quotes": ["echo 'a && b'", "grep \"x|y\" src/main.rs", "echo \"a; rm -rf x\"",
               "git commit -m 'fix: a | b'"],
    "empty": ["", "   ", "\n"],
}
COMPOUND_OPS = [" && ", " || ", "; ", " | ", " & ", "\n"]
GATE_BASH_PATTERNS = [
    "curl * | sh", "cat /etc/*", "sudo *", "bash -c *", "cd *", "cp *", "find *", "xargs *",
    "env *", "git status && *", "cat *", "echo *", "rm *", "ls *", "*", "git *", "timeout *",
    "cat .env", "(cd src && ls)", "echo hi > out.txt",
]
GATE_PATH_PATTERNS = ["{etc}/*", "*.env", "*/.env", "{out}/*", "~/.bashrc", "/tmp/*", "src/*",
                      "{cwd}/*", "*", "../*", "out.txt"]
MCP_INPUTS = [
    {}, {"tool": "exa:search"}, {"server": "fs", "tool": "read"}, {"connect": "exa"},
    {"describe": "exa:search"}, {"search": "web"}, {"server": "fs"}, {"tool": "search"},
    {"tool": "read", "arguments": {"path": "{etc}/passwd"}},
    {"tool": "exa:search", "arguments": {"path": "src/.env"}},
    {"tool": "x", "arguments": {"query": "y"}}, {"tool": "  "},
]
SKILL_NAMES = ["librarian", "code-review", "review", "deploy-prod", "x", "", "*"]


def fill_obj(g, o):
    if isinstance(o, str):
        return g.fill(o)
    if isinstance(o, dict):
        return {k: fill_obj(g, v) for k, v in o.items()}
    return o


class ToolGen(gen.Gen):
    """gen.Gen with tool-call queries (each tagged with its report category)."""

    def pattern_pool(self, surface):
        pool = super().pattern_pool(surface)
        if surface == "bash":
            return pool + GATE_BASH_PATTERNS * 2
        if surface in ("path", "external_directory"):
            return pool + GATE_PATH_PATTERNS
        return pool

    def scenario_vocab(self):
        surfaces, pats = super().scenario_vocab()
        r = self.rng
        # tool calls raise path, external_directory and bash gates: rules there matter
        for must, p in (("bash", 0.7), ("path", 0.6), ("external_directory", 0.4),
                        ("mcp", 0.3), ("deploy", 0.3)):
            if must not in surfaces and r.random() < p:
                surfaces.append(must)
                pool = self.pattern_pool(must)
                pats[must] = r.sample(pool, min(len(pool), r.randint(2, 7)))
        return surfaces, pats

    def bash_line(self):
        r = self.rng
        cat = r.choice(list(BASH) + ["compound"] * 3 + ["path words"] * 2)
        if cat == "compound":
            parts = [self.fill(r.choice(BASH[r.choice(["simple", "path words", "redirect"])]))
                     for _ in range(r.randint(2, 3))]
            line = parts[0]
            for part in parts[1:]:
                line += r.choice(COMPOUND_OPS) + part
            return cat, line
        return cat, self.fill(r.choice(BASH[cat]))

    def query(self, vocab, agents):
        r = self.rng
        x = r.random()
        if x < 0.40:
            cat, line = self.bash_line()
            q = {"tool": "bash", "input": {"command": line}, "cat": "bash: " + cat}
            if r.random() < 0.03:
                q = {"tool": "bash", "input": {}, "cat": "bash: empty"}
        elif x < 0.70:
            tool = r.choice(PATH_TOOLS)
            y = r.random()
            if y < 0.75:
                q = {"tool": tool, "input": {"path": self.path_value(vocab)}}
                q["cat"] = f"path tool: {'with path' if q['input']['path'].strip() else 'no path'}"
            else:
                inp = r.choice([{}, {"path": ""}, {"path": "  "}, {"path": 7}, {"pattern": "x"}])
                q = {"tool": tool, "input": dict(inp), "cat": "path tool: no path"}
        elif x < 0.80:
            inp = fill_obj(self, r.choice(MCP_INPUTS))
            q = {"tool": "mcp", "input": inp,
                 "cat": "mcp: arguments.path" if "arguments" in inp and "path" in inp["arguments"]
                 else "mcp"}
        elif x < 0.92:
            tool = r.choice(EXT_TOOLS)
            y = r.random()
            if y < 0.4:
                q = {"tool": tool, "input": {}, "cat": "extension: no value"}
            elif y < 0.65:
                q = {"tool": tool, "input": r.choice([{"prompt": "x"}, {"url": "https://x"},
                                                     {"target": "prod"}]),
                     "cat": "extension: other fields"}
            else:
                p = self.path_value(vocab)
                q = {"tool": tool, "input": {"path": p},
                     "cat": f"extension: {'path' if p.strip() else 'no value'}"}
        else:
            y = r.random()
            if y < 0.6:
                q = {"tool": "skill", "input": {"name": r.choice(SKILL_NAMES)}, "cat": "skill"}
            elif y < 0.8:
                q = {"tool": "skill", "input": {}, "cat": "skill: no name"}
            else:
                p = self.path_value(vocab)
                q = {"tool": "skill", "input": {"name": "review", "path": p},
                     "cat": f"skill: {'path' if p.strip() else 'no value'}"}
        y = r.random()
        if agents and y < 0.4:
            q["agent"] = r.choice(agents)
        elif y < 0.45:
            q["agent"] = gen.GHOST_AGENT
        return q


def run_gate_oracle(scenarios, oracle_dir):
    proc = subprocess.run(["npx", "tsx", "src/zz-gate-oracle.ts"], cwd=oracle_dir,
                          input=json.dumps(scenarios), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"gate oracle failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    answers = json.loads(proc.stdout)
    if len(answers) != len(scenarios):
        raise RuntimeError(f"gate oracle returned {len(answers)} answers for {len(scenarios)}")
    return answers


def fold(surface):
    """permfs's directional gate surfaces, as the reference (20.7.3) names its gates."""
    if surface in ("path_read", "path_write"):
        return "path"
    if surface in ("external_directory_read", "external_directory_write"):
        return "external_directory"
    return surface


def decider(o, p):
    """(oracle, permfs) (surface, matchedPattern) of the deciding gate."""
    d = o.get("decidedBy") or {}
    return ((d.get("surface"), d.get("matchedPattern")),
            (fold(p.get("surface")), p.get("matchedPattern")))


def is_bash(q):
    return q["tool"] == "bash"


def causes(sc, q):
    """Known, documented causes a disagreement involves (docs/reference-divergences.md)."""
    out = []
    rules = json.dumps([sc.get("global"), sc.get("project"), sc.get("agents")])
    if "${HOME}" in json.dumps(q.get("input")) or "${HOME}" in rules:
        out.append("${HOME} expanded")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="permfs vs the reference's tool-call gate pipeline")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--permfs", default=os.environ.get("PERMFS", run.DEFAULT_PERMFS))
    ap.add_argument("--oracle-dir", default=run.DEFAULT_ORACLE_DIR)
    ap.add_argument("--root", help="layout root (default /tmp/permfs-diff/gate-<seed>)")
    ap.add_argument("--scenarios", help="use this scenario file instead of generating")
    ap.add_argument("--dump", help="write the generated scenarios here and continue")
    ap.add_argument("--out", default="gate-disagreements.json")
    ap.add_argument("--only", type=int, action="append", help="only this scenario index")
    ap.add_argument("--keep", action="store_true", help="keep the per-scenario temp dirs")
    ap.add_argument("--show", type=int, default=15, help="disagreements printed in full")
    ap.add_argument("--show-bash", action="store_true",
                    help="also print bash disagreements in full (the bash-parser branch's)")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--no-home", action="store_true", help="never use ~ or $HOME in rules/paths")
    a = ap.parse_args(argv)

    if a.scenarios:
        with open(a.scenarios) as fh:
            scenarios = json.load(fh)
    else:
        root = (a.root or f"/tmp/permfs-diff/gate-{a.seed}").rstrip("/")
        layout = gen.layout_for(root)
        gen.create_layout(layout)
        g = ToolGen(random.Random(a.seed), root, allow_home=not a.no_home)
        scenarios = [g.scenario(10, 20) for _ in range(a.count)]
    if a.dump:
        with open(a.dump, "w") as fh:
            json.dump(scenarios, fh, indent=1)
    indices = a.only if a.only else list(range(len(scenarios)))
    try:
        answers = run_gate_oracle(scenarios, a.oracle_dir)
    except Exception as e:  # noqa: BLE001
        print(f"gate.py: {e}", file=sys.stderr)
        return 2
    if not (os.path.isfile(a.permfs) and os.access(a.permfs, os.X_OK)):
        print(f"gate.py: permfs binary not found/executable: {a.permfs}", file=sys.stderr)
        return 2

    rows, disagreements, errors, oracle_errors = [], [], [], 0
    base = tempfile.mkdtemp(prefix="permfs-gate-")
    for i in indices:
        sc, oa = scenarios[i], answers[i]["results"]
        d = os.path.join(base, f"s{i:04d}")
        pa, err, cmd = run.run_permfs(a.permfs, sc, d, a.timeout)
        if err:
            errors.append({"scenario": i, "error": err, "command": cmd})
        for j, (q, o, p) in enumerate(zip(sc["queries"], oa, pa)):
            if o.get("state") == "error":
                oracle_errors += 1
                continue
            strict = run.strictness(o, p)
            # An `allow` has no single decider (the reference records no gate that
            # allowed by default, e.g. the path gate), so only `ask`/`deny` compare it.
            same_decider = isinstance(p, dict) and (
                o.get("state") == "allow" or decider(o, p)[0] == decider(o, p)[1])
            agreed = strict == "same" and same_decider
            rows.append((q["cat"], agreed, strict == "same", strict))
            if not agreed:
                disagreements.append({
                    "scenario": i, "query": j, "q": {k: v for k, v in q.items() if k != "cat"},
                    "category": q["cat"], "strictness": strict, "cwd": sc["cwd"],
                    "owner": "bash-parser (issue 12 §2)" if is_bash(q) else "surface-diff",
                    "causes": causes(sc, q),
                    "oracle": {"state": o.get("state"), "decidedBy": o.get("decidedBy"),
                               "gates": o.get("gates")},
                    "permfs": {k: p.get(k) for k in ("state", "surface", "matchedPattern",
                                                     "origin", "checks")}
                    if isinstance(p, dict) else p,
                })
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)

    src = f"scenarios {a.scenarios}" if a.scenarios else f"seed {a.seed}"
    print(f"permfs gate differential: {src}, {len(indices)} scenarios, {len(rows)} tool calls")
    print(f"  permfs: {a.permfs}\n  oracle: {a.oracle_dir} (src/zz-gate-oracle.ts)")
    if oracle_errors:
        print(f"  {oracle_errors} tool calls skipped: the reference pipeline threw")
    legend = ("by category (state = same verdict; all = same verdict and, for ask/deny, same "
              "deciding gate and pattern; stricter/LOOSER = permfs more/less restrictive):")
    non_bash = [r for r in rows if not r[0].startswith("bash")]
    bash = [r for r in rows if r[0].startswith("bash")]
    print("NON-BASH TOOL CALLS (this branch)")
    t1 = run.print_categories(non_bash, legend)
    print("BASH TOOL CALLS (the bash gates: issue 12 §2, branch bash-parser)")
    t2 = run.print_categories(bash, legend)
    n = len(rows) or 1
    same = t1["same"] + t2["same"]
    print(f"OVERALL: {len(rows)} tool calls, state agreement {100.0 * same / n:.2f}%, "
          f"permfs less restrictive in {t1['looser'] + t2['looser']} "
          f"({t1['looser']} non-bash, {t2['looser']} bash), stricter in "
          f"{t1['stricter'] + t2['stricter']}")
    mine = [d for d in disagreements if d["owner"] == "surface-diff"]
    known = collections.Counter(c for d in mine for c in d["causes"])
    unexplained = sum(1 for d in mine if not d["causes"])
    print(f"non-bash disagreements: {len(mine)}; with a documented cause: "
          + (", ".join(f"{c} {n}" for c, n in known.items()) or "none")
          + f"; unexplained: {unexplained}")
    if errors:
        print(f"permfs errors in {len(errors)} scenarios:")
        for e in errors[:5]:
            print(f"  scenario {e['scenario']}: {e['error']}")
    shown = [d for d in disagreements if a.show_bash or d["owner"] == "surface-diff"]
    for k, d in enumerate(shown[:a.show]):
        print(f"--- #{k + 1} scenario {d['scenario']} query {d['query']} [{d['category']}] "
              f"permfs {d['strictness']} causes={d['causes']}")
        print(f"    call:   {run.fmt(d['q'])}  cwd={d['cwd']}")
        print(f"    oracle: {run.fmt(d['oracle']['state'])} by {run.fmt(d['oracle']['decidedBy'])}")
        p = d["permfs"]
        if isinstance(p, dict):
            p = {k: p[k] for k in ("state", "surface", "matchedPattern", "origin")}
        print(f"    permfs: {run.fmt(p)}")
    involved = sorted({d["scenario"] for d in disagreements} | {e["scenario"] for e in errors})
    report = {
        "seed": a.seed, "scenarios_run": len(indices), "tool_calls": len(rows),
        "less_restrictive": {"non_bash": t1["looser"], "bash": t2["looser"]},
        "more_restrictive": {"non_bash": t1["stricter"], "bash": t2["stricter"]},
        "errors": errors, "disagreements": disagreements,
        "scenarios": {str(i): scenarios[i] for i in involved},
    }
    with open(a.out, "w") as fh:
        json.dump(report, fh, indent=1, ensure_ascii=False)
    print(f"full report: {a.out} ({len(disagreements)} disagreements)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
