#!/usr/bin/env python3
"""A small Python model of the reference engine with permfs's `resolve` CLI shape.

Only used to self-test run.py (`run.py --permfs scripts/differential/model_permfs.py`
should agree 100% with the oracle); it is not part of permfs.  It ports the pieces of
pi-permission-system 20.7.3 the oracle exercises: config/agent loading, scope merge with
origins, rule synthesis, wildcard matching and POSIX path normalization/canonicalization.

    model_permfs.py resolve --config G [--project P] [--agents-dir A] [--cwd CWD]
    stdin: {"surface": S, "value": V?, "agent": A?} per line; stdout: one JSON answer per line.
"""
import argparse
import errno
import json
import os
import re
import sys

STATES = ("allow", "deny", "ask")
PATH_SURFACES = {"read", "write", "edit", "grep", "find", "ls", "external_directory", "path"}
MCP_BASELINE = ["mcp_status", "mcp_list", "mcp_search", "mcp_describe", "mcp_connect"]
HOME = os.environ.get("HOME", "/")


# ------------------------------------------------------------------ node:path (posix)

def _normalize_string(path, allow_above_root):
    res, last_segment_length, last_slash, dots = "", 0, -1, 0
    i = 0
    while i <= len(path):
        code = path[i] if i < len(path) else "/"
        if code == "/":
            if last_slash == i - 1 or dots == 1:
                pass
            elif dots == 2:
                if len(res) < 2 or last_segment_length != 2 or not res.endswith(".."):
                    if len(res) > 2:
                        idx = res.rfind("/")
                        if idx == -1:
                            res, last_segment_length = "", 0
                        else:
                            res = res[:idx]
                            last_segment_length = len(res) - 1 - res.rfind("/")
                        last_slash, dots = i, 0
                        i += 1
                        continue
                    elif len(res) != 0:
                        res, last_segment_length = "", 0
                        last_slash, dots = i, 0
                        i += 1
                        continue
                if allow_above_root:
                    res = res + "/.." if res else ".."
                    last_segment_length = 2
            else:
                seg = path[last_slash + 1:i]
                res = res + "/" + seg if res else seg
                last_segment_length = i - last_slash - 1
            last_slash, dots = i, 0
        elif code == "." and dots != -1:
            dots += 1
        else:
            dots = -1
        i += 1
    return res


def p_normalize(path):
    if path == "":
        return "."
    absolute = path.startswith("/")
    trailing = path.endswith("/")
    path = _normalize_string(path, not absolute)
    if path == "":
        return "/" if absolute else "."
    if trailing:
        path += "/"
    return "/" + path if absolute else path


def p_join(*parts):
    parts = [p for p in parts if p]
    return p_normalize("/".join(parts)) if parts else "."


def p_resolve(*parts):
    resolved, absolute = "", False
    for p in reversed(parts):
        if absolute:
            break
        if not p:
            continue
        resolved = p + "/" + resolved if resolved else p
        absolute = p.startswith("/")
    if not absolute:
        resolved = os.getcwd() + "/" + resolved
    r = _normalize_string(resolved, False)
    return "/" + r


def is_within(path, directory):
    if not path or not directory:
        return False
    if path == directory:
        return True
    prefix = directory if directory.endswith("/") else directory + "/"
    return path.startswith(prefix)


def p_relative_within(frm, to):
    if frm == to:
        return ""
    prefix = frm if frm.endswith("/") else frm + "/"
    return to[len(prefix):]


# ------------------------------------------------------------------ matching

def expand_home(p):
    if p in ("~", "$HOME"):
        return HOME
    if p.startswith("~/") or p.startswith("~\\"):
        return p_join(HOME, p[2:])
    if p.startswith("$HOME/") or p.startswith("$HOME\\"):
        return p_join(HOME, p[6:])
    return p


_JS_SPECIAL = set(".*+?^${}()|[]\\")


