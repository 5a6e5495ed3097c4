"""Hostile code answers against the eval sandbox. Every case runs twice: with both layers, and with the OS
boundary alone (`audit_hook=False`), so neither layer is trusted to cover for the other. Each answer first tries
to switch the in-process audit hook off through a frame walk (the escape that worked on the old sandbox, where
the answer ran in the harness's interpreter with a `ready` flag in reach)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from quantroute.evals import sandbox
from tests.conftest import wait_until

LAYERS = [pytest.param(True, id="bwrap+hook"), pytest.param(False, id="bwrap-only")]
TESTS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]

# Walks from a traceback's frame up to the harness and flips every hook flag it finds (old harness: `ready`).
ESCAPE = '''
import sys
def _escape():
    try:
        raise RuntimeError("x")
    except RuntimeError as e:
        tb = e.__traceback__
    try:
        f = tb.tb_frame
    except BaseException:
        f = sys._getframe()
    while f is not None:
        ready = f.f_locals.get("ready")
        if isinstance(ready, list) and ready == [True]:
            ready[0] = False
        if isinstance(f.f_locals.get("cfg"), dict):
            return f.f_locals
        f = f.f_back
    return None
HARNESS_LOCALS = _escape()
'''


def run(answer: str, hook: bool, timeout_s: float = 5.0) -> sandbox.SandboxResult:
    return sandbox.run_tests(ESCAPE + answer, entry_point="add", tests=TESTS, timeout_s=timeout_s, audit_hook=hook)


def detail(r: sandbox.SandboxResult) -> str:
    return f"{r.error} {r.failures}"


def processes_with(token: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


def wait_gone(token: str, within_s: float = 5.0) -> list[int]:
    wait_until(lambda: not processes_with(token), what=lambda: f"the answer's processes to exit (left: "
               f"{processes_with(token)})", timeout=within_s, interval=0.1)
    return processes_with(token)


@pytest.mark.parametrize("hook", LAYERS)
def test_a_frame_walk_cannot_rewrite_the_tests_or_the_results(hook):
    r = run('''
if HARNESS_LOCALS is not None:
    HARNESS_LOCALS["cfg"]["tests"][:] = ["pass"] * len(HARNESS_LOCALS["cfg"]["tests"])
    for name in ("results", "records"):
        if isinstance(HARNESS_LOCALS.get(name), dict):
            HARNESS_LOCALS[name]["passed"] = 2
def add(a, b):
    return -7
''', hook)
    assert not r.ok and r.passed == 0, detail(r)


@pytest.mark.parametrize("hook", LAYERS)
def test_equality_faked_by_the_answer_does_not_pass(hook):
    r = run('''
class Anything:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
def add(a, b):
    return Anything()
''', hook)
    assert not r.ok and r.passed == 0, detail(r)
    assert "Anything object" in detail(r)


@pytest.mark.parametrize("hook", LAYERS)
def test_an_int_subclass_is_not_a_plain_int(hook):
    r = run('''
class Five(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def add(a, b):
    return Five(a + b + 1)
''', hook)
    assert r.passed == 0, detail(r)


@pytest.mark.parametrize("hook", LAYERS)
def test_writes_through_a_directory_fd_do_not_land_on_the_host(hook):
    name = f"qr-dirfd-escape-{secrets.token_hex(6)}"
    r = run(f'''
import os
def add(a, b):
    fd = os.open("/tmp", os.O_RDONLY)
    out = os.open({name!r}, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, b"escaped")
    return a + b
''', hook)
    assert not Path("/tmp", name).exists()
    Path("/tmp", name).unlink(missing_ok=True)
    if hook:
        assert "not allowed" in detail(r), detail(r)


READ_SECRETS = """
import os
def add(a, b):
    found, paths = [], [CREDS, "/proc/%d/environ" % os.getppid(), "/proc/1/environ"]
    try:
        paths += ["/proc/%s/environ" % p for p in os.listdir("/proc") if p.isdigit()]
    except BaseException:
        pass
    for path in paths:
        try:
            text = open(path, "rb").read().decode("latin-1")
        except BaseException as e:
            found.append(type(e).__name__)
            continue
        found += [part for part in text.split("\\0") if "qr-secret" in part]
    raise ValueError("saw " + " ".join(found))
