#!/usr/bin/env python3
"""Write an oracle-answered fixture for the Rust test suite.

    make_fixture.py --seed N --count K --out tests/fixtures/oracle_cases.json

The file is one JSON object:

    {"oracle": ..., "generator": ..., "cwd": "/tmp/permfs-oracle-fixture/proj",
     "layout": {"dirs": [...], "files": [...], "symlinks": [[link, target], ...]},
     "notes": [...],
     "cases": [{"scenario": {...}, "agentMarkdown": {name: text}, "answers": [...],
                "issues": [...]}]}

`answers[i]` is the oracle's {"state", "matchedPattern", "origin", "matchValues"} for
`scenario.queries[i]`.  Every scenario uses cwd /tmp/permfs-oracle-fixture/proj; the
test must recreate `layout` first (dirs, then files, then symlinks exactly as listed:
symlink targets are written verbatim, some are relative).  No `~`/`$HOME` appears
anywhere, and no absolute path outside /tmp/permfs-oracle-fixture except `/tmp` itself
(via `..` values), so answers do not depend on the machine -- provided /tmp is a real
directory (not a symlink, as on macOS).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen  # noqa: E402
import run  # noqa: E402

ROOT = "/tmp/permfs-oracle-fixture"


def main(argv=None):
    ap = argparse.ArgumentParser(description="oracle-answered fixture for the Rust tests")
    ap.add_argument("--seed", type=int, default=20703)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--min-queries", type=int, default=10)
    ap.add_argument("--max-queries", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--oracle-dir", default=run.DEFAULT_ORACLE_DIR)
    a = ap.parse_args(argv)

    scenarios, layout = gen.generate(a.seed, a.count, ROOT, allow_home=False, fixture=True,
                                     qmin=a.min_queries, qmax=a.max_queries)
    text = json.dumps(scenarios)
    if "~" in text or "HOME" in text:
        raise SystemExit("make_fixture.py: generated a ~/$HOME reference (bug in gen.py)")
    for sc in scenarios:
        assert sc["cwd"] == f"{ROOT}/proj", sc["cwd"]
    try:
        answers = run.run_oracle(scenarios, a.oracle_dir)
    except Exception as e:  # noqa: BLE001
        print(f"make_fixture.py: {e}", file=sys.stderr)
        return 2
    cases = []
    for sc, ans in zip(scenarios, answers):
        md = {name: run.agent_markdown(name, perm) for name, perm in (sc.get("agents") or {}).items()}
        cases.append({"scenario": sc, "agentMarkdown": md, "answers": ans["results"],
                      "issues": ans["issues"]})
    doc = {
        "oracle": "@gotgenes/pi-permission-system 20.7.3 (/work/shared/reference-oracle/oracle.ts)",
        "generator": f"scripts/differential/make_fixture.py --seed {a.seed} --count {a.count}",
        "cwd": f"{ROOT}/proj",
        "layout": layout,
        "notes": [
            "Recreate layout before evaluating: mkdir -p each dir, create each file, then "
            "symlink(target, link) for each [link, target] pair (targets verbatim; "
            "'loop' is a self-referential symlink, 'dangling' points nowhere).",
            "Write scenario.global to global.json, scenario.project (when not null) to "
            "project.json, and agentMarkdown[name] to agents/<name>.md (the oracle's own "
            "writer; keys are JSON-quoted YAML).",
            "answers[i] answers scenario.queries[i]; matchedPattern is null when only a "
            "synthesized default matched; matchValues is null for non-path surfaces and for "
            "path surfaces with an empty value.",
            "The oracle passes an empty tool input for task / extension-tool / mcp queries "
            "whatever their value (candidates ['*'] and ['mcp_status', 'mcp']); the Rust test "
            "asks those as tool calls with an empty input.",
            "A query without 'value' (or with null) is a surface-level check: the oracle "
            "evaluates bash on '', skill on '*', mcp on ['mcp_status', 'mcp'] and every other "
            "surface on '*'.",
        ],
        "cases": cases,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    nq = sum(len(c["answers"]) for c in cases)
    print(f"wrote {a.out}: {len(cases)} scenarios, {nq} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
