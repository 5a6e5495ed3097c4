"""wrk, the load generator of the router benchmarks: one script per run in a session mode, and its figures.

Session modes: `none` (no x-session-id), `fixed` (one id for the whole run: after the first request every pin
is a cache hit) and `new` (a fresh random id per request: every request is a first turn)."""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path

WRK = shutil.which("wrk") or "/usr/bin/wrk"
SESSION_MODES = ("none", "fixed", "new")
LUA_HEAD = """
wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
"""
LUA_FIXED = 'wrk.headers["x-session-id"] = "%s"\n'
# A fresh session per request, its id random as real clients' ids are (UUIDs): consecutive ids would land next to
# each other in the pin table's and the request log's indexes, a kinder write pattern than production's. The tag
# is new per wrk run and the thread number keeps wrk threads apart.
LUA_NEW = """
local threads = 0
setup = function(thread) threads = threads + 1; thread:set("tid", threads) end
local counter = 0
request = function()
  counter = counter + 1
  wrk.headers["x-session-id"] = string.format("%%08x%%08x-%s-%%d-%%d", math.random(0, 0x7fffffff),
    math.random(0, 0x7fffffff), tid, counter)
  return wrk.format()
end
"""
LUA_DONE = """
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %d %d %d %d %d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write, summary.errors.timeout))
end
"""


def lua_script(tmp: Path, body: bytes, mode: str, *, authorization: str | None = None) -> Path:
    """A wrk script for one run: a new tag each time, so no run reuses another run's sessions. `authorization`:
    an Authorization header every request sends (a client API key)."""
    tag = f"bench-{uuid.uuid4().hex[:10]}"
    text = LUA_HEAD % body.decode()
    if authorization is not None:
        text += f'wrk.headers["Authorization"] = "{authorization}"\n'
    if mode == "fixed":
        text += LUA_FIXED % tag
    elif mode == "new":
        text += LUA_NEW % tag
    path = tmp / f"{tag}.lua"
    path.write_text(text + LUA_DONE)
    return path


def run_wrk(url: str, lua: Path, conns: int, seconds: float, threads: int = 1) -> dict:
    out = subprocess.run([WRK, f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "-s", str(lua), url],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", out)
    if not m:
        raise RuntimeError(out)
    n, dur, p50, p99, bad_status, sock_err, timeouts = map(int, m.groups())
    return {"requests": n, "rps": n / (dur / 1e6), "p50_ms": p50 / 1000, "p99_ms": p99 / 1000,
            "errors": bad_status + sock_err, "timeouts": timeouts}