"""


@pytest.mark.parametrize("hook", LAYERS)
def test_the_graders_environment_and_files_are_not_readable(hook, tmp_path):
    # The grader runs as its own process with a secret in its environment, as the dashboard does with the
    # admin token and DB URL; the answer looks for it in its parent's environ and in a file of the host.
    secret = f"qr-secret-{secrets.token_hex(8)}"
    (tmp_path / "creds").write_text(secret)
    answer = ESCAPE + READ_SECRETS.replace("CREDS", repr(str(tmp_path / "creds")))
    script = ("import json, sys; from quantroute.evals import sandbox; "
              "r = sandbox.run_tests(sys.stdin.read(), entry_point='add', tests=['assert add(2, 3) == 5'], "
              f"audit_hook={hook}); print(json.dumps([r.error, r.failures]))")
    env = {**os.environ, "QUANTROUTE_ADMIN_TOKEN": secret}
    out = subprocess.run([sys.executable, "-c", script], input=answer, env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "saw" in out, out  # the answer ran and reported what it could read
    assert secret not in out


@pytest.mark.parametrize("hook", LAYERS)
def test_a_setsid_child_does_not_survive_the_run(hook):
    token = str(10_000 + secrets.randbelow(80_000))
    r = run(f'''
import os
if os.fork() == 0:
    os.setsid()
    os.execv("/usr/bin/sleep", ["sleep", "{token}"])
def add(a, b):
    return a + b
''', hook)
    assert wait_gone(f"sleep\0{token}") == [], "a process of the answer outlived the sandbox"
    if hook:
        assert "os.fork" in detail(r), detail(r)


@pytest.mark.parametrize("hook", LAYERS)
def test_no_network_even_to_loopback(hook):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        r = run(f'''
import socket
def add(a, b):
    socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"leak")
    return a + b
''', hook)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    assert not r.ok, detail(r)


@pytest.mark.parametrize("hook", LAYERS)
def test_a_fork_bomb_is_capped_and_killed(hook):
    token = str(10_000 + secrets.randbelow(80_000))
    r = run(f'''
import os
forked = 0
try:
    while forked < 200:
        if os.fork() == 0:
            os.execv("/usr/bin/sleep", ["sleep", "{token}"])
        forked += 1
except BaseException as e:
    raise RuntimeError("forked %d then %s" % (forked, type(e).__name__))
def add(a, b):
    return a + b
''', hook, timeout_s=3)
    assert wait_gone(f"sleep\0{token}") == []
    assert not r.ok
    assert "forked" in detail(r), detail(r)
    forked = int(detail(r).split("forked ")[1].split()[0])
    assert forked < sandbox.PROCESS_LIMIT


@pytest.mark.parametrize("hook", LAYERS)
def test_a_memory_bomb_hits_the_limit_even_after_trying_to_raise_it(hook):
    r = run('''
def add(a, b):
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        raised = "raised"
    except BaseException as e:
        raised = type(e).__name__
    try:
        block = bytearray(1536 << 20)
    except MemoryError:
        raise MemoryError("limit held; raising it: " + raised)
    return len(block)
''', hook)
    assert not r.ok and "limit held" in detail(r), detail(r)
    assert "raising it: raised" not in detail(r)


def test_the_sandbox_runs_without_a_network_process_view_or_environment():
    # The same facts a hostile answer would probe, read by an honest one and compared here.
    r = sandbox.run_tests('''
import os
def add(a, b):
    return a + b
def facts():
    return [os.getuid() != 0, sorted(set(os.environ) - {"LC_CTYPE", "PWD"}), os.path.exists("/etc/passwd"),
            os.path.exists("/work"), len([p for p in os.listdir("/proc") if p.isdigit()]) <= 3,
            os.listdir("/sys/class/net") if os.path.exists("/sys/class/net") else []]
''', entry_point="add", tests=["assert facts() == [True, [], False, False, True, []]"], audit_hook=False)
    assert r.ok, detail(r)


def test_an_honest_answer_still_passes_with_both_layers():
    r = sandbox.run_tests('''
import collections, dataclasses, json, re
@dataclasses.dataclass
class P:
    x: int
def add(a, b):
    return P(a).x + b
''', entry_point="add", tests=TESTS)
    assert r.ok, detail(r)
