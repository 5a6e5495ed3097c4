"""A real vLLM (CPU build) serving the tiny local Llama, once per test session.

Needs `bash scripts/setup_vllm.sh` and QUANTROUTE_VLLM_PYTHON=.venvs/vllm/bin/python (CI's .ci/run does
both); without them every test here is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from quantroute.launcher.spec import RealFleet, RealNode
from quantroute.launcher.vllm import running_fleet

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


@contextlib.contextmanager
def start_vllm(log_dir: Path, deployment: str = DEPLOYMENT, model: str = MODEL) -> Iterator[VllmServer]:
    """One vLLM server of the tiny model answering to `deployment` (first, so responses name it) and `model`,
    started, called ready (after its first generation) and stopped by the product's launcher: the same command
    line `quantroute fleet up` runs (`--enforce-eager`, one KV-cache GiB, the worker on the first core unless
    VLLM_CPU_OMP_THREADS_BIND names others), with 2 sequences at a time so requests queue."""
    python = os.environ.get("QUANTROUTE_VLLM_PYTHON")
    if not python:
        pytest.skip("QUANTROUTE_VLLM_PYTHON not set: run `bash scripts/setup_vllm.sh` and export "
                    "QUANTROUTE_VLLM_PYTHON=$PWD/.venvs/vllm/bin/python")
    model_dir = Path(os.environ.get("QUANTROUTE_VLLM_MODEL_DIR", REPO / ".cache" / "tiny-llama"))
    if not (model_dir / "config.json").is_file():
        pytest.skip(f"{model_dir}: no tiny model; run `bash scripts/setup_vllm.sh`")
    node = RealNode(id=deployment, deployment=deployment, model_dir=model_dir.name, max_num_seqs=2,
                    omp_threads_bind=os.environ.get("VLLM_CPU_OMP_THREADS_BIND") or None)
    fleet = RealFleet(model=model, base_dir=str(model_dir.parent), max_model_len=512, kv_cache_gb=1, nodes=[node])
    with running_fleet(fleet, python=Path(python), log_dir=log_dir, timeout_s=START_TIMEOUT_S) as (server,):
        yield VllmServer(url=server.url, model_dir=server.model_dir, deployment=deployment, model=model,
                         log=server.log)


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory) -> Iterator[VllmServer]:
    with start_vllm(tmp_path_factory.mktemp("vllm")) as server:
        yield server