def compile_pattern(pattern):
    parts = expand_home(pattern).split("*")
    esc = ".*".join("".join("\\" + c if c in _JS_SPECIAL else c for c in part).replace("\\?", ".")
                    for part in parts)
    if esc.endswith(" .*"):
        esc = esc[:-3] + "( .*)?"
    return re.compile(esc, re.S)


_cache = {}


def wmatch(pattern, value):
    rx = _cache.get(pattern)
    if rx is None:
        rx = _cache[pattern] = compile_pattern(pattern)
    return rx.fullmatch(value) is not None


# ------------------------------------------------------------------ loading

def load_config(path):
    try:
        with open(path) as fh:
            data = json.load(fh)
    except Exception:  # noqa: BLE001
        return {}
    if not isinstance(data, dict):
        return {}
    perm = data.get("permission")
    return {"permission": perm} if isinstance(perm, dict) else {}


def parse_simple_yaml(text):
    root = {}
    stack = [(-1, root)]
    for raw in re.split(r"\r?\n", text):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip())
        line = raw.strip()
        sep = line.find(":")
        if sep <= 0:
            continue
        key = re.sub(r"^['\"]|['\"]$", "", line[:sep].strip())
        rawv = line[sep + 1:].strip()
        while len(stack) > 1 and indent <= stack[-1][0]:
            stack.pop()
        cur = stack[-1][1]
        if not rawv:
            child = {}
            cur[key] = child
            stack.append((indent, child))
            continue
        if len(rawv) >= 2 and rawv[0] == rawv[-1] and rawv[0] in "\"'":
            rawv = rawv[1:-1]
        cur[key] = rawv
    return root


def normalize_flat(value):
    if not isinstance(value, dict):
        return None
    out = {}
    for k, v in value.items():
        if isinstance(v, str):
            if v in STATES:
                out[k] = v
        elif isinstance(v, dict):
            m = {p: a for p, a in v.items()
                 if a in STATES or (isinstance(a, dict) and a.get("action") == "deny")}
            if m:
                out[k] = m
    return out or None


def load_agent(agents_dir, name):
    if not agents_dir or not name:
        return {}
    try:
        with open(os.path.join(agents_dir, f"{name}.md")) as fh:
            md = fh.read().replace("\r\n", "\n")
    except OSError:
        return {}
    if not md.startswith("---\n"):
        return {}
    end = md.find("\n---", 4)
    if end == -1:
        return {}
    perm = normalize_flat(parse_simple_yaml(md[4:end]).get("permission"))
    return {"permission": perm} if perm else {}


def compose(scopes):
    merged, origins = {}, {}
    for name, scope in scopes:
        perm = scope.get("permission")
        if not perm:
            continue
        for surface, value in perm.items():
            base = merged.get(surface)
            if isinstance(base, dict) and isinstance(value, dict):
                origins.setdefault(surface, {})
                for p in value:
                    origins[surface][p] = name
                merged[surface] = {**base, **value}
            else:
                origins[surface] = {"*": name} if isinstance(value, str) else {p: name for p in value}
                merged[surface] = value
    uni = merged.get("*")
    fallback = uni if uni in STATES else "ask"
    fb_origin = origins.get("*", {}).get("*", "builtin")
    config = []
    for surface, value in merged.items():
        if surface == "*":
            continue
        if isinstance(value, str):
            if value in STATES:
                config.append((surface, "*", value, "config", origins.get(surface, {}).get("*", "builtin")))
        else:
            for p, a in value.items():
                act = "deny" if isinstance(a, dict) else a
                if act in STATES:
                    config.append((surface, p, act, "config", origins.get(surface, {}).get(p, "builtin")))
    rules = [("*", "*", fallback, "default", fb_origin)]
    if any(r[0] == "mcp" and r[2] == "allow" for r in config):
        rules += [("mcp", t, "allow", "baseline", "baseline") for t in MCP_BASELINE]
    return rules + config


