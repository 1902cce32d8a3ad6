#!/usr/bin/env python3
"""Random scenario generator for the permfs <-> reference-oracle differential check.

Emits a JSON array of scenarios in the format of /work/shared/reference-oracle/oracle.ts:

    {"global": {"permission": {...}}, "project": {"permission": {...}} | null,
     "agents": {"name": {surface: state | {pattern: state}}}, "cwd": "/abs",
     "queries": [{"surface": S, "value": V?, "agent": A?}, ...]}   (no/null value: surface-level)

and creates the on-disk directory layout the scenarios' cwd lives in (real
subdirectories and symlinks, so path canonicalization matters).

Usage:
    gen.py --seed N --count K [--root DIR] [--no-home] [--fixture] [--out FILE]

Stdlib only. Deterministic for a given seed (the layout paths contain the seed).
"""
import argparse
import json
import os
import random
import sys

STATES = ["allow", "deny", "ask"]

PATH_SURFACES = ["read", "write", "edit", "grep", "find", "ls", "path", "external_directory"]
# Surfaces whose query value the oracle ignores (it passes `{}` as tool input, so
# the engine evaluates them against the catch-all value "*" -- or, for mcp, the
# candidates ["mcp_status", "mcp"]).  We generate the value the oracle actually evaluates.
VALUELESS_SURFACES = ["task", "web_fetch", "mcp"]
# Values sent for those anyway: permfs judges the value as well as what the oracle
# evaluates and the stricter answers, so these may only ever make permfs stricter.
EXT_VALUES = ["*", "explore", "general-purpose", "prod", "x", "mcp_status", "search"]
MCP_VALUES = ["mcp_status", "mcp_status", "mcp", "exa", "exa:search", "mcp_list", "fs_read",
              "x"]
# Share of queries sent with no value (key absent or null): a surface-level check.
NO_VALUE_PROB = 0.12
EXT_TOOL = "web_fetch"
ALL_SURFACES = ["bash", "skill"] + PATH_SURFACES + VALUELESS_SURFACES
WILDCARD_SURFACE_KEYS = ["mc*", "re?d", "web_*", "external_*", "*ls"]

AGENT_NAMES = ["reviewer", "builder", "scout"]
GHOST_AGENT = "ghost"  # queried but has no agents/<name>.md

BASH_PATTERNS = [
    "*", "git *", "git push *", "git push", "git status", "git status *", "npm run *",
    "npm *", "npm run build", "ls*", "ls *", "ls", "rm -rf *", "rm *", "echo ?", "echo *",
    "cat *", "cat *.env", "*.env", "* --force", "git push * --force", "make", "make *",
    "cargo *", "cargo build --release", "ls [ab]", "echo {a,b}", " *", "curl *", "grep *",
    "?", "??", "ls ?", "a+b", "echo $HOME", "git.*", "(git) *", "docker * --rm *",
    "cat /srv/app/*", "cat ~/x/*", "~/bin/*", "$HOME/*", "* src/*", "git  *",
]

BASH_VALUES = [
    "git status", "git", "git push", "git push origin main", "git push --force",
    "git push origin main --force", "git status --short", "git log", "git.x", "gitx",
    "npm run build", "npm run", "npm run test", "npm install", "npm", "ls", "ls -la", "ls src",
    "ls a", "ls b", "ls [ab]", "ls *.txt", "ls ?", "cat .env", "cat src/.env.example",
    "cat config/.env", "rm -rf /", "rm -rf build", "rm file", "echo hi", "echo ?", "echo x",
    "echo {a,b}", "echo $HOME", "docker run --rm x", "docker run x", "make", "make test",
    "cargo build --release", "cargo build", "cargo test", "curl https://example.com",
    "grep -r TODO src", "cat /srv/app/config.json", "cat ~/x/notes", "a+b", "ab",
    "x", "xy", "echo 'hello world'", "grep \"a b\" src/main.rs",
    "python3 script.py --force", "ls src/main.rs",
]

SKILL_PATTERNS = ["*", "librarian", "lib*", "code-*", "review", "deploy-*", "*-prod", "a b",
                  "?eview", "[x]", "{y}", "multi*"]
SKILL_VALUES = ["librarian", "library", "code-review", "review", "deploy-prod", "deploy-dev",
                "a b", "[x]", "{y}", "x", "multi\nline", "multi\nline\nskill", "*", "lib",
                " librarian ", "code-"]

GENERIC_PATTERNS = ["*", "explore", "general-*", "mcp_status", "mcp_*", "exa:*", "exa", "mcp",
                    "m?p", "?", "*search*", "**", "*_status"]

