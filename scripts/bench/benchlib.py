"""Shared helpers for the mount benchmarks in scripts/bench/ (stdlib only).

Every benchmark mounts a fresh permfs in a temporary directory and always
cleans up, even on failure or Ctrl-C/SIGTERM: the daemon gets SIGTERM (then
SIGKILL after a grace period), the mount point is detached with `umount -l`
if it is still mounted, forked helpers are killed and the temp directory is
removed only once nothing is mounted under it.

Timing uses time.clock_gettime_ns(CLOCK_MONOTONIC) around os.open/os.write/
os.read/os.close: raw system calls with about 0.3-1 us of interpreter
overhead each; each benchmark that needs it measures the same loop on tmpfs
to bound that overhead.
"""

from __future__ import annotations

import atexit
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The benchmarks measure the daemon at the sizes they name (10,000 waiting
# askers, a 64-deep chain, 50,000 kept answers), beyond the default bounds
# of `limits` (issue 23: 32 deep, 256 waiting per tree, …), so every
# benchmark mount raises them; a config that sets its own `limits` keeps it.
BENCH_LIMITS = {
    "depth": 128,
    "children": 4096,
    "sessions": 8192,
    "pendingAsks": 20000,
    "treePendingAsks": 20000,
    "retainedAnswers": 50000,
    "treeRetainedAnswers": 50000,
    "treeRetainedBytes": 48 * 1024 * 1024,
}
DEFAULT_CONFIG = {"permission": {"bash": {"*": "ask", "git status": "allow"}}}
MONO = time.CLOCK_MONOTONIC


def now_ns() -> int:
    return time.clock_gettime_ns(MONO)


# ---------------------------------------------------------------- helpers

_children: list[int] = []


def fork_child(fn, *args) -> int:
    """Forks a helper process that runs fn(*args) and exits; killed at cleanup."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            fn(*args)
        except BaseException as error:  # noqa: BLE001 - report and exit
            print(f"child {os.getpid()}: {error!r}", file=sys.stderr)
            code = 1
        finally:
            os._exit(code)
    _children.append(pid)
    return pid


_exited: dict[int, int] = {}


def reap(pid: int, timeout: float = 30.0) -> int:
    """Waits for a forked helper; returns its exit status."""
    deadline = time.monotonic() + timeout
    while True:
        if pid in _exited:
            if pid in _children:
                _children.remove(pid)
            return _exited.pop(pid)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if pid in _children:
                _children.remove(pid)
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            raise TimeoutError(f"helper {pid} did not exit")
        time.sleep(0.01)


def read_record(fd: int, size: int, pids, timeout: float) -> str:
    """Reads one fixed-size record a helper writes to a pipe; fails (instead
    of hanging) when a helper died with an error or the deadline passes."""
    import select

    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            data = b""
            while len(data) < size:
                chunk = os.read(fd, size - len(data))
                if not chunk:
                    raise RuntimeError("a helper closed its pipe")
                data += chunk
            return data.decode()
        for pid in pids:
            if pid in _exited:
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                _exited[pid] = os.waitstatus_to_exitcode(status)
        failed = [pid for pid in pids if _exited.get(pid, 0) != 0]
        if failed:
            raise RuntimeError(f"helper(s) {failed} failed")
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for a helper's record")


def kill_children() -> None:
    for pid in list(_children):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        _children.remove(pid)


def _kill_children_at_exit() -> None:
    if os.getpid() == _main_pid:
        kill_children()


_main_pid = os.getpid()
atexit.register(_kill_children_at_exit)


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)


def install_signal_handlers() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_exit)


def raise_nofile(want: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# ---------------------------------------------------------------- stats


def pct(values, p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), int(round(p / 100.0 * len(ordered) + 0.5))))
    return ordered[rank - 1]


def us(ns: float) -> str:
    return f"{ns / 1000:.1f} us"


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def cpu_totals() -> tuple[int, int]:
    """(all jiffies, idle jiffies) from /proc/stat."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return sum(values), values[3] + values[4]


def cpu_totals_busy(since: tuple[int, int]) -> float:
    """Percent of all cores busy since a cpu_totals() reading."""
    total, idle = cpu_totals()
    return 100.0 * (1 - (idle - since[1]) / max(1, total - since[0]))


def other_cpu_busy(seconds: float = 0.5) -> float:
    """How busy the machine's CPUs are (percent of all cores), sampled from
    /proc/stat: a noise indicator (the load average also counts the
    capacity benchmark's sleeping FUSE waiters, so it says little)."""

    def sample():
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        idle = values[3] + values[4]
        return sum(values), idle

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 100.0 * (1 - (idle1 - idle0) / max(1, total1 - total0))


def wait_for_quiet(threshold: float = 25.0, max_wait: float = 300.0) -> float:
    """Waits (up to max_wait s) until the CPUs have been under threshold
    percent busy for 3 s in a row, so another user's build does not skew
    the run; returns the last reading. PERMFS_BENCH_NO_WAIT=1 skips it."""
    if os.environ.get("PERMFS_BENCH_NO_WAIT") == "1":
        return other_cpu_busy()
    deadline = time.monotonic() + max_wait
    quiet = 0
    busy = other_cpu_busy(1.0)
    warned = False
    while time.monotonic() < deadline:
        quiet = quiet + 1 if busy < threshold else 0
        if quiet >= 3:
            return busy
        if not warned and busy >= threshold:
            print(f"waiting for the CPUs to be quiet (now {busy:.0f}% busy)...", file=sys.stderr, flush=True)
            warned = True
        busy = other_cpu_busy(1.0)
    print(f"warning: CPUs still {busy:.0f}% busy after {max_wait:.0f} s; running anyway", file=sys.stderr)
    return busy


def machine() -> str:
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    busy = wait_for_quiet()
    commit = os.environ.get("PERMFS_BIN_COMMIT") or subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = "" if os.environ.get("PERMFS_BIN_COMMIT") else subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "src"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}), CPU {model}, "
        f"kernel {platform.release()}, python {platform.python_version()}, CPU busy before start {busy:.0f}%, "
        f"permfs {commit or '?'}{' + uncommitted src changes' if dirty else ''}"
    )


