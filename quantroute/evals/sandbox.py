"""Runs untrusted answer code (from a model under eval) against unit tests behind an OS boundary.

Each code answer runs in its own process under bubblewrap (Debian's `bubblewrap`):
- no network (its own empty network namespace), no view of other processes (its own pid namespace: the
  grader's `/proc/<pid>/environ`, with the DB URL and admin token, does not exist there), no IPC or UTS sharing;
- an empty environment, a read-only system (/usr and the interpreter only; no /etc, /home, /root, /work), a
  private size-limited tmpfs as its only writable directory;
- limits that hold as root: the child leaves root for a fresh uid before the answer runs, so RLIMIT_NPROC
  counts only its own processes and no hard limit can be raised again (address space, CPU, files, file size);
- on timeout the whole namespace is killed (`--die-with-parent` on bwrap's pid 1): a `setsid` child dies too.
The verdict is computed here, in the grader, from plain values the child reports (`probes.py`): the expected
values never enter the sandbox and nothing the answer does can decide its score. The in-process audit hook of
`harness_child.py` stays as a second layer. Without bwrap nothing runs: the grade says what to install."""

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

from quantroute.evals import probes

OUTPUT_LIMIT = 1 << 20  # bytes of stdout/stderr an answer may write
MEMORY_LIMIT = 768 << 20  # address space; CPython plus small test data fits easily
TMPFS_LIMIT = 16 << 20  # the private /tmp
PROCESS_LIMIT = 16  # processes of the run's own uid (only when the grader runs as root; see harness_child)
HARNESS = (Path(__file__).with_name("harness_child.py")).read_text()
WORKDIR = "/tmp/answer"  # the answer's cwd: the audit hook allows writes only below it
NO_BWRAP = "bubblewrap (bwrap) is not installed: code answers never run outside it (apt-get install bubblewrap)"


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


def interpreter() -> tuple[str, str]:
    """The base interpreter (the child needs only the standard library, never this venv) and its prefix."""
    prefix = os.path.realpath(sys.base_prefix)
    exe = os.path.realpath(sys.executable)
    if not exe.startswith(prefix + "/"):
        exe = os.path.join(prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    return exe, prefix


def bwrap_command(*, bwrap: str, python: str, prefix: str, as_root: bool) -> list[str]:
    """The bubblewrap command line. As root the sandbox keeps the init user namespace so the child can switch to
    a throwaway uid (a user namespace would map only uid 0); as a normal user it gets its own user namespace."""
    cmd = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--new-session", "--clearenv"]
    if as_root:
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        cmd += ["--unshare-user"]
    cmd += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    if not (prefix + "/").startswith("/usr/"):
        # bwrap would create the parents of a bind (e.g. /root/.pyenv/...) as 0700: the uid the child switches
        # to could then not reach the standard library
        parents = Path(prefix).parents
        for parent in reversed([str(p) for p in parents if str(p) != "/"]):
            cmd += ["--perms", "0755", "--dir", parent]
        cmd += ["--ro-bind", prefix, prefix]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMPFS_LIMIT), "--perms", "1777", "--tmpfs", "/tmp",
            "--perms", "1777", "--dir", WORKDIR, "--chdir", WORKDIR, "--", python, "-I", "-B", "-c", HARNESS]
    return cmd


def run_tests(code: str, *, entry_point: str, tests: list[str], timeout_s: float = 5.0,
              audit_hook: bool = True) -> SandboxResult:
    """Run `code` then each of `tests` in the sandbox and grade here. Never raises for anything the answer does.
    `audit_hook=False` leaves only the OS boundary (the security tests prove each layer on its own)."""
    try:
        programs = [probes.split(t) for t in tests]
    except SyntaxError as e:
        return SandboxResult(total=len(tests), error=f"a test does not parse: {e}")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxResult(total=len(tests), error=NO_BWRAP)
    python, prefix = interpreter()
    as_root = os.geteuid() == 0
    nonce = secrets.token_hex(16)
    cfg = {"nonce": nonce, "code": code, "entry_point": entry_point, "tests": [p.child_source for p in programs],
           "cpu_s": max(1, int(timeout_s) + 1), "mem": MEMORY_LIMIT, "fsize": OUTPUT_LIMIT, "nproc": PROCESS_LIMIT,
           "uid": _throwaway_uid(), "audit_hook": audit_hook, "prefix": prefix}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(bwrap_command(bwrap=bwrap, python=python, prefix=prefix, as_root=as_root),
                                stdin=subprocess.PIPE, stdout=out, stderr=err, close_fds=True,
                                start_new_session=True, env={})
        timed_out = False
        try:
            proc.communicate(json.dumps(cfg).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill(proc)
        out.seek(0)
        stdout = out.read(4 * OUTPUT_LIMIT).decode("utf-8", "replace")
        err.seek(0)
        stderr = err.read(4000).decode("utf-8", "replace")
    if timed_out:
        return SandboxResult(total=len(tests), timed_out=True, error="timed out")
    return grade(programs, _messages(stdout, nonce), stderr, proc.returncode)


def _throwaway_uid() -> int:
    # A uid no account and no other run has (2**24 .. 2**25): the process limit then counts only this answer.
    return (1 << 24) + secrets.randbelow(1 << 24)


def _kill(proc: subprocess.Popen) -> None:
    """Kill bwrap; its pid 1 dies with it (--die-with-parent) and the kernel then kills every process left in
    the pid namespace, including any that called setsid() to leave the process group."""
    for kill in (os.killpg, os.kill):
        try:
            kill(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def _messages(stdout: str, nonce: str) -> list[dict]:
    found = []
    for line in stdout.splitlines():
        if line.startswith(nonce):
            try:
                data = json.loads(line[len(nonce):])
            except ValueError:
                continue
            if type(data) is dict:
                found.append(data)
    return found


def grade(programs: list[probes.ProbeProgram], messages: list[dict], stderr: str, rc: int | None) -> SandboxResult:
    """Score the child's reports: each test passes only when `probes.verdict` finds its checks hold on plain values."""
    total = len(programs)
    load = [m for m in messages if "load_error" in m]
    if load:
        return SandboxResult(total=total, error=str(load[0]["load_error"])[:500])
    by_test: dict[int, list[dict]] = {}
    for m in messages:
        if type(m.get("test")) is int:
            by_test.setdefault(m["test"], []).append(m)
    if not by_test:
        reason = {-signal.SIGXCPU: "CPU limit", -signal.SIGKILL: "killed", -signal.SIGXFSZ: "output limit",
                  -signal.SIGSEGV: "crashed"}.get(rc or 0, f"exit code {rc}")
        tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
        return SandboxResult(total=total, error=f"no result from the harness ({reason}) {' '.join(tail)}".strip())
    passed, failures = 0, []
    for i, program in enumerate(programs):
        reports = by_test.get(i, [])
        if len(reports) != 1:
            failures.append(f"{program.original[:120]} -> {len(reports)} reports (expected 1)")
            continue
        try:
            outcome = probes.ChildReport.model_validate({"records": reports[0].get("records", []),
                                                         "error": reports[0].get("error")})
        except ValueError:
            failures.append(f"{program.original[:120]} -> malformed report")
            continue
        why = probes.verdict(program, outcome)
        if why is None:
            passed += 1
        else:
            failures.append(why[:300])
    return SandboxResult(passed=passed, total=total, failures=failures)
