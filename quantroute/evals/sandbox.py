"""Runs untrusted answer code (from a model under eval) against unit tests in a contained subprocess.

Layers, each cheap, none trusted alone:
- a fresh `python -I -B` (no env vars, no user site, no .pyc writes), a scrubbed environment, a private temp
  cwd that is deleted afterwards, its own process group killed on timeout;
- resource limits set by the trusted harness before any answer code runs: CPU seconds, address space,
  open files, file size (stdout/stderr go to size-limited files, so a print loop cannot flood the parent);
- an audit hook installed before the answer is compiled: blocks socket/ssl/ctypes/subprocess imports,
  socket creation, fork/exec/spawn/kill, and any write, rename, delete or chmod outside the temp cwd;
- when running as root on Linux, a new empty network namespace (unshare) so that even a bypass of the
  hook finds no network.
The harness reports through a per-run nonce so that answer code printing a fake result is not believed.
Not a defence against a determined attacker with a kernel exploit; it is a defence against a model's
careless or hostile answer harming the grading host."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNET = 0x40000000
OUTPUT_LIMIT = 1 << 20  # bytes of stdout/stderr an answer may write
MEMORY_LIMIT = 768 << 20  # address space; CPython plus small test data fits easily

HARNESS = r'''
import json, os, resource, sys

def main():
    cfg = json.loads(sys.stdin.read())
    nonce = cfg.pop("nonce")
    root = os.path.realpath(os.getcwd())
    for res, value in ((resource.RLIMIT_CPU, cfg["cpu_s"]), (resource.RLIMIT_AS, cfg["mem"]),
                       (resource.RLIMIT_NOFILE, 32), (resource.RLIMIT_FSIZE, cfg["fsize"]),
                       (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(res, (value, value))
    if os.geteuid() != 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))

    blocked_modules = frozenset({"socket", "_socket", "ssl", "_ssl", "ctypes", "_ctypes", "subprocess",
                                 "_posixsubprocess", "multiprocessing", "_multiprocessing", "asyncio",
                                 "select", "selectors", "mmap", "pty", "fcntl", "resource", "signal"})
    blocked_events = frozenset({"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
                                "socket.gethostbyname", "socket.sendto", "os.fork", "os.forkpty", "os.exec",
                                "os.posix_spawn", "os.spawn", "os.system", "os.kill", "os.killpg",
                                "subprocess.Popen", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
                                "sys._getframe", "sys.setprofile", "sys.settrace", "os.setuid", "os.chroot",
                                "pty.spawn", "webbrowser.open", "shutil.chown"})
    path_events = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                             "os.symlink", "os.link", "os.truncate", "os.utime", "shutil.rmtree",
                             "shutil.copyfile", "shutil.copytree", "shutil.move", "os.chdir", "os.chflags",
                             "os.mkfifo", "os.mknod"})
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    ready = [False]

    def inside(p):
        if isinstance(p, int):
            return True
        p = os.path.realpath(os.fsdecode(p))
        return p == root or p.startswith(root + os.sep)

    def hook(event, args):
        if not ready[0]:
            return
        if event == "import" and (args[0] in blocked_modules or args[0].split(".")[0] in blocked_modules):
            raise ImportError(f"sandbox: import of {args[0]} is not allowed")
        if event in blocked_events:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open":
            path, mode, flags = args
            writing = (mode is not None and any(c in mode for c in "wax+")) or (mode is None and flags & write_flags)
            if writing and not inside(path):
                raise PermissionError(f"sandbox: writing {path!r} is not allowed")
        elif event in path_events:
            if not all(inside(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))):
                raise PermissionError(f"sandbox: {event} outside the sandbox is not allowed")

    sys.addaudithook(hook)
    out = sys.stdout
    results = {"passed": 0, "total": len(cfg["tests"]), "failures": [], "error": None}
    ns = {"__name__": "__answer__"}
    ready[0] = True
    try:
        exec(compile(cfg["code"], "<answer>", "exec"), ns)
        if not callable(ns.get(cfg["entry_point"])):
            raise NameError(f"the answer does not define {cfg['entry_point']}()")
    except BaseException as e:
        results["error"] = f"{type(e).__name__}: {e}"[:500]
    else:
        for i, test in enumerate(cfg["tests"]):
            try:
                exec(compile(test, f"<test {i}>", "exec"), ns)
                results["passed"] += 1
            except BaseException as e:
                results["failures"].append(f"{test[:120]} -> {type(e).__name__}: {e}"[:300])
    out.write("\n" + nonce + json.dumps(results) + "\n")
    out.flush()

main()
'''


@dataclass
class SandboxResult:
    passed: int = 0
    total: int = 0
    failures: list[str] = field(default_factory=list)
    error: str | None = None  # answer did not load/define the entry point, or the harness gave no result
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.total > 0 and self.passed == self.total


def _new_netns() -> None:
    """preexec_fn: detach from the host network when we have the privilege; silently skip otherwise."""
    if _unshare is not None:
        _unshare(CLONE_NEWNET)


def _load_unshare():
    if sys.platform != "linux" or os.geteuid() != 0:
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).unshare
    except (OSError, AttributeError):
        return None


_unshare = _load_unshare()  # resolved once so the forked child only makes a syscall


def run_tests(code: str, *, entry_point: str, tests: list[str], timeout_s: float = 5.0) -> SandboxResult:
    """Run `code` then each of `tests` in the sandbox. Never raises for anything the answer does."""
    nonce = secrets.token_hex(16)
    workdir = Path(tempfile.mkdtemp(prefix="quantroute-sandbox-"))
    cfg = {"nonce": nonce, "code": code, "entry_point": entry_point, "tests": tests,
           "cpu_s": max(1, int(timeout_s) + 1), "mem": MEMORY_LIMIT, "fsize": OUTPUT_LIMIT}
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(workdir), "TMPDIR": str(workdir)}
    try:
        with open(workdir / ".stdout", "w+b") as out, open(workdir / ".stderr", "w+b") as err:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", HARNESS], cwd=workdir, env=env, stdin=subprocess.PIPE,
                stdout=out, stderr=err, close_fds=True, start_new_session=True,
                preexec_fn=_new_netns if _unshare is not None else None)
            timed_out = False
            try:
                proc.communicate(json.dumps(cfg).encode(), timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
            out.seek(0)
            stdout = out.read(OUTPUT_LIMIT + 1).decode("utf-8", "replace")
            err.seek(0)
            stderr = err.read(4000).decode("utf-8", "replace")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _parse(stdout, stderr, nonce, len(tests), timed_out, proc.returncode)


def _kill_group(proc: subprocess.Popen) -> None:
    # The answer cannot fork (hook), but kill the whole group anyway: cheap insurance.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _parse(stdout: str, stderr: str, nonce: str, total: int, timed_out: bool, rc: int | None) -> SandboxResult:
    if timed_out:
        return SandboxResult(total=total, timed_out=True, error="timed out")
    for line in reversed(stdout.splitlines()):
        if line.startswith(nonce):
            data = json.loads(line[len(nonce):])
            return SandboxResult(passed=data["passed"], total=data["total"], failures=data["failures"],
                                 error=data["error"])
    reason = {-signal.SIGXCPU: "CPU limit", -signal.SIGKILL: "killed", -signal.SIGXFSZ: "output limit",
              -signal.SIGSEGV: "crashed"}.get(rc or 0, f"exit code {rc}")
    tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
    return SandboxResult(total=total, error=f"no result from the harness ({reason}) {' '.join(tail)}".strip())