def round_trip_args(doc: str, iterations: int):
    """The options of the round-trip benchmarks: --iterations, --warmup, --profile."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=iterations)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--profile", action="store_true", help="perf record the daemon during the timed loop")
    return parser.parse_args()


def dir_fd(path) -> int:
    """A directory descriptor to open names against (one LOOKUP each, no walk)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def summary(name: str, text: str) -> None:
    """One line all.sh collects for its summary table."""
    print(f"summary: {name}: {text}", flush=True)


# ---------------------------------------------------------------- daemon


def proc_status(pid: int) -> dict:
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def threads_and_rss(pid: int) -> tuple[int, float]:
    """(Threads, VmRSS in MiB) of a process."""
    status = proc_status(pid)
    return int(status["Threads"]), int(status["VmRSS"].split()[0]) / 1024.0


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_split(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def is_mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            parts = line.split()
            if len(parts) > 1 and parts[1].replace("\\040", " ") == target:
                return True
    return False


def permfs_binary() -> Path:
    """$PERMFS_BIN, or target/release/permfs after `cargo build --release`
    (skipped when PERMFS_NO_BUILD=1)."""
    if os.environ.get("PERMFS_BIN"):
        return Path(os.environ["PERMFS_BIN"]).resolve()
    binary = REPO / "target/release/permfs"
    if os.environ.get("PERMFS_NO_BUILD") != "1":
        env = dict(os.environ)
        env.setdefault("CARGO_BUILD_JOBS", "1")
        print("building: cargo build --release", file=sys.stderr, flush=True)
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=REPO, env=env, check=True)
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: run cargo build --release")
    return binary


