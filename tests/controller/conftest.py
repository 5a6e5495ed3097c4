"""Controller tests run `quantroute controller` as real processes (the same command production runs) next to
the router and the simulated fleet, and read what they did from the database and their logs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from quantroute.db import controller as heartbeat
from quantroute.db.engine import session as db_session

# the live rollout's fixtures, shared with tests/rollout (`name as name`: imported to be found here, not used)
from tests.rollout.conftest import db_engine as db_engine
from tests.rollout.conftest import live as live
from tests.rollout.conftest import sim as sim
from tests.rollout.conftest import store as store

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def spawn_controller(db_url: str, policies: Path, log: Path, *extra: str, interval: float = 0.3) -> subprocess.Popen:
    argv = [sys.executable, "-m", "quantroute.cli.main", "controller", "--db", db_url, "--policies", str(policies),
            "--interval", str(interval), *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(argv, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def role_of(engine, name: str) -> str | None:
    with db_session(engine) as s:
        row = s.get(heartbeat.ControllerHeartbeat, name)
        return row.role if row else None


def keep_log(src: Path, name: str) -> Path:
    """Copy a controller's log into tests/artifacts/ (the transcripts quoted in reports)."""
    ARTIFACTS.mkdir(exist_ok=True)
    dest = ARTIFACTS / name
    dest.write_text(src.read_text())
    return dest
