"""A real vLLM (CPU build) serving the tiny local Llama, once per test session.

Needs `bash scripts/setup_vllm.sh` and QUANTROUTE_VLLM_PYTHON=.venvs/vllm/bin/python (CI's .ci/run does
both); without them every test here is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from quantroute.ports import free_port
from tests.conftest import wait_until

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = float(os.environ.get("QUANTROUTE_VLLM_START_TIMEOUT_S", "240"))  # longer on a busy machine
# The deployment id comes first: vLLM names the first --served-model-name in every response's `model`
# field and in its metrics' model_name label, whichever alias the client asked for.
DEPLOYMENT = "tiny-llama-bf16"
MODEL = "tiny-llama"


@dataclass(frozen=True)
class VllmServer:
    url: str  # base URL, no /v1
    model_dir: Path
    deployment: str
    model: str
    log: Path



def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _stop(proc: subprocess.Popen) -> None:
    """vLLM forks an engine core and a worker: signal the whole process group, then make sure."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def start_vllm(log_dir: Path, deployment: str = DEPLOYMENT, model: str = MODEL) -> Iterator[VllmServer]:
    """One vLLM server of the tiny model answering to `deployment` (first, so responses name it) and `model`."""
    python = os.environ.get("QUANTROUTE_VLLM_PYTHON")
    if not python:
        pytest.skip("QUANTROUTE_VLLM_PYTHON not set: run `bash scripts/setup_vllm.sh` and export "
                    "QUANTROUTE_VLLM_PYTHON=$PWD/.venvs/vllm/bin/python")
    model_dir = Path(os.environ.get("QUANTROUTE_VLLM_MODEL_DIR", REPO / ".cache" / "tiny-llama"))
    if not (model_dir / "config.json").is_file():
        pytest.skip(f"{model_dir}: no tiny model; run `bash scripts/setup_vllm.sh`")
    port = free_port()
    log = log_dir / "server.log"
    env = os.environ | {
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache; the default wants far more than a test needs
        # Pin the worker's OpenMP thread to core 0 so the API server keeps a core: otherwise /health and
        # /metrics stall for seconds under load on a 2-core machine.
        "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "0"),
    }
    cmd = [python, str(REPO / "scripts" / "vllm_cli.py"), "serve", str(model_dir),
           "--served-model-name", deployment, model, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "512", "--max-num-seqs", "2", "--disable-uvicorn-access-log",
           # No torch.compile warm-up, as the launcher's fleets (RealFleet.enforce_eager): on this 2-core kind of
           # machine a cold start took 65 s with it and 29 s without, and the suite starts this model twice.
           "--enforce-eager"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode} before /health answered:\n{_tail(log)}")
            return httpx.get(f"{url}/health", timeout=2).status_code == 200

        wait_until(healthy, what=lambda: f"vLLM to answer /health:\n{_tail(log)}", timeout=START_TIMEOUT_S,
                   interval=0.5, ignore=(httpx.HTTPError,))
        yield VllmServer(url=url, model_dir=model_dir, deployment=deployment, model=model, log=log)
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory) -> Iterator[VllmServer]:
    with start_vllm(tmp_path_factory.mktemp("vllm")) as server:
        yield server
