"""permfs_client: ask a permfs mount from Python (stdlib only, 3.8+).

    from permfs_client import ask, ask_async
    answer = ask("/mnt/permfs/sessions/main", {"surface": "bash", "value": "make"})
    answer = await ask_async(session_dir, {"tool": "read", "input": {"path": "a.txt"}})
    if answer["approved"]: ...

As a command: ``python3 permfs_client.py SESSION_DIR JSON`` prints the
response and exits 0 when approved, 1 when not, 2 when it could not ask
(the same contract as ``permfs.sh``).

Contract
  - Both return the parsed response for every decided ask (allow, deny,
    timeout, cancelled, invalid, ...): ``approved`` is True only for an
    allow; ``outcome`` says why not. They raise ``OSError`` when they cannot
    ask (``FileNotFoundError``: no such session; ``PermissionError``: not
    its asker) and ``ValueError`` when the answer is not JSON.
  - ``ask`` blocks the calling thread until the ask is decided. A signal
    whose handler returns (EINTR) does not end the wait (Python retries the
    read, PEP 475); one whose handler raises (Ctrl-C's KeyboardInterrupt)
    withdraws the ask and propagates.
  - ``ask_async`` never blocks the event loop. Cancelling its task (or
    ``asyncio.wait_for`` timing out) withdraws the ask.

Why it is built this way
  Both use the one-descriptor ask: the session's ``ask`` file opened
  ``O_RDWR`` (or, given a ``rid``, ``outbox/<rid>`` opened
  ``O_RDWR|O_CREAT|O_EXCL``), the request written, the answer read from the
  same descriptor. Closing that descriptor before the answer came withdraws
  the ask, so whatever ends the wait (an exception, a cancellation, the
  process dying) withdraws it, and there is no request file to remove.
  ``ask_async`` opens it ``O_NONBLOCK``: the first read asks and returns
  EAGAIN, and the mount supports poll(), so the descriptor is watched by the
  event loop (``add_reader``) like a socket; no thread waits. A loop that
  cannot watch it (one without ``add_reader``) polls every 50 ms instead.
"""

import asyncio
import json
import os
import secrets
import sys

__all__ = ["ask", "ask_async", "exit_status"]

_CHUNK = 65536


def _rid(rid):
    return rid or "py-%d-%s" % (os.getpid(), secrets.token_hex(8))


def _encode(request):
    text = request if isinstance(request, str) else json.dumps(request)
    return text.encode()


def _open_ask(session_dir, request, rid, nonblocking):
    """Opens a one-descriptor ask and writes the request; returns the fd.
    Without ``rid`` it is the session's ``ask`` file (the daemon names the
    ask; its fixed name costs no lookup), with one ``outbox/<rid>``."""
    if rid is None:
        path, flags = os.path.join(session_dir, "ask"), os.O_RDWR | os.O_CLOEXEC
    else:
        path = os.path.join(session_dir, "outbox", _rid(rid))
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    if nonblocking:
        flags |= os.O_NONBLOCK
    fd = os.open(path, flags, 0o600)
    try:
        data = memoryview(_encode(request))
        while data:
            data = data[os.write(fd, data):]
    except BaseException:
        os.close(fd)
        raise
    return fd


def _decode(chunks):
    text = b"".join(chunks).decode()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError("permfs: the answer is not JSON: %r" % text) from error


def _reading(fd):
    """Reads the answer on ``fd``: yields None whenever a read would block
    (EAGAIN: only a non-blocking ``fd``), then the parsed response."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except InterruptedError:
            continue
        except BlockingIOError:
            yield None
            continue
        if not chunk:
            yield _decode(chunks)
            return
        chunks.append(chunk)


def ask(session_dir, request, rid=None):
    """Asks ``request`` (a dict, or a JSON string) as the session at
    ``session_dir``; blocks until decided and returns the response dict."""
    fd = _open_ask(session_dir, request, rid, nonblocking=False)
    try:
        return next(_reading(fd))
    finally:
        os.close(fd)


async def _readable(loop, fd):
    """Waits until ``fd`` is readable (or 50 ms, where it cannot be watched)."""
    ready = loop.create_future()
    try:
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    except (NotImplementedError, OSError):
        await asyncio.sleep(0.05)
        return
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def ask_async(session_dir, request, rid=None):
    """Like ``ask``, without blocking the event loop; cancelling withdraws."""
    loop = asyncio.get_running_loop()
    fd = _open_ask(session_dir, request, rid, nonblocking=True)
    try:
        reading = _reading(fd)
        response = next(reading)
        while response is None:
            await _readable(loop, fd)
            response = next(reading)
        return response
    finally:
        os.close(fd)


def exit_status(response):
    """0 approved, 1 not approved, 2 the request was invalid."""
    if response.get("approved") is True:
        return 0
    return 2 if response.get("outcome") == "invalid" else 1


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: permfs_client.py SESSION_DIR JSON\n")
        return 2
    try:
        response = ask(argv[1], argv[2])
    except (OSError, ValueError) as error:
        sys.stderr.write("permfs_client: %s\n" % error)
        return 2
    sys.stdout.write(json.dumps(response, indent=2) + "\n")
    return exit_status(response)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
