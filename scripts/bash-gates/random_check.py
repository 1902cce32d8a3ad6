#!/usr/bin/env python3
"""Random bash tool calls, answered by the reference's tool-call gate pipeline
oracle (zz-gate-oracle.ts, pi-permission-system 20.7.3) and by `permfs
resolve`, compared by state: agree, permfs stricter, permfs looser.

Usage: scripts/bash-gates/random_check.py SEED PER_CONFIG [-v]
  (needs target/debug/permfs built and the oracle at ORACLE, default
  /work/oracle/package; see ../shared/reference-oracle/README.md)

Lines are 1-3 pieces joined by && || ; | newline & from a list that covers
path words, cd, wrappers, substitutions, heredocs, redirects and comments; the
configs are make_fixture.py's plus one mixed config. Any LOOSER line is a bug
(or a divergence to document); STRICTER lines are printed with -v.
"""
import json, os, random, subprocess, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]
ORACLE = os.environ.get("ORACLE", "/work/oracle/package")
import importlib.util
spec = importlib.util.spec_from_file_location("mf", str(ROOT / "scripts/bash-gates/make_fixture.py"))
mf = importlib.util.module_from_spec(spec); spec.loader.exec_module(mf)
random.seed(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
PIECES = ["ls", "ls -la src", "cat src/a.rs", "cat /etc/passwd", "rm -rf x", "git status", "curl http://x/y",
  "sh", "echo hi > /etc/x", "cp a /tmp/b", "cat .env", "sudo rm x", "sudo ls", "env FOO=1 ls", "bash -c 'rm x'",
  "cd /etc", "cd src", "cd ..", "cd /tmp", "cat ../x", "cat ~/x", "grep -r foo /etc", "sed -i s/a/b/ f.txt",
  "find . -exec rm {} +", "echo $(rm x)", "echo \"$(cat /etc/shadow)\"", "(cd /tmp && ls)", "cat id_rsa",
  "FOO=1 make", "tee /var/log/x", "cat <<EOF\nrm x\nEOF", "if true; then ls; fi", "xargs cat", "ls > out",
  "wc -l < /etc/hosts", "diff <(ls /etc) b", "cat secrets/k", "cat passwd", "pwd", "make", "echo `id`",
  "timeout 5 rm y", "nohup make", "cat ./x/../../etc/hosts", "echo done # rm x", "# note", "X=1",
  "git push origin main", "npm run build", "cat 'a b'", "cat \"$HOME/.ssh/id_rsa\"", "ls /", "cat /dev/null",
  "git 2>/dev/null push --force", "2>/dev/null sudo ls", "cat <<'EOF'\n$(rm x)\nEOF", "trap 'rm x' EXIT",
  "/bin/rm x", "for f in /etc/passwd; do cat $f; done", "$(cat /etc/passwd)", "cat /etc/pass[w]d",
  "cd /etc && cat passwd", "time (rm x)", "cat <<< $(rm x)", "FOO=$(cat .env) ls", "echo hi > $(rm z)"]
OPS = [" && ", " || ", "; ", " | ", "\n", " & "]
CONFIGS = dict(mf.CONFIGS)
CONFIGS["mixed"] = {"*": "ask", "bash": {"*": "ask", "ls*": "allow", "cat *": "allow", "git *": "allow", "rm *": "deny",
   "cd *": "allow", "echo *": "allow", "sudo *": "deny"}, "path": {"*": "allow", "*.env": "deny", "/etc/*": "ask"},
   "external_directory": {"*": "ask", "/tmp/*": "allow"}}
CWD = "/srv/permfs-bash-w"
cases = []
for name in CONFIGS:
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 60):
        n = random.randint(1, 3)
        parts = [random.choice(PIECES) for _ in range(n)]
        cmd = parts[0]
        for p in parts[1:]:
            cmd += random.choice(OPS) + p
        cases.append((name, cmd))
scen = [{"global": {"permission": CONFIGS[c]}, "project": None, "agents": {}, "cwd": CWD,
         "queries": [{"tool": "bash", "input": {"command": cmd}}]} for c, cmd in cases]
out = subprocess.run(["npx", "tsx", "src/zz-gate-oracle.ts"], input=json.dumps(scen), capture_output=True, text=True,
                     cwd=ORACLE, check=True).stdout
ref = [a["results"][0] for a in json.loads(out)]
R = {"allow": 0, "ask": 1, "deny": 2}
mine = []
import tempfile
for name in CONFIGS:
    idx = [i for i, (c, _) in enumerate(cases) if c == name]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"permission": CONFIGS[name]}, f)
    lines = "\n".join(json.dumps({"tool": "bash", "input": {"command": cases[i][1]}}) for i in idx) + "\n"
    res = subprocess.run([str(ROOT / "target/debug/permfs"), "resolve", "--config", f.name, "--cwd", CWD,
                          "--project", "/nonexistent/p.json", "--project-agents-dir", "/nonexistent/pa"],
                         input=lines, capture_output=True, text=True)
    answers = [json.loads(l) for l in res.stdout.splitlines()]
    for i, a in zip(idx, answers):
        mine.append((i, a))
mine.sort()
agree = stricter = looser = 0
for (i, a) in mine:
    r = ref[i]
    if a.get("state") == r["state"]:
        agree += 1
    elif R.get(a.get("state"), -1) > R[r["state"]]:
        stricter += 1
        if "-v" in sys.argv: print("STRICTER", cases[i], r["state"], (r["decidedBy"] or {}).get("matchedPattern"), "| permfs", a.get("state"), a.get("matchedPattern"), a.get("command"), a.get("word"))
    else:
        looser += 1
        print("LOOSER", cases[i], "ref", r["state"], r["decidedBy"], "| permfs", a.get("state"), a.get("matchedPattern"), a.get("surface"), a.get("command"), a.get("word"))
print(f"total {len(mine)} agree {agree} stricter {stricter} looser {looser}")
if looser:
    sys.exit(1)