# Path patterns: {cwd} = project dir, {root} = scenario root, {out} = outside dir,
# {abs} = the "system" absolute area (/srv/app normally, {root}/srv/app in fixtures),
# {etc} = /etc normally, {root}/etc in fixtures.
PATH_PATTERNS = [
    "*", "*.env", "*.env.*", "*.env.example", "{abs}/*", "{abs}", "src/*", "src", "src/*.rs",
    "src/**", "{cwd}/*", "{cwd}/src/*", "{cwd}/link-src/*", "{cwd}", "{out}/*", "{out}",
    "../*", "*/.git/*", ".git/*", "*secret*", "config/?.json", "src/[a]*", "{a,b}.txt",
    "{etc}/*", "{etc}/passwd", "/tmp/*", "*.md", "docs *", "*/", "{root}/*", "*.rs",
    "{cwd}/dangling*", "{cwd}/loop/*", "link-src/*", "out-link/*", "@src/*", "**/.env",
    "~/x/*", "~/.ssh/*", "$HOME/*", "~", "$HOME", "~/*", "${HOME}/x/*",
]

PATH_VALUES = [
    "src/main.rs", "./src/main.rs", "src/lib/x.rs", "src", "src/", ".env", ".env.example",
    "config/.env", "config/.env.production", "config/a.json", "config/ab.json",
    "docs/notes.md", "README.md", "link-src/main.rs", "link-src", "out-link/secret.txt",
    "out-link", "dangling", "dangling/x", "src/readme-link", "loop/x", "../outside/secret.txt",
    "..", ".", "../..", "a/../src/x", "src//main.rs", "src/./x", "{out}/deep/f", "{out}",
    "{cwd}/src/main.rs", "{cwd}/link-src/main.rs", "{cwd}/out-link/secret.txt",
    "{abs}/config.json", "{abs}", "{etc}/passwd", "{etc}/hosts", "/tmp/x", "/",
    "@src/main.rs", "'src/a b.txt'", "\"docs/my file.md\"", "src/a b.txt", "docs extra",
    "docs", "{a,b}.txt", "a.txt", "src/[a].rs", "src/a.rs", "*", "secret-notes.txt",
    "  src/main.rs  ", "src/a'", ".git/config", "sub/.git/HEAD", "src/.env",
    "~/x/notes.txt", "~/.ssh/id_rsa", "~", "$HOME/x/y", "~/x", "~user/x", "${HOME}/x/y",
]
RARE_PATH_VALUES = ["", "   ", "src/a\nb"]

DENY_REASONS = ["no", "Secrets stay local.", "use the API instead"]


# --------------------------------------------------------------------------- layout

def layout_for(root, fixture=False):
    """Directory layout (absolute paths) that the scenarios' cwd lives in."""
    proj = f"{root}/proj"
    dirs = [root, proj, f"{proj}/src", f"{proj}/src/lib", f"{proj}/docs", f"{proj}/config",
            f"{proj}/.git", f"{root}/outside", f"{root}/outside/deep", f"{root}/srv/app",
            f"{root}/etc"]
    files = [f"{proj}/README.md", f"{proj}/.env", f"{proj}/.env.example", f"{proj}/src/main.rs",
             f"{proj}/config/a.json", f"{root}/outside/secret.txt", f"{root}/etc/passwd"]
    symlinks = [
        [f"{proj}/link-src", f"{proj}/src"],          # in-project symlink, absolute target
        [f"{proj}/out-link", f"{root}/outside"],      # symlink escaping the project
        [f"{proj}/dangling", f"{root}/nowhere"],      # dangling symlink
        [f"{proj}/src/readme-link", "../README.md"],  # relative target, to a file
        [f"{proj}/loop", "loop"],                     # self loop (ELOOP)
    ]
    if not fixture:
        symlinks.append([f"{root}/proj-link", "proj"])  # cwd reachable through a symlink
    return {"dirs": dirs, "files": files, "symlinks": symlinks}


def create_layout(layout):
    for d in layout["dirs"]:
        os.makedirs(d, exist_ok=True)
    for f in layout["files"]:
        if not os.path.exists(f):
            with open(f, "w") as fh:
                fh.write("x\n")
    for link, target in layout["symlinks"]:
        if os.path.islink(link):
            os.unlink(link)
        elif os.path.exists(link):
            raise SystemExit(f"gen.py: {link} exists and is not a symlink")
        os.symlink(target, link)


# --------------------------------------------------------------------------- generator