class Mount:
    """A permfs daemon on a fresh temp mount; use as a context manager."""

    def __init__(
        self,
        config: dict | None = None,
        threads: int | None = None,
        extra_args=(),
        limits: bool = True,
        env: dict | None = None,
    ):
        # `limits=False` for a binary older than the `limits` key (versus.py).
        # `env`: extra variables for the daemon only (view.py's
        # PERMFS_VIEW_NO_PASSTHROUGH=1), so the benchmark's own
        # environment stays as it was.
        self.config = dict(DEFAULT_CONFIG if config is None else config)
        if limits:
            self.config.setdefault("limits", BENCH_LIMITS)
        self.threads = threads
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.tmp: Path | None = None
        self.proc: subprocess.Popen | None = None

    # paths
    @property
    def mnt(self) -> Path:
        return self.tmp / "mnt"

    @property
    def main(self) -> Path:
        return self.mnt / "sessions" / "main"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __enter__(self) -> "Mount":
        install_signal_handlers()
        self.tmp = Path(tempfile.mkdtemp(prefix="permfs-bench-"))
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        binary = permfs_binary()
        (self.tmp / "mnt").mkdir()
        (self.tmp / "state").mkdir()
        (self.tmp / "cwd").mkdir()
        config = self.tmp / "config.json"
        config.write_text(json.dumps(self.config))
        args = [str(binary), "mount", str(self.mnt), "--config", str(config), "--state-dir", str(self.tmp / "state")]
        if self.threads:
            args += ["--threads", str(self.threads)]
        args += self.extra_args
        # e.g. PERMFS_BENCH_WRAP="valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p"
        wrap = os.environ.get("PERMFS_BENCH_WRAP", "").split()
        args = wrap + args
        env = dict(os.environ)
        env.setdefault("PERMFS_LOG", "warn")
        env["RUST_LOG"] = env["PERMFS_LOG"]
        env.update(self.env)
        self.log = open(self.tmp / "daemon.log", "wb")
        # The daemon's cwd (the root session's cwd) is an empty temp dir, so
        # no project config can change the rules.
        self.proc = subprocess.Popen(
            args, cwd=self.tmp / "cwd", env=env, stdout=self.log, stderr=self.log, start_new_session=True
        )
        deadline = time.monotonic() + (120 if wrap else 15)
        while not (is_mounted(self.mnt) and (self.mnt / "README").exists()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"permfs exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"permfs did not mount in time:\n{self.log_tail()}")
            time.sleep(0.02)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.tmp / "daemon.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60 if os.environ.get("PERMFS_BENCH_WRAP") else 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc is not None and self.proc.returncode not in (0, None):
            print(f"note: permfs exited with {self.proc.returncode}; log tail:\n{self.log_tail()}", file=sys.stderr)
        if self.tmp is not None:
            if is_mounted(self.mnt):
                subprocess.run(["umount", "-l", str(self.mnt)], check=False)
            kill_children()
            if is_mounted(self.mnt):
                print(f"warning: {self.mnt} is still mounted; leaving {self.tmp}", file=sys.stderr)
            else:
                if os.environ.get("PERMFS_BENCH_KEEP"):
                    print(f"kept {self.tmp}", file=sys.stderr)
                else:
                    shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            kill_children()
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        self.proc = None
        self.tmp = None if self.tmp is None or not self.tmp.exists() else self.tmp

    def __exit__(self, *exc) -> None:
        self.close()

    # session helpers
    def session_fd(self, *chain: str) -> int:
        """An O_DIRECTORY fd of a session: () = main, ("d1", "d2") = main/children/d1/children/d2."""
        fd = os.open(self.main, os.O_RDONLY | os.O_DIRECTORY)
        for name in chain:
            child = os.open(f"children/{name}", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        return fd

    @staticmethod
    def spawn(session_fd: int, name: str, options: str = "") -> None:
        fd = os.open("ctl", os.O_WRONLY, dir_fd=session_fd)
        try:
            os.write(fd, f"spawn {name} {options}".strip().encode() + b"\n")
        finally:
            os.close(fd)


# ---------------------------------------------------------------- protocol


def request_bytes(command: str) -> bytes:
    return json.dumps({"surface": "bash", "value": command}).encode()


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def read_all_close(fd: int, write: bytes | None = None) -> bytes:
    """Writes `write` (when given) or reads to EOF, then closes fd."""
    try:
        if write is not None:
            os.write(fd, write)
            return b""
        return read_all(fd)
    finally:
        os.close(fd)


def submit(outbox_fd: int, rid: str, body: bytes) -> None:
    fd = os.open(f"{rid}.request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=outbox_fd)
    try:
        os.write(fd, body)
    finally:
        os.close(fd)


def response(outbox_fd: int, rid: str) -> bytes:
    fd = os.open(f"{rid}.response", os.O_RDONLY, dir_fd=outbox_fd)
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval)


def blocked_in_fuse(tid_path: str) -> bool:
    """Whether a task (/proc/PID/task/TID) sleeps waiting for a FUSE answer."""
    try:
        with open(f"{tid_path}/wchan") as wchan:
            where = wchan.read()
        return "request_wait_answer" in where or "fuse" in where
    except OSError:
        return False


def daemon_pids(root: int) -> list[int]:
    """`root` and its children: a mount's supervisor and the server that
    does the work (`permfs mount` supervises; the server is its child)."""
    try:
        children = open(f"/proc/{root}/task/{root}/children").read().split()
    except OSError:
        children = []
    return [root] + [int(c) for c in children]


@contextmanager
def perf_record(pid: int, name: str, enabled: bool):
    """perf record -g on the daemon (supervisor and server) for the block,
    then the top functions."""
    if not enabled or shutil.which("perf") is None:
        yield
        return
    out_dir = REPO / "target" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    data = out_dir / f"{name}.perf.data"
    proc = subprocess.Popen(
        ["perf", "record", "-F", "2999", "-g", "-p", ",".join(map(str, daemon_pids(pid))), "-o", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    def report(*sort_args, limit="1.5"):
        out = subprocess.run(
            ["perf", "report", "-i", str(data), "--stdio", "--no-children", "--percent-limit", limit, "-g", "none",
             *sort_args],
            capture_output=True,
            text=True,
        ).stdout
        return [l.rstrip() for l in out.splitlines() if l.strip() and not l.startswith("#")]

    print(f"perf record of the daemon ({data}); self time:")
    print("  by object:  " + ";  ".join(" ".join(l.split()) for l in report("--sort", "dso", limit="1")))
    print("  top symbols:")
    for line in report("--sort", "symbol")[:12]:
        print("   ", " ".join(line.split()[:2]), " ".join(line.split()[2:]).rstrip(" -"))
    user = [l for l in report("--sort", "dso,symbol", limit="0.3") if "[k]" not in l]
    print("  top user-space symbols (permfs and libc):")
    for line in user[:15]:
        parts = line.split()
        print("   ", parts[0], parts[1], " ".join(parts[3:]).rstrip(" -"))
