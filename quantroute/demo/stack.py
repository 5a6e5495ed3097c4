"""A running demo stack: where its files, database, routers, dashboard and controller are, and its processes."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stack:
    dir: Path
    db_url: str
    router_url: str  # the first replica (evals and seeds go through it)
    dashboard_url: str | None
    admin_token: str
    logins: dict[str, tuple[str, str]]  # name -> (role, password)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    router_urls: list[str] = field(default_factory=list)  # every replica
    metrics_url: str | None = None  # the rollout controller's /metrics