class Gen:
    def __init__(self, rng, root, allow_home=True, fixture=False):
        self.rng = rng
        self.root = root
        self.allow_home = allow_home
        self.fixture = fixture
        self.subst = {
            "root": root,
            "cwd": f"{root}/proj",
            "out": f"{root}/outside",
            "abs": f"{root}/srv/app" if fixture else "/srv/app",
            "etc": f"{root}/etc" if fixture else "/etc",
        }
        ok = (lambda x: True) if allow_home else (lambda x: "~" not in x and "HOME" not in x)
        self.bash_patterns = [p for p in BASH_PATTERNS if ok(p)]
        self.bash_values = [v for v in BASH_VALUES if ok(v)]
        self.path_patterns = [p for p in PATH_PATTERNS if ok(p)]
        self.path_values = [v for v in PATH_VALUES if ok(v)]
        if fixture:
            # keep the fixture independent of machine-specific /srv, /etc, /tmp contents
            self.bash_patterns = [p for p in self.bash_patterns if "/srv/" not in p]
            self.bash_values = [v for v in self.bash_values if "/srv/" not in v]
            self.path_patterns = [p for p in self.path_patterns if p != "/tmp/*"]
            self.path_values = [v for v in self.path_values if v not in ("/tmp/x", "/")]

    def fill(self, s):
        # only substitute our own {name} placeholders; leave "{a,b}" etc. alone
        for k, v in self.subst.items():
            s = s.replace("{" + k + "}", v)
        return s

    def state(self):
        return self.rng.choice(STATES)

    def pattern_pool(self, surface):
        if surface == "bash":
            return self.bash_patterns
        if surface == "skill":
            return SKILL_PATTERNS
        if surface in PATH_SURFACES or surface in ("re?d", "external_*", "*ls"):
            return self.path_patterns
        if surface in ("mc*",):
            return GENERIC_PATTERNS
        return GENERIC_PATTERNS

    def scenario_vocab(self):
        """Per-scenario surface set and per-surface pattern subsets shared by layers,
        so layers overlap (exercises shallow merge, key order and origin tracking)."""
        r = self.rng
        surfaces = r.sample(ALL_SURFACES, r.randint(2, 6))
        # bias towards bash + path-ish surfaces
        for must in ("bash", "path", "read"):
            if must not in surfaces and r.random() < 0.4:
                surfaces.append(must)
        if r.random() < 0.3:
            surfaces.append(r.choice(WILDCARD_SURFACE_KEYS))
        r.shuffle(surfaces)
        pats = {}
        for s in surfaces:
            pool = self.pattern_pool(s)
            pats[s] = r.sample(pool, min(len(pool), r.randint(2, 7)))
        return surfaces, pats

    def perm_map(self, vocab, allow_reason, universal_prob):
        r = self.rng
        surfaces, pats = vocab
        perm = {}
        if r.random() < universal_prob:
            perm["*"] = self.state() if r.random() < 0.8 else {"*": self.state()}
        chosen = [s for s in surfaces if r.random() < 0.7]
        for s in chosen:
            if r.random() < 0.3:
                perm[s] = self.state()
                continue
            m = {}
            for p in r.sample(pats[s], r.randint(1, len(pats[s]))):
                p = self.fill(p)
                if allow_reason and r.random() < 0.12:
                    m[p] = {"action": "deny"} if r.random() < 0.3 else \
                        {"action": "deny", "reason": r.choice(DENY_REASONS)}
                else:
                    m[p] = self.state()
            perm[s] = m
        if "*" in perm and r.random() < 0.3:
            # move the universal key to the end sometimes (key order must not matter for it)
            perm["*"] = perm.pop("*")
        return perm

    def agent_map(self, vocab):
        # agent markdown cannot carry deny-with-reason objects, and the oracle's
        # simple YAML writer/parser must round-trip keys: no ':', '"', '\\' in keys.
        perm = self.perm_map(vocab, allow_reason=False, universal_prob=0.2)
        for s, v in list(perm.items()):
            if isinstance(v, dict):
                perm[s] = {p: st for p, st in v.items()
                           if not any(c in p for c in ':"\\')}
                if not perm[s]:
                    perm[s] = self.state()
        return perm

    def instantiate(self, pattern, fillers):
        """A value built from a pattern (so queries hit configured rules often)."""
        r = self.rng
        if pattern.endswith(" *") and r.random() < 0.3:
            pattern = pattern[:-2]
        out = []
        for ch in pattern:
            if ch == "*":
                out.append(r.choice(fillers))
            elif ch == "?":
                out.append(r.choice("ab.?x"))
            else:
                out.append(ch)
        return "".join(out)

    def path_value(self, vocab):
        r = self.rng
        if r.random() < 0.03:
            return r.choice(RARE_PATH_VALUES)
        pats = [p for s, ps in vocab[1].items() if s in PATH_SURFACES or s in ("re?d", "external_*", "*ls")
                for p in ps]
        if pats and r.random() < 0.45:
            return self.instantiate(self.fill(r.choice(pats)),
                                    ["", "x", "a.env", "src/main.rs", "deep/f.txt", ".env.example", "b c"])
        return self.fill(r.choice(self.path_values))

    def bash_value(self, vocab):
        r = self.rng
        pats = vocab[1].get("bash", [])
        if pats and r.random() < 0.45:
            v = self.fill(self.instantiate(r.choice(pats), ["", "x", "origin main", "-la", "build", ".env", "--force"]))
            if not v.strip() or "(" in v or ")" in v:
                v = "x"
        else:
            v = r.choice(self.bash_values)
        x = r.random()
        if x < 0.05:
            v = " " + v + "  "
        elif x < 0.08:
            v = v.replace(" ", "  ", 1)
        elif x < 0.10:
            v = v + " "
        return v

    def query(self, vocab, agents):
        r = self.rng
        surfaces, _ = vocab
        concrete = [s for s in surfaces if s in ALL_SURFACES]
        x = r.random()
        if concrete and x < 0.65:
            surface = r.choice(concrete)
        elif x < 0.80:
            surface = r.choice(PATH_SURFACES)
        elif x < 0.92:
            surface = "bash"
        else:
            surface = r.choice(["skill", "task", EXT_TOOL, "skill", "task", "mcp"])
        if surface == "mcp" and r.random() < 0.6:  # keep mcp rare: its input is always {}
            surface = "bash"
        if surface == "bash":
            value = self.bash_value(vocab)
        elif surface == "skill":
            pats = vocab[1].get("skill", [])
            if pats and r.random() < 0.4:
                value = self.instantiate(r.choice(pats), ["", "x", "prod", "review"])
            else:
                value = r.choice(SKILL_VALUES)
        elif surface in PATH_SURFACES:
            value = self.path_value(vocab)
        elif surface == "mcp":
            # the oracle (like the reference's service API) passes `{}` as mcp input, which
            # yields the candidates ["mcp_status", "mcp"] whatever the value
            value = r.choice(MCP_VALUES)
        else:
            value = r.choice(EXT_VALUES)  # the oracle evaluates "*" whatever the value
        q = {"surface": surface, "value": value}
        if r.random() < NO_VALUE_PROB:
            # a surface-level check: no value at all, or an explicit null
            if r.random() < 0.5:
                del q["value"]
            else:
                q["value"] = None
        y = r.random()
        if agents and y < 0.5:
            q["agent"] = r.choice(agents)
        elif y < 0.58:
            q["agent"] = GHOST_AGENT
        return q

    def scenario(self, qmin, qmax):
        r = self.rng
        vocab = self.scenario_vocab()
        glob = {}
        if r.random() < 0.93:
            glob["permission"] = self.perm_map(vocab, allow_reason=True, universal_prob=0.5)
        project = None
        if r.random() < 0.55:
            project = {"permission": self.perm_map(vocab, allow_reason=True, universal_prob=0.3)}
        agents = {}
        for name in r.sample(AGENT_NAMES, r.choice([0, 1, 1, 2, 3])):
            agents[name] = self.agent_map(vocab)
        if self.fixture:
            cwd = f"{self.root}/proj"
        else:
            c = r.random()
            cwd = (f"{self.root}/proj-link" if c < 0.12 else
                   f"{self.root}/proj/src" if c < 0.20 else f"{self.root}/proj")
        queries = [self.query(vocab, list(agents)) for _ in range(r.randint(qmin, qmax))]
        return {"global": glob, "project": project, "agents": agents, "cwd": cwd,
                "queries": queries}


