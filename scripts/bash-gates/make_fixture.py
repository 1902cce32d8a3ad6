#!/usr/bin/env python3
"""Writes tests/fixtures/bash_gates.json: bash tool calls answered by the
reference's tool-call gate pipeline (`zz-gate-oracle.ts`, pi-permission-system
20.7.3, see ../shared/reference-oracle/README.md), for tests/engine/bash_gates.rs.

Usage: scripts/bash-gates/make_fixture.py ORACLE_PACKAGE_DIR

Each case's expected verdict is the reference's, unless the case carries
`stricter`: then permfs follows the newer upstream test named there (or the
issue), which is stricter than 20.7.3, and `want` holds permfs's verdict.
"""
import json
import subprocess
import sys
from pathlib import Path

CWD = "/srv/permfs-bash-w"

CONFIGS = {
    # Bash rules with a permissive catch-all.
    "rules": {"*": "allow", "bash": {"*": "allow", "rm *": "deny", "curl *": "ask", "git push *": "ask"}},
    # A cautious bash surface: listed commands allowed, everything else asks.
    "cautious": {"*": "ask", "bash": {"*": "ask", "ls *": "allow", "cat *": "allow", "echo *": "allow",
                                      "git *": "allow", "cd *": "allow", "grep *": "allow", "wc *": "allow",
                                      "cp *": "allow", "pwd": "allow"}},
    # Path rules, bash otherwise allowed.
    "paths": {"*": "allow", "path": {"*": "allow", "/etc/*": "deny", "*.env": "deny", "id_rsa": "deny",
                                     "secrets/*": "ask"}},
    # Outside the tree asks, except /tmp.
    "external": {"*": "allow", "external_directory": {"*": "ask", "/tmp/*": "allow", "/tmp": "allow"}},
    # Both path families, the issue's four commands.
    "both": {"*": "allow", "path": {"*": "allow", "/etc/*": "deny", "*.env": "deny"},
             "external_directory": {"*": "ask"}},
    # Home-anchored bash rules.
    "home": {"*": "allow", "bash": {"*": "allow", "~/bin/danger *": "deny"}},
    "home-allow": {"*": "ask", "bash": {"*": "ask", "~/bin/tool": "allow"}},
    # Whole-line and redirect rules.
    "lines": {"*": "allow", "bash": {"*": "allow", "curl * | sh": "deny", "ls > out": "deny"}},
}

UPSTREAM_WRAPPER = "newer upstream wrapper-bypass.test.ts / bash-command.test.ts: a deny on the inner command reaches through the wrapper"
UPSTREAM_BODIES = "newer upstream (issue 12): commands inside control-flow bodies are judged"
UPSTREAM_HOME = "newer upstream bash-command.test.ts: a rule written with ~ matches the command however its home is spelled"
UPSTREAM_HOSTED = "newer upstream program.test.ts (#742): the operands of a command hosted in a command name or a prefix assignment are path words"
UPSTREAM_HUNG = ("newer upstream program.test.ts: a redirect among a command's words, or words the grammar hung on a "
                 "redirect, do not change the command's unit text (git push --force)")
UPSTREAM_UNPARSED = "newer upstream bash-command.test.ts (#840): a line the grammar cannot fully read floors to ask (<unparsed-bash-subtree>)"
ISSUE_WHOLE_LINE = "issue 12 (a): a whole-line rule such as `curl * | sh` is honoured"
ISSUE_REDIRECTS = "issue 12 (b): a statement is also judged with its redirects, so an exact rule on `ls > out` applies"
HEREDOC_PIPE = ("tree-sitter-bash puts a pipeline written after a heredoc start inside the heredoc redirect, "
                "which 20.7.3 never enumerates; the newer upstream floors it (#840), permfs judges it")
HEREDOC_SUBST = "stricter on purpose: a substitution in an unquoted heredoc body runs (docs/reference-divergences.md)"

