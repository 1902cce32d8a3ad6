#!/usr/bin/env python3
"""Confirmation command for permfs's built-in typo-path judge.

permfs runs this with {"path": "<suspect path>", "review": {...}} on stdin
after one of the configured `typoPatterns` matched an external_directory
ask. Print `yes` to let the judge deny the ask as a typo, anything else to
defer to the next link.

When OPENAI_BASE_URL (an OpenAI-compatible endpoint, e.g.
http://localhost:11434/v1) is set, a model is asked; OPENAI_API_KEY and
PERMFS_TYPO_MODEL (default gpt-4o-mini) are optional. Without an endpoint
the script answers from a small table of common misspellings, so it is
useful offline too. Standard library only.

Config:
  "judges": {"typo": {"builtin": "typo-path",
                      "typoPatterns": ["^/hmoe/", "^/usr/lcoal/", "^/ect/"],
                      "confirmCommand": ["python3", "scripts/judges/typo-confirm.py"],
                      "timeoutMs": 5000}},
  "authorizerChain": ["typo"]
"""
import json
import os
import sys
import urllib.request

KNOWN_TYPOS = ("/hmoe/", "/usr/lcoal/", "/ect/", "/tmp/tmp/", "/hoem/")


def ask_model(path: str) -> bool:
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    body = {
        "model": os.environ.get("PERMFS_TYPO_MODEL", "gpt-4o-mini"),
        "messages": [
            {"role": "system", "content": "Answer only yes or no."},
            {"role": "user", "content": f"Is the path {path!r} most likely a typo of a common system or home path?"},
        ],
        "max_tokens": 3,
        "temperature": 0,
    }
    request = urllib.request.Request(
        f"{base}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'none')}"},
    )
    with urllib.request.urlopen(request, timeout=4) as response:
        answer = json.load(response)["choices"][0]["message"]["content"]
    return answer.strip().lower().startswith("yes")


def main() -> int:
    question = json.load(sys.stdin)
    path = question.get("path", "")
    try:
        typo = ask_model(path) if os.environ.get("OPENAI_BASE_URL") else any(t in path for t in KNOWN_TYPOS)
    except Exception as error:  # any failure defers: never a guess
        print(f"typo-confirm: {error}", file=sys.stderr)
        return 1
    print("yes" if typo else "no")
    return 0


if __name__ == "__main__":
    sys.exit(main())
