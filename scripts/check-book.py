#!/usr/bin/env python3
"""Checks the permfs book (docs/, listed in docs/SUMMARY.md) and the README.

    scripts/check-book.py            # from anywhere in the repository; exit 0 when all hold

What it checks (stdlib only, no network, well under a second):

1. every page docs/SUMMARY.md lists exists, and every docs/*.md page is
   listed there (so every page is reachable from the README, which links
   SUMMARY.md);
2. every relative link in README.md and in docs/*.md resolves: the file
   exists and, for `page.md#anchor`, the page has a heading with that
   anchor (GitHub's slugs); images included;
3. every `docs/<page>.md` named in README.md, docs/, any other markdown file
   of the repository, src/ (comments and help strings) and contrib/ exists;
4. no content lost in the move out of the README: every heading of the
   README as it was before the book (commit 3e04d78) is a heading somewhere
   in README.md or docs/. The headings are read from git when the commit is
   there, else from the list below;
5. README.md stays at most 300 lines.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
OLD_README_COMMIT = "3e04d78"
README_MAX_LINES = 300

# The old README's headings (`git show 3e04d78:README.md`), for a checkout
# without that commit (a shallow clone, a tarball).
OLD_HEADINGS = [
    "permfs",
    "Quick start: two terminals",
    "The mount",
    "Protocol",
    "Clients",
    "The decision walk",
    "Configuration",
    "The authorizer chain",
    "Deciding",
    "Use with Claude Code",
    "Use with Codex",
    "Run an agent in a sandbox",
    "The enforcement view: every open in the sandbox is judged",
    "Use with pi",
    "Watching, dry runs and the audit log",
    "Security model",
    "Running as an ordinary user",
    "Run as a service",
    "Layout of the code",
]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
DOCS_PAGE = re.compile(r"(?<![\w./-])docs/([A-Za-z0-9_.-]+\.md)\b")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def headings(text):
    return [m.group(2) for _, line in prose_lines(text) if (m := HEADING.match(line))]


def slug(heading):
    """GitHub's anchor for a heading (mdBook's agrees for these pages)."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        for h in headings(read(path)):
            s = slug(h)
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


def old_headings():
    try:
        text = subprocess.run(
            ["git", "-C", ROOT, "show", f"{OLD_README_COMMIT}:README.md"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return OLD_HEADINGS, "the list in this script (git or the commit is not there)"
    return headings(text), f"git show {OLD_README_COMMIT}:README.md"


def normalize(heading):
    return re.sub(r"\s+", " ", heading.replace("`", "")).strip().lower()


def main():
    os.chdir(ROOT)
    problems = []
    docs = sorted(f for f in os.listdir("docs") if f.endswith(".md"))
    book = ["README.md"] + [os.path.join("docs", f) for f in docs]

    # 1. SUMMARY.md: every listed page exists, every page is listed.
    summary = read("docs/SUMMARY.md")
    listed = []
    for number, line in prose_lines(summary):
        for m in LINK.finditer(line):
            target = m.group(1).split("#")[0]
            listed.append(target)
            if not os.path.isfile(os.path.join("docs", target)):
                problems.append(f"docs/SUMMARY.md:{number}: lists {target}, which does not exist")
    for f in docs:
        if f != "SUMMARY.md" and f not in listed:
            problems.append(f"docs/{f}: not listed in docs/SUMMARY.md")

    # 2. Every relative link in the README and the book resolves.
    links = 0
    for path in book:
        base = os.path.dirname(path)
        for number, line in prose_lines(read(path)):
            line = CODE_SPAN.sub("", line)
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:
                links += 1
                file, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(base, file)) if file else path
                if not os.path.exists(resolved):
                    problems.append(f"{path}:{number}: link {target}: {resolved} does not exist")
                elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                    problems.append(f"{path}:{number}: link {target}: no heading #{anchor} in {resolved}")

    # 3. Every docs/<page>.md named anywhere it is meant as a page exists.
    named = 0
    sources = list(book)
    for top in (".", "src", "contrib"):
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in ("target", "vendor", "node_modules", ".git")
                           and not (top == "." and dirpath == "." and d in ("src", "contrib", "docs", "tests"))]
            for f in filenames:
                p = os.path.normpath(os.path.join(dirpath, f))
                if (top != "." and f.endswith((".rs", ".service", ".md", ".txt", ".toml"))) or (
                    top == "." and f.endswith(".md")
                ):
                    if p not in sources:
                        sources.append(p)
    for path in sources:
        for number, line in enumerate(read(path).split("\n"), 1):
            for m in DOCS_PAGE.finditer(line):
                named += 1
                if not os.path.isfile(os.path.join("docs", m.group(1))):
                    problems.append(f"{path}:{number}: names docs/{m.group(1)}, which does not exist")

    # 4. Every old README heading is a heading in the README or the book.
    wanted, origin = old_headings()
    have = {normalize(h) for path in book for h in headings(read(path))}
    missing = [h for h in wanted if normalize(h) not in have]
    for h in missing:
        problems.append(f"old README heading not found in README.md or docs/: {h!r}")

    # 5. The README fits on a few screens.
    readme_lines = read("README.md").count("\n")
    if readme_lines > README_MAX_LINES:
        problems.append(f"README.md: {readme_lines} lines, over {README_MAX_LINES}")

    print(f"SUMMARY.md lists {len(listed)} pages; docs/ holds {len(docs) - 1} pages besides it")
    print(f"{links} relative links checked in README.md and docs/")
    print(f"{named} mentions of docs/<page>.md checked in {len(sources)} files (markdown, src/, contrib/)")
    print(f"{len(wanted) - len(missing)} of {len(wanted)} old README headings found (from {origin})")
    print(f"README.md: {readme_lines} lines (at most {README_MAX_LINES})")
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    print("book: ok" if not problems else f"book: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
