#!/usr/bin/env python3
"""Print asks as they arrive in a session's inbox (a tiny notifier).

    scripts/watch-inbox.py mount/sessions/main

Prints what already waits at the session or below it (its `pending`
listing), then reads the session's `events` stream (a blocking read per
batch of JSON lines) and prints one line per event; a change in an inbox
below the session prints the asks that arrived there. Stops with Ctrl-C or
when the session ends. Standard library only. Text from agents is printed
escaped (control characters and bidi overrides made visible).
"""
import json
import sys
from pathlib import Path


def visible(text) -> str:
    """Untrusted text with control and bidi characters written out."""
    out = []
    for c in str(text):
        o = ord(c)
        if c == "\\":
            out.append("\\\\")
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        elif 0x80 <= o <= 0x9F or 0x200B <= o <= 0x200F or 0x2028 <= o <= 0x202E or 0x2060 <= o <= 0x206F or o in (0x061C, 0xFEFF):
            out.append("<U+%04X>" % o)
        else:
            out.append(c)
    return "".join(out)


def pending(session: Path) -> list:
    try:
        return json.loads((session / "pending").read_bytes()).get("pending", [])
    except (OSError, ValueError):
        return []


def describe_waiting(ask: dict) -> str:
    facts = ", ".join(
        f"{f.get('surface')}={(f.get('matchValues') or ['?'])[0]}" for f in ask.get("facts", [])
    )
    message = f"  message: {ask['message']}" if ask.get("message") else ""
    return visible(f"WAIT  {ask.get('askId')} at {ask.get('at')} from {ask.get('from')}: {facts}{message}")


def describe(event: dict) -> str:
    kind = event.get("event")
    if kind == "arrived":
        facts = ", ".join(
            f"{f.get('surface')}={(f.get('matchValues') or ['?'])[0]}" for f in event.get("facts", [])
        )
        message = f"  message: {event['message']}" if event.get("message") else ""
        return visible(f"NEW   {event.get('askId')} from {event.get('from')}: {facts}{message}")
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
    session = Path(sys.argv[1])
    events = session / "events"
    try:
        with open(events, "rb", buffering=0) as stream:
            seen = set()
            for ask in pending(session):
                seen.add(ask.get("askId"))
                print(describe_waiting(ask), flush=True)
            pending = b""
            while True:
                chunk = stream.read(65536)  # blocks until something happens
                if not chunk:
                    return 0  # the session ended
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("event") == "below":
                        if event.get("change") == "arrived":
                            for ask in pending(session):
                                if ask.get("askId") not in seen:
                                    seen.add(ask.get("askId"))
                                    print(describe_waiting(ask), flush=True)
                        continue
                    print(describe(event), flush=True)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