# (name, config, command, stricter-reason or None, want-if-stricter)
CASES = [
    ("pipe, both allowed", "rules", "ls | wc -l", None, None),
    ("pipe, second denied", "rules", "cat x | rm y", None, None),
    ("&& list", "rules", "git status && rm -rf x", None, None),
    ("|| list", "rules", "false || rm x", None, None),
    ("; list", "rules", "ls; rm x", None, None),
    ("& list", "rules", "sleep 1 & rm x", None, None),
    ("newline list", "rules", "ls\nrm x", None, None),
    ("ask wins over allow", "rules", "ls && curl x", None, None),
    ("cautious: one unit asks", "cautious", "ls && pwd && make", None, None),
    ("cautious: all units allowed", "cautious", "ls -la && pwd", None, None),
    ("subshell, inner denied", "rules", "(cd x && rm y)", None, None),
    ("subshell, allowed", "rules", "(ls)", None, None),
    ("cautious: subshell whole asks", "cautious", "(ls)", None, None),
    ("$( ) substitution", "rules", "echo $(rm -rf /)", None, None),
    ("$( ) inside double quotes", "rules", "echo \"a $(rm x) b\"", None, None),
    ("backticks", "rules", "echo `rm x`", None, None),
    ("single quotes are not a substitution", "rules", "echo '$(rm x)'", None, None),
    ("process substitution", "rules", "diff <(rm a) b", None, None),
    ("substitution in an assignment prefix", "rules", "FOO=$(rm x) ls", None, None),
    ("heredoc body is not a command", "rules", "cat <<EOF\nrm x\nEOF", None, None),
    ("heredoc then a pipe", "rules", "cat <<'EOF' | rm y\nhello\nEOF", HEREDOC_PIPE,
     {"state": "deny", "matchedPattern": "rm *"}),
    ("substitution in an unquoted heredoc body", "rules", "cat <<EOF\n$(rm x)\nEOF", HEREDOC_SUBST,
     {"state": "deny", "matchedPattern": "rm *"}),
    ("a quoted heredoc body is literal", "rules", "cat <<'EOF' > x.sh\n$(rm x)\nEOF", None, None),
    ("redirect removed from the unit", "cautious", "ls > out.txt", None, None),
    ("redirect to a path outside", "both", "echo hi > /etc/x", None, None),
    ("words hung on a redirect", "rules", "git 2>/dev/null push --force", UPSTREAM_HUNG,
     {"state": "ask", "matchedPattern": "git push *"}),
    ("a redirect before the command", "rules", "2>/dev/null git push --force", UPSTREAM_HUNG,
     {"state": "ask", "matchedPattern": "git push *"}),
    ("a redirect before a wrapper", "rules", "2>/dev/null sudo ls", UPSTREAM_HUNG,
     {"state": "ask", "matchedPattern": "<indirection-bash-wrapper>"}),
    ("redirect to /dev/null", "external", "ls 2>/dev/null", None, None),
    ("redirect with a rule on it", "lines", "ls > out", ISSUE_REDIRECTS,
     {"state": "deny", "matchedPattern": "ls > out"}),
    ("cd then a dot-file", "paths", "cd src && cat .env", None, None),
    ("cd then a shaped relative path", "paths", "cd /etc && cat ./passwd", None, None),
    ("cd then a bare word", "paths", "cd /etc && cat passwd",
     "stricter on purpose: after a literal cd elsewhere a bare word is a path in that directory (20.7.3 allows)",
     {"state": "deny", "matchedPattern": "/etc/*"}),
    ("cd into /tmp then ..", "external", "cd /tmp && cat ../etc/passwd", None, None),
    ("cd in a pipeline does not leak", "external", "cd /tmp | cat ../x", None, None),
    ("computed cd makes .. external", "external", "cd \"$D\" && cat ../x", None, None),
    ("cd outside, allowed dir", "external", "cd /tmp && ls", None, None),
    ("sudo floors allow", "rules", "sudo ls", None, None),
    ("sudo with a denied inner command", "rules", "sudo rm -rf /", UPSTREAM_WRAPPER,
     {"state": "deny", "matchedPattern": "rm *"}),
    ("env floors", "rules", "env FOO=1 ls", None, None),
    ("xargs with a denied inner command", "rules", "xargs rm", UPSTREAM_WRAPPER,
     {"state": "deny", "matchedPattern": "rm *"}),
    ("timeout floors", "rules", "timeout 5 make", None, None),
    ("nohup in the background", "rules", "nohup make &", None, None),
    ("find -exec", "rules", "find . -name x -exec ls {} +", None, None),
    ("find without exec", "rules", "find . -name x", None, None),
    ("bash -c floors", "rules", "bash -c 'make'", None, None),
    ("late -c", "rules", "bash x.sh -c y", None, None),
    ("-c after -- does not count", "rules", "bash -- x.sh -c y", None, None),
    ("sh -c with a denied payload", "rules", "sh -c 'rm -rf /'", UPSTREAM_WRAPPER,
     {"state": "deny", "matchedPattern": "rm *"}),
    ("eval floors", "rules", "eval make", None, None),
    ("a path-qualified name meets the deny", "rules", "/bin/rm x",
     "stricter on purpose: the name the shell runs is matched too (docs/reference-divergences.md)",
     {"state": "deny", "matchedPattern": "rm *"}),
    ("a quoted name meets the deny", "rules", "'rm' x",
     "stricter on purpose: the name the shell runs is matched too (docs/reference-divergences.md)",
     {"state": "deny", "matchedPattern": "rm *"}),
    ("leading comment line", "rules", "# tidy up\nrm x", None, None),
    ("trailing comment", "rules", "ls # rm x", None, None),
    ("comment-only line", "rules", "# nothing", None, None),
    ("VAR=x prefix stripped", "rules", "FOO=1 rm x", None, None),
    ("VAR=x prefix, cautious", "cautious", "LANG=C ls", None, None),
    ("pure assignment", "cautious", "FOO=1", None, None),
    ("cat /etc/passwd", "both", "cat /etc/passwd", None, None),
    ("echo hi > /etc/x", "both", "echo hi > /etc/x", None, None),
    ("cp src/a.rs /tmp/x", "both", "cp src/a.rs /tmp/x", None, None),
    ("cat src/.env", "both", "cat src/.env", None, None),
    ("~/ word is external", "both", "cat ~/notes.txt", None, None),
    ("a loop's word list is an operand", "both", "for f in /etc/passwd; do cat $f; done",
     "newer upstream program.test.ts (#839): the words a for loop runs over are path operands",
     {"state": "deny", "matchedPattern": "/etc/*"}),
    ("a substitution as the whole command", "both", "$(cat /etc/passwd)", UPSTREAM_HOSTED,
     {"state": "deny", "matchedPattern": "/etc/*"}),
    ("a substitution in a prefix assignment", "both", "FOO=$(cat /etc/passwd) echo hi", UPSTREAM_HOSTED,
     {"state": "deny", "matchedPattern": "/etc/*"}),
    ("bare word promoted by a path rule", "paths", "cat id_rsa", None, None),
    ("bare word not named by a rule", "paths", "cat README", None, None),
    ("path ask rule", "paths", "cat secrets/k", None, None),
    ("grep pattern is not a path", "paths", "grep /etc/x file.txt", None, None),
    ("a bracket does not hide a path word", "paths", "cat /etc/pass[w]d",
     "newer upstream (#821) dropped the regex-shape skip that 20.7.3 applies to path words",
     {"state": "deny", "matchedPattern": "/etc/*"}),
    ("url is not a path", "external", "curl https://example.com/a/b", None, None),
    ("whole-line rule", "lines", "curl x | sh", ISSUE_WHOLE_LINE,
     {"state": "deny", "matchedPattern": "curl * | sh"}),
    ("whole-line rule after a comment line", "lines", "# fetch\ncurl x | sh", ISSUE_WHOLE_LINE,
     {"state": "deny", "matchedPattern": "curl * | sh"}),
    ("whole line under the catch-all changes nothing", "cautious", "ls && pwd", None, None),
    ("if body", "rules", "if true; then rm x; fi", UPSTREAM_BODIES,
     {"state": "deny", "matchedPattern": "rm *"}),
    ("for body", "rules", "for f in a b; do rm $f; done", UPSTREAM_BODIES,
     {"state": "deny", "matchedPattern": "rm *"}),
    ("brace group", "rules", "{ ls; rm x; }", UPSTREAM_BODIES,
     {"state": "deny", "matchedPattern": "rm *"}),
    ("cautious: block whole asks", "cautious", "if true; then ls; fi", None, None),
    ("~ command meets a home-anchored deny", "home", "~/bin/danger --now", UPSTREAM_HOME,
     {"state": "deny", "matchedPattern": "~/bin/danger *"}),
    ("$HOME command meets a home-anchored deny", "home", "$HOME/bin/danger --now", UPSTREAM_HOME,
     {"state": "deny", "matchedPattern": "~/bin/danger *"}),
    ("a rebound HOME is not the home", "home", "HOME=/tmp/evil; ~/bin/danger --now",
     "stricter on purpose: an assignment statement of a variable not on the inert list changes what later commands run (issue 22)",
     {"state": "ask", "matchedPattern": "<bash-code-not-judged>"}),
    ("a home-anchored allow does not lift the catch-all (stays as 20.7.3)", "home-allow", "~/bin/tool", None, None),
    ("unbalanced quote", "rules", "echo 'unterminated && ls", UPSTREAM_UNPARSED,
     {"state": "ask", "matchedPattern": "<unparsed-bash-subtree>"}),
    ("a 2 KiB script", "rules", "\n".join(f"echo line {i} >> log.txt && ls -la src/dir{i}" for i in range(50)) + "\nrm -rf build", None, None),
]


