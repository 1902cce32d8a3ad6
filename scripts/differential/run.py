#!/usr/bin/env python3
"""Differential check: permfs `resolve` vs the reference oracle (pi-permission-system 20.7.3).

    run.py --seed N --count K [--permfs PATH] [--out disagreements.json]

Generates K scenarios (gen.py), answers them with the oracle
(`npx tsx src/zz-oracle.ts` in --oracle-dir), writes each scenario's layers to a temp
dir (global.json, project.json, agents/<name>.md) and feeds its queries, one JSON line
each, to

    PERMFS resolve --config global.json [--project project.json] --agents-dir agents --cwd CWD

Compares state, matchedPattern, origin and (when the oracle has them) matchValues, prints
a summary and writes every disagreement to --out.

Exit status: 0 = report produced (disagreements are not failures); 1 = permfs exited
non-zero / was killed / printed unparsable output for some scenario (still reported);
2 = the harness itself could not run (oracle failure, permfs binary missing, ...).
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen  # noqa: E402

DEFAULT_PERMFS = "/work/main/target/debug/permfs"
DEFAULT_ORACLE_DIR = "/work/oracle/package"
FIELDS = ["state", "matchedPattern", "origin", "matchValues"]


def js(s):
    """JSON.stringify for a string (as the oracle's agentMarkdown uses it)."""
    return json.dumps(s, ensure_ascii=False)


def agent_markdown(name, perm):
    """Byte-for-byte port of agentMarkdown() in the oracle."""
    lines = ["---", f"name: {name}", "permission:"]
    for surface, v in perm.items():
        if isinstance(v, str):
            lines.append(f"  {js(surface)}: {v}")
        else:
            lines.append(f"  {js(surface)}:")
            for p, s in v.items():
                lines.append(f"    {js(p)}: {s}")
    lines += ["---", ""]
    return "\n".join(lines)


def run_oracle(scenarios, oracle_dir):
    proc = subprocess.run(["npx", "tsx", "src/zz-oracle.ts"], cwd=oracle_dir,
                          input=json.dumps(scenarios), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"oracle failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    answers = json.loads(proc.stdout)
    if len(answers) != len(scenarios):
        raise RuntimeError(f"oracle returned {len(answers)} answers for {len(scenarios)} scenarios")
    for i, (a, s) in enumerate(zip(answers, scenarios)):
        if len(a["results"]) != len(s["queries"]):
            raise RuntimeError(f"oracle: scenario {i}: {len(a['results'])} results "
                               f"for {len(s['queries'])} queries")
    return answers


def write_layers(sc, d):
    os.makedirs(os.path.join(d, "agents"), exist_ok=True)
    with open(os.path.join(d, "global.json"), "w") as fh:
        json.dump(sc.get("global") or {}, fh)
    args = ["--config", os.path.join(d, "global.json")]
    if sc.get("project"):
        with open(os.path.join(d, "project.json"), "w") as fh:
            json.dump(sc["project"], fh)
        args += ["--project", os.path.join(d, "project.json")]
    for name, perm in (sc.get("agents") or {}).items():
        with open(os.path.join(d, "agents", f"{name}.md"), "w") as fh:
            fh.write(agent_markdown(name, perm))
    args += ["--agents-dir", os.path.join(d, "agents"), "--cwd", sc["cwd"]]
    return args


INPUTLESS = ("mcp", "task", gen.EXT_TOOL)


def query_line(q, tool_form=False):
    if "tool" in q:
        # a tool call (gate.py): sent as it is
        o = {"tool": q["tool"], "input": q.get("input", {})}
    elif tool_form and q["surface"] in INPUTLESS:
        # exactly what the oracle evaluates: the tool with an empty input
        o = {"tool": q["surface"], "input": {}}
    else:
        o = {"surface": q["surface"]}
        if "value" in q:  # absent and null are both surface-level checks
            o["value"] = q["value"]
    if q.get("agent") is not None:
        o["agent"] = q["agent"]
    return json.dumps(o, ensure_ascii=False)


def run_permfs(permfs, sc, d, timeout, tool_form=False):
    """Returns (list of parsed answers or None per query, error string or None, command)."""
    cmd = [permfs, "resolve"] + write_layers(sc, d)
    stdin = "".join(query_line(q, tool_form) + "\n" for q in sc["queries"])
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [None] * len(sc["queries"]), f"timeout after {timeout}s", cmd
    answers, err = [], None
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        try:
            answers.append(json.loads(line))
        except json.JSONDecodeError:
            answers.append(None)
            err = err or f"unparsable output line: {line[:200]!r}"
    if proc.returncode != 0:
        err = f"exit status {proc.returncode}: {proc.stderr.strip()[-600:]}"
    elif len(answers) != len(sc["queries"]):
        err = err or f"{len(answers)} output lines for {len(sc['queries'])} queries"
    answers = (answers + [None] * len(sc["queries"]))[:len(sc["queries"])]
    return answers, err, cmd


RANK = {"allow": 0, "ask": 1, "deny": 2}


def strictness(o, p):
    """'same', 'stricter' (permfs more restrictive) or 'looser' for the states of
    oracle answer o and permfs answer p; None when either is missing or unknown."""
    if not isinstance(p, dict) or o.get("state") not in RANK or p.get("state") not in RANK:
        return None
    d = RANK[p["state"]] - RANK[o["state"]]
    return "same" if d == 0 else "stricter" if d > 0 else "looser"


def query_kind(q):
    """Report category of a query: its surface kind, and whether it carried a value."""
    kind = surface_kind(q["surface"])
    if q.get("value") is None:
        return kind + " (no value)"
    return kind


def print_categories(rows, title):
    """rows: (category, agreed on all fields, same state, strictness) per query."""
    by = collections.OrderedDict()
    for cat, agreed, _, strict in sorted(rows, key=lambda r: r[0]):
        c = by.setdefault(cat, collections.Counter())
        c["n"] += 1
        c["all"] += agreed
        c[strict or "error"] += 1
    print(title)
    print(f"  {'category':44s} {'queries':>7s} {'state':>7s} {'all':>7s} {'stricter':>8s} {'LOOSER':>6s}")
    tot = collections.Counter()
    for cat, c in by.items():
        tot.update(c)
        print(f"  {cat:44s} {c['n']:7d} {c['same']:7d} {c['all']:7d} {c['stricter']:8d} {c['looser']:6d}"
              + (f"  errors={c['error']}" if c["error"] else ""))
    n = tot["n"] or 1
    print(f"  {'total':44s} {tot['n']:7d} {tot['same']:7d} {tot['all']:7d} {tot['stricter']:8d} "
          f"{tot['looser']:6d}")
    print(f"  state agreement {100.0 * tot['same'] / n:.2f}%, all fields {100.0 * tot['all'] / n:.2f}%, "
          f"permfs less restrictive in {tot['looser']} queries, stricter in {tot['stricter']}")
    return tot


def surface_kind(surface):
    if surface == "bash":
        return "bash"
    if surface in gen.PATH_SURFACES:
        return "path:" + ("external_directory" if surface == "external_directory" else
                          "path" if surface == "path" else "tool")
    if surface in ("skill", "mcp"):
        return surface
    return "other-tool"


def tags_for(sc, q):
    """Heuristic hints attached to a disagreement to ease triage."""
    t = []
    v = q.get("value")
    if v is None:
        t.append("no-value")
        v = ""
    if q["surface"] in gen.PATH_SURFACES:
        if any(x in v for x in ("link-src", "out-link", "dangling", "readme-link", "loop")):
            t.append("symlink")
        if v.strip().startswith(("~", "$HOME", "${HOME}")):
            t.append("home")
        if ".." in v:
            t.append("dotdot")
        if v.strip()[:1] in ("'", '"') or v.strip()[-1:] in ("'", '"'):
            t.append("quotes")
        if v.strip().startswith("@"):
            t.append("at-prefix")
        if v != v.strip():
            t.append("outer-whitespace")
        if not v.strip():
            t.append("empty")
        if v.strip() == "*":
            t.append("star-value")
        if sc["cwd"].endswith("proj-link"):
            t.append("cwd-symlink")
        if sc["cwd"].endswith("/src"):
            t.append("cwd-subdir")
    if "\n" in v:
        t.append("multiline")
    if q["surface"] == "bash" and (v != v.strip() or "  " in v):
        t.append("bash-whitespace")
    if q.get("agent") == gen.GHOST_AGENT:
        t.append("ghost-agent")
    elif q.get("agent"):
        t.append("agent")
    layers = [sc.get("global", {}).get("permission") or {},
              (sc.get("project") or {}).get("permission") or {}]
    layers += list((sc.get("agents") or {}).values())
    if any(k in gen.WILDCARD_SURFACE_KEYS for lay in layers for k in lay):
        t.append("wildcard-surface-key")
    if any(isinstance(lay.get("*"), dict) for lay in layers):
        t.append("universal-map")
    if "${HOME}" in v or "${HOME}" in json.dumps(layers):
        t.append("${HOME}")  # expanded by permfs, literal in the reference (documented)
    return t


def compare(o, p):
    """Fields on which permfs answer p disagrees with oracle answer o."""
    if p is None:
        return ["no-answer"]
    bad = []
    for f in ("state", "matchedPattern", "origin"):
        if o.get(f) != p.get(f):
            bad.append(f)
    # A blank path value has no alias set: the manager says [], permfs null (a
    # surface-level check); the same meaning (docs/reference-divergences.md).
    if o.get("matchValues") is not None and o["matchValues"] != p.get("matchValues") and \
            not (o["matchValues"] == [] and p.get("matchValues") is None):
        bad.append("matchValues")
    return bad


def fmt(x):
    return json.dumps(x, ensure_ascii=False)


def brief(p):
    """The compared fields of a permfs answer (plus its issues, if any) for the console."""
    if not isinstance(p, dict):
        return p
    out = {k: p.get(k) for k in FIELDS}
    if p.get("issues"):
        out["issues"] = p["issues"]
    return out


def oracle_stats(scenarios, answers):
    c = collections.Counter()
    kinds = collections.Counter()
    n = 0
    for sc, a in zip(scenarios, answers):
        for q, r in zip(sc["queries"], a["results"]):
            n += 1
            c[("state", r["state"])] += 1
            c[("origin", r["origin"])] += 1
            c[("rule", "config" if r["matchedPattern"] is not None else "default")] += 1
            kinds[surface_kind(q["surface"])] += 1
    print(f"oracle: {len(scenarios)} scenarios, {n} queries")
    for key in ("state", "origin", "rule"):
        items = sorted(((v, k[1]) for k, v in c.items() if k[0] == key), reverse=True)
        print(f"  {key:7s} " + ", ".join(f"{name}={v}" for v, name in items))
    print("  surfaces " + ", ".join(f"{k}={v}" for k, v in kinds.most_common()))
    issues = [(i, a["issues"]) for i, a in enumerate(answers) if a["issues"]]
    if issues:
        print(f"  config issues in {len(issues)} scenarios, e.g. {issues[0]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description="permfs vs reference-oracle differential check")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--permfs", default=os.environ.get("PERMFS", DEFAULT_PERMFS))
    ap.add_argument("--oracle-dir", default=DEFAULT_ORACLE_DIR)
    ap.add_argument("--root", help="layout root for gen.py (default /tmp/permfs-diff/<seed>)")
    ap.add_argument("--scenarios", help="use this scenario file instead of generating")
    ap.add_argument("--out", default="disagreements.json", help="full disagreement report (JSON)")
    ap.add_argument("--only", type=int, action="append",
                    help="only run this scenario index (repeatable); use with --keep to inspect")
    ap.add_argument("--keep", action="store_true", help="keep the per-scenario temp dirs")
    ap.add_argument("--oracle-only", action="store_true",
                    help="do not run permfs; print the oracle's answer distribution")
    ap.add_argument("--show", type=int, default=20, help="disagreements printed in full")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--tool-form", action="store_true",
                    help="send mcp/task/extension-tool queries as {\"tool\": S, \"input\": {}} "
                         "(the oracle's exact input) instead of surface+value")
    a = ap.parse_args(argv)

    if a.scenarios:
        with open(a.scenarios) as fh:
            scenarios = json.load(fh)
        if isinstance(scenarios, dict):  # a make_fixture.py file
            gen.create_layout(scenarios["layout"])
            scenarios = [c["scenario"] for c in scenarios["cases"]]
    else:
        scenarios, _ = gen.generate(a.seed, a.count, a.root)
    indices = a.only if a.only else list(range(len(scenarios)))

    try:
        answers = run_oracle(scenarios, a.oracle_dir)
    except Exception as e:  # noqa: BLE001
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    if a.oracle_only:
        oracle_stats(scenarios, answers)
        return 0
    if not (os.path.isfile(a.permfs) and os.access(a.permfs, os.X_OK)):
        print(f"run.py: permfs binary not found/executable: {a.permfs}", file=sys.stderr)
        return 2

    agree = collections.Counter()
    applicable = collections.Counter()
    rows = []
    disagreements, errors = [], []
    base = tempfile.mkdtemp(prefix="permfs-diff-run-")
    total = 0
    for i in indices:
        sc, oa = scenarios[i], answers[i]["results"]
        d = os.path.join(base, f"s{i:04d}")
        pa, err, cmd = run_permfs(a.permfs, sc, d, a.timeout, a.tool_form)
        if err:
            errors.append({"scenario": i, "error": err, "command": cmd})
        for j, (q, o, p) in enumerate(zip(sc["queries"], oa, pa)):
            total += 1
            bad = compare(o, p)
            for f in FIELDS:
                if f == "matchValues" and o.get("matchValues") is None:
                    continue
                applicable[f] += 1
                if p is not None and f not in bad:
                    agree[f] += 1
            strict = strictness(o, p)
            rows.append((query_kind(q), not bad, strict == "same", strict))
            if not bad:
                agree["all"] += 1
            else:
                disagreements.append({
                    "scenario": i, "query": j, "q": q, "cwd": sc["cwd"], "fields": bad,
                    "category": f"{query_kind(q)} / {'+'.join(bad)}",
                    "strictness": strict,
                    "tags": tags_for(sc, q), "oracle": o, "permfs": p,
                })
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)

    # ---- report
    src = f"scenarios {a.scenarios}" if a.scenarios else f"seed {a.seed}"
    print(f"permfs differential: {src}, {len(indices)} scenarios, {total} queries")
    print(f"  permfs: {a.permfs}\n  oracle: {a.oracle_dir}")
    if a.keep:
        print(f"  scenario dirs kept under {base}")
    print("field agreement:")
    for f in FIELDS:
        n = applicable[f]
        pct = 100.0 * agree[f] / n if n else 100.0
        note = " (path queries with a value)" if f == "matchValues" else ""
        print(f"  {f:15s} {agree[f]:6d}/{n:<6d} {pct:6.2f}%{note}")
    pct = 100.0 * agree["all"] / total if total else 100.0
    print(f"  {'all fields':15s} {agree['all']:6d}/{total:<6d} {pct:6.2f}%")
    tot = print_categories(rows, "by category (state = same state; all = every compared field; "
                                 "stricter/LOOSER = permfs more/less restrictive):")
    if errors:
        print(f"permfs errors in {len(errors)} scenarios:")
        for e in errors[:5]:
            print(f"  scenario {e['scenario']}: {e['error']}")
    cats = collections.Counter(d["category"] for d in disagreements)
    first = {}
    for d in disagreements:
        first.setdefault(d["category"], d)
    if cats:
        print("disagreement categories (surface kind / differing fields):")
        for cat, n in cats.most_common():
            tagc = collections.Counter(t for d in disagreements if d["category"] == cat
                                       for t in d["tags"])
            tags = ", ".join(f"{t}:{c}" for t, c in tagc.most_common(6))
            print(f"  {n:5d}  {cat}" + (f"   [tags {tags}]" if tags else ""))
    for k, d in enumerate(disagreements[:a.show]):
        print(f"--- #{k + 1} scenario {d['scenario']} query {d['query']} "
              f"[{d['category']}] permfs {d['strictness']} tags={d['tags']}")
        print(f"    query:  {fmt(d['q'])}  cwd={d['cwd']}")
        print(f"    oracle: {fmt(d['oracle'])}")
        print(f"    permfs: {fmt(brief(d['permfs']))}")

    involved = sorted({d["scenario"] for d in disagreements} | {e["scenario"] for e in errors})
    report = {
        "seed": a.seed, "scenarios_run": len(indices), "queries": total,
        "agreement": {f: [agree[f], applicable[f]] for f in FIELDS} | {"all": [agree["all"], total]},
        "categories": dict(cats.most_common()),
        "less_restrictive": tot["looser"], "more_restrictive": tot["stricter"],
        "errors": errors,
        "disagreements": disagreements,
        "scenarios": {str(i): scenarios[i] for i in involved},
    }
    with open(a.out, "w") as fh:
        json.dump(report, fh, indent=1, ensure_ascii=False)
    print(f"full report: {a.out} ({len(disagreements)} disagreements)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