# ------------------------------------------------------------------ evaluation

def rule_matches(rule, surface, value):
    return wmatch(rule[0], surface) and wmatch(rule[1], value)


def evaluate(surface, value, rules):
    for r in reversed(rules):
        if rule_matches(r, surface, value):
            return r
    return (surface, value, "ask", "synthetic", "builtin")


def evaluate_first(surface, values, rules):
    for v in values:
        r = evaluate(surface, v, rules)
        if r[3] != "default":
            return r
    return evaluate(surface, values[0] if values else "*", rules)


def evaluate_any(surface, values, rules):
    for r in reversed(rules):
        if any(rule_matches(r, surface, v) for v in values):
            return r
    return evaluate(surface, values[0] if values else "*", rules)


def literal_of(value):
    t = value.strip()
    if t[:1] in ("'", '"'):
        t = t[1:]
    if t[-1:] in ("'", '"'):
        t = t[:-1]
    if not t:
        return ""
    if t.startswith("@"):
        t = t[1:]
    return expand_home(t)


def canonicalize(abspath):
    if not abspath:
        return abspath
    parts = [p for p in abspath[1:].split("/") if p]
    for i in range(len(parts), -1, -1):
        cand = "/" + "/".join(parts[:i])
        try:
            real = os.path.realpath(cand, strict=True)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                continue
            return abspath
        tail = parts[i:]
        return real if not tail else p_join(real, *tail)
    return abspath


def match_values(value, cwd):
    lit = literal_of(value)
    if not lit:
        return []
    absolute = p_normalize(p_resolve(cwd, lit))
    canonical = canonicalize(absolute)
    if lit == "*":
        aliases = ["*"]
    else:
        aliases = [absolute]
        ncwd = p_normalize(p_resolve(cwd, cwd))
        if absolute == ncwd or is_within(absolute, ncwd):
            rel = p_relative_within(ncwd, absolute)
            if rel:
                aliases.append(rel)
        aliases.append(lit)
    out = []
    for v in aliases + ([canonical] if canonical else []):
        if v not in out:
            out.append(v)
    return out


def strip_bash_comments(cmd):
    return "\n".join(l for l in cmd.split("\n") if not re.match(r"\s*#", l)).strip()


def resolve(q, rules_for, cwd):
    surface, value, agent = q["surface"], q.get("value"), q.get("agent")
    # no value (absent or null): the oracle passes `undefined`, so bash matches "" and
    # skill "*" (its name is not a string)
    absent = value is None
    value = "" if absent else value
    rules = rules_for(agent)
    mv = None
    if surface in PATH_SURFACES and value:
        mv = match_values(value, cwd)
        r = evaluate_any(surface, mv or ["*"], rules)
    else:
        s = surface.strip()
        if s == "bash":
            values = [strip_bash_comments(value) or value]
        elif s == "skill":
            values = ["*"] if absent else [value]
        elif s == "mcp":
            values = ["mcp_status", "mcp"]
        else:
            values = ["*"]
        r = evaluate_first(s, values, rules)
    return {"state": r[2], "matchedPattern": r[1] if r[3] == "config" else None,
            "origin": r[4], "matchValues": mv}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["resolve"])
    ap.add_argument("--config", required=True)
    ap.add_argument("--project")
    ap.add_argument("--agents-dir")
    ap.add_argument("--cwd", default=os.getcwd())
    a = ap.parse_args()
    glob = load_config(a.config)
    proj = load_config(a.project) if a.project else {}
    cache = {}

    def rules_for(agent):
        if agent not in cache:
            cache[agent] = compose([("global", glob), ("project", proj),
                                    ("agent", load_agent(a.agents_dir, agent))])
        return cache[agent]

    for line in sys.stdin:
        if line.strip():
            print(json.dumps(resolve(json.loads(line), rules_for, a.cwd), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