def main() -> None:
    oracle = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/oracle/package")
    scenarios = []
    for name, config, command, *_ in CASES:
        scenarios.append({"global": {"permission": CONFIGS[config]}, "project": None, "agents": {},
                          "cwd": CWD, "queries": [{"tool": "bash", "input": {"command": command}}]})
    done = subprocess.run(["npx", "tsx", "src/zz-gate-oracle.ts"], input=json.dumps(scenarios),
                          capture_output=True, text=True, cwd=oracle, check=True)
    answers = json.loads(done.stdout)
    out = []
    for (name, config, command, stricter, want), answer in zip(CASES, answers):
        result = answer["results"][0]
        decided = result.get("decidedBy") or {}
        reference = {"state": result["state"], "matchedPattern": decided.get("matchedPattern"),
                     "surface": decided.get("surface"), "command": decided.get("command")}
        case = {"name": name, "config": config, "command": command, "reference": reference}
        if stricter:
            case["stricter"] = stricter
            case["want"] = want
        out.append(case)
    fixture = {
        "source": "pi-permission-system 20.7.3, tool-call gate pipeline oracle (zz-gate-oracle.ts)",
        "cwd": CWD,
        "configs": CONFIGS,
        "cases": out,
    }
    target = Path(__file__).resolve().parents[2] / "tests/fixtures/bash_gates.json"
    target.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {len(out)} cases to {target}")


if __name__ == "__main__":
    main()
