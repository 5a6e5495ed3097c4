"""The dashboard as a real Streamlit server on a free loopback port, for the browser tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from quantroute.ports import free_port
from tests.dashboard.conftest import APP, REPO
from tests.support.waiting import wait_until


@contextmanager
def streamlit_server(log_dir: Path) -> Iterator[str]:
    """Run the dashboard until the block ends; yields its URL once /_stcore/health answers."""
    port = free_port()
    log_path = log_dir / "dashboard.log"
    log = log_path.open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", APP, "--server.headless", "true",
                             "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            env=os.environ.copy(), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            assert proc.poll() is None, log_path.read_text()
            return httpx.get(url + "/_stcore/health", timeout=2).status_code == 200

        wait_until(up, what="the dashboard to answer /_stcore/health", timeout=60, interval=0.3,
                   ignore=(httpx.HTTPError,))
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
