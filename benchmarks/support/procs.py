"""Child processes of the benchmarks: started with their output in a log file, and waited for until they
listen on their port."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def wait_port(port: int, timeout: float = 180, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def start(cmd: list[str], env=None, log: Path | None = None, cwd: Path = REPO) -> subprocess.Popen:
    """A child process; its output goes to `log` (a file: a full pipe would stall it) or nowhere."""
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out,
                                stderr=subprocess.STDOUT)
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]  # opened above for the router's output