def generate(seed, count, root=None, allow_home=True, fixture=False, qmin=10, qmax=20,
             create=True):
    """Return (scenarios, layout).  Creates the layout on disk when `create`."""
    if root is None:
        root = f"/tmp/permfs-diff/{seed}"
    root = root.rstrip("/")
    layout = layout_for(root, fixture=fixture)
    if create:
        create_layout(layout)
    g = Gen(random.Random(seed), root, allow_home=allow_home, fixture=fixture)
    return [g.scenario(qmin, qmax) for _ in range(count)], layout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--root", help="layout root (default /tmp/permfs-diff/<seed>)")
    ap.add_argument("--no-home", action="store_true", help="never use ~ or $HOME")
    ap.add_argument("--fixture", action="store_true",
                    help="fixture mode: fixed cwd <root>/proj, no machine-specific absolute paths")
    ap.add_argument("--min-queries", type=int, default=10)
    ap.add_argument("--max-queries", type=int, default=20)
    ap.add_argument("--out", help="write here instead of stdout")
    a = ap.parse_args(argv)
    scenarios, _ = generate(a.seed, a.count, a.root, allow_home=not a.no_home,
                            fixture=a.fixture, qmin=a.min_queries, qmax=a.max_queries)
    text = json.dumps(scenarios, indent=1)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
