#!/usr/bin/env python3
"""Print asks as they arrive in a session's inbox (a tiny notifier).

    scripts/watch-inbox.py mount/sessions/main

Reads the session's `events` stream (a blocking read per batch of JSON
lines) and prints one line per event. Stops with Ctrl-C or when the session
ends. Standard library only.
"""
import json
import sys
from pathlib import Path


def describe(event: dict) -> str:
    kind = event.get("event")
    if kind == "arrived":
        facts = ", ".join(
            f"{f.get('surface')}={(f.get('matchValues') or ['?'])[0]}" for f in event.get("facts", [])
        )
        message = f"  “{event['message']}”" if event.get("message") else ""
        return f"NEW   {event.get('askId')} from {event.get('from')}: {facts}{message}"
    if kind in ("decided", "left"):
        by = event.get("decidedBy", {}).get("kind")
        return f"DONE  {event.get('askId')}: {event.get('outcome')} ({by})"
    if kind == "missed":
        return f"WARN  missed {event.get('count')} events (this watcher fell behind)"
    return json.dumps(event)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    events = Path(sys.argv[1]) / "events"
    try:
        with open(events, "rb", buffering=0) as stream:
            pending = b""
            while True:
                chunk = stream.read(65536)  # blocks until something happens
                if not chunk:
                    return 0  # the session ended
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        print(describe(json.loads(line)), flush=True)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
